"""The per-step table printed by ``inspect`` and ``demo``: one header per contract name, one legend.

Every column is a field of the step record under the contract's meaning; the headers are short
forms of the contract's names, the same in every table the project prints. The text comes from the
project's one table printer (:mod:`shopsim_metrics.tables`).

Example:
    >>> header_of("train_group_count"), header_of("technical_group_drop_count")
    ('train', 'tech.drop')
    >>> table = format_step_table([{"rollout_id": 3, "accepted_group_count": 40, "success_rate": 0.5}])
    >>> [line.split()[:4] for line in table.splitlines()]
    [['step', 'waves', 'accepted', 'train'], ['3', '-', '40', '-']]
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping

from shopsim_metrics.tables import Column, format_table

STEP_TABLE_COLUMNS: tuple[tuple[str, str, str], ...] = (  # header, contract name, format spec
    ("step", "rollout_id", ""),
    ("waves", "wave_count", ""),
    ("accepted", "accepted_group_count", ""),
    ("train", "train_group_count", ""),
    ("fallback", "fallback_group_count", ""),
    ("tech.drop", "technical_group_drop_count", ""),
    ("zero.drop", "zero_std_group_drop_count", ""),
    ("surplus", "surplus_group_count", ""),
    ("aborted", "aborted_group_count", ""),
    ("success", "success_rate", ".3f"),
    ("train.succ", "train_success_rate", ".3f"),
    ("streak", "max_consecutive_technical_failures", ""),
    ("tok/inf.grp", "tokens_per_informative_group", ".0f"),
)
"""The columns, in order: header, the contract's name of the field, format spec of its values (rates
with three decimals, tokens per informative group rounded to a whole token)."""

STEP_TABLE_NAMES: tuple[str, ...] = tuple(name for _, name, _ in STEP_TABLE_COLUMNS)
"""The contract names of the columns, in order."""

STEP_TABLE_LEGEND = (
    "accepted = groups judged by the filter (= train + tech.drop + zero.drop + surplus; drops included); "
    "train = groups entering the trainer (trained + fallback); fallback = zero-std groups let through; "
    "aborted = submitted - accepted; success = success_rate over all completed generations; "
    "streak = max_consecutive_technical_failures; tok/inf.grp = tokens_per_informative_group (every token generated, "
    "aborted included, per trained group with spread; - without the sample hook)"
)
"""What the headers mean, printed under every table (the contract's definitions, shortened)."""

NOTE_NAMES: tuple[str, ...] = ("wave_count", "carried_group_count", "skipped_prompt_count", "alerts", "terminated")
"""The record fields a step's note is made of (:func:`step_note`)."""


def step_note(values: Mapping[str, Any]) -> str:
    """What stands out in a step, from its record's :data:`NOTE_NAMES`: extra waves, groups carried over
    (fully-async), prompts skipped, the alerts raised (by level), termination.

    Example:
        >>> step_note({"wave_count": 3, "skipped_prompt_count": 5, "alerts": [{"level": "WARN"}, {"level": "WARN"}]})
        '3 waves, 5 skipped, WARN alert x2'
        >>> step_note({"wave_count": 1, "carried_group_count": 0, "alerts": [], "terminated": False})
        ''
    """
    notes = []
    if isinstance(values.get("wave_count"), int) and values["wave_count"] > 1:
        notes.append(f"{values['wave_count']} waves")
    for name, word in (("carried_group_count", "carried"), ("skipped_prompt_count", "skipped")):
        if isinstance(values.get(name), int) and values[name] > 0:
            notes.append(f"{values[name]} {word}")
    levels: dict[str, int] = {}
    for alert in values.get("alerts") or ():
        level = alert.get("level") if isinstance(alert, dict) else None
        levels[str(level or "?")] = levels.get(str(level or "?"), 0) + 1
    notes += [f"{level} alert" + (f" x{count}" if count > 1 else "") for level, count in levels.items()]
    if values.get("terminated") is True:
        notes.append("TERMINATED")
    return ", ".join(notes)


_HEADER = {name: header for header, name, _ in STEP_TABLE_COLUMNS}
_COLUMNS = tuple(Column(header, spec=spec) for header, _, spec in STEP_TABLE_COLUMNS)
_NOTE = Column("note", align="<")


def header_of(name: str) -> str:
    """The table header of a contract name."""
    return _HEADER[name]


def format_step_table(rows: Iterable[Mapping[str, Any]], notes: Iterable[str] | None = None) -> str:
    """The header line and one line per step: ``rows`` map contract names to values (a missing one
    prints ``-``); ``notes``, one per row, fill a last ``note`` column (the burst, the waves, alerts).

    Example:
        >>> line = format_step_table([{"rollout_id": 12, "wave_count": 2}], notes=["2 waves"]).splitlines()[1]
        >>> line.split()[:2], line.endswith("2 waves")
        (['12', '2'], True)
    """
    rows = list(rows)
    notes = None if notes is None else list(notes)
    if notes is not None and len(notes) != len(rows):
        raise ValueError(f"format_step_table: {len(notes)} notes for {len(rows)} rows")
    columns = _COLUMNS if notes is None else _COLUMNS + (_NOTE,)
    table = [[row.get(name) for name in STEP_TABLE_NAMES] + ([] if notes is None else [notes[i]])
             for i, row in enumerate(rows)]
    return format_table(columns, table, gap=" ")


def format_cost_headline(total_tokens: int | None, aborted_tokens: int | None, informative_groups: int,
                         steps: int) -> str:
    """A run's headline cost: every token generated per informative trained group (aborted included).

    ``total_tokens`` None: no step carried ``total_token_count`` (the sample hook was not wired).

    Example:
        >>> print(format_cost_headline(9000, 3000, 6, 3))
        tokens per informative trained group: 1,500 (every token generated, aborted groups included: 3,000 per step, 1,000 of them aborted)
        >>> print(format_cost_headline(None, None, 6, 3))
        tokens per informative trained group: - (the sample hook was not wired: no total token count)
    """
    if total_tokens is None:
        return "tokens per informative trained group: - (the sample hook was not wired: no total token count)"
    per_group = f"{total_tokens / informative_groups:,.0f}" if informative_groups else "-"
    per_step = max(steps, 1)
    return (f"tokens per informative trained group: {per_group} (every token generated, aborted groups included: "
            f"{total_tokens / per_step:,.0f} per step, {(aborted_tokens or 0) / per_step:,.0f} of them aborted)")


def format_wave_calibration(predicted: Iterable[float | None], wave_counts: Iterable[int | None]) -> str | None:
    """Adaptive waves against what they promised: the mean predicted P(another wave) of the steps whose first
    wave was sized (``predicted_second_wave_probability``) and the share of those steps that had one
    (``wave_count`` > 1); None when no step's wave was sized.

    Example:
        >>> print(format_wave_calibration([None, 0.04, 0.06, 0.05, 0.05], [1, 1, 2, 1, 1]))
        adaptive waves: P(another wave) predicted 0.050, realised 0.250 (1 of 4 steps sized)
    """
    pairs = [(p, waves) for p, waves in zip(predicted, wave_counts) if p is not None and waves is not None]
    if not pairs:
        return None
    more = sum(waves > 1 for _, waves in pairs)
    return (f"adaptive waves: P(another wave) predicted {sum(p for p, _ in pairs) / len(pairs):.3f}, realised "
            f"{more / len(pairs):.3f} ({more} of {len(pairs)} steps sized)")
