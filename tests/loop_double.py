"""A test double of slime's ``generate_rollout_async``, written from ../shared/spec/slime_integration.md.

It keeps slime's own state (``remaining_batch_size``, ``data``, ``all_data``, the drop counters),
applies slime's drop rule to whatever the filter returns, hands back several finished groups in
one batch when the completion script says so, aborts what is still pending at the end, and calls
the all-samples hook and the log function like slime does. The project's filter reads ``remaining``
through a :class:`ManualLoopState` that the double updates before every filter call.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from shopsim_metrics.loop_state import ManualLoopState
from shopsimrl.slime_bridge import DynamicFilterOutput

GroupFactory = Callable[[int], list]  # group id -> finished group (list[Sample] or list[list[Sample]])
NextBatch = Callable[[list[int]], list[int]]  # pending ids (submission order) -> ids finishing now


def fifo_batches(*sizes: int) -> NextBatch:
    """Completion script: groups finish in submission order, ``sizes`` at a time (the last size repeats)."""
    calls = {"n": 0}

    def next_batch(pending: list[int]) -> list[int]:
        size = sizes[min(calls["n"], len(sizes) - 1)]
        calls["n"] += 1
        return pending[:size]

    return next_batch


def slime_should_drop(output: Any, *, remaining: int, rollout_batch_size: int) -> bool:
    """slime's drop rule, as slime_integration.md states it."""
    if output.keep:
        return False
    if output.keep_when_insufficient and remaining <= rollout_batch_size:
        return False
    return True


@dataclass
class StepResult:
    """What the loop itself did in one step (the ground truth the records are checked against)."""

    rollout_id: int
    train_ids: list[int]
    all_ids: list[int]  # judged, in judgement order
    dropped: dict[int, str]  # group id -> reason
    surplus_ids: list[int]
    aborted_ids: list[int]
    submitted: int
    waves: int
    remaining_end: int
    drop_metrics: dict[str, int]
    remaining_before: list[int] = field(default_factory=list)


class SlimeLoopDouble:
    """Runs rollout steps the way slime's loop does, calling the project's hooks."""

    def __init__(self, args: Any, *, filter_fn, all_samples_fn=None, log_fn=None, loop_state: ManualLoopState | None = None):
        self.args = args
        self.filter_fn = filter_fn
        self.all_samples_fn = all_samples_fn
        self.log_fn = log_fn
        self.loop_state = loop_state or ManualLoopState(source="loop_double")
        self._next_id = 0

    def run_step(self, rollout_id: int, make_group: GroupFactory, next_batch: NextBatch) -> StepResult:
        args = self.args
        rollout_batch_size = args.rollout_batch_size
        over_sampling_batch_size = args.over_sampling_batch_size or rollout_batch_size
        remaining = 0
        pending: list[int] = []
        groups: dict[int, list] = {}
        data: list[int] = []
        all_data: list[int] = []
        dropped: dict[int, str] = {}
        surplus: list[int] = []
        drop_metrics: dict[str, int] = {}
        remaining_before: list[int] = []
        submitted = waves = 0
        self.loop_state.step = rollout_id
        while len(data) < rollout_batch_size:
            while remaining < rollout_batch_size:
                for _ in range(over_sampling_batch_size):
                    gid = self._next_id
                    self._next_id += 1
                    pending.append(gid)
                remaining += over_sampling_batch_size
                submitted += over_sampling_batch_size
                waves += 1
            batch = next_batch(list(pending))
            assert batch, "the completion script must finish at least one group per wait"
            for gid in batch:
                pending.remove(gid)
            for gid in batch:
                group = make_group(gid)
                groups[gid] = group
                all_data.append(gid)
                self.loop_state.remaining = remaining
                remaining_before.append(remaining)
                output = self.filter_fn(args, group)
                if not isinstance(output, DynamicFilterOutput):
                    output = DynamicFilterOutput(keep=output)
                if slime_should_drop(output, remaining=remaining, rollout_batch_size=rollout_batch_size):
                    if output.reason:
                        key = f"rollout/dynamic_filter/drop_{output.reason}"
                        drop_metrics[key] = drop_metrics.get(key, 0) + 1
                    dropped[gid] = output.reason
                    remaining -= 1
                    continue
                if len(data) < rollout_batch_size:
                    data.append(gid)
                else:
                    surplus.append(gid)
        aborted = list(pending)
        self.loop_state.remaining = None
        if self.all_samples_fn is not None:
            self.all_samples_fn(args, [groups[g] for g in sorted(all_data)], object())
        if self.log_fn is not None:
            flat = [s for g in sorted(data) for item in groups[g] for s in (item if isinstance(item, list) else [item])]
            self.log_fn(rollout_id, args, flat, dict(drop_metrics), 0.1)
        return StepResult(
            rollout_id=rollout_id,
            train_ids=data,
            all_ids=all_data,
            dropped=dropped,
            surplus_ids=surplus,
            aborted_ids=aborted,
            submitted=submitted,
            waves=waves,
            remaining_end=remaining,
            drop_metrics=drop_metrics,
            remaining_before=remaining_before,
        )
