"""The predictive rule's settings judged beyond one run: every world the project can show, lost signal beside saving.

A rule's defaults are safe when, in every world, they lose at most **0.15** of signal wherever they save
tokens, and never cost more tokens than skipping off. The worlds (``worlds.py``, shared with ``bench_prompt_skip.py``
and ``bench_real_trace.py``): the simulator's three pools (drifting, demo where zero-std is mostly luck, persistent) at ``n`` = 4, 8 and
16, each with many visits per prompt (512 prompts, about 8 visits each over the run) and few (about 1.6),
and the shared trace replayed (``bench_real_trace.py``'s, n = 8, both length modes). Per world, pooled over
3 seeds: predictive's tokens per informative trained group against off with the same waves (fixed and
adaptive), and its lost signal (simulator: expected informative groups forgone by the true success rates;
trace: skipped draws whose recorded visit had spread).

In ``make bench``, the simulator's worlds only (the trace's lost signal is judged by ``bench_real_trace.py``,
which replays it with every rule; ``--trace`` adds it here). The worlds run in parallel, one process per CPU
(each its own configs and seeds: the figures are those of a serial run). Misses are printed and exit 1.

Run: ``python benchmarks/bench_skip_worlds.py [--threshold T] [--forgetting F] [--max-lost-signal L]
[--probe-every K] [--steps N] [--trace]``.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import replace

from shopsim_metrics.outcomes.trace import load_trace
from shopsim_metrics.replay.measure import ReplayKnobs, default_steps, replay_setting
from shopsim_metrics.replay.source import LENGTH_MODES
from shopsim_metrics.simulator.skipping.skip_measure import measure_skipping
from worlds import OVER_SAMPLING_BATCH_SIZE, ROLLOUT_BATCH_SIZE, TRACE, pools

LOST_SIGNAL_LIMIT = 0.15
SEEDS = (0, 1, 2)
FEW_VISITS = 1.6
WAVES = ("fixed", "adaptive")
RULE_FLAGS = ("threshold", "forgetting", "max_lost_signal", "probe_every")


def judge(world: str, wave: str, ratio: float, lost: float) -> str | None:
    """The miss of one row, or None: more tokens than off, or past the lost-signal limit while saving."""
    if ratio < 1.0:
        return f"{world} {wave}: {ratio:.2f}x, more tokens than off"
    if ratio > 1.0 and lost > LOST_SIGNAL_LIMIT:
        return f"{world} {wave}: {ratio:.2f}x at a lost signal of {lost:.3f} > {LOST_SIGNAL_LIMIT}"
    return None


def simulated_world(job: tuple[str, int, str, int, dict]) -> tuple[str, list[tuple[float, float]]]:
    """One simulated world (in a worker process): per wave size, predictive's ratio to off and its lost signal."""
    name, n, visits, steps, rule = job
    base = pools(steps)[name]
    pool = base.prompt_pool if visits == "many" else int(steps * base.over_sampling_batch_size / FEW_VISITS)
    config = replace(base, n_samples_per_prompt=n, prompt_pool=pool)
    rows = []
    for wave in WAVES:
        off = measure_skipping(replace(config, prompt_skip="off", wave_size=wave), SEEDS)
        mine = measure_skipping(replace(config, prompt_skip="predictive", wave_size=wave, **rule), SEEDS)
        rows.append((off.tokens_per_informative_group / mine.tokens_per_informative_group, mine.lost_signal))
    return f"{name} n={n} {visits}", rows


def trace_world(job: tuple[str, dict]) -> tuple[str, list[tuple[float, float]]]:
    """The shared trace in one length mode (in a worker process), as ``simulated_world`` gives a world."""
    lengths, rule = job
    trace = load_trace(TRACE, 8)
    knobs = ReplayKnobs(ROLLOUT_BATCH_SIZE, OVER_SAMPLING_BATCH_SIZE, default_steps(trace, OVER_SAMPLING_BATCH_SIZE),
                        lengths=lengths, settings=rule)
    rows = []
    for wave in WAVES:
        off = replay_setting(trace, knobs, "off", wave, seeds=SEEDS)
        mine = replay_setting(trace, knobs, "predictive", wave, seeds=SEEDS)
        rows.append((off.tokens_per_informative_group / mine.tokens_per_informative_group, mine.lost_signal))
    return f"trace {lengths}", rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)
    for flag in RULE_FLAGS:
        kind = int if flag == "probe_every" else float
        parser.add_argument("--" + flag.replace("_", "-"), type=kind, default=None,
                            help=f"predictive's {flag} (default: the setting's)")
    parser.add_argument("--steps", type=int, default=120)
    parser.add_argument("--trace", action="store_true", help="also the shared trace, in both length modes")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    rule = {"prompt_skip_" + flag: getattr(args, flag) for flag in RULE_FLAGS}
    jobs = [(name, n, visits, args.steps, rule) for name in pools(args.steps) for n in (4, 8, 16)
            for visits in ("many", "few")]
    misses: list[str] = []
    print(f"{len(SEEDS)} seeds pooled per world; {args.steps} steps; predictive against off with the same waves")
    print(f"{'world':<24}" + "".join(f"{wave + ' vs off':>18}{'lost':>8}" for wave in WAVES))
    workers = ProcessPoolExecutor(max_workers=os.cpu_count() or 1, mp_context=multiprocessing.get_context("spawn"))
    with workers:
        results = list(workers.map(simulated_world, jobs))
        if args.trace:
            results += list(workers.map(trace_world, [(lengths, rule) for lengths in LENGTH_MODES]))
    for world, rows in results:
        print(f"{world:<24}" + "".join(f"{ratio:>17.2f}x{lost:>8.3f}" for ratio, lost in rows))
        misses += [m for (ratio, lost), wave in zip(rows, WAVES) if (m := judge(world, wave, ratio, lost))]
    worst = max(lost for _, rows in results for ratio, lost in rows if ratio > 1.0)
    print(f"the highest lost signal where it saves: {worst:.3f} (limit {LOST_SIGNAL_LIMIT})")
    print(f"{time.perf_counter() - started:.0f} s")
    for miss in misses:
        print(f"MISS: {miss}")
    print("OK: safe in every world" if not misses else f"{len(misses)} misses")
    return 1 if misses else 0


if __name__ == "__main__":
    sys.exit(main())
