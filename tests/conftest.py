"""Shared fixtures: slime-like args, group builders, and the project's simulated slime loop with scripted
groups and completion orders, wired to the real hooks."""

from __future__ import annotations

import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from hypothesis import HealthCheck, settings

from shopsim_metrics.loop.loop_state import ManualLoopState
from shopsim_metrics.simulator.samples import SimSample
from shopsim_metrics.simulator.loop import SimulatedSlimeLoop, StepOutcome
from shopsim_metrics.simulator.latency import NextBatch, ScriptedCompletions
from shopsim_metrics.simulator.rewards import FactoryGroupSource
from shopsim_metrics.sinks import JsonlSink, MemorySink
from shopsimrl import slime_runtime

# run by test_slime_integration.py (test_loops.py) in a subprocess, and the harnesses that
# test_slime_train.py (test_miles_loop.py) runs slime's train.py (miles' loop) with: not collected
collect_ignore = ["slime_real_loop_check.py", "slime_train", "loop_check.py", "miles_loop"]
sys.path.insert(0, str(Path(__file__).resolve().parent / "slime_train"))  # `import harness` in the train.py tests

# no test depends on the machine's speed: hypothesis's per-example deadline and its "too slow" health
# check are clocks (on a busy machine they fail a test that is right), so both are off for every test
settings.register_profile("no_clock", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("no_clock")


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


def fifo_batches(*sizes: int) -> NextBatch:
    """Completion script: groups finish in submission order, ``sizes`` at a time (the last size repeats)."""
    calls = {"n": 0}

    def next_batch(pending: list[int]) -> list[int]:
        size = sizes[min(calls["n"], len(sizes) - 1)]
        calls["n"] += 1
        return pending[:size]

    return next_batch


def scripted_loop(args, state: ManualLoopState) -> SimulatedSlimeLoop:
    """The simulated slime loop calling the three real hooks (loaded by dotted path, as slime does)."""
    return SimulatedSlimeLoop(args, source=FactoryGroupSource(spread), completions=ScriptedCompletions(fifo_batches(1)),
                              loop_state=state)


def run_scripted_step(loop: SimulatedSlimeLoop, rollout_id: int, make_group, next_batch: NextBatch) -> StepOutcome:
    """One rollout step of ``loop`` with scripted group contents (``make_group(gid)``) and completion order."""
    loop.source = FactoryGroupSource(make_group)
    loop.completions = ScriptedCompletions(next_batch)
    return loop.run_step(rollout_id)


@pytest.fixture
def wired(tmp_path):
    """A function building (simulated loop, memory sink, run dir) for given args overrides."""

    def build(**overrides):
        args = make_args(shopsim_run_dir=str(tmp_path / "run"), **overrides)
        state = ManualLoopState(source="scripted")
        memory = MemorySink()
        slime_runtime.configure(args, sinks=[memory, JsonlSink(args.shopsim_run_dir)], loop_state=state)
        return scripted_loop(args, state), memory, Path(args.shopsim_run_dir)

    yield build
    slime_runtime.reset_runtime()


def persistence_by_quarter(records: list) -> list[float | None]:
    """``zero_std_persistence`` over each quarter of the steps (repeat / skippable summed; None: no skippable)."""
    if len(records) < 4:
        return []
    out: list[float | None] = []
    for q in range(4):
        part = records[q * len(records) // 4:(q + 1) * len(records) // 4]
        skippable = sum(r.skippable_group_count or 0 for r in part)
        repeat = sum(r.repeat_zero_std_group_count or 0 for r in part)
        out.append(repeat / skippable if skippable else None)
    return out
