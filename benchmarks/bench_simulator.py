"""``tune`` with 8 candidates x 2,000 steps, and where the simulator's time goes.

1. ``tune`` (8 ``over_sampling_batch_size`` candidates x 2,000 simulated steps each, the real hooks
   in tuning mode) at a moderate and a high zero-std rate, serially and with one process per CPU
   (the CLI's default). Target: the serial run under 30 s of CPU time, i.e. under 30 s of wall time
   on one free core, whatever else the machine runs (the wall time on a shared machine grows with its
   load; with one process per CPU it is lower on a free machine). Printed beside it: each run's wall
   time, its CPU time (its worker processes' included) and the load average.
2. Without a target, side by side in this run: the cost per judged group of the simulated loop with
   the real hooks and with a stand-in filter that keeps every group and no other hook (the loop's
   own share), so a slowdown can be pinned on the loop or on the hooks.

Run: ``python benchmarks/bench_simulator.py``.
"""

from __future__ import annotations

import os
import resource
import statistics
import sys
import time

from shopsim_metrics.simulator.config import SimConfig
from shopsim_metrics.simulator.latency import LatencyCompletions
from shopsim_metrics.simulator.loop import (SimulatedSlimeLoop, latency_model, make_group_source, rng_streams,
                                            tuning_run)
from shopsim_metrics.simulator.tune import tune
from shopsim_metrics.step.loop_state import ManualLoopState

TUNE_TARGET = 30.0  # seconds
CANDIDATES = [16, 24, 32, 40, 48, 56, 64, 80]
TUNE_STEPS = 2000
SPLIT_STEPS = 1000
SPLIT_REPEATS = 5


def cpu_seconds() -> float:
    """CPU time of this process and of its finished children (``tune``'s worker processes)."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def with_hooks() -> float:
    """Microseconds per judged group, the simulated loop with the real hooks (tuning mode, no sinks)."""
    result = tuning_run(SimConfig(steps=SPLIT_STEPS))
    return result.wall_seconds / sum(len(o.judged_ids) for o in result.outcomes) * 1e6


def loop_alone() -> float:
    """Microseconds per judged group, the simulated loop with a keep-everything filter and no other hook."""
    config = SimConfig(steps=SPLIT_STEPS)
    latency_rng, reward_rng, _ = rng_streams(0)
    loop = SimulatedSlimeLoop(config.to_args(), source=make_group_source(config, reward_rng),
                              completions=LatencyCompletions(latency_model(config, latency_rng),
                                                             config.max_concurrent_groups),
                              filter_fn=lambda args, group: True, all_samples_fn=None, log_fn=None,
                              loop_state=ManualLoopState(source="bench"))
    judged = 0
    started = time.perf_counter()
    for step in range(SPLIT_STEPS):
        judged += len(loop.run_step(step).judged_ids)
    return (time.perf_counter() - started) / judged * 1e6


def main() -> int:
    ok = True
    cpus = os.cpu_count() or 1
    print(f"tune: {len(CANDIDATES)} candidates x {TUNE_STEPS:,} steps (target: serial CPU time < {TUNE_TARGET:.0f} s; "
          f"{cpus} CPU(s), load average {os.getloadavg()[0]:.1f}):")
    for zero, technical in ((0.3, 0.05), (0.6, 0.05)):
        for jobs in sorted({1, cpus}):
            cpu_before = cpu_seconds()
            report = tune(zero_std_rate=zero, technical_rate=technical, candidates=CANDIDATES, steps=TUNE_STEPS,
                          jobs=jobs)
            cpu = cpu_seconds() - cpu_before
            verdict = "(no target: its wall time)"
            if jobs == 1:
                passed = cpu < TUNE_TARGET
                ok &= passed
                verdict = f"ratio to target {cpu / TUNE_TARGET:.2f}   {'ok' if passed else 'MISSED'}"
            print(f"  zero-std {zero:.1f}, technical {technical:.2f}, jobs={jobs}: wall {report.wall_seconds:5.1f} s, "
                  f"CPU {cpu:5.1f} s   {verdict}   recommended {report.recommended}")
    print(f"  load average now {os.getloadavg()[0]:.1f}")

    hooks, alone = [], []
    for _ in range(SPLIT_REPEATS):  # alternated, medians
        hooks.append(with_hooks())
        alone.append(loop_alone())
    h, a = statistics.median(hooks), statistics.median(alone)
    print(f"\n(no target) per judged group at the defaults, {SPLIT_STEPS} steps, {SPLIT_REPEATS} alternated runs, "
          f"medians: {h:.1f} us with the real hooks, {a:.1f} us for the loop alone -> hooks {1 - a / h:.0%} of the time")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
