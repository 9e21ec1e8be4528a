"""Simulator throughput in tuning mode, and ``tune`` with 8 candidates x 2,000 steps.

1. Throughput at the defaults (16 of 32 groups, 8 siblings, the prompt reward model, 2% technical
   failures) in tuning mode, as ``tune`` runs its candidates: the real filter, accounting and all three
   hooks, no sinks, no prompt tracking (``TUNING_ARGS``). Printed beside it: the same with prompt
   tracking (the default of a monitored run). Target:
   >= 1,000 simulated rollout steps per second on one core. Printed beside it: the cost per judged
   group with the real hooks and with a stand-in filter that keeps every group and no other hook
   (the simulator's own share), so a slowdown can be pinned on the loop or on the hooks.
2. ``tune`` with 8 candidates x 2,000 steps at a moderate and a high zero-std rate, serial and with
   one process per CPU. Target: under 30 s.

Run: ``python benchmarks/bench_simulator.py`` (prints figures and ratios; not a test).
"""

from __future__ import annotations

import os
import sys
import time


from shopsim_metrics.step.loop_state import ManualLoopState
from shopsim_metrics.simulator.config import SimConfig
from shopsim_metrics.simulator.loop import SimulatedSlimeLoop, simulate
from shopsim_metrics.simulator.latency import LatencyCompletions
from shopsim_metrics.simulator.loop import TUNING_ARGS, latency_model, make_group_source, rng_streams
from shopsim_metrics.simulator.tune import tune

STEPS = 3000
REPEATS = 3
THROUGHPUT_TARGET = 1000.0  # steps / s
TUNE_TARGET = 30.0  # seconds
CANDIDATES = [16, 24, 32, 40, 48, 56, 64, 80]


def throughput(extra_args: dict | None = None) -> tuple[float, float]:
    """Best of REPEATS: (steps / s, microseconds per judged group) with the real hooks, no sinks."""
    best, per_group = 0.0, 0.0
    for repeat in range(REPEATS):
        result = simulate(SimConfig(steps=STEPS, seed=repeat), extra_args=extra_args)
        rate = len(result.outcomes) / result.wall_seconds
        if rate > best:
            judged = sum(len(o.judged_ids) for o in result.outcomes)
            best, per_group = rate, result.wall_seconds / judged * 1e6
    return best, per_group


def loop_alone() -> float:
    """Microseconds per judged group for the simulated loop with a keep-everything filter and no other hook."""
    config = SimConfig(steps=STEPS)
    latency_rng, reward_rng, _ = rng_streams(0)
    loop = SimulatedSlimeLoop(config.to_args(), source=make_group_source(config, reward_rng),
                              completions=LatencyCompletions(latency_model(config, latency_rng),
                                                             config.max_concurrent_groups),
                              filter_fn=lambda args, group: True, all_samples_fn=None, log_fn=None,
                              loop_state=ManualLoopState(source="bench"))
    judged = 0
    started = time.perf_counter()
    for step in range(STEPS):
        judged += len(loop.run_step(step).judged_ids)
    return (time.perf_counter() - started) / judged * 1e6


def main() -> int:
    print(f"simulator throughput at the defaults, tuning mode (real filter + accounting + hooks, no sinks), "
          f"{STEPS} steps, best of {REPEATS}:")
    rate, per_group = throughput(TUNING_ARGS)
    ok = rate >= THROUGHPUT_TARGET
    print(f"  {rate:,.0f} steps/s   target >= {THROUGHPUT_TARGET:,.0f}   ratio {rate / THROUGHPUT_TARGET:.2f}x  "
          f"{'ok' if ok else 'MISSED'}")
    tracked_rate, _ = throughput()
    print(f"  with prompt tracking: {tracked_rate:,.0f} steps/s (ratio to tuning mode {tracked_rate / rate:.2f})")
    alone = loop_alone()
    print(f"  per judged group: {per_group:.1f} us with the real hooks; {alone:.1f} us for the loop alone "
          f"(keep-everything filter, no hooks) -> hooks {1 - alone / per_group:.0%} of the time")

    cpus = os.cpu_count() or 1
    print(f"\ntune: {len(CANDIDATES)} candidates x 2,000 steps (target < {TUNE_TARGET:.0f} s; {cpus} CPU(s)):")
    for zero, technical in ((0.3, 0.05), (0.6, 0.05)):
        for jobs in sorted({1, cpus}):
            report = tune(zero_std_rate=zero, technical_rate=technical, candidates=CANDIDATES, steps=2000, jobs=jobs)
            steps = len(CANDIDATES) * 2000
            ok &= report.wall_seconds < TUNE_TARGET
            flag = "ok" if report.wall_seconds < TUNE_TARGET else "MISSED"
            print(f"  zero-std {zero:.1f}, technical {technical:.2f}, jobs={jobs}: {report.wall_seconds:5.1f} s "
                  f"({steps / report.wall_seconds:,.0f} steps/s)   ratio to target {report.wall_seconds / TUNE_TARGET:.2f}"
                  f"  {flag}   recommended {report.recommended}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
