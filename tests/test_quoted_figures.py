"""Every figure the README and the docs quote about skipping is the one ``benchmarks/results.json`` holds.

The benches write the file (``benchmarks/results_file.py``: each its own entry); the pages quote a figure with a
marker after it naming its key (``tests/quoted_figures.py`` has the convention). Checked here:

- every marked figure equals the file's value at the decimals quoted;
- every marked key exists once its bench's entry exists (a bench that has not written its entry yet, its figures are
  listed as a skip naming them: pending, never counted as checked);
- in the pages that state what skipping does, no savings ratio or lost signal is quoted without a marker (targets
  aside);
- the checker itself: a changed value, a missing key and an unmarked figure are each caught.
"""

from __future__ import annotations

import json

import pytest

from tests.quoted_figures import ROOT, SKIPPING_PAGES, lookup, matches, quoted, unmarked

RESULTS = ROOT / "benchmarks" / "results.json"
PAGES = sorted({ROOT / "README.md", *(ROOT / "docs").rglob("*.md")})


def results() -> dict:
    return json.loads(RESULTS.read_text()) if RESULTS.exists() else {}


def quotes() -> list[tuple[str, object]]:
    return [(f"{page.relative_to(ROOT)}:{q.line}", q) for page in PAGES for q in quoted(page.read_text())]


def problems(found: dict, marked: list[tuple[str, object]]) -> tuple[list[str], list[str]]:
    """``(wrong, pending)``: figures that differ from the file or whose key is missing; figures whose bench has no
    entry yet."""
    wrong, pending = [], []
    for where, quote in marked:
        bench = quote.key.split(".")[0]
        if bench not in found:
            pending.append(f"{where}: {quote.text} ({quote.key})")
            continue
        present, value = lookup(found, quote.key)
        if not present:
            wrong.append(f"{where}: {quote.key} is not in results.json (its bench's entry holds no such figure)")
        elif not quote.text:
            wrong.append(f"{where}: the marker of {quote.key} follows no number")
        elif not matches(quote.text, value):
            wrong.append(f"{where}: quotes {quote.text} for {quote.key}; results.json holds {value}")
    return wrong, pending


def test_the_skipping_pages_quote_figures_and_each_is_marked():
    marked = quotes()
    assert any(where.startswith("README.md") for where, _ in marked)
    loose = [f"{page}: {figure}" for page in SKIPPING_PAGES for figure in unmarked((ROOT / page).read_text())]
    assert loose == [], "figures quoted about skipping without a results marker (tests/quoted_figures.py):\n" + \
        "\n".join(loose)


def test_every_marked_figure_is_the_one_results_json_holds():
    wrong, pending = problems(results(), quotes())
    assert wrong == [], "\n".join(wrong)
    if pending:
        pytest.skip("figures of benches that have not written their entry yet: " + "; ".join(pending))


def test_the_bench_prompt_skip_figures_are_in_the_file():
    """This bench's entry is written (its figures are quoted): run ``python benchmarks/bench_prompt_skip.py``."""
    assert "bench_prompt_skip" in results()
    assert any(q.key.startswith("bench_prompt_skip.") for _, q in quotes())


def test_the_checker_catches_a_changed_value_a_missing_key_and_an_unmarked_figure():
    found = {"bench_a": {"row": {"saving": 1.534, "lost_signal": 0.0731}}}
    page = ("1.53×<!-- results: bench_a.row.saving --> at 0.073<!-- results: bench_a.row.lost_signal -->; "
            "1.60×<!-- results: bench_a.row.other -->; 2.00×<!-- results: bench_b.row.saving -->")
    marked = [(f"p:{q.line}", q) for q in quoted(page)]
    wrong, pending = problems(found, marked)
    assert wrong == ["p:1: bench_a.row.other is not in results.json (its bench's entry holds no such figure)"]
    assert pending == ["p:1: 2.00 (bench_b.row.saving)"]
    changed = {"bench_a": {"row": {"saving": 1.56, "lost_signal": 0.0731}}}
    assert problems(changed, marked[:2])[0] == ["p:1: quotes 1.53 for bench_a.row.saving; results.json holds 1.56"]
    assert unmarked("predictive 1.53× at a lost signal of 0.073") == ["1.53×", "0.073"]
    assert unmarked("the best row must reach ≥ 1.45×, say 1.2× or more, within a lost signal of 0.15") == []
    assert unmarked("1.44×<!-- not from a bench: train.py by hand -->") == []
