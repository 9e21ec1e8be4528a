"""What the project's hooks cost a ``tune`` simulation, against the simulated loop alone, side by side.

1. Target (a ratio measured side by side in this run): a candidate's simulation as ``tune`` runs it
   (:func:`~shopsim_metrics.simulator.loop.tuning_run`: the simulated slime loop with the real filter,
   accounting and records) against the same loop replaying the same run's keep / drop decisions with no
   hook at all: the same groups drawn, judged in the same order, the same waves and aborts (checked),
   so the difference is the hooks' own work. CPU time of this process, in pairs whose order alternates,
   at a moderate and a high zero-std rate; the verdict is the median over the pairs of ``with hooks /
   loop alone``. Target: <= 5.0 (measured 3.6-4.0 on a 2-core machine beside other work, load 7-8: the
   hooks read every sample twice, once to judge the group and once to count its tokens at the step's
   close, and build the step's record; the loop draws the samples). Hooks made half again slower miss it.
2. Printed without a target: ``tune`` with 8 candidates x 2,000 steps, one process per CPU as the CLI
   runs it, its wall and CPU time and the load average: the figure a user waits for.

Run: ``make bench``, or ``python benchmarks/bench_simulator.py``. ``BENCH_ROUNDS`` sets the pairs per rate
(default 7).
"""

from __future__ import annotations

import os
import resource
import statistics
import sys
import time
from typing import Any

from shopsim_metrics.simulator.config import SimConfig
from shopsim_metrics.simulator.latency import LatencyCompletions
from shopsim_metrics.simulator.loop import (SimulatedSlimeLoop, SimulationResult, latency_model, make_group_source,
                                            rng_streams, token_rng, tuning_run)
from shopsim_metrics.simulator.token_model import TokenModel
from shopsim_metrics.simulator.tuning.tune import tune
from shopsim_metrics.loop.loop_state import ManualLoopState

TARGET_RATIO = 5.0  # a tuning run with the hooks / the same loop replaying its decisions, per run (CPU time)
RATES = ((0.3, 0.05), (0.6, 0.05))  # zero-std, technical
PAIR_STEPS = 500
OVER_SAMPLING = 32  # a middle candidate of tune's range for rollout_batch_size 16
CANDIDATES = [16, 24, 32, 40, 48, 56, 64, 80]
TUNE_STEPS = 2000


def cpu_seconds() -> float:
    """CPU time of this process and of its finished children (``tune``'s worker processes)."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def with_hooks(config: SimConfig) -> tuple[float, SimulationResult]:
    """CPU seconds of a candidate's simulation as ``tune`` runs it, and its result."""
    started = time.process_time()
    result = tuning_run(config)
    return time.process_time() - started, result


def loop_alone(config: SimConfig, result: SimulationResult) -> float:
    """CPU seconds of the same simulated loop, the same draws, replaying ``result``'s decisions without a hook."""
    decisions = iter([gid not in outcome.dropped for outcome in result.outcomes for gid in outcome.judged_ids])
    latency_rng, reward_rng, _ = rng_streams(config.seed)  # the streams the simulator draws from
    loop = SimulatedSlimeLoop(
        config.to_args(), source=make_group_source(config, reward_rng,
                                                   TokenModel.from_config(config, token_rng(config.seed))),
        completions=LatencyCompletions(latency_model(config, latency_rng), config.max_concurrent_groups),
        filter_fn=lambda args, group: next(decisions), all_samples_fn=None, log_fn=None, sample_hook_fn=None,
        loop_state=ManualLoopState(source="bench"), token_timing=True)
    started = time.process_time()
    outcomes = [loop.run_step(step) for step in range(config.steps)]
    seconds = time.process_time() - started
    assert [o.judged_ids for o in outcomes] == [o.judged_ids for o in result.outcomes], "not the same run"
    return seconds


def ratio_pairs(config: SimConfig, rounds: int) -> list[tuple[float, float]]:
    """``rounds`` pairs of (with hooks, loop alone) CPU seconds, the order alternating."""
    _, result = with_hooks(config)  # warm-up, and the decisions the loop replays
    loop_alone(config, result)
    pairs = []
    for r in range(rounds):
        if r % 2:
            alone = loop_alone(config, result)
            hooks, result = with_hooks(config)
        else:
            hooks, result = with_hooks(config)
            alone = loop_alone(config, result)
        pairs.append((hooks, alone))
    return pairs


def main() -> int:
    rounds = int(os.environ.get("BENCH_ROUNDS", "7"))
    ok = True
    print(f"a tuning run's hooks against the simulated loop alone: {PAIR_STEPS} steps at over_sampling_batch_size "
          f"{OVER_SAMPLING}, {rounds} pairs per rate, order alternated, CPU time; load average "
          f"{os.getloadavg()[0]:.1f}")
    for zero, technical in RATES:
        config = SimConfig(steps=PAIR_STEPS, zero_std_rate=zero, technical_rate=technical,
                           over_sampling_batch_size=OVER_SAMPLING)
        pairs = ratio_pairs(config, rounds)
        ratio = statistics.median(h / a for h, a in pairs)
        passed = ratio <= TARGET_RATIO
        ok &= passed
        hooks, alone = (statistics.median(x) / PAIR_STEPS * 1e3 for x in zip(*pairs))
        print(f"  zero-std {zero:.1f}, technical {technical:.2f}: with the hooks {hooks:.2f} ms/step, the loop alone "
              f"{alone:.2f} ms/step; ratio {ratio:.2f}   target <= {TARGET_RATIO:.1f}   {'ok' if passed else 'MISSED'}")

    zero, technical = RATES[0]
    jobs = os.cpu_count() or 1
    cpu_before = cpu_seconds()
    report: Any = tune(zero_std_rate=zero, technical_rate=technical, candidates=CANDIDATES, steps=TUNE_STEPS, jobs=jobs)
    print(f"(no target) tune, {len(CANDIDATES)} candidates x {TUNE_STEPS:,} steps, zero-std {zero:.1f}, {jobs} jobs: wall "
          f"{report.wall_seconds:.1f} s, CPU {cpu_seconds() - cpu_before:.1f} s, recommended {report.recommended}; "
          f"load average {os.getloadavg()[0]:.1f}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
