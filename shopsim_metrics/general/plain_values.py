"""Plain values as every room reads them: an int or a number, never a bool (here, in the lowest room, so all can).

Python's ``True`` is an ``int`` equal to 1; a count, an id or a knob never is one, so every check of such a
value goes through these two (one rule, one place). :func:`as_float` reads a number slime or numpy hands over
(a Python number, a numpy scalar, a 0-dim array or tensor) as one float; :func:`shown_value` names a value
in a message, short and on one line.

Example:
    >>> is_int(16), is_int(True), is_number(0.5), is_number(None)
    (True, False, True, False)
"""

from __future__ import annotations

import math
from decimal import Decimal
from typing import Any


def is_int(value: Any) -> bool:
    """An ``int`` and not a ``bool`` (Python's bools are ints; a record's counts and ids never are).

    Example:
        >>> is_int(3), is_int(True), is_int(3.0), is_int("3")
        (True, False, False, False)
    """
    return isinstance(value, int) and not isinstance(value, bool)


def is_number(value: Any) -> bool:
    """An ``int`` or a ``float`` and not a ``bool`` (numpy's float64 is a float; NaN and infinities count).

    Example:
        >>> is_number(0.5), is_number(2), is_number(False), is_number(None)
        (True, True, False, False)
    """
    return isinstance(value, (int, float)) and not isinstance(value, bool)


SHOWN_LENGTH = 40
"""A value in a message is cut to this many characters."""


def shown_value(value: Any) -> str:
    """``value`` as a message names it: short, one line, never thousands of digits (nor the error Python raises
    for printing more than 4,300 of them).

    Example:
        >>> shown_value(10**400), shown_value(1e308), shown_value("a\\u202eb")
        ('an integer of 401 digits', '1e+308', "'a\\\\u202eb'")
    """
    if is_int(value) and value.bit_length() > 64:
        digits = str(len(str(abs(value)))) if value.bit_length() < 10_000 else "over 3,000"  # str() stops at 4,300
        return f"{'a negative' if value < 0 else 'an'} integer of {digits} digits"
    if isinstance(value, float):
        return f"{value:.6g}"
    try:
        text = ascii(value)  # non-ASCII and control characters escaped: one line, shown as it is
    except Exception:  # noqa: BLE001 - a value whose repr raises
        text = f"<{type(value).__name__}>"
    return text if len(text) <= SHOWN_LENGTH else text[:SHOWN_LENGTH - 3] + "..."


def as_float(raw: Any) -> float:
    """``float(raw)`` for numbers and 0-dim array-likes; raises for anything else.

    Example:
        >>> import numpy as np
        >>> as_float(np.array(2)), as_float(3)
        (2.0, 3.0)
    """
    if isinstance(raw, (int, float)):  # Python numbers and bools, numpy's float64
        return float(raw)
    if isinstance(raw, (str, bytes, complex)):
        raise TypeError("not a real number")
    if isinstance(raw, Decimal) and not raw.is_finite():  # float() raises for a signalling NaN
        return math.nan
    if hasattr(raw, "item"):  # numpy scalars, 0-dim tensors
        if tuple(getattr(raw, "shape", ())) != ():
            raise TypeError("not a scalar")
        raw = raw.item()
        if isinstance(raw, (str, bytes, complex)):
            raise TypeError("not a real number")
    return float(raw)
