"""``shopsim-metrics demo`` end to end in a temp dir: the W&B offline run read back from disk holds the
contract's keys at every step and the WARN alert of the burst; the JSONL record and the HTML dashboard."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from shopsim_metrics.record import contract
from shopsim_metrics.cli import main
from shopsim_metrics.dashboards.spec import dashboard_spec
from shopsim_metrics.simulator.demo import DEMO_BURST_CAUSE, _demo_environment, demo_config
from shopsim_metrics.readers import read_steps
from shopsim_metrics.readers.wandb_offline import find_run_dirs, read_offline_run
from shopsim_metrics import monitor as runtime_module

STEPS = 16
BURST = demo_config(steps=STEPS).bursts[0].step


def offline_demo(tmp_path_factory, *options: str):
    """Run the demo with ``options`` in an isolated offline W&B environment (no network, no API key); a module
    fixture yields from it."""
    mp = pytest.MonkeyPatch()
    tmp = tmp_path_factory.mktemp("demo")
    root = tmp / "wb"
    for var, sub in (("WANDB_DIR", "dir"), ("WANDB_DATA_DIR", "data"), ("WANDB_CACHE_DIR", "cache"),
                     ("WANDB_CONFIG_DIR", "config"), ("WANDB_ARTIFACT_DIR", "artifacts")):
        (root / sub).mkdir(parents=True)
        mp.setenv(var, str(root / sub))
    for var, value in (("WANDB_MODE", "offline"), ("WANDB_SILENT", "true"), ("WANDB_CONSOLE", "off"),
                       ("WANDB_DISABLE_GIT", "true"), ("WANDB_BASE_URL", "http://127.0.0.1:9"),
                       ("NETRC", str(root / "no-netrc"))):
        mp.setenv(var, value)
    mp.delenv("WANDB_API_KEY", raising=False)
    import io
    from contextlib import redirect_stdout

    import wandb

    wandb.teardown()  # wandb reads its environment once per process setup: an earlier test's must not stay

    out_dir = tmp / "out"
    buffer = io.StringIO()
    try:
        with redirect_stdout(buffer):
            code = main(["demo", "--out", str(out_dir), "--steps", str(STEPS), "--seed", "0", "--no-progress",
                         *options])
        yield {"code": code, "stdout": buffer.getvalue(), "out": out_dir, "wandb_root": root / "dir"}
    finally:
        if wandb.run is not None:
            wandb.run.finish()
        wandb.teardown()
        mp.undo()


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    """The demo, run once for the module."""
    yield from offline_demo(tmp_path_factory)


@pytest.fixture(scope="module")
def agent_demo(tmp_path_factory):
    """``demo --agent``, run once for the module."""
    yield from offline_demo(tmp_path_factory, "--agent")


def test_demo_exits_cleanly_and_resets_the_runtime(demo):
    assert demo["code"] == 0
    assert runtime_module._runtime is None


def test_jsonl_record_holds_every_step_with_the_burst_opening_extra_waves(demo):
    records = read_steps(demo["out"] / "run" / "steps.jsonl")
    assert [r.rollout_id for r in records] == list(range(STEPS))
    assert not any(r.terminated for r in records)
    burst = records[BURST]
    assert burst.wave_count >= 2
    assert 4 <= burst.max_consecutive_technical_failures < burst.technical_failure_limit == 8
    for r in records:
        assert r.accepted_group_count == (r.train_group_count + r.technical_group_drop_count
                                          + r.zero_std_group_drop_count + r.surplus_group_count)
        assert r.train_group_count == 16 and r.submitted_group_count == 32 * r.wave_count


def _run_dir(demo) -> Path:
    match = re.search(r"^W&B run:\s+(\S+)", demo["stdout"], re.MULTILINE)
    assert match, demo["stdout"]
    return Path(match.group(1))


def test_wandb_offline_run_holds_the_contract_keys_at_every_step(demo):
    run_dir = _run_dir(demo)
    assert run_dir in find_run_dirs(demo["wandb_root"])
    assert f"wandb sync {run_dir}" in demo["stdout"]
    run = read_offline_run(run_dir)
    rows = [row for row in run.history if contract.WANDB_STEP_KEY in row and contract.wandb_key("wave_count") in row]
    assert [row[contract.WANDB_STEP_KEY] for row in rows] == list(range(STEPS))
    records = read_steps(demo["out"] / "run")
    for row, record in zip(rows, records):
        missing = [name for name in contract.STEP_FIELDS if contract.wandb_key(name) not in row]
        assert not missing, f"step {row[contract.WANDB_STEP_KEY]} lacks {missing}"
        for name in contract.COUNT_FIELDS:
            assert row[contract.wandb_key(name)] == getattr(record, name)
    assert run.step_metric_of(contract.wandb_key("wave_count")) == contract.WANDB_STEP_KEY


def test_wandb_offline_run_holds_the_warn_alert_of_the_burst_and_no_error(demo):
    run = read_offline_run(_run_dir(demo))
    levels = {a["level"] for a in run.alerts}
    assert "WARN" in levels and "ERROR" not in levels
    warns = [a for a in run.alerts if a["level"] == "WARN"]
    records = read_steps(demo["out"] / "run")
    # the burst is one event: one WARN for its step, with the number of streaks and the longest
    assert [a["title"] for a in warns] == [f"shopsim: technical failures piling up at rollout step {BURST}"]
    assert f"the longest {records[BURST].max_consecutive_technical_failures};" in warns[0]["text"]
    assert re.search(rf"at rollout step {BURST}, \d+ streaks? of consecutive technical groups reached 4", warns[0]["text"])


def test_html_dashboard_holds_every_panel_of_the_spec(demo):
    page = (demo["out"] / "dashboard.html").read_text()
    for panel in dashboard_spec().panels:
        assert f'data-panel-id="{panel.id}"' in page, panel.id
    assert re.search(r"<script[^>]*\bsrc=", page) is None  # self-contained


def test_summary_names_the_burst_its_waves_and_the_paths(demo):
    out = demo["stdout"]
    burst_line = next(line for line in out.splitlines() if line.split()[:1] == [str(BURST)])
    assert "failure burst" in burst_line and "waves" in burst_line and "WARN alert" in burst_line
    assert "not terminated" in out
    assert "agent episodes" not in out and "by cause" not in out  # single-turn: no agent line
    assert str(demo["out"] / "run" / "steps.jsonl") in out and str(demo["out"] / "dashboard.html") in out


def test_demo_environment_sets_offline_only_when_unset_and_restores_it(monkeypatch):
    import io

    monkeypatch.delenv("WANDB_MODE", raising=False)
    monkeypatch.setenv("WANDB_SILENT", "false")
    with _demo_environment(io.StringIO()) as notes:
        assert os.environ["WANDB_MODE"] == "offline" and os.environ["WANDB_SILENT"] == "false"
    assert notes == ["WANDB_MODE=offline"]
    assert "WANDB_MODE" not in os.environ and os.environ["WANDB_SILENT"] == "false"


def test_demo_out_never_deletes_records_it_did_not_write(tmp_path, capsys):
    foreign = tmp_path / "run" / contract.STEPS_FILE_NAME
    foreign.parent.mkdir(parents=True)
    foreign.write_text('{"rollout_id": 0, "run_id": "someone-else"}\n')
    assert main(["demo", "--out", str(tmp_path), "--steps", "2", "--no-progress"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "the demo did not write" in err[0] and "choose another --out" in err[0]
    assert foreign.read_text() == '{"rollout_id": 0, "run_id": "someone-else"}\n'  # untouched


def test_the_demo_marks_the_records_it_wrote_as_its_own(demo):
    from shopsim_metrics.simulator.demo import DEMO_MARKER

    assert (demo["out"] / "run" / DEMO_MARKER).is_file()


def test_inspect_and_tune_from_read_the_wandb_offline_run_as_they_read_steps_jsonl(demo, capsys):
    """Every command that reads a run takes the same inputs: steps.jsonl, its run directory, or the W&B
    offline run directory (whose scalars hold every step)."""
    wandb_dirs = find_run_dirs(demo["wandb_root"])
    assert wandb_dirs
    wandb_run = wandb_dirs[0]
    tables = {}
    for source in (demo["out"] / "run", wandb_run):
        assert main(["inspect", str(source)]) == 0
        tables[source] = capsys.readouterr().out.splitlines()
    from_jsonl, from_wandb = tables.values()
    # the same step rows (ids, waves, counts, tokens); the file's name line aside
    assert [line for line in from_jsonl if line[:1].strip().isdigit()] == \
           [line for line in from_wandb if line[:1].strip().isdigit()]
    assert f"{STEPS} steps" in "\n".join(from_wandb)
    rates = []
    for source in (demo["out"] / "run", wandb_run):
        assert main(["tune", "--from", str(source), "--steps", "3", "--candidates", "32", "--no-widen", "--json"]) == 0
        import json as _json
        report = _json.loads(capsys.readouterr().out)
        rates.append((report["zero_std_rate"], report["technical_rate"], report["bursts"], report["recommended"]))
    assert rates[0] == rates[1]


# --- demo --agent -------------------------------------------------------------------------------------------
def test_the_agent_demo_records_its_episodes_and_the_bursts_cause_at_every_step(agent_demo):
    assert agent_demo["code"] == 0
    records = read_steps(agent_demo["out"] / "run")
    assert [r.rollout_id for r in records] == list(range(STEPS)) and not any(r.terminated for r in records)
    for r in records:
        assert r.episode_count > 0 and r.observation_token_count > 0 and r.turn_count_source == "metadata"
        assert r.turns_per_episode_max >= r.turns_per_episode_mean > 1 and r.environment_seconds > 0
    burst = records[BURST].technical_cause_counts
    assert max(burst, key=burst.get) == DEMO_BURST_CAUSE
    run = read_offline_run(_run_dir(agent_demo))
    rows = [row for row in run.history if contract.wandb_key("episode_count") in row]
    assert [row[contract.WANDB_STEP_KEY] for row in rows] == list(range(STEPS))
    for row, record in zip(rows, records):
        for name in contract.AGENT_FIELDS:
            assert row[contract.wandb_key(name)] == pytest.approx(getattr(record, name)), name
    [warn] = [a for a in run.alerts if a["level"] == "WARN"]
    assert f"`{DEMO_BURST_CAUSE}`" in warn["text"]  # the streak alert names what broke


def test_the_agent_demo_draws_the_agent_panels_and_sums_them_up(agent_demo):
    page = (agent_demo["out"] / "dashboard.html").read_text()
    for panel in dashboard_spec().panels_in("Agent episodes"):
        section = re.search(rf'<section [^>]*data-panel-id="{panel.id}"[^>]*>', page).group(0)
        assert "data-off" not in section, panel.id
    out = agent_demo["stdout"]
    assert re.search(r"^agent episodes: \d+\.\d turns per episode \(longest \d+\); \d+\.\d% of the response tokens "
                     r"were tool output", out, re.M)
    assert f"technical failures by cause: {DEMO_BURST_CAUSE} " in out
