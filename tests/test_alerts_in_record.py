"""Alerts are part of the record: each step record carries the alerts raised in its step, as sent to W&B."""

from __future__ import annotations

import json

import pytest
from conftest import make_args, spread, technical

from shopsim_metrics.errors import TechnicalFailureLimitExceeded
from shopsim_metrics.sinks import MemorySink
from shopsim_metrics.readers import read_steps
from shopsimrl import slime_runtime


@pytest.fixture(autouse=True)
def _fresh_runtime():
    yield
    slime_runtime.reset_runtime()


def _step(args, groups) -> None:
    for group in groups:
        slime_runtime.fully_scored_group_filter(args, group)


def test_the_warn_of_a_step_is_in_that_steps_record_and_nowhere_else(tmp_path) -> None:
    args = make_args(shopsim_run_dir=str(tmp_path), shopsim_max_consecutive_failed_groups=8)
    memory = MemorySink()
    slime_runtime.configure(args, sinks=[memory])
    # step 0: clean; step 1: a streak of 5 technical groups (warning threshold 4 of 8); step 2: clean
    plans = [[spread(g) for g in range(32)],
             [technical(g) for g in range(5)] + [spread(g) for g in range(5, 40)],
             [spread(g) for g in range(32)]]
    for step, groups in enumerate(plans):
        _step(args, groups)
        slime_runtime.log_rollout_step(step, args, [], {}, 1.0)
    alerts = {r.rollout_id: r.alerts for r in memory.records}
    assert alerts[0] == [] and alerts[2] == []
    (alert,) = alerts[1]
    (sent,) = memory.alerts
    assert alert == {"level": sent.level, "title": sent.title, "text": sent.text}
    assert alert["level"] == "WARN" and alert["title"].endswith("rollout step 1")
    assert {r.technical_failure_warn_at for r in memory.records} == {4}
    assert all(r.technical_failure_limit == 8 for r in memory.records)


def test_the_terminated_steps_record_on_disk_carries_the_error(tmp_path) -> None:
    args = make_args(shopsim_run_dir=str(tmp_path), shopsim_max_consecutive_failed_groups=2)
    slime_runtime.configure(args, sinks=None)  # JSONL in the run dir
    slime_runtime.fully_scored_group_filter(args, technical(0))
    with pytest.raises(TechnicalFailureLimitExceeded):
        slime_runtime.fully_scored_group_filter(args, technical(1))
    (line,) = (tmp_path / "steps.jsonl").read_text().splitlines()
    record = json.loads(line)
    assert [a["level"] for a in record["alerts"]] == ["ERROR"]
    assert "terminating" in record["alerts"][0]["title"]
    assert read_steps(tmp_path)[0].alerts == record["alerts"]


def test_alerts_off_leaves_no_alerts_and_no_threshold(tmp_path) -> None:
    args = make_args(shopsim_run_dir=str(tmp_path), shopsim_alerts=False)
    memory = MemorySink()
    slime_runtime.configure(args, sinks=[memory])
    _step(args, [technical(g) for g in range(5)] + [spread(g) for g in range(5, 40)])
    slime_runtime.log_rollout_step(0, args, [], {}, 1.0)
    (record,) = memory.records
    assert record.alerts == [] and record.technical_failure_warn_at is None and memory.alerts == []
