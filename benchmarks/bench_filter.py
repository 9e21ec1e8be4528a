"""The filter's cost per group of 8 against slime's built-in filter, side by side in one process.

The baseline is this benchmark's own equivalent of slime's ``check_reward_nonzero_std`` (no slime
code is copied or imported): it reads each sample's reward (``Sample.get_reward_value``) and keeps
the group when the std of a float64 torch tensor of the rewards exceeds 1e-6, building slime's
``DynamicFilterOutput``. Ours is the real hook ``fully_scored_group_filter`` with the step
accountant (live loop state, no sinks), as a monitored run calls it.

The two run in alternating rounds (baseline, ours, baseline, ...) over the same 4,096 groups, so
both see the same machine load; the verdict is the median over rounds of ``ours / baseline``.
Target: <= 1.0 (the monitor's filter costs no more per group than the filter it replaces). Printed
beside it, without a target: the per-step close (ledger rows and record, once per 32 groups)
amortised per group.

Run: ``make bench``, or ``python benchmarks/bench_filter.py`` with the ``bench`` extra installed
(torch, for the baseline). ``BENCH_ROUNDS`` sets the rounds (default 21).
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from enum import Enum
from types import SimpleNamespace

from shopsim_metrics.simulator.samples import SimSample
from shopsim_metrics.step.loop_state import ManualLoopState
from shopsimrl import slime_runtime
from shopsimrl.slime_bridge import DynamicFilterOutput

GROUPS = 4096
GROUPS_PER_STEP = 32  # over_sampling_batch_size at the defaults
TARGET_RATIO = 1.0  # ours / slime's built-in filter, per group


class Status(Enum):
    """Statuses as slime's ``Sample.Status`` holds them: an Enum, read through ``.value``."""

    COMPLETED = "completed"


def make_groups(n_groups: int) -> list[list[SimSample]]:
    """Groups of 8: one in four zero-std (all 1.0), the others with spread."""
    groups = []
    for g in range(n_groups):
        rewards = [float(i % 2) for i in range(8)] if g % 4 else [1.0] * 8
        # as slime's default generate path leaves them: rollout_id None (the index identifies the rollout)
        groups.append([SimSample(index=g * 8 + i, group_index=g, rollout_id=None, reward=r,
                                 status=Status.COMPLETED) for i, r in enumerate(rewards)])
    return groups


def main() -> int:
    try:
        import torch
    except ImportError:
        print("torch is not installed: the baseline needs it (`make bench` installs the bench extra)")
        return 1
    torch.set_num_threads(1)
    groups = make_groups(GROUPS)
    args = SimpleNamespace(rollout_batch_size=16, n_samples_per_prompt=8, over_sampling_batch_size=GROUPS_PER_STEP,
                           global_batch_size=64, reward_key=None, shopsim_max_consecutive_failed_groups=8)
    state = ManualLoopState(source="bench")
    slime_runtime.configure(args, sinks=[], loop_state=state)
    hook = slime_runtime.fully_scored_group_filter

    def baseline() -> float:
        started = time.perf_counter()
        for group in groups:
            rewards = [sample.get_reward_value(args) for sample in group]
            keep = torch.tensor(rewards, dtype=torch.float64).std() > 1e-6  # a tensor, as slime keeps it
            DynamicFilterOutput(keep=keep, reason=None if keep else f"zero_std_{round(rewards[0], 1)}")
        return time.perf_counter() - started

    def ours() -> float:
        """The hook over every group, within one step; the step is closed afterwards, untimed."""
        state.step = None
        started = elapsed = 0.0
        for k in range(0, GROUPS, GROUPS_PER_STEP):
            state.remaining = max(16, 32 - k // GROUPS_PER_STEP)  # slime's loop moves it, outside the hook
            started = time.perf_counter()
            for group in groups[k:k + GROUPS_PER_STEP]:
                hook(args, group)
            elapsed += time.perf_counter() - started
        accountant = slime_runtime.get_runtime(args).accountant
        accountant.close_step()
        accountant.take_closed()
        return elapsed

    def with_close() -> float:
        """Steps of 32 groups each closed (ledger rows + record), everything timed."""
        accountant = slime_runtime.get_runtime(args).accountant
        started = time.perf_counter()
        for step in range(GROUPS // GROUPS_PER_STEP):
            state.step = step
            for i, group in enumerate(groups[step * GROUPS_PER_STEP:(step + 1) * GROUPS_PER_STEP]):
                state.remaining = 32 - (i % 16)
                hook(args, group)
            accountant.close_step()
            accountant.take_closed()
        return time.perf_counter() - started

    rounds = int(os.environ.get("BENCH_ROUNDS", "21"))
    baseline(), ours(), with_close()  # warm-up
    base_t, ours_t, close_t = [], [], []
    for _ in range(rounds):
        base_t.append(baseline())
        ours_t.append(ours())
        close_t.append(with_close())
    slime_runtime.reset_runtime()

    ratio = statistics.median(o / b for o, b in zip(ours_t, base_t))
    close_ratio = statistics.median(c / b for c, b in zip(close_t, base_t))
    per_group = {name: statistics.median(t) / GROUPS * 1e6 for name, t in
                 (("base", base_t), ("ours", ours_t), ("close", close_t))}
    ok = ratio <= TARGET_RATIO
    print(f"{GROUPS} groups of 8 per round, {rounds} rounds alternated; medians")
    print(f"  slime's built-in filter (equivalent: rewards -> float64 torch std): {per_group['base']:7.2f} us/group")
    print(f"  shopsim filter hook + accounting:                                   {per_group['ours']:7.2f} us/group")
    print(f"  ratio ours / built-in: {ratio:.2f}   target <= {TARGET_RATIO:.1f}   {'ok' if ok else 'MISSED'}")
    print(f"  (no target) with the per-step close amortised, one per {GROUPS_PER_STEP} groups: "
          f"{per_group['close']:.2f} us/group, ratio {close_ratio:.2f}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
