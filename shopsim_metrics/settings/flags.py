"""Command-line flags that are ``shopsim_*`` settings: declared by the setting, read by its own parser.

A command that lets the user try a setting (``replay --prompt-skip-threshold 0.8``) names the setting; the
flag is ``--<key without shopsim_, '_' as '-'>``, its value is read and range-checked by the setting's own
parser (one check per setting), its help is the setting's docs line, and the values given come back by the
setting's field name, ready for the simulator's config. A flag's text is what a config file would hold: ``null`` is
the setting's default, and the setting reads any other text as given, else as the integer it spells
(``--prompt-skip-probe-every 8``), since a command line has only text where YAML has numbers.

Example:
    >>> import argparse
    >>> parser = argparse.ArgumentParser(prog="demo")
    >>> add_setting_flags(parser, ["shopsim_prompt_skip_threshold", "shopsim_wave_fill_probability"])
    >>> given_settings(parser.parse_args(["--prompt-skip-threshold", "0.8"]),
    ...                ["shopsim_prompt_skip_threshold", "shopsim_wave_fill_probability"])
    {'prompt_skip_threshold': 0.8}
"""

from __future__ import annotations

import argparse
import re
from typing import Any, Callable, Sequence

from shopsim_metrics.settings.shopsim_settings import PREFIX, SETTINGS_BY_NAME, Setting, ShopsimConfigError


def flag_of(name: str) -> str:
    """The flag of setting ``name``: ``shopsim_wave_fill_probability`` -> ``--wave-fill-probability``.

    >>> flag_of("shopsim_prompt_skip_min_yield")
    '--prompt-skip-min-yield'
    """
    return "--" + name.removeprefix(PREFIX).replace("_", "-")


def add_setting_flags(parser: argparse.ArgumentParser, names: Sequence[str]) -> None:
    """A flag for each setting of ``names`` (default None: the setting's own default applies)."""
    for name in names:
        row = SETTINGS_BY_NAME[name]
        parser.add_argument(flag_of(name), type=_reader(row), default=None, metavar="VALUE",
                            help=f"{row.doc.replace('%', '%%')} ({row.allowed}; default: the setting's, {row.default})")


def given_settings(args: argparse.Namespace, names: Sequence[str]) -> dict[str, Any]:
    """The settings of ``names`` the command line gave, by field name (``prompt_skip_threshold``)."""
    given = {name.removeprefix(PREFIX): getattr(args, name.removeprefix(PREFIX)) for name in names}
    return {field: value for field, value in given.items() if value is not None}


def flag_value(text: str) -> Any:
    """What a config file's unquoted scalar ``text`` would be when it is an integer or null; else ``text`` itself.

    Example:
        >>> flag_value("8"), flag_value("-3"), flag_value("null"), flag_value("0.5"), flag_value("off")
        (8, -3, None, '0.5', 'off')
    """
    stripped = text.strip()
    if stripped in NULL_TEXTS:
        return None
    if _INTEGER.fullmatch(stripped):
        return int(stripped)
    return text


NULL_TEXTS = frozenset({"null", "~"})
"""Texts a flag reads as null (the setting's default), as YAML does."""

_INTEGER = re.compile(r"[+-]?[0-9]+")


def _reader(row: Setting) -> Callable[[str], Any]:
    def read(text: str) -> Any:
        value = flag_value(text)
        try:
            if value is None:
                return row.read(None)  # null: the setting's default, as in a config file
            try:
                return row.read(text)  # as given: a choice, a string, a number the setting reads from text
            except ShopsimConfigError:
                if isinstance(value, str):
                    raise
                return row.read(value)  # the integer the text spells
        except ShopsimConfigError as exc:  # argparse says which flag; the setting says what it allows
            raise argparse.ArgumentTypeError(str(exc).removeprefix(f"{row.name}: ")) from None

    return read
