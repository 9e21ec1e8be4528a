"""One fully-async rollout step, as the real rollout function and the simulator both run it.

slime's fully-async worker (or the simulator's pool) keeps groups generating across steps and queues
them as they finish. A step (:func:`run_fully_async_step`):

1. tells the :class:`DrawLog` that step ``rollout_id`` begins (groups drawn from now on are drawn in it);
2. takes finished groups one at a time, in the order they finished, judging each with the
   monitor's :meth:`~shopsim_metrics.monitor.ShopsimRuntime.judge_decided_group` under the step's
   :class:`~shopsim_metrics.fully_async.fully_async_batch.AsyncAdmission`, until ``rollout_batch_size`` are in the
   batch (:func:`~shopsim_metrics.fully_async.fully_async_batch.fill_step_batch`);
3. closes the step's record with the groups put back in the buffer meanwhile (``aborted_group_count``).

:func:`shopsimrl.async_rollout.generate_rollout_fully_async` runs it over slime's own worker;
:class:`shopsim_metrics.simulator.fully_async_pool.SimulatedFullyAsyncLoop` over a pool in simulated time:
the same code decides and records in both.

Example:
    >>> from types import SimpleNamespace as S
    >>> log = DrawLog(S(get_samples=lambda n: [[S(index=7)]], add_samples=lambda groups: None))
    >>> log.begin(3)
    >>> group = log.get_samples(1)[0]
    >>> log.drawn_in(group)
    3
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections import Counter
from typing import Any, Awaitable, Callable, Hashable

from shopsim_metrics.fully_async.fully_async_batch import (AsyncAdmission, StepBatch, fill_step_batch,
                                              oldest_weight_version)
from shopsim_metrics.judging.group_samples import leaves
from shopsim_metrics.general.plain_values import is_int

logger = logging.getLogger("shopsim_metrics")

__all__ = ["DrawLog", "run_fully_async_step", "first_index"]


class DrawLog:
    """The data source as the worker sees it: it serves what the data source serves and remembers when.

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
        samples = leaves(group)
    except Exception:  # noqa: BLE001 - an unreadable group has no samples to key
        return keys
    for sample in samples:
        index = getattr(sample, "index", None)
        keys.append(("index", index) if is_int(index) else ("id", id(sample)))
    return keys


async def run_fully_async_step(
    runtime: Any,
    draws: DrawLog,
    take_finished: Callable[[], Any | None],
    rollout_batch_size: int,
    rollout_id: int,
    *,
    poll_seconds: float = 0.05,
    sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep,
) -> StepBatch:
    """One step (see the module docstring); raises TechnicalFailureLimitExceeded at the technical limit.

    ``runtime``: the process's :class:`~shopsim_metrics.monitor.ShopsimRuntime`; ``take_finished()``
    the next finished group or None (then the step sleeps ``poll_seconds``).
    """
    draws.begin(rollout_id)
    limit = runtime.settings.async_zero_std_drop_limit
    admission = AsyncAdmission(target=rollout_batch_size,
                               zero_std_drop_limit=rollout_batch_size if limit is None else limit)

    def decide(group: Any) -> str:
        drawn = draws.drawn_in(group)
        with runtime.own_time():
            return runtime.judge_decided_group(
                group, admission.admit, step=rollout_id, carried=drawn is not None and drawn < rollout_id,
                weight_version=oldest_weight_version(group))

    step = await fill_step_batch(take_finished, decide, rollout_batch_size, poll_seconds=poll_seconds, sleep=sleep)
    with runtime.own_time():
        try:
            runtime.close_fully_async_step(rollout_id, draws.take_requeued(rollout_id))
        except Exception:  # noqa: BLE001 - monitoring never stops training
            logger.exception("shopsim-metrics: closing fully-async step %s failed; training goes on", rollout_id)
    return step


def first_index(group: Any) -> int:
    """The index of a group's first sample that has one (0 if none): the batch's order, as slime sorts it.

    Example:
        >>> from types import SimpleNamespace as S
        >>> first_index([S(index=None), S(index=4)]), first_index([])
        (4, 0)
    """
    for sample in leaves(group):
        index = getattr(sample, "index", None)
        if is_int(index):
            return index
    return 0
