"""The pure decision: is a finished group technical, zero-std, or does it have spread?

A group is ``list[Sample]`` or, when the generate function fans one rollout out into segments,
``list[list[Sample]]``. Siblings are de-duplicated by ``rollout_id`` (falling back to ``index``, then
to the sample object itself), so the segments of one rollout count once.

A rollout is **scorable** when every segment finished normally (status ``completed``, ``truncated``
or ``pending``), no segment carries an invalid or "unscored" metadata flag, and its reward reads as
one finite number. ``metadata`` and a dict reward are read as slime keeps them, as ``dict``s: any other
value there (a list, a string, another mapping type) is ``metadata_invalid`` or ``reward_not_numeric``. Anything else (status ``failed`` / ``aborted`` / unknown, a bad reward, a sample
that cannot be read) makes the rollout unscorable and its group **technical**, with the first
failing check (group-level checks first, then each rollout in turn) named from the fixed set
``shopsim_metrics.record.contract.FAILED_CHECKS``. Only scorable rollouts carry rewards and successes
(they are the completed generations), also inside a technical group.

:func:`judge_group` never raises, whatever the samples hold: that is what lets the filter promise
slime a decision for every group.

Example:
    >>> from shopsim_metrics.simulator.samples import SimSample as S
    >>> judge_group([S(index=i, reward=float(i % 2)) for i in range(4)], n_samples=4).kind
    'spread'
    >>> j = judge_group([S(index=i, reward=1.0) for i in range(3)], n_samples=4)
    >>> (j.kind, j.failed_check, j.scorable_rollouts)
    ('technical', 'too_few_rollouts', 3)
    >>> j = judge_group([S(index=0, reward=0.0, status="failed"), S(index=1, reward=1.0)])
    >>> (j.failed_check, j.rewards)  # the failed rollout's reward is not a completed generation's
    ('status_failed', (1.0,))
    >>> broken = S(index=0, status="aborted", metadata={"shopsim_failure_cause": "ToolTimeout: search_products"})
    >>> judge_group([broken, S(index=1, reward=1.0)]).failure_cause   # what the generate function left
    'ToolTimeout: search_products'
"""

from __future__ import annotations

import math
import operator
from dataclasses import dataclass
from enum import Enum
from typing import Any, Hashable, Sequence

from shopsim_metrics.judging.failure_cause import read_failure_cause
from shopsim_metrics.judging.tool_calls import UNMARKED, read_failure_kind
from shopsim_metrics.judging.group_samples import leaves
from shopsim_metrics.general.plain_values import as_float

SPREAD = "spread"
ZERO_STD = "zero_std"
TECHNICAL = "technical"
ZERO_STD_TOLERANCE = 1e-6  # max - min <= this is zero-std (design document §2)
SEGMENT_TOLERANCE = 1e-6  # segments of one rollout must agree within this

NORMAL_STATUSES = ("completed", "truncated", "pending")
"""slime's statuses of a normal finish (``pending``: custom generate functions that never set it)."""
_STATUS_CHECKS = {**dict.fromkeys(NORMAL_STATUSES), "failed": "status_failed", "aborted": "status_aborted"}


@dataclass(slots=True)
class GroupJudgement:
    """What the filter concluded about one group, and what the ledger needs of it.

    ``rewards`` holds the reward of every scorable unique rollout (reading order); the ledger's reward
    figures are computed from it (:meth:`reward_figures`), so they never overflow to inf.

    Example:
        >>> j = GroupJudgement("spread", None, 0, 3, (0.0, 1.0, 0.5), 1)
        >>> j.reward_figures(), j.scorable_rollouts
        ((0.0, 1.0, 1.5, 0.5), 3)
    """

    kind: str  # SPREAD, ZERO_STD or TECHNICAL
    failed_check: str | None  # from contract.FAILED_CHECKS when TECHNICAL
    group_index: int | None
    unique_rollouts: int
    rewards: tuple[float, ...] = ()
    success_count: int = 0
    failure_cause: str | None = None  # technical: the first failing rollout's cause (judging.failure_cause), if left
    failure_kind: str | None = None  # technical: who failed it (failure_kind_of), None for a check not the generate function's

    def reward_figures(self) -> tuple[float | None, float | None, float, float | None]:
        """``(min, max, sum, mean)`` of ``rewards`` (``(None, None, 0.0, None)`` without rewards); the sum is
        inf when huge rewards overflow it, the mean never is."""
        rewards = self.rewards
        if not rewards:
            return None, None, 0.0, None
        return min(rewards), max(rewards), float(sum(rewards)), finite_mean(rewards)

    @property
    def scorable_rollouts(self) -> int:
        return len(self.rewards)


def judge_group(
    group: Sequence[Any],
    *,
    n_samples: int | None = None,
    reward_key: str | None = None,
    success_threshold: float = 1.0,
    success_key: str = "shopsim_success",
    unscored_key: str = "shopsim_unscored",
) -> GroupJudgement:
    """Judge one finished group, one rollout and one segment at a time (the rules of the module
    docstring); never raises."""
    try:
        rollouts = segments_by_rollout(group)
    except Exception:  # noqa: BLE001 - not a list of samples at all
        return GroupJudgement(TECHNICAL, "sample_unreadable", None, 0)

    failed: str | None = None
    if not rollouts:
        failed = "empty_group"
    elif n_samples is not None and len(rollouts) < n_samples:
        failed = "too_few_rollouts"

    rewards: list[float] = []
    successes = 0
    cause: str | None = None
    kind: str | None = None
    for segments in rollouts.values():
        try:
            reward, success, check = read_rollout(segments, reward_key, success_threshold, success_key, unscored_key)
        except Exception:  # noqa: BLE001 - an attribute or a metadata mapping that raises on read
            reward, success, check = None, False, "sample_unreadable"
        if check is not None:
            failed = failed or check
            cause = cause or next(filter(None, map(read_failure_cause, segments)), None)
            kind = kind or failure_kind_of(segments)
            continue
        rewards.append(reward)
        successes += success

    if failed is not None:
        verdict = TECHNICAL
    elif max(rewards) - min(rewards) > ZERO_STD_TOLERANCE:
        verdict = SPREAD
    else:
        verdict = ZERO_STD
    first = next(iter(rollouts.values()))[0] if rollouts else None
    return GroupJudgement(verdict, failed, group_index_of(first), len(rollouts), tuple(rewards), successes, cause,
                          kind if failed is not None else None)


def failure_kind_of(segments: Sequence[Any]) -> str | None:
    """Who failed an unscorable rollout, as its generate function said (``judging.tool_calls``: a kind, or a cause,
    which is the environment's); None when it said nothing (an agent run's failure with neither is ``unmarked``
    where the run is known to be one: :func:`unmarked_kind`).

    Example:
        >>> from shopsim_metrics.simulator.samples import SimSample as S
        >>> failure_kind_of([S(status="aborted", metadata={"shopsim_failure_kind": "model"})])
        'model'
        >>> failure_kind_of([S(status="aborted")]) is None
        True
    """
    for segment in segments:
        try:
            kind = read_failure_kind(getattr(segment, "metadata", None))
        except Exception:  # noqa: BLE001 - a metadata property that raises says nothing
            kind = None
        if kind is not None:
            return kind
    return None


def unmarked_kind(judgement: GroupJudgement) -> str | None:
    """The failure kind of a technical group of an agent run: the one its generate function left, else
    ``"unmarked"`` when the generate function failed it (status aborted or failed) and said nothing, else None.

    Example:
        >>> unmarked_kind(GroupJudgement("technical", "status_aborted", 0, 8)), unmarked_kind(
        ...     GroupJudgement("technical", "reward_missing", 0, 8))
        ('unmarked', None)
    """
    if judgement.kind != TECHNICAL:
        return None
    if judgement.failure_kind is not None:
        return judgement.failure_kind
    return UNMARKED if judgement.failed_check in ("status_aborted", "status_failed") else None


def segments_by_rollout(group: Sequence[Any]) -> dict[Hashable, list[Any]]:
    """The group's samples keyed by rollout (a flat group, or one list of segments per rollout).

    Example:
        >>> from shopsim_metrics.simulator.samples import SimSample as S
        >>> [len(v) for v in segments_by_rollout([S(rollout_id=7), S(rollout_id=7), S(index=2)]).values()]
        [2, 1]
    """
    rollouts: dict[Hashable, list[Any]] = {}
    for sample in leaves(group):
        rollouts.setdefault(rollout_key(sample), []).append(sample)
    return rollouts


def rollout_key(sample: Any) -> Hashable:
    """``rollout_id``, else ``index``, else the sample object itself; an attribute that is missing,
    raises on read or cannot be hashed counts as absent (older slime ``Sample`` classes).

    Example:
        >>> from shopsim_metrics.simulator.samples import SimSample as S
        >>> rollout_key(S(index=3)), rollout_key(S(index=3, rollout_id=9))
        (3, 9)
    """
    for name in ("rollout_id", "index"):
        try:
            key = getattr(sample, name, None)
            if key is not None:
                hash(key)
                return key
        except Exception:  # noqa: BLE001 - a property that raises, an unhashable id
            continue
    return ("sample", id(sample))


def group_index_of(sample: Any) -> int | None:
    """The group's index for the ledger: ``group_index``, else ``index``, as a plain int (or None).

    Example:
        >>> from shopsim_metrics.simulator.samples import SimSample as S
        >>> group_index_of(S(index=5)), group_index_of(S(index=5, group_index=2)), group_index_of(None)
        (5, 2, None)
    """
    for name in ("group_index", "index"):
        try:
            value = getattr(sample, name, None)
            if value is not None:
                return operator.index(value)  # int, numpy integers; floats and str are rejected
        except Exception:  # noqa: BLE001
            continue
    return None


def read_rollout(
    segments: Sequence[Any],
    reward_key: str | None = None,
    success_threshold: float = 1.0,
    success_key: str = "shopsim_success",
    unscored_key: str = "shopsim_unscored",
) -> tuple[float | None, bool, str | None]:
    """One unique rollout: ``(reward, success, None)`` when scorable, else ``(None, False, failed_check)``.

    Segments whose reward is None beside one scored value take that value; segments that differ by
    more than ``SEGMENT_TOLERANCE`` make the rollout unscorable. Success is the first segment's
    metadata flag ``success_key`` when present, else ``reward >= success_threshold``.

    Example:
        >>> from shopsim_metrics.simulator.samples import SimSample as S
        >>> read_rollout([S(reward=None), S(reward=1.0)])
        (1.0, True, None)
        >>> read_rollout([S(reward=0.2, metadata={"shopsim_success": "TRUE"})])
        (0.2, True, None)
        >>> read_rollout([S(reward=1.0, status="aborted")])
        (None, False, 'status_aborted')
    """
    reward: float | None = None
    success: bool | None = None
    for sample in segments:
        status = getattr(sample, "status", None)
        if isinstance(status, Enum):  # slime's Sample.Status; ``_value_`` is the value ``.value`` returns
            status = status._value_
        if not (isinstance(status, str) and status in NORMAL_STATUSES):
            return None, False, status_check(status)
        metadata = getattr(sample, "metadata", None)
        if metadata is not None:  # None: no flags
            if not isinstance(metadata, dict):  # slime's Sample.metadata is a dict
                return None, False, "metadata_invalid"
            if unscored_key in metadata:
                unscored = read_flag(metadata[unscored_key])
                if unscored is None:
                    return None, False, "metadata_invalid"
                if unscored:
                    return None, False, "metadata_unscored"
            if success_key in metadata:  # every segment's flag must be valid; the first one counts
                flag = read_flag(metadata[success_key])
                if flag is None:
                    return None, False, "metadata_invalid"
                if success is None:
                    success = flag
        value, check = read_reward(getattr(sample, "reward", None), reward_key)
        if check is not None:
            return None, False, check
        if value is None:
            continue
        if reward is None:
            reward = value
        elif abs(value - reward) > SEGMENT_TOLERANCE:
            return None, False, "segments_disagree"
    if reward is None:
        return None, False, "reward_missing"
    return reward, success if success is not None else reward >= success_threshold, None


def status_check(status: Any) -> str | None:
    """None for a normal finish, else the failed check: ``status_failed``, ``status_aborted`` or
    ``status_unknown`` (any other value, including None and upper-case names).

    ``status`` is slime's ``Sample.Status`` member (read through its ``.value``) or a plain string.

    Example:
        >>> [status_check(s) for s in ("truncated", "failed", "FAILED", None)]
        [None, 'status_failed', 'status_unknown', 'status_unknown']
    """
    if isinstance(status, Enum):
        status = status.value
    if not isinstance(status, str):
        return "status_unknown"
    return _STATUS_CHECKS.get(status, "status_unknown")


def read_flag(value: Any) -> bool | None:
    """A metadata flag read strictly: True/False, 0/1, or "true"/"false" in any case; else None.

    numpy / torch scalars are read through ``.item()``.

    Example:
        >>> [read_flag(v) for v in (True, 0, "False", 1.0, "yes", 2, None)]
        [True, False, False, True, None, None, None]
    """
    if isinstance(value, str):
        return {"true": True, "false": False}.get(value.lower())
    if getattr(value, "shape", None) == () and hasattr(value, "item"):
        try:
            value = value.item()
        except Exception:  # noqa: BLE001
            return None
    if isinstance(value, (bool, int, float)) and value in (0, 1):
        return bool(value)
    return None


def read_reward(raw: Any, reward_key: str | None) -> tuple[float | None, str | None]:
    """Read one sample's reward as a finite float: ``(value, None)`` or ``(None, failed_check)``.

    ``(None, None)`` means the reward is absent (None), which is fine for a segment beside a
    scored one. Python numbers, bools, numpy scalars, 0-dim tensors (through ``.item()``, torch is
    never imported), Decimal and Fraction are read; dicts are indexed by ``reward_key``.

    Example:
        >>> read_reward({"acc": 1}, "acc"), read_reward(float("nan"), None), read_reward(10**400, None)
        ((1.0, None), (None, 'reward_not_finite'), (None, 'reward_not_finite'))
    """
    if raw is None:
        return None, None
    if isinstance(raw, dict):  # slime's reward dict, indexed by --reward-key
        if reward_key is None or reward_key not in raw:
            return None, "reward_key_missing"
        raw = raw[reward_key]
        if raw is None:
            return None, None
    try:
        value = as_float(raw)
    except OverflowError:  # an int beyond the float range, e.g. 10**400
        return None, "reward_not_finite"
    except Exception:  # noqa: BLE001 - str, list, complex, a tensor whose .item() raises, ...
        return None, "reward_not_numeric"
    if not math.isfinite(value):
        return None, "reward_not_finite"
    return value, None


def finite_mean(values: Sequence[float]) -> float | None:
    """The mean of finite floats without overflow (None for no values).

    The sum is exact (``math.fsum``); only when it would overflow are the values scaled first,
    so the mean of large rewards stays finite.

    Example:
        >>> finite_mean([1e308, 1e308, 1e308]), finite_mean([0.1] * 10), finite_mean([])
        (1e+308, 0.1, None)
    """
    if not values:
        return None
    count = len(values)
    try:
        return math.fsum(values) / count
    except OverflowError:
        return math.fsum(value / count for value in values)
