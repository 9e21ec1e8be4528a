"""A resume from the monitor's snapshot beside slime's checkpoint rebuilds what a replay of every record does."""

from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import fifo_batches, make_args, run_scripted_step, scripted_loop
from shopsim_metrics.prompts.skip_record import SkipTally
from shopsim_metrics.prompts.value import PromptValueTracker
from shopsim_metrics.readers import read_steps
from shopsim_metrics.run.resume import restore
from shopsim_metrics.sinks import JsonlSink
from shopsim_metrics.run.snapshot import SnapshotPlan, build_snapshot, find_snapshot, snapshot_path
from shopsim_metrics.run.state import monitor_state
from shopsim_metrics.state_file import write_json
from shopsim_metrics.health.advisories import Advisor
from shopsim_metrics.loop.loop_state import ManualLoopState
from shopsim_metrics.record.records import DecisionRow, StepRecord
from shopsim_metrics.health.streak import TechnicalStreak
from shopsim_metrics.waves.wave_size import RecentOrders
from shopsimrl import slime_runtime
from test_resume import STEPS, comparable, group_for

OUTCOMES = ("trained", "dropped_zero_std", "dropped_technical")


# --- the property: snapshot + tail == replay of everything --------------------------------------
def fresh_state() -> tuple[TechnicalStreak, PromptValueTracker, SkipTally, RecentOrders, Advisor]:
    return (TechnicalStreak(), PromptValueTracker(limit=6, forgetting=0.9), SkipTally(limit=4), RecentOrders(window=3),
            Advisor())


def state_of(start: int, run_dir: Path, snapshot_dir: Path | None):
    streak, prompts, skips, recent_orders, advisor = fresh_state()
    restored = restore(run_dir, monitor_state(streak=streak, prompts=prompts, skips=skips, recent_orders=recent_orders,
                                              advisor=advisor), start_rollout_id=start, snapshot_dir=snapshot_dir)
    return restored, (streak.state_dict(), prompts.state_dict(), skips.state_dict(), recent_orders.state_dict(),
                      advisor.state_dict())


rows = st.lists(st.tuples(st.sampled_from(OUTCOMES), st.integers(0, 8), st.integers(0, 7)), max_size=5)
steps = st.tuples(rows, st.lists(st.integers(0, 7), max_size=2))  # ledger rows, prompts skipped


def record_of(rollout_id: int, process: int, sequence: int, content) -> StepRecord:
    ledger, skipped = content
    decisions = []
    for order, (outcome, successes, prompt) in enumerate(ledger, start=1):
        technical = outcome == "dropped_technical"
        decisions.append(DecisionRow(
            order=order, waves_open=1, group_index=rollout_id * 10 + order, outcome=outcome,
            reason={"trained": None, "dropped_zero_std": "shopsim_zero_std_group"}.get(outcome, "shopsim_technical"),
            remaining_before=4, unique_rollouts=8, failed_check="status_failed" if technical else None,
            success_count=None if technical else successes, scorable_rollouts=0 if technical else 8,
            response_tokens=100, prompt_key=f"p{prompt}"))
    table = [{"prompt_key": f"p{k}", "group_index": rollout_id * 10 + i} for i, k in enumerate(skipped)]
    zero_std = [row for row in decisions if row.outcome == "dropped_zero_std"]
    return StepRecord(rollout_id=rollout_id, decisions=decisions, run_id="run-1", process_started_at=float(process),
                      record_sequence=sequence, skipped_prompt_count=len(skipped), skipped_prompts=table,
                      accepted_group_count=len(decisions), zero_std_group_count=len(zero_std),
                      technical_group_drop_count=sum(1 for row in decisions if row.outcome == "dropped_technical"),
                      zero_std_all_fail_group_count=sum(1 for row in zero_std if row.success_count == 0))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(interval=st.integers(1, 4), runs=st.lists(st.tuples(st.integers(1, 7), st.lists(steps, min_size=7, max_size=7)),
                                                min_size=1, max_size=3),
       dropped=st.integers(0, 2), data=st.data())
def test_a_snapshot_and_the_records_after_it_rebuild_what_replaying_every_record_does(
        tmp_path_factory, interval, runs, dropped, data) -> None:
    """Processes resume from the last checkpoint before their predecessor stopped; every checkpoint
    step gets a snapshot as its record is written (as the monitor writes it: the state a replay would
    rebuild then); the last resume may find its newest snapshots gone (it then replays a longer tail)."""
    run_dir, ckpt = tmp_path_factory.mktemp("run"), tmp_path_factory.mktemp("ckpt")
    plan = SnapshotPlan(save=str(ckpt), load=str(ckpt), save_interval=interval, num_rollout=None)
    start, saved = 0, []
    for process, (length, contents) in enumerate(runs, start=1):
        sink = JsonlSink(run_dir)
        for sequence, step in enumerate(range(start, start + length), start=1):
            sink.emit(record_of(step, process, sequence, contents[sequence - 1]))
            if plan.due(step):
                restored, _ = state_of(step + 1, run_dir, None)
                streak, prompts, skips, recent_orders, advisor = fresh_state()
                state = monitor_state(streak=streak, prompts=prompts, skips=skips, recent_orders=recent_orders,
                                      advisor=advisor)
                restore(run_dir, state, start_rollout_id=step + 1)
                write_json(snapshot_path(ckpt, step), build_snapshot(
                    state, rollout_id=step, run_id="run-1", missing=restored.missing, run_dir=run_dir))
                saved.append(step)
        sink.close()
        checkpoints = [s for s in saved if s < start + length]
        start = checkpoints[-1] + 1 if checkpoints else 0
    resume_at = data.draw(st.integers(1, max(saved) + 1)) if saved else 1
    for step in sorted({s for s in saved if s < resume_at}, reverse=True)[:dropped]:
        snapshot_path(ckpt, step).unlink()  # the newest snapshots lost: an older one and a longer tail
    with_snapshot, expected_snapshot = state_of(resume_at, run_dir, ckpt), find_snapshot(ckpt, resume_at)
    replayed = state_of(resume_at, run_dir, None)
    assert with_snapshot[1] == replayed[1]
    assert with_snapshot[0].missing == replayed[0].missing
    assert with_snapshot[0].snapshot == (expected_snapshot[1] if expected_snapshot else None)
    assert with_snapshot[0].note is None


# --- the monitor writes its snapshots and reads them on --load ----------------------------------
def run_steps(run_dir: Path, ckpt: Path, steps: range, *, start: int, first_gids: dict[int, int]) -> tuple:
    """One process with slime's --save/--load/--save-interval set (see test_resume.run_steps); returns
    its monitor's state at the end (streak, prompts, skips, recent orders)."""
    args = make_args(shopsim_run_dir=str(run_dir), start_rollout_id=start, num_rollout=STEPS, shopsim_alerts=False,
                     save=str(ckpt), load=str(ckpt) if start else None, save_interval=2)
    state = ManualLoopState(source="scripted")
    runtime = slime_runtime.configure(args, sinks=[JsonlSink(run_dir)], loop_state=state)
    loop = scripted_loop(args, state)
    for step in steps:
        if step in first_gids:
            loop._next_id = first_gids[step]
        first_gids.setdefault(step, loop._next_id)
        first = loop._next_id
        run_scripted_step(loop, step, lambda gid, s=step, f=first: group_for(s, gid - f, gid, 2), fifo_batches(3))
    state_at_end = (runtime.parts.streak.state_dict(), runtime.parts.prompts.state_dict(),
                    runtime.parts.skip_tally.state_dict(), runtime.parts.waves.recent_orders.state_dict())
    slime_runtime.reset_runtime()
    return state_at_end


def test_the_monitor_saves_a_snapshot_at_each_checkpoint_and_a_resume_reads_only_the_records_after_it(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    first_gids: dict[int, int] = {}
    unbroken = tmp_path / "unbroken"
    run_steps(unbroken, tmp_path / "ckpt0", range(STEPS), start=0, first_gids=first_gids)
    run, ckpt = tmp_path / "run", tmp_path / "ckpt"
    run_steps(run, ckpt, range(5), start=0, first_gids=dict(first_gids))  # dies after step 4
    assert sorted(p.name for p in (ckpt / "rollout").iterdir()) == [
        "shopsim_monitor_state_1.json", "shopsim_monitor_state_3.json"]  # (N + 1) % 2 == 0
    snapshot = json.loads(snapshot_path(ckpt, 3).read_text())
    assert snapshot["streak"]["count"] == 0 and len(snapshot["prompts"]["history"]["keys"]) == 9
    with caplog.at_level(logging.INFO, logger="shopsim_metrics"):
        run_steps(run, ckpt, range(4, STEPS), start=4, first_gids=dict(first_gids))
    assert any("the snapshot of step 3 and the records after it" in r.getMessage() for r in caplog.records)
    assert [comparable(r) for r in read_steps(run)] == [comparable(r) for r in read_steps(unbroken)]


def test_a_resume_from_the_snapshot_does_not_read_the_records_before_it(tmp_path: Path) -> None:
    first_gids: dict[int, int] = {}
    run, ckpt = tmp_path / "run", tmp_path / "ckpt"
    run_steps(run, ckpt, range(4), start=0, first_gids=first_gids)
    snapshot = json.loads(snapshot_path(ckpt, 3).read_text())
    expected = state_of_monitor(run, ckpt, 4)
    cut = snapshot["records"]["steps.jsonl"]
    written = (run / "steps.jsonl").read_bytes()
    (run / "steps.jsonl").write_bytes(b" " * (cut - 1) + b"\n" + written[cut:])  # what came before is gone
    assert state_of_monitor(run, ckpt, 4) == expected
    shutil.rmtree(ckpt / "rollout")  # and without the snapshot, nothing is left to replay
    assert state_of_monitor(run, ckpt, 4) != expected


def state_of_monitor(run: Path, ckpt: Path, start: int):
    args = make_args(shopsim_run_dir=str(run), start_rollout_id=start, num_rollout=STEPS, shopsim_alerts=False,
                     load=str(ckpt), save=str(ckpt), save_interval=2)
    runtime = slime_runtime.configure(args, sinks=[], loop_state=ManualLoopState(source="scripted"))
    try:
        return (runtime.parts.streak.state_dict(), runtime.parts.prompts.state_dict(), runtime.parts.skip_tally.state_dict(),
                runtime.waves.recent_orders.state_dict())
    finally:
        slime_runtime.reset_runtime()


@pytest.mark.parametrize("damage", ["", "[]", "{\"kind\": \"shopsim-monitor-state\", \"format\": 99}", "{trunc",
                                    "settings", "records"])
def test_a_snapshot_that_cannot_stand_for_the_records_is_named_and_the_records_are_replayed(
        tmp_path: Path, caplog: pytest.LogCaptureFixture, damage: str) -> None:
    run, ckpt = tmp_path / "run", tmp_path / "ckpt"
    run_steps(run, ckpt, range(4), start=0, first_gids={})
    path = snapshot_path(ckpt, 3)
    replayed = state_of_monitor(run, tmp_path / "none", 4)
    if damage == "settings":
        data = json.loads(path.read_text())
        data["prompt_settings"]["forgetting"] = 0.5
        path.write_text(json.dumps(data))
    elif damage == "records":
        (run / "steps.jsonl").write_bytes((run / "steps.jsonl").read_bytes()[:100])  # shorter than it was
        replayed = state_of_monitor(run, tmp_path / "none", 4)
    else:
        path.write_text(damage)
    with caplog.at_level(logging.WARNING, logger="shopsim_metrics"):
        assert state_of_monitor(run, ckpt, 4) == replayed
    (warning,) = [r.getMessage() for r in caplog.records if "snapshot was not used" in r.getMessage()]
    assert "the records were replayed" in warning
    if damage not in ("settings", "records"):
        assert str(path) in warning and "--load another checkpoint" in warning


def test_no_snapshot_without_save_or_between_checkpoints() -> None:
    assert not SnapshotPlan(save=None, load=None, save_interval=2, num_rollout=None).due(1)
    assert not SnapshotPlan(save="/c", load=None, save_interval=None, num_rollout=None).due(1)
    plan = SnapshotPlan.from_args(make_args(save="/c", save_interval=3, num_rollout=7))
    assert [n for n in range(7) if plan.due(n)] == [2, 5, 6]


def test_a_resumed_monitor_holds_the_live_monitors_state_with_or_without_the_snapshot(tmp_path: Path) -> None:
    """The recent steps' finishing orders (what adaptive waves are sized from) included: the first wave of a
    resumed run is sized as the unbroken run's."""
    run, ckpt = tmp_path / "run", tmp_path / "ckpt"
    live = run_steps(run, ckpt, range(4), start=0, first_gids={})
    assert live[3]["orders"] and any("s" in order and set(order) != {"s"} for order in live[3]["orders"])
    assert state_of_monitor(run, ckpt, 4) == live
    assert state_of_monitor(run, tmp_path / "elsewhere", 4) == live
