"""Inputs no honest run produces: each is one line on stderr and exit code 2, at once, before any work.

``replay`` and the readers (``inspect``, ``tune --from``, ``prompts``) are given what an attacker (or a
slip of the keyboard) gives them: a FIFO or a device instead of a file, a record whose ``rollout_id`` is
10^12, a group size of a million, an output path that cannot be written. Each runs in a child process
under a memory limit (1.5 GB of address space) and a generous time limit that only a hang reaches: before
these checks, a FIFO waited forever, ``/dev/zero`` was read until memory ran out and 10^12 steps were
planned and run.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from shopsim_metrics.cli import main

HANG = 120
"""Seconds after which a child counts as hung (each case here answers at once; only a hang gets near)."""

MEMORY_LIMIT = 1536 * 1024 * 1024
"""The child's address space: a command that reads without bound runs out of it instead of the machine's."""

_CHILD = """
import resource, sys
resource.setrlimit(resource.RLIMIT_AS, ({limit}, {limit}))
from shopsim_metrics.cli import main
sys.exit(main(sys.argv[1:]))
"""


def run_bounded(args: list[str]) -> subprocess.CompletedProcess:
    """``shopsim-metrics ARGS`` in a child with bounded memory; a hang fails the test (TimeoutExpired)."""
    return subprocess.run([sys.executable, "-c", _CHILD.format(limit=MEMORY_LIMIT), *args], capture_output=True,
                          text=True, timeout=HANG, stdin=subprocess.DEVNULL)


def one_line(proc: subprocess.CompletedProcess, *expected: str) -> str:
    assert proc.returncode == 2, proc.stderr[-2000:]
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    for text in expected:
        assert text in lines[0], lines[0]
    return lines[0]


@pytest.fixture
def fifo(tmp_path: Path) -> Path:
    path = tmp_path / "steps.jsonl"
    os.mkfifo(path)
    return path


@pytest.mark.parametrize("command", [
    ["replay", "{path}", "--n-samples-per-prompt", "8"],
    ["inspect", "{path}"],
    ["inspect", "--json", "{path}"],
    ["tune", "--from", "{path}"],
    ["prompts", "{path}"],
])
def test_a_fifo_is_refused_without_being_opened(fifo: Path, command: list[str]) -> None:
    one_line(run_bounded([a.format(path=fifo) for a in command]), str(fifo), "a FIFO (named pipe), not a file")


@pytest.mark.parametrize("command", [
    ["replay", "/dev/zero", "--n-samples-per-prompt", "8"],
    ["inspect", "/dev/zero"],
])
def test_a_device_is_refused_without_being_read(command: list[str]) -> None:
    one_line(run_bounded(command), "/dev/zero", "a character device, not a file")


def _one_record_run(tmp_path: Path, **fields) -> Path:
    run = tmp_path / "run"
    run.mkdir()
    row = {"order": 1, "waves_open": 1, "group_index": 0, "outcome": "trained", "reason": None,
           "remaining_before": 4, "unique_rollouts": 8, "prompt_key": "p", "scorable_rollouts": 8,
           "success_count": 4, "reward_min": 0.0, "reward_max": 1.0}
    record = {"rollout_id": 0, "n_samples_per_prompt": 8, "rollout_batch_size": 4,
              "over_sampling_batch_size": 8, "decisions": [row], **fields}
    row.update(scorable_rollouts=record["n_samples_per_prompt"], success_count=record["n_samples_per_prompt"] // 2)
    (run / "steps.jsonl").write_text(json.dumps(record) + "\n")
    return run


def test_a_record_at_rollout_id_ten_to_the_twelve_plans_no_replay(tmp_path: Path) -> None:
    run = _one_record_run(tmp_path, rollout_id=10**12)
    one_line(run_bounded(["replay", str(run), "--no-progress"]), "rollout_id", "10,000,000", "--steps")


def test_steps_given_explicitly_replay_such_a_run(tmp_path: Path, capsys) -> None:
    run = _one_record_run(tmp_path, rollout_id=10**12)
    assert main(["replay", str(run), "--no-progress", "--steps", "2", "--seeds", "1", "--prompt-skip", "off",
                 "--wave-size", "fixed"]) == 0
    assert "2 steps" in capsys.readouterr().out


@pytest.mark.parametrize("source", ["json", "records"])
def test_a_group_of_a_million_samples_is_refused_before_any_replay(tmp_path: Path, source: str) -> None:
    if source == "json":
        trace = tmp_path / "trace.json"
        trace.write_text(json.dumps({"a": [0.5]}))
        args = ["replay", str(trace), "--n-samples-per-prompt", "1000000", "--no-progress"]
    else:
        args = ["replay", str(_one_record_run(tmp_path, n_samples_per_prompt=10**6)), "--no-progress"]
    one_line(run_bounded(args), "1,000,000", "samples per wave")


def test_replay_checks_its_output_path_before_it_replays(tmp_path: Path, monkeypatch, capsys) -> None:
    from shopsim_metrics.replay import command

    def replayed(*args, **kwargs):
        raise AssertionError("the replay ran before its output path was checked")

    monkeypatch.setattr(command, "replay_rows", replayed)
    trace = tmp_path / "trace.json"
    trace.write_text(json.dumps({"a": [0.5, 1.0]}))
    blocker = tmp_path / "a_file"
    blocker.write_text("x")
    for out in (blocker / "rows.json", tmp_path):
        assert main(["replay", str(trace), "--n-samples-per-prompt", "2", "--no-progress", "--json", str(out)]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "--json" in err[0], err


# --- a big but honest trace: bounded memory, progress from the first byte ---------------------------------
def _big_trace(path: Path, prompts: int) -> Path:
    import random

    rng = random.Random(0)
    with open(path, "w") as out:
        out.write("{" + ",".join(f'"prompt-{i:07d}": [' + ", ".join(str(rng.randint(0, 8) / 8) for _ in range(
            rng.randint(1, 9))) + "]" for i in range(prompts)) + "}")
    return path


def test_a_big_json_trace_is_read_in_memory_a_few_times_its_size(tmp_path: Path) -> None:
    """The trace is read one prompt at a time into columns: Python's allocations peak below 8 times the file's
    size (json.loads of the whole file and an object per visit: about 25 times)."""
    import tracemalloc

    from shopsim_metrics.outcomes.trace import load_trace

    path = _big_trace(tmp_path / "trace.json", 40_000)
    size = path.stat().st_size
    tracemalloc.start()
    try:
        trace = load_trace(path, 8)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert len(trace.prompts) == 40_000 and trace.visit_count > 150_000
    assert peak < 8 * size, (peak, size)


def test_a_big_trace_shows_its_progress_from_the_first_byte(tmp_path: Path, capsys) -> None:
    path = _big_trace(tmp_path / "trace.json", 40_000)
    assert main(["replay", str(path), "--n-samples-per-prompt", "8", "--steps", "2", "--seeds", "1",
                 "--prompt-skip", "off", "--wave-size", "fixed"]) == 0
    err = capsys.readouterr().err.splitlines()
    size = path.stat().st_size
    assert err[0] == f"reading {path}: 0/{size} bytes"  # before the first byte is read
    assert f"reading {path}: {size}/{size} bytes (done)" in err


def test_a_streamed_trace_reads_as_json_loads_reads_it(tmp_path: Path) -> None:
    """Item by item, across chunk boundaries anywhere (NaN, Infinity, escapes, non-ASCII keys): the same trace."""
    from shopsim_metrics.outcomes import json_items
    from shopsim_metrics.outcomes.trace import trace_from_json_file, trace_from_mapping

    text = '{"a\\u00e9\\"": [0.5, 1.0, 0], "é ключ": [0.125], "c": [], "d": [1e0, 0.75]}'
    path = tmp_path / "t.json"
    path.write_text(text, encoding="utf-8")
    expected = trace_from_mapping(json.loads(text), 8, origin=str(path))
    for chunk in range(1, len(text.encode()) + 1):
        with open(path, "rb") as handle:
            assert list(json_items.iter_object_items(handle, chunk=chunk)) == list(json.loads(text).items())
    assert trace_from_json_file(path, 8) == expected


def test_a_big_records_trace_keeps_the_scored_rows_few_fields_not_the_records(tmp_path: Path) -> None:
    """A run's records as a trace: of each step only its scored rows' outcome fields are held, so Python's
    allocations peak below the records file's size (before: every record whole, over twice its size)."""
    import tracemalloc

    import shopsim_metrics.readers.steps  # noqa: F401 - imported before the measure
    from shopsim_metrics.outcomes.trace import load_trace
    from shopsim_metrics.simulator.config import SimConfig
    from shopsim_metrics.simulator.loop import Simulator
    from shopsim_metrics.simulator.skipping.skip_saving import alerts_silenced
    from shopsim_metrics.sinks.jsonl import JsonlSink

    run = tmp_path / "run"
    sink = JsonlSink(run, fsync=False)
    with alerts_silenced():
        Simulator(SimConfig(steps=200, prompt_pool=400, technical_rate=0.0, seed=2), sinks=[sink],
                  keep_records=False).run()
    sink.close()
    size = (run / "steps.jsonl").stat().st_size
    tracemalloc.start()
    try:
        trace = load_trace(run)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert trace.run is not None and trace.run.steps == 200 and trace.visit_count > 4000
    assert peak < size, (peak, size)


def test_records_far_apart_are_inspected_in_bounded_memory_and_the_gap_named(tmp_path: Path) -> None:
    """Steps between a file's first and last record with none are named as runs of ids, never listed one by one."""
    run = tmp_path / "run"
    run.mkdir()
    lines = [json.dumps({"rollout_id": rid, "decisions": []}) for rid in (0, 5, 10**12)]
    (run / "steps.jsonl").write_text("\n".join(lines) + "\n")
    proc = run_bounded(["inspect", str(run)])
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert f"{4 + 10**12 - 6} step(s)" in proc.stderr and "rollout_id 1-4, 6-999999999999" in proc.stderr
