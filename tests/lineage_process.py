"""One slime-like training process on a shared run directory, for tests/test_lineage.py (run, not collected).

    python tests/lineage_process.py RUN_DIR SAVE_DIR START FIRST LAST [--stall-after N] [--die] [--diverge-from N]
        [--save-interval N] [--clock-offset SECONDS | --clock-at UNIX_TIME]

A fresh monitor (as slime's rollout actor starts one) with ``start_rollout_id`` START (> 0: resumed with
``--load SAVE_DIR``), then the steps FIRST..LAST of the simulated slime loop with scripted groups, each
step's groups from the step alone (slime restores its data source with the checkpoint: a re-run step
serves the same prompts). ``--stall-after N`` prints ``stalled`` after step N and waits for a line on
stdin (the process keeps its records file locked meanwhile); ``--die`` ends the process without its
exit handlers (``os._exit``), as a killed trainer; ``--diverge-from N`` gives steps from N on other
rewards (the policy of a lineage that a later resume superseded learnt otherwise); ``--clock-offset S``
runs the process on a node whose clock is S seconds off, ``--clock-at T`` on one whose clock says T
(two processes then start at the same time).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

STEPS = 13
"""``--num-rollout`` of every process."""


def group_for(step: int, k: int, gid: int, diverged: bool) -> list:
    """The k-th group of a step: its prompt (a pool of 9: prompts come back every step) and its rewards."""
    from conftest import group_of

    prompt = f"prompt {(step * 5 + k) % 9}"
    kind = (step + k) % 3
    if diverged:  # another policy: every group has spread
        rewards = [1.0, 0.0] * 4
    else:
        rewards = [1.0] * 8 if kind == 0 else [0.0] * 8 if (kind == 1 and k % 2) else [1.0, 0.0] * 4
    return group_of(gid, rewards, prompt=prompt)


def main(argv: list[str]) -> None:
    from conftest import fifo_batches, make_args, run_scripted_step, scripted_loop
    from shopsim_metrics.loop.loop_state import ManualLoopState
    from shopsimrl import slime_runtime

    parser = argparse.ArgumentParser(allow_abbrev=False)
    for name in ("run_dir", "save"):
        parser.add_argument(name)
    for name in ("start", "first", "last"):
        parser.add_argument(name, type=int)
    parser.add_argument("--stall-after", type=int)
    parser.add_argument("--die", action="store_true")
    parser.add_argument("--diverge-from", type=int)
    parser.add_argument("--save-interval", type=int, default=5)
    parser.add_argument("--clock-offset", type=float)
    parser.add_argument("--clock-at", type=float)
    opts = parser.parse_args(argv)
    if opts.clock_offset is not None or opts.clock_at is not None:
        import time

        real = time.time
        time.time = (lambda: real() + opts.clock_offset) if opts.clock_at is None else (lambda: opts.clock_at)
    args = make_args(shopsim_run_dir=opts.run_dir, start_rollout_id=opts.start, num_rollout=STEPS,
                     shopsim_alerts=False, shopsim_wandb="off", save=opts.save,
                     load=opts.save if opts.start else None, save_interval=opts.save_interval or None)
    state = ManualLoopState(source="scripted")
    slime_runtime.configure(args, loop_state=state)
    loop = scripted_loop(args, state)
    for step in range(opts.first, opts.last + 1):
        loop._next_id = first = step * 1000  # slime's group counter, restored with the checkpoint
        diverged = opts.diverge_from is not None and step >= opts.diverge_from
        run_scripted_step(loop, step, lambda gid, s=step, f=first, d=diverged: group_for(s, gid - f, gid, d),
                          fifo_batches(3))
        if step == opts.stall_after:
            print("stalled", flush=True)
            sys.stdin.readline()
    if opts.die:
        os._exit(0)
    slime_runtime.reset_runtime()


if __name__ == "__main__":
    main(sys.argv[1:])
