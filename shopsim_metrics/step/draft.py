"""A step's record in the making: each contributor returns its fields, one builder makes the record once.

The step recorder (:class:`~shopsim_metrics.step.recorder.StepRecorder`) opens a :class:`StepDraft` when it
records a closed step, with the closed step's part (the counts, ratios, costs, streak and ledger:
:func:`~shopsim_metrics.step.closed_step.closed_step_fields`) and the prompt tracker's, then adds the
writer's identity, slime's time and drop counters, the skip fields, the alerts and the final prompts table.
:meth:`StepDraft.finish` then builds the :class:`~shopsim_metrics.record.records.StepRecord` once from
every part; the record is frozen, so nothing edits it after the fact.

A part is some of the record's fields given by their one owner (:class:`RecordPart`; the owners and their fields
are declared in :mod:`shopsim_metrics.record.owners`): a name that is not a field, the step number (the draft's
own), a field the part's owner does not own, or a field that two parts both give is an error.
The one field that grows after the close is ``filter_seconds``: the project's own time runs on until
the log function hands the record over (:meth:`StepDraft.add_filter_seconds`).

Example:
    >>> from shopsim_metrics.record.owners import CLOSED_STEP, SLIME
    >>> draft = StepDraft(3, RecordPart(CLOSED_STEP, {"accepted_group_count": 4, "technical_group_drop_count": 1}))
    >>> draft.value("accepted_group_count"), draft.value("reward_mean")
    (4, None)
    >>> record = draft.finish(RecordPart(SLIME, {"rollout_seconds": 12.5}))
    >>> (record.rollout_id, record.accepted_group_count, record.rollout_seconds)
    (3, 4, 12.5)
    >>> RecordPart(SLIME, {"accepted_group_count": 5})
    Traceback (most recent call last):
    ...
    ValueError: step record part of slime: accepted_group_count is closed_step's field (each field has one owner: record/owners.py)
"""

from __future__ import annotations

from dataclasses import MISSING, fields
from typing import Any, Callable, Iterator, Mapping

from shopsim_metrics.record.owners import OWNED, OWNER_OF, PART_FIELDS
from shopsim_metrics.record.records import StepRecord

_DEFAULTS: dict[str, Callable[[], Any]] = {  # a fresh default per read: a list default is never shared
    f.name: f.default_factory if f.default is MISSING else (lambda value=f.default: value)  # type: ignore[misc]
    for f in fields(StepRecord) if f.name in PART_FIELDS
}


class RecordPart(Mapping[str, Any]):
    """Some of a step record's fields (name -> value), given by ``owner``: read-only, checked when made against
    the owner's fields (:data:`~shopsim_metrics.record.owners.OWNED`).

    Example:
        >>> from shopsim_metrics.record.owners import SLIME
        >>> dict(RecordPart(SLIME, {"rollout_seconds": 1.0}))
        {'rollout_seconds': 1.0}
        >>> RecordPart(SLIME, {"rollout_secs": 1.0})
        Traceback (most recent call last):
        ...
        ValueError: step record part of slime: rollout_secs is not a field of StepRecord (the step number is the draft's own)
    """

    __slots__ = ("owner", "_values")

    def __init__(self, owner: str, values: Mapping[str, Any]) -> None:
        if owner not in OWNED:
            raise ValueError(f"step record part: {owner!r} is not an owner of record fields ({', '.join(OWNED)})")
        unknown = [name for name in values if name not in PART_FIELDS]
        if unknown:
            raise ValueError(f"step record part of {owner}: {', '.join(sorted(map(str, unknown)))} is not a field of "
                             "StepRecord (the step number is the draft's own)")
        foreign = sorted(name for name in values if name not in OWNED[owner])
        if foreign:
            theirs = ", ".join(f"{name} is {OWNER_OF[name]}'s field" for name in foreign)
            raise ValueError(f"step record part of {owner}: {theirs} (each field has one owner: record/owners.py)")
        self.owner = owner
        self._values = dict(values)

    def __getitem__(self, name: str) -> Any:
        return self._values[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __repr__(self) -> str:
        return f"RecordPart({self.owner!r}, {self._values!r})"


class StepDraft:
    """A closed step not yet emitted: its number and the parts given so far; :meth:`finish` builds its record once."""

    __slots__ = ("rollout_id", "_fields", "_record")

    def __init__(self, rollout_id: int, *parts: RecordPart) -> None:
        self.rollout_id = rollout_id
        """The step's number: slime's, or the accountant's count until slime's log function renumbers it."""
        self._fields: dict[str, Any] = {}
        self._record: StepRecord | None = None
        for part in parts:
            self._merge(self._fields, part)

    @staticmethod
    def _merge(into: dict[str, Any], part: RecordPart) -> None:
        if not isinstance(part, RecordPart):
            raise TypeError(f"a step record part names its owner (RecordPart(owner, fields)); got {type(part).__name__}")
        for name, value in part.items():
            if name in into:
                raise ValueError(f"step record field {name} given by two parts ({into[name]!r} and {value!r}): "
                                 "each field has one owner")
            into[name] = value

    def value(self, name: str) -> Any:
        """The field ``name`` as given so far (its default when no part gave it)."""
        if name == "rollout_id":
            return self.rollout_id
        if name not in PART_FIELDS:
            raise KeyError(f"{name} is not a field of StepRecord")
        return self._fields[name] if name in self._fields else _DEFAULTS[name]()

    def has(self, name: str) -> bool:
        """Whether a part gave the field ``name``."""
        return name in self._fields

    def add_filter_seconds(self, seconds: float) -> None:
        """Count more of the project's own time in the step (a hook call after the close, the log function's)."""
        if self._record is not None:
            raise RuntimeError(f"step {self.rollout_id}: its record is already built")
        self._fields["filter_seconds"] = self.value("filter_seconds") + seconds

    @property
    def record(self) -> StepRecord | None:
        """The record :meth:`finish` built (None before)."""
        return self._record

    def finish(self, *parts: RecordPart) -> StepRecord:
        """Build the step's record from the draft's parts and ``parts``: once (a second call is an error)."""
        if self._record is not None:
            raise RuntimeError(f"step {self.rollout_id}: its record is already built")
        merged = dict(self._fields)
        for part in parts:
            self._merge(merged, part)
        self._record = StepRecord(rollout_id=self.rollout_id, **merged)
        return self._record

    def __repr__(self) -> str:
        return f"StepDraft(rollout_id={self.rollout_id!r}, fields={len(self._fields)}, finished={self._record is not None})"
