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

An agent episode: the sample hook (loaded by dotted path, as slime loads it) reads each episode's
``loss_mask`` once. Measured side by side on one 16-turn episode of 256 generated tokens per turn (64 tool
tokens between turns), on a 1-turn episode with a mask of the same length, and on a single-turn sample
without a mask: the hook's time per episode against the episode's generation time in the simulator's default
latency model (``seconds_per_token`` x generated tokens, the environment's time not even counted). Target:
< 0.1 %, and the 16-turn episode within 2x of the 1-turn one (one pass over the mask, whatever the turns).

An agent step with tools: 32 groups x 8 episodes of 16 turns with 16 tool calls each (16 entries of
``metadata["shopsim_tool_calls"]`` per episode, one in ten failed, some by the model): the sample hook on every
episode (it reads the list once), then the step's close as the accountant makes it (the hook's tally taken, the
per-group counts of the ledger, the record's tool fields). Their time against the step's rollout time in the
simulator's default latency model (every group generating at once: the slowest episode's generation,
``seconds_per_token`` x its tokens, the environment's time not even counted). Target: < 0.1 %; printed beside
it, the same step whose episodes leave no list (alternating, step by step: the difference is the tools' part), and
the same step with 16 tool calls in every turn (256 per episode; shown, not judged).

Run: ``python benchmarks/bench_monitoring_step.py`` (no sinks, no network).
"""

from __future__ import annotations

import logging
import statistics
import sys
import time
from types import SimpleNamespace

from shopsim_metrics.simulator.config import SimConfig
from shopsim_metrics.simulator.loop import simulate
from shopsim_metrics.simulator.samples import SimSample
from shopsim_metrics.settings.preflight import load_function
from shopsim_metrics.record.contract import SAMPLE_HOOK_PATH
from shopsimrl.slime_runtime import configure, get_runtime, reset_runtime

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
    ok &= agent_episode()
    ok &= tool_step(TURNS)
    tool_step(TURNS * 16, judged=False)
    return 0 if ok else 1


TURNS, TURN_TOKENS, TOOL_TOKENS = 16, 256, 64
GROWTH_LIMIT = 2.0
"""The 16-turn episode's hook time over a 1-turn episode's with a mask as long: one pass, not a pass per turn."""


def agent_episode(rounds: int = 2000) -> bool:
    """The sample hook's time per episode, 16 turns against one, and against the episode's generation time."""
    mask: list[int] = []
    for turn in range(TURNS):
        mask += [1] * TURN_TOKENS + ([0] * TOOL_TOKENS if turn < TURNS - 1 else [])
    one_turn = [1] * (TURNS * TURN_TOKENS) + [0] * (len(mask) - TURNS * TURN_TOKENS)
    samples = {
        "16 turns": SimSample(index=0, rollout_id=0, response_length=len(mask), loss_mask=mask, non_generation_time=3.0),
        "1 turn": SimSample(index=1, rollout_id=1, response_length=len(mask), loss_mask=one_turn, non_generation_time=3.0),
        "no mask": SimSample(index=2, rollout_id=2, response_length=TURNS * TURN_TOKENS),
    }
    hook = load_function(SAMPLE_HOOK_PATH)
    args = SimpleNamespace(rollout_batch_size=1, n_samples_per_prompt=1)
    configure(args, sinks=[])
    try:
        times: dict[str, list[float]] = {label: [] for label in samples}
        for step in range(rounds):  # side by side, alternating, so all see the same machine
            for label, sample in samples.items():
                start = time.perf_counter()
                hook(args, sample, rollout_id=step)
                times[label].append(time.perf_counter() - start)
            if step % 100 == 99:  # a step closes as in a run: the tally forgets the steps taken
                get_runtime(args).parts.accountant.tokens.take(step, [])
    finally:
        reset_runtime()
    agent, single, plain = (statistics.median(times[label]) for label in samples)
    generation = SimConfig().seconds_per_token * TURNS * TURN_TOKENS
    fraction, growth = agent / generation, agent / single
    passed = fraction < TARGET_FRACTION and growth < GROWTH_LIMIT
    print(f"agent episode ({TURNS} turns x {TURN_TOKENS} tokens, {TOOL_TOKENS} tool tokens between): sample hook "
          f"{agent * 1e6:.1f} us per episode, {single * 1e6:.1f} us for 1 turn with as long a mask ({growth:.2f}x, "
          f"< {GROWTH_LIMIT:.0f}x), {plain * 1e6:.1f} us without a mask; {fraction:.5%} of the episode's "
          f"{generation:.1f} s of generation (< {TARGET_FRACTION:.1%}): {'ok' if passed else 'MISSED'}")
    return passed


GROUPS, EPISODES_PER_GROUP = 32, 8
TOOL_NAMES = ("search_products", "view_item", "add_to_cart", "check_out", "recommend", "compare", "reviews", "stock")


def tool_step(tool_calls: int, steps: int = 12, judged: bool = True) -> bool:
    """One agent step's hooks and close with ``tool_calls`` per episode against the step's generation time; each step
    alternates with the same step whose episodes leave no list (the difference is what reading the tools costs)."""
    from shopsim_metrics.step.generated_tokens import group_tool_counts
    from shopsim_metrics.step.tool_fields import tool_fields

    mask: list[int] = []
    for turn in range(TURNS):
        mask += [1] * TURN_TOKENS + ([0] * TOOL_TOKENS if turn < TURNS - 1 else [])
    calls = [{"name": TOOL_NAMES[i % len(TOOL_NAMES)], "seconds": 0.05 + (i % 7) * 0.01, "ok": i % 10 != 0,
              **({"kind": "model", "error": "UnknownItem: sku-1"} if i % 20 == 0 else {})}
             for i in range(tool_calls)]
    hook = load_function(SAMPLE_HOOK_PATH)
    args = SimpleNamespace(rollout_batch_size=1, n_samples_per_prompt=1)
    configure(args, sinks=[])
    own: dict[bool, list[float]] = {True: [], False: []}
    try:
        tokens = get_runtime(args).accountant.tokens
        for step in range(2 * steps):
            listed = step % 2 == 0
            metadata = {"round_number": TURNS, **({"shopsim_tool_calls": calls} if listed else {})}
            groups = [[SimSample(index=g * EPISODES_PER_GROUP + e, rollout_id=g * EPISODES_PER_GROUP + e,
                                 response_length=len(mask), loss_mask=mask, non_generation_time=3.0,
                                 metadata=dict(metadata)) for e in range(EPISODES_PER_GROUP)] for g in range(GROUPS)]
            start = time.perf_counter()
            for group in groups:
                for sample in group:
                    hook(args, sample, rollout_id=step)
            live = tokens.take(step, groups)
            for group in groups:
                group_tool_counts(group, live.by_sample)
            tool_fields(live.tools)
            own[listed].append(time.perf_counter() - start)
    finally:
        reset_runtime()
    generation = SimConfig().seconds_per_token * TURNS * TURN_TOKENS
    with_list, without = statistics.median(own[True]), statistics.median(own[False])
    fraction = with_list / generation
    passed = fraction < TARGET_FRACTION
    verdict = f"(< {TARGET_FRACTION:.1%}): {'ok' if passed else 'MISSED'}" if judged else "(shown, not judged)"
    print(f"agent step with tools ({GROUPS} groups x {EPISODES_PER_GROUP} episodes of {TURNS} turns, {tool_calls} "
          f"tool calls each): {with_list * 1e3:.1f} ms per step (hooks and close), {fraction:.4%} of the step's "
          f"{generation:.1f} s of generation {verdict}; the same step without lists {without * 1e3:.1f} ms: the "
          f"tools' part {(with_list - without) * 1e3:.1f} ms ({(with_list - without) / generation:.4%})")
    return passed


if __name__ == "__main__":
    sys.exit(main())
