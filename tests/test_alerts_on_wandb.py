"""The alerts on the W&B timeline: a number per step in a real offline run, the workspace's alerts panel,
both reference lines of the streak panel, and "Off in this run" notes in a workspace built from a run."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import make_args, spread, technical

from shopsim_metrics.cli import main
from shopsim_metrics.dashboards import wandb_workspace as wbw
from shopsim_metrics.dashboards.data import load_dashboard_data
from shopsim_metrics.dashboards.html import render_html
from shopsim_metrics.dashboards.spec import dashboard_spec
from shopsim_metrics.readers.wandb_offline import find_run_dirs, read_offline_run
from shopsim_metrics.record import contract
from shopsim_metrics.record.records import StepRecord
from shopsimrl import slime_runtime
from tests.wandb_helpers import wandb_env  # noqa: F401 - fixture

COUNT, LEVEL = (contract.wandb_key(name) for name in contract.ALERT_FIELDS)
WARN_AT, LIMIT = contract.wandb_key("technical_failure_warn_at"), contract.wandb_key("technical_failure_limit")


@pytest.fixture(autouse=True)
def _fresh_runtime():
    yield
    slime_runtime.reset_runtime()


def _three_steps_with_a_streak_in_step_1(args) -> None:
    """Step 0 clean; step 1 a streak of 5 technical groups (warning threshold 4 of 8); step 2 clean."""
    slime_runtime.configure(args, sinks=None)  # the sinks of the settings: JSONL and a standalone W&B run
    plans = [[spread(g) for g in range(32)],
             [technical(g) for g in range(5)] + [spread(g) for g in range(5, 40)],
             [spread(g) for g in range(32)]]
    for step, groups in enumerate(plans):
        for group in groups:
            slime_runtime.fully_scored_group_filter(args, group)
        slime_runtime.log_rollout_step(step, args, [], {}, 1.0)
    slime_runtime.reset_runtime()  # finishes the standalone run


def _history(wandb_root: Path) -> list[dict]:
    (run_dir,) = find_run_dirs(wandb_root)
    return [row for row in read_offline_run(run_dir).history if contract.wandb_key("wave_count") in row]


def test_a_step_with_an_alert_logs_it_on_the_timeline_and_every_other_step_logs_zero(wandb_env, tmp_path):  # noqa: F811
    args = make_args(shopsim_run_dir=str(tmp_path / "run"), shopsim_max_consecutive_failed_groups=8)
    _three_steps_with_a_streak_in_step_1(args)
    rows = _history(wandb_env)
    assert [row[contract.WANDB_STEP_KEY] for row in rows] == [0, 1, 2]
    assert [row[COUNT] for row in rows] == [0, 1, 0]
    assert [row[LEVEL] for row in rows] == [0, contract.ALERT_LEVEL_CODES["WARN"], 0]
    assert [(row[WARN_AT], row[LIMIT]) for row in rows] == [(4, 8)] * 3  # both lines of the streak panel
    (run_dir,) = find_run_dirs(wandb_env)
    assert [a["level"] for a in read_offline_run(run_dir).alerts] == ["WARN"]  # the one alert W&B lists


def test_with_the_alerts_off_no_alert_number_and_no_warning_line_is_logged(wandb_env, tmp_path):  # noqa: F811
    args = make_args(shopsim_run_dir=str(tmp_path / "run"), shopsim_max_consecutive_failed_groups=8,
                     shopsim_alerts=False)
    _three_steps_with_a_streak_in_step_1(args)
    rows = _history(wandb_env)
    assert len(rows) == 3 and all(row[LIMIT] == 8 for row in rows)
    assert not any(key in row for row in rows for key in (COUNT, LEVEL, WARN_AT))


# --- the workspace: the spec object built, no network --------------------------------------------


def _plots_by_title(workspace) -> dict[str, object]:
    return {p.title: p for section in workspace.sections for p in section.panels if hasattr(p, "title")}


def test_the_workspace_draws_the_alerts_per_step_and_both_lines_of_the_streak_panel():
    spec = dashboard_spec()
    plots = _plots_by_title(wbw.build_workspace("team", "project"))
    alerts = plots[spec.panel("alerts").title]
    assert alerts.x == contract.WANDB_STEP_KEY and alerts.y == [COUNT, LEVEL]
    streak = plots[spec.panel("technical_streak").title]
    assert WARN_AT in streak.y and LIMIT in streak.y
    assert spec.panel("alerts").section == spec.panel("technical_streak").section  # side by side
    assert not any(type(p).__name__ == "MarkdownPanel" and "Off in this run" in p.markdown
                   for section in wbw.build_workspace().sections for p in section.panels)  # a template: no run


def _run(tmp_path: Path, *, alerts_on: bool) -> Path:
    from shopsim_metrics.sinks import JsonlSink

    sink = JsonlSink(tmp_path / "run")
    for step in range(3):
        alerts = [{"level": "WARN", "title": f"t{step}", "text": "x"}] if alerts_on and step == 1 else []
        sink.emit(StepRecord(rollout_id=step, wave_count=1, accepted_group_count=32, train_group_count=16,
                             technical_failure_limit=8, technical_failure_warn_at=4 if alerts_on else None,
                             alerts=alerts))
    sink.close()
    return tmp_path / "run"


def _off_notes(workspace) -> dict[str, str]:
    return {section.name: p.markdown for section in workspace.sections for p in section.panels
            if type(p).__name__ == "MarkdownPanel" and p.markdown.startswith("**Off in this run**")}


def test_a_workspace_built_from_a_run_names_what_is_off_in_it_as_the_html_page_does(tmp_path):
    data = load_dashboard_data(_run(tmp_path, alerts_on=False))
    notes = _off_notes(wbw.build_workspace(data=data))
    spec = dashboard_spec()
    assert "prompt skipping is off" in notes["Skipping"]
    assert f"{spec.panel('alerts').title}: the alerts are off (shopsim_alerts: false)" in notes["Health and waste"]
    assert spec.panel("technical_streak").title not in notes["Health and waste"]  # it has data: the limit, the streak
    assert "Wave dynamics" not in notes  # every panel there has data
    page = render_html(data)
    assert 'id="panel-alerts"' in page and "Off in this run: the alerts are off" in page

    data = load_dashboard_data(_run(tmp_path / "on", alerts_on=True))
    assert spec.panel("alerts").title not in _off_notes(wbw.build_workspace(data=data)).get("Health and waste", "")
    assert data.column("alert_count") == [0, 1, 0] and data.column("alert_level") == [0, 2, 0]


def test_dashboard_wandb_dry_run_from_a_run_writes_the_notes(tmp_path, capsys):
    run = _run(tmp_path, alerts_on=False)
    assert main(["dashboard", "wandb", "--dry-run", "--from", str(run), "--out", str(tmp_path / "tpl")]) == 0
    workspace = wbw.load_workspace_json((tmp_path / "tpl" / wbw.WORKSPACE_JSON_NAME).read_text())
    assert "the alerts are off" in _off_notes(workspace)["Health and waste"]
    report = (tmp_path / "tpl" / wbw.REPORT_JSON_NAME).read_text()
    assert "Off in this run" in report and "the alerts are off" in report
