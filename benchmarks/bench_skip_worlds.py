"""The predictive rule's settings judged beyond one run: every world the project can show, lost signal beside saving.

A rule's defaults are safe when, in every world, they lose at most **0.15** of signal wherever they save
tokens, and never cost more tokens than skipping off. The worlds: the simulator's three pools of
``bench_prompt_skip.py`` (drifting, demo where zero-std is mostly luck, persistent) at ``n`` = 4, 8 and
16, each with many visits per prompt (512 prompts, about 8 visits each over the run) and few (about 1.6),
and the shared trace replayed (``bench_real_trace.py``'s, n = 8, both length modes). Per world, pooled over
3 seeds: predictive's tokens per informative trained group against off with the same waves (fixed and
adaptive), and its lost signal (simulator: expected informative groups forgone by the true success rates;
trace: skipped draws whose recorded visit had spread).

Not in ``make bench``: the defaults (threshold 0.7, forgetting 0.995, chosen on the trace) miss here, and
what to change them to is open (docs/benchmarks.md § The predictive rule beyond one run). Misses are printed
and exit 1.

Run: ``python benchmarks/bench_skip_worlds.py [--threshold T] [--forgetting F] [--steps N] [--no-trace]``.
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_prompt_skip import pools  # noqa: E402 - the pools of the simulator's skipping bench
from bench_real_trace import OVER_SAMPLING_BATCH_SIZE, ROLLOUT_BATCH_SIZE, TRACE  # noqa: E402

from shopsim_metrics.replay.measure import ReplayKnobs, default_steps, replay_setting  # noqa: E402
from shopsim_metrics.replay.source import LENGTH_MODES  # noqa: E402
from shopsim_metrics.outcomes.trace import load_trace  # noqa: E402
from shopsim_metrics.simulator.skip_measure import measure_skipping  # noqa: E402

LOST_SIGNAL_LIMIT = 0.15
SEEDS = (0, 1, 2)
FEW_VISITS = 1.6
WAVES = ("fixed", "adaptive")


def judge(world: str, wave: str, ratio: float, lost: float) -> str | None:
    """The miss of one row, or None: more tokens than off, or past the lost-signal limit while saving."""
    if ratio < 1.0:
        return f"{world} {wave}: {ratio:.2f}x, more tokens than off"
    if ratio > 1.0 and lost > LOST_SIGNAL_LIMIT:
        return f"{world} {wave}: {ratio:.2f}x at a lost signal of {lost:.3f} > {LOST_SIGNAL_LIMIT}"
    return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threshold", type=float, default=None, help="predictive's threshold (default: the setting's)")
    parser.add_argument("--forgetting", type=float, default=None, help="predictive's forgetting (default: the setting's)")
    parser.add_argument("--steps", type=int, default=120)
    parser.add_argument("--no-trace", action="store_true", help="the simulator's worlds only")
    args = parser.parse_args(argv)
    started = time.process_time()
    rule = dict(prompt_skip_threshold=args.threshold, prompt_skip_forgetting=args.forgetting)
    misses: list[str] = []
    print(f"{'world':<24}" + "".join(f"{wave + ' vs off':>18}{'lost':>8}" for wave in WAVES))
    for name, base in pools(args.steps).items():
        for n in (4, 8, 16):
            for visits in ("many", "few"):
                pool = base.prompt_pool if visits == "many" else int(
                    args.steps * base.over_sampling_batch_size / FEW_VISITS)
                config = replace(base, n_samples_per_prompt=n, prompt_pool=pool)
                world, cells = f"{name} n={n} {visits}", []
                for wave in WAVES:
                    off = measure_skipping(replace(config, prompt_skip="off", wave_size=wave), SEEDS)
                    mine = measure_skipping(replace(config, prompt_skip="predictive", wave_size=wave, **rule), SEEDS)
                    ratio = off.tokens_per_informative_group / mine.tokens_per_informative_group
                    cells.append(f"{ratio:>17.2f}x{mine.lost_signal:>8.3f}")
                    misses += [m for m in [judge(world, wave, ratio, mine.lost_signal)] if m]
                print(f"{world:<24}" + "".join(cells), flush=True)
    if not args.no_trace:
        trace = load_trace(TRACE, 8)
        steps = default_steps(trace, OVER_SAMPLING_BATCH_SIZE)
        for lengths in LENGTH_MODES:
            world, cells = f"trace {lengths}", []
            for wave in WAVES:
                knobs = ReplayKnobs(ROLLOUT_BATCH_SIZE, OVER_SAMPLING_BATCH_SIZE, steps, lengths=lengths, settings=rule)
                off = replay_setting(trace, knobs, "off", wave, seeds=SEEDS)
                mine = replay_setting(trace, knobs, "predictive", wave, seeds=SEEDS)
                ratio = off.tokens_per_informative_group / mine.tokens_per_informative_group
                cells.append(f"{ratio:>17.2f}x{mine.lost_signal:>8.3f}")
                misses += [m for m in [judge(world, wave, ratio, mine.lost_signal)] if m]
            print(f"{world:<24}" + "".join(cells), flush=True)
    print(f"{time.process_time() - started:.0f} s of CPU")
    for miss in misses:
        print(f"MISS: {miss}")
    print("OK: safe in every world" if not misses else f"{len(misses)} misses")
    return 1 if misses else 0


if __name__ == "__main__":
    sys.exit(main())
