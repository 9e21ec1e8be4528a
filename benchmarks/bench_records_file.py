"""What the rules of the records file cost per step: the JSONL sink against a bare append, side by side.

Both write the same records (the ledger of 32 judged groups, the defaults' over_sampling_batch_size,
and of 2048 at scale) to a file in a temp dir, without fsync (the disk's share, equal for both):

- ``bare``: the plain writer the rules replaced: a shallow dict of the fields (non-finite floats of
  the first level set to None), ``json.dumps`` and an append to the file opened for each step;
- ``sink``: ``JsonlSink.emit``: JSON-native conversion of every value, strict JSON, the held-back
  queue, whole-line bookkeeping, the lock taken once at opening.

Printed: microseconds per step for each and their ratio (measured in this one run). No target: it says
where the records file's time goes (the writes are outside ``filter_seconds``).

Run: ``python benchmarks/bench_records_file.py``.
"""

from __future__ import annotations

import dataclasses
import json
import math
import tempfile
import time
from pathlib import Path

from shopsim_metrics.record.records import DecisionRow, StepRecord
from shopsim_metrics.sinks.jsonl import JsonlSink

REPEATS = 5


def make_step(rollout_id: int, groups: int) -> StepRecord:
    rows = [DecisionRow(order=i + 1, waves_open=1, group_index=i, outcome="trained" if i % 3 else "dropped_zero_std",
                        reason=None, remaining_before=groups - i, unique_rollouts=8, reward_min=0.0, reward_max=1.0,
                        reward_mean=0.5, success_count=4, scorable_rollouts=8, reward_sum=4.0) for i in range(groups)]
    return StepRecord(rollout_id=rollout_id, rollout_batch_size=groups // 2, n_samples_per_prompt=8,
                      over_sampling_batch_size=groups, submitted_group_count=groups, wave_count=1,
                      success_rate=0.5, reward_mean=0.5, failed_check_counts={"status_failed": 1}, decisions=rows)


def _shallow(obj: object) -> dict:
    return {f.name: (None if isinstance(v, float) and not math.isfinite(v) else v)
            for f in dataclasses.fields(obj) if f.name != "decisions" for v in [getattr(obj, f.name)]}


def bare(directory: Path, records: list[StepRecord]) -> float:
    path = directory / "bare.jsonl"
    start = time.perf_counter()
    for record in records:
        data = _shallow(record)
        data["decisions"] = [_shallow(row) for row in record.decisions]
        line = json.dumps(data, allow_nan=False, separators=(",", ":")) + "\n"
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(line)
            fh.flush()
    return time.perf_counter() - start


def sink(directory: Path, records: list[StepRecord]) -> float:
    writer = JsonlSink(directory / "run", fsync=False)
    start = time.perf_counter()
    for record in records:
        writer.emit(record)
    elapsed = time.perf_counter() - start
    writer.close()
    return elapsed


def main() -> None:
    print(f"{'groups/step':>12} {'steps':>6} {'bare us/step':>13} {'sink us/step':>13} {'sink/bare':>10}")
    for groups, steps in ((32, 400), (2048, 20)):
        records = [make_step(rid, groups) for rid in range(steps)]
        best = {"bare": float("inf"), "sink": float("inf")}
        for _ in range(REPEATS):  # alternated, best of several: both see the same machine load
            for name, run in (("bare", bare), ("sink", sink)):
                with tempfile.TemporaryDirectory() as tmp:
                    best[name] = min(best[name], run(Path(tmp), records))
        per = {name: seconds / steps * 1e6 for name, seconds in best.items()}
        print(f"{groups:>12} {steps:>6} {per['bare']:>13.1f} {per['sink']:>13.1f} {per['sink'] / per['bare']:>10.2f}")


if __name__ == "__main__":
    main()
