"""The figures the README and the docs quote from ``benchmarks/results.json``, found by their markers.

A measured figure is quoted with a marker right after it, an HTML comment the rendered page does not show::

    predictive with adaptive waves 1.53×<!-- results: bench_real_trace.predictive_adaptive.saving --> at 0.073<!--
    results: bench_real_trace.predictive_adaptive.lost_signal -->

The key is the bench's entry, then the keys inside it, joined by dots. The figure is the last number before the
marker on its line (``**``, ``×``, ``x`` and ``%`` after it are allowed); it matches when the file's value, rounded to
the decimals quoted, equals it. A figure no bench measures (a run of slime's ``train.py`` by hand, a number derived
from a setting) carries ``<!-- not from a bench: why -->`` instead, so nothing is quoted unmarked by accident.

In the pages that state what skipping does (:data:`SKIPPING_PAGES`), every savings ratio (``1.53×``) and every lost
signal (``at 0.073``, ``lost signal of 0.088``) must carry one of the two markers, unless the text makes it a target
(``≥ 1.45×``, ``at least``, ``say 1.2×``, ``1.2× or more``, ``at most 0.15``).

Example:
    >>> quoted("1.53×<!-- results: b.k -->, then **0.073**<!-- results: b.l -->, `2.1×<!-- results: b.m -->`")
    [Quote(text='1.53', key='b.k', line=1), Quote(text='0.073', key='b.l', line=1)]
    >>> matches("1.53", 1.5312), matches("0.07", 0.073), matches("4,050", 4050)
    (True, True, True)
    >>> unmarked("saves 1.60x at a lost signal of 0.088, the target ≥ 1.45×")
    ['1.60x', '0.088']
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SKIPPING_PAGES = ("README.md", "docs/training_monitoring.md", "docs/should_i_skip.md", "docs/reference/skipping.md")
"""The pages that state what skipping does: every figure they quote about it is marked."""

MARKER = re.compile(r"<!--\s*results:\s*([\w.<>-]+)\s*-->")
NOT_FROM_A_BENCH = re.compile(r"<!--\s*not from a bench:[^>]*-->")
_NUMBER = re.compile(r"(\d[\d,]*(?:\.\d+)?)\**\s?[×x%]?\**\)?$")
_FIGURES = re.compile(r"(?P<ratio>\d+\.\d+\s?[×x])(?![\w])|(?P<lost>(?:lost signals?(?: of| is| at)?(?: at most)?|\bat) "
                      r"\**(?P<value>0\.\d{2,3})\**)")
_TARGET_BEFORE = ("≥", ">=", "≤", "<=", "never past", "must", "of at most", "at least", "say ", "target", "reach", "under", "within", "limit")
_AFTER_FIGURE = re.compile(r"^\**\)?(?:<!--\s*(?:results:|not from a bench:))")


@dataclass(frozen=True)
class Quote:
    """One marked figure: its text as quoted, its key in ``results.json`` and its line."""

    text: str
    key: str
    line: int


def quoted(page: str) -> list[Quote]:
    """Every marked figure of ``page``, in order (a marker with no number before it is a quote of ``""``)."""
    out = []
    for number, line in enumerate(page.splitlines(), start=1):
        for marker in MARKER.finditer(line):
            if line[:marker.start()].count("`") % 2:
                continue  # inside a code span: the convention shown, not a quote
            before = NOT_FROM_A_BENCH.sub("", MARKER.sub("", line[:marker.start()])).rstrip()
            found = _NUMBER.search(before)
            out.append(Quote(found.group(1) if found else "", marker.group(1), number))
    return out


def matches(text: str, value: Any) -> bool:
    """Whether the file's ``value`` quoted to ``text``'s decimals is ``text``."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    plain = text.replace(",", "")
    decimals = len(plain.split(".")[1]) if "." in plain else 0
    return round(float(value), decimals) == float(plain)


def lookup(results: dict[str, Any], key: str) -> tuple[bool, Any]:
    """``(found, value)`` of a dotted key: the bench's entry, then the keys inside it (a key that holds a dot is
    matched whole, the longest first).

    >>> lookup({"b": {"n=0.5": {"saving": 1.2}}}, "b.n=0.5.saving"), lookup({"b": {}}, "b.x")
    ((True, 1.2), (False, None))
    """
    value: Any = results
    parts = key.split(".")
    while parts:
        if not isinstance(value, dict):
            return False, None
        for cut in range(len(parts), 0, -1):
            name = ".".join(parts[:cut])
            if name in value:
                value, parts = value[name], parts[cut:]
                break
        else:
            return False, None
    return not isinstance(value, dict), value


def unmarked(page: str) -> list[str]:
    """The savings ratios and lost signals of ``page`` that carry no marker and are not targets."""
    out = []
    for line in page.splitlines():
        for figure in _FIGURES.finditer(line):
            start, end = figure.span("ratio") if figure.group("ratio") else figure.span("value")
            before = line[max(0, start - 32):start].lower()
            if any(word in before for word in _TARGET_BEFORE) or line[end:end + 8].startswith(" or more"):
                continue
            if not _AFTER_FIGURE.match(line[end:]):
                out.append(line[start:end])
    return out
