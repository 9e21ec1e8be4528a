"""One run per records directory, and the latest write wins by the records' own order, not file times."""

from __future__ import annotations

import json
import os
import random
from pathlib import Path

import pytest
from conftest import make_args, spread, zero
from hypothesis import given, settings, strategies as st

from shopsim_metrics.run.resume import restore
from shopsim_metrics.run.state import monitor_state
from shopsim_metrics.run.identity import RunDirInUse
from shopsim_metrics.readers import read_steps
from shopsim_metrics.readers.steps import Winners, read_step_columns
from shopsim_metrics.health.streak import TechnicalStreak
from shopsimrl import slime_runtime


@pytest.fixture(autouse=True)
def _fresh_runtime():
    yield
    slime_runtime.reset_runtime()


def _record(rollout_id: int, started: float, sequence: int, wave_count: int, run_id: str = "r1") -> str:
    return json.dumps({"rollout_id": rollout_id, "run_id": run_id, "process_started_at": started,
                       "record_sequence": sequence, "wave_count": wave_count, "decisions": []}) + "\n"


def test_a_stale_writer_appending_last_never_wins(tmp_path: Path) -> None:
    """The re-run (started later) wrote steps 5..9 to its sibling file; the stale writer then appended its own."""
    rerun = tmp_path / "steps.host-2.jsonl"
    rerun.write_text("".join(_record(i, 200.0, i - 4, wave_count=2) for i in range(5, 10)))
    stale = tmp_path / "steps.jsonl"
    stale.write_text("".join(_record(i, 100.0, i + 1, wave_count=1) for i in range(10)))
    os.utime(rerun, (1, 1))  # the stale file is the newer one by its modification time
    assert [r.wave_count for r in read_steps(tmp_path)] == [1] * 5 + [2] * 5
    table = read_step_columns(tmp_path)
    assert table.column("wave_count") == [1] * 5 + [2] * 5 and table.report.superseded == 5


@settings(max_examples=40, deadline=None)
@given(writes=st.lists(st.tuples(st.integers(0, 4), st.integers(0, 3), st.integers(1, 50)), min_size=1, max_size=30),
       seed=st.integers(0, 10**6))
def test_whatever_order_the_records_are_read_the_latest_write_wins(writes, seed) -> None:
    records = [{"rollout_id": rid, "process_started_at": float(start), "record_sequence": seq}
               for rid, start, seq in dict.fromkeys(writes)]  # one write per (step, process, sequence)
    shuffled = records[:]
    random.Random(seed).shuffle(shuffled)
    winners = Winners()
    for index, data in enumerate(shuffled):
        winners.offer(data, index)
    for rid, index in winners.index.items():
        latest = max((r for r in records if r["rollout_id"] == rid),
                     key=lambda r: (r["process_started_at"], r["record_sequence"]))
        assert shuffled[index] == latest
    assert winners.superseded == len(records) - len(winners.index)


def test_the_restore_replays_the_latest_writes_not_the_newest_file(tmp_path: Path) -> None:
    row = {"order": 1, "waves_open": 1, "group_index": 0, "outcome": "dropped_technical", "reason": None,
           "remaining_before": 4, "unique_rollouts": 8, "failed_check": "status_failed"}
    good = {"rollout_id": 0, "run_id": "r", "process_started_at": 200.0, "record_sequence": 1, "decisions": [row]}
    stale = {"rollout_id": 0, "run_id": "r", "process_started_at": 100.0, "record_sequence": 1, "decisions": []}
    (tmp_path / "steps.h-1.jsonl").write_text(json.dumps(good) + "\n")
    (tmp_path / "steps.jsonl").write_text(json.dumps(stale) + "\n")
    os.utime(tmp_path / "steps.h-1.jsonl", (1, 1))
    streak = TechnicalStreak()
    restored = restore(tmp_path, monitor_state(streak=streak), start_rollout_id=1)
    assert streak.count == 1 and restored.run_id == "r"


def _run_step(args, rollout_id: int) -> None:
    for gid in range(3):
        slime_runtime.fully_scored_group_filter(args, spread(gid) if gid else zero(gid))
    slime_runtime.record_all_samples(args, [], None)
    slime_runtime.log_rollout_step(rollout_id, args, [], {}, 0.1)


def _args(run_dir: Path, start: int = 0):
    return make_args(rollout_batch_size=2, over_sampling_batch_size=4, shopsim_run_dir=str(run_dir),
                     shopsim_wandb="off", start_rollout_id=start)


def test_each_record_says_its_run_process_and_sequence_and_a_resume_keeps_the_run(tmp_path: Path) -> None:
    args = _args(tmp_path)
    for rollout_id in range(3):
        _run_step(args, rollout_id)
    slime_runtime.reset_runtime()
    args = _args(tmp_path, start=2)
    _run_step(args, 2)
    slime_runtime.reset_runtime()
    lines = [json.loads(line) for line in (tmp_path / "steps.jsonl").read_text().splitlines()]
    assert len({line["run_id"] for line in lines}) == 1
    assert [line["record_sequence"] for line in lines] == [1, 2, 3, 1]
    assert lines[3]["process_started_at"] > lines[2]["process_started_at"]


def test_a_fresh_run_into_another_runs_records_is_refused_before_its_first_step(tmp_path: Path) -> None:
    args = _args(tmp_path)
    _run_step(args, 0)
    slime_runtime.reset_runtime()
    before = (tmp_path / "steps.jsonl").read_bytes()
    args = _args(tmp_path)
    with pytest.raises(RunDirInUse, match=str(tmp_path) + ".*already holds the step records of run"):
        slime_runtime.fully_scored_group_filter(args, spread(0))
    slime_runtime.record_generated_sample(args, object())  # the sample hook never raises, even then
    with pytest.raises(RunDirInUse):
        slime_runtime.log_rollout_step(0, args, [], {}, 0.1)
    assert (tmp_path / "steps.jsonl").read_bytes() == before  # nothing merged


def test_runs_without_a_run_dir_each_get_their_own(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("SHOPSIM_RUN_DIR", raising=False)
    dirs = []
    for _ in range(2):
        args = make_args(rollout_batch_size=2, over_sampling_batch_size=4, shopsim_wandb="off")
        _run_step(args, 0)
        dirs.append(slime_runtime.get_runtime(args).run_dir)
        slime_runtime.reset_runtime()
    assert dirs[0] != dirs[1]
    assert all([r.rollout_id for r in read_steps(d)] == [0] for d in dirs)


def test_the_monitors_constructor_reads_nothing_its_start_checks_the_run_directory(tmp_path: Path) -> None:
    from shopsim_metrics.monitor import ShopsimRuntime
    from shopsim_metrics.runtime_parts import build_runtime
    from shopsim_metrics.settings import ShopsimSettings

    args = _args(tmp_path)
    _run_step(args, 0)
    slime_runtime.reset_runtime()
    settings = ShopsimSettings.from_args(_args(tmp_path))
    runtime = ShopsimRuntime(build_runtime(settings))  # another run's records in the directory: not looked at yet
    with pytest.raises(RunDirInUse):
        runtime.start()
    resumed = ShopsimRuntime(build_runtime(ShopsimSettings.from_args(_args(tmp_path, start=1))))
    first_id = resumed.run_id
    assert resumed.start() is resumed and resumed.run_id != first_id  # the records' run, restored at the start
    assert resumed.recorder.identity["run_id"] == resumed.run_id
