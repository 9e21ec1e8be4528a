"""The W&B sink against real offline runs read back from disk, and its failure isolation."""

from __future__ import annotations

import importlib.util
import logging
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from hypothesis import given, settings as hsettings, strategies as st

from shopsim_metrics.record import contract
from shopsim_metrics.health.alerts import Alert
from shopsim_metrics.record.records import StepRecord
from shopsim_metrics.sinks import JsonlSink, SinkSet
from shopsim_metrics.readers import read_steps
from shopsim_metrics.sinks.factory import build_sinks
from shopsim_metrics.sinks.wandb_sink import (
    DECISIONS_KEY,
    WandbSink,
    api_key_configured,
    failed_check_key,
    record_scalars,
    table_due,
    wandb_step,
)
from shopsim_metrics.readers.wandb_offline import find_run_dirs, read_offline_run
from shopsim_metrics.settings import ShopsimSettings
from tests.wandb_helpers import make_record, wandb_env  # noqa: F401 - fixture

ROOT = Path(__file__).resolve().parents[1]


def _warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING and "W&B logging is off" in r.getMessage()]


def _run_dir(sink: WandbSink) -> Path:
    return Path(sink.run.dir).parent


# --- lazy import ---------------------------------------------------------------------------------
def test_importing_the_hooks_does_not_import_wandb() -> None:
    modules = ["shopsimrl", "shopsim_metrics.settings", "shopsim_metrics.sinks", "shopsim_metrics.sinks.factory",
               "shopsim_metrics.sinks.wandb_sink", "shopsim_metrics.readers.wandb_offline"]
    if importlib.util.find_spec("shopsimrl.slime_runtime") is not None:
        modules.insert(0, "shopsimrl.slime_runtime")
    code = "import sys\n" + "".join(f"import {m}\n" for m in modules) + "print('wandb' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT,
                         env={"PATH": "/usr/bin:/bin"}, check=True)
    assert out.stdout.strip() == "False", out.stderr


# --- a real offline run, read back from its files ---------------------------------------------------
def test_standalone_run_logs_every_key_table_and_alert(wandb_env: Path) -> None:  # noqa: F811
    import wandb

    assert wandb.run is None
    sink = WandbSink(mode="auto", table_every=3)  # outside slime: starts its own run
    records = [
        make_record(0),  # table: scheduled (0 % 3)
        make_record(1, wave_count=2),  # table: more than one wave
        make_record(2),  # no table
        make_record(3, reconcile_mismatch_count=None, success_rate=None),  # table: scheduled; Nones skipped
        make_record(4, terminated=True),  # table: terminated
        make_record(5),  # no table
    ]
    for rec in records:
        sink.emit(rec)
    sink.alert(Alert(title="shopsim technical streak", text="streak 4 of limit 8 at step 4", level="WARN"))
    sink.alert(Alert(title="shopsim termination", text="streak 8 reached the limit 8", level="ERROR"))
    assert sink.owns_run and sink.enabled
    run_dir = _run_dir(sink)
    assert run_dir.name.startswith("offline-run-"), "no API key configured: the run must be offline"
    sink.close()
    assert wandb.run is None, "the sink finishes the run it started"

    run = read_offline_run(run_dir)
    assert run.project == "shopsim-metrics"
    assert run.exit_code == 0
    rows = [row for row in run.history if contract.WANDB_STEP_KEY in row]
    assert [row[contract.WANDB_STEP_KEY] for row in rows] == [0, 1, 2, 3, 4, 5]
    for rec, row in zip(records, rows):
        for name in contract.WANDB_STEP_FIELDS:
            key = contract.wandb_key(name)
            value = getattr(rec, name)
            if value is None:
                assert key not in row, f"{key} is None at step {rec.rollout_id} and must be skipped"
            elif name == "terminated":
                assert row[key] == int(value)
            else:
                assert row[key] == pytest.approx(value), key
        for check in contract.FAILED_CHECKS:
            assert row[failed_check_key(check)] == rec.failed_check_counts.get(check, 0)
    # the step metric is declared for every key the sink logs
    assert any(m.get("name") == contract.WANDB_STEP_KEY for m in run.metrics)
    for key in WandbSink.logged_keys():
        assert run.step_metric_of(key) == contract.WANDB_STEP_KEY, key
    # the decision table on the policy's steps, with the ledger rows
    tables = run.tables[DECISIONS_KEY]
    assert [t.row[contract.WANDB_STEP_KEY] for t in tables] == [0, 1, 3, 4]
    for table in tables:
        rec = records[table.row[contract.WANDB_STEP_KEY]]
        assert table.columns == list(contract.LEDGER_COLUMNS)
        assert table.records() == [{c: getattr(r, c) for c in contract.LEDGER_COLUMNS} for r in rec.decisions]
    # the alerts, with their level and text
    assert [(a["level"], a["title"], a["text"]) for a in run.alerts] == [
        ("WARN", "shopsim technical streak", "streak 4 of limit 8 at step 4"),
        ("ERROR", "shopsim termination", "streak 8 reached the limit 8"),
    ]
    # wandb's own reader and the direct log decoder agree
    direct = read_offline_run(run_dir, prefer_leet=False)
    assert (direct.history, direct.alerts, direct.metrics, direct.summary) == (
        run.history, run.alerts, run.metrics, run.summary)


def test_train_step_axis_follows_slime(wandb_env: Path) -> None:  # noqa: F811
    sink = WandbSink(mode="standalone", table_every=0, always_use_train_step=True)
    knobs = dict(rollout_batch_size=16, n_samples_per_prompt=8, global_batch_size=64)
    for rid in range(3):
        sink.emit(make_record(rid, **knobs))
    # the knobs are read from each record: a record with other knobs gets its own train step
    sink.emit(make_record(3, **dict(knobs, global_batch_size=32)))
    run_dir = _run_dir(sink)
    sink.close()
    run = read_offline_run(run_dir)
    steps = [row[contract.WANDB_STEP_KEY] for row in run.history if contract.WANDB_STEP_KEY in row]
    assert steps == [0, 2, 4, 12]
    assert DECISIONS_KEY not in run.tables, "table_every=0 and single-wave steps: no table"


def test_joins_the_run_already_in_the_process(wandb_env: Path) -> None:  # noqa: F811
    import wandb

    outer = wandb.init(project="slime-run")
    sink = WandbSink(mode="auto", inside_slime=True, use_wandb=True, table_every=1)
    sink.emit(make_record(7))
    sink.alert(Alert(title="t", text="x", level="INFO"))
    assert sink.run is outer and not sink.owns_run
    sink.close()
    assert wandb.run is outer, "a joined run belongs to slime: the sink never finishes it"
    outer.log({"rollout/step": 8, "rollout/raw_reward": 0.5})
    run_dir = Path(outer.dir).parent
    outer.finish()
    run = read_offline_run(run_dir)
    assert run.project == "slime-run"
    ours = [row for row in run.history if contract.wandb_key("wave_count") in row]
    assert len(ours) == 1 and ours[0][contract.WANDB_STEP_KEY] == 7
    assert [t.row[contract.WANDB_STEP_KEY] for t in run.tables[DECISIONS_KEY]] == [7]
    assert [(a["level"], a["text"]) for a in run.alerts] == [("INFO", "x")]
    assert len(find_run_dirs(wandb_env)) == 1, "never a second run inside slime"


@pytest.mark.parametrize("mode,inside,use_wandb", [("auto", True, True), ("auto", True, False), ("join", False, None)])
def test_no_run_to_join_disables_without_starting_one(wandb_env, caplog, mode, inside, use_wandb) -> None:  # noqa: F811
    import wandb

    sink = WandbSink(mode=mode, inside_slime=inside, use_wandb=use_wandb)
    with caplog.at_level(logging.INFO, logger="shopsim_metrics"):
        for rid in range(3):
            sink.emit(make_record(rid))
    assert wandb.run is None and not sink.enabled and sink.run is None
    assert find_run_dirs(wandb_env) == []
    # a warning (once) only when the user asked for W&B; otherwise an info line
    assert len(_warnings(caplog)) == (0 if use_wandb is False else 1)


# --- failure isolation ------------------------------------------------------------------------------
def test_wandb_missing_warns_once_and_jsonl_stays_complete(tmp_path, monkeypatch, caplog) -> None:
    monkeypatch.setitem(sys.modules, "wandb", None)  # `import wandb` now raises ImportError
    sink = WandbSink(mode="standalone")
    jsonl = JsonlSink(tmp_path / "run")
    sinks = SinkSet([jsonl, sink])
    with caplog.at_level(logging.WARNING, logger="shopsim_metrics"):
        for rid in range(4):
            sinks.emit(make_record(rid))
        sinks.alert(Alert(title="t", text="streak", level="ERROR"))
        sinks.close()
    warnings = _warnings(caplog)
    assert len(warnings) == 1 and "pip install wandb" in warnings[0]
    assert not sink.enabled
    assert [r.rollout_id for r in read_steps(tmp_path / "run")] == [0, 1, 2, 3]


def test_wandb_log_raising_warns_once_and_never_escapes(wandb_env, tmp_path, caplog) -> None:  # noqa: F811
    sink = WandbSink(mode="standalone")
    sink.emit(make_record(0))
    run = sink.run

    def broken_log(*args, **kwargs):
        raise RuntimeError("wandb backend went away")

    run.log = broken_log
    jsonl = JsonlSink(tmp_path / "run")
    sinks = SinkSet([jsonl, sink])
    with caplog.at_level(logging.WARNING, logger="shopsim_metrics"):
        for rid in range(1, 5):
            sinks.emit(make_record(rid))
        sinks.alert(Alert(title="t", text="x", level="WARN"))
        sinks.close()
    warnings = _warnings(caplog)
    assert len(warnings) == 1 and "RuntimeError" in warnings[0] and "wandb backend went away" in warnings[0]
    assert not sink.enabled
    assert [r.rollout_id for r in read_steps(tmp_path / "run")] == [1, 2, 3, 4]
    # SinkSet never saw an exception from the sink
    assert not any("the wandb sink failed" in r.getMessage() for r in caplog.records)


def test_misconfigured_init_is_isolated(wandb_env, monkeypatch, caplog) -> None:  # noqa: F811
    import wandb

    def bad_init(**kwargs):
        raise wandb.errors.UsageError("invalid project name")

    monkeypatch.setattr(wandb, "init", bad_init)
    sink = WandbSink(mode="standalone")
    with caplog.at_level(logging.WARNING, logger="shopsim_metrics"):
        sink.emit(make_record(0))
        sink.emit(make_record(1))
        sink.close()
    assert len(_warnings(caplog)) == 1 and "invalid project name" in _warnings(caplog)[0]


def test_a_wandb_init_that_hangs_never_stalls_the_steps(wandb_env, tmp_path, monkeypatch, caplog) -> None:  # noqa: F811
    """An unreachable W&B host: ``wandb.init`` blocks. The sink gives up after ``init_timeout``, once:
    it warns once, never waits on W&B again, every record still reaches steps.jsonl, and the run that
    starts late is finished unused. (How long the wait lasts is ``call_within``'s bound; no clock here.)"""
    import threading

    import wandb

    release, late_finished, calls, seen = threading.Event(), threading.Event(), [], {}

    class LateRun:
        def finish(self, **kwargs):
            late_finished.set()

    def hanging_init(**kwargs):
        calls.append(kwargs)
        seen.update(kwargs)
        release.wait(60)
        return LateRun()

    monkeypatch.setattr(wandb, "init", hanging_init)
    timeout = 0.3
    sinks = SinkSet([JsonlSink(tmp_path / "run"), WandbSink(mode="standalone", init_timeout=timeout)])
    with caplog.at_level(logging.WARNING, logger="shopsim_metrics"):
        for rid in range(5):
            sinks.emit(make_record(rid))
    assert len(calls) == 1, "after one init timed out, the later steps do not wait on W&B again"
    assert seen["settings"].init_timeout == timeout  # W&B's own bound is set too
    warnings = _warnings(caplog)
    assert len(warnings) == 1 and "shopsim_wandb_init_timeout" in warnings[0]
    assert [r.rollout_id for r in read_steps(tmp_path / "run")] == [0, 1, 2, 3, 4]
    release.set()
    assert late_finished.wait(60)  # the late run is closed, nothing logged into it
    sinks.close()


def test_the_init_timeout_is_a_setting() -> None:
    settings = ShopsimSettings.from_args(SimpleNamespace(shopsim_wandb_init_timeout=5))
    assert WandbSink.from_settings(settings).init_timeout == 5.0
    assert ShopsimSettings.from_args(SimpleNamespace()).wandb_init_timeout == 30.0
    with pytest.raises(ValueError, match="shopsim_wandb_init_timeout: expected a number > 0"):
        ShopsimSettings.from_args(SimpleNamespace(shopsim_wandb_init_timeout=0))


# --- settings, factory and pure helpers ---------------------------------------------------------------
@pytest.mark.parametrize("args,expected", [
    (dict(shopsim_wandb="off"), ["jsonl", "announce"]),
    (dict(use_wandb=False), ["jsonl", "announce"]),  # inside slime without --use-wandb
    (dict(use_wandb=True), ["jsonl", "announce", "wandb"]),  # inside slime with --use-wandb: join
    (dict(), ["jsonl", "announce", "wandb"]),  # outside slime: standalone or join
    (dict(use_wandb=False, shopsim_wandb="standalone"), ["jsonl", "announce", "wandb"]),
])
def test_factory_builds_jsonl_first_then_wandb(tmp_path, args, expected) -> None:
    settings = ShopsimSettings.from_args(SimpleNamespace(shopsim_run_dir=str(tmp_path), **args))
    sinks = build_sinks(settings)
    assert [s.name for s in sinks] == expected
    assert sinks[0].run_dir == tmp_path


def test_sink_from_settings_carries_the_settings() -> None:
    args = SimpleNamespace(rollout_batch_size=16, n_samples_per_prompt=8, global_batch_size=64, use_wandb=True,
                           wandb_always_use_train_step=True, shopsim_wandb_table_every=5)
    sink = WandbSink.from_settings(ShopsimSettings.from_args(args))
    assert (sink.mode, sink.inside_slime, sink.use_wandb, sink.table_every) == ("auto", True, True, 5)
    assert sink.always_use_train_step
    assert sink.config["shopsim"]["max_consecutive_failed_groups"] == 8


def test_api_key_detection_reads_env_and_netrc_only(tmp_path) -> None:
    netrc_file = tmp_path / "netrc"
    assert not api_key_configured({"NETRC": str(netrc_file)})
    assert api_key_configured({"WANDB_API_KEY": "x" * 40, "NETRC": str(netrc_file)})
    netrc_file.write_text("machine api.wandb.ai\n  login user\n  password " + "k" * 40 + "\n")
    netrc_file.chmod(0o600)
    assert api_key_configured({"NETRC": str(netrc_file)})
    assert not api_key_configured({"NETRC": str(netrc_file), "WANDB_BASE_URL": "https://wandb.example.com"})


def test_wandb_step_matches_slime_formula() -> None:
    assert wandb_step(5) == 5
    assert wandb_step(5, always_use_train_step=True, rollout_batch_size=16, n_samples_per_prompt=8,
                      global_batch_size=64) == 10
    assert wandb_step(5, always_use_train_step=True, rollout_batch_size=3, n_samples_per_prompt=3,
                      global_batch_size=4) == 11  # floor division, as slime
    assert wandb_step(5, always_use_train_step=True) == 5  # knobs unknown: the rollout id


def test_unknown_mode_is_rejected_with_the_allowed_values() -> None:
    with pytest.raises(ValueError, match="auto.*got 'online'"):
        WandbSink(mode="online")


_ratio = st.one_of(st.none(), st.floats(min_value=0, max_value=1))


@hsettings(max_examples=200, deadline=None)
@given(rollout_id=st.integers(0, 10_000), waves=st.integers(0, 5), terminated=st.booleans(),
       every=st.integers(0, 20), success=_ratio, reconcile=st.one_of(st.none(), st.integers(0, 4)),
       checks=st.dictionaries(st.sampled_from(contract.FAILED_CHECKS + ("not_a_check",)), st.integers(0, 9)))
def test_scalars_and_table_policy_invariants(rollout_id, waves, terminated, every, success, reconcile, checks) -> None:
    rec = StepRecord(rollout_id=rollout_id, wave_count=waves, terminated=terminated, success_rate=success,
                     reconcile_mismatch_count=reconcile, failed_check_counts=checks)
    scalars = record_scalars(rec)
    assert set(scalars) <= set(WandbSink.logged_keys())  # bounded: never a key outside the docs
    assert all(v is not None for v in scalars.values())
    assert scalars[contract.wandb_key("terminated")] == int(terminated)
    assert (contract.wandb_key("success_rate") in scalars) == (success is not None)
    assert (contract.wandb_key("reconcile_mismatch_count") in scalars) == (reconcile is not None)
    assert {k for k in scalars if k.startswith(failed_check_key(""))} == {failed_check_key(c) for c in contract.FAILED_CHECKS}
    due = table_due(rec, every)
    if waves > 1 or terminated:
        assert due
    elif every == 0:
        assert not due
    else:
        assert due == (rollout_id % every == 0)


def test_standalone_run_lands_in_the_shopsim_run_dir(wandb_env, monkeypatch, tmp_path) -> None:  # noqa: F811
    import wandb

    monkeypatch.delenv("WANDB_DIR")
    wandb.teardown()
    sink = WandbSink(mode="standalone", run_dir=tmp_path / "shopsim_run")
    sink.emit(make_record(0))
    sink.close()
    (run_dir,) = find_run_dirs(tmp_path / "shopsim_run")
    assert run_dir.name.startswith("offline-run-")
    assert read_offline_run(run_dir).history[0][contract.wandb_key("wave_count")] == 1
