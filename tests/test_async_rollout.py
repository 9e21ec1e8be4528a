"""The fully-async rollout function with the project's filter, against fake slime pieces.

The worker is slime's own ``AsyncRolloutWorker`` when ``SLIME_SRC`` names a checkout, else the plain
worker of ``fake_slime_async`` (slime's documented behaviour); the engine is scripted (latencies,
rewards, weight versions). Each step is checked against what the engine and the data source did.
"""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
from types import SimpleNamespace

import pytest
from hypothesis import given, settings, strategies as st

import fake_slime_async as fake
from shopsim_metrics.errors import TechnicalFailureLimitExceeded
from shopsim_metrics.judging.group_judgement import SPREAD, TECHNICAL, ZERO_STD
from shopsim_metrics.sinks import MemorySink
from shopsim_metrics.record import contract as C
from shopsim_metrics.fully_async.fully_async_batch import AsyncAdmission
from shopsim_metrics.fully_async.fully_async_step import DrawLog
from shopsimrl import async_rollout, slime_runtime

N = 2
SPREAD_R, ZERO_R, TECH_R = (0.0, 1.0), (0.0, 0.0), (None, None)


def args_for(**extra):
    base = dict(rollout_batch_size=2, n_samples_per_prompt=N, over_sampling_batch_size=2, global_batch_size=4,
                reward_key=None, sglang_server_concurrency=3, rollout_global_dataset=True, shopsim_wandb="off",
                shopsim_async_zero_std_drop_limit=1, shopsim_max_consecutive_failed_groups=4)
    base.update(extra)
    return SimpleNamespace(**base)


class Run:
    """Steps of the rollout function, as slime's RolloutManager calls it, with the log function after each."""

    def __init__(self, scripts, tmp_path, **extra):
        self.args = args_for(shopsim_run_dir=str(tmp_path), **extra)
        self.engine = fake.Engine(scripts, N)
        self.source = fake.DataSource(N, len(scripts))
        self.mem = MemorySink()
        # when each group was first drawn and each step began, on one clock (a counter): the worker draws on its
        # own thread, so a draw made while a step begins may be counted in either step (see drawn_before)
        self.clock = itertools.count()
        self.first_drawn: dict[int, tuple[int, int]] = {}  # group_index -> clock before and after its first draw
        self.began: dict[int, int] = {}  # rollout_id -> clock when the step began drawing (DrawLog.begin)
        self.steps: list[list] = []
        self.metrics: list[dict] = []
        self.step = None

        def hook(args, sample):
            slime_runtime.record_generated_sample(args, sample, rollout_id=self.step)
        self.engine.sample_hook = hook

    def __enter__(self):
        run, begin, get_samples = self, DrawLog.begin, DrawLog.get_samples
        self.draw_log_methods = begin, get_samples

        def timed_begin(log, rollout_id):
            begin(log, rollout_id)
            run.began.setdefault(rollout_id, next(run.clock))

        def timed_get_samples(log, num_samples):
            before = next(run.clock)
            groups = get_samples(log, num_samples)
            after = next(run.clock)
            for group in groups or ():
                run.first_drawn.setdefault(group[0].group_index, (before, after))
            return groups
        DrawLog.begin, DrawLog.get_samples = timed_begin, timed_get_samples
        self.before = fake.install(self.engine)
        slime_runtime.configure(self.args, sinks=[self.mem])
        return self

    def __exit__(self, *exc):
        async_rollout.stop_worker()
        DrawLog.begin, DrawLog.get_samples = self.draw_log_methods
        slime_runtime.reset_runtime()
        fake.uninstall(self.before)

    def run_step(self, rollout_id):
        self.step = rollout_id
        out = async_rollout.generate_rollout_fully_async(self.args, rollout_id, self.source)
        self.steps.append(out.samples)
        self.metrics.append(out.metrics)
        slime_runtime.log_rollout_step(rollout_id, self.args, [s for g in out.samples for s in g], out.metrics, 1.0)
        self.engine.weight_version += 1  # the trainer updates the weights after every step
        return out

    def drawn_before(self, group_index: int, rollout_id: int) -> bool | None:
        """Whether the group was first drawn before step ``rollout_id`` began (None: its draw and the
        step's beginning overlapped, so either count is right)."""
        before, after = self.first_drawn[group_index]
        began = self.began[rollout_id]
        return True if after < began else False if before > began else None


def kind_of(scripts, group):
    rewards = scripts[group[0].group_index].rewards
    return TECHNICAL if None in rewards else (ZERO_STD if len(set(rewards)) == 1 else SPREAD)


SCRIPTS = [
    fake.GroupScript(0.10, ZERO_R), fake.GroupScript(0.25, SPREAD_R), fake.GroupScript(0.05, TECH_R),
    fake.GroupScript(0.10, (1.0, 1.0)), fake.GroupScript(0.30, SPREAD_R), fake.GroupScript(0.05, ZERO_R, aborted=True),
    fake.GroupScript(0.15, SPREAD_R), fake.GroupScript(0.35, ZERO_R), fake.GroupScript(0.10, SPREAD_R),
    fake.GroupScript(0.20, ZERO_R), fake.GroupScript(0.10, ZERO_R), fake.GroupScript(0.05, SPREAD_R),
    *[fake.GroupScript(0.05 + 0.05 * (i % 3), SPREAD_R if i % 2 else ZERO_R) for i in range(40)],
]


def test_every_step_trains_its_batch_judged_and_the_records_say_what_happened(tmp_path):
    with Run(SCRIPTS, tmp_path) as run:
        assert fake.uses_real_worker() == bool(os.environ.get("SLIME_SRC"))  # slime's own worker when at hand
        for rollout_id in range(4):
            run.run_step(rollout_id)
        records = {r.rollout_id: r for r in run.mem.records}
        assert sorted(records) == [0, 1, 2, 3]
        judged_total = carried_total = 0
        for rollout_id, batch in enumerate(run.steps):
            record = records[rollout_id]
            kinds = [kind_of(SCRIPTS, group) for group in batch]
            assert len(batch) == 2 and record.train_group_count == 2
            assert TECHNICAL not in kinds  # no technical group reaches slime's batch
            assert kinds.count(ZERO_STD) == record.fallback_group_count  # zero-std in the batch only as fallback
            if record.fallback_group_count:  # fallback only once the step dropped its limit of zero-std groups
                assert record.zero_std_group_drop_count == 1
            assert record.zero_std_group_drop_count <= 1
            assert record.loop_state_source == C.LOOP_FULLY_ASYNC
            for name in C.NULL_ON_FULLY_ASYNC:
                assert getattr(record, name) is None, name
            assert all(row.waves_open is None and row.remaining_before is None for row in record.decisions)
            assert record.surplus_group_count == 0
            # the trained groups are the ledger's trained and fallback rows, in the order they filled
            taken = [row.group_index for row in record.decisions if row.outcome in ("trained", "fallback")]
            assert sorted(taken) == sorted(group[0].group_index for group in batch)
            # carried: trained groups first drawn before the step began (a draw overlapping its beginning: either)
            drawn_before = [run.drawn_before(group[0].group_index, rollout_id) for group in batch]
            surely = drawn_before.count(True)
            assert surely <= record.carried_group_count <= surely + drawn_before.count(None)
            carried_total += record.carried_group_count
            # staleness: the newest version reported minus each trained group's version
            assert record.policy_version_lag_max is not None and record.policy_version_lag_mean is not None
            drops = {C.slime_drop_metric(C.REASON_TECHNICAL): record.technical_group_drop_count,
                     C.slime_drop_metric(C.REASON_ZERO_STD): record.zero_std_group_drop_count}
            assert run.metrics[rollout_id] == drops and record.reconcile_mismatch_count == 0
            # success over every judged generation, not only the trained ones
            judged = [row.group_index for row in record.decisions]
            rewards = [r for gi in judged for r in SCRIPTS[gi].rewards if r is not None]
            assert record.success_rate == pytest.approx(sum(1 for r in rewards if r >= 1.0) / len(rewards))
            assert record.total_token_count is not None
            judged_total += len(judged)
        assert carried_total > 0  # the pool works across steps: some trained groups were drawn in an earlier one
        # every group the engine finished unaborted was judged in a step, or still waits for the next one
        finished_ok = [gi for gi in run.engine.finished if not SCRIPTS[gi].aborted]
        assert judged_total <= len(finished_ok)
        assert judged_total + async_rollout._pool.worker.output_queue.qsize() >= judged_total
        assert sum(r.aborted_group_count for r in records.values()) <= len(run.source.requeued)


def test_lags_follow_the_weight_versions(tmp_path):
    slow = [fake.GroupScript(0.05 if i % 3 else 0.6, SPREAD_R, tokens=10 if i % 3 else 100) for i in range(60)]
    with Run(slow, tmp_path) as run:
        for rollout_id in range(4):
            run.run_step(rollout_id)
        newest = None
        for record in sorted(run.mem.records, key=lambda r: r.rollout_id):
            version = {row.group_index: None for row in record.decisions}
            for group in run.steps[record.rollout_id]:
                version[group[0].group_index] = min(int(v) for s in group for v in s.weight_versions)
            judged = [run.engine.version_of[gi] for gi in version]
            newest = max([*judged, *([newest] if newest is not None else [])])
            lags = [newest - v for v in version.values() if v is not None]
            assert record.policy_version_lag_max == max(lags)
            assert record.policy_version_lag_mean == pytest.approx(sum(lags) / len(lags))
            tokens = {row.group_index: row.response_tokens for row in record.decisions}
            weighted = [(newest - v, tokens[gi]) for gi, v in version.items() if v is not None]
            assert record.policy_version_lag_token_mean == pytest.approx(
                sum(lag * n for lag, n in weighted) / sum(n for _, n in weighted))
        assert any(r.policy_version_lag_max > 0 for r in run.mem.records)  # slow groups cross a weight update


def test_technical_streak_ends_the_run_and_stops_the_worker(tmp_path):
    broken = [fake.GroupScript(0.02, TECH_R) for _ in range(30)]
    with Run(broken, tmp_path) as run:
        with pytest.raises(TechnicalFailureLimitExceeded):
            run.run_step(0)
        assert async_rollout._pool is None
        (record,) = run.mem.records
        assert record.terminated and record.technical_group_drop_count == 4 and record.train_group_count == 0


def test_zero_std_only_step_falls_back_after_the_limit(tmp_path):
    flat = [fake.GroupScript(0.02 * (1 + i % 4), ZERO_R) for i in range(30)]
    with Run(flat, tmp_path, shopsim_async_zero_std_drop_limit=3) as run:
        run.run_step(0)
        (record,) = run.mem.records
        assert record.zero_std_group_drop_count == 3 and record.fallback_group_count == 2
        assert [row.outcome for row in record.decisions] == ["dropped_zero_std"] * 3 + ["fallback"] * 2


def test_evaluation_is_refused():
    with pytest.raises(ValueError, match="eval"):
        async_rollout.generate_rollout_fully_async(args_for(), 0, None, evaluation=True)


def test_imports_without_slime():
    code = ("import sys, shopsimrl.async_rollout as m; "
            "assert not any(n == 'slime' or n.startswith('slime.') for n in sys.modules), sorted(sys.modules); "
            "print(m.generate_rollout_fully_async.__name__)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "generate_rollout_fully_async"


@settings(max_examples=200, deadline=None)
@given(kinds=st.lists(st.sampled_from([SPREAD, ZERO_STD, TECHNICAL]), max_size=40),
       target=st.integers(1, 5), limit=st.integers(0, 6))
def test_admission_invariants(kinds, target, limit):
    admission = AsyncAdmission(target=target, zero_std_drop_limit=limit)
    outcomes = []
    for kind in kinds:
        if admission.full:
            break
        outcomes.append((kind, admission.admit(kind)))
    drops = 0
    for kind, outcome in outcomes:
        if kind == TECHNICAL:
            assert outcome == "dropped_technical"
        elif kind == SPREAD:
            assert outcome == "trained"
        elif outcome == "dropped_zero_std":
            drops += 1
        else:
            assert outcome == "fallback" and drops == limit  # fallback only once the limit is spent
    assert drops <= limit
    assert sum(1 for _, o in outcomes if o in ("trained", "fallback")) <= target
    if admission.full:
        with pytest.raises(RuntimeError):
            admission.admit(SPREAD)
