"""slime's fully-async rollout with the project's filter: every finished group judged before it may train.

Wire it into ``train_async.py`` (docs §3.8)::

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
(:class:`~shopsim_metrics.fully_async.fully_async_batch.AsyncAdmission`): technical groups dropped (the technical
streak ends the run at ``shopsim_max_consecutive_failed_groups`` as on the synchronous path), zero-std
groups dropped up to ``shopsim_async_zero_std_drop_limit`` per step and let in as ``fallback`` after
that, groups with spread trained. Finished groups not taken stay queued for the next step.

The step itself (the judging, the admission, the record) is
:func:`shopsim_metrics.fully_async.fully_async_step.run_fully_async_step`, which the simulator runs too. The data
source the worker draws from is wrapped by its :class:`~shopsim_metrics.fully_async.fully_async_step.DrawLog`, which only remembers in which
step each group was drawn (``carried_group_count``) and counts the groups the worker puts back
(``aborted_group_count``); the prompt-skipping data source works unchanged behind it (asked for one
group at a time, it sizes no wave).

Importing this module needs no slime; calling the rollout function does (in miles it refuses, in one line). The step's code (the draw
log, the judged fill, the close) is in :mod:`shopsim_metrics.fully_async.fully_async_step`, with its examples.

Example:
    >>> generate_rollout_fully_async.__module__
    'shopsimrl.async_rollout'
"""

from __future__ import annotations

import atexit
import logging
import threading
from typing import Any

from shopsim_metrics.errors import TechnicalFailureLimitExceeded
from shopsim_metrics.fully_async.fully_async_step import DrawLog, first_index, run_fully_async_step
from shopsim_metrics.settings.loops import check_launch
from shopsimrl.slime_runtime import LOOP, get_runtime

logger = logging.getLogger("shopsim_metrics")

__all__ = ["generate_rollout_fully_async", "DrawLog", "first_index", "stop_worker"]

POLL_SECONDS = 0.05
"""How often a step waiting for a finished group looks at the worker's queue again (slime's own value)."""


class _Pool:
    """slime's worker and the draw log it draws through, for one data source."""

    def __init__(self, worker: Any, draws: DrawLog, data_source: Any) -> None:
        self.worker, self.draws, self.data_source = worker, draws, data_source

    def take_finished(self) -> Any | None:
        finished = self.worker.get_completed_groups(limit=1)
        return finished[0][1] if finished else None


_pool: _Pool | None = None
_pool_lock = threading.Lock()


def _worker_pool(args: Any, data_source: Any, rollout_id: int) -> _Pool:
    """The process's worker, started on first use (and again if its thread died or the data source changed).

    A new worker's draw log begins at ``rollout_id`` before the worker starts: the pool's first groups
    are drawn in that step (a later step that trains them counts them as carried)."""
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
        draws.begin(rollout_id)
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
    check_launch(LOOP, args)  # miles has no AsyncRolloutWorker: refused in one line, before a step runs
    from slime.rollout.base_types import RolloutFnTrainOutput  # type: ignore[import-not-found]
    from slime.utils.async_utils import run  # type: ignore[import-not-found]

    runtime = get_runtime(args)
    runtime.serve_one_group_at_a_time()
    pool = _worker_pool(args, data_buffer, rollout_id)
    try:
        step = run(run_fully_async_step(runtime, pool.draws, pool.take_finished, args.rollout_batch_size, rollout_id,
                                        poll_seconds=POLL_SECONDS))
    except TechnicalFailureLimitExceeded:
        stop_worker()
        raise
    return RolloutFnTrainOutput(samples=sorted(step.batch, key=first_index), metrics=step.drop_counts())
