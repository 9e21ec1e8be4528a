"""The run's lineage: which record of a step counts when processes overlap on one run directory.

Four real processes (tests/lineage_process.py), as issue 36 describes them: P1 writes steps 0..9 and
stalls; P2 resumes at 5 (checkpoint 4) and writes 5..12, then dies; P1 wakes, appends its stale steps
10 and 11 and dies; P3 resumes at 10 (checkpoint 9, P2's). The run's lineage is 0..4 of P1, 5..9 of
P2, 10.. of P3: what the resume restores and what every reader takes, equal field by field to an
unbroken run's records but for who wrote them and when.
"""

from __future__ import annotations

import io
import json
import logging
import os
import random
import subprocess
import sys
from contextlib import redirect_stdout
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import make_args
from shopsim_metrics.cli import main
from shopsim_metrics.readers import read_steps
from shopsim_metrics.readers.steps import Winners, read_step_columns
from shopsim_metrics.run.resume import restore
from shopsim_metrics.run.identity import WRITER_FIELDS
from shopsim_metrics.simulator.tuning.calibration import LedgerTokens
from shopsim_metrics.run.snapshot import build_snapshot, snapshot_path
from shopsim_metrics.run.state import monitor_state
from shopsim_metrics.state_file import write_json
from shopsim_metrics.health.streak import TechnicalStreak
from shopsimrl import slime_runtime

PROCESS = Path(__file__).resolve().parent / "lineage_process.py"
WHO_AND_WHEN = {*WRITER_FIELDS, "record_sequence", "filter_seconds", "rollout_seconds", "filter_time_fraction",
                "first_wave_fill_seconds", "extra_wave_seconds"}


def start(run: Path, save: Path, first_step: int, first: int, last: int, *flags: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, str(PROCESS), str(run), str(save), str(first_step), str(first), str(last),
                             *flags], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def finish(process: subprocess.Popen) -> None:
    _, err = process.communicate(timeout=120)
    assert process.returncode == 0, err


def comparable(data: dict) -> dict:
    data = {k: v for k, v in data.items() if k not in WHO_AND_WHEN}
    data["decisions"] = [{k: v for k, v in row.items() if k != "judged_at"} for row in data.get("decisions") or ()]
    return data


def restored_state(run: Path, save: Path, at: int) -> tuple:
    """What a monitor resumed at ``at`` holds before its first judgement (as P3's does)."""
    args = make_args(shopsim_run_dir=str(run), start_rollout_id=at, num_rollout=13, shopsim_alerts=False,
                     shopsim_wandb="off", save=str(save), load=str(save), save_interval=5)
    runtime = slime_runtime.configure(args)
    try:
        prompts, orders = runtime.parts.prompts, runtime.parts.waves.recent_orders
        return (runtime.parts.streak.state_dict(), prompts.state_dict(), orders.state_dict(), runtime.lineage.missing_steps,
                runtime.run_id)
    finally:
        slime_runtime.reset_runtime()


@pytest.fixture(scope="module")
def unbroken(tmp_path_factory) -> tuple[Path, Path]:
    base = tmp_path_factory.mktemp("unbroken")
    finish(start(base / "run", base / "ckpt", 0, 0, 12))
    return base / "run", base / "ckpt"


@pytest.mark.parametrize("save_interval", ["5", "0"], ids=["from P2's snapshot", "replaying the records"])
def test_four_processes_on_one_run_dir_restore_and_read_the_runs_lineage(tmp_path: Path, unbroken, save_interval):
    run, ckpt = tmp_path / "run", tmp_path / "ckpt"
    interval = ("--save-interval", save_interval)
    p1 = start(run, ckpt, 0, 0, 11, "--stall-after", "9", "--die", "--diverge-from", "5", *interval)
    assert p1.stdout.readline() == "stalled\n", p1.stderr.read()
    finish(start(run, ckpt, 5, 5, 12, "--die", *interval))  # P2 writes steps.<host>-<pid>.jsonl: P1 holds steps.jsonl
    p1.stdin.write("\n")
    finish(p1)  # its stale steps 10 and 11, appended to steps.jsonl after P2's
    (sibling,) = [f for f in run.glob("steps.*.jsonl") if f.name != "steps.jsonl"]
    p1_lines, p2_lines = ([json.loads(line) for line in f.read_text().splitlines()]
                          for f in (run / "steps.jsonl", sibling))
    assert [(r["rollout_id"], r["process_start_rollout_id"]) for r in p1_lines] == [(i, 0) for i in range(12)]
    assert [(r["rollout_id"], r["process_start_rollout_id"]) for r in p2_lines] == [(i, 5) for i in range(5, 13)]
    assert os.stat(run / "steps.jsonl").st_mtime_ns >= os.stat(sibling).st_mtime_ns  # the stale file is the newer
    expected = {r.rollout_id: comparable(r.to_dict()) for r in read_steps(unbroken[0])}
    assert comparable(p1_lines[10]) != expected[10]  # P1's lineage learnt otherwise from step 5 on

    resumed = restored_state(run, ckpt, 10)  # what P3 will hold: the lineage 0..4 of P1, 5..9 of P2
    assert resumed[:4] == restored_state(*unbroken, 10)[:4]
    assert resumed[4] == p1_lines[0]["run_id"] == p2_lines[0]["run_id"]  # the same run
    finish(start(run, ckpt, 10, 10, 12, *interval))  # P3

    got = read_steps(run)
    assert [r.rollout_id for r in got] == list(range(13))
    for record in got:  # field by field, so a difference names its field
        mine, theirs = comparable(record.to_dict()), expected[record.rollout_id]
        assert {k: mine[k] for k in mine if mine[k] != theirs.get(k)} == {}, record.rollout_id
    # the case this exists for: at step 10 prompts zero-std in P2's step 9 come back zero-std
    assert expected[10]["repeat_zero_std_group_count"] > 0 and expected[10]["zero_std_persistence"] > 0
    # every reader: the columns the tools stream, and inspect --json
    table = read_step_columns(run)
    for name in ("repeat_zero_std_group_count", "zero_std_persistence", "skippable_group_count", "wave_count"):
        assert table.column(name) == [expected[i][name] for i in range(13)], name
    out = io.StringIO()
    with redirect_stdout(out):
        assert main(["inspect", "--json", str(run)]) == 0
    printed = {r["rollout_id"]: (r["process_start_rollout_id"], comparable(r))
               for r in map(json.loads, out.getvalue().splitlines())}
    assert {i: p for i, (p, _) in printed.items()} == {**dict.fromkeys(range(5), 0), **dict.fromkeys(range(5, 10), 5),
                                                       **dict.fromkeys(range(10, 13), 10)}
    assert {i: r for i, (_, r) in printed.items()} == expected


@pytest.mark.parametrize("save_interval", ["5", "0"], ids=["from P2's snapshot", "replaying the records"])
@pytest.mark.parametrize("clocks", [(), ("--clock-offset", "-3600")], ids=["equal starts", "P2 an hour behind"])
def test_a_resumed_process_continues_the_lineage_whatever_the_clocks_say(tmp_path: Path, unbroken, save_interval,
                                                                          clocks, caplog) -> None:
    """P1 writes 0..9 (learning otherwise from 5 on) and dies; P2 resumes at 5 and writes 5..12 on a node whose
    clock is an hour behind, or that starts at the same second: P2 resumed from P1's checkpoint, so its 5..12
    are the run, and a resume at 10 restores P2's lineage."""
    run, ckpt = tmp_path / "run", tmp_path / "ckpt"
    interval = ("--save-interval", save_interval)
    same_second = ("--clock-at", "1800000000") if not clocks else ()
    finish(start(run, ckpt, 0, 0, 9, "--die", "--diverge-from", "5", *interval, *same_second))
    finish(start(run, ckpt, 5, 5, 12, "--die", *interval, *(clocks or same_second)))
    lines = [json.loads(line) for f in sorted(run.glob("steps*.jsonl")) for line in f.read_text().splitlines()]
    p1, p2 = ([r for r in lines if r["process_start_rollout_id"] == start_at] for start_at in (0, 5))
    assert (p2[0]["process_started_at"] < p1[0]["process_started_at"] if clocks
            else p2[0]["process_started_at"] == p1[0]["process_started_at"])
    expected = {r.rollout_id: comparable(r.to_dict()) for r in read_steps(unbroken[0])}
    with caplog.at_level(logging.WARNING, logger="shopsim_metrics"):
        got = read_steps(run)
    assert [(r.rollout_id, r.process_start_rollout_id) for r in got] == [(i, 0) for i in range(5)] + [
        (i, 5) for i in range(5, 13)]
    assert {r.rollout_id: comparable(r.to_dict()) for r in got} == expected
    assert not [m for m in caplog.messages if "have no record" in m]  # no stale writer blamed
    assert restored_state(run, ckpt, 10)[:4] == restored_state(*unbroken, 10)[:4]


# --- the rule on records written by hand ----------------------------------------------------------
def _record(rollout_id: int, started: float, resumed_at: int, sequence: int, tokens: int = 1) -> dict:
    return {"rollout_id": rollout_id, "run_id": "r", "process_started_at": started,
            "process_start_rollout_id": resumed_at, "record_sequence": sequence,
            "decisions": [{"order": 1, "waves_open": 1, "group_index": 0, "outcome": "trained", "reason": None,
                           "remaining_before": 1, "unique_rollouts": 8, "response_tokens": tokens}]}


def test_a_stale_writers_step_that_the_resumed_lineage_has_not_reached_has_no_record(tmp_path: Path, caplog) -> None:
    """P2 resumed at 5 and died after step 7; P1 (stale) then wrote 8..11: those belong to no lineage."""
    p1 = [_record(i, 100.0, 0, i + 1) for i in range(12)]
    p2 = [_record(i, 200.0, 5, i - 4, tokens=10) for i in range(5, 8)]
    (tmp_path / "steps.h-2.jsonl").write_text("".join(json.dumps(r) + "\n" for r in p2))
    (tmp_path / "steps.jsonl").write_text("".join(json.dumps(r) + "\n" for r in p1))
    records = read_steps(tmp_path)
    assert [(r.rollout_id, r.process_start_rollout_id) for r in records] == [(i, 0) for i in range(5)] + [
        (i, 5) for i in range(5, 8)]
    assert any("4 step(s)" in m and "rollout_id 8-11" in m for m in caplog.messages)
    tokens = LedgerTokens()
    table = read_step_columns(tmp_path, keep_ledger=tokens)
    assert table.rollout_ids == list(range(8)) and table.report.stale == [8, 9, 10, 11]
    assert sum(t for t, _, _ in tokens.sums.values()) == 5 * 1 + 3 * 10  # the stale ledgers count for nothing
    out = io.StringIO()
    with redirect_stdout(out):
        assert main(["inspect", "--json", str(tmp_path)]) == 0
    assert sorted(json.loads(line)["rollout_id"] for line in out.getvalue().splitlines()) == list(range(8))


writes = st.lists(st.tuples(st.integers(0, 5), st.integers(0, 3)), min_size=1, max_size=30)


@settings(max_examples=60, deadline=None)
@given(processes=st.lists(st.tuples(st.integers(0, 5), st.integers(0, 2)), min_size=1, max_size=4), writes=writes,
       seed=st.integers(0, 10**6))
def test_whatever_order_the_records_are_read_the_lineage_decides(processes, writes, seed) -> None:
    """Process p (started at time p, of the generation ``processes[p][1]``) resumed at ``processes[p][0]`` and
    wrote the steps ``writes`` give it (never one before its resume point); processes are ordered by generation,
    then start. The winner of a step is the latest write of it, unless a process after the writer resumed at or
    before that step: then it has none."""
    records = []
    for sequence, (step, p) in enumerate(writes, start=1):
        if p < len(processes) and step >= processes[p][0]:
            records.append({"rollout_id": step, "process_started_at": float(p), "process_generation": processes[p][1],
                            "process_start_rollout_id": processes[p][0], "record_sequence": sequence})
    shuffled = records[:]
    random.Random(seed).shuffle(shuffled)
    winners = Winners()
    for index, data in enumerate(shuffled):
        winners.offer(data, index)
    stale = winners.finish()
    place = lambda r: (r["process_generation"], r["process_started_at"])  # noqa: E731
    wrote = {place(r): r["process_start_rollout_id"] for r in records}
    expected = {}
    for step in {r["rollout_id"] for r in records}:
        latest = max((r for r in records if r["rollout_id"] == step), key=lambda r: (*place(r), r["record_sequence"]))
        if not any(later > place(latest) and resumed <= step for later, resumed in wrote.items()):
            expected[step] = latest
    assert {rid: shuffled[index] for rid, index in winners.index.items()} == expected
    assert stale == sorted({r["rollout_id"] for r in records} - set(expected))


@pytest.mark.parametrize("second_trainer", [True, False])
def test_a_snapshot_written_by_a_superseded_process_is_used_and_named(tmp_path: Path, caplog, second_trainer) -> None:
    """P1 wrote 0..9 and the snapshot beside its checkpoint 9; P2 resumed at 5 and wrote 5..7, yet a resume
    at 10 loads P1's checkpoint (two trainers on one --save): the restore follows the checkpoint, and says
    that the readers follow P2."""
    run, ckpt = tmp_path / "run", tmp_path / "ckpt"
    run.mkdir()
    (run / "steps.jsonl").write_text("".join(json.dumps(_record(i, 100.0, 0, i + 1)) + "\n" for i in range(10)))
    streak = TechnicalStreak()
    restore(run, monitor_state(streak=streak), start_rollout_id=10)
    write_json(snapshot_path(ckpt, 9), build_snapshot(
        monitor_state(streak=streak), rollout_id=9, run_id="r", missing=0, run_dir=run, writer={"process_started_at": 100.0, "process_start_rollout_id": 0}))
    if second_trainer:
        p2 = "".join(json.dumps(_record(i, 200.0, 5, i - 4)) + "\n" for i in range(5, 8))
        (run / "steps.h-2.jsonl").write_text(p2)
    with caplog.at_level(logging.WARNING, logger="shopsim_metrics"):
        restored = restore(run, monitor_state(streak=TechnicalStreak()), start_rollout_id=10, snapshot_dir=ckpt)
    assert restored.snapshot == 9 and restored.missing == 0
    named = [m for m in caplog.messages if "snapshot of step 9, written by a process whose steps from 5 on" in m]
    assert len(named) == (1 if second_trainer else 0)
