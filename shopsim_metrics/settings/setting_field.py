"""A ``shopsim_*`` setting declared as a dataclass field (:func:`setting`), and the parsers that read its value.

A field declared with :func:`setting` carries its parser, the allowed text of its error and its docs line in
its metadata; a field declared with :func:`settings_of` holds a dataclass whose own setting fields are settings
too, under a longer prefix. The settings table (:func:`shopsim_metrics.settings.declared_settings`) reads both.

Example:
    >>> read = optional(integer(1, 9))
    >>> read(None), read(3)
    (None, 3)
    >>> read(True)
    Traceback (most recent call last):
    ...
    shopsim_metrics.settings.setting_field.InvalidValue
"""

from __future__ import annotations

import math
import os
from dataclasses import field
from typing import Any, Callable, Mapping

from shopsim_metrics.general.plain_values import is_int

SETTING = "setting"
"""The field metadata key under which :func:`setting` keeps a setting's parser, allowed text and docs line."""
SETTINGS_OF = "settings of"
"""The field metadata key under which :func:`settings_of` keeps the nested settings class and its key prefix."""
YAML_BOOL_HINT = " (YAML reads unquoted on/off/yes/no/true/false as a boolean: quote the value)"


class InvalidValue(ValueError):
    """Raised by a parser: the value is not allowed (the setting's ``allowed`` text says what is)."""


_FIELD_DEFAULT: Any = object()


def setting(default: Any, parse: Callable[[Any], Any], allowed: str, doc: str, *,
            bool_hint: str = YAML_BOOL_HINT, key_default: Any = _FIELD_DEFAULT) -> Any:
    """A dataclass field that is a setting: the one place it is declared (its default, parser, the allowed text
    of its error and its docs line). ``key_default``: the key's default when it is not the field's (the skip
    rule's seed: the field is 0, the key ``null``, which means slime's ``--rollout-seed``).

    Example:
        >>> f = setting(3, integer(1), "an integer >= 1", "a knob")
        >>> f.default, f.metadata[SETTING]["allowed"], "default" in f.metadata[SETTING]
        (3, 'an integer >= 1', False)
        >>> setting(0, optional(integer(0)), "null or an integer >= 0", "a seed", key_default=None).metadata[SETTING]["default"] is None
        True
    """
    row = {"parse": parse, "allowed": allowed, "doc": doc, "bool_hint": bool_hint}
    if key_default is not _FIELD_DEFAULT:
        row["default"] = key_default
    return field(default=default, metadata={SETTING: row})


def settings_of(cls: type, prefix: str) -> Any:
    """A dataclass field holding a ``cls`` (at its defaults) whose setting fields are the settings
    ``<the outer prefix><prefix><field>``: the nested class is their one declaration.

    Example:
        >>> from dataclasses import dataclass
        >>> @dataclass(frozen=True)
        ... class Knobs:
        ...     every: int = setting(3, integer(1), "an integer >= 1", "how often")
        >>> settings_of(Knobs, "knobs_").metadata[SETTINGS_OF]
        (<class 'shopsim_metrics.settings.setting_field.Knobs'>, 'knobs_')
    """
    return field(default_factory=cls, metadata={SETTINGS_OF: (cls, prefix)})


# --- parsers: each returns the normalised value or raises InvalidValue ---------------------------------
def integer(minimum: int, most: int | None = None) -> Callable[[Any], int]:
    """An ``int`` (never a bool) >= ``minimum`` (and <= ``most``, when given)."""

    def parse(value: Any) -> int:
        if not is_int(value) or value < minimum or (most is not None and value > most):
            raise InvalidValue
        return value

    return parse


def number(low: float | None = None, high: float | None = None, *, low_open: bool = False) -> Callable[[Any], float]:
    """A finite number (int, float or a numeric string such as YAML's ``"5e-1"``) within the bounds."""

    def parse(value: Any) -> float:
        if isinstance(value, bool):
            raise InvalidValue
        if isinstance(value, str):
            try:
                value = float(value.strip())
            except ValueError:
                raise InvalidValue from None
        try:
            value = float(value)
        except (TypeError, ValueError, OverflowError):
            raise InvalidValue from None
        if not math.isfinite(value) or (high is not None and value > high):
            raise InvalidValue
        if low is not None and (value <= low if low_open else value < low):
            raise InvalidValue
        return value

    return parse


def choice(options: tuple[str, ...], *, upper: bool = False, booleans: Mapping[bool, str] | None = None
           ) -> Callable[[Any], str]:
    """One of ``options`` (case-insensitive); ``booleans`` maps YAML's booleans to an option."""

    def parse(value: Any) -> str:
        if isinstance(value, bool):
            if booleans is None or value not in booleans:
                raise InvalidValue
            return booleans[value]
        if not isinstance(value, str):
            raise InvalidValue
        text = value.strip().upper() if upper else value.strip().lower()
        if text not in options:
            raise InvalidValue
        return text

    return parse


def optional(parse: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """None, or a value ``parse`` reads."""
    return lambda value: None if value is None else parse(value)


_FLAG_WORDS = {"true": True, "on": True, "yes": True, "1": True, "false": False, "off": False, "no": False, "0": False}


def flag(value: Any) -> bool:
    """A boolean; the words true/false/on/off/yes/no (any case, as a quoted string) and 0/1 too."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.strip().lower() in _FLAG_WORDS:
        return _FLAG_WORDS[value.strip().lower()]
    raise InvalidValue


def text(value: Any) -> str:
    """A non-empty string."""
    if not isinstance(value, str) or not value.strip():
        raise InvalidValue
    return value


def optional_path(value: Any) -> str | None:
    """None, or a non-empty path."""
    if isinstance(value, os.PathLike):
        value = os.fspath(value)
    return optional(text)(value)
