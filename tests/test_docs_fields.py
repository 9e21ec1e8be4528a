"""docs/training_monitoring.md stays in step with the code: §3.3 W&B fields both ways, §2.2 settings."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from shopsim_metrics.step import contract
from shopsim_metrics.sinks.wandb_sink import DECISIONS_KEY, PROMPTS_KEY, SKIPPED_PROMPTS_KEY, WandbSink, record_scalars
from shopsimrl import slime_runtime
from shopsim_metrics.settings import DEFAULTS, SETTINGS
from tests.wandb_helpers import make_record

DOCS = Path(__file__).resolve().parents[1] / "docs" / "training_monitoring.md"
FIELDS_HEADER = ["key", "definition / formula", "denominator", "when logged", "how to read it"]


def section(heading: str) -> str:
    """The text of a ``### <heading>`` section, up to the next heading of the same or higher level."""
    text = DOCS.read_text(encoding="utf-8")
    match = re.search(rf"^### {re.escape(heading)}\s*$(.*?)(?=^##\s|^###\s|\Z)", text, flags=re.M | re.S)
    assert match, f"docs/training_monitoring.md has no section '### {heading}'"
    return match.group(1)


def table(text: str) -> tuple[list[str], list[list[str]]]:
    """Header and rows of the first markdown table in ``text``."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip().startswith("|")]
    cells = [[c.strip() for c in ln.strip("|").split("|")] for ln in lines]
    return cells[0], [row for row in cells[2:]]


def documented_keys() -> list[str]:
    header, rows = table(section("3.3 W&B fields"))
    assert header == FIELDS_HEADER
    keys = []
    for row in rows:
        assert len(row) == len(FIELDS_HEADER) and all(row), f"incomplete §3.3 row: {row}"
        match = re.fullmatch(r"`([^`]+)`", row[0])
        assert match, f"the key cell of a §3.3 row must be one `key`: {row[0]!r}"
        keys.append(match.group(1))
    return keys


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


def test_decisions_row_names_every_ledger_column() -> None:
    (row,) = [r for r in table(section("3.3 W&B fields"))[1] if r[0] == f"`{DECISIONS_KEY}`"]
    assert re.findall(r"`(\w+)`", row[1]) == list(contract.LEDGER_COLUMNS)


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


def test_the_contents_list_every_section_in_order_with_its_anchor() -> None:
    text = DOCS.read_text(encoding="utf-8")
    contents = text[text.index("**Contents**"):text.index("## 1.")]
    listed = re.findall(r"^\s*- \[(.+?)\]\(#(.+?)\)$", contents, flags=re.M)
    headings = re.findall(r"^#{2,3} (.+)$", text[text.index("## 1."):], flags=re.M)
    assert [title for title, _ in listed] == headings
    assert all(anchor == _anchor(title) for title, anchor in listed)


def test_every_link_to_the_measurements_names_a_section_they_have() -> None:
    measurements = DOCS.with_name("benchmarks.md").read_text(encoding="utf-8")
    anchors = {_anchor(title) for title in re.findall(r"^#{2,3} (.+)$", measurements, flags=re.M)}
    links = re.findall(r"\(benchmarks\.md#([\w-]+)\)", DOCS.read_text(encoding="utf-8"))
    assert links and set(links) <= anchors
    listed = re.findall(r"^- \[.+?\]\(#([\w-]+)\)$", measurements, flags=re.M)
    assert listed and set(listed) <= anchors
