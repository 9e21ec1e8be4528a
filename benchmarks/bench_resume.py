"""What resuming costs: a resumed 100,000-step run with 1,000,000 prompts (``make bench-big``).

A resumed slime run (``--load``, ``start_rollout_id`` = s) needs the technical streak and the prompt
history before its first judgement. This generates a records file of the shape the project writes
(the demo's records, cycled with fresh rollout ids, every ledger row given its own prompt key so that
the history reaches ``--prompts`` distinct prompts) in a temporary directory, then measures in fresh
subprocesses, side by side:

1. without a snapshot: one plain ``json.loads`` pass over the records (its reference) and the replay
   of every record at s = the last step (no target: the figures the docs quote, §1.5); that process
   then writes the monitor's snapshot of step s - 1, as the monitor does at a checkpoint;
2. with the snapshot: reading it (one ``json.load`` of the file: the reference) and, as a resumed
   process does it, the monitor built from slime's args (``--load``) up to its first judgement of a
   group, in 5 pairs of fresh processes (which goes first alternates; both follow the machine's moment,
   so each pair gives a ratio and the median ratio is judged). Target: <= 2x the reference, whatever the
   size of ``steps.jsonl``;
3. that process then calls slime's log function for the step, a checkpoint (``--save-interval 1``): the
   time slime waits in it for the snapshot (the snapshot writer's ``save``, on the log function's thread)
   against the time until the snapshot is on disk (copied and written on a thread of its own). Target: the
   wait <= 5 % of it.

Run: ``python benchmarks/bench_resume.py [--steps 100000] [--prompts 1000000]``; exits 1 when the
target is missed.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

TARGET = 2.0  # the first judgement of a snapshot resume, in reads of the snapshot
PAIRS = 5  # snapshot reads and resumes measured side by side
WAIT_TARGET = 0.05  # slime's wait in its log function at a checkpoint, in the snapshot's own time

_MEASURE = """
import json, resource, sys, time
from types import SimpleNamespace
mode, path = sys.argv[1], sys.argv[2]
if mode == "first-judgement":  # imports first: the process has them before slime calls the filter
    from shopsim_metrics.simulator.samples import SimSample
    from shopsimrl import slime_runtime
started = time.perf_counter()
if mode == "reference":
    with open(path, "rb") as fh:
        for line in fh:
            json.loads(line)
    extra = {}
elif mode == "snapshot-read":
    with open(path, "rb") as fh:
        json.load(fh)
    extra = {}
elif mode == "first-judgement":
    steps = int(sys.argv[3])
    args = SimpleNamespace(rollout_batch_size=32, n_samples_per_prompt=8, over_sampling_batch_size=64,
                           global_batch_size=256, shopsim_run_dir=path, start_rollout_id=steps, num_rollout=steps + 10,
                           load=sys.argv[4], save=sys.argv[4], save_interval=1, shopsim_wandb=False)
    group = [SimSample(index=i, group_index=0, reward=float(i % 2)) for i in range(8)]
    keep = slime_runtime.fully_scored_group_filter(args, group).keep
    runtime = slime_runtime.get_runtime(args)
    extra = {"kept": keep, "prompts": len(runtime.parts.prompts.history), "streak": runtime.parts.streak.count}
else:
    from shopsim_metrics.prompts.value import PromptValueTracker
    from shopsim_metrics.prompts.skip_record import SkipTally
    from shopsim_metrics.run.resume import restore
    from shopsim_metrics.run.state import monitor_state
    from shopsim_metrics.health.streak import TechnicalStreak
    from shopsim_metrics.waves.wave_size import RecentOrders
    tracker, streak, skips = PromptValueTracker(), TechnicalStreak(), SkipTally()
    state = monitor_state(streak=streak, prompts=tracker, skips=skips, recent_orders=RecentOrders())
    steps = int(sys.argv[3])
    restored = restore(path, state, start_rollout_id=steps)
    extra = {"steps": restored.steps, "prompts": len(tracker.history)}
seconds = time.perf_counter() - started
peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
if mode == "restore":  # the snapshot a checkpoint at s - 1 would have left
    from shopsim_metrics.run.snapshot import build_snapshot, snapshot_path
    from shopsim_metrics.state_file import write_json
    write_json(snapshot_path(sys.argv[4], steps - 1), build_snapshot(
        state, rollout_id=steps - 1, run_id=None, missing=restored.missing, run_dir=path))
if mode == "first-judgement":  # slime checkpoints after this step (save_interval 1): its log function's call
    save, waits = runtime.snapshot_writer.save, []

    def timed_save(rollout_id, **kwargs):
        entered = time.perf_counter()
        save(rollout_id, **kwargs)
        waits.append(time.perf_counter() - entered)

    runtime.snapshot_writer.save = timed_save
    logged = time.perf_counter()
    slime_runtime.log_rollout_step(steps, args, group, {}, 60.0)
    extra["log_seconds"] = time.perf_counter() - logged
    runtime.wait_for_snapshot()
    extra["snapshot_seconds"] = time.perf_counter() - logged
    extra["wait_seconds"] = waits[0]
print(json.dumps({"seconds": seconds, "peak_mb": peak_mb, **extra}))
"""

_PROMPT_KEY = re.compile(r'"prompt_key":"[^"]*"')


def write_records(run_dir: Path, steps: int, prompts: int) -> int:
    """``steps`` records in ``run_dir/steps.jsonl``; the n-th ledger row overall gets prompt n mod ``prompts``."""
    import logging

    from shopsim_metrics.simulator.demo import demo_config
    from shopsim_metrics.simulator.loop import Simulator
    from shopsim_metrics.record.json_values import json_native

    logging.getLogger("shopsim_metrics").setLevel(logging.ERROR)  # the demo's burst alerts
    result = Simulator(demo_config(steps=200, seed=1), sinks=[]).run()
    tails = [json.dumps(json_native(r.to_dict()), allow_nan=False, separators=(",", ":")).split(",", 1)[1]
             for r in result.records]
    run_dir.mkdir(parents=True, exist_ok=True)
    row = 0
    with open(run_dir / "steps.jsonl", "w", encoding="utf-8") as fh:
        for step in range(steps):
            def next_key(_: re.Match) -> str:
                nonlocal row
                key = f'"prompt_key":"b2:{row % prompts:015x}"'
                row += 1
                return key

            fh.write(f'{{"rollout_id":{step},{_PROMPT_KEY.sub(next_key, tails[step % len(tails)])}\n')
    return (run_dir / "steps.jsonl").stat().st_size


def measure(*args: str) -> dict:
    out = subprocess.run([sys.executable, "-c", _MEASURE, *args], capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)
    parser.add_argument("--steps", type=int, default=100_000)
    parser.add_argument("--prompts", type=int, default=1_000_000)
    options = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        run_dir, ckpt = Path(tmp) / "run", Path(tmp) / "ckpt"
        size = write_records(run_dir, options.steps, options.prompts)
        reference = measure("reference", str(run_dir / "steps.jsonl"))
        restored = measure("restore", str(run_dir), str(options.steps), str(ckpt))
        (snapshot,) = (ckpt / "rollout").iterdir()
        snapshot_mb = snapshot.stat().st_size / 1e6
        def read_once() -> dict:
            return measure("snapshot-read", str(snapshot))

        def resume_once() -> dict:
            return measure("first-judgement", str(run_dir), str(options.steps), str(ckpt))

        pairs = []
        for pair in range(PAIRS):  # which goes first alternates (a tuple is evaluated left to right)
            if pair % 2 == 0:
                read, first = read_once(), resume_once()
            else:
                first, read = resume_once(), read_once()
            pairs.append((first["seconds"] / read["seconds"], read, first))
        ratio, read, first = sorted(pairs, key=lambda p: p[0])[PAIRS // 2]  # the median pair
    print(f"records: {options.steps:,} steps, {size / 1e6:,.0f} MB")
    print(f"json.loads pass (reference): {reference['seconds']:.1f} s, peak {reference['peak_mb']:.0f} MB")
    print(f"replay of every record at start_rollout_id={options.steps:,}: {restored['seconds']:.1f} s "
          f"({restored['seconds'] / reference['seconds']:.2f}x the reference), peak {restored['peak_mb']:.0f} MB, "
          f"{restored['steps']:,} steps and {restored['prompts']:,} prompts restored")
    print(f"snapshot of step {options.steps - 1:,}: {snapshot_mb:,.0f} MB, read in {read['seconds']:.2f} s (reference; "
          f"the median pair of {PAIRS})")
    print(f"resume from it, up to the first judgement: {first['seconds']:.2f} s ({ratio:.2f}x the reference, "
          f"target <= {TARGET:.0f}x; {first['prompts']:,} prompts, streak {first['streak']}), peak {first['peak_mb']:.0f} MB")
    print("  every pair's ratio: " + ", ".join(f"{r:.2f}" for r, _, _ in pairs))
    wait = first["wait_seconds"] / first["snapshot_seconds"]
    print(f"a checkpoint of that state: slime's log function waited {first['wait_seconds']:.3f} s for the snapshot "
          f"(the call took {first['log_seconds']:.2f} s with the step's record); the snapshot was on disk "
          f"{first['snapshot_seconds']:.2f} s after the call began, copied and written off the log function's thread "
          f"(slime waited for all of it before): the wait is {wait:.1%} of it, target <= {WAIT_TARGET:.0%}")
    if wait > WAIT_TARGET:
        print("MISSED: slime's log function waited for the snapshot")
        return 1
    if any(f["prompts"] != restored["prompts"] for _, _, f in pairs):
        print("MISSED: the snapshot resume restored another number of prompts than the replay")
        return 1
    if ratio > TARGET:
        print("MISSED: the snapshot resume's first judgement took more than the target")
        return 1
    print("target met")
    return 0


if __name__ == "__main__":
    sys.exit(main())
