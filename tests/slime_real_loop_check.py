"""Runs slime's real ``generate_rollout_async`` with scripted generation and the project's hooks.

Run by tests/test_slime_integration.py in a subprocess (slime's import needs stubs for ray and
transformers, which slime's own contract tests provide). Prints one JSON object per step: what
slime's loop returned (train batch, its drop counters) and what the project recorded.

Usage: SLIME_SRC=/path/to/slime python tests/slime_real_loop_check.py RUN_DIR
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from argparse import Namespace
from pathlib import Path

SLIME_SRC = Path(os.environ["SLIME_SRC"])
sys.path[:0] = [str(SLIME_SRC / "tests" / "plugin_contracts"), str(SLIME_SRC)]

from _shared import install_stubs  # noqa: E402  (slime's own test helper, from the checkout)

install_stubs(with_sglang_router=True, with_transformers=True)

import slime.rollout.sglang_rollout as sr  # noqa: E402
from slime.rollout import sample_hooks  # noqa: E402
from slime.utils.types import Sample  # noqa: E402

from shopsim_metrics.sinks import read_steps  # noqa: E402

N = 8


def kind_of(group_id: int, step: int) -> str:
    """Scripted rewards: step 0 has a technical burst that opens a second wave."""
    if step == 0 and group_id < 20:
        return "technical" if group_id % 2 == 0 or group_id < 12 else "zero"
    return ("spread", "zero", "spread", "zero", "spread")[group_id % 5]


def delay_of(group_id: int) -> float:
    return 0.002 * (group_id % 6)  # equal delays finish together: several groups per batch


def main(run_dir: str) -> None:
    args = Namespace(
        rollout_global_dataset=True,
        rollout_batch_size=16,
        n_samples_per_prompt=N,
        over_sampling_batch_size=32,
        global_batch_size=64,
        reward_key=None,
        partial_rollout=False,
        rollout_sample_filter_path=None,
        dynamic_sampling_filter_path="shopsimrl.slime_runtime.fully_scored_group_filter",
        rollout_all_samples_process_path="shopsimrl.slime_runtime.record_all_samples",
        custom_rollout_log_function_path="shopsimrl.slime_runtime.log_rollout_step",
        shopsim_run_dir=run_dir,
        shopsim_max_consecutive_failed_groups=64,
        shopsim_wandb="off",
        use_wandb=False,
    )
    # slime's GenerateState without its constructor (which loads a tokenizer); registered as the singleton
    state = object.__new__(sr.GenerateState)
    state.args = args
    state.sampling_params = {}
    state.reset()
    sr.GenerateState._instances[sr.GenerateState] = state

    counter = {"next": 0}
    current = {"step": 0}

    def data_source(n: int) -> list[list[Sample]]:
        groups = []
        for _ in range(n):
            gid = counter["next"]
            counter["next"] += 1
            groups.append([Sample(index=gid * N + i, group_index=gid, prompt=f"p{gid}") for i in range(N)])
        return groups

    async def scripted_generate(args, group, sampling_params, evaluation=False):
        gid = group[0].group_index
        await asyncio.sleep(delay_of(gid))
        kind = kind_of(gid % 1000, current["step"])
        for i, sample in enumerate(group):
            sample.status = Sample.Status.COMPLETED
            sample.reward = float(i % 2) if kind == "spread" else 1.0
        if kind == "technical":
            group[0].status = Sample.Status.FAILED
        return group

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
    from shopsimrl import slime_runtime

    for step in range(3):
        current["step"] = step
        counter["next"] = step * 1000
        sample_hooks.set_current_rollout_id(step)
        output, _ = asyncio.run(sr.generate_rollout_async(args, step, data_source))
        flat = [s for group in output.samples for s in group]
        assert slime_runtime.log_rollout_step(step, args, flat, output.metrics, 0.1) is False
        record = read_steps(run_dir)[-1]
        print(json.dumps({
            "step": step,
            "slime_train_groups": sorted(g[0].group_index for g in output.samples),
            "slime_metrics": output.metrics,
            "record": record.to_dict(),
        }))


if __name__ == "__main__":
    main(sys.argv[1])
