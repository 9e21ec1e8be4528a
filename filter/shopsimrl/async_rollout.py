"""slime's fully-async rollout with the project's filter: every finished group judged before it may train.

Wire it into ``train_async.py`` (docs/training_monitoring.md §3.8)::

    --rollout-function-path             shopsimrl.async_rollout.generate_rollout_fully_async
    --custom-rollout-log-function-path  shopsimrl.slime_runtime.log_rollout_step
    --rollout-sample-hook-path          shopsimrl.slime_runtime.record_generated_sample
    --custom-config-path                examples/shopsim.yaml

(``--dynamic-sampling-filter-path`` and ``--rollout-all-samples-process-path`` are not called on this
path: this function judges and closes each step itself.)

It keeps slime's fully-async behaviour by running slime's own worker
(``slime.rollout.fully_async_rollout.AsyncRolloutWorker``) as it is: a pool of
``sglang_server_concurrency`` × engines groups in flight across steps, drawn from slime's data source
one group at a time (``get_samples(1)``), each generated and rewarded by slime's
``generate_and_rm_group``, aborted groups put back into the buffer, finished ones queued. Where slime's
function takes the first ``rollout_batch_size`` finished groups unjudged, this one takes them one at a
time and judges each with the project's filter
(:class:`~shopsim_metrics.step.async_batch.AsyncAdmission`): technical groups dropped (the technical
streak ends the run at ``shopsim_max_consecutive_failed_groups`` as on the synchronous path), zero-std
groups dropped up to ``shopsim_async_zero_std_drop_limit`` per step and let in as ``fallback`` after
that, groups with spread trained. Finished groups not taken stay queued for the next step.

The data source the worker draws from is wrapped by :class:`DrawLog`, which only remembers in which
step each group was drawn (``carried_group_count``) and counts the groups the worker puts back
(``aborted_group_count``); the prompt-skipping data source works unchanged behind it (asked for one
group at a time, it sizes no wave).

Importing this module needs no slime; calling the rollout function does.

Example:
    >>> from types import SimpleNamespace as S
    >>> log = DrawLog(S(get_samples=lambda n: [[S(index=7)]], add_samples=lambda groups: None))
    >>> log.begin(3)
    >>> group = log.get_samples(1)[0]
    >>> log.drawn_in(group)
    3
"""

from __future__ import annotations

import atexit
import logging
import threading
from collections import Counter
from typing import Any, Hashable

from shopsim_metrics.errors import TechnicalFailureLimitExceeded
from shopsim_metrics.step.async_batch import AsyncAdmission, fill_step_batch, oldest_weight_version
from shopsimrl.slime_runtime import get_runtime

logger = logging.getLogger("shopsim_metrics")

__all__ = ["generate_rollout_fully_async", "DrawLog", "stop_worker"]

POLL_SECONDS = 0.05
"""How often a step waiting for a finished group looks at the worker's queue again (slime's own value)."""


class DrawLog:
    """The data source as slime's worker sees it: it serves what the data source serves and remembers when.

    Every other attribute is the data source's own (``save``, ``load``, ``len()``, ...). Safe across
    threads: the worker draws on its thread, the step reads on slime's rollout thread.
    """

    def __init__(self, source: Any) -> None:
        self.source = source
        self._lock = threading.Lock()
        self._step: int | None = None
        self._drawn: dict[Hashable, int | None] = {}  # a drawn sample's key -> the step it was first drawn in
        self._requeued: Counter[int | None] = Counter()  # step -> groups the worker put back in it

    def begin(self, rollout_id: int) -> None:
        """Rollout step ``rollout_id`` begins: groups drawn from now on are drawn in it."""
        with self._lock:
            self._step = rollout_id

    def get_samples(self, num_samples: int) -> list:
        groups = self.source.get_samples(num_samples)
        with self._lock:
            for group in groups or ():
                for key in _sample_keys(group):
                    self._drawn.setdefault(key, self._step)  # a group put back keeps the step it first started in
        return groups

    def add_samples(self, samples: list) -> None:
        with self._lock:
            self._requeued[self._step] += len(samples)
        self.source.add_samples(samples)

    def drawn_in(self, group: Any) -> int | None:
        """The step ``group`` was first drawn in (None: not drawn through this log), forgetting it."""
        with self._lock:
            found = None
            for key in _sample_keys(group):
                if key in self._drawn:
                    step = self._drawn.pop(key)
                    found = step if found is None else found
            return found

    def take_requeued(self, rollout_id: int) -> int:
        """Groups put back in the buffer during step ``rollout_id`` (and any earlier step not yet taken)."""
        with self._lock:
            steps = [step for step in self._requeued if step is None or step <= rollout_id]
            return sum(self._requeued.pop(step) for step in steps)

    def __len__(self) -> int:
        return len(self.source)

    def __getattr__(self, name: str) -> Any:
        if name == "source":  # not yet set (copy, pickle): no recursion
            raise AttributeError(name)
        return getattr(self.source, name)


def _sample_keys(group: Any) -> list[Hashable]:
    """A key per sample of ``group`` that survives generation: ``Sample.index`` (slime's running counter), else id()."""
    keys: list[Hashable] = []
    try:
        items = list(group)
    except Exception:  # noqa: BLE001 - an unreadable group has no keys
        return keys
    for item in items:
        for sample in (item if isinstance(item, (list, tuple)) else (item,)):
            index = getattr(sample, "index", None)
            keys.append(("index", index) if isinstance(index, int) and not isinstance(index, bool) else ("id", id(sample)))
    return keys


class _Pool:
    """slime's worker and the draw log it draws through, for one data source."""

    def __init__(self, worker: Any, draws: DrawLog, data_source: Any) -> None:
        self.worker, self.draws, self.data_source = worker, draws, data_source

    def take_finished(self) -> Any | None:
        finished = self.worker.get_completed_groups(limit=1)
        return finished[0][1] if finished else None


_pool: _Pool | None = None
_pool_lock = threading.Lock()


def _worker_pool(args: Any, data_source: Any) -> _Pool:
    """The process's worker, started on first use (and again if its thread died or the data source changed)."""
    global _pool
    with _pool_lock:
        pool = _pool
        thread = getattr(pool.worker, "worker_thread", None) if pool is not None else None
        if pool is not None and pool.data_source is data_source and thread is not None and thread.is_alive():
            return pool
        if pool is not None:
            pool.worker.stop()
        from slime.rollout.fully_async_rollout import AsyncRolloutWorker  # type: ignore[import-not-found]
        from slime.utils.http_utils import get_rollout_num_engines  # type: ignore[import-not-found]

        draws = DrawLog(data_source)
        concurrency = args.sglang_server_concurrency * get_rollout_num_engines(args)
        logger.info("shopsim-metrics: starting slime's fully-async worker (%d groups in flight)", concurrency)
        worker = AsyncRolloutWorker(args, draws, concurrency=concurrency)
        worker.start()
        _pool = _Pool(worker, draws, data_source)
        return _pool


def stop_worker() -> None:
    """Stop the process's worker (at exit, at termination, in tests)."""
    global _pool
    with _pool_lock:
        pool, _pool = _pool, None
    if pool is not None:
        try:
            pool.worker.stop()
        except Exception:  # noqa: BLE001 - stopping must not raise into the caller
            logger.debug("shopsim-metrics: stopping the fully-async worker failed", exc_info=True)


atexit.register(stop_worker)


def generate_rollout_fully_async(args: Any, rollout_id: int, data_buffer: Any, evaluation: bool = False) -> Any:
    """slime's ``--rollout-function-path`` entry point: one step's batch of ``rollout_batch_size`` judged groups.

    Returns slime's ``RolloutFnTrainOutput`` with the batch sorted by sample index (slime's
    convention) and the step's drop counts under slime's ``rollout/dynamic_filter/drop_<reason>``
    keys. Raises :class:`~shopsim_metrics.errors.TechnicalFailureLimitExceeded` at the technical
    limit (after writing the terminated step and stopping the worker).
    """
    if evaluation:
        raise ValueError("the fully-async rollout does not evaluate: leave --eval-function-path at slime's default")
    from slime.rollout.base_types import RolloutFnTrainOutput  # type: ignore[import-not-found]
    from slime.utils.async_utils import run  # type: ignore[import-not-found]

    runtime = get_runtime(args)
    runtime.fully_async = True
    pool = _worker_pool(args, data_buffer)
    pool.draws.begin(rollout_id)
    try:
        step = run(fill_step_batch(pool.take_finished, _judge(runtime, pool.draws, args, rollout_id),
                                   args.rollout_batch_size, poll_seconds=POLL_SECONDS))
    except TechnicalFailureLimitExceeded:
        stop_worker()
        raise
    _close(runtime, pool.draws, rollout_id)
    return RolloutFnTrainOutput(samples=sorted(step.batch, key=first_index), metrics=step.drop_counts())


def _judge(runtime: Any, draws: DrawLog, args: Any, rollout_id: int) -> Any:
    """The step's ``decide(group)``: the project's judgement, this step's admission, the record's row."""
    target = args.rollout_batch_size
    limit = runtime.settings.async_zero_std_drop_limit
    admission = AsyncAdmission(target=target, zero_std_drop_limit=target if limit is None else limit)

    def decide(group: Any) -> str:
        drawn = draws.drawn_in(group)
        with runtime.own_time():
            return runtime.judge_decided_group(
                group, admission.admit, step=rollout_id, carried=drawn is not None and drawn < rollout_id,
                weight_version=oldest_weight_version(group))

    return decide


def _close(runtime: Any, draws: DrawLog, rollout_id: int) -> None:
    with runtime.own_time():
        try:
            runtime.close_fully_async_step(rollout_id, draws.take_requeued(rollout_id))
        except Exception:  # noqa: BLE001 - monitoring never stops training
            logger.exception("shopsim-metrics: closing fully-async step %s failed; training goes on", rollout_id)


def first_index(group: Any) -> int:
    """The index of a group's first sample that has one (0 if none): the batch's order, as slime sorts it.

    Example:
        >>> from types import SimpleNamespace as S
        >>> first_index([S(index=None), S(index=4)]), first_index([])
        (4, 0)
    """
    for item in group:
        for sample in (item if isinstance(item, (list, tuple)) else (item,)):
            index = getattr(sample, "index", None)
            if isinstance(index, int) and not isinstance(index, bool):
                return index
    return 0

