"""The pure decision: is a finished group technical, zero-std, or does it have spread?

A group is ``list[Sample]`` or, when the generate function fans one rollout out into segments,
``list[list[Sample]]``. Siblings are de-duplicated by ``rollout_id`` (falling back to ``index``, then
to the sample object itself), so the segments of one rollout count once.

A group is **technical** when any unique rollout is not fully scored; the first failing check (in
the order the group is read: group-level checks first, then each rollout in turn) is recorded from
the fixed set ``shopsim_metrics.contract.FAILED_CHECKS``. Status ``pending`` (custom generate
functions that never set it), ``completed`` and ``truncated`` are normal finishes. The scorable
rollouts of a technical group are still counted (they are completed generations).

Rewards may be Python numbers, bools, numpy scalars, 0-dim tensors (read through ``.item()``,
without importing torch) or dicts indexed by ``reward_key``.

Example:
    >>> from shopsim_metrics.samples import SimSample as S
    >>> judge_group([S(index=i, reward=float(i % 2)) for i in range(4)], n_samples=4).kind
    'spread'
    >>> j = judge_group([S(index=i, reward=1.0) for i in range(3)], n_samples=4)
    >>> (j.kind, j.failed_check)
    ('technical', 'too_few_rollouts')
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from bisect import bisect_left
from operator import methodcaller
from typing import Any, Sequence

SPREAD = "spread"
ZERO_STD = "zero_std"
TECHNICAL = "technical"
ZERO_STD_TOLERANCE = 1e-6  # max - min <= this is zero-std (design document §2)
SEGMENT_TOLERANCE = 1e-6  # segments of one rollout must agree within this

_BAD_STATUS = {"failed": "status_failed", "aborted": "status_aborted"}


@dataclass(slots=True)
class GroupJudgement:
    """What the filter concluded about one group, and the figures the ledger needs."""

    kind: str  # SPREAD, ZERO_STD or TECHNICAL
    failed_check: str | None  # from contract.FAILED_CHECKS when TECHNICAL
    group_index: int | None
    unique_rollouts: int
    scorable_rollouts: int
    success_count: int
    reward_sum: float
    reward_min: float | None
    reward_max: float | None

    @property
    def reward_mean(self) -> float | None:
        return self.reward_sum / self.scorable_rollouts if self.scorable_rollouts else None


def read_reward(raw: Any, reward_key: str | None) -> tuple[float | None, str | None]:
    """Read one sample's reward as a finite float: ``(value, None)`` or ``(None, failed_check)``.

    ``(None, None)`` means the reward is absent (None), which is fine for a segment beside a
    scored one.

    Example:
        >>> read_reward({"acc": 1}, "acc"), read_reward(float("nan"), None)
        ((1.0, None), (None, 'reward_not_finite'))
    """
    if raw is None:
        return None, None
    if isinstance(raw, dict):
        if reward_key is None or reward_key not in raw:
            return None, "reward_key_missing"
        raw = raw[reward_key]
        if raw is None:
            return None, None
    if type(raw) is float:  # the common case first
        value = raw
    elif isinstance(raw, (int, float)):  # int, bool, numpy float64 (a float subclass)
        value = float(raw)
    elif isinstance(raw, (str, bytes)):
        return None, "reward_not_numeric"
    else:
        value = _read_scalar_object(raw)
        if value is None:
            return None, "reward_not_numeric"
    if value - value != 0.0:  # NaN or +-inf, without a function call
        return None, "reward_not_finite"
    return value, None


def _read_scalar_object(raw: Any) -> float | None:
    """numpy scalars / 0-dim arrays / 0-dim tensors (via ``.item()``), Decimal, Fraction."""
    shape = getattr(raw, "shape", None)
    if shape is not None and tuple(shape) != ():
        return None
    item = getattr(raw, "item", None)
    try:
        value = item() if callable(item) else raw
        if isinstance(value, (str, bytes)) or isinstance(value, complex):
            return None
        return float(value)
    except (TypeError, ValueError, OverflowError):
        return None


_NORMAL_STATUS = {"completed", "truncated", "pending"}



def judge_group(
    group: Sequence[Any],
    *,
    n_samples: int | None = None,
    reward_key: str | None = None,
    success_threshold: float = 1.0,
    success_key: str = "shopsim_success",
    unscored_key: str = "shopsim_unscored",
) -> GroupJudgement:
    """Judge one finished group (see the module docstring for the rules)."""
    if reward_key is None:
        fast = judge_plain_group(group, n_samples, success_threshold, success_key, unscored_key)
        if fast is not None:
            return fast
    return _judge_any_group(group, n_samples, reward_key, success_threshold, success_key, unscored_key)


def judge_plain_group(
    group: Sequence[Any], n_samples: int | None, threshold: float, success_key: str, unscored_key: str
) -> GroupJudgement | None:
    """The common case at C speed: a flat group, float rewards, distinct rollout ids, one normal status,
    no metadata flags. Returns None whenever anything is unusual; :func:`judge_group` then decides."""
    try:
        rewards = [sample.reward for sample in group]
        total = sum(rewards)  # TypeError for None, str, dict, list ...
    except (AttributeError, TypeError):  # fanned-out segments (lists), odd samples or rewards
        return None
    size = len(rewards)
    if type(total) is not float or total - total != 0.0 or (n_samples is not None and size < n_samples):
        return None  # non-float rewards (int, numpy, tensors), NaN / inf, too few rollouts
    # the rollout's key as the general path reads it: rollout_id, else index (slime's default path
    # leaves rollout_id None); comprehensions beat map(attrgetter) here
    keys = {sample.index if sample.rollout_id is None else sample.rollout_id for sample in group}
    if len(keys) != size or None in keys:
        return None
    statuses = [sample.status for sample in group]
    first = statuses[0]
    if statuses.count(first) != size or (
        first if type(first) is str else getattr(first, "value", first)  # slime's Status enum has .value
    ) not in _NORMAL_STATUS:
        return None
    metas = [sample.metadata for sample in group]
    if any(metas) and (any(map(methodcaller("get", unscored_key), metas))
                       or any(map(methodcaller("__contains__", success_key), metas))):
        return None
    sample = group[0]
    group_index = sample.group_index
    if group_index is None:
        group_index = sample.index
    first_reward = rewards[0]
    if rewards.count(first_reward) == size:  # all equal: the common zero-std case, no sort needed
        value = float(first_reward)
        return GroupJudgement(ZERO_STD, None, group_index, size, size, size if value >= threshold else 0,
                              total, value, value)
    ordered = sorted(rewards)
    low = float(ordered[0])  # an int or bool beside floats reads as a float, as read_reward does
    high = float(ordered[-1])
    return GroupJudgement(
        SPREAD if high - low > ZERO_STD_TOLERANCE else ZERO_STD,
        None,
        group_index,
        size,
        size,
        size - bisect_left(ordered, threshold),
        total,
        low,
        high,
    )


def _judge_any_group(
    group: Sequence[Any],
    n_samples: int | None,
    reward_key: str | None,
    success_threshold: float,
    success_key: str,
    unscored_key: str,
) -> GroupJudgement:
    """Every case, one rollout at a time (fan-out, dict rewards, failures, metadata flags)."""
    failed: str | None = None
    segments_by_rollout: dict[Any, list[Any]] = {}
    group_index = None
    for item in group:
        parts = item if isinstance(item, (list, tuple)) else (item,)
        for sample in parts:
            if group_index is None:
                group_index = getattr(sample, "group_index", None)
                if group_index is None:
                    group_index = getattr(sample, "index", None)
            key = getattr(sample, "rollout_id", None)
            if key is None:
                key = getattr(sample, "index", None)
                if key is None:
                    key = ("object", id(sample))
            segments_by_rollout.setdefault(key, []).append(sample)

    unique = len(segments_by_rollout)
    if unique == 0:
        failed = "empty_group"
    elif n_samples is not None and unique < n_samples:
        failed = "too_few_rollouts"

    scorable = 0
    successes = 0
    total = 0.0
    low = math.inf
    high = -math.inf
    for segments in segments_by_rollout.values():
        value, check = _rollout_reward(segments, reward_key, unscored_key)
        if check is not None:
            failed = failed or check
        if value is None:
            continue
        scorable += 1
        total += value
        if value < low:
            low = value
        if value > high:
            high = value
        if _is_success(segments, value, success_threshold, success_key):
            successes += 1

    if failed is not None:
        kind = TECHNICAL
    elif high - low > ZERO_STD_TOLERANCE:
        kind = SPREAD
    else:
        kind = ZERO_STD
    return GroupJudgement(
        kind=kind,
        failed_check=failed,
        group_index=group_index,
        unique_rollouts=unique,
        scorable_rollouts=scorable,
        success_count=successes,
        reward_sum=total,
        reward_min=low if scorable else None,
        reward_max=high if scorable else None,
    )


def _rollout_reward(segments: list[Any], reward_key: str | None, unscored_key: str) -> tuple[float | None, str | None]:
    """The reward of one unique rollout, or the check that makes it unscorable.

    Returns ``(value, check)``: a status / metadata failure still returns the value when it is
    readable, so the rollout counts as a completed generation in ``success_rate``.
    """
    check = None
    value = None
    for sample in segments:
        status = getattr(sample, "status", None)
        status = getattr(status, "value", status)
        bad = _BAD_STATUS.get(status)
        if bad is not None and check is None:
            check = bad
        metadata = getattr(sample, "metadata", None)
        if metadata and metadata.get(unscored_key) and check is None:
            check = "metadata_unscored"
        reading, problem = read_reward(getattr(sample, "reward", None), reward_key)
        if problem is not None:
            return None, check or problem
        if reading is None:
            continue
        if value is None:
            value = reading
        elif abs(reading - value) > SEGMENT_TOLERANCE:
            return None, check or "segments_disagree"
    if value is None:
        return None, check or "reward_missing"
    return value, check


def _is_success(segments: list[Any], value: float, threshold: float, success_key: str) -> bool:
    """The environment's success flag when a segment carries it, else ``reward >= threshold``."""
    for sample in segments:
        metadata = getattr(sample, "metadata", None)
        if metadata and success_key in metadata:
            return bool(metadata[success_key])
    return value >= threshold
