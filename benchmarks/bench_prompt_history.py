"""Memory and speed of the per-prompt history at 1,000,000 tracked prompts.

Prompts are keyed as the monitor keys them without a metadata key: ``"b2:"`` + 15 hex digits of a
blake2b hash of the prompt, kept as a 60-bit int. Every prompt is visited through the public
``PromptHistory.visit`` (a third of them twice, interleaved, to exercise the update path), then the
history holds is measured (keys, records and the ordered dict together) as the growth of the
process's resident memory (``/proc/self/statm``; tracemalloc where that does not exist, slower), and
cross-checked with ``sys.getsizeof`` of the dict, its keys and its records.
A second history, full at a smaller limit, measures eviction. Target: <= 400 bytes per prompt
(a million prompts then hold at most 400 MB).

Without a target, side by side: the cost the prompt-value fields add when a step closes (key every group from its
prompt and label, visit the history) against the filter hook's own cost per judged group, at the
scale configuration (2048 groups of 16 rollouts with chat prompts).

Run: ``python benchmarks/bench_prompt_history.py``
"""

from __future__ import annotations

import gc
import sys
import time
import os
import tracemalloc

from shopsim_metrics.judging.verdicts import VERDICTS
from shopsim_metrics.prompts.history import PromptHistory
from shopsim_metrics.judging.prompt_keys import hash_prompt, history_key

PROMPTS = 1_000_000
TARGET_BYTES = 400


def _resident_bytes() -> int:
    with open("/proc/self/statm", encoding="ascii") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _traced_bytes() -> int:
    if not tracemalloc.is_tracing():
        tracemalloc.start()
    return tracemalloc.get_traced_memory()[0]


def step_cost(groups_per_step: int = 2048, n: int = 16, steps: int = 5) -> tuple[float, float]:
    """Seconds per judged group: (filter hook with accounting, prompt-value annotation at step close)."""
    from types import SimpleNamespace

    from shopsim_metrics.loop.loop_state import ManualLoopState
    from shopsim_metrics.prompts.value import PromptValueTracker
    from shopsim_metrics.record.records import DecisionRow
    from shopsim_metrics.simulator.samples import SimSample
    from shopsimrl import slime_runtime

    groups = []
    for g in range(groups_per_step):
        prompt = [{"role": "system", "content": "You are a shopping agent."},
                  {"role": "user", "content": f"shopping task {g % 1500}: find a pair of running shoes under 80 EUR"}]
        rewards = [float(i % 2) for i in range(n)] if g % 3 else [1.0] * n
        groups.append([SimSample(index=g * n + i, group_index=g, reward=r, prompt=prompt, label=str(g % 1500))
                       for i, r in enumerate(rewards)])
    args = SimpleNamespace(rollout_batch_size=1024, n_samples_per_prompt=n, over_sampling_batch_size=2048,
                           global_batch_size=4096, reward_key=None)
    state = ManualLoopState(source="bench")
    slime_runtime.configure(args, sinks=[], loop_state=state)
    filt = slime_runtime.fully_scored_group_filter
    tracker = PromptValueTracker()
    filter_s = annotate_s = 0.0
    for step in range(steps):
        state.step, state.remaining = step, 4096
        t0 = time.perf_counter()
        for group in groups:
            filt(args, group)
        filter_s += time.perf_counter() - t0
        rows = [DecisionRow(order=i + 1, waves_open=1, group_index=i, outcome="trained",
                            reason=None if i % 3 else "shopsim_zero_std_group", remaining_before=1, unique_rollouts=n,
                            success_count=n, scorable_rollouts=n) for i in range(len(groups))]
        t0 = time.perf_counter()
        keyed = tracker.keys(groups)  # what the accountant does as it closes a step
        for row, (key, _) in zip(rows, keyed):
            row.prompt_key = key
        tracker.step_fields(step, rows, generated_token_count=None, sources={source for _, source in keyed})
        annotate_s += time.perf_counter() - t0
    slime_runtime.reset_runtime()
    judged = steps * groups_per_step
    return filter_s / judged, annotate_s / judged


def main() -> int:
    keys = [hash_prompt(f"prompt {i}", str(i % 7)) for i in range(PROMPTS)]  # ledger text, built outside
    gc.collect()
    measure = _resident_bytes if os.path.exists("/proc/self/statm") else _traced_bytes
    before = measure()
    history = PromptHistory(limit=PROMPTS)
    t0 = time.perf_counter()
    for i, key in enumerate(keys):
        history.visit(history_key(key), VERDICTS[i % 5], 300 + i % 500)
        if i % 3 == 2:  # revisit an earlier prompt
            history.visit(history_key(keys[i // 2]), VERDICTS[(i + 1) % 5], 300)
    seconds = time.perf_counter() - t0
    gc.collect()
    held = measure() - before
    visits = PROMPTS + PROMPTS // 3
    per_prompt = held / len(history)
    records = history._records  # the store itself, for the cross-check
    structural = sys.getsizeof(records) + sum(sys.getsizeof(k) + sys.getsizeof(v) for k, v in records.items())

    small = PromptHistory(limit=PROMPTS // 10)
    t0 = time.perf_counter()
    for i, key in enumerate(keys):
        small.visit(history_key(key), VERDICTS[i % 5], 300)
    evict_seconds = time.perf_counter() - t0
    t0 = time.perf_counter()
    top = history.most_wasted(50)
    top_seconds = time.perf_counter() - t0

    filter_per_group, annotate_per_group = step_cost()
    ok = per_prompt <= TARGET_BYTES and len(history) == PROMPTS and small.evicted == PROMPTS - PROMPTS // 10
    print(f"prompt history: {len(history):,} prompts tracked, {held / 2**20:.1f} MiB held")
    print(f"bytes/prompt: {per_prompt:.1f}   target <= {TARGET_BYTES}   ratio to target {per_prompt / TARGET_BYTES:.2f}   "
          f"{'ok' if per_prompt <= TARGET_BYTES else 'MISSED'}; "
          f"sys.getsizeof of dict + keys + records: {structural / len(history):.1f}")
    print(f"visit (hash key text -> int, update, recency): {seconds / visits * 1e6:.2f} us per visit")
    print(f"with eviction (limit {small.limit:,}): {evict_seconds / PROMPTS * 1e6:.2f} us per visit, "
          f"{small.evicted:,} evicted")
    print(f"prompts table (50 most wasted of {len(history):,}): {top_seconds * 1e3:.0f} ms; top key {top[0].key}")
    print(f"per judged group (2048 groups of 16, chat prompts): filter hook {filter_per_group * 1e6:.1f} us, "
          f"prompt key + history at step close {annotate_per_group * 1e6:.1f} us "
          f"(ratio {annotate_per_group / filter_per_group:.2f}); per scale step: "
          f"{annotate_per_group * 2048 * 1e3:.1f} ms")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
