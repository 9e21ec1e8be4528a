"""Loads the hooks in a fresh interpreter under a stand-in slime or miles, and drives them as that loop would.

Run by tests/test_loops.py in a subprocess (the loop is decided once, when the hooks are loaded, so each loop
needs its own interpreter). ``FAKES`` is a directory of tiny stand-in packages the test wrote, each to the
contract read from that framework's source (never a copy of it): ``slime`` (its ``DynamicFilterOutput`` with
``keep_when_insufficient``), ``miles`` (its ``DynamicFilterOutput`` with ``keep`` and ``reason`` only, its
``call_dynamic_filter`` that wraps any other answer as ``keep``, its old rollout's ``GenerateState``
singleton, its ``load_generate_function``).

Usage: python tests/loop_check.py FAKES LOOP SCENARIO RUN_DIR
- LOOP: which stand-ins are imported before the hooks (``slime``, ``miles``, ``both``, ``none``: neither on the
  path, ``unimported``: both on the path, neither imported);
- SCENARIO: ``load`` (which loop and output class the hooks see), ``refuse`` (a miles launch the hooks
  cannot honour), ``steps-new`` / ``steps-old`` (steps of miles' class-based / old rollout: groups with and
  without spread finishing in random batches, an all-zero-std step, tokens counted by the generate wrapper).
Prints one JSON object.
"""

from __future__ import annotations

import asyncio
import importlib
import json
import random
import sys
from collections import Counter
from types import SimpleNamespace

FAKES, LOOP, SCENARIO, RUN_DIR = sys.argv[1:5]
if LOOP != "none":  # "unimported": both on the path, neither imported
    sys.path.insert(0, FAKES)
for name in {"both": ("slime", "miles"), "none": (), "unimported": ()}.get(LOOP, (LOOP,)):
    importlib.import_module(name)  # the loop that loads the hooks has imported its own package


def load() -> dict:
    try:
        from shopsimrl import slime_runtime
    except ImportError as exc:
        return {"error": str(exc)}
    args = SimpleNamespace(n_samples_per_prompt=2, reward_key=None, shopsim_run_dir=RUN_DIR)
    out = slime_runtime.fully_scored_group_filter(args, [Sample(0, 0, 1.0), Sample(1, 0, 1.0)])
    return {"loop": slime_runtime.LOOP, "output_module": type(out).__module__,
            "fields": sorted(vars(out)), "keep": out.keep, "reason": out.reason}


class Sample:
    """The attributes of a rollout sample the hooks read."""

    def __init__(self, index: int, group_index: int, reward: float, response_length: int = 3,
                 status: str = "completed") -> None:
        self.index, self.group_index, self.reward = index, group_index, reward
        self.response_length, self.status, self.metadata, self.rollout_id = response_length, status, {}, None

    def get_reward_value(self, args):
        return self.reward


def args_for(**extra) -> SimpleNamespace:
    base = dict(rollout_batch_size=4, n_samples_per_prompt=2, over_sampling_batch_size=6, global_batch_size=8,
                reward_key=None, shopsim_run_dir=RUN_DIR, shopsim_wandb=False, start_rollout_id=0, num_rollout=None)
    base.update(extra)
    return SimpleNamespace(**base)


def refuse() -> dict:
    from shopsimrl import slime_runtime

    lines = {}
    for name, extra in (("fully_async", dict(fully_async=True)),
                        ("sample_granularity", dict(rollout_submission_granularity="sample")),
                        ("prompt_skip", dict(shopsim_prompt_skip="greso"))):
        try:
            slime_runtime.fully_scored_group_filter(args_for(**extra), [Sample(0, 0, 1.0), Sample(1, 0, 0.0)])
            lines[name] = None
        except Exception as exc:  # noqa: BLE001 - the refusal is what is checked
            lines[name] = f"{type(exc).__name__}: {exc}"
        slime_runtime.reset_runtime()
    from shopsimrl import async_rollout, data_source
    for name, call in (("async_rollout", lambda: async_rollout.generate_rollout_fully_async(
                            args_for(rollout_function_path=async_rollout.__name__ + ".generate_rollout_fully_async"),
                            0, object())),
                       ("data_source", lambda: data_source.PromptSkipDataSource(args_for()))):
        try:
            call()
            lines[name] = None
        except Exception as exc:  # noqa: BLE001
            lines[name] = f"{type(exc).__name__}: {exc}"
    return lines


def steps(old: bool) -> dict:
    """Steps of a stand-in of miles' loop (group-level submission): waves of over_sampling_batch_size groups while
    the pending groups cannot fill what the batch still needs (the old rollout: while remaining_batch_size <
    rollout_batch_size, its GenerateState counting), finished groups judged in random batches, kept ones trained
    while the batch has room; then the all-samples hook, then the log function, as miles calls them."""
    from miles.rollout.filter_hub.base_types import call_dynamic_filter

    from shopsim_metrics.readers import read_steps
    from shopsimrl import miles_generate, slime_runtime

    rng = random.Random(7)
    args = args_for()
    target, over, n = args.rollout_batch_size, args.over_sampling_batch_size, args.n_samples_per_prompt
    if old:
        import miles.rollout.sglang_rollout as old_rollout
        state = old_rollout.GenerateState(args)
    else:
        state = SimpleNamespace(args=args)
    served = 0
    truth = []

    async def generate(sample):  # miles calls the generate function once per sample that starts
        out = await miles_generate.count_generated_tokens(SimpleNamespace(state=state, sample=sample, evaluation=False,
                                                                          sampling_params={}))
        return out.samples

    def draw(kind: str) -> list:
        nonlocal served
        groups = []
        for _ in range(over):
            g = served
            served += 1
            spread = kind == "mixed" and rng.random() < 0.4
            rewards = [float(i % 2) for i in range(n)] if spread else [float(rng.random() < 0.5)] * n
            groups.append([Sample(g * n + i, g, r, response_length=2 + i) for i, r in enumerate(rewards)])
        return groups

    for rollout_id, kind in enumerate(["mixed", "mixed", "all_zero_std", "mixed"]):
        pending, data, judged, dropped, drops, waves = [], [], [], [], Counter(), 0
        if old:
            state.remaining_batch_size = 0
        while len(data) < target:
            while (state.remaining_batch_size < target) if old else (len(pending) < target - len(data)):
                pending += draw(kind)
                waves += 1
                if old:
                    state.remaining_batch_size += over
                if waves > 50:
                    return {"error": f"step {rollout_id} did not end after 50 waves"}
            rng.shuffle(pending)
            size = rng.randint(1, 3)
            batch, pending = pending[:size], pending[size:]
            for group in batch:
                for sample in group:
                    asyncio.run(generate(sample))
                judged.append(group)
                output = call_dynamic_filter(slime_runtime.fully_scored_group_filter, args, group)
                if not output.keep:
                    drops[output.reason] += 1
                    dropped.append(group[0].group_index)
                    if old:
                        state.remaining_batch_size -= 1
                    continue
                if len(data) < target:
                    data.append(group)
        for group in pending:  # aborted at the step's end: generated up to the abort, never judged
            for sample in group[:1]:
                sample.status, sample.response_length = "aborted", 1
                asyncio.run(generate(sample))
        if old:
            state.remaining_batch_size = 0  # miles' reset
        slime_runtime.record_all_samples(args, judged, object())
        metrics = {f"rollout/dynamic_filter/drop_{reason}": count for reason, count in drops.items()}
        slime_runtime.log_rollout_step(rollout_id, args, [s for g in data for s in g], metrics, 1.0)
        truth.append({"rollout_id": rollout_id, "trained": sorted(g[0].group_index for g in data),
                      "dropped": sorted(dropped),
                      "drops": dict(drops), "waves": waves, "submitted": waves * over,
                      "tokens": sum(s.response_length for g in judged for s in g) + len(pending)})
    slime_runtime.reset_runtime()
    records = [r.to_dict() for r in read_steps(RUN_DIR)]
    return {"truth": truth, "records": [
        {"rollout_id": r["rollout_id"], "loop_state_source": r["loop_state_source"],
         "trained": sorted(d["group_index"] for d in r["decisions"] if d["outcome"] in ("trained", "fallback")),
         "dropped": sorted(d["group_index"] for d in r["decisions"] if d["outcome"].startswith("dropped")),
         "fallback": r["fallback_group_count"], "wave_count": r["wave_count"],
         "submitted": r["submitted_group_count"], "slime_drop_counts": r["slime_drop_counts"],
         "total_token_count": r["total_token_count"], "token_count_source": r.get("token_count_source"),
         "keys": sorted(r)} for r in records]}


if __name__ == "__main__":
    result = {"load": load, "refuse": refuse, "steps-new": lambda: steps(False),
              "steps-old": lambda: steps(True)}[SCENARIO]()
    print(json.dumps(result))
