"""A simulator of slime's rollout loop that drives the project's real hooks, plus ``demo``, ``tune`` and the skip
measurements, each apart from the loop.

- :mod:`.config` - :class:`SimConfig` (knobs, latency, rewards, failures) and :class:`FailureBurst`;
- :mod:`.latency` - the latency model and completion orders (batches of groups finishing together);
- :mod:`.rewards` - what finished groups hold (prompt model, fixed rates, explicit factories);
- :mod:`.loop` - the simulated loop and :class:`Simulator`;
- :mod:`.tuning` - ``tune``: compare ``over_sampling_batch_size`` candidates by simulation, calibrated from a run;
- :mod:`.skipping` - the skip measurements: what skipping saves, and what a rule costs in signal;
- :mod:`.demo` - the README's main command;
- :mod:`.commands` - ``shopsim-metrics demo`` and ``shopsim-metrics tune``.
- :mod:`.samples` - :class:`SimSample`, a stand-in for slime's ``Sample``.

The package itself imports nothing, so the light :mod:`.samples` loads without numpy.

Example:
    >>> from shopsim_metrics.simulator.config import SimConfig
    >>> from shopsim_metrics.simulator.loop import simulate
    >>> simulate(SimConfig(steps=2, seed=3)).records[0].wave_count >= 1
    True
"""
