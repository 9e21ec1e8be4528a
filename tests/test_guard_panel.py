"""The guard's panel draws what it names: the estimate against a line at its limit, the cap, and the probes apart.

Checked on the spec (both renderers read it), on the offline page, on the W&B workspace and on a simulated predictive
run's records: every record of a predictive step carries the limit in force, and the panel's title states what is
drawn, never a verdict such as "held under its limit" that the data may contradict."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from shopsim_metrics.dashboards.html import step_figure_dict, write_html_dashboard
from shopsim_metrics.dashboards.data import load_dashboard_data
from shopsim_metrics.dashboards.spec import dashboard_spec
from shopsim_metrics.simulator.config import SimConfig
from shopsim_metrics.simulator.loop import simulate

SPEC = dashboard_spec()
PROBABILITY_KEYS = {"skip_lost_signal_estimate", "skip_max_lost_signal", "skip_cap"}
VERDICT_WORDS = ("held", "kept under", "within its limit", "under its limit", "safe")


def test_the_guard_panel_draws_a_limit_line_and_no_count_on_its_probability_axis():
    guard = SPEC.panel("skip_guard")
    assert {s.key for s in guard.series} == PROBABILITY_KEYS
    limit = next(s for s in guard.series if s.key == "skip_max_lost_signal")
    assert limit.style == "threshold"
    probes = SPEC.panel("skip_probes")
    assert "skip_probe_count" in probes.keys() and not PROBABILITY_KEYS & set(probes.keys())
    assert all(word not in p.title.lower() for p in (guard, probes) for word in VERDICT_WORDS)
    assert "lost signal" in guard.title.lower() and "limit" in guard.title.lower() and "cap" in guard.title.lower()
    assert "probes" in probes.title.lower()


@pytest.fixture(scope="module")
def predictive_records():
    config = SimConfig(steps=12, prompt_pool=48, prompt_skip="predictive", prompt_skip_max_lost_signal=0.07,
                       technical_rate=0.0, skill_start=0.0, skill_end=0.0, difficulty_spread=6.0)
    return simulate(config).records


def test_a_predictive_runs_records_carry_the_limit_in_force(predictive_records):
    assert predictive_records and all(r.skip_max_lost_signal == 0.07 for r in predictive_records)
    assert all(r.skip_probe_count is not None for r in predictive_records)


def test_the_offline_page_draws_the_limit_as_a_dashed_line_at_the_setting(predictive_records, tmp_path):
    figure = step_figure_dict(SPEC.panel("skip_guard"), load_dashboard_data(predictive_records))
    limit = next(t for t in figure["data"] if t["meta"] == "skip_max_lost_signal")
    assert limit["line"]["dash"] == "dash" and set(limit["y"]) == {0.07}
    page = write_html_dashboard(predictive_records, tmp_path / "d.html").read_text()
    assert 'id="panel-skip_guard"' in page and 'id="panel-skip_probes"' in page


def test_a_run_that_does_not_skip_logs_no_limit(predictive_records):
    off = simulate(SimConfig(steps=3, prompt_pool=16, technical_rate=0.0)).records
    assert all(r.skip_max_lost_signal is None and "skip_max_lost_signal" not in r.to_dict() for r in off)
    greso = simulate(SimConfig(steps=3, prompt_pool=16, technical_rate=0.0, prompt_skip="greso")).records
    assert all(r.skip_max_lost_signal is None for r in greso)


def test_the_wandb_workspace_plots_the_limit_beside_the_estimate_and_the_probes_apart():
    pytest.importorskip("wandb_workspaces")
    from shopsim_metrics.dashboards.wandb_workspace import build_workspace, iter_workspace_panels, workspace_json

    panels = list(iter_workspace_panels(workspace_json(build_workspace())))
    by_title = {p["config"].get("chartTitle"): json.dumps(p["config"]) for p in panels if "chartTitle" in p["config"]}
    guard = by_title[SPEC.panel("skip_guard").title]
    assert "rollout/shopsim/skip_max_lost_signal" in guard and "rollout/shopsim/skip_lost_signal_estimate" in guard
    assert "rollout/shopsim/skip_probe_count" not in guard
    assert "rollout/shopsim/skip_probe_count" in by_title[SPEC.panel("skip_probes").title]


def test_the_limit_follows_a_record_that_changes_it(predictive_records):
    """A resumed run with another limit: the line moves at the step it changed (it is per step, not a constant)."""
    changed = [replace(r, skip_max_lost_signal=0.2 if r.rollout_id >= 6 else r.skip_max_lost_signal)
               for r in predictive_records]
    figure = step_figure_dict(SPEC.panel("skip_guard"), load_dashboard_data(changed))
    limit = next(t for t in figure["data"] if t["meta"] == "skip_max_lost_signal")
    assert limit["y"] == [0.07 if r.rollout_id < 6 else 0.2 for r in changed]
