"""Skipping prompts before generation, measured honestly: three pools x 3 seeds, every mode, both wave sizes.

Each pool runs with ``prompt_skip`` off, ``greso`` (GRESO's published rule, the reference) and
``predictive``, each with ``fixed`` and ``adaptive`` waves, through the real hooks and the real data
source, at the same knobs and seeds. Per setting, pooled over the seeds
(:mod:`shopsim_metrics.simulator.skipping.skip_measure`): total tokens per informative trained group (every
token generated, aborted groups included), P(second wave), aborted tokens per step, lost signal
(expected informative groups forgone per informative group trained, from the simulator's true
success rates) and the median steps before a prompt that became learnable is judged again.

Pools:

- **drifting**: the policy learns across a wide spread of difficulties (hard prompts become learnable,
  easy ones saturate) and difficulties drift;
- **demo**: the demo's pool (``demo_config``), where zero-std is mostly luck of the draw;
- **persistent**: a wide spread around a skill that does not move: most prompts zero-std visit after visit.

Each pool runs at two ``over_sampling_batch_size`` (fixed waves' size, adaptive waves' cap): the
simulator's default (32, twice ``rollout_batch_size``) and the one the project's ``tune`` recommends
for the pool (:func:`tuned_over_sampling`: 48, 48 and 96 at 150 steps), marked ``*``. They answer
different questions. Below tune's size, fixed waves often end with zero-std groups let in as fallback
(``keep_when_insufficient``): few aborted tokens, but zero-std groups trained and second waves
(tune's targets, zero-advantage fraction and P(second wave) <= 0.05, are missed with skipping off),
and an adaptive wave, never larger than its cap, cannot have fewer second waves than a fixed wave of
that cap. At tune's size fixed waves rarely need a second wave and abort much. Every target is
checked at both sizes, but the second waves of adaptive ones at tune's size only (below it the cap,
not the sizing, sets them).

Targets (ratios side by side in one run; misses are printed and exit 1):

- the best mode within the lost-signal limit (0.15) >= 1.2x fewer total tokens per informative trained
  group than off on the drifting pool, and >= 1.0x on every pool (until the predictive rule had its guard,
  this target was 1.6x, met by a rule that forwent 0.48 of signal for it);
- predictive (the project's rule, at its defaults): a lost signal of at most **0.15** wherever it saves
  tokens (each wave size, each pool, each size). GRESO's rule is the published reference: its lost signal is
  printed beside its saving and judged by no target (it is often past 0.15: the price of its saving);
- adaptive waves: fewer aborted tokens than fixed (each mode, each pool), and P(second wave) <= 0.05 at
  tune's size: pooled over every pool and mode, and in each, not significantly above 0.05. A
  probability measured over 450 steps has a standard error near 0.010, so a wave sized to 0.95 exactly
  measures above 0.05 about as often as below: a row misses when its figure is above 0.05 by more than
  1.645 standard errors (one-sided, 95%), the pool of all rows when it is above 0.05 at all.

References, printed below each pool and judged by no target (``skip_measure.OracleSkip``): rules that
skip a draw whose *true* chance of spread is below 0.3, knowing every prompt (``oracle``) or
only the prompts already judged in the run (``oracle_seen``: the best any rule that learns from a
prompt's own visits could do by the chance of spread alone, since a prompt's first visit is
generated), with adaptive waves. They are blind to cost (the predictive rule also weighs a prompt's
tokens, and can pass them): they say how far a rule that skips by the chance of spread is from what
its information allows.

Every setting of every pool at each size is one job, spread over one process per CPU (each its own config
and seeds: the figures are those of a serial run); the output comes in the pools' order.

The figures go to ``benchmarks/results.json`` (:mod:`results_file`) under ``bench_prompt_skip`` when the bench runs
at its defaults (:func:`figures_of`: one entry per row, keyed ``<pool>_<32 or tuned>_<mode>_<waves>``, and the
ranges the docs quote), where the README and the docs read them.

Run: ``python benchmarks/bench_prompt_skip.py [--steps N] [--seeds K]``.
"""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import replace

from shopsim_metrics.simulator.config import SimConfig
from shopsim_metrics.simulator.loop import Simulator
from shopsim_metrics.simulator.skipping.skip_saving import alerts_silenced
from shopsim_metrics.sinks.jsonl import JsonlSink
from shopsim_metrics.simulator.skipping.skip_measure import OracleSkip, SkipMeasure, measure_skipping
from worlds import pools

import results_file  # benchmarks/results_file.py: run as a script, this folder is on the path

MODES = ("off", "greso", "predictive")
WAVES = ("fixed", "adaptive")
BEST_DRIFTING_TARGET, EVERY_POOL_TARGET = 1.2, 1.0
SECOND_WAVE_TARGET = 0.05
LOST_SIGNAL_LIMIT = 0.15
ONE_SIDED_95 = 1.645  # standard normal quantile: a row's P(second wave) significantly above the target
REFERENCES = (OracleSkip(0.3, seen_only=True), OracleSkip(0.3))
DEFAULT_STEPS, DEFAULT_SEEDS = 150, 3


def tuned_over_sampling(config: SimConfig) -> int:
    """The ``over_sampling_batch_size`` the project's ``tune`` recommends for ``config``'s pool, as a user gets it:
    one run of the pool without skipping, fixed waves, seed 0, written to a run directory, then
    ``shopsim-metrics tune --from <run> --json`` (its targets: zero-advantage fraction and P(second wave) <= 0.05)."""
    with tempfile.TemporaryDirectory() as run_dir:
        sink = JsonlSink(run_dir, fsync=False)
        with alerts_silenced():
            Simulator(replace(config, prompt_skip="off", wave_size="fixed", seed=0), sinks=[sink],
                      keep_records=False).run()
        sink.close()
        out = subprocess.run([sys.executable, "-m", "shopsim_metrics", "tune", "--from", run_dir, "--json",
                              "--steps", "1000", "--jobs", "1"], capture_output=True, text=True, check=True)
    return int(json.loads(out.stdout)["recommended"])


def measure_setting(job: tuple[SimConfig, tuple[int, ...], OracleSkip | None]) -> SkipMeasure:
    """One setting of one pool at one size, over the seeds (in a worker process)."""
    config, seeds, oracle = job
    return measure_skipping(config, seeds, oracle)


def settings_of(pool: SimConfig, over: int) -> dict[tuple[str, str], tuple[SimConfig, OracleSkip | None]]:
    """Every mode with both wave sizes, then the oracle references with adaptive waves, at ``over``."""
    config = replace(pool, over_sampling_batch_size=over)
    settings: dict[tuple[str, str], tuple[SimConfig, OracleSkip | None]] = {
        (mode, waves): (replace(config, prompt_skip=mode, wave_size=waves), None) for waves in WAVES for mode in MODES}
    settings |= {(oracle.name, "adaptive"): (replace(config, wave_size="adaptive"), oracle) for oracle in REFERENCES}
    return settings


def measure_pools(configs: dict[str, SimConfig], seeds: tuple[int, ...]) -> dict[str, list[tuple[int, bool, dict, dict]]]:
    """Every pool at its own over_sampling_batch_size and at tune's: per size, whether it is tune's, every mode's
    measure with both wave sizes, and the oracle references. Each setting is one job, spread over the CPUs."""
    jobs = os.cpu_count() or 1
    with ProcessPoolExecutor(max_workers=jobs, mp_context=multiprocessing.get_context("spawn")) as workers:
        tuned = dict(zip(configs, workers.map(tuned_over_sampling, configs.values())))
        sizes = {name: list(dict.fromkeys((pool.over_sampling_batch_size, tuned[name])))
                 for name, pool in configs.items()}
        plan = [(name, over, key, setting) for name, pool in configs.items() for over in sizes[name]
                for key, setting in settings_of(pool, over).items()]
        measured = list(workers.map(measure_setting, [(config, seeds, oracle) for *_, (config, oracle) in plan]))
    results: dict[str, list[tuple[int, bool, dict, dict]]] = {}
    for (name, over, key, _), m in zip(plan, measured):
        rows = results.setdefault(name, [])
        if not rows or rows[-1][0] != over:
            rows.append((over, over == tuned[name], {}, {}))
        rows[-1][2 if key[0] in MODES else 3][key] = m
    return results


def row_key(pool: str, over: int, tuned: bool, mode: str, waves: str) -> str:
    """A row's key in ``results.json``: ``drifting_tuned_predictive_adaptive``, ``demo_32_oracle_seen_adaptive``.

    >>> row_key("demo", 32, False, "oracle_seen<0.3", "adaptive")
    'demo_32_oracle_seen_adaptive'
    """
    return f"{pool}_{'tuned' if tuned else over}_{mode.split('<')[0]}_{waves}"


def figures_of(measured: dict[str, list[tuple[int, bool, dict, dict]]], second_waves: tuple[int, int]) -> dict:
    """What ``results.json`` holds of a run: per row its saving against off with fixed waves (2 decimals), lost
    signal (3) and P(second wave) (3); the ranges the docs quote (over the pools and both sizes); the pooled P(second
    wave) of adaptive waves at tune's size."""
    figures: dict = {}
    for name, sizes in measured.items():
        for over, tuned, results, references in sizes:
            off = results["off", "fixed"].tokens_per_informative_group
            figures[f"{name}_{'tuned' if tuned else 'default'}_over"] = over
            for (mode, waves), m in (results | references).items():
                figures[row_key(name, over, tuned, mode, waves)] = {
                    "saving": round(off / m.tokens_per_informative_group, 2), "lost_signal": round(m.lost_signal, 3),
                    "second_wave": round(m.second_wave_probability, 3)}
    rows = {k: v for k, v in figures.items() if isinstance(v, dict)}

    def span(field: str, *modes: str, waves: tuple[str, ...] = WAVES, tuned_only: bool = False) -> dict:
        values = [v[field] for k, v in rows.items() if (not tuned_only or "_tuned_" in k)
                  and any(k.endswith(f"_{mode}_{wave}") for mode in modes for wave in waves)]
        return {"min": min(values), "max": max(values)}

    figures |= {"predictive_adaptive_lost_signal": span("lost_signal", "predictive", waves=("adaptive",)),
                "greso_adaptive_lost_signal": span("lost_signal", "greso", waves=("adaptive",)),
                "oracle_seen_lost_signal": span("lost_signal", "oracle_seen", waves=("adaptive",)),
                "tuned_adaptive_second_wave": span("second_wave", *MODES, waves=("adaptive",), tuned_only=True),
                "adaptive_second_wave": span("second_wave", *MODES, waves=("adaptive",)),
                "adaptive_second_wave_pooled": round(second_waves[0] / second_waves[1], 3),
                "adaptive_second_wave_steps": second_waves[1]}
    return figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)
    parser.add_argument("--steps", type=int, default=DEFAULT_STEPS)
    parser.add_argument("--seeds", type=int, default=DEFAULT_SEEDS)
    args = parser.parse_args(argv)
    seeds = tuple(range(args.seeds))
    started = time.perf_counter()
    misses: list[str] = []
    second_waves = [0, 0]  # adaptive waves at tune's size, every pool and mode: steps with a second wave, steps
    print(f"{args.steps} steps per run, seeds {', '.join(map(str, seeds))}; figures pooled over the seeds; "
          f"'over' is over_sampling_batch_size (fixed waves' size, adaptive waves' cap)")
    print(f"{'pool':<11}{'over':>5}  {'skip':<16}{'waves':<9}{'tokens/inf.grp':>15}{'vs off':>8}{'P(2nd)':>8}"
          f"{'aborted/step':>14}{'lost sig.':>10}{'return':>8}{'skipped':>9}")
    configs = pools(args.steps)
    measured = measure_pools(configs, seeds)
    for name, sizes in measured.items():
        for over, tuned, results, references in sizes:
            label = f"{name} at over_sampling_batch_size {over}" + (" (tune's)" if tuned else "")
            off = results["off", "fixed"].tokens_per_informative_group
            for (mode, waves), m in (results | references).items():
                ratio = off / m.tokens_per_informative_group
                ret = "-" if m.median_return_delay is None else f"{m.median_return_delay:.0f}"
                print(f"{name:<11}{over:>5}{'*' if tuned else ' '} {mode:<16}{waves:<9}"
                      f"{m.tokens_per_informative_group:>15,.0f}{ratio:>7.2f}x{m.second_wave_probability:>8.3f}"
                      f"{m.aborted_tokens_per_step:>14,.0f}{m.lost_signal:>10.3f}{ret:>8}{m.skipped_prompts:>9}")
            misses += _check(name, label, results, judge_second_waves=tuned)
            if tuned:
                for mode in MODES:
                    second_waves[0] += results[mode, "adaptive"].multi_wave_steps
                    second_waves[1] += results[mode, "adaptive"].steps
    print("* the over_sampling_batch_size `shopsim-metrics tune --from` recommends for the pool")
    pooled = second_waves[0] / second_waves[1]
    print(f"adaptive waves at tune's size, every pool and mode: P(second wave) {pooled:.3f} "
          f"over {second_waves[1]} steps")
    if pooled > SECOND_WAVE_TARGET:
        misses.append(f"adaptive waves at tune's size, pooled: P(second wave) {pooled:.3f} > {SECOND_WAVE_TARGET}")
    print(f"{time.perf_counter() - started:.0f} s")
    if (args.steps, args.seeds) == (DEFAULT_STEPS, DEFAULT_SEEDS):  # the figures the docs quote: the defaults' only
        results_file.update("bench_prompt_skip", figures_of(measured, (second_waves[0], second_waves[1])))
        print(f"figures written to {results_file.RESULTS.name} (bench_prompt_skip)")
    print("OK: every target met" if not misses else "MISS:\n  " + "\n  ".join(misses))
    return 1 if misses else 0


def _check(name: str, label: str, results: dict[tuple[str, str], SkipMeasure], *,
           judge_second_waves: bool) -> list[str]:
    misses = []
    off = results["off", "fixed"].tokens_per_informative_group
    within = {k: m for k, m in results.items() if m.lost_signal <= LOST_SIGNAL_LIMIT}
    best_key = min(within, key=lambda k: within[k].tokens_per_informative_group)
    best = off / results[best_key].tokens_per_informative_group
    target = BEST_DRIFTING_TARGET if name == "drifting" else EVERY_POOL_TARGET
    if best < target:
        misses.append(f"{label}: the best mode within a lost signal of {LOST_SIGNAL_LIMIT} ({'/'.join(best_key)}) is "
                      f"{best:.2f}x fewer tokens per informative group than off (target >= {target}x)")
    for waves in WAVES:
        predictive = results["predictive", waves]
        ratio = off / predictive.tokens_per_informative_group
        if ratio > 1.0 and predictive.lost_signal > LOST_SIGNAL_LIMIT:
            misses.append(f"{label}, {waves} waves: predictive saves {ratio:.2f}x at a lost signal of "
                          f"{predictive.lost_signal:.3f} > {LOST_SIGNAL_LIMIT}")
    for mode in MODES:
        fixed, adaptive = results[mode, "fixed"], results[mode, "adaptive"]
        error = math.sqrt(SECOND_WAVE_TARGET * (1 - SECOND_WAVE_TARGET) / adaptive.steps)
        if judge_second_waves and adaptive.second_wave_probability > SECOND_WAVE_TARGET + ONE_SIDED_95 * error:
            misses.append(f"{label}, {mode}: adaptive P(second wave) {adaptive.second_wave_probability:.3f} is "
                          f"significantly above {SECOND_WAVE_TARGET} (standard error {error:.3f})")
        if adaptive.aborted_tokens >= fixed.aborted_tokens and fixed.aborted_tokens:
            misses.append(f"{label}, {mode}: adaptive waves abort no fewer tokens than fixed "
                          f"({adaptive.aborted_tokens_per_step:,.0f} >= {fixed.aborted_tokens_per_step:,.0f} per step)")
    return misses


if __name__ == "__main__":
    sys.exit(main())
