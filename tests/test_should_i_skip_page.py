"""docs/should_i_skip.md: linked from the README, and every name and figure it quotes is the project's own."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

from shopsim_metrics.settings import SETTINGS_BY_NAME
from shopsim_metrics.record.records import StepRecord

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "should_i_skip.md"


def test_the_readme_and_the_long_doc_link_the_page() -> None:
    assert "](docs/should_i_skip.md)" in (ROOT / "README.md").read_text()
    assert "](should_i_skip.md)" in (ROOT / "docs" / "training_monitoring.md").read_text()
    assert PAGE.read_text().startswith("# Should I turn skipping on?")


def test_every_field_and_setting_the_page_names_exists() -> None:
    fields = {f.name for f in dataclasses.fields(StepRecord)}
    names = set(re.findall(r"`([a-z][a-z0-9]*(?:_[a-z0-9]+)+)`", PAGE.read_text()))
    unknown = sorted(n for n in names if n not in fields and n not in SETTINGS_BY_NAME)
    assert names and unknown == [], unknown


def test_every_figure_of_its_table_is_measured_in_benchmarks_md() -> None:
    """The table quotes benchmarks.md: a figure that changes there must change here."""
    table = [line for line in PAGE.read_text().splitlines() if line.startswith("| ") and "---" not in line][1:]
    figures = {f for line in table for f in re.findall(r"\d+\.\d+×?", line)}
    bench = (ROOT / "docs" / "benchmarks.md").read_text().replace("–", " ")
    missing = sorted(f for f in figures if f not in bench)
    assert figures and missing == [], missing
