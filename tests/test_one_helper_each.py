"""One helper each for two rules the package kept writing by hand: "an int, not a bool"
(``general/plain_values.py``) and "warn once" (``general/warn_once.py``)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SOURCES = sorted([*(ROOT / "shopsim_metrics").rglob("*.py"), *(ROOT / "filter").rglob("*.py")])
NAME = r"[A-Za-z_][\w.\[\]\"']*"
INT_NOT_BOOL = re.compile(
    rf"isinstance\(({NAME}), (int|\(int, float\))\) and not isinstance\(\1, bool\)"
    rf"|isinstance\(({NAME}), bool\) or not isinstance\(\3, (int|\(int, float\))\)"
    rf"|not isinstance\(({NAME}), (int|\(int, float\))\) or isinstance\(\5, bool\)")
WARNED_BY_HAND = re.compile(r"\b_?warned(_\w+)?\s*(:\s*set\[\w+\])?\s*=\s*(set\(\)|False)")


def _offenders(pattern: re.Pattern[str], allowed: str) -> list[str]:
    return [f"{path.relative_to(ROOT)}:{n}" for path in SOURCES if path.name != allowed
            for n, line in enumerate(path.read_text().splitlines(), 1) if pattern.search(line)]


def test_an_int_not_a_bool_is_checked_by_plain_values_only() -> None:
    assert INT_NOT_BOOL.search("if isinstance(v, int) and not isinstance(v, bool):")  # the check finds it
    assert INT_NOT_BOOL.search("isinstance(x, bool) or not isinstance(x, (int, float))")
    assert _offenders(INT_NOT_BOOL, "plain_values.py") == []


def test_warn_once_is_warn_once_only() -> None:
    assert WARNED_BY_HAND.search("        self._warned: set[str] = set()") and WARNED_BY_HAND.search("_warned = False")
    assert _offenders(WARNED_BY_HAND, "warn_once.py") == []
