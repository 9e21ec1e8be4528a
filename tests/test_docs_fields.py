"""The docs stay in step with the code and navigable: §3.3 W&B fields both ways, §2.2 settings, contents and links."""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import fields

import yaml

from shopsim_metrics.record import contract
from shopsim_metrics.record.records import StepRecord
from shopsim_metrics.sinks.wandb_sink import DECISIONS_KEY, PROMPTS_KEY, SKIPPED_PROMPTS_KEY, WandbSink, record_scalars
from shopsimrl import slime_runtime
from shopsim_metrics.settings import DEFAULTS, SETTINGS
from tests.docs_pages import (MEASUREMENTS, README, REFERENCE_INDEX, all_doc_pages, anchor, anchors,
                              numeric_key, prose, reference_pages, section, sections)
from tests.wandb_helpers import make_record

FIELDS_HEADER = ["field", "meaning", "when logged", "explained in"]
MAX_ROW = 300
"""Longest line of the §3.3 field table: a short meaning per field, the detail in the section it links to."""


def section_text(number: str) -> str:
    """The text of the reference section numbered ``number``, up to the next heading of its level or higher."""
    return section(number).body


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
    header, rows = table(section_text("3.3"))
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
    (row,) = [r for r in table(section_text("3.3"))[1] if r[0] == f"`{name}`"]
    linked = re.fullmatch(r"\[§[\d.]+\]\(#([\w-]+)\)", row[3]).group(1)
    text = section("3.3").page.read_text(encoding="utf-8")
    (title,) = [t for t in headings(text) if anchor(t) == linked]
    body = re.search(rf"^#+ {re.escape(title)}\s*$(.*?)(?=^#|\Z)", text, flags=re.M | re.S).group(1)
    match = re.search(rf"^- `{re.escape(name)}`: (.*?)(?=^- |^\s*$)", body, flags=re.M | re.S)
    assert match, f"§3.3 links `{name}` to '{title}', which has no note '- `{name}`: ...'"
    return match.group(1)


def test_decisions_note_names_every_ledger_column() -> None:
    note = field_note(DECISIONS_KEY.removeprefix(contract.WANDB_PREFIX))
    assert re.findall(r"`(\w+)`", note.split(". Logged:")[0]) == list(contract.LEDGER_COLUMNS)


def test_settings_table_lists_every_default() -> None:
    header, rows = table(section_text("2.2"))
    assert header == ["key", "default", "meaning"]
    documented = {}
    for key, default, meaning in rows:
        documented[key.strip("`")] = yaml.safe_load(default.strip("`"))
        assert meaning
    assert documented == DEFAULTS


def test_settings_table_is_the_settings_table_row_by_row() -> None:
    """§2.2 is derived from ``shopsim_metrics.settings.SETTINGS``: same keys, order, defaults and doc lines."""
    _, rows = table(section_text("2.2"))
    documented = [(key.strip("`"), yaml.safe_load(default.strip("`")), meaning) for key, default, meaning in rows]
    assert documented == [(s.name, s.default, s.doc) for s in SETTINGS]


def test_docs_name_the_three_hooks_that_exist() -> None:
    text = "\n".join(page.read_text(encoding="utf-8") for page in all_doc_pages())
    for flag, name in (("--dynamic-sampling-filter-path", "fully_scored_group_filter"),
                       ("--rollout-all-samples-process-path", "record_all_samples"),
                       ("--custom-rollout-log-function-path", "log_rollout_step")):
        assert f"{flag} shopsimrl.slime_runtime.{name}" in text
        assert name in slime_runtime.__all__
    assert "--custom-config-path" in text and "TechnicalFailureLimitExceeded" in text


def headings(text: str, levels: str = "1,4") -> list[str]:
    """The titles of the ``#`` .. ``####`` headings of a markdown text, fenced code left out."""
    return re.findall(rf"^#{{{levels}}} (.+?)\s*$", prose(text), flags=re.M)


def test_the_reference_index_lists_every_section_in_order_with_its_page_and_anchor() -> None:
    """docs/reference/README.md: one line per numbered section, in the order of the numbers, linked to its page."""
    listed = re.findall(r"^\s*- \[(.+?)\]\((\S+?)\)$", REFERENCE_INDEX.read_text(encoding="utf-8"), flags=re.M)
    ordered = sorted(sections(), key=lambda s: numeric_key(s.number))
    assert [title for title, _ in listed] == [s.title for s in ordered]
    assert [link for _, link in listed] == [s.link for s in ordered]


def test_the_measurements_list_every_section_in_order_with_its_anchor() -> None:
    text = MEASUREMENTS.read_text(encoding="utf-8")
    first = text.index("\n## ")
    listed = re.findall(r"^\s*- \[(.+?)\]\(#([\w-]+)\)$", text[:first], flags=re.M)
    assert [title for title, _ in listed] == headings(text[first:], "2,3")
    assert all(link == anchor(title) for title, link in listed)


LINK = re.compile(r"\]\(((?:[\w./-]+\.md)?)#([^)\s]+)\)")
"""A markdown link to a heading: ``[..](#anchor)`` or ``[..](file.md#anchor)``."""


def test_every_link_to_a_heading_in_the_docs_and_readme_resolves() -> None:
    """Every ``[..](#anchor)`` and ``[..](<doc>.md#anchor)`` of the docs pages and the README names a heading there."""
    checked = 0
    for page in (*all_doc_pages(), README):
        text = re.sub(r"^```.*?^```", "", page.read_text(encoding="utf-8"), flags=re.M | re.S)
        for target, heading in LINK.findall(text):
            linked = (page.parent / target).resolve() if target else page
            assert linked.is_file(), f"{page.name} links to a missing file: {target}#{heading}"
            assert heading in anchors(linked.read_text(encoding="utf-8")), \
                f"{page.name} links to #{heading}, which {linked.name} has no heading for"
            checked += 1
    assert checked > 100
    assert any(re.search(r"\(\.\./benchmarks\.md#[\w-]+\)", page.read_text(encoding="utf-8")) for page in reference_pages())


def test_section_3_3_rows_are_short_and_each_links_to_the_note_that_explains_it() -> None:
    """One line per field, at most MAX_ROW characters; what the row leaves out is in the note it links to."""
    lines = table_lines(section_text("3.3"))
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
