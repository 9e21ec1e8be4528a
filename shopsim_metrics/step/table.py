"""The per-step table printed by ``inspect`` and ``demo``: one header per contract name, one legend.

Every column is a field of the step record under the contract's meaning; the headers are short
forms of the contract's names, the same in every table the project prints.

Example:
    >>> header_of("train_group_count"), header_of("technical_group_drop_count")
    ('train', 'tech.drop')
    >>> format_row({"rollout_id": 3, "accepted_group_count": 40, "success_rate": 0.5},
    ...            ("rollout_id", "accepted_group_count", "success_rate", "wave_count")).split()
    ['3', '40', '0.500', '-']
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

STEP_TABLE_COLUMNS: tuple[tuple[str, str, int], ...] = (  # header, contract name, width
    ("step", "rollout_id", 5),
    ("waves", "wave_count", 5),
    ("accepted", "accepted_group_count", 8),
    ("train", "train_group_count", 5),
    ("fallback", "fallback_group_count", 8),
    ("tech.drop", "technical_group_drop_count", 9),
    ("zero.drop", "zero_std_group_drop_count", 9),
    ("surplus", "surplus_group_count", 7),
    ("aborted", "aborted_group_count", 7),
    ("success", "success_rate", 7),
    ("train.succ", "train_success_rate", 10),
    ("streak", "max_consecutive_technical_failures", 6),
)
"""The columns, in order: header, the contract's name of the field, width."""

STEP_TABLE_LEGEND = (
    "accepted = groups judged by the filter (= train + tech.drop + zero.drop + surplus; drops included); "
    "train = groups entering the trainer (trained + fallback); fallback = zero-std groups let through; "
    "aborted = submitted - accepted; success = success_rate over all completed generations; "
    "streak = max_consecutive_technical_failures"
)
"""What the headers mean, printed under every table (the contract's definitions, shortened)."""

_WIDTH = {name: width for _, name, width in STEP_TABLE_COLUMNS}
_HEADER = {name: header for header, name, _ in STEP_TABLE_COLUMNS}
_RATES = ("success_rate", "train_success_rate")


def header_of(name: str) -> str:
    """The table header of a contract name."""
    return _HEADER[name]


def format_header(names: Sequence[str]) -> str:
    """The header line of a table of ``names``."""
    return " ".join(f"{_HEADER[n]:>{_WIDTH[n]}}" for n in names)


def format_row(values: Mapping[str, Any], names: Sequence[str]) -> str:
    """One table line: ``-`` for a missing value, rates with three decimals."""
    cells = []
    for name in names:
        value = values.get(name)
        if value is None:
            text = "-"
        elif name in _RATES and isinstance(value, (int, float)):
            text = f"{value:.3f}"
        else:
            text = str(value)
        cells.append(f"{text:>{_WIDTH[name]}}")
    return " ".join(cells)
