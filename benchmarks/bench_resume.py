"""What resuming costs: the restore of a 100,000-step run with 1,000,000 prompts (``make bench-big``).

A resumed slime run (``--load``, ``start_rollout_id`` = s) replays the records before s into the
technical streak and the prompt history before its first judgement. This generates a records file of
the shape the project writes (the demo's records, cycled with fresh rollout ids, every ledger row given
its own prompt key so that the history reaches ``--prompts`` distinct prompts) in a temporary
directory, then measures in fresh subprocesses, side by side: one plain ``json.loads`` pass over the
file (the reference) and the restore at s = the last step. Printed: wall time, the ratio to the
reference, peak memory, prompts restored. No target: the figures are what the docs quote (§1.5).

Run: ``python benchmarks/bench_resume.py [--steps 100000] [--prompts 1000000]``.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

_MEASURE = """
import json, resource, sys, time
started = time.perf_counter()
if sys.argv[1] == "reference":
    with open(sys.argv[2], "rb") as fh:
        for line in fh:
            json.loads(line)
    extra = {}
else:
    from shopsim_metrics.prompts.value import PromptValueTracker
    from shopsim_metrics.resume import restore
    from shopsim_metrics.step.streak import TechnicalStreak
    tracker = PromptValueTracker()
    restored = restore(sys.argv[2], start_rollout_id=int(sys.argv[3]), streak=TechnicalStreak(), prompts=tracker)
    extra = {"steps": restored.steps, "prompts": len(tracker.history)}
seconds = time.perf_counter() - started
peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps({"seconds": seconds, "peak_mb": peak_mb, **extra}))
"""

_PROMPT_KEY = re.compile(r'"prompt_key":"[^"]*"')


def write_records(run_dir: Path, steps: int, prompts: int) -> int:
    """``steps`` records in ``run_dir/steps.jsonl``; the n-th ledger row overall gets prompt n mod ``prompts``."""
    import logging

    from shopsim_metrics.simulator.demo import demo_config
    from shopsim_metrics.simulator.loop import Simulator
    from shopsim_metrics.step.json_values import json_native

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
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=100_000)
    parser.add_argument("--prompts", type=int, default=1_000_000)
    options = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        run_dir = Path(tmp) / "run"
        size = write_records(run_dir, options.steps, options.prompts)
        reference = measure("reference", str(run_dir / "steps.jsonl"))
        restored = measure("restore", str(run_dir), str(options.steps))
    print(f"records: {options.steps:,} steps, {size / 1e6:,.0f} MB")
    print(f"json.loads pass (reference): {reference['seconds']:.1f} s, peak {reference['peak_mb']:.0f} MB")
    print(f"restore at start_rollout_id={options.steps:,}: {restored['seconds']:.1f} s "
          f"({restored['seconds'] / reference['seconds']:.2f}x the reference), peak {restored['peak_mb']:.0f} MB, "
          f"{restored['steps']:,} steps and {restored['prompts']:,} prompts restored")
    return 0


if __name__ == "__main__":
    sys.exit(main())
