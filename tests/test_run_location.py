"""Where the records land under Ray: the run dir's default, one announcement, and the W&B run summary."""

from __future__ import annotations

import logging
import os
import socket
from pathlib import Path
from types import SimpleNamespace

import pytest

from shopsim_metrics.loop.loop_state import ManualLoopState
from shopsim_metrics.simulator.samples import SimSample
from shopsim_metrics.readers import read_steps
from shopsim_metrics.sinks.factory import SUMMARY_HOST, SUMMARY_RUN_DIR
from shopsim_metrics.readers.wandb_offline import find_run_dirs, read_offline_run
from shopsimrl import slime_runtime
from tests.wandb_helpers import wandb_env  # noqa: F401 - fixture

KNOBS = dict(rollout_batch_size=2, n_samples_per_prompt=2, over_sampling_batch_size=2, global_batch_size=4,
             reward_key=None)


@pytest.fixture(autouse=True)
def fresh_runtime(monkeypatch):
    monkeypatch.delenv("SHOPSIM_RUN_DIR", raising=False)
    slime_runtime.reset_runtime()
    yield
    slime_runtime.reset_runtime()


def run_steps(args, steps: int = 2) -> None:
    """Create the runtime (sinks from the settings), then run ``steps`` steps of two kept groups each."""
    loop = ManualLoopState()
    slime_runtime.configure(args, loop_state=loop)
    for step in range(steps):
        loop.step = step
        groups = [[SimSample(index=10 * g + i, group_index=g, rollout_id=10 * g + i, reward=float(i))
                   for i in range(2)] for g in (2 * step, 2 * step + 1)]
        for group in groups:
            assert slime_runtime.fully_scored_group_filter(args, group).keep
        slime_runtime.record_all_samples(args, groups, None)
        slime_runtime.log_rollout_step(step, args, [], {}, 0.1)


def announcements(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if "step records go to" in r.getMessage()]


def test_records_land_under_slimes_checkpoint_dir_and_are_announced_once(tmp_path: Path, caplog) -> None:
    args = SimpleNamespace(**KNOBS, save=str(tmp_path / "ckpt"), shopsim_wandb="off")
    with caplog.at_level(logging.INFO, logger="shopsim_metrics"):
        run_steps(args)
    run_dir = tmp_path / "ckpt" / "shopsim"
    assert [r.rollout_id for r in read_steps(run_dir)] == [0, 1]
    (line,) = announcements(caplog)
    assert line == (f"shopsim-metrics: step records go to {run_dir / 'steps.jsonl'} (run dir {run_dir}) "
                    f"on host {socket.gethostname()}")


def test_no_announcement_before_the_first_record(tmp_path: Path, caplog) -> None:
    args = SimpleNamespace(**KNOBS, save=str(tmp_path / "ckpt"), shopsim_wandb="off")
    with caplog.at_level(logging.INFO, logger="shopsim_metrics"):
        slime_runtime.configure(args)
        slime_runtime.fully_scored_group_filter(args, [SimSample(index=0, reward=0.0), SimSample(index=1, reward=1.0)])
    assert announcements(caplog) == []


def test_the_default_run_dir_is_absolute_and_fixed_when_the_runtime_starts(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    args = SimpleNamespace(**KNOBS, shopsim_wandb="off")  # no --save: ./shopsim_run/run-..., made absolute now
    loop = ManualLoopState()
    runtime = slime_runtime.configure(args, loop_state=loop)
    run_dir = Path(runtime.run_dir)
    assert run_dir.parent == tmp_path / "shopsim_run" and run_dir.name.startswith("run-")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)  # the actor's working directory changes before the first record
    loop.step = 0
    group = [SimSample(index=i, group_index=0, rollout_id=i, reward=float(i)) for i in range(2)]
    slime_runtime.fully_scored_group_filter(args, group)
    slime_runtime.fully_scored_group_filter(args, [SimSample(index=10 + i, group_index=1, rollout_id=10 + i,
                                                             reward=float(i)) for i in range(2)])
    slime_runtime.log_rollout_step(0, args, [], {}, 0.1)
    assert [r.rollout_id for r in read_steps(run_dir)] == [0]
    assert not (elsewhere / "shopsim_run").exists()


def test_an_explicit_run_dir_wins_over_save(tmp_path: Path) -> None:
    args = SimpleNamespace(**KNOBS, save=str(tmp_path / "ckpt"), shopsim_run_dir=str(tmp_path / "mine"),
                           shopsim_wandb="off")
    run_steps(args, steps=1)
    assert os.path.exists(tmp_path / "mine" / "steps.jsonl") and not (tmp_path / "ckpt").exists()


def test_slimes_run_summary_says_where_the_records_are(wandb_env: Path, tmp_path: Path) -> None:  # noqa: F811
    import wandb

    slime_run = wandb.init(project="slime")  # what slime's --use-wandb does in the process
    args = SimpleNamespace(**KNOBS, save=str(tmp_path / "ckpt"), use_wandb=True)
    run_steps(args)
    slime_runtime.reset_runtime()
    run_dir = Path(slime_run.dir).parent
    slime_run.finish()
    summary = read_offline_run(run_dir).summary
    assert summary[SUMMARY_RUN_DIR] == str(tmp_path / "ckpt" / "shopsim")
    assert summary[SUMMARY_HOST] == socket.gethostname()


def test_a_standalone_runs_summary_says_where_the_records_are(wandb_env: Path, tmp_path: Path) -> None:  # noqa: F811
    args = SimpleNamespace(**KNOBS, shopsim_run_dir=str(tmp_path / "run"), shopsim_wandb="standalone")
    run_steps(args)
    slime_runtime.reset_runtime()  # finishes the run the sink started
    (run_dir,) = find_run_dirs(wandb_env)
    summary = read_offline_run(run_dir).summary
    assert (summary[SUMMARY_RUN_DIR], summary[SUMMARY_HOST]) == (str(tmp_path / "run"), socket.gethostname())


def test_the_hooks_need_no_other_package_so_a_no_deps_install_works(tmp_path: Path) -> None:
    """docs §1.5: ``pip install --no-deps --target`` is enough for the hooks (W&B off)."""
    import subprocess
    import sys

    script = f"""
import sys
class Block:
    def find_spec(self, name, path=None, target=None):
        if name.split('.')[0] in ('numpy', 'yaml', 'wandb', 'plotly'):
            raise ImportError('not installed: ' + name)
sys.meta_path.insert(0, Block())
from types import SimpleNamespace
from shopsimrl import slime_runtime
from shopsim_metrics.simulator.samples import SimSample
args = SimpleNamespace(rollout_batch_size=1, n_samples_per_prompt=2, global_batch_size=2, shopsim_wandb='off',
                       shopsim_run_dir={str(tmp_path / 'run')!r})
group = [SimSample(index=0, reward=0.0), SimSample(index=1, reward=1.0)]
assert slime_runtime.fully_scored_group_filter(args, group).keep
slime_runtime.record_all_samples(args, [group], None)
assert slime_runtime.log_rollout_step(0, args, [], {{}}, 0.1) is False
"""
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "run" / "steps.jsonl").read_text().count("\n") == 1
