"""Skipping prompts before generation (GRESO's rule through ``shopsimrl``'s data source), late in training.

The simulated pool is one where most prompts are zero-std at most visits, as GRESO reports for late
training: difficulties spread far around a skill that no longer moves, so most prompts stay all-pass
or all-fail visit after visit (about three quarters of judged groups are zero-std without skipping),
a band of prompts near the skill carries the signal, and difficulties drift slowly. The same config runs without
and with ``prompt_skip: greso`` (GRESO's published settings), through the real hooks and the real
data source, side by side in one process. Targets:

- generated tokens per informative trained group (outcome ``trained``, not ``fallback``) at least 2x
  lower with skipping;
- no lower share of informative groups in the train batch;
- no more waves per step.

Run: ``python benchmarks/bench_prompt_skip.py`` (prints the figures; exit 1 on a miss).
"""

from __future__ import annotations

import sys
import time

from shopsim_metrics.simulator.config import SimConfig
from shopsim_metrics.simulator.skip_saving import compare_skipping, format_saving

TOKEN_RATIO_TARGET = 2.0
LATE_TRAINING = SimConfig(
    steps=300,
    seed=0,
    prompt_pool=512,
    skill_start=1.0,
    skill_end=1.0,  # late training: the learning curve has flattened
    difficulty_spread=8.0,
    difficulty_drift=0.02,
    partial_credit_rate=0.0,
    technical_rate=0.0,
)


def main() -> int:
    started = time.perf_counter()
    saving = compare_skipping(LATE_TRAINING)
    seconds = time.perf_counter() - started
    off, greso = saving.off, saving.greso
    print(format_saving(saving, LATE_TRAINING.over_sampling_batch_size))
    print(f"pool of {LATE_TRAINING.prompt_pool} prompts, {LATE_TRAINING.steps} steps per run; zero-std share of "
          f"judged groups {off.zero_std_share:.2f} without skipping, {greso.zero_std_share:.2f} with; {seconds:.1f} s")
    misses = []
    ratio = saving.token_ratio or 0.0
    if ratio < TOKEN_RATIO_TARGET:
        misses.append(f"tokens per informative group only {ratio:.2f}x lower (target >= {TOKEN_RATIO_TARGET}x)")
    if (greso.informative_share or 0.0) < (off.informative_share or 0.0):
        misses.append(f"informative share fell: {greso.informative_share:.3f} < {off.informative_share:.3f}")
    if (greso.waves_per_step or 0.0) > (off.waves_per_step or 0.0):
        misses.append(f"more waves per step: {greso.waves_per_step:.2f} > {off.waves_per_step:.2f}")
    print(f"tokens per informative trained group, off / greso: {ratio:.2f}x (target >= {TOKEN_RATIO_TARGET}x): "
          + ("OK" if not misses else "MISS: " + "; ".join(misses)))
    return 1 if misses else 0


if __name__ == "__main__":
    sys.exit(main())
