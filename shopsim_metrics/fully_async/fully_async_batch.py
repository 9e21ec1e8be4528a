"""The fully-async step's batch: which finished group may enter it, and the loop that fills it.

On slime's fully-async path (``train_async.py`` with a ``--rollout-function-path`` rollout function) a
background worker keeps a pool of groups generating across steps and queues them as they finish; a
step takes finished groups until it holds ``rollout_batch_size``. slime's own function takes them
unjudged. Here every finished group is judged before it may enter the batch, one at a time, in the
order it finished (:func:`fill_step_batch`), and :class:`AsyncAdmission` decides:

- a technical group is dropped (always: the technical streak ends the run at its limit, as on the
  synchronous path, so a step never waits forever on technical groups);
- a group with spread is trained;
- a zero-std group is dropped, unless the step would starve: once the step has dropped
  ``zero_std_drop_limit`` zero-std groups, every further zero-std group of the step is let in and
  counted as ``fallback``. The bound caps what one step spends on zero-std drops at
  ``zero_std_drop_limit`` groups' generation (the synchronous path's ``keep_when_insufficient``
  plays the same part); ``0`` lets every zero-std group in (slime's unfiltered behaviour, minus the
  technical groups).

Groups still generating, or finished but not taken, stay for the next step: a step takes no group
beyond its batch, so this path has no ``surplus``.

Example:
    >>> admission = AsyncAdmission(target=2, zero_std_drop_limit=1)
    >>> [admission.admit(kind) for kind in ("zero_std", "technical", "zero_std", "spread")]
    ['dropped_zero_std', 'dropped_technical', 'fallback', 'trained']
    >>> admission.full
    True
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable

from shopsim_metrics.judging.group_judgement import SPREAD, TECHNICAL, ZERO_STD
from shopsim_metrics.judging.group_samples import leaves
from shopsim_metrics.record import contract as C

TAKEN = (C.OUTCOME_TRAINED, C.OUTCOME_FALLBACK)
"""The outcomes that put a group in the step's batch."""


@dataclass
class AsyncAdmission:
    """One step's admission rule (see the module docstring); ``admit`` once per finished group, in order."""

    target: int  # rollout_batch_size
    zero_std_drop_limit: int  # zero-std groups the step drops before it lets the next ones in as fallback
    taken: int = 0
    zero_std_drops: int = 0

    def admit(self, kind: str) -> str:
        """The outcome of a finished group of judgement kind ``kind`` (``SPREAD``, ``ZERO_STD``, ``TECHNICAL``)."""
        if self.full:
            raise RuntimeError(f"the step's batch already holds its {self.target} groups; admit nothing more")
        if kind == TECHNICAL:
            return C.OUTCOME_DROPPED_TECHNICAL
        if kind == ZERO_STD and self.zero_std_drops < self.zero_std_drop_limit:
            self.zero_std_drops += 1
            return C.OUTCOME_DROPPED_ZERO_STD
        self.taken += 1
        return C.OUTCOME_TRAINED if kind == SPREAD else C.OUTCOME_FALLBACK

    @property
    def full(self) -> bool:
        return self.taken >= self.target


@dataclass
class StepBatch:
    """What one fully-async step did: its batch (in the order it filled) and every group it judged."""

    batch: list[Any] = field(default_factory=list)
    judged: list[Any] = field(default_factory=list)
    outcomes: list[str] = field(default_factory=list)  # of ``judged``, in order

    def drop_counts(self) -> dict[str, int]:
        """Dropped groups per reason, under slime's own ``rollout/dynamic_filter/drop_<reason>`` keys."""
        reasons = {C.OUTCOME_DROPPED_TECHNICAL: C.REASON_TECHNICAL, C.OUTCOME_DROPPED_ZERO_STD: C.REASON_ZERO_STD}
        counts = {C.slime_drop_metric(reason): 0 for reason in reasons.values()}
        for outcome in self.outcomes:
            if outcome in reasons:
                counts[C.slime_drop_metric(reasons[outcome])] += 1
        return counts


async def fill_step_batch(
    take_finished: Callable[[], Any | None],
    decide: Callable[[Any], str],
    target: int,
    *,
    poll_seconds: float = 0.05,
    sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep,
) -> StepBatch:
    """Take finished groups one at a time until ``target`` of them are in the batch.

    ``take_finished()`` returns the next finished group, or None when none is waiting (then the loop
    sleeps ``poll_seconds``); ``decide(group)`` judges it and returns its outcome (it may raise, e.g.
    at the technical-failure limit: the error ends the step). Nothing beyond the batch is taken.

    Example:
        >>> groups = iter(["a", "b", "c"])
        >>> outcome = {"a": "dropped_zero_std", "b": "trained", "c": "trained"}
        >>> step = asyncio.run(fill_step_batch(lambda: next(groups, None), outcome.get, 2))
        >>> step.batch, step.outcomes
        (['b', 'c'], ['dropped_zero_std', 'trained', 'trained'])
    """
    step = StepBatch()
    while len(step.batch) < target:
        group = take_finished()
        if group is None:
            await sleep(poll_seconds)
            continue
        outcome = decide(group)
        step.judged.append(group)
        step.outcomes.append(outcome)
        if outcome in TAKEN:
            step.batch.append(group)
    return step


def oldest_weight_version(group: Any) -> int | None:
    """The oldest policy version that generated any part of ``group`` (``Sample.weight_versions``), or None.

    slime appends the engine's ``weight_version`` to each sample at every generate call; versions that
    are not whole numbers (or a group without any) give None. Never raises.

    Example:
        >>> from types import SimpleNamespace as S
        >>> oldest_weight_version([S(weight_versions=["3", "4"]), S(weight_versions=["5"])])
        3
        >>> oldest_weight_version([S(weight_versions=[]), S()]) is None
        True
    """
    oldest: int | None = None
    try:
        samples = leaves(group)
    except Exception:  # noqa: BLE001 - an unreadable group has no samples, hence no version
        return None
    for sample in samples:
        try:
            versions = list(getattr(sample, "weight_versions", None) or ())
        except Exception:  # noqa: BLE001 - unreadable: no version
            continue
        for version in versions:
            number = _whole(version)
            if number is not None and (oldest is None or number < oldest):
                oldest = number
    return oldest


def _whole(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        return int(value.strip())
    return None
