"""Runs slime's real ``generate_rollout_async`` with scripted generation and the project's hooks.

Run by tests/test_slime_integration.py in a subprocess (slime's import needs stubs for ray and
transformers, which slime's own contract tests provide). Several random multi-step runs: rollouts
that failed, aborted, have reward None / NaN / a dict without the reward key, fanned-out segments
that agree, lean on one scored segment or conflict, environment flags, float and dict rewards.

Prints one JSON object per step: what slime's loop returned (train batch, its drop counters), the
ground truth of every group slime handed to the all-samples hook (per rollout: scorable, reward,
success, as the scripted generator built it), and what the project recorded.

Usage: SLIME_SRC=/path/to/slime python tests/slime_real_loop_check.py RUN_DIR
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import random
import sys
from argparse import Namespace
from copy import copy
from pathlib import Path

SLIME_SRC = Path(os.environ["SLIME_SRC"])
sys.path[:0] = [str(SLIME_SRC / "tests" / "plugin_contracts"), str(SLIME_SRC)]

from _shared import install_stubs  # noqa: E402  (slime's own test helper, from the checkout)

install_stubs(with_sglang_router=True, with_transformers=True)

import slime.rollout.sglang_rollout as sr  # noqa: E402
from slime.rollout import sample_hooks  # noqa: E402
from slime.utils.types import Sample  # noqa: E402

from shopsim_metrics.readers import read_steps  # noqa: E402
from shopsimrl import slime_runtime  # noqa: E402

N = 8
POOL = 40  # prompts revisited within and across steps: metadata keys, plain text and chat messages


def prompt_of(pid: int) -> tuple[str, object, str | None, dict]:
    """(kind, Sample.prompt, Sample.label, Sample.metadata) of pool prompt ``pid``."""
    kind = ("metadata", "text", "chat")[pid % 3]
    if kind == "chat":
        prompt: object = [{"role": "system", "content": "shop"}, {"role": "user", "content": f"task {pid}"}]
    else:
        prompt = f"task {pid}"
    metadata = {"uid": f"item-{pid}"} if kind == "metadata" else {}
    return kind, prompt, f"label-{pid % 5}", metadata
REWARDS = (0.0, 0.25, 0.5, 1.0)  # dyadic: sums and means are exact, so records compare with ==
# what can go wrong with one rollout (weights: most rollouts are fine)
BAD_KINDS = ("failed", "aborted", "none", "nan", "missing_key", "conflict", "unscored", "bad_flag")
RUNS = (  # (seed, reward_key, fan-out share, steps, technical burst in step 0)
    (11, None, 0.0, 3, True),
    (12, "acc", 0.3, 3, False),
    (13, None, 0.5, 4, False),
    (14, "acc", 0.0, 3, False),
)


ROLLOUT_TIME = 0.1  # what the log function is told slime's rollout took


def capture_all_samples(args: Namespace, all_samples: list, data_source) -> None:
    """The all-samples hook slime loads: keeps slime's own list, then hands it to the project's hook."""
    args.captured_all_samples = all_samples
    slime_runtime.record_all_samples(args, all_samples, data_source)


class Script:
    """Decides every group's contents and remembers the truth of each rollout."""

    def __init__(self, seed: int, reward_key: str | None, fan_out: float, burst: bool) -> None:
        self.seed = seed
        self.rng = random.Random(seed)
        self.reward_key = reward_key
        self.fan_out = fan_out
        self.burst = burst
        self.truth: dict[int, list[list]] = {}  # group_index -> [scorable, reward, success] per rollout
        self.tokens: dict[int, list[int]] = {}  # group_index -> response tokens per rollout (all segments)

    def reward_value(self, value):
        return {self.reward_key: value, "format": 0.5} if self.reward_key else value

    def fill(self, group: list[Sample], step: int) -> list:
        gid = group[0].group_index
        # one generator per group: contents do not depend on the order in which groups finish
        self.rng = rng = random.Random(self.seed * 1_000_003 + gid)
        burst_step = self.burst and step == 0
        if burst_step and gid % 1000 < 20:  # a burst of technical groups: exactly a second wave
            plan = ["failed"] + ["ok"] * (N - 1) if gid % 2 == 0 or gid % 1000 < 12 else ["same"] * N
        elif not burst_step and rng.random() < 0.35:
            plan = ["ok"] * N
            for i in rng.sample(range(N), rng.randint(1, 3)):
                plan[i] = rng.choice(BAD_KINDS)
        else:
            plan = ["same"] * N if rng.random() < 0.4 else ["ok"] * N
        same = rng.choice(REWARDS)
        fanned = rng.random() < self.fan_out
        rollouts, truth = [], []
        for sample, kind in zip(group, plan):
            segments, fact = self.rollout(sample, kind, same, fanned)
            rollouts.append(segments if fanned else segments[0])
            truth.append(fact)
        self.truth[gid] = truth
        self.tokens[gid] = self.response_lengths(gid, rollouts)
        return rollouts

    def response_lengths(self, gid: int, rollouts: list) -> list[int]:
        """Give every segment its own scripted ``response_length``; the tokens of each rollout."""
        rng = random.Random(self.seed * 7_919 + gid)  # apart from the contents' generator
        tokens = []
        for item in rollouts:
            segments = item if isinstance(item, list) else [item]
            for segment in segments:
                segment.response_length = rng.randint(1, 4_000)
            tokens.append(sum(segment.response_length for segment in segments))
        return tokens

    def rollout(self, sample: Sample, kind: str, same: float, fanned: bool) -> tuple[list[Sample], list]:
        rng = self.rng
        if kind == "conflict" and not fanned:  # only segments can conflict
            kind = "none"
        value = same if kind == "same" else rng.choice(REWARDS)
        sample.status = rng.choice([Sample.Status.COMPLETED, Sample.Status.COMPLETED, Sample.Status.TRUNCATED])
        sample.reward = self.reward_value(value)
        sample.metadata = {}
        success = value >= 1.0
        if kind in ("ok", "same") and rng.random() < 0.15:  # the environment's own success flag
            flag = rng.choice([True, False, "true", "FALSE", 1, 0])
            sample.metadata = {"shopsim_success": flag}
            success = flag in (True, 1) or flag == "true"
        fact = [True, value, success]
        if kind == "failed":
            sample.status, sample.reward = Sample.Status.FAILED, self.reward_value(rng.choice([0.0, 1.0]))
        elif kind == "aborted":
            sample.status, sample.reward = Sample.Status.ABORTED, self.reward_value(0.0)
        elif kind == "none":
            sample.reward = None
        elif kind == "nan":
            sample.reward = self.reward_value(math.nan)
        elif kind == "missing_key":
            sample.reward = {"format": 1.0} if self.reward_key else "n/a"
        elif kind == "unscored":
            sample.metadata = {"shopsim_unscored": True}
        elif kind == "bad_flag":
            sample.metadata = {"shopsim_success": "yes"}
        if kind not in ("ok", "same"):
            fact = [False, None, None]
        if not fanned:
            return [sample], fact
        sample.rollout_id = sample.index
        segments = [sample] + [copy(sample) for _ in range(rng.randint(0, 2))]
        for segment in segments[1:]:
            segment.metadata = dict(sample.metadata)
            if kind in ("ok", "same") and rng.random() < 0.5:
                segment.reward = None  # leans on the scored segment
        if kind == "conflict" or (kind in ("ok", "same") and len(segments) > 1 and rng.random() < 0.1):
            extra = copy(sample)
            extra.metadata = dict(sample.metadata)
            extra.reward = self.reward_value(value + 0.5)
            segments.append(extra)
            fact = [False, None, None]
        return segments, fact


def run(run_index: int, run_dir: str, seed: int, reward_key: str | None, fan_out: float, steps: int,
        burst: bool) -> None:
    args = Namespace(
        rollout_global_dataset=True,
        rollout_batch_size=16,
        n_samples_per_prompt=N,
        over_sampling_batch_size=32,
        global_batch_size=64,
        reward_key=reward_key,
        partial_rollout=False,
        rollout_sample_filter_path=None,
        dynamic_sampling_filter_path="shopsimrl.slime_runtime.fully_scored_group_filter",
        rollout_all_samples_process_path="slime_real_loop_check.capture_all_samples",
        custom_rollout_log_function_path="shopsimrl.slime_runtime.log_rollout_step",
        shopsim_run_dir=run_dir,
        shopsim_max_consecutive_failed_groups=10**6,
        shopsim_wandb="off",
        shopsim_prompt_key="uid",
        use_wandb=False,
    )
    slime_runtime.reset_runtime()  # each run is its own process-wide runtime, as in a fresh launch
    # slime's GenerateState without its constructor (which loads a tokenizer); registered as the singleton
    state = object.__new__(sr.GenerateState)
    state.args = args
    state.sampling_params = {}
    state.reset()
    sr.GenerateState._instances[sr.GenerateState] = state
    script = Script(seed, reward_key, fan_out, burst)
    counter = {"next": 0}
    current = {"step": 0}

    def data_source(n: int) -> list[list[Sample]]:
        groups = []
        for _ in range(n):
            gid = counter["next"]
            counter["next"] += 1
            _, prompt, label, _ = prompt_of(gid % POOL)
            groups.append([Sample(index=gid * N + i, group_index=gid, prompt=prompt, label=label) for i in range(N)])
        return groups

    async def scripted_generate(args, group, sampling_params, evaluation=False):
        await asyncio.sleep(0.002 * (group[0].group_index % 6))  # models generation time: several groups per batch
        filled = script.fill(group, current["step"])
        uid = prompt_of(group[0].group_index % POOL)[3]
        for item in filled:  # the prompt's metadata key beside whatever flags the script set
            for sample in item if isinstance(item, list) else [item]:
                sample.metadata = {**sample.metadata, **uid}
        return filled

    async def scripted_abort(args, rollout_id):
        state = sr.GenerateState(args)
        state.aborted = True
        for task in state.pendings:
            task.cancel()
        await asyncio.gather(*state.pendings, return_exceptions=True)
        state.pendings = set()
        return []

    sr.generate_and_rm_group = scripted_generate
    sr.abort = scripted_abort

    for step in range(steps):
        current["step"] = step
        counter["next"] = step * 1000
        sample_hooks.set_current_rollout_id(step)
        output, _ = asyncio.run(sr.generate_rollout_async(args, step, data_source))
        flat = [s for group in output.samples for s in group]
        assert slime_runtime.log_rollout_step(step, args, flat, output.metrics, ROLLOUT_TIME) is False
        record = read_steps(run_dir)[-1]
        judged = [_group_index(group) for group in args.captured_all_samples]
        print(json.dumps({
            "run": run_index,
            "step": step,
            "slime_train_groups": sorted(_group_index(g) for g in output.samples),
            "slime_all_groups": sorted(judged),
            "slime_metrics": output.metrics,
            "truth": {str(gid): script.truth[gid] for gid in judged},
            "tokens": {str(gid): script.tokens[gid] for gid in judged},
            "rollout_time": ROLLOUT_TIME,
            "record": record.to_dict(),
            "prompts": {str(gid): prompt_of(gid % POOL) for gid in judged},
        }))


def _group_index(group: list) -> int:
    first = group[0][0] if isinstance(group[0], list) else group[0]
    return first.group_index


def main(run_dir: str) -> None:
    for index, (seed, reward_key, fan_out, steps, burst) in enumerate(RUNS):
        run(index, str(Path(run_dir) / f"run{index}"), seed, reward_key, fan_out, steps, burst)


if __name__ == "__main__":
    main(sys.argv[1])
