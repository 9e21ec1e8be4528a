"""The monitor's snapshot is written off slime's log-function thread: the log function returns before it is on
disk, it holds the state right after its step whatever the next step judges meanwhile, the run's last step and
the monitor's shutdown wait for it, and a failure or a kill at any moment of the write leaves every snapshot on
disk whole (the new one whole or absent), so a resume always reads a whole one."""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from conftest import fifo_batches, make_args, run_scripted_step, scripted_loop
from shopsim_metrics import state_file
from shopsim_metrics.run import snapshot_writer
from shopsim_metrics.prompts.skip_record import SkipTally
from shopsim_metrics.prompts.value import PromptValueTracker
from shopsim_metrics.readers import read_steps
from shopsim_metrics.run.resume import restore
from shopsim_metrics.run.state import monitor_state
from shopsim_metrics.sinks import JsonlSink
from shopsim_metrics.run.snapshot import find_snapshot, read_snapshot, snapshot_path
from shopsim_metrics.loop.loop_state import ManualLoopState
from shopsim_metrics.health.streak import TechnicalStreak
from shopsim_metrics.waves.wave_size import RecentOrders
from shopsimrl import slime_runtime
from test_resume import STEPS, group_for

TESTS = Path(__file__).parent


class Process:
    """One monitored process with slime's --save/--load/--save-interval 2: its steps run one call at a time."""

    def __init__(self, run_dir: Path, ckpt: Path, *, start: int = 0, num_rollout: int = STEPS) -> None:
        args = make_args(shopsim_run_dir=str(run_dir), start_rollout_id=start, num_rollout=num_rollout,
                         shopsim_alerts=False, save=str(ckpt), load=str(ckpt) if start else None, save_interval=2)
        state = ManualLoopState(source="scripted")
        self.runtime = slime_runtime.configure(args, sinks=[JsonlSink(run_dir)], loop_state=state)
        self.loop = scripted_loop(args, state)
        self.loop._next_id = 100 * start  # the group counter slime's data source restores

    def step(self, step: int) -> None:
        first = self.loop._next_id = 100 * step
        run_scripted_step(self.loop, step, lambda gid: group_for(step, gid - first, gid, 2), fifo_batches(3))


def replayed_state(run_dir: Path, start: int, snapshot_dir: Path | None = None) -> tuple:
    """What a resume at ``start`` restores (from the records only, unless ``snapshot_dir``)."""
    streak, prompts, skips, orders = TechnicalStreak(), PromptValueTracker(), SkipTally(), RecentOrders()
    restored = restore(run_dir, monitor_state(streak=streak, prompts=prompts, skips=skips, recent_orders=orders),
                       start_rollout_id=start, snapshot_dir=snapshot_dir)
    return restored.snapshot, (streak.state_dict(), prompts.state_dict(), skips.state_dict(), orders.state_dict())


def snapshot_state(path: Path) -> tuple:
    data = read_snapshot(path)
    return data["streak"], data["prompts"], data["skips"], data["recent_orders"]


@pytest.fixture
def held_writes(monkeypatch):
    """The snapshot writer waits at the write until ``release`` is set (a hang fails after 120 s)."""
    release, real = threading.Event(), snapshot_writer.write_json

    def held(path, data):
        if not release.wait(120):
            raise TimeoutError("the snapshot's write was never released")
        real(path, data)

    monkeypatch.setattr(snapshot_writer, "write_json", held)
    return release


def test_the_log_function_returns_before_the_snapshot_is_written_and_it_holds_the_state_after_its_step(
        tmp_path: Path, held_writes: threading.Event) -> None:
    run, ckpt = tmp_path / "run", tmp_path / "ckpt"
    process = Process(run, ckpt)
    for step in range(3):  # step 1 is a checkpoint; step 2 is judged and emitted while its snapshot is held
        process.step(step)
        if step == 1:
            assert not snapshot_path(ckpt, 1).exists()  # the log function returned; the write waits
    held_writes.set()
    process.runtime.wait_for_snapshot()
    assert replayed_state(run, 2)[1] != replayed_state(run, 3)[1]  # step 2 changed the state ...
    assert snapshot_state(snapshot_path(ckpt, 1)) == replayed_state(run, 2)[1]  # ... and the snapshot is step 1's
    slime_runtime.reset_runtime()


def test_the_runs_last_step_and_the_shutdown_wait_for_the_snapshot(tmp_path: Path, monkeypatch) -> None:
    real = snapshot_writer.write_json

    def late(path, data):  # written a moment after the writer is asked to, on a thread of its own
        done = threading.Event()
        threading.Timer(0.3, lambda: (real(path, data), done.set())).start()
        done.wait()

    monkeypatch.setattr(snapshot_writer, "write_json", late)
    run, ckpt = tmp_path / "run", tmp_path / "ckpt"
    process = Process(run, ckpt, num_rollout=4)
    process.step(0)
    process.step(1)
    slime_runtime.reset_runtime()  # the process ends right after a checkpoint: its snapshot is on disk first
    assert snapshot_state(snapshot_path(ckpt, 1)) == replayed_state(run, 2)[1]
    process = Process(run, ckpt, start=2, num_rollout=4)
    process.step(2)
    process.step(3)  # the run's last step: its log function returns with the snapshot on disk
    assert snapshot_state(snapshot_path(ckpt, 3)) == replayed_state(run, 4)[1]
    slime_runtime.reset_runtime()


def test_a_write_that_fails_leaves_the_previous_snapshot_and_the_judgements_go_on(
        tmp_path: Path, monkeypatch, caplog: pytest.LogCaptureFixture) -> None:
    real = os.replace

    def fails_for_step_3(source, target):
        if Path(target).name == "shopsim_monitor_state_3.json":
            raise OSError(28, "No space left on device")
        real(source, target)

    monkeypatch.setattr(state_file.os, "replace", fails_for_step_3)
    run, ckpt = tmp_path / "run", tmp_path / "ckpt"
    process = Process(run, ckpt)
    with caplog.at_level(logging.WARNING, logger="shopsim_metrics"):
        for step in range(5):
            process.step(step)
        slime_runtime.reset_runtime()
    assert sorted(p.name for p in (ckpt / "rollout").iterdir()) == ["shopsim_monitor_state_1.json"]  # no temporary
    assert [r.rollout_id for r in read_steps(run)] == [0, 1, 2, 3, 4]  # step 4 was judged after the failure
    assert any("writing the monitor snapshot of step 3 failed" in r.getMessage() for r in caplog.records)
    assert replayed_state(run, 4, ckpt) == (1, replayed_state(run, 4)[1])  # the resume reads step 1's and replays


_KILLED_WRITER = """
import json, os, signal, sys
from pathlib import Path
from shopsim_metrics import state_file
from test_snapshot_writer import Process
run, ckpt, moment = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]

def kill():
    os.kill(os.getpid(), signal.SIGKILL)

real_dump, real_replace, real_fsync = json.dump, os.replace, os.fsync
def dump(data, handle, **kwargs):  # the step-3 snapshot: half of it written, then the process is killed
    if data.get("rollout_id") == 3 and moment == "mid-write":
        text = json.dumps(data, **kwargs)
        handle.write(text[: len(text) // 2]); handle.flush(); kill()
    real_dump(data, handle, **kwargs)
def replace(source, target):
    if Path(target).name.endswith("_3.json") and moment == "before-replace":
        kill()
    real_replace(source, target)
    if Path(target).name.endswith("_3.json") and moment == "after-replace":
        kill()
state_file.json.dump, state_file.os.replace = dump, replace
process = Process(run, ckpt)
for step in range(5):
    process.step(step)
    process.runtime.wait_for_snapshot()
"""


@pytest.mark.parametrize("moment", ["mid-write", "before-replace", "after-replace"])
def test_a_process_killed_while_writing_leaves_every_snapshot_whole(tmp_path: Path, moment: str) -> None:
    run, ckpt = tmp_path / "run", tmp_path / "ckpt"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")])}
    child = subprocess.run([sys.executable, "-c", _KILLED_WRITER, str(run), str(ckpt), moment], env=env, cwd=TESTS,
                           capture_output=True, text=True, timeout=120)
    assert child.returncode == -signal.SIGKILL, child.stderr[-2000:]
    names = sorted(p.name for p in (ckpt / "rollout").iterdir())
    snapshots = [name for name in names if not name.startswith(".")]
    assert snapshots == (["shopsim_monitor_state_1.json", "shopsim_monitor_state_3.json"] if moment == "after-replace"
                         else ["shopsim_monitor_state_1.json"])  # a half-written one is only ever a temporary file
    assert len(names) == len(snapshots) + (moment != "after-replace")  # the temporary a kill leaves behind
    for name in snapshots:
        step = int(name.rsplit("_", 1)[1].split(".")[0])
        assert snapshot_state(ckpt / "rollout" / name) == replayed_state(run, step + 1)[1]  # whole, and its step's
    newest = find_snapshot(ckpt, 4)
    assert newest is not None and newest[1] == (3 if moment == "after-replace" else 1)
    assert replayed_state(run, 4, ckpt) == (newest[1], replayed_state(run, 4)[1])
    json.loads(newest[0].read_text())  # the file a resume reads parses


def test_the_writer_writes_no_snapshot_when_the_live_state_is_past_its_step_and_lets_go_of_the_lock(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    from shopsim_metrics.run.snapshot import SnapshotPlan

    lock, warned = threading.Lock(), []
    writer = snapshot_writer.SnapshotWriter(SnapshotPlan(save=str(tmp_path), load=None, save_interval=1, num_rollout=9),
                                            lock, copy=lambda step: {"step": step},
                                            warn=lambda *args: warned.append(args))
    with caplog.at_level(logging.INFO, logger="shopsim_metrics"):
        writer.save(2, live_after=lambda step: False)
    writer.wait()
    assert not snapshot_path(tmp_path, 2).exists() and not lock.locked() and not warned
    assert any("no monitor snapshot at step 2" in r.getMessage() for r in caplog.records)
    writer.save(3, live_after=lambda step: step == 3)
    writer.wait()
    assert json.loads(snapshot_path(tmp_path, 3).read_text()) == {"step": 3} and not lock.locked()


def test_a_copy_or_a_check_that_fails_is_one_warning_and_the_lock_is_free_again(tmp_path: Path) -> None:
    from shopsim_metrics.run.snapshot import SnapshotPlan

    def broken_copy(step):
        raise RuntimeError("copy")

    def broken_check(step):
        raise RuntimeError("check")

    lock, warned = threading.Lock(), []
    plan = SnapshotPlan(save=str(tmp_path), load=None, save_interval=1, num_rollout=9)
    writer = snapshot_writer.SnapshotWriter(plan, lock, copy=broken_copy, warn=lambda *args: warned.append(args))
    writer.save(1, live_after=lambda step: True)
    writer.wait()
    writer.save(2, live_after=broken_check)
    writer.wait()
    assert [(w[0], w[2], str(w[4])) for w in warned] == [("snapshot 1", 1, "copy"), ("snapshot 2", 2, "check")]
    assert not lock.locked() and not (tmp_path / "rollout").exists()
