"""The skipping data source and the monitor in one process: the data source learns from the monitor's
prompt history (fed by the filter's judgements through slime's hooks, loaded by dotted path) and the
monitor records the skips in each step's record."""

from __future__ import annotations

import importlib
from types import SimpleNamespace

import pytest

from shopsim_metrics.prompts.keys import prompt_key
from shopsim_metrics.sinks import MemorySink
from shopsim_metrics.step.loop_state import ManualLoopState
from tests.test_data_source import CERTAIN, FakeSlimeDataSource, pool

N = 4
HOOKS = importlib.import_module("shopsimrl.slime_runtime")
DATA_SOURCE = getattr(importlib.import_module("shopsimrl.data_source"), "PromptSkipDataSource")


def is_hard(group) -> bool:
    return int(group[0].label) % 2 == 0  # even prompts: every rollout fails, always


def generate(group, step: int) -> None:
    """Rewards and tokens for one served group: hard prompts all-fail, the others spread."""
    for i, sample in enumerate(group):
        sample.rollout_id = step * 10_000 + sample.index
        sample.reward = 0.0 if is_hard(group) else float(i % 2)
        sample.response_length = 100


def run_steps(tmp_path, steps: int, **settings) -> tuple[list, object, MemorySink]:
    """``steps`` rollout steps of 4 groups, each through the three hooks; returns the records, source, sink."""
    args = SimpleNamespace(rollout_batch_size=4, n_samples_per_prompt=N, over_sampling_batch_size=4,
                           global_batch_size=16, reward_key=None, rollout_shuffle=False, rollout_seed=1,
                           rollout_global_dataset=True, save=str(tmp_path / "ckpt"), load=None,
                           shopsim_run_dir=str(tmp_path / "run"), shopsim_wandb="off", **settings)
    sink, loop = MemorySink(), ManualLoopState("test")
    HOOKS.configure(args, sinks=[sink], loop_state=loop)
    ds = DATA_SOURCE(args, inner=FakeSlimeDataSource(args, pool(16)))
    served_per_step = []
    for step in range(steps):
        loop.step, loop.remaining = step, 4
        groups = ds.get_samples(4)
        served_per_step.append(groups)
        for group in groups:
            generate(group, step)
            if HOOKS.fully_scored_group_filter(args, group).keep:
                loop.remaining -= 1
        HOOKS.record_all_samples(args, groups, ds.get_samples)
        HOOKS.log_rollout_step(step, args, [], {}, 10.0)
    return served_per_step, ds, sink


@pytest.fixture(autouse=True)
def _fresh_monitor():
    yield
    HOOKS.reset_runtime()


def test_the_data_source_learns_from_the_monitors_history_fed_by_the_filter(tmp_path) -> None:
    served, ds, _ = run_steps(tmp_path, 6, shopsim_prompt_skip="greso", **CERTAIN)
    assert ds.history.tracker is HOOKS.get_runtime(ds.args).accountant.prompts  # one history, the monitor's
    first_epoch = [g for step in served[:4] for g in step]
    assert sum(map(is_hard, first_epoch)) == 8  # nothing known yet: slime's order, hard prompts generated
    later = [g for step in served[4:] for g in step]
    assert later and not any(map(is_hard, later))  # every hard prompt was skipped from then on


def test_off_never_attaches_and_serves_slimes_order(tmp_path) -> None:
    served, ds, sink = run_steps(tmp_path, 6, shopsim_prompt_skip="off")
    assert ds._history is None and HOOKS.get_runtime(ds.args).prompt_skip_source is None
    assert [int(g[0].label) for step in served for g in step] == [i % 16 for i in range(24)]
