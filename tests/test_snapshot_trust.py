"""What a resume trusts in a snapshot beside slime's checkpoint: only what is the run's own and could be true.

A snapshot is a file anyone with access to ``--load`` can put there: another run's (a checkpoint
directory copied or shared), one a stale writer wrote, or one whose pieces hold impossible values.
Each is refused with one warning naming why, and the state is rebuilt from the records instead, or
loaded with the warning the docs promise (§1.4, §1.5).
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from conftest import make_args
from shopsim_metrics.run.resume import restore
from shopsim_metrics.run.snapshot import build_snapshot, snapshot_path
from shopsim_metrics.run.state import monitor_state
from shopsim_metrics.sinks import JsonlSink
from shopsim_metrics.state_file import write_json
from shopsim_metrics.record.records import DecisionRow, StepRecord
from shopsim_metrics.health.streak import TechnicalStreak
from shopsimrl import slime_runtime


def row(order: int, outcome: str, prompt: str) -> DecisionRow:
    technical = outcome == "dropped_technical"
    return DecisionRow(order=order, waves_open=1, group_index=order, outcome=outcome,
                       reason="shopsim_technical" if technical else None, remaining_before=4, unique_rollouts=8,
                       failed_check="status_failed" if technical else None, success_count=None if technical else 4,
                       scorable_rollouts=0 if technical else 8, response_tokens=100, prompt_key=prompt)


def write_run(run_dir: Path, run_id: str, steps: range, outcome: str, prompts: int) -> None:
    """Records of ``steps``, each with ``prompts`` groups of ``outcome``, by one process of ``run_id``."""
    sink = JsonlSink(run_dir, fsync=False)
    for sequence, step in enumerate(steps, start=1):
        sink.emit(StepRecord(rollout_id=step, run_id=run_id, process_started_at=100.0, process_start_rollout_id=0,
                             process_generation=0, record_sequence=sequence,
                             decisions=[row(k + 1, outcome, f"{run_id} p{step}-{k}") for k in range(prompts)]))
    sink.close()


def resumed(run_dir: Path, ckpt: Path, at: int):
    """What a monitor resumed at ``at`` with ``--load ckpt`` holds before its first judgement."""
    args = make_args(shopsim_run_dir=str(run_dir), start_rollout_id=at, num_rollout=20, shopsim_alerts=False,
                     shopsim_wandb="off", save=str(ckpt), load=str(ckpt), save_interval=5)
    runtime = slime_runtime.configure(args)
    try:
        return runtime.parts.streak.state_dict(), runtime.parts.prompts.state_dict(), runtime.run_id
    finally:
        slime_runtime.reset_runtime()


# --- item 3: another run's snapshot -----------------------------------------------------------------
def test_another_runs_snapshot_is_refused_with_one_warning_and_the_records_replayed(tmp_path: Path, caplog) -> None:
    """Run B's checkpoint directory (its snapshot of step 4) is given to a resume of run A, whose records
    are longer than B's, so the snapshot's positions fit them: before, A adopted B's run_id and state."""
    mine, theirs, ckpt = tmp_path / "run-a", tmp_path / "run-b", tmp_path / "ckpt"
    write_run(mine, "run-a", range(6), "trained", prompts=3)
    write_run(theirs, "run-b", range(5), "dropped_technical", prompts=1)
    assert (theirs / "steps.jsonl").stat().st_size < (mine / "steps.jsonl").stat().st_size
    streak = TechnicalStreak()
    restore(theirs, monitor_state(streak=streak), start_rollout_id=5)
    assert streak.count == 5
    write_json(snapshot_path(ckpt, 4), build_snapshot(monitor_state(streak=streak), rollout_id=4, run_id="run-b",
                                                      missing=0, run_dir=theirs))

    restored = restore(mine, monitor_state(streak=TechnicalStreak()), start_rollout_id=5, snapshot_dir=ckpt)
    assert restored.snapshot is None and restored.run_id == "run-a" and restored.missing == 0
    assert "run-b" in restored.note and "run-a" in restored.note

    (tmp_path / "empty-ckpt").mkdir()
    with caplog.at_level(logging.WARNING, logger="shopsim_metrics"):
        from_snapshot = resumed(mine, ckpt, 5)
    assert from_snapshot == resumed(mine, tmp_path / "empty-ckpt", 5)  # what replaying A's records restores
    assert from_snapshot[2] == "run-a" and from_snapshot[0]["count"] == 0
    warned = [m for m in caplog.messages if "snapshot" in m]
    assert len(warned) == 1 and "run-b" in warned[0], warned
    assert json.loads((mine / "steps.jsonl").read_text().splitlines()[0])["run_id"] == "run-a"


# --- item 4: a stale writer's snapshot -------------------------------------------------------------
def test_a_stale_writers_snapshot_is_restored_with_the_warning_even_when_the_later_records_precede_it(
        tmp_path: Path, caplog) -> None:
    """P1 writes 0..7 and stalls; P2 resumes at 5 (P1's checkpoint 4), writes 5..7 and dies; P1 wakes, writes
    8 and 9 and the snapshot of its checkpoint 9, whose positions cover P2's records. A resume at 10 from that
    checkpoint restores P1's state: the warning of §1.4 says that the readers follow P2."""
    from test_lineage import finish, start

    run, ckpt = tmp_path / "run", tmp_path / "ckpt"
    p1 = start(run, ckpt, 0, 0, 9, "--stall-after", "7")
    assert p1.stdout.readline() == "stalled\n", p1.stderr.read()
    finish(start(run, ckpt, 5, 5, 7, "--die"))
    p1.stdin.write("\n")
    finish(p1)
    snapshot = json.loads(snapshot_path(ckpt, 9).read_text())
    assert snapshot["writer"]["process_start_rollout_id"] == 0  # P1's, written after P2's records
    args = make_args(shopsim_run_dir=str(run), start_rollout_id=10, num_rollout=13, shopsim_alerts=False,
                     shopsim_wandb="off", save=str(ckpt), load=str(ckpt), save_interval=5)
    with caplog.at_level(logging.INFO, logger="shopsim_metrics"):
        runtime = slime_runtime.configure(args)
    try:
        assert any("from the snapshot of step 9" in m for m in caplog.messages), caplog.messages
        warned = [m for m in caplog.messages if "written by a process whose steps from 5 on a later process" in m]
        assert len(warned) == 1, caplog.messages
        assert runtime.lineage.process_generation == 2  # after P1 (0) and P2 (1), though only P1's snapshot was read
    finally:
        slime_runtime.reset_runtime()


# --- item 5: impossible values in a well-formed snapshot ------------------------------------------------
def _pieces():
    from shopsim_metrics.prompts.skip_record import SkipTally
    from shopsim_metrics.prompts.value import PromptValueTracker
    from shopsim_metrics.health.advisories import Advisor
    from shopsim_metrics.waves.wave_size import RecentOrders

    streak, prompts, skips = TechnicalStreak(limit=8), PromptValueTracker(limit=6, forgetting=0.9), SkipTally(limit=4)
    orders, advisor = RecentOrders(window=3), Advisor()
    state = monitor_state(streak=streak, prompts=prompts, skips=skips, recent_orders=orders, advisor=advisor)
    return state, lambda: (streak.state_dict(), prompts.state_dict(), skips.state_dict(), orders.state_dict(),
                           advisor.state_dict())


def _run_with_a_snapshot(tmp_path: Path) -> tuple[Path, Path, dict]:
    from test_snapshot import record_of

    run, ckpt = tmp_path / "run", tmp_path / "ckpt"
    sink = JsonlSink(run, fsync=False)
    ledger = [("trained", 3, 1), ("dropped_zero_std", 8, 2), ("dropped_technical", 0, 3), ("dropped_zero_std", 0, 4)]
    for step in range(4):
        sink.emit(record_of(step, 1, step + 1, (ledger[step:] + ledger[:step], [5, 6][: step % 3])))
    sink.close()
    state, _ = _pieces()
    restore(run, state, start_rollout_id=4)
    snapshot = build_snapshot(state, rollout_id=3, run_id="run-1", missing=0, run_dir=run)
    return run, ckpt, snapshot


def _history(snapshot: dict, column: str, value) -> dict:
    snapshot["prompts"]["history"][column][0] = value
    return snapshot


IMPOSSIBLE = {
    "a streak of 10^6 against a limit of 8": lambda s: s["streak"].update(count=10**6, checks={"status_failed": 10**6}),
    "a streak its checks do not add up to": lambda s: s["streak"].update(count=1, checks={"status_failed": 3}),
    "a negative check count": lambda s: s["streak"].update(count=0, checks={"status_failed": -1}),
    "a verdict letter outside the alphabet": lambda s: _history(s, "letters", "SQ"),
    "negative visits": lambda s: _history(s, "visits", -3),
    "a zero-std run longer than the visits": lambda s: _history(s, "zero_std_run", 99),
    "more wasted tokens than tokens": lambda s: _history(s, "wasted_tokens", 10**9),
    "negative tokens": lambda s: _history(s, "tokens", -5),
    "a float where a count is": lambda s: _history(s, "visits", 1.5),
    "a boolean where a count is": lambda s: _history(s, "zero_std_visits", True),
    "NaN evidence": lambda s: _history(s, "successes", float("nan")),
    "negative evidence": lambda s: _history(s, "failures", -1.0),
    "a negative step": lambda s: _history(s, "seen_step", -2),
    "a prompt twice": lambda s: s["prompts"]["history"]["keys"].__setitem__(1, s["prompts"]["history"]["keys"][0]),
    "negative evicted prompts": lambda s: s["prompts"]["history"].update(evicted=-4),
    "a last step of an unknown verdict": lambda s: s["prompts"].update(last_step=[3, {"maybe": 1}]),
    "a pending skip that is no prompt key": lambda s: s["skips"].update(pending=[{"a": 1}]),
    "more spread groups than judged": lambda s: s["recent_orders"].update(orders=[[5, 0, 3]]),
    "an advisory fact that is not a count": lambda s: s["advisories"]["window"][0].update(accepted="many"),
    "a negative advisory count": lambda s: s["advisories"]["window"][0].update(technical=-1),
    "negative missing steps": lambda s: s.update(missing=-1),
    "more missing steps than steps": lambda s: s.update(missing=7),
    "a records position that is not a byte count": lambda s: s.update(records={"steps.jsonl": "12"}),
}


@pytest.mark.parametrize("case", list(IMPOSSIBLE))
def test_a_snapshot_with_an_impossible_value_is_refused_and_the_records_replayed(tmp_path: Path, case: str) -> None:
    run, ckpt, snapshot = _run_with_a_snapshot(tmp_path)
    state, held = _pieces()
    assert restore(run, state, start_rollout_id=4, snapshot_dir=_saved(ckpt, snapshot)).snapshot == 3  # as written
    expected = held()
    IMPOSSIBLE[case](snapshot)
    _saved(ckpt, snapshot)
    state, held = _pieces()
    restored = restore(run, state, start_rollout_id=4, snapshot_dir=ckpt)
    assert restored.snapshot is None and restored.note, case  # one warning (the monitor's) names why
    assert held() == expected  # the records replayed
    assert restored.missing == 0


def _saved(ckpt: Path, snapshot: dict) -> Path:
    path = snapshot_path(ckpt, snapshot["rollout_id"])
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(snapshot))  # NaN written as the JSON reader takes it
    return ckpt
