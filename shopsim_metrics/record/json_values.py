"""Turn any value a record may hold into a JSON-native one, so one odd value never costs a record.

Rules (applied recursively, never raising):

- ``None``, ``bool``, ``int``, ``str`` stay (subclasses such as ``IntEnum`` members or ``str``
  subclasses become the plain type); an integer beyond the float range (``10**400``) is ``None``,
  like the non-finite numbers below;
- ``float`` stays when finite; NaN and infinities become ``None`` (JSON ``null``), and so do
  ``Decimal``/``Fraction`` values, converted to ``float`` (a finite ``Decimal`` beyond the float range
  is ``None`` too);
- numpy / torch scalars, 0-d and one-element arrays or tensors are unwrapped with ``.item()``;
  larger arrays become lists (``.tolist()``);
- mappings become dicts with string keys, lists / tuples / sets become lists, an ``Enum`` member
  becomes its value, a dataclass instance the dict of its fields;
- anything else, or a value whose conversion raises, is **stringified** (``str(value)``, or
  ``"<unprintable TYPE>"`` when even that raises); its type name goes to the ``on_fallback``
  callback, by default :func:`warn_once_per_type` (one warning per type and process).

Example:
    >>> import numpy as np
    >>> from decimal import Decimal
    >>> json_native({"group_index": np.int64(7), "reward": np.float32(0.5), "r": float("inf"),
    ...              "d": Decimal("0.25"), "flag": np.bool_(True), "arr": np.array([3])})
    {'group_index': 7, 'reward': 0.5, 'r': None, 'd': 0.25, 'flag': True, 'arr': 3}
    >>> json_native(object.__new__(object)).startswith("<object object")
    True
"""

from __future__ import annotations

import dataclasses
import enum
import logging
import math
from collections.abc import Callable, Iterable, Mapping
from decimal import Decimal
from fractions import Fraction
from typing import Any

from shopsim_metrics.general.warn_once import WarnOnce

logger = logging.getLogger("shopsim_metrics")

MAX_DEPTH = 32  # deeper nesting is stringified (it also stops self-referencing containers)

_PLAIN = (type(None), bool, str)
_INT_BITS = 1024  # larger integers do not fit a float (and could exceed Python's int-to-str limit)


_warn_once = WarnOnce(logger)


def warn_once_per_type(type_name: str) -> None:
    """Log one warning the first time a value of ``type_name`` had to be stringified."""
    _warn_once(type_name, "shopsim-metrics: a record holds a value of type %s that is not JSON-native; it is "
               "written as its string form (str(value)) so the step keeps its record. Further values of this type "
               "are not reported.", type_name)


def json_native(value: Any, on_fallback: Callable[[str], None] | None = warn_once_per_type) -> Any:
    """``value`` as JSON-native data (see the module docstring); never raises."""
    return _convert(value, on_fallback, 0)


def json_native_fields(obj: Any, names: Iterable[str],
                       on_fallback: Callable[[str], None] | None = warn_once_per_type) -> dict[str, Any]:
    """``json_native({name: getattr(obj, name) for name in names})`` in one pass, for records' fields.

    The fields are read once and converted by the same rules, without building an intermediate dict.

    Example:
        >>> from types import SimpleNamespace
        >>> json_native_fields(SimpleNamespace(a=1, b=float("nan"), c=(2, 3)), ("a", "b", "c"))
        {'a': 1, 'b': None, 'c': [2, 3]}
    """
    return {name: _convert(getattr(obj, name), on_fallback, 1) for name in names}  # depth 1: inside the dict


def _convert(value: Any, on_fallback: Callable[[str], None] | None, depth: int) -> Any:
    kind = type(value)
    if kind in _PLAIN:
        return value
    if kind is int:
        return value if value.bit_length() <= _INT_BITS else None
    if kind is float:
        return value if math.isfinite(value) else None
    try:
        return _convert_odd(value, on_fallback, depth)
    except Exception:  # noqa: BLE001 - a value that cannot be read is stringified, never raised
        return _stringify(value, on_fallback)


def _convert_odd(value: Any, on_fallback: Callable[[str], None] | None, depth: int) -> Any:
    if isinstance(value, bool):  # bool subclasses cannot exist, but numpy.bool_ is not a bool
        return bool(value)
    if isinstance(value, enum.Enum):
        return _convert(value.value, on_fallback, depth + 1)
    if isinstance(value, int):
        return _convert(int(value), on_fallback, depth + 1)
    if isinstance(value, str):
        return str.__str__(value)
    if isinstance(value, (float, Decimal, Fraction)):
        if isinstance(value, Decimal) and not value.is_finite():
            return None
        number = float(value)
        return number if math.isfinite(number) else None
    if depth >= MAX_DEPTH:
        return _stringify(value, on_fallback)
    if isinstance(value, Mapping):
        return {_key(k, on_fallback): _convert(v, on_fallback, depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [_convert(item, on_fallback, depth + 1) for item in value]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields = {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
        return _convert(fields, on_fallback, depth + 1)
    item = getattr(value, "item", None)  # numpy / torch scalars, 0-d and one-element arrays
    size = _size(value)
    if callable(item) and size in (None, 1):
        return _convert(item(), on_fallback, depth + 1)
    tolist = getattr(value, "tolist", None)  # larger arrays and tensors
    if callable(tolist):
        return _convert(tolist(), on_fallback, depth + 1)
    return _stringify(value, on_fallback)


def _size(value: Any) -> int | None:
    """Number of elements of an array or tensor (numpy ``size``, torch ``numel()``), else None."""
    size = getattr(value, "size", None)
    if isinstance(size, int):
        return size
    numel = getattr(value, "numel", None)
    return int(numel()) if callable(numel) else None


def _key(key: Any, on_fallback: Callable[[str], None] | None) -> str:
    """A dict key as JSON allows it: always a string (``1`` -> ``"1"``, ``None`` -> ``"null"``)."""
    native = _convert(key, on_fallback, MAX_DEPTH - 1)
    if isinstance(native, str):
        return native
    if native is None or isinstance(native, bool):
        return "null" if native is None else ("true" if native else "false")
    return str(native)


def _stringify(value: Any, on_fallback: Callable[[str], None] | None) -> str:
    try:
        name = type(value).__name__
    except Exception:  # noqa: BLE001
        name = "object"
    if on_fallback is not None:
        try:
            on_fallback(name)
        except Exception:  # noqa: BLE001 - a failing callback must not cost the record
            pass
    try:
        text = str(value)
        return text if type(text) is str else str.__str__(text)
    except Exception:  # noqa: BLE001
        return f"<unprintable {name}>"
