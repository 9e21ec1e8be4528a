"""The checks of a saved state's values, as the readers check a record's: a snapshot holds only what could be true.

A snapshot beside slime's checkpoint is a file: a well-formed one may still hold a count below zero, a
float or a boolean where a count is, NaN, a verdict letter no verdict has. Each piece of the monitor's
resumable state (:mod:`shopsim_metrics.run.state`) checks its saved values with these before it loads
them, and raises ``ValueError`` naming the value: the resume then leaves the snapshot aside (one warning)
and replays the records. Columns (a prompt history of a million prompts) are checked in passes that run in C.

Example:
    >>> saved_count(3, "streak count", most=8)
    3
    >>> saved_count(10**6, "streak count", most=8)
    Traceback (most recent call last):
    ...
    ValueError: streak count: 1000000 is not a count from 0 to 8
    >>> count_column([1, 2, -1], "visits")
    Traceback (most recent call last):
    ...
    ValueError: visits: holds a value that is not a count (an integer >= 0)
"""

from __future__ import annotations

import math
import operator
from typing import Any
from shopsim_metrics.general.plain_values import is_int, is_number


def is_count(value: Any) -> bool:
    """An integer >= 0 (never a boolean, a float or a string).

    >>> is_count(0), is_count(True), is_count(2.0), is_count(-1)
    (True, False, False, False)
    """
    return is_int(value) and value >= 0


def saved_count(value: Any, what: str, *, most: int | None = None) -> int:
    """``value`` when it is a count (at most ``most``), else ``ValueError`` naming ``what``."""
    if not is_count(value) or (most is not None and value > most):
        bound = "" if most is None else f" from 0 to {most}"
        raise ValueError(f"{what}: {value!r} is not a count{bound}"[:200])
    return value


def saved_counts(value: Any, what: str) -> dict[str, int]:
    """A JSON object of counts by name (``{"status_failed": 2}``), else ``ValueError`` naming ``what``.

    >>> saved_counts({"a": 2}, "checks")
    {'a': 2}
    """
    if not isinstance(value, dict):
        raise ValueError(f"{what}: not an object of counts by name")
    return {str(name): saved_count(count, f"{what}[{name!r}]") for name, count in value.items()}


def saved_number(value: Any, what: str) -> float:
    """A finite number >= 0, else ``ValueError`` naming ``what``."""
    if not is_number(value) or not math.isfinite(value) or value < 0:
        raise ValueError(f"{what}: {value!r} is not a finite number >= 0"[:200])
    return float(value)


def count_column(values: Any, what: str) -> None:
    """``ValueError`` naming ``what`` unless ``values`` is a list of counts (integers >= 0). Each check is one
    pass in C over the list (a prompt history's column holds a million values)."""
    _column(values, what, integers=True)


def number_column(values: Any, what: str) -> None:
    """``ValueError`` naming ``what`` unless ``values`` is a list of finite numbers >= 0 (one pass in C each)."""
    _column(values, what, integers=False)


def _column(values: Any, what: str, *, integers: bool) -> None:
    kind = "a count (an integer >= 0)" if integers else "a finite number >= 0"
    if not isinstance(values, list):
        raise ValueError(f"{what}: not a list")
    try:
        total = sum(values)  # an int only when every value is one; NaN or infinity when one is
    except TypeError:
        total = None
    right = isinstance(total, int) if integers else isinstance(total, (int, float)) and math.isfinite(total)
    if not right or (values and min(values) < 0):
        raise ValueError(f"{what}: holds a value that is not {kind}")


def at_most(smaller: list, larger: list, what: str) -> None:
    """``ValueError`` naming ``what`` when an item of ``smaller`` exceeds its peer in ``larger``.

    >>> at_most([1, 2], [1, 3], "zero-std visits <= visits")
    >>> at_most([1, 4], [1, 3], "zero-std visits <= visits")
    Traceback (most recent call last):
    ...
    ValueError: not zero-std visits <= visits
    """
    if any(map(operator.gt, smaller, larger)):
        raise ValueError(f"not {what}")
