"""Every ``§N.N`` the project cites is one heading of one reference page, and every page is reachable.

The reference lives in ``docs/reference/*.md`` under the numbers the code, its messages, the README and the docs
cite (``docs §3.6``); the guide ``docs/training_monitoring.md`` links every page and every page links back.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

from tests.docs_pages import (DOCS_DIR, GUIDE, README, REFERENCE_DIR, REFERENCE_INDEX, ROOT, number_of, prose,
                              reference_pages, section, sections)

CITED_IN = ("README.md", "docs", "dashboards", "examples", "shopsim_metrics", "filter", "benchmarks", "tests",
            "Makefile", "pyproject.toml")
SUFFIXES = {".md", ".py", ".json", ".yaml", ".sh", ".toml", ""}
CITATION = re.compile(r"§\s?(\d+(?:\.\d+)*)")
DESIGN_DOCUMENT = re.compile(r"design document|dynamic_sampling_filter")
"""The design document (the spec, outside the repository) has sections of its own: ``design document §3``."""
PAGE_CITATION = re.compile(r"([\w-]+\.md)(?:#[\w-]*)?\)?\s*§\s?(\d+(?:\.\d+)*)|\[§\s?(\d+(?:\.\d+)*)\]\(([\w./-]*?)([\w-]+\.md)#")
"""A citation that names its page: ``docs/reference/records.md §3.3`` or ``[§3.7](reference/waves.md#...)``."""


def cited_files() -> list[Path]:
    """The files whose ``§`` citations must resolve: code, tests, examples, dashboards, benchmarks and docs."""
    out = []
    for name in CITED_IN:
        root = ROOT / name
        for path in [root] if root.is_file() else sorted(root.rglob("*")):
            if path.is_file() and path.suffix in SUFFIXES and "__pycache__" not in path.parts:
                out.append(path)
    return out


def citations(text: str) -> list[tuple[int, str]]:
    """``(line, number)`` of each docs citation of ``text``; those of the design document left out.

    >>> citations("see docs §3.6 and §3.7\\nthe design document §3 says\\n§5 of the design document")
    [(1, '3.6'), (1, '3.7')]
    """
    out = []
    for lineno, line in enumerate(text.replace("\\u00a7", "§").splitlines(), start=1):
        for match in CITATION.finditer(line):
            before, after = line[max(0, match.start() - 60):match.start()], line[match.end():match.end() + 30]
            if DESIGN_DOCUMENT.search(before) or after.startswith(" of the design document"):
                continue
            out.append((lineno, match.group(1)))
    return out


def test_every_section_number_is_one_heading_of_one_reference_page() -> None:
    counts = Counter(s.number for s in sections())
    doubled = {number: [s.page.name for s in sections() if s.number == number] for number, n in counts.items() if n > 1}
    assert not doubled, f"section numbers on more than one heading: {doubled}"
    assert len(counts) >= 40


def test_only_reference_pages_hold_numbered_headings_of_the_reference() -> None:
    """The guide and the index carry no numbered heading: a ``§N`` is found on a reference page only."""
    for page in (GUIDE, REFERENCE_INDEX):
        numbered = [t for t in re.findall(r"^#+ (.+?)\s*$", prose(page.read_text(encoding="utf-8")), flags=re.M)
                    if number_of(t)]
        assert numbered == [], f"{page.relative_to(ROOT)} has numbered headings {numbered}: they belong on a reference page"


def test_every_cited_section_resolves_to_exactly_one_heading() -> None:
    """Each ``§N.N`` in the code, its messages, the tests, the README and the docs names one heading of one page."""
    numbers = {s.number for s in sections()}
    unresolved, checked = [], 0
    for path in cited_files():
        for lineno, number in citations(path.read_text(encoding="utf-8", errors="replace")):
            checked += 1
            if number not in numbers:
                unresolved.append(f"{path.relative_to(ROOT)}:{lineno}: §{number}")
    assert not unresolved, "citations of no reference heading:\n" + "\n".join(unresolved)
    assert checked > 300


def test_a_citation_that_names_its_page_names_the_page_that_holds_the_section() -> None:
    """``docs/reference/records.md §3.3`` and ``[§3.7](reference/waves.md#…)`` point where §3.3 and §3.7 are."""
    wrong, checked = [], 0
    for path in cited_files():
        text = path.read_text(encoding="utf-8", errors="replace").replace("\\u00a7", "§")
        for match in PAGE_CITATION.finditer(text):
            page, number = (match.group(1), match.group(2)) if match.group(1) else (match.group(5), match.group(3))
            if page in {"benchmarks.md", "should_i_skip.md"} or number not in {s.number for s in sections()}:
                continue
            checked += 1
            if page != section(number).page.name:
                wrong.append(f"{path.relative_to(ROOT)}: {match.group(0)!r}: §{number} is in {section(number).page.name}")
    assert not wrong, "\n".join(wrong)
    assert checked >= 10


def linked_pages(page: Path) -> set[Path]:
    """The markdown files under ``docs/`` (or the README) that ``page`` links to by a relative path."""
    out = set()
    for target in re.findall(r"\]\(([\w./-]+\.md)(?:#[^)\s]*)?\)", prose(page.read_text(encoding="utf-8"))):
        linked = (page.parent / target).resolve()
        if linked.is_file() and (linked == README or DOCS_DIR in linked.parents):
            out.add(linked)
    return out


def test_every_reference_page_is_reachable_from_the_readme() -> None:
    seen, todo = {README}, [README]
    while todo:
        for linked in linked_pages(todo.pop()) - seen:
            seen.add(linked)
            todo.append(linked)
    assert {p.resolve() for p in DOCS_DIR.rglob("*.md")} - seen == set()


def test_the_guide_and_the_reference_pages_link_both_ways() -> None:
    guide_links = linked_pages(GUIDE)
    assert REFERENCE_INDEX.resolve() in guide_links
    for page in reference_pages():
        assert page.resolve() in guide_links, f"the guide does not link {page.name}"
        assert {GUIDE.resolve(), REFERENCE_INDEX.resolve()} <= linked_pages(page), \
            f"{page.name} does not link back to the guide and the reference index"


def test_no_file_cites_the_guide_by_section() -> None:
    """The guide has no numbered sections: a section cited by the guide's file name leads nowhere."""
    offenders = [f"{p.relative_to(ROOT)}:{n}" for p in cited_files()
                 for n, line in enumerate(p.read_text(encoding="utf-8", errors="replace").splitlines(), start=1)
                 if re.search(r"training_monitoring\.md\W{0,3}(?:§|\\u00a7|section \d)", line)]
    assert offenders == []
    assert REFERENCE_DIR.is_dir()
