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
    ("tok/inf.grp", "tokens_per_informative_group", 11),
)
"""The columns, in order: header, the contract's name of the field, width."""

STEP_TABLE_LEGEND = (
    "accepted = groups judged by the filter (= train + tech.drop + zero.drop + surplus; drops included); "
    "train = groups entering the trainer (trained + fallback); fallback = zero-std groups let through; "
    "aborted = submitted - accepted; success = success_rate over all completed generations; "
    "streak = max_consecutive_technical_failures; tok/inf.grp = tokens_per_informative_group (every token generated, "
    "aborted included, per trained group with spread; - without the sample hook)"
)
"""What the headers mean, printed under every table (the contract's definitions, shortened)."""

_WIDTH = {name: width for _, name, width in STEP_TABLE_COLUMNS}
_HEADER = {name: header for header, name, _ in STEP_TABLE_COLUMNS}
_RATES = ("success_rate", "train_success_rate")
_WHOLE = ("tokens_per_informative_group",)  # printed rounded to a whole token


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
        elif name in _WHOLE and isinstance(value, (int, float)):
            text = f"{value:.0f}"
        else:
            text = str(value)
        cells.append(f"{text:>{_WIDTH[name]}}")
    return " ".join(cells)


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
