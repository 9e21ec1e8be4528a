"""The docs stay in step with the code and navigable: §3.3 W&B fields both ways, §2.2 settings, contents and links."""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import fields
from pathlib import Path

import yaml

from shopsim_metrics.record import contract
from shopsim_metrics.record.records import StepRecord
from shopsim_metrics.sinks.wandb_sink import DECISIONS_KEY, PROMPTS_KEY, SKIPPED_PROMPTS_KEY, WandbSink, record_scalars
from shopsimrl import slime_runtime
from shopsim_metrics.settings import DEFAULTS, SETTINGS
from tests.wandb_helpers import make_record

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs" / "training_monitoring.md"
MEASUREMENTS = DOCS.with_name("benchmarks.md")
FIELDS_HEADER = ["field", "meaning", "when logged", "explained in"]
MAX_ROW = 300
"""Longest line of the §3.3 field table: a short meaning per field, the detail in the section it links to."""


def section(heading: str) -> str:
    """The text of a ``### <heading>`` section, up to the next heading of the same or higher level."""
    text = DOCS.read_text(encoding="utf-8")
    match = re.search(rf"^### {re.escape(heading)}\s*$(.*?)(?=^##\s|^###\s|\Z)", text, flags=re.M | re.S)
    assert match, f"docs/training_monitoring.md has no section '### {heading}'"
    return match.group(1)


def table_lines(text: str) -> list[str]:
    """The lines of the first markdown table in ``text`` (header, separator, rows)."""
    lines = text.splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.startswith("|"))
    end = next((i for i in range(start, len(lines)) if not lines[i].startswith("|")), len(lines))
    return lines[start:end]


def table(text: str) -> tuple[list[str], list[list[str]]]:
    """Header and rows of the first markdown table in ``text``."""
    cells = [[c.strip() for c in ln.strip().strip("|").split("|")] for ln in table_lines(text)]
    return cells[0], [row for row in cells[2:]]


def documented_fields() -> list[str]:
    """The field column of the §3.3 table, in order: the names after ``rollout/shopsim/``."""
    header, rows = table(section("3.3 W&B fields"))
    assert header == FIELDS_HEADER
    names = []
    for row in rows:
        assert len(row) == len(FIELDS_HEADER) and all(row), f"incomplete §3.3 row: {row}"
        match = re.fullmatch(r"`([^`]+)`", row[0])
        assert match, f"the field cell of a §3.3 row must be one `field`: {row[0]!r}"
        names.append(match.group(1))
    return names


def documented_keys() -> list[str]:
    """The W&B keys of the §3.3 table."""
    return [contract.wandb_key(name) for name in documented_fields()]


def test_section_3_3_lists_exactly_the_keys_the_sink_logs() -> None:
    keys = documented_keys()
    assert len(keys) == len(set(keys)), "a key is documented twice"
    logged = set(WandbSink.logged_keys())
    assert set(keys) - logged == set(), "documented but never logged"
    assert logged - set(keys) == set(), "logged but not documented in §3.3"


def test_a_full_record_logs_only_documented_keys_and_all_of_them() -> None:
    logged = set(record_scalars(make_record(0))) | {DECISIONS_KEY, PROMPTS_KEY, SKIPPED_PROMPTS_KEY}
    assert logged == set(documented_keys())


def test_every_contract_step_field_and_failed_check_is_documented() -> None:
    keys = set(documented_keys())
    assert {contract.wandb_key(n) for n in contract.STEP_FIELDS} <= keys
    assert {contract.wandb_key(f"failed_check/{c}") for c in contract.FAILED_CHECKS} <= keys


def field_note(name: str) -> str:
    """The note of one field (``- `name`: ...`` up to the next item or paragraph) in the §3.3 section its row links to."""
    (row,) = [r for r in table(section("3.3 W&B fields"))[1] if r[0] == f"`{name}`"]
    anchor = re.fullmatch(r"\[§[\d.]+\]\(#([\w-]+)\)", row[3]).group(1)
    (title,) = [t for t in headings(DOCS.read_text(encoding="utf-8")) if _anchor(t) == anchor]
    text = DOCS.read_text(encoding="utf-8")
    body = re.search(rf"^#+ {re.escape(title)}\s*$(.*?)(?=^#|\Z)", text, flags=re.M | re.S).group(1)
    match = re.search(rf"^- `{re.escape(name)}`: (.*?)(?=^- |^\s*$)", body, flags=re.M | re.S)
    assert match, f"§3.3 links `{name}` to '{title}', which has no note '- `{name}`: ...'"
    return match.group(1)


def test_decisions_note_names_every_ledger_column() -> None:
    note = field_note(DECISIONS_KEY.removeprefix(contract.WANDB_PREFIX))
    assert re.findall(r"`(\w+)`", note.split(". Logged:")[0]) == list(contract.LEDGER_COLUMNS)


def test_settings_table_lists_every_default() -> None:
    header, rows = table(section("2.2 `shopsim_*` keys of the custom-config YAML"))
    assert header == ["key", "default", "meaning"]
    documented = {}
    for key, default, meaning in rows:
        documented[key.strip("`")] = yaml.safe_load(default.strip("`"))
        assert meaning
    assert documented == DEFAULTS


def test_settings_table_is_the_settings_table_row_by_row() -> None:
    """§2.2 is derived from ``shopsim_metrics.settings.SETTINGS``: same keys, order, defaults and doc lines."""
    _, rows = table(section("2.2 `shopsim_*` keys of the custom-config YAML"))
    documented = [(key.strip("`"), yaml.safe_load(default.strip("`")), meaning) for key, default, meaning in rows]
    assert documented == [(s.name, s.default, s.doc) for s in SETTINGS]


def test_docs_name_the_three_hooks_that_exist() -> None:
    text = DOCS.read_text(encoding="utf-8")
    for flag, name in (("--dynamic-sampling-filter-path", "fully_scored_group_filter"),
                       ("--rollout-all-samples-process-path", "record_all_samples"),
                       ("--custom-rollout-log-function-path", "log_rollout_step")):
        assert f"{flag} shopsimrl.slime_runtime.{name}" in text
        assert name in slime_runtime.__all__
    assert "--custom-config-path" in text and "TechnicalFailureLimitExceeded" in text


def _anchor(title: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", title.strip().lower()).replace(" ", "-")


def headings(text: str, levels: str = "2,4") -> list[str]:
    """The titles of the ``##`` .. ``####`` headings of a markdown text, fenced code left out."""
    prose = re.sub(r"^```.*?^```", "", text, flags=re.M | re.S)
    return re.findall(rf"^#{{{levels}}} (.+?)\s*$", prose, flags=re.M)


def anchors(text: str) -> set[str]:
    """Every heading anchor GitHub makes for ``text`` (a repeated title gets ``-1``, ``-2``, ...)."""
    seen: Counter[str] = Counter()
    out = set()
    for title in re.findall(r"^#{1,6} (.+?)\s*$", re.sub(r"^```.*?^```", "", text, flags=re.M | re.S), flags=re.M):
        base = _anchor(title)
        out.add(base if not seen[base] else f"{base}-{seen[base]}")
        seen[base] += 1
    return out


def test_the_contents_list_every_section_in_order_with_its_anchor() -> None:
    text = DOCS.read_text(encoding="utf-8")
    contents = text[text.index("**Contents**"):text.index("## 1.")]
    listed = re.findall(r"^\s*- \[(.+?)\]\(#(.+?)\)$", contents, flags=re.M)
    assert [title for title, _ in listed] == headings(text[text.index("## 1."):])
    assert all(anchor == _anchor(title) for title, anchor in listed)


def test_the_measurements_list_every_section_in_order_with_its_anchor() -> None:
    text = MEASUREMENTS.read_text(encoding="utf-8")
    first = text.index("\n## ")
    listed = re.findall(r"^\s*- \[(.+?)\]\(#([\w-]+)\)$", text[:first], flags=re.M)
    assert [title for title, _ in listed] == headings(text[first:], "2,3")
    assert all(anchor == _anchor(title) for title, anchor in listed)


LINK = re.compile(r"\]\(((?:[\w./-]+\.md)?)#([^)\s]+)\)")
"""A markdown link to a heading: ``[..](#anchor)`` or ``[..](file.md#anchor)``."""


def test_every_link_to_a_heading_in_the_docs_and_readme_resolves() -> None:
    """Every ``[..](#anchor)`` and ``[..](<doc>.md#anchor)`` of both docs and the README names a heading there."""
    readme = ROOT / "README.md"
    checked = 0
    for page in (DOCS, MEASUREMENTS, readme):
        text = re.sub(r"^```.*?^```", "", page.read_text(encoding="utf-8"), flags=re.M | re.S)
        for target, anchor in LINK.findall(text):
            linked = (page.parent / target).resolve() if target else page
            assert linked.is_file(), f"{page.name} links to a missing file: {target}#{anchor}"
            assert anchor in anchors(linked.read_text(encoding="utf-8")), \
                f"{page.name} links to #{anchor}, which {linked.name} has no heading for"
            checked += 1
    assert checked > 100
    assert re.search(r"\(benchmarks\.md#[\w-]+\)", DOCS.read_text(encoding="utf-8"))


def test_section_3_3_rows_are_short_and_each_links_to_the_note_that_explains_it() -> None:
    """One line per field, at most MAX_ROW characters; what the row leaves out is in the note it links to."""
    lines = table_lines(section("3.3 W&B fields"))
    longest = max(lines, key=len)
    assert len(longest) <= MAX_ROW, f"a §3.3 row of {len(longest)} characters: {longest[:80]}..."
    for name in documented_fields():
        note = field_note(name)
        assert "Logged:" in note or name.startswith("failed_check/"), f"the note of `{name}` says not when it is logged"


def test_every_logged_step_record_field_has_exactly_one_row() -> None:
    """Read from :class:`StepRecord` itself: each per-step field (a contract table's) is one row of §3.3."""
    per_step = [f.name for f in fields(StepRecord) if f.metadata.get("table")]
    counts = Counter(documented_fields())
    assert per_step and {name: counts[name] for name in per_step} == dict.fromkeys(per_step, 1)
