"""The monitor's own time per step against that step's simulated rollout time.

Real steps of the simulated slime loop (:mod:`shopsim_metrics.simulator`) go through the three real
hooks (filter, all-samples hook, log function), with the simulator's default latency model (a
group takes ``seconds_per_token`` x its slowest rollout's tokens, at most ``max_concurrent_groups``
generating at once) and prompt tracking on, as in a monitored run; the groups ask prompts of a finite
pool (``prompt_pool``), so the prompt history is visited and revisited.

Per step, the ratio is the record's own two figures: ``filter_seconds`` (the project's time inside
the three hooks, measured by the monitor around each hook; the sinks' writes are not in it) over
``rollout_seconds`` (the simulated seconds slime would report). Target: the median over the steps
< 0.1 %, at the defaults (16 kept of 32 groups x 8) and at 2048 groups x 16 (1024 kept). Printed
beside it: the mean (total over total) and the worst step, and the rollout time at which the
median own time would reach 0.1 %.

Run: ``python benchmarks/bench_monitoring_step.py`` (no sinks, no network).
"""

from __future__ import annotations

import logging
import statistics
import sys

from shopsim_metrics.simulator.config import SimConfig
from shopsim_metrics.simulator.loop import simulate

TARGET_FRACTION = 0.001  # filter_seconds / rollout_seconds, per step
CONFIGS = {  # label -> (SimConfig's slime knobs, steps)
    "defaults": (dict(), 1000),
    "2048 x 16": (dict(rollout_batch_size=1024, n_samples_per_prompt=16, over_sampling_batch_size=2048,
                       global_batch_size=4096), 40),
}


def run(knobs: dict, steps: int) -> dict:
    config = SimConfig(steps=steps, **knobs)
    config = config.with_(prompt_pool=8 * config.over_sampling_batch_size)
    records = [r for r in simulate(config).records if r.rollout_seconds]
    fractions = sorted(r.filter_seconds / r.rollout_seconds for r in records)
    own = sorted(r.filter_seconds for r in records)
    groups = statistics.median(r.accepted_group_count for r in records)
    return {
        "steps": len(records), "groups": groups,
        "median": statistics.median(fractions), "worst": fractions[-1],
        "mean": sum(own) / sum(r.rollout_seconds for r in records),
        "own_ms": statistics.median(own) * 1e3,
        "rollout_s": statistics.median(r.rollout_seconds for r in records),
    }


def main() -> int:
    logging.getLogger("shopsim_metrics").setLevel(logging.ERROR)  # technical-streak warnings of the draws
    ok = True
    print("per step: filter_seconds (the monitor's own time in the three hooks) / rollout_seconds (simulated, "
          "default latency model)")
    print(f"{'config':10} {'steps':>5} {'groups':>6} {'own':>9} {'rollout':>8} {'median':>8} {'mean':>8} "
          f"{'worst':>8} {'break-even':>10}  target")
    for label, (knobs, steps) in CONFIGS.items():
        r = run(knobs, steps)
        passed = r["median"] < TARGET_FRACTION
        ok &= passed
        print(f"{label:10} {r['steps']:5d} {r['groups']:6.0f} {r['own_ms']:7.2f}ms {r['rollout_s']:7.0f}s "
              f"{r['median']:8.4%} {r['mean']:8.4%} {r['worst']:8.4%} {r['own_ms'] / TARGET_FRACTION / 1e3:9.1f}s  "
              f"median < {TARGET_FRACTION:.1%}: {'ok' if passed else 'MISSED'}")
    print("groups: judged per step; own, rollout: medians per step; break-even: the rollout time at which the")
    print("median own time would be 0.1 %; the worst step includes Python's garbage collection when it runs in a hook")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
