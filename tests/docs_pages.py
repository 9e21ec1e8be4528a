"""The docs as the tests read them: the guide, the reference pages and their numbered sections (``§3.6``).

The reference is split over ``docs/reference/*.md``; each numbered heading (``## 3.6 Skipping ...``) is one
section, the number the code, its messages and the README cite as ``docs §3.6``.

>>> number_of("3.6 Skipping prompts before generation (opt-in)")
'3.6'
>>> number_of("2. Settings"), number_of("Where the records go")
('2', None)
>>> anchor("3.3 W&B fields")
'33-wb-fields'
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOCS_DIR = ROOT / "docs"
GUIDE = DOCS_DIR / "training_monitoring.md"
REFERENCE_DIR = DOCS_DIR / "reference"
REFERENCE_INDEX = REFERENCE_DIR / "README.md"
MEASUREMENTS = DOCS_DIR / "benchmarks.md"
README = ROOT / "README.md"

HEADING = re.compile(r"^(#{1,6}) (.+?)\s*$", flags=re.M)


def reference_pages() -> list[Path]:
    """The reference pages that hold numbered sections (the index aside), sorted by name."""
    return sorted(p for p in REFERENCE_DIR.glob("*.md") if p != REFERENCE_INDEX)


def all_doc_pages() -> list[Path]:
    """Every markdown page under ``docs/``, the reference included."""
    return sorted(DOCS_DIR.rglob("*.md"))


def prose(text: str) -> str:
    """``text`` without its fenced code blocks (a ``#`` line in a bash block is no heading)."""
    return re.sub(r"^```.*?^```", "", text, flags=re.M | re.S)


def number_of(title: str) -> str | None:
    """The section number a heading title starts with (``3.6``, ``2`` of ``2. Settings``), else None."""
    match = re.match(r"(\d+(?:\.\d+)*)\.? ", title)
    return match.group(1) if match else None


def anchor(title: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", title.strip().lower()).replace(" ", "-")


def anchors(text: str) -> set[str]:
    """Every heading anchor GitHub makes for ``text`` (a repeated title gets ``-1``, ``-2``, ...)."""
    seen: Counter[str] = Counter()
    out = set()
    for _, title in HEADING.findall(prose(text)):
        base = anchor(title)
        out.add(base if not seen[base] else f"{base}-{seen[base]}")
        seen[base] += 1
    return out


@dataclass(frozen=True)
class Section:
    """One numbered heading of a reference page and the text under it."""

    number: str
    title: str
    page: Path
    level: int
    body: str  # up to the next heading of the same or a higher level, code blocks included

    @property
    def link(self) -> str:
        """``page.md#anchor`` relative to ``docs/reference/``."""
        return f"{self.page.name}#{anchor(self.title)}"


def _masked(text: str) -> str:
    """``text`` with its fenced code blocks blanked, every offset kept (headings are found here, sliced from text)."""
    return re.sub(r"^```.*?^```", lambda m: re.sub(r"[^\n]", " ", m.group(0)), text, flags=re.M | re.S)


def _sections_of(page: Path) -> list[Section]:
    text = page.read_text(encoding="utf-8")
    found = list(HEADING.finditer(_masked(text)))
    out = []
    for i, match in enumerate(found):
        level, title = len(match.group(1)), match.group(2)
        number = number_of(title)
        if number is None:
            continue
        end = next((m.start() for m in found[i + 1:] if len(m.group(1)) <= level), len(text))
        out.append(Section(number, title, page, level, text[match.end():end]))
    return out


@cache
def sections() -> tuple[Section, ...]:
    """Every numbered section of the reference pages, page by page."""
    return tuple(s for page in reference_pages() for s in _sections_of(page))


def section(number: str) -> Section:
    """The one section numbered ``number`` (``"3.3"``); an error names the pages when it is not exactly one."""
    found = [s for s in sections() if s.number == number]
    assert len(found) == 1, f"§{number} is a heading of {[s.page.name for s in found]} (expected exactly one page)"
    return found[0]


def numeric_key(number: str) -> tuple[int, ...]:
    """Sort key of a section number: ``3.10`` after ``3.9``."""
    return tuple(int(part) for part in number.split("."))
