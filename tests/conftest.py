"""Shared fixtures: slime-like args, group builders, and a runtime wired to a loop double."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from loop_double import SlimeLoopDouble
from shopsim_metrics.loop_state import ManualLoopState
from shopsim_metrics.samples import SimSample
from shopsim_metrics.sinks import JsonlSink, MemorySink
from shopsimrl import slime_runtime


def make_args(**overrides) -> SimpleNamespace:
    """slime's knobs at the design document's defaults, plus the given overrides."""
    base = dict(
        rollout_batch_size=16,
        n_samples_per_prompt=8,
        over_sampling_batch_size=32,
        global_batch_size=64,
        reward_key=None,
        shopsim_max_consecutive_failed_groups=8,
    )
    base.update(overrides)
    return SimpleNamespace(**base)


def group_of(gid: int, rewards, n: int | None = None, **sample_kw) -> list[SimSample]:
    """A finished group of siblings with the given rewards (one per rollout)."""
    return [
        SimSample(index=gid * 1000 + i, group_index=gid, rollout_id=gid * 1000 + i, reward=r, **sample_kw)
        for i, r in enumerate(rewards)
    ]


def spread(gid: int, n: int = 8) -> list[SimSample]:
    return group_of(gid, [1.0 if i % 2 == 0 else 0.0 for i in range(n)])


def zero(gid: int, n: int = 8, value: float = 0.0) -> list[SimSample]:
    return group_of(gid, [value] * n)


def technical(gid: int, n: int = 8) -> list[SimSample]:
    group = spread(gid, n)
    group[0].status = "failed"
    return group


@pytest.fixture
def wired(tmp_path):
    """A function building (loop double, memory sink, run dir) for given args overrides."""

    def build(**overrides):
        args = make_args(shopsim_run_dir=str(tmp_path / "run"), **overrides)
        state = ManualLoopState(source="loop_double")
        memory = MemorySink()
        slime_runtime.configure(args, sinks=[memory, JsonlSink(args.shopsim_run_dir)], loop_state=state)
        loop = SlimeLoopDouble(
            args,
            filter_fn=slime_runtime.fully_scored_group_filter,
            all_samples_fn=slime_runtime.record_all_samples,
            log_fn=slime_runtime.log_rollout_step,
            loop_state=state,
        )
        return loop, memory, Path(args.shopsim_run_dir)

    yield build
    slime_runtime.reset_runtime()
