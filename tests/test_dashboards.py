"""The dashboard spec, its two renderers (offline HTML, W&B workspace/report) and the CLI.

The spec may reference only keys of the contract; the W&B dry run must need no network and its
JSON must load back through wandb-workspaces' own models; each renderer must draw every panel.
"""

from __future__ import annotations

import dataclasses
import json
import re
import socket
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dashboard_records import make_records
from shopsim_metrics.record import contract
from shopsim_metrics.cli import main as cli_main
from shopsim_metrics.dashboards import spec as spec_mod
from shopsim_metrics.dashboards.data import history_to_steps, load_dashboard_data
from shopsim_metrics.dashboards.html import render_html, series_values, step_figure_dict, write_html_dashboard


def step_figure(panel, data):
    """The panel's figure as a plotly object, to read its traces and layout."""
    import plotly.graph_objects as go

    return go.Figure(step_figure_dict(panel, data))
from shopsim_metrics.dashboards.spec import DashboardSpec, Panel, Series, dashboard_spec, load_panels_json
from shopsim_metrics.record.records import StepRecord
from shopsim_metrics.sinks import JsonlSink
from wandb_helpers import wandb_env  # noqa: F401  (fixture)

ROOT = Path(__file__).resolve().parents[1]
DASHBOARDS = ROOT / "dashboards"
SPEC = dashboard_spec()


@pytest.fixture(scope="module")
def records() -> list[StepRecord]:
    return make_records()


# --- the spec -----------------------------------------------------------------------------------
def test_every_key_the_spec_references_exists_in_the_contract() -> None:
    assert spec_mod.unknown_keys(SPEC) == []
    record_fields = {f.name for f in dataclasses.fields(StepRecord)}
    for panel in SPEC.panels:
        assert panel.keys(), panel.id
        assert set(panel.step_keys()) <= set(contract.WANDB_SCALAR_NAMES), panel.id
        assert set(panel.ledger_keys()) <= set(contract.LEDGER_COLUMNS), panel.id
        assert set(panel.knob_lines) <= record_fields, panel.id
        if panel.wandb_table is not None:
            from shopsim_metrics.sinks.wandb_sink import DECISIONS_KEY

            assert panel.wandb_table in contract.RECORD_IDENTITY_KEYS
            assert contract.wandb_key(panel.wandb_table) == DECISIONS_KEY
    assert SPEC.x_key == contract.WANDB_STEP_KEY and SPEC.key_prefix == contract.WANDB_PREFIX


def test_unknown_keys_catches_a_key_outside_the_contract() -> None:
    bad = Panel(id="bad", title="t", description="d", kind="line", source="steps", section=SPEC.sections[0],
                series=(Series("success_rate", "ok"), Series("succes_rate", "typo")))
    ledger = Panel(id="led", title="t", description="d", kind="ledger_remaining", source="ledger",
                   section=SPEC.sections[0], series=(Series("remaining", "not a column"),), x_key="order")
    broken = dataclasses.replace(SPEC, panels=SPEC.panels + (bad, ledger))
    assert spec_mod.unknown_keys(broken) == ["bad:succes_rate", "led:remaining"]


def test_spec_has_the_required_panels_with_their_keys() -> None:
    ids = [p.id for p in SPEC.panels]
    assert len(ids) == len(set(ids)), "panel ids must be unique"
    outcomes = SPEC.panel("outcomes")
    assert outcomes.kind == "stacked_bar"
    assert [s.label.split(" ")[0] for s in outcomes.series] == ["trained", "fallback", "technical", "zero-std",
                                                                "surplus", "aborted"]
    assert set(outcomes.keys()) == {"train_group_count", "fallback_group_count", "technical_group_drop_count",
                                     "zero_std_group_drop_count", "surplus_group_count", "aborted_group_count"}
    assert SPEC.panel("waves").keys() == ("wave_count", "predicted_second_wave_probability")
    assert SPEC.panel("success_rate").keys() == ("success_rate", "train_success_rate")
    assert SPEC.panel("reward_mean").keys() == ("reward_mean", "train_reward_mean")
    assert SPEC.panel("zero_advantage").keys() == ("zero_advantage_train_fraction",)
    assert set(SPEC.panel("technical_streak").keys()) == {
        "max_consecutive_technical_failures", "consecutive_technical_failures", "technical_failure_warn_at",
        "technical_failure_limit"}
    assert SPEC.panel("wasted_samples").keys() == ("wasted_sample_fraction",)
    ledger = SPEC.panel("remaining_ledger")
    assert ledger.source == "ledger" and ledger.step_choice == "latest_multi_wave"
    assert {"order", "remaining_before", "outcome", "waves_open"} <= set(ledger.ledger_keys())
    assert all(p.section in SPEC.sections for p in SPEC.panels)


def test_spec_json_round_trips_and_the_committed_panels_json_is_current(tmp_path: Path) -> None:
    assert DashboardSpec.from_dict(json.loads(SPEC.to_json())) == SPEC
    written = spec_mod.write_panels_json(tmp_path / "panels.json")
    assert load_panels_json(written) == SPEC
    committed = DASHBOARDS / "panels.json"
    assert committed.read_text() == written.read_text(), (
        "dashboards/panels.json is stale: run `shopsim-metrics dashboard spec --out dashboards/panels.json`")
    data = json.loads(committed.read_text())
    assert data["panels"][0]["step_keys"] == list(SPEC.panels[0].step_keys())


# --- the W&B renderer ---------------------------------------------------------------------------
@pytest.fixture
def no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    """Any socket connection or W&B API construction fails the test."""

    def refuse(*args, **kwargs):
        raise AssertionError("the dry run tried to reach the network")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    import wandb

    monkeypatch.setattr(wandb, "Api", refuse)


def _step_names_of(metrics: list[str]) -> list[str]:
    assert all(m.startswith(contract.WANDB_PREFIX) for m in metrics), metrics
    return [m[len(contract.WANDB_PREFIX):] for m in metrics]


def test_wandb_dry_run_needs_no_network_and_round_trips(tmp_path: Path, no_network: None) -> None:
    from shopsim_metrics.dashboards import wandb_workspace as wbw

    ws_path, rep_path = wbw.write_wandb_templates(tmp_path, entity="team", project="shop")
    ws_json, rep_json = json.loads(ws_path.read_text()), json.loads(rep_path.read_text())
    # back through the library's own model classes, and out again: the same JSON
    workspace = wbw.load_workspace_json(ws_path.read_text())
    report = wbw.load_report_json(rep_path.read_text())
    assert wbw.workspace_json(workspace) == ws_json
    assert wbw.report_json(report) == rep_json
    assert (workspace.entity, workspace.project, report.entity, report.project) == ("team", "shop", "team", "shop")
    assert workspace.settings.x_axis == contract.WANDB_STEP_KEY
    assert [s.name for s in workspace.sections] == list(SPEC.sections)
    assert ws_json["spec"]["section"]["settings"]["shouldAutoGeneratePanels"] is False


@pytest.mark.parametrize("which", ["workspace", "report"])
def test_wandb_renderer_draws_every_panel_with_contract_keys(tmp_path: Path, no_network: None, which: str) -> None:
    from shopsim_metrics.dashboards import wandb_workspace as wbw

    ws_path, rep_path = wbw.write_wandb_templates(tmp_path)
    data = json.loads((ws_path if which == "workspace" else rep_path).read_text())
    panels = list(wbw.iter_workspace_panels(data) if which == "workspace" else wbw.iter_report_panels(data))
    by_id = {p["__id__"]: p for p in panels}
    assert len(by_id) == len(panels), "W&B panel ids must be unique"
    for panel in SPEC.panels:
        drawn = by_id.get(wbw.panel_uid(panel.id))
        assert drawn is not None, f"spec panel {panel.id} has no W&B panel"
        cfg = drawn["config"]
        assert drawn["viewType"] == "Run History Line Plot" and cfg["chartTitle"] == panel.title
        assert cfg["xAxis"] == contract.WANDB_STEP_KEY
        names = _step_names_of(cfg["metrics"])
        assert set(names) <= set(contract.WANDB_SCALAR_NAMES)
        if panel.source == "ledger":
            assert names == list(panel.step_summary)
            table = by_id[wbw.panel_uid(panel.id, "table")]
            assert table["viewType"] == "Weave" and contract.wandb_key("decisions") in json.dumps(table)
            note = by_id[wbw.panel_uid(panel.id, wbw.LEDGER_NOTE_SUFFIX)]
            assert contract.STEPS_FILE_NAME in note["config"]["value"]
        elif panel.kind == "stacked_bar" and any(s.minus for s in panel.series):
            # W&B cannot subtract keys: the stack is the train batch, drops, surplus and aborted
            # (disjoint, summing to submitted); the fallback part of the train batch is its own panel.
            assert cfg["plotType"] == "stacked-area"
            assert names == ["train_group_count", "technical_group_drop_count", "zero_std_group_drop_count",
                             "surplus_group_count", "aborted_group_count"]
            companion = by_id[wbw.panel_uid(panel.id, wbw.FALLBACK_SUFFIX)]
            assert _step_names_of(companion["config"]["metrics"]) == ["train_group_count", "fallback_group_count"]
        else:
            assert names == [s.key for s in panel.series if s.axis == "y"]
            regex = wbw.breakdown_regex(panel)
            if panel.kind == "stacked_bar" and regex is None:  # disjoint parts (tokens by outcome): stacked as they are
                assert cfg["plotType"] == "stacked-area"
            if regex is not None:  # the per-tool (per-reason) keys, found by their pattern beside the totals
                each = by_id[wbw.panel_uid(panel.id, "each")]["config"]
                assert each["useMetricRegex"] is True and each["metricRegex"] == regex
            right = [s.key for s in panel.series if s.axis == "y2"]
            if right:  # one y axis per W&B plot: the right-axis series get their own
                assert _step_names_of(by_id[wbw.panel_uid(panel.id, "y2")]["config"]["metrics"]) == right
    if which == "report":
        grids = [b for b in data["spec"]["blocks"] if b["type"] == "panel-grid"]
        assert len(grids) == len(SPEC.sections)
        for grid in grids:
            layouts = [(p["layout"]["x"], p["layout"]["y"]) for p in grid["metadata"]["panelBankSectionConfig"]["panels"]]
            assert len(set(layouts)) == len(layouts), "report panels must not overlap"
            assert all(rs.get("project") is None for rs in grid["metadata"]["runSets"]), "template: no project lookup"


def test_committed_wandb_templates_are_current(tmp_path: Path, no_network: None) -> None:
    from shopsim_metrics.dashboards import wandb_workspace as wbw

    for path in wbw.write_wandb_templates(tmp_path):
        committed = DASHBOARDS / path.name
        assert committed.read_text() == path.read_text(), (
            f"dashboards/{path.name} is stale: run `shopsim-metrics dashboard wandb --dry-run --out dashboards`")


def test_wandb_save_saves_workspace_and_report_bound_to_the_project(monkeypatch: pytest.MonkeyPatch) -> None:
    import wandb_workspaces.reports.v2 as wr
    import wandb_workspaces.workspaces as ws

    from shopsim_metrics.dashboards import wandb_workspace as wbw

    saved = []

    class Saved:
        def __init__(self, obj):
            self.url = f"https://example.invalid/{type(obj).__name__}"

    def fake_save(self, *args, **kwargs):
        saved.append(self)
        return Saved(self)

    monkeypatch.setattr(ws.Workspace, "save", fake_save)
    monkeypatch.setattr(wr.Report, "save", fake_save)
    urls = wbw.save_to_wandb("team", "shop")
    assert urls == ("https://example.invalid/Workspace", "https://example.invalid/Report")
    workspace, report = saved
    assert (workspace.entity, workspace.project) == ("team", "shop")
    grids = [b for b in report.blocks if isinstance(b, wr.PanelGrid)]
    assert grids and all((rs.entity, rs.project) == ("team", "shop") for g in grids for rs in g.runsets)


def test_missing_wandb_workspaces_gives_an_install_hint(monkeypatch: pytest.MonkeyPatch) -> None:
    import builtins

    from shopsim_metrics.dashboards import wandb_workspace as wbw

    real_import = builtins.__import__

    def fake_import(name, *args, **kwargs):
        if name.startswith("wandb_workspaces"):
            raise ImportError("No module named 'wandb_workspaces'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", fake_import)
    with pytest.raises(ImportError, match=r"pip install 'shopsim-metrics\[workspaces\]'"):
        wbw.build_workspace()


# --- the HTML renderer --------------------------------------------------------------------------
def _sections(page: str) -> dict[str, str]:
    return dict(re.findall(r'<section class="panel[^"]*" id="panel-([a-z_]+)"(.*?)</section>', page, re.S))


def test_html_draws_every_panel_self_contained(tmp_path: Path, records: list[StepRecord]) -> None:
    path = write_html_dashboard(records, tmp_path / "d.html", title="run 42")
    page = path.read_text()
    sections = _sections(page)
    assert list(sections) == [p.id for s in SPEC.sections for p in SPEC.panels_in(s)]
    for panel in SPEC.panels:
        body = sections[panel.id]
        assert f'data-panel-id="{panel.id}"' in body and f'data-panel-kind="{panel.kind}"' in body
        assert f'id="plot-{panel.id}"' in body and "Plotly.newPlot" in body
        assert f'data-keys="{" ".join(panel.keys())}"' in body
    assert "<title>run 42</title>" in page
    # self-contained: plotly.js inline (gzip, base64); outside it no external script, stylesheet, CDN or URL at all
    import base64
    import gzip

    from plotly.offline import get_plotlyjs

    (packed,) = re.findall(r'<script type="application/octet-stream" id="plotly-js-gzip">([A-Za-z0-9+/=]+)</script>',
                           page)
    assert gzip.decompress(base64.b64decode(packed)).decode() == get_plotlyjs()
    rest = page.replace(packed, "")
    assert not re.search(r"<script[^>]+src=", rest) and "<link" not in rest
    assert not re.search(r"https?://", rest), re.findall(r".{40}https?://.{40}", rest)[:3]


def test_html_stacked_outcomes_add_up_to_submitted(records: list[StepRecord]) -> None:
    data = load_dashboard_data(records)
    fig = step_figure(SPEC.panel("outcomes"), data)
    assert fig.layout.barmode == "stack"
    bars = [t for t in fig.data if t.type == "bar"]
    assert [t.name.split(" ")[0] for t in bars] == ["trained", "fallback", "technical", "zero-std", "surplus", "aborted"]
    for i, rec in enumerate(records):
        heights = [t.y[i] for t in bars]
        assert sum(heights) == rec.submitted_group_count, rec.rollout_id
        assert heights[0] == rec.train_group_count - rec.fallback_group_count
        assert sum(heights[:5]) == rec.accepted_group_count
    terminated = [r.rollout_id for r in records if r.terminated]
    warned = [r.rollout_id for r in records if any(a["level"] == "WARN" for a in r.alerts)]
    assert terminated and warned and [s.x0 for s in fig.layout.shapes] == terminated + warned


def test_html_zero_std_causes_stack_up_to_every_zero_std_group(records: list[StepRecord]) -> None:
    data = load_dashboard_data(records)
    fig = step_figure(SPEC.panel("zero_std_causes"), data)
    assert fig.layout.barmode == "stack"
    bars = [t for t in fig.data if t.type == "bar"]
    assert [t.meta for t in bars] == list(contract.ZERO_STD_CAUSE_FIELDS)
    assert any(rec.zero_std_all_pass_group_count and rec.zero_std_all_fail_group_count for rec in records)
    for i, rec in enumerate(records):
        assert [t.y[i] for t in bars] == [getattr(rec, name) for name in contract.ZERO_STD_CAUSE_FIELDS]
        assert sum(t.y[i] for t in bars) == rec.zero_std_group_count >= rec.zero_std_group_drop_count


def test_html_figures_are_plain_valid_plotly_json_and_the_template_is_embedded_once(records: list[StepRecord]) -> None:
    import plotly.graph_objects as go
    import plotly.io as pio

    data = load_dashboard_data(records)
    page = render_html(data)
    figures = {m.group(1): json.loads(m.group(2)) for m in
               re.finditer(r'<script type="application/json" id="plot-([\w-]+)-figure">(.*?)</script>', page, re.S)}
    ledger = re.search(r'<script type="application/json" id="ledger-data-remaining_ledger">(.*?)</script>', page, re.S)
    picker_figures = list(json.loads(ledger.group(1)).values())
    assert set(figures) == {p.id for p in SPEC.panels} and len(picker_figures) > 1
    for figure in [*figures.values(), *picker_figures]:
        go.Figure(data=figure["data"], layout=figure["layout"])  # plotly's validation: raises on a bad property
        assert "template" not in figure["layout"], "the page lends its template: no copy per figure"
        assert all(isinstance(t["x"], list) and isinstance(t["y"], list) for t in figure["data"])  # no bdata
    for panel in SPEC.panels:
        if panel.kind == "ledger_remaining":
            continue
        # every series with data, in the spec's order; one no step carries is left out of the legend (unless none has)
        drawn = [s for s in panel.series if s.style == "threshold" or any(v is not None for v in series_values(s, data))]
        drawn = drawn if any(s.style != "threshold" for s in drawn) else list(panel.series)
        traces = figures[panel.id]["data"][: len(drawn)]
        assert [(t["name"], t["meta"], (t.get("marker") or t["line"])["color"]) for t in traces] == [
            (s.label, s.key, s.color) for s in drawn], panel.id
    templates = re.findall(r'<script type="application/json" id="plotly-template">(.*?)</script>', page, re.S)
    white = json.loads(json.dumps(pio.templates["plotly_white"].to_plotly_json()))
    assert len(templates) == 1 and json.loads(templates[0]) == white
    assert page.count("f.layout.template = PAGE_TEMPLATE;") == len(SPEC.panels)


def test_series_values_keep_missing_values_missing() -> None:
    data = load_dashboard_data([StepRecord(rollout_id=0, train_group_count=16, fallback_group_count=3),
                                StepRecord(rollout_id=1, success_rate=None)])
    assert series_values(Series("train_group_count", "t", minus="fallback_group_count"), data) == [13, 0]
    assert series_values(Series("success_rate", "s"), data) == [None, None]


def test_html_ledger_opens_on_the_latest_multi_wave_step(tmp_path: Path, records: list[StepRecord]) -> None:
    multi = [r.rollout_id for r in records if r.wave_count >= 2]
    assert len(multi) >= 2 and max(r.wave_count for r in records) >= 3
    page = write_html_dashboard(records, tmp_path / "d.html").read_text()
    ledger = _sections(page)["remaining_ledger"]
    assert 'data-ledger="present"' in ledger and f'data-ledger-step="{multi[-1]}"' in ledger
    assert f'<option value="{multi[-1]}" selected>' in ledger
    payload = json.loads(re.search(r'id="ledger-data-remaining_ledger">(.*?)</script>', ledger, re.S).group(1))
    assert set(map(int, payload)) == {r.rollout_id for r in records}
    # the figure of a step: remaining_before in judgement order, one trace per outcome present
    rec = next(r for r in records if r.rollout_id == multi[-1])
    traces = payload[str(rec.rollout_id)]["data"]
    path = next(t for t in traces if t["name"] == "remaining")
    assert path["y"] == [d.remaining_before for d in rec.decisions]
    assert {t["name"] for t in traces} - {"remaining"} == {d.outcome for d in rec.decisions}
    wave_marks = [a["text"] for a in payload[str(rec.rollout_id)]["layout"]["annotations"] if "waves open" in a["text"]]
    assert wave_marks == [f"{k} waves open" for k in range(2, rec.wave_count + 1)]


def test_html_ledger_step_can_be_chosen_and_a_bad_one_is_named(tmp_path: Path, records: list[StepRecord]) -> None:
    page = write_html_dashboard(records, tmp_path / "d.html", ledger_step=3).read_text()
    assert 'data-ledger-step="3"' in _sections(page)["remaining_ledger"]
    with pytest.raises(ValueError, match="ledger_step=99 has no ledger rows"):
        write_html_dashboard(records, tmp_path / "e.html", ledger_step=99)


def test_html_from_steps_jsonl_and_its_run_directory(tmp_path: Path, records: list[StepRecord]) -> None:
    run = tmp_path / "run"
    sink = JsonlSink(run, fsync=False)
    for rec in records:
        sink.emit(rec)
    from_file = render_html(load_dashboard_data(run / contract.STEPS_FILE_NAME))
    from_dir = render_html(load_dashboard_data(run))
    from_records = render_html(load_dashboard_data(records))
    strip = lambda page: re.sub(r"<b>[^<]*steps\.jsonl</b>|<b>step records</b>", "", page)  # noqa: E731
    assert strip(from_file) == strip(from_dir) == strip(from_records)
    with pytest.raises(FileNotFoundError, match="neither steps.jsonl nor a W&B offline run"):
        load_dashboard_data(tmp_path)


def test_html_without_any_step(tmp_path: Path) -> None:
    page = write_html_dashboard([], tmp_path / "d.html").read_text()
    sections = _sections(page)
    assert set(sections) == {p.id for p in SPEC.panels}
    assert 'data-ledger="absent"' in sections["remaining_ledger"]


def test_history_rows_merge_per_step_and_keep_nulls() -> None:
    rows = [
        {contract.WANDB_STEP_KEY: 1, contract.wandb_key("wave_count"): 2, contract.wandb_key("success_rate"): float("nan")},
        {"_step": 9, "other/key": 1},
        {contract.WANDB_STEP_KEY: 0, contract.wandb_key("terminated"): 0},
        {contract.WANDB_STEP_KEY: 1, contract.wandb_key("terminated"): 1, contract.wandb_key("wave_count"): None},
    ]
    assert history_to_steps(rows) == [
        {"rollout_id": 0, "terminated": False},
        {"rollout_id": 1, "wave_count": 2, "success_rate": None, "terminated": True},
    ]


def test_html_from_a_real_wandb_offline_run(tmp_path: Path, wandb_env: Path, records: list[StepRecord]) -> None:  # noqa: F811
    from shopsim_metrics.sinks.wandb_sink import WandbSink

    sink = WandbSink(mode="standalone", table_every=0)  # tables: multi-wave and terminated steps only
    for rec in records:
        sink.emit(rec)
    run_dir = Path(sink.run.dir).parent
    sink.close()

    # the run directory itself, and the wandb directory above it, are both accepted
    for source in (run_dir, run_dir.parent):
        data = load_dashboard_data(source)
        assert data.step_ids() == [r.rollout_id for r in records]
        assert data.column("wave_count") == [r.wave_count for r in records]
        assert data.column("terminated") == [r.terminated for r in records]
        assert data.column("success_rate") == pytest.approx([r.success_rate for r in records])
        tabled = {r.rollout_id for r in records if r.wave_count > 1 or r.terminated}
        assert set(data.ledger_steps()) == tabled
        step = max(r.rollout_id for r in records if r.wave_count > 1)
        assert data.default_ledger_step() == step
        rec = next(r for r in records if r.rollout_id == step)
        assert [d["remaining_before"] for d in data.ledgers[step]] == [d.remaining_before for d in rec.decisions]

    page = write_html_dashboard(run_dir, tmp_path / "wb.html").read_text()
    sections = _sections(page)
    assert set(sections) == {p.id for p in SPEC.panels}
    assert "W&amp;B offline run" in page and "the complete ledger is in the run&#x27;s steps.jsonl" in page
    assert f'data-ledger-step="{step}"' in sections["remaining_ledger"]


# --- the CLI ------------------------------------------------------------------------------------
def test_cli_dashboard_html_wandb_dry_run_and_spec(tmp_path: Path, records: list[StepRecord], no_network: None,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    sink = JsonlSink(tmp_path / "run", fsync=False)
    for rec in records:
        sink.emit(rec)
    out = tmp_path / "x.html"
    assert cli_main(["dashboard", "html", "--from", str(tmp_path / "run"), "--out", str(out)]) == 0
    assert set(_sections(out.read_text())) == {p.id for p in SPEC.panels}
    assert cli_main(["dashboard", "wandb", "--dry-run", "--entity", "E", "--project", "P",
                     "--out", str(tmp_path / "tpl")]) == 0
    assert json.loads((tmp_path / "tpl" / "wandb_workspace.json").read_text())["entity"] == "E"
    assert json.loads((tmp_path / "tpl" / "wandb_report.json").read_text())["project"]["name"] == "P"
    assert cli_main(["dashboard", "spec", "--out", str(tmp_path / "p.json")]) == 0
    assert load_panels_json(tmp_path / "p.json") == SPEC
    printed = capsys.readouterr().out
    assert "dashboard written" in printed and "workspace JSON" in printed


def test_cli_dashboard_html_takes_the_source_once(tmp_path: Path, records: list[StepRecord],
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    sink = JsonlSink(tmp_path / "run", fsync=False)
    for rec in records:
        sink.emit(rec)
    out = tmp_path / "y.html"
    assert cli_main(["dashboard", "html", str(tmp_path / "run"), "--out", str(out)]) == 0 and out.is_file()
    assert cli_main(["dashboard", "html", "--out", str(out)]) == 2
    assert cli_main(["dashboard", "html", "a", "--from", "b"]) == 2
    assert "give the source once" in capsys.readouterr().err


def test_cli_dashboard_wandb_dry_run_of_a_run_needs_out_and_leaves_the_templates_alone(
        tmp_path: Path, records: list[StepRecord], no_network: None, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    sink = JsonlSink(tmp_path / "run", fsync=False)
    for rec in records:
        sink.emit(rec)
    monkeypatch.chdir(tmp_path)  # as in the repository's root, where dashboards/ holds the generic templates
    assert cli_main(["dashboard", "wandb", "--dry-run", "--from", "run"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("shopsim-metrics dashboard wandb: error: ") and "give --out DIR" in err
    assert err.count("\n") == 1 and not (tmp_path / "dashboards").exists()
    assert cli_main(["dashboard", "wandb", "--dry-run", "--from", "run", "--out", "tpl"]) == 0
    assert {p.name for p in (tmp_path / "tpl").iterdir()} == {"wandb_workspace.json", "wandb_report.json"}
    assert cli_main(["dashboard", "wandb", "--dry-run"]) == 0  # the generic templates: dashboards/ by default
    assert {p.name for p in (tmp_path / "dashboards").iterdir()} == {"wandb_workspace.json", "wandb_report.json"}


def test_cli_dashboard_wandb_without_dry_run_needs_entity_and_project(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli_main(["dashboard", "wandb", "--project", "P"]) == 2
    assert "--entity required to save to W&B" in capsys.readouterr().err


# --- the simulator's output -----------------------------------------------------------------------
def test_html_from_the_simulator_draws_every_panel(tmp_path: Path) -> None:
    from shopsim_metrics.simulator.loop import simulate
    from shopsim_metrics.simulator.demo import demo_config

    result = simulate(demo_config(steps=16, seed=5))  # the demo's burst: opens extra waves, never terminates
    records = result.records
    assert any(r.wave_count >= 2 for r in records), "the burst should open a second wave"
    data = load_dashboard_data(records)
    bars = [t for t in step_figure(SPEC.panel("outcomes"), data).data if t.type == "bar"]
    for i, rec in enumerate(records):
        assert sum(t.y[i] for t in bars) == rec.submitted_group_count, rec.rollout_id
    page = write_html_dashboard(records, tmp_path / "sim.html").read_text()
    sections = _sections(page)
    assert set(sections) == {p.id for p in SPEC.panels}
    latest_multi = max(r.rollout_id for r in records if r.wave_count >= 2)
    assert f'data-ledger-step="{latest_multi}"' in sections["remaining_ledger"]


def test_every_row_of_the_page_is_full(records: list[StepRecord]) -> None:
    """Two panels to a row; a panel that would stand alone in its row (a section's odd one out) takes the row."""
    page = render_html(load_dashboard_data(records))
    sections = page.split('<h2 class="section">')[1:]
    assert len(sections) == len(SPEC.sections) + 1  # the alerts' heading first
    for section in sections:
        classes = re.findall(r'<section class="panel( wide)?"', section)
        halves = 0
        for wide in classes:
            if wide:
                assert halves % 2 == 0, "a half-width panel stands alone before a full-width one"
            else:
                halves += 1
        assert halves % 2 == 0, "the section ends with a half-width panel alone in its row"
    assert 'class="panel wide" id="panel-remaining_ledger"' in page


def test_alert_and_termination_labels_sit_above_the_plot_area(records: list[StepRecord]) -> None:
    data = load_dashboard_data(records)
    layout = step_figure_dict(SPEC.panel("outcomes"), data)["layout"]
    labels = [a for a in layout["annotations"] if a["text"] in ("WARN", "INFO", "terminated")]
    assert labels and {a["text"] for a in labels} >= {"terminated"}
    for label in labels:  # anchored at their bottom on the plot area's top edge: in the margin, never on a bar
        assert (label["y"], label["yref"], label["yanchor"]) == (1, "paper", "bottom"), label
    assert layout["margin"]["t"] >= 30 and layout["yaxis"]["automargin"] and layout["xaxis"]["automargin"]


def test_a_40_step_page_weighs_less_than_plotly_js_alone(tmp_path: Path) -> None:
    """plotly.js is embedded gzip-compressed: the demo's 40-step page (5.4 MB with it plain) is about half of it."""
    from plotly.offline import get_plotlyjs

    from shopsim_metrics.simulator.demo import demo_config
    from shopsim_metrics.simulator.loop import simulate

    page = write_html_dashboard(simulate(demo_config(steps=40)).records, tmp_path / "d.html")
    assert page.stat().st_size < 0.6 * len(get_plotlyjs())


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 30), st.integers(1, 3), st.integers(0, 3)), max_size=120))
def test_the_ledger_keeper_keeps_the_latest_record_of_a_step_and_the_latest_steps(writes) -> None:
    """A resumed run writes a step again: the later record's ledger wins, also when it has none. Written
    once each, the latest steps with a ledger and the latest multi-wave steps are kept."""
    from shopsim_metrics.dashboards.data import LedgerKeeper

    keeper = LedgerKeeper(per_kind=3)
    latest: dict[int, dict] = {}
    for n, (step, waves, rows) in enumerate(writes):
        record = {"rollout_id": step, "wave_count": waves, "decisions": [{"order": rows - k, "write": n} for k in range(rows)]}
        keeper(step, record, json.dumps(record).encode())
        latest[step] = record
    kept = keeper.ledgers()
    assert all(rows and rows == sorted(latest[step]["decisions"], key=lambda d: d["order"]) for step, rows in kept.items())
    assert len(kept) <= 2 * 3 * 5
    if len(latest) == len(writes):  # no step written twice
        with_rows = sorted(step for step, record in latest.items() if record["decisions"])
        multi = [step for step in with_rows if latest[step]["wave_count"] >= 2]
        assert set(with_rows[-3:]) | set(multi[-3:]) <= set(kept)


def test_the_skipping_section_draws_a_run_that_skips(tmp_path: Path, records: list[StepRecord]) -> None:
    import dataclasses

    skipping = [dataclasses.replace(r, skipped_prompt_count=r.rollout_id % 3, skip_p_easy=0.5, skip_p_hard=0.4)
                for r in records]
    page = write_html_dashboard(skipping, tmp_path / "s.html").read_text()
    assert '<h2 class="section">Skipping</h2>' in page
    data = load_dashboard_data(skipping)
    bars = step_figure(SPEC.panel("skipped_prompts"), data).data[0]
    assert list(bars.y) == [r.rollout_id % 3 for r in records]
    assert {p.id for p in SPEC.panels_in("Skipping")} == {"skipped_prompts", "skip_p", "skip_guard", "skip_probes",
                                                          "skip_cost"}


def test_the_guard_panel_draws_the_predictive_runs_cap_and_estimate(records: list[StepRecord]) -> None:
    import dataclasses

    guarded = [dataclasses.replace(r, skipped_prompt_count=1, skip_probe_count=r.rollout_id % 2,
                                   skip_cap=1.0 - r.rollout_id / 100, skip_lost_signal_estimate=r.rollout_id / 1000,
                                   skip_max_lost_signal=0.1)
               for r in records]
    figure = step_figure(SPEC.panel("skip_guard"), load_dashboard_data(guarded))
    by_name = {trace.name: list(trace.y) for trace in figure.data}
    assert by_name["cap on a skipped draw's chance of spread"] == pytest.approx([r.skip_cap for r in guarded])
    assert by_name["estimated lost signal"] == pytest.approx([r.skip_lost_signal_estimate for r in guarded])
    assert by_name["limit (shopsim_prompt_skip_max_lost_signal)"] == pytest.approx([0.1] * len(guarded))
    probes = step_figure(SPEC.panel("skip_probes"), load_dashboard_data(guarded))
    assert {trace.name: list(trace.y) for trace in probes.data}["probes served"] == [r.skip_probe_count for r in guarded]


def test_the_cost_section_draws_every_token_and_the_headline() -> None:
    """The stacked tokens add up to total_token_count (aborted included); the headline is tokens per informative group."""
    from shopsim_metrics.simulator.demo import demo_config
    from shopsim_metrics.simulator.loop import simulate

    records = simulate(demo_config(steps=8, seed=1)).records  # the sample hook wired: every token counted
    assert all(r.total_token_count for r in records)
    data = load_dashboard_data(records)
    stacked = step_figure(SPEC.panel("cost_tokens"), data).data
    assert [s.name for s in stacked][-1] == "aborted (never judged)"
    sums = [sum(s.y[i] for s in stacked) for i in range(len(records))]
    assert sums == [r.total_token_count for r in records]
    headline = step_figure(SPEC.panel("cost_per_signal"), data).data[0]
    assert list(headline.y) == pytest.approx([r.tokens_per_informative_group for r in records])
    assert SPEC.panels_in("Cost")[0].id == "cost_per_signal"


def test_cli_dashboard_wandb_exits_after_its_error_even_when_wandb_leaves_threads_behind(tmp_path: Path) -> None:
    """W&B unreachable: the save raises a W&B error after starting a thread that never ends (as W&B's
    retry and service threads may). The command prints one line and the process exits, with code 2."""
    import subprocess
    import sys as _sys

    script = """
import sys, threading, types
from shopsim_metrics.dashboards import wandb_workspace
import wandb.errors
def save_to_wandb(entity, project, **options):
    threading.Thread(target=threading.Event().wait).start()   # a non-daemon thread that never ends
    raise wandb.errors.CommError("could not reach api.wandb.ai")
wandb_workspace.save_to_wandb = save_to_wandb
from shopsim_metrics.cli import main
sys.exit(main(["dashboard", "wandb", "--entity", "me", "--project", "p"]))
"""
    done = subprocess.run([_sys.executable, "-c", script], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "W&B refused to save the workspace (CommError" in lines[0]


# --- the agent episodes section -----------------------------------------------------------------
AGENT_PANELS = ("agent_tokens", "agent_turns", "agent_environment_time", "agent_environment_load", "agent_shares",
                "agent_technical_causes")


@pytest.fixture(scope="module")
def agent_records() -> list[StepRecord]:
    """The agent demo's run, short: its burst is the search tool timing out."""
    from shopsim_metrics.simulator.config import AgentModel
    from shopsim_metrics.simulator.demo import demo_config
    from shopsim_metrics.simulator.loop import simulate

    return simulate(demo_config(steps=12, seed=3, agent=AgentModel())).records


def test_the_agent_section_draws_an_agent_run(tmp_path: Path, agent_records: list[StepRecord]) -> None:
    from shopsim_metrics.simulator.demo import DEMO_BURST_CAUSE

    assert [p.id for p in SPEC.panels_in("Agent episodes")] == list(AGENT_PANELS)
    page = write_html_dashboard(agent_records, tmp_path / "agent.html").read_text()
    sections = _sections(page)
    for panel_id in AGENT_PANELS:
        assert "data-off" not in sections[panel_id], panel_id
    assert "<span>episodes</span><b>agent (turns from metadata)</b>" in page
    data = load_dashboard_data(agent_records)
    tokens = step_figure(SPEC.panel("agent_tokens"), data).data
    assert [sum(t.y[i] for t in tokens) for i in range(len(agent_records))] == [
        r.total_token_count + r.observation_token_count for r in agent_records]
    assert [list(t.y) for t in step_figure(SPEC.panel("agent_shares"), data).data[:3]] == [
        [getattr(r, name) for r in agent_records]
        for name in ("observation_token_fraction", "environment_time_fraction", "truncated_episode_fraction")]
    causes = step_figure(SPEC.panel("agent_technical_causes"), data).data
    bars, line = [t for t in causes if t.type == "bar"], next(t for t in causes if t.type == "scatter")
    assert bars[0].name == DEMO_BURST_CAUSE  # the most frequent cause of the run stacks first
    assert list(line.y) == [r.technical_group_drop_count for r in agent_records]
    for i, record in enumerate(agent_records):
        counts = record.technical_cause_counts or {}
        assert {t.name: t.y[i] for t in bars if t.y[i]} == counts  # every cause a technical group of the step left
        assert sum(counts.values()) <= record.technical_group_drop_count


def test_a_single_turn_run_says_the_agent_section_is_off(tmp_path: Path) -> None:
    page = write_html_dashboard(make_records(agent=False), tmp_path / "single.html").read_text()
    sections = _sections(page)
    for panel_id in AGENT_PANELS[:-1]:
        assert 'data-off="true"' in sections[panel_id]
        assert "Off in this run: no agent episode: single-turn rollouts" in sections[panel_id], panel_id
    assert "Off in this run: no technical group left a cause" in sections["agent_technical_causes"]
    assert "<span>episodes</span><b>single-turn</b>" in page


def test_wandb_views_note_the_agent_section_off_in_a_single_turn_run_and_where_the_causes_are(
        no_network: None, agent_records: list[StepRecord]) -> None:
    from shopsim_metrics.dashboards import wandb_workspace as wbw

    def agent_notes(source: list[StepRecord]) -> list[str]:
        workspace = wbw.build_workspace(data=load_dashboard_data(source))
        section = next(s for s in workspace.sections if s.name == "Agent episodes")
        return [p.markdown for p in section.panels if type(p).__name__ == "MarkdownPanel"]

    single = agent_notes(make_records(agent=False))
    off = next(note for note in single if note.startswith("**Off in this run**"))
    assert all(SPEC.panel(panel_id).title in off for panel_id in AGENT_PANELS)
    notes = agent_notes(agent_records)
    assert not any(note.startswith("**Off in this run**") for note in notes)
    [causes] = notes  # the panel by cause: W&B draws its total, and says where the causes are
    assert "technical_cause_counts" in causes and "`technical_cause`" in causes and "dashboard html" in causes
    template = wbw.workspace_json(wbw.build_workspace())
    drawn = {p["__id__"]: p for p in wbw.iter_workspace_panels(template)}
    assert wbw.panel_uid("agent_technical_causes", wbw.LEDGER_NOTE_SUFFIX) in drawn


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(st.none(), st.dictionaries(st.sampled_from([f"Cause{i}: x" for i in range(12)]
                                                                      + [contract.OTHER_CAUSES]),
                                                     st.integers(1, 9), max_size=6)), max_size=20))
def test_a_breakdown_keeps_every_count_of_every_step_in_its_stacks(steps) -> None:
    from shopsim_metrics.dashboards.data import MAX_BREAKDOWN_LABELS, breakdown_values

    data = load_dashboard_data([StepRecord(rollout_id=i, technical_cause_counts=c) for i, c in enumerate(steps)])
    stacks = breakdown_values(SPEC.panel("agent_technical_causes"), data)
    assert [sum(counts[i] for _, counts in stacks) for i in range(len(steps))] == [
        sum((c or {}).values()) for c in steps]
    labels = [label for label, _ in stacks]
    assert len(labels) == len(set(labels)) <= MAX_BREAKDOWN_LABELS + 1
    kept = [sum(counts) for label, counts in stacks if label != contract.OTHER_CAUSES]
    assert kept == sorted(kept, reverse=True)


# --- slime's fully-async path -----------------------------------------------------------------------
@pytest.fixture(scope="module")
def async_records() -> list[StepRecord]:
    from shopsim_metrics.simulator.config import SimConfig
    from shopsim_metrics.simulator.loop import simulate

    records = simulate(SimConfig(steps=8, seed=1, rollout="fully-async", max_concurrent_groups=48)).records
    assert sum(r.carried_group_count for r in records) > 0 and max(r.policy_version_lag_max for r in records) > 0
    return records


def test_fully_async_run_draws_its_staleness_and_says_the_ledger_is_off(async_records, records) -> None:
    sections = _sections(render_html(load_dashboard_data(async_records)))
    ledger = sections["remaining_ledger"]
    assert 'data-off="true"' in ledger and "Off in this run: slime&#x27;s fully-async path has no waves" in ledger
    assert "? waves" not in ledger
    for panel_id in ("policy_version_lag", "carried_groups"):
        assert 'data-off="true"' not in sections[panel_id], panel_id
    keys = {key for panel in SPEC.panels for key in panel.keys()}
    assert set(contract.FULLY_ASYNC_FIELDS) <= keys  # every field of the fully-async table has a panel
    synchronous = _sections(render_html(load_dashboard_data(records)))
    assert 'data-off="true"' not in synchronous["remaining_ledger"]
    for panel_id in ("policy_version_lag", "carried_groups"):
        assert "Off in this run: these fields exist only on slime&#x27;s fully-async path" in synchronous[panel_id]


def test_fully_async_run_in_the_wandb_workspace_and_report(async_records, tmp_path: Path, no_network: None) -> None:
    from shopsim_metrics.dashboards.wandb_workspace import write_wandb_templates

    ws_path, report_path = write_wandb_templates(tmp_path, entity="E", project="P",
                                                 data=load_dashboard_data(async_records))
    for path in (ws_path, report_path):
        text = path.read_text()
        for key in contract.FULLY_ASYNC_FIELDS:
            assert f"rollout/shopsim/{key}" in text, (path.name, key)
        assert "remaining through one step (decision ledger): slime's fully-async path has no waves" in text, path.name


TOOL_PANELS = ("tool_calls", "tool_latency", "tool_errors", "episode_ends")


def test_the_tools_section_draws_each_tool_and_why_episodes_ended(tmp_path: Path, agent_records: list[StepRecord]) -> None:
    assert [p.id for p in SPEC.panels_in("Tools")] == list(TOOL_PANELS)
    sections = _sections(write_html_dashboard(agent_records, tmp_path / "agent.html").read_text())
    for panel_id in TOOL_PANELS:
        assert "data-off" not in sections[panel_id], panel_id
    data = load_dashboard_data(agent_records)
    calls = [t for t in step_figure(SPEC.panel("tool_calls"), data).data if t.type == "bar"]
    for i, record in enumerate(agent_records):  # each tool's calls per episode, stacked: every call per episode
        assert sum(t.y[i] or 0 for t in calls) == pytest.approx(record.tool_calls_per_episode_mean)
    errors = step_figure(SPEC.panel("tool_errors"), data)
    bars = [t for t in errors.data if t.type == "bar"]
    assert errors.layout.barmode == "group" and len(bars) == 2 * len(agent_records[0].tool_stats)
    environment, model = bars[0], bars[1]  # one tool's pair: the model's bar on the environment's
    assert environment.offsetgroup == model.offsetgroup and list(model.base) == [v or 0 for v in environment.y]
    tool = environment.name.rsplit(": ", 1)[0]
    for i, record in enumerate(agent_records):
        stats = record.tool_stats[tool]
        assert model.y[i] == pytest.approx(stats["model_errors"] / stats["calls"])
    ends = [t for t in step_figure(SPEC.panel("episode_ends"), data).data if t.type == "bar"]
    assert {t.name for t in ends} <= set(contract.EPISODE_END_REASONS)
    assert [sum(t.y[i] for t in ends) for i in range(len(agent_records))] == [r.episode_count for r in agent_records]


def test_the_environment_time_has_its_own_axis_and_the_causes_a_log_scale(agent_records: list[StepRecord]) -> None:
    data = load_dashboard_data(agent_records)
    figure = step_figure(SPEC.panel("agent_environment_time"), data)
    rollout = next(t for t in figure.data if t.meta == "rollout_seconds")
    assert rollout.yaxis == "y2" and figure.layout.yaxis2.overlaying == "y" and figure.layout.yaxis2.side == "right"
    assert next(t for t in figure.data if t.meta == "environment_seconds_per_episode").yaxis in (None, "y")
    assert step_figure(SPEC.panel("agent_technical_causes"), data).layout.yaxis.type == "log"


def test_a_run_without_tool_calls_says_the_tools_are_off(tmp_path: Path) -> None:
    sections = _sections(write_html_dashboard(make_records(agent=True, tools=False), tmp_path / "no_tools.html").read_text())
    for panel_id in TOOL_PANELS[:3]:
        assert 'data-off="true"' in sections[panel_id] and "Off in this run: no tool calls" in sections[panel_id]
