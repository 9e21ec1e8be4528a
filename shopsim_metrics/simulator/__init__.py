"""A simulator of slime's rollout loop that drives the project's real hooks, plus ``demo`` and ``tune``.

- :mod:`.config` - :class:`SimConfig` (knobs, latency, rewards, failures) and :class:`FailureBurst`;
- :mod:`.latency` - the latency model and completion orders (batches of groups finishing together);
- :mod:`.rewards` - what finished groups hold (prompt model, fixed rates, explicit factories);
- :mod:`.loop` - the simulated loop and :class:`Simulator`;
- :mod:`.tune` - compare ``over_sampling_batch_size`` candidates by simulation;
- :mod:`.demo` - the README's main command;
- :mod:`.commands` - ``shopsim-metrics demo`` and ``shopsim-metrics tune``.

Example:
    >>> from shopsim_metrics.simulator import SimConfig, simulate
    >>> simulate(SimConfig(steps=2, seed=3)).records[0].wave_count >= 1
    True
"""

from shopsim_metrics.simulator.config import FailureBurst, SimConfig
from shopsim_metrics.simulator.loop import SimulatedSlimeLoop, SimulationResult, Simulator, StepOutcome, simulate

__all__ = [
    "FailureBurst",
    "SimConfig",
    "SimulatedSlimeLoop",
    "SimulationResult",
    "Simulator",
    "StepOutcome",
    "simulate",
]
