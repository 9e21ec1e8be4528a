"""The data source's time per wave, adaptive against fixed, as a share of the step's rollout time.

With ``shopsim_wave_size: adaptive`` slime's data source sizes every wave before it serves it
(:mod:`shopsim_metrics.waves.wave_size`), on slime's rollout thread, while the engines wait for the wave.
Here the demo's simulated run (:func:`~shopsim_metrics.simulator.demo.demo_config`: a policy that starts
weak, many zero-std groups, one burst of technical failures) is scaled to ``rollout_batch_size`` 64, 256
and 1,024 with 8 and 16 samples per prompt (``over_sampling_batch_size`` twice the batch, the cap), and
run twice side by side through the project's real data source
(:class:`~shopsim_metrics.prompts.data_source.PromptSkipDataSource`, the class slime loads as
``shopsimrl.data_source.PromptSkipDataSource``): fixed waves and adaptive ones. Every ``get_samples`` call is timed; per wave, its time over
its step's simulated rollout time (:attr:`~shopsim_metrics.simulator.loop.StepOutcome.rollout_time`,
the simulator's default latency model). Waves are counted from the step after the recent window is
full (8 closed steps), when sizing replays all 8 orders. Target: the worst adaptive wave < 0.1 % at
every size. Printed beside it: the median wave and the data source's time in ms.

Run: ``python benchmarks/bench_wave_sizing.py [--steps 14]`` (no sinks, no network).
"""

from __future__ import annotations

import argparse
import logging
import statistics
import sys
import time
from typing import Any

from shopsim_metrics.simulator.data_sources import project_data_source
from shopsim_metrics.simulator.demo import demo_config
from shopsim_metrics.simulator.epochs import PoolDataSource
from shopsim_metrics.simulator.loop import Simulator, StepOutcome, make_group_source, rng_streams, token_rng
from shopsim_metrics.simulator.token_model import TokenModel
from shopsim_metrics.waves.wave_size import RECENT_WINDOW

TARGET_FRACTION = 0.001  # the data source's time per wave / its step's rollout time
SIZES = [(64, 8), (64, 16), (256, 8), (256, 16), (1024, 8), (1024, 16)]


def run(rollout_batch_size: int, n: int, wave_size: str, steps: int) -> dict[str, Any]:
    """One simulated run through the project's data source; per wave, (seconds, its step's rollout seconds)."""
    config = demo_config(steps=steps, wave_size=wave_size).with_(
        rollout_batch_size=rollout_batch_size, n_samples_per_prompt=n,
        over_sampling_batch_size=2 * rollout_batch_size, global_batch_size=rollout_batch_size * n // 4,
        prompt_pool=16 * rollout_batch_size)
    _, reward_rng, _ = rng_streams(config.seed)  # the streams Simulator.run draws: the same run
    source = make_group_source(config, reward_rng, TokenModel.from_config(config, token_rng(config.seed)))
    if source.data_source is None:  # fixed waves: the loop asks the same data source, which serves what it is asked
        source.data_source = project_data_source(config, PoolDataSource(source))
    data_source = source.data_source
    serve, calls, waves = data_source.get_samples, [], []

    def timed(num_samples: int) -> list:
        started = time.perf_counter()
        served = serve(num_samples)
        calls.append(time.perf_counter() - started)
        return served

    def step_done(outcome: StepOutcome) -> None:
        if outcome.rollout_id > RECENT_WINDOW:
            waves.extend((seconds, outcome.rollout_time) for seconds in calls)
        calls.clear()

    data_source.get_samples = timed
    result = Simulator(config, sinks=[], source=source).run(progress=step_done)
    fractions = sorted(seconds / rollout for seconds, rollout in waves)
    return {"waves": len(waves), "median": statistics.median(fractions), "worst": fractions[-1],
            "ms": statistics.median(seconds for seconds, _ in waves) * 1e3,
            "worst_ms": max(seconds for seconds, _ in waves) * 1e3,
            "rollout_s": statistics.median(o.rollout_time for o in result.outcomes[RECENT_WINDOW + 1:]),
            "groups": statistics.median(o.submitted for o in result.outcomes[RECENT_WINDOW + 1:])}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)
    parser.add_argument("--steps", type=int, default=RECENT_WINDOW + 6)
    options = parser.parse_args()
    logging.getLogger("shopsim_metrics").setLevel(logging.ERROR)  # the demo's burst alerts
    ok = True
    print("per wave: the data source's time (get_samples) / its step's simulated rollout time; "
          f"steps {RECENT_WINDOW + 1}-{options.steps - 1} of the demo's run scaled")
    print(f"{'batch x n':>10} {'rollout':>8} {'groups':>6} | {'fixed ms':>8} {'median':>8} | {'adaptive ms':>11} "
          f"{'worst ms':>8} {'median':>8} {'worst':>8}  target")
    for rollout_batch_size, n in SIZES:
        fixed = run(rollout_batch_size, n, "fixed", options.steps)
        adaptive = run(rollout_batch_size, n, "adaptive", options.steps)
        passed = adaptive["worst"] < TARGET_FRACTION
        ok &= passed
        print(f"{rollout_batch_size:>5} x {n:<2} {adaptive['rollout_s']:7.0f}s {adaptive['groups']:6.0f} | "
              f"{fixed['ms']:8.2f} {fixed['median']:8.4%} | {adaptive['ms']:11.2f} {adaptive['worst_ms']:8.2f} "
              f"{adaptive['median']:8.4%} {adaptive['worst']:8.4%}  worst < {TARGET_FRACTION:.1%}: "
              f"{'ok' if passed else 'MISSED'}")
    print("rollout, groups: the adaptive run's medians per step (simulated seconds; groups submitted); ms: medians "
          "per wave but 'worst ms'")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
