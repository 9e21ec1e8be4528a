"""What a resumed run and the readers trust among the records files of a run directory: a file that cannot be
read is named and left out (the rest of the run counts), and another run's records placed beside the run's
own are never replayed into its state nor mixed into its figures (one warning names the file and both runs).
"""

from __future__ import annotations

import builtins
import json
import logging
import os
from pathlib import Path

import pytest

from conftest import make_args, spread, zero
from shopsim_metrics import cli
from shopsim_metrics.readers.steps import read_step_columns, read_steps
from shopsim_metrics.run.snapshot import snapshot_path
from shopsimrl import slime_runtime


def _args(run: Path, ckpt: Path, start: int, **extra):
    return make_args(rollout_batch_size=2, over_sampling_batch_size=4, shopsim_run_dir=str(run), shopsim_wandb="off",
                     shopsim_alerts=False, start_rollout_id=start, num_rollout=20, save=str(ckpt), load=str(ckpt),
                     save_interval=10, **extra)


def _run(run: Path, ckpt: Path, steps: range) -> None:
    """The hooks through ``steps`` (each: one zero-std group, two with spread, distinct prompts per step)."""
    args = _args(run, ckpt, steps.start)
    for rollout_id in steps:
        for gid in range(3):
            group = spread(100 * rollout_id + gid) if gid else zero(100 * rollout_id + gid)
            slime_runtime.fully_scored_group_filter(args, group)
        slime_runtime.record_all_samples(args, [], None)
        slime_runtime.log_rollout_step(rollout_id, args, [], {}, 0.1)
    slime_runtime.get_runtime(args).wait_for_snapshot()
    slime_runtime.reset_runtime()


def _resumed(run: Path, ckpt: Path, at: int):
    """What a monitor resumed at ``at`` with ``--load ckpt`` holds before its first judgement."""
    runtime = slime_runtime.configure(_args(run, ckpt, at))
    try:
        return runtime.parts.streak.state_dict(), runtime.parts.prompts.state_dict(), runtime.run_id
    finally:
        slime_runtime.reset_runtime()


@pytest.fixture
def a_run(tmp_path: Path):
    """A run of 10 steps with the monitor's snapshot of step 9 beside its checkpoint, and what a resume at 10
    holds from that snapshot and from its records alone."""
    run, ckpt, empty = tmp_path / "run", tmp_path / "ckpt", tmp_path / "no-ckpt"
    _run(run, ckpt, range(10))
    empty.mkdir()
    assert snapshot_path(ckpt, 9).is_file()
    return run, ckpt, empty, _resumed(run, ckpt, 10), _resumed(run, empty, 10)


def _unreadable(path: Path, monkeypatch) -> None:
    """``path`` cannot be opened by this process: mode 000, and for root (who reads it anyway) every open of it
    refused as the kernel refuses another user."""
    path.chmod(0)
    if os.geteuid() == 0:
        real_open = builtins.open

        def refusing_open(file, *args, **kwargs):
            if isinstance(file, (str, os.PathLike)) and Path(file).name == path.name:
                raise PermissionError(13, "Permission denied", str(file))
            return real_open(file, *args, **kwargs)

        monkeypatch.setattr(builtins, "open", refusing_open)


def _warnings(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]


# --- an unreadable records file --------------------------------------------------------------------------
@pytest.mark.parametrize("when", ["before the snapshot", "after the snapshot"])
def test_an_unreadable_second_records_file_is_named_once_and_the_run_is_restored_whole(
        a_run, when: str, monkeypatch, caplog) -> None:
    """Before, the resume at 10 left the snapshot aside (PermissionError), warned that the records lacked all 10
    steps (steps.jsonl was readable) and restored nothing."""
    run, ckpt, empty, from_snapshot, from_records = a_run
    assert from_snapshot == from_records and from_snapshot[0]["count"] == 0 and from_snapshot[1]
    other = run / "steps.x.jsonl"
    other.write_text((run / "steps.jsonl").read_text().splitlines()[0] + "\n")
    if when == "before the snapshot":  # the snapshot's positions name it (else it is read whole)
        json_path = snapshot_path(ckpt, 9)
        snapshot = json.loads(json_path.read_text())
        snapshot["records"]["steps.x.jsonl"] = other.stat().st_size
        json_path.write_text(json.dumps(snapshot))
    _unreadable(other, monkeypatch)
    for load, expected in ((ckpt, from_snapshot), (empty, from_records)):
        caplog.clear()
        with caplog.at_level(logging.INFO, logger="shopsim_metrics"):
            assert _resumed(run, load, 10) == expected
        warned = _warnings(caplog)
        assert len(warned) == 1 and "steps.x.jsonl" in warned[0] and "PermissionError" in warned[0], warned
        if load == ckpt:
            assert any("from the snapshot of step 9" in m for m in caplog.messages), caplog.messages

    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="shopsim_metrics"):
        table = read_step_columns(run)
    assert table.rollout_ids == list(range(10))
    warned = _warnings(caplog)
    assert len(warned) == 1 and "steps.x.jsonl" in warned[0], warned
    assert cli.main(["inspect", str(run)]) == 0


def test_a_directory_of_only_unreadable_records_names_them(tmp_path: Path, monkeypatch, capsys) -> None:
    (tmp_path / "steps.jsonl").write_text('{"rollout_id": 0}\n')
    _unreadable(tmp_path / "steps.jsonl", monkeypatch)
    assert cli.main(["inspect", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "steps.jsonl" in err and "PermissionError" in err and "readable" in err, err


# --- another run's records placed beside the run's own -------------------------------------------------
def _plant_another_run(run: Path, name: str, *, steps: int = 12) -> None:
    """Run B's records (more steps, later process, its own prompts) as ``name`` in ``run``."""
    lines = []
    for line in (run / "steps.jsonl").read_text().splitlines():
        data = json.loads(line)
        data.update(run_id="run-b", process_started_at=data["process_started_at"] + 1000.0, process_generation=3)
        for row in data["decisions"]:
            row["prompt_key"] = f"b {row.get('prompt_key')}"
        lines.append(data)
    extra = [dict(lines[-1], rollout_id=lines[-1]["rollout_id"] + k + 1) for k in range(steps - len(lines))]
    (run / name).write_text("".join(json.dumps(d) + "\n" for d in lines + extra))


@pytest.mark.parametrize("older", [False, True])
def test_another_runs_records_are_never_replayed_into_a_resume(a_run, older: bool, caplog) -> None:
    """Before, a records-only resume adopted run B's run_id and restored its prompts, silently; with the
    snapshot the state was right but the warning spoke of "two trainers on one --save"."""
    run, ckpt, empty, from_snapshot, from_records = a_run
    own_run = from_records[2]
    _plant_another_run(run, "steps.anything.jsonl")
    if older:  # the planted file is the older one by its modification time
        os.utime(run / "steps.anything.jsonl", (1, 1))
    for load, expected in ((empty, from_records), (ckpt, from_snapshot)):
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="shopsim_metrics"):
            state = _resumed(run, load, 10)
        assert state == expected and state[2] == own_run
        assert not any(str(key).startswith("b ") for key in json.dumps(state[1]).split('"'))
        warned = _warnings(caplog)
        assert len(warned) == 1, warned
        assert "steps.anything.jsonl" in warned[0] and "run-b" in warned[0] and own_run in warned[0], warned
        assert "two trainers" not in warned[0] and "resumed run" not in warned[0]


def test_readers_leave_another_runs_records_out_of_the_figures(a_run, caplog, capsys) -> None:
    run, *_, from_records = a_run
    own_run = from_records[2]
    before = read_step_columns(run).columns
    _plant_another_run(run, "steps.anything.jsonl")
    with caplog.at_level(logging.WARNING, logger="shopsim_metrics"):
        table = read_step_columns(run)
        records = read_steps(run)
    assert table.rollout_ids == list(range(10)) and table.columns == before
    assert {r.run_id for r in records} == {own_run}
    warned = _warnings(caplog)
    assert len(warned) == 2 and warned[0] == warned[1], warned  # one per read
    assert "steps.anything.jsonl" in warned[0] and "run-b" in warned[0] and own_run in warned[0]
    assert "resumed run" not in warned[0] and "superseded" not in warned[0]
    assert cli.main(["inspect", "--json", str(run)]) == 0
    out = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [d["rollout_id"] for d in out] == list(range(10)) and {d["run_id"] for d in out} == {own_run}
