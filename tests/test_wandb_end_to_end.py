"""The three hooks, loaded by dotted path and driven by the simulated slime loop, logging to a real offline W&B
run."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

from conftest import fifo_batches, make_args, run_scripted_step, scripted_loop, spread, technical, zero
from shopsim_metrics.record import contract
from shopsim_metrics.loop.loop_state import ManualLoopState
from shopsim_metrics.readers import read_steps
from shopsim_metrics.sinks.wandb_sink import DECISIONS_KEY, PROMPTS_KEY, record_scalars
from shopsim_metrics.readers.wandb_offline import find_run_dirs, read_offline_run
from shopsim_metrics.errors import TechnicalFailureLimitExceeded
from tests.wandb_helpers import wandb_env  # noqa: F401 - fixture


def hook(path: str):
    module, _, name = path.rpartition(".")
    return getattr(importlib.import_module(module), name)


def run_three_steps(args) -> None:
    """Step 0: one wave with zero-std drops; step 1: technical drops open a second wave; step 2: termination."""
    runtime = hook("shopsimrl.slime_runtime.configure")
    state = ManualLoopState(source="scripted")
    runtime(args, sinks=None, loop_state=state)  # sinks from the settings: JSONL + W&B
    loop = scripted_loop(args, state)  # the loop loads the three hooks by dotted path
    run_scripted_step(loop, 0, lambda gid: zero(gid) if gid % 4 == 0 else spread(gid), fifo_batches(1))
    run_scripted_step(loop, 1, lambda gid: spread(gid) if gid % 3 == 2 else technical(gid), fifo_batches(1))
    with pytest.raises(TechnicalFailureLimitExceeded):
        run_scripted_step(loop, 2, technical, fifo_batches(1))
    hook("shopsimrl.slime_runtime.reset_runtime")()  # shuts down: the standalone run is finished


def test_hooks_log_every_step_table_and_alert_to_a_standalone_run(wandb_env: Path, tmp_path: Path) -> None:  # noqa: F811
    args = make_args(shopsim_run_dir=str(tmp_path / "run"), shopsim_wandb_table_every=10)  # no use_wandb: outside slime
    run_three_steps(args)

    records = read_steps(tmp_path / "run")
    assert [(r.rollout_id, r.wave_count, r.terminated) for r in records] == [(0, 1, False), (1, 2, False), (2, 1, True)]
    (run_dir,) = find_run_dirs(wandb_env)
    run = read_offline_run(run_dir)
    rows = [row for row in run.history if contract.wandb_key("wave_count") in row]
    assert [row[contract.WANDB_STEP_KEY] for row in rows] == [0, 1, 2]
    for rec, row in zip(records, rows):  # W&B holds exactly the JSONL record's scalars
        expected = record_scalars(rec)
        assert {k: v for k, v in row.items() if k.startswith(contract.WANDB_PREFIX)
                and k not in (DECISIONS_KEY, PROMPTS_KEY)} == pytest.approx(expected)
    # prompts table: step 0 on schedule (every 50), and at the end against the last step; every group of
    # the loop double has the same (empty) prompt, so one prompt holds every visit
    prompt_tables = run.tables[PROMPTS_KEY]
    assert [t.row[contract.WANDB_STEP_KEY] for t in prompt_tables] == [0, 2]
    (final,) = prompt_tables[-1].records()
    assert final["visits"] == sum(r.accepted_group_count for r in records)
    assert final["prompt_key"] == records[0].decisions[0].prompt_key
    assert rows[0][contract.wandb_key("reconcile_mismatch_count")] == 0
    assert rows[1][contract.wandb_key("reconcile_mismatch_count")] == 0
    # tables: step 0 on schedule, step 1 multi-wave, step 2 terminated
    tables = run.tables[DECISIONS_KEY]
    assert [t.row[contract.WANDB_STEP_KEY] for t in tables] == [0, 1, 2]
    for table, rec in zip(tables, records):
        assert [r["outcome"] for r in table.records()] == [d.outcome for d in rec.decisions]
    # the terminated step's one alert is the ERROR at the limit, naming streak, limit, step and checks (its
    # streak crossed the warning threshold in the same step: no WARN beside it)
    assert [(a["level"], a["title"]) for a in run.alerts] == [
        ("ERROR", "shopsim: technical-failure limit reached at rollout step 2, terminating")]
    (error,) = run.alerts
    assert "8 consecutive technical groups reached the limit 8 at rollout step 2" in error["text"]
    assert "status_failed=8" in error["text"] and "earlier streak" not in error["text"]
    assert run.step_metric_of(contract.wandb_key("success_rate")) == contract.WANDB_STEP_KEY


def test_inside_slime_the_hooks_join_slimes_run(wandb_env: Path, tmp_path: Path) -> None:  # noqa: F811
    import wandb

    slime_run = wandb.init(project="slime")  # what slime's --use-wandb does in the process
    args = make_args(shopsim_run_dir=str(tmp_path / "run"), use_wandb=True, wandb_always_use_train_step=True)
    run_three_steps(args)
    assert wandb.run is slime_run, "the hooks never finish slime's run"
    run_dir = Path(slime_run.dir).parent
    slime_run.finish()
    assert find_run_dirs(wandb_env) == [run_dir], "no second run inside slime"
    run = read_offline_run(run_dir)
    steps = [row[contract.WANDB_STEP_KEY] for row in run.history if contract.wandb_key("wave_count") in row]
    assert steps == [0, 2, 4]  # rollout_id * 16 * 8 // 64
    assert [a["level"] for a in run.alerts] == ["ERROR"]


def test_inside_slime_without_use_wandb_stays_off_wandb(wandb_env: Path, tmp_path: Path) -> None:  # noqa: F811
    args = make_args(shopsim_run_dir=str(tmp_path / "run"), use_wandb=False)
    run_three_steps(args)
    assert find_run_dirs(wandb_env) == []
    assert len(read_steps(tmp_path / "run")) == 3


def test_the_end_of_a_train_py_run_reaches_slimes_run_before_slime_finishes_it(
        wandb_env: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:  # noqa: F811
    """As under slime's train.py: the last step is ``num_rollout - 1``; then slime's ``RolloutManager.dispose()``
    finishes the W&B run, and only then (if at all) do the hooks' exit handlers run."""
    import logging

    import wandb

    slime_run = wandb.init(project="slime")
    run_dir = Path(slime_run.dir).parent
    args = make_args(shopsim_run_dir=str(tmp_path / "run"), use_wandb=True, num_rollout=3, start_rollout_id=0)
    state = ManualLoopState(source="scripted")
    hook("shopsimrl.slime_runtime.configure")(args, sinks=None, loop_state=state)
    loop = scripted_loop(args, state)
    for rollout_id in range(3):
        run_scripted_step(loop, rollout_id, lambda gid: zero(gid) if gid % 4 == 0 else spread(gid), fifo_batches(1))
    slime_run.finish()  # slime's finish_tracking, inside the actor, before any exit handler of the hooks
    with caplog.at_level(logging.INFO, logger="shopsim_metrics"):
        hook("shopsimrl.slime_runtime.reset_runtime")()  # what atexit would do, if Ray lets it run
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING], "a run finished by slime is no W&B failure"

    run = read_offline_run(run_dir)
    tables = run.tables[PROMPTS_KEY]
    # on schedule at step 0, and the final one with the run's last step (num_rollout - 1), not at exit
    assert [t.row[contract.WANDB_STEP_KEY] for t in tables] == [0, 2]
    records = read_steps(tmp_path / "run")
    (final,) = tables[-1].records()
    assert final["visits"] == sum(r.accepted_group_count for r in records)


def test_a_terminated_step_carries_the_final_prompts_table(wandb_env: Path, tmp_path: Path) -> None:  # noqa: F811
    import wandb

    slime_run = wandb.init(project="slime")
    run_dir = Path(slime_run.dir).parent
    args = make_args(shopsim_run_dir=str(tmp_path / "run"), use_wandb=True, num_rollout=100)
    state = ManualLoopState(source="scripted")
    hook("shopsimrl.slime_runtime.configure")(args, sinks=None, loop_state=state)
    loop = scripted_loop(args, state)
    run_scripted_step(loop, 0, spread, fifo_batches(1))
    run_scripted_step(loop, 1, spread, fifo_batches(1))
    with pytest.raises(TechnicalFailureLimitExceeded):
        run_scripted_step(loop, 2, technical, fifo_batches(1))
    slime_run.finish()
    hook("shopsimrl.slime_runtime.reset_runtime")()
    tables = read_offline_run(run_dir).tables[PROMPTS_KEY]
    assert [t.row[contract.WANDB_STEP_KEY] for t in tables] == [0, 2]
