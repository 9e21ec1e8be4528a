"""One technical streak per run, and the runtime shared by slime's two threads.

slime calls the filter (and the all-samples hook) on its rollout thread and the log function on
another; with asynchronous training the next step's groups are judged while the last step is logged.
"""

from __future__ import annotations

import queue
import threading
from types import SimpleNamespace

import pytest

from conftest import make_args, spread, technical, zero
from shopsim_metrics.errors import TechnicalFailureLimitExceeded
from shopsim_metrics.loop.loop_state import ManualLoopState
from shopsim_metrics.sinks import MemorySink
from shopsim_metrics.sinks.base import StepSink
from shopsimrl import slime_runtime


@pytest.fixture(autouse=True)
def _fresh_runtime():
    yield
    slime_runtime.reset_runtime()


def _bad(gid: int, check: str):
    group = spread(gid)
    if check == "status_failed":
        group[0].status = "failed"
    else:
        group[0].reward = None
    return group


def test_without_accounting_the_streak_terminates_with_every_check_of_the_streak():
    args = SimpleNamespace(n_samples_per_prompt=8, shopsim_max_consecutive_failed_groups=4)  # no rollout_batch_size
    runtime = slime_runtime.configure(args, sinks=[])
    assert runtime.parts.accountant is None
    for gid, check in enumerate(["status_failed", "reward_missing", "status_failed"]):
        slime_runtime.fully_scored_group_filter(args, _bad(gid, check))
    assert runtime.parts.streak.count == 3
    with pytest.raises(TechnicalFailureLimitExceeded) as info:
        slime_runtime.fully_scored_group_filter(args, _bad(9, "reward_missing"))
    assert info.value.streak == 4
    assert info.value.failed_checks == {"reward_missing": 2, "status_failed": 2}


def test_a_scorable_group_ends_the_streak_with_or_without_accounting():
    for overrides in ({}, {"rollout_batch_size": None}):
        args = make_args(shopsim_max_consecutive_failed_groups=3, **overrides)
        runtime = slime_runtime.configure(args, sinks=[])
        for gid in range(2):
            slime_runtime.fully_scored_group_filter(args, technical(gid))
        slime_runtime.fully_scored_group_filter(args, zero(5))
        assert runtime.parts.streak.count == 0
        for gid in range(2):  # two more: still below the limit of 3
            slime_runtime.fully_scored_group_filter(args, technical(10 + gid))
        assert runtime.parts.streak.count == 2


def test_alerts_read_the_one_streak_warn_once_per_streak_error_at_the_limit():
    memory = MemorySink()
    args = make_args(shopsim_max_consecutive_failed_groups=4, shopsim_alert_warn_fraction=0.5)
    state = ManualLoopState()
    state.step, state.remaining = 0, 32
    slime_runtime.configure(args, sinks=[memory], loop_state=state)
    for gid in range(3):
        slime_runtime.fully_scored_group_filter(args, technical(gid))
    slime_runtime.fully_scored_group_filter(args, spread(3))  # the streak ends
    for gid in range(4, 7):
        slime_runtime.fully_scored_group_filter(args, technical(gid))
    assert memory.alerts == []  # the step's WARN is sent when the step is emitted, not from the filter
    with pytest.raises(TechnicalFailureLimitExceeded):
        slime_runtime.fully_scored_group_filter(args, technical(7))
    (error,) = memory.alerts  # the ERROR is the terminated step's one alert
    assert error.level == "ERROR" and error.title.endswith("at rollout step 0, terminating")
    assert "1 earlier streak(s) in this step reached 2" in error.text
    record = memory.records[-1]
    assert record.terminated and record.consecutive_technical_failures == 4
    assert record.max_consecutive_technical_failures == 4


class OwnedLock:
    """A re-entrant lock that says which thread holds it: put in place of the recorder's lock, it lets the sink
    check on every call that its caller holds it (no sleep to widen a window: the check is exact every time)."""

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self.owner: int | None = None
        self._depth = 0

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        taken = self._lock.acquire(blocking, timeout)
        if taken:
            self.owner, self._depth = threading.get_ident(), self._depth + 1
        return taken

    def release(self) -> None:
        self._depth -= 1
        if not self._depth:
            self.owner = None
        self._lock.release()

    def __enter__(self) -> "OwnedLock":
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


class GuardedSink(StepSink):
    """Records emits and alerts; counts every call made without the recorder's lock held by the calling thread
    (another thread could then be inside at once) and every time two threads were inside at once."""

    def __init__(self) -> None:
        self.records: list = []
        self.alerts: list = []
        self.lock: OwnedLock | None = None  # the recorder's, once the runtime is configured
        self.unguarded = 0
        self.overlaps = 0
        self._inside = 0
        self._count_lock = threading.Lock()

    def _enter(self) -> None:
        if self.lock is None or self.lock.owner != threading.get_ident():
            self.unguarded += 1
        with self._count_lock:
            self._inside += 1
            if self._inside > 1:
                self.overlaps += 1

    def _leave(self) -> None:
        with self._count_lock:
            self._inside -= 1

    def emit(self, record) -> None:
        self._enter()
        self.records.append(record)
        self._leave()

    def alert(self, alert) -> None:
        self._enter()
        self.alerts.append(alert)
        self._leave()


def test_the_filter_thread_and_the_log_thread_share_the_runtime_safely():
    """The next step is judged on one thread while the last one is logged on another (async training).

    Every third step skips the all-samples hook, so the filter thread itself emits that step when the
    next one starts, while the log thread emits others: the sink must never be entered twice at once,
    and every step must be emitted exactly once, in order, with its own numbers.
    """
    steps, per_step = 60, 24
    sink = GuardedSink()
    args = make_args(rollout_batch_size=4, over_sampling_batch_size=8, shopsim_max_consecutive_failed_groups=1000,
                     shopsim_alert_warn_fraction=0.002)  # WARN at a streak of 2: alerts from the filter thread
    state = ManualLoopState(source="threads")
    runtime = slime_runtime.configure(args, sinks=[sink], loop_state=state)
    runtime.recorder.lock = sink.lock = OwnedLock()  # before any hook runs: every sink call is checked
    finished: queue.Queue = queue.Queue()
    errors: list[BaseException] = []

    def rollout_thread() -> None:
        try:
            for step in range(steps):
                state.step = step
                groups = []
                for i in range(per_step):
                    gid = step * 100 + i
                    group = (technical, technical, zero, spread)[i % 4](gid)
                    state.remaining = 8 - min(i, 4)
                    slime_runtime.fully_scored_group_filter(args, group)
                    groups.append(group)
                if step % 3:
                    slime_runtime.record_all_samples(args, groups, None)
                finished.put(step)
            finished.put(None)
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            errors.append(exc)
            finished.put(None)

    def log_thread() -> None:
        try:
            while (step := finished.get()) is not None:
                slime_runtime.log_rollout_step(step, args, [], {}, 0.1)
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=rollout_thread), threading.Thread(target=log_thread)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not errors, errors
    runtime.shutdown()
    assert sink.unguarded == 0 and sink.overlaps == 0
    ids = [record.rollout_id for record in sink.records]
    assert ids == list(range(steps))  # each step exactly once, in order
    for record in sink.records:
        assert record.accepted_group_count == per_step
        assert sum(1 for row in record.decisions if row.outcome == "dropped_technical") == per_step // 2
        assert record.max_consecutive_technical_failures == 2
    # one WARN per step however many streaks of two crossed the threshold, each with its own title
    warnings = [alert for alert in sink.alerts if "piling up" in alert.title]
    assert [alert.rollout_id for alert in warnings] == list(range(steps))
    assert len({alert.title for alert in warnings}) == steps
    assert all(f"{per_step // 4} streaks" in alert.text for alert in warnings)
    # half the groups technical in every step: one advisory, once, at the first full window (its condition lasts)
    assert [(a.rollout_id, a.title) for a in sink.alerts if a not in warnings] == [
        (7, "shopsim: technical failures rising at rollout step 7")]
