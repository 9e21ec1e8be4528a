"""The worlds the skipping benchmarks measure in, shared by them: the simulator's three prompt pools and the
shared trace with the batch knobs it is replayed at.

A benchmark imports this file as a sibling (``python benchmarks/bench_x.py`` puts its own folder first on the
import path, and worker processes inherit it), never another benchmark's script.

Example:
    >>> sorted(pools(20)), TRACE.name, (ROLLOUT_BATCH_SIZE, OVER_SAMPLING_BATCH_SIZE)
    (['demo', 'drifting', 'persistent'], 'one_shot_rlvr_dsr_sub_acc.dev.json', (16, 32))
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from shopsim_metrics.simulator.config import SimConfig
from shopsim_metrics.simulator.demo import demo_config

TRACE = Path(__file__).resolve().parent / "data" / "one_shot_rlvr_dsr_sub_acc.dev.json"
"""The shared trace (a real run's per-prompt outcomes) that ``bench_real_trace.py`` and ``bench_skip_worlds.py`` replay."""
ROLLOUT_BATCH_SIZE, OVER_SAMPLING_BATCH_SIZE = 16, 32
"""The batch knobs the shared trace is replayed at."""


def pools(steps: int) -> dict[str, SimConfig]:
    """The simulator's three pools, ``steps`` long: drifting, demo (zero-std mostly luck), persistent."""
    plain = dict(partial_credit_rate=0.0, technical_rate=0.02, steps=steps)
    return {
        "drifting": SimConfig(prompt_pool=512, skill_start=-3.0, skill_end=3.0, learning_steps=steps / 2,
                              difficulty_spread=4.0, difficulty_drift=0.05, **plain),
        "demo": replace(demo_config(steps=steps), bursts=()),
        "persistent": SimConfig(prompt_pool=512, skill_start=1.0, skill_end=1.0, difficulty_spread=8.0, **plain),
    }
