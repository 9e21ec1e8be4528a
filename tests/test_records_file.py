"""The rules of the records file: JSON-native values, whole lines, held-back records, one live writer
per file, no symlinks, resumed runs. Disk-full, kill -9 and two-writer scenarios run in subprocesses."""

from __future__ import annotations

import dataclasses

import enum
import errno
import json
import logging
import math
import os
import signal
import subprocess
import sys
import time
from decimal import Decimal
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings as hsettings, strategies as st

from shopsim_metrics.record import contract
from shopsim_metrics.record.json_values import json_native, json_native_fields
from shopsim_metrics.record.records import DecisionRow, StepRecord
from shopsim_metrics.sinks import JsonlSink, steps_files
from shopsim_metrics.readers import read_steps
from shopsim_metrics.sinks.jsonl import record_line
from shopsim_metrics.sinks.line_file import sibling_path
from tests.wandb_helpers import make_record

MAIN = contract.STEPS_FILE_NAME


def _strict_lines(path: Path) -> list[dict]:
    """Every line of ``path`` parsed as strict JSON (NaN/Infinity refused); the file ends with a newline."""
    text = path.read_text(encoding="utf-8")
    assert text == "" or text.endswith("\n"), "the file ends with a complete line"

    def refuse(name: str):
        raise AssertionError(f"non-JSON constant {name} in {path}")

    return [json.loads(line, parse_constant=refuse) for line in text.splitlines()]


def _warnings(caplog, needle: str) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING and needle in r.getMessage()]


# --- JSON-native values ----------------------------------------------------------------------------
class _Color(enum.IntEnum):
    RED = 3


class _Label(str):
    def __str__(self) -> str:  # a str subclass with its own __str__: the text itself is written
        return "not this"


class _Tensor:
    """Duck-typed like a one-element torch tensor: ``numel()`` and ``item()``."""

    def __init__(self, value):
        self.value = value

    def numel(self) -> int:
        return 1

    def item(self):
        return self.value


class _MetaTensor:
    """Like a torch meta tensor: reading its value raises, and so does printing it."""

    def numel(self) -> int:
        return 1

    def item(self):
        raise RuntimeError("Tensor.item() cannot be called on meta tensors")

    def __str__(self) -> str:
        raise RuntimeError("no data")


def test_numpy_group_index_no_longer_costs_every_step_its_record(tmp_path: Path, caplog) -> None:
    sink = JsonlSink(tmp_path, fsync=False)
    with caplog.at_level(logging.WARNING, logger="shopsim_metrics"):
        for rid in range(3):
            row = DecisionRow(order=1, waves_open=1, group_index=np.int64(rid), outcome="trained", reason=None,
                              remaining_before=np.int32(16), unique_rollouts=8, reward_mean=np.float32(0.5),
                              success_count=np.int64(4))
            sink.emit(StepRecord(rollout_id=rid, terminated=np.bool_(False), decisions=[row]))
    assert not caplog.records
    lines = _strict_lines(tmp_path / MAIN)
    assert [line["decisions"][0]["group_index"] for line in lines] == [0, 1, 2]
    back = read_steps(tmp_path)
    assert [type(r.decisions[0].group_index) for r in back] == [int, int, int]
    assert back[0].terminated is False and back[0].decisions[0].reward_mean == 0.5


def test_odd_values_are_converted_and_the_unreadable_ones_stringified(tmp_path: Path, caplog) -> None:
    odd = {
        "i64": np.int64(2**40), "f32": np.float32(0.25), "f64inf": np.float64("inf"), "nan": math.nan,
        "b": np.bool_(True), "arr1": np.array([7]), "arr0": np.array(1.5), "arr3": np.arange(3),
        "dec": Decimal("0.5"), "snan": Decimal("sNaN"), "decinf": Decimal("Infinity"), "huge_dec": Decimal("1e400"),
        "frac": Fraction(1, 4), "label": _Label("abc"), "enum": _Color.RED, "tensor": _Tensor(np.float64(2.0)),
        "set": {1}, "tuple": (1, np.int8(2)), "bytes": b"x", "big": 10**30, "huge": 10**400,
        "huge_negative": -(2**1025), "meta": _MetaTensor(),
        np.int64(5): "numpy key", None: "none key",
    }
    sink = JsonlSink(tmp_path, fsync=False)
    with caplog.at_level(logging.WARNING, logger="shopsim_metrics"):
        sink.emit(StepRecord(rollout_id=np.int64(0), slime_drop_counts=odd, reward_mean=Decimal("1e400")))
        sink.emit(StepRecord(rollout_id=1, slime_drop_counts={"meta": _MetaTensor()}))
    first, second = _strict_lines(tmp_path / MAIN)
    assert first["rollout_id"] == 0 and first["reward_mean"] is None
    assert first["slime_drop_counts"] == {
        "i64": 2**40, "f32": 0.25, "f64inf": None, "nan": None, "b": True, "arr1": 7, "arr0": 1.5,
        "arr3": [0, 1, 2], "dec": 0.5, "snan": None, "decinf": None, "huge_dec": None, "frac": 0.25,
        "label": "abc", "enum": 3, "tensor": 2.0, "set": [1], "tuple": [1, 2], "bytes": "b'x'", "big": 10**30, "huge": None, "huge_negative": None,
        "meta": "<unprintable _MetaTensor>", "5": "numpy key", "null": "none key",
    }
    assert second["slime_drop_counts"] == {"meta": "<unprintable _MetaTensor>"}
    fallbacks = [m for m in _warnings(caplog, "not JSON-native")]
    assert {m.split(" of type ")[1].split(" ")[0] for m in fallbacks} <= {"bytes", "_MetaTensor"}
    assert sum("_MetaTensor" in m for m in fallbacks) <= 1, "one warning per type, not per value"


def test_reward_1e308_sums_never_reach_the_file_as_infinity(tmp_path: Path) -> None:
    rewards = np.array([1e308, 1e308])
    with np.errstate(over="ignore"):
        total = rewards.sum()  # inf, as a naive sum of huge rewards gives
    row = DecisionRow(order=1, waves_open=1, group_index=0, outcome="trained", reason=None, remaining_before=1,
                      unique_rollouts=2, reward_sum=total, reward_mean=total / 2, reward_max=rewards.max())
    JsonlSink(tmp_path, fsync=False).emit(StepRecord(rollout_id=0, reward_mean=total / 2, decisions=[row]))
    (line,) = _strict_lines(tmp_path / MAIN)
    assert line["reward_mean"] is None and line["decisions"][0]["reward_sum"] is None
    assert line["decisions"][0]["reward_max"] == 1e308


_leaves = st.one_of(
    st.none(), st.booleans(), st.integers(), st.integers(min_value=2**1000), st.builds(lambda: 10**5000), st.floats(), st.text(max_size=5), st.binary(max_size=3),
    st.decimals(), st.fractions(), st.floats().map(np.float64), st.floats(width=32).map(np.float32),
    st.integers(-(2**63), 2**63 - 1).map(np.int64), st.booleans().map(np.bool_),
    st.floats().map(lambda x: np.array([x])), st.just(_MetaTensor()), st.just(_Color.RED), st.builds(object),
)
_values = st.recursive(
    _leaves,
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.tuples(inner, inner), st.dictionaries(
        st.one_of(st.text(max_size=3), st.integers(), st.none(), st.floats()), inner, max_size=3)),
    max_leaves=12,
)


@hsettings(max_examples=300, deadline=None)
@given(value=_values, field=st.sampled_from(["reward_mean", "group_index", "slime_drop_counts", "rollout_id",
                                             "row.reward_min", "row.prompt_key", "row.response_tokens"]))
def test_any_value_in_any_field_gives_one_strict_json_line(value, field: str) -> None:
    row = DecisionRow(order=1, waves_open=1, group_index=0, outcome="trained", reason=None, remaining_before=1,
                      unique_rollouts=1)
    record = StepRecord(rollout_id=0, decisions=[row, DecisionRow(order=2, waves_open=1, group_index=1,
                                                                  outcome="surplus", reason=None, remaining_before=1,
                                                                  unique_rollouts=1, reward_mean=0.5)])
    on_row = field == "group_index" or field.startswith("row.")
    if on_row:
        setattr(row, field.removeprefix("row."), value)
    else:
        record = dataclasses.replace(record, **{field: value})
    line = record_line(record)
    assert line.endswith(b"\n") and line.count(b"\n") == 1

    def refuse(name: str):
        raise AssertionError(name)

    data = json.loads(line, parse_constant=refuse)
    assert set(StepRecord(rollout_id=0).to_dict()) <= set(data), "every field is still there"
    assert data == json.loads(json.dumps(record.to_dict(), allow_nan=False)), "the line is the converted record"
    assert json_native(json_native(value)) == json_native(value), "converting twice changes nothing"


@hsettings(max_examples=300, deadline=None)
@given(values=st.lists(_values, min_size=1, max_size=4))
def test_the_one_pass_fields_conversion_equals_the_generic_one(values) -> None:
    names = tuple(f"f{i}" for i in range(len(values)))
    obj = type("Fields", (), {})()
    for name, value in zip(names, values):
        setattr(obj, name, value)
    one_pass = json_native_fields(obj, names, on_fallback=None)
    generic = json_native(dict(zip(names, values)), on_fallback=None)
    assert json.dumps(one_pass, allow_nan=False, sort_keys=False) == json.dumps(generic, allow_nan=False)
    assert [type(one_pass[n]) for n in names] == [type(generic[n]) for n in names]


def test_ledger_rows_with_huge_or_odd_values_are_written_by_the_rules() -> None:
    rows = [DecisionRow(order=i, waves_open=1, group_index=gi, outcome="trained", reason=None, remaining_before=1,
                        unique_rollouts=8, reward_sum=rs, response_tokens=tokens)
            for i, (gi, rs, tokens) in enumerate([(0, 1.0, 10), (10**400, float("inf"), np.int64(7)),
                                                    (2**1000, 2.5, 3)], start=1)]
    data = json.loads(record_line(StepRecord(rollout_id=0, decisions=rows)))
    assert [(r["group_index"], r["reward_sum"], r["response_tokens"]) for r in data["decisions"]] == [
        (0, 1.0, 10), (None, None, 7), (2**1000, 2.5, 3)]


# --- disk full, then free: a write seam that acts out a disk of limited room ------------------------
class _Disk:
    """``os.write`` on a disk with ``free`` bytes left: short writes, then ENOSPC, like a real full disk."""

    def __init__(self) -> None:
        self.free: float = math.inf

    def write(self, fd: int, data) -> int:
        if self.free <= 0:
            raise OSError(errno.ENOSPC, "No space left on device")
        room = int(min(len(data), self.free))
        count = os.write(fd, bytes(data[:room]))
        self.free -= count
        return count


def test_disk_full_then_free_loses_no_step_and_leaves_no_torn_line(tmp_path: Path, caplog) -> None:
    disk = _Disk()
    sink = JsonlSink(tmp_path, write=disk.write)
    with caplog.at_level(logging.WARNING, logger="shopsim_metrics"):
        for rid in range(3):
            sink.emit(make_record(rid))
        disk.free = 100  # less than one line: step 3 is written part-way
        for rid in range(3, 8):
            sink.emit(make_record(rid))
            assert [line["rollout_id"] for line in _strict_lines(tmp_path / MAIN)] == [0, 1, 2]
        assert sink.held_back_count == 5
        assert len(_warnings(caplog, "could not write")) == 1 and not _warnings(caplog, "works again:")
        disk.free = math.inf
        sink.emit(make_record(8))
    assert [line["rollout_id"] for line in _strict_lines(tmp_path / MAIN)] == list(range(9))
    assert read_steps(tmp_path) == [make_record(rid) for rid in range(9)]
    (recovered,) = _warnings(caplog, "works again:")
    assert "5 step record(s) held back were written late" in recovered
    assert len(_warnings(caplog, "could not write")) == 1
    assert (sink.held_back_count, sink.written_late_count, sink.dropped_count) == (0, 5, 0)


def test_a_disk_with_room_for_some_held_records_writes_those_first(tmp_path: Path, caplog) -> None:
    disk = _Disk()
    sink = JsonlSink(tmp_path, write=disk.write)
    disk.free = 0
    for rid in range(4):
        sink.emit(make_record(rid))
    disk.free = len(record_line(make_record(0))) + len(record_line(make_record(1))) + 10  # two and a bit
    with caplog.at_level(logging.WARNING, logger="shopsim_metrics"):
        sink.emit(make_record(4))
    assert [line["rollout_id"] for line in _strict_lines(tmp_path / MAIN)] == [0, 1]
    assert not _warnings(caplog, "works again:") and sink.held_back_count == 3
    disk.free = math.inf
    sink.close()  # the last try at shutdown writes the rest
    assert [r.rollout_id for r in read_steps(tmp_path)] == [0, 1, 2, 3, 4]


def test_beyond_the_held_back_limit_the_oldest_are_dropped_and_counted(tmp_path: Path, caplog) -> None:
    disk = _Disk()
    sink = JsonlSink(tmp_path, write=disk.write, held_back_limit=3)
    sink.emit(make_record(0))
    disk.free = 0
    with caplog.at_level(logging.WARNING, logger="shopsim_metrics"):
        for rid in range(1, 7):
            sink.emit(make_record(rid))
        assert len(_warnings(caplog, "oldest held-back records are dropped")) == 1
        disk.free = math.inf
        sink.emit(make_record(7))
    assert [r.rollout_id for r in read_steps(tmp_path)] == [0, 4, 5, 6, 7]
    (recovered,) = _warnings(caplog, "works again:")
    assert "3 step record(s) held back were written late; 3 older one(s) were dropped" in recovered
    assert (sink.written_late_count, sink.dropped_count) == (3, 3)


def test_records_still_held_at_shutdown_are_named_in_one_error(tmp_path: Path, caplog) -> None:
    disk = _Disk()
    sink = JsonlSink(tmp_path, write=disk.write)
    sink.emit(make_record(0))
    disk.free = 0
    sink.emit(make_record(1))
    sink.emit(make_record(2))
    with caplog.at_level(logging.WARNING, logger="shopsim_metrics"):
        sink.close()
    (error,) = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert "2 step record(s) could not be written" in error.getMessage() and "rollout_id 1 to 2" in error.getMessage()
    assert [r.rollout_id for r in read_steps(tmp_path)] == [0]


def test_a_failed_fsync_cuts_the_unconfirmed_line_and_writes_it_again(tmp_path: Path, monkeypatch) -> None:
    sink = JsonlSink(tmp_path)
    sink.emit(make_record(0))
    real_fsync = os.fsync

    def failing_fsync(fd: int) -> None:
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(os, "fsync", failing_fsync)
    sink.emit(make_record(1))
    assert [line["rollout_id"] for line in _strict_lines(tmp_path / MAIN)] == [0]
    monkeypatch.setattr(os, "fsync", real_fsync)
    sink.emit(make_record(2))
    assert [line["rollout_id"] for line in _strict_lines(tmp_path / MAIN)] == [0, 1, 2]


_FSIZE_WRITER = """
import resource, signal, sys
from shopsim_metrics.record.records import StepRecord
from shopsim_metrics.sinks import JsonlSink
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # over the limit, write() fails with EFBIG instead
soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
sink = JsonlSink(sys.argv[1])
rec = lambda rid: StepRecord(rollout_id=rid, wave_count=rid, failed_check_counts={"status_failed": rid})
for rid in range(3):
    sink.emit(rec(rid))
resource.setrlimit(resource.RLIMIT_FSIZE, (sink.path.stat().st_size + 40, hard))  # the disk fills up
for rid in range(3, 8):
    sink.emit(rec(rid))
print(sink.path.read_bytes().count(b"\\n"), sink.held_back_count, flush=True)
resource.setrlimit(resource.RLIMIT_FSIZE, (hard, hard))  # and is freed
sink.emit(rec(8))
sink.close()
"""


@pytest.mark.skipif(not hasattr(signal, "SIGXFSZ"), reason="needs RLIMIT_FSIZE")
def test_a_real_file_size_limit_then_freed_in_a_subprocess(tmp_path: Path) -> None:
    out = subprocess.run([sys.executable, "-c", _FSIZE_WRITER, str(tmp_path)], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["3", "5"], "during the spell: 3 whole lines on disk, 5 records held back"
    assert [line["rollout_id"] for line in _strict_lines(tmp_path / MAIN)] == list(range(9))
    assert out.stderr.count("could not write the step record of rollout_id 3") == 1
    assert out.stderr.count("works again: 5 step record(s) held back were written late") == 1


# --- torn tails, resumed runs ----------------------------------------------------------------------
def test_a_torn_tail_left_by_a_dead_writer_is_cut_before_the_next_line(tmp_path: Path, caplog) -> None:
    JsonlSink(tmp_path, fsync=False).emit(make_record(0))
    with open(tmp_path / MAIN, "a") as fh:
        fh.write('{"rollout_id": 1, "wave_co')
    with caplog.at_level(logging.WARNING, logger="shopsim_metrics"):
        JsonlSink(tmp_path, fsync=False).emit(make_record(1))
    assert [line["rollout_id"] for line in _strict_lines(tmp_path / MAIN)] == [0, 1]
    assert len(_warnings(caplog, "cut a torn last line")) == 1


def test_a_whole_record_missing_only_its_newline_is_kept(tmp_path: Path) -> None:
    (tmp_path / MAIN).write_bytes(record_line(make_record(0)).rstrip(b"\n"))
    JsonlSink(tmp_path, fsync=False).emit(make_record(1))
    assert read_steps(tmp_path) == [make_record(0), make_record(1)]


def test_a_resumed_run_rewrites_steps_and_the_latest_record_wins(tmp_path: Path, caplog) -> None:
    first = JsonlSink(tmp_path, fsync=False)
    for rid in range(6):
        first.emit(make_record(rid, wave_count=1))
    first.close()
    resumed = JsonlSink(tmp_path, fsync=False)  # slime restarts from the checkpoint of step 3
    for rid in range(3, 8):
        resumed.emit(make_record(rid, wave_count=2))
    resumed.close()
    assert resumed.path == tmp_path / MAIN, "a run restarted after the first ended writes the main file"
    with caplog.at_level(logging.WARNING, logger="shopsim_metrics"):
        records = read_steps(tmp_path)
    assert [(r.rollout_id, r.wave_count) for r in records] == [(0, 1), (1, 1), (2, 1)] + [(r, 2) for r in range(3, 8)]
    (said,) = _warnings(caplog, "superseded")
    assert said.startswith("shopsim-metrics: 3 earlier step record(s)")


# --- symlinks and other non-files ------------------------------------------------------------------
@pytest.mark.parametrize("sibling_too", [False, True], ids=["at steps.jsonl", "at it and its predictable sibling"])
def test_a_symlink_planted_at_steps_jsonl_is_never_followed_and_no_record_is_lost(
        tmp_path: Path, caplog, sibling_too: bool) -> None:
    target = tmp_path / "elsewhere.txt"
    target.write_text("precious\n")
    run = tmp_path / "run"
    run.mkdir()
    (run / MAIN).symlink_to(target)
    if sibling_too:
        sibling_path(run / MAIN).symlink_to(target)
    sink = JsonlSink(run, fsync=False)
    with caplog.at_level(logging.WARNING, logger="shopsim_metrics"):
        sink.emit(make_record(0))
        sink.emit(make_record(1))
    assert target.read_text() == "precious\n"
    assert sink.path.parent == run and not sink.path.is_symlink()
    if sibling_too:  # a name no one could plant at: random hex
        assert sink.path not in (run / MAIN, sibling_path(run / MAIN))
    else:
        assert sink.path == sibling_path(run / MAIN)
    (warning,) = _warnings(caplog, "symbolic link")
    assert str(sink.path) in warning
    assert steps_files(run) == [sink.path]
    assert [r.rollout_id for r in read_steps(run)] == [0, 1]


@pytest.mark.parametrize("kind", ["directory", "fifo"])
def test_a_directory_or_fifo_at_steps_jsonl_is_refused_without_blocking(tmp_path: Path, caplog, kind: str) -> None:
    if kind == "directory":
        (tmp_path / MAIN).mkdir()
    else:
        os.mkfifo(tmp_path / MAIN)  # opening a FIFO for writing would wait for a reader forever
    sink = JsonlSink(tmp_path, fsync=False)
    with caplog.at_level(logging.WARNING, logger="shopsim_metrics"):
        sink.emit(make_record(0))
    assert len(_warnings(caplog, "is not a regular file")) == 1
    assert [r.rollout_id for r in read_steps(sink.path)] == [0]


# --- processes: two writers at once, kill -9 then restart --------------------------------------------
_WRITER = """
import os, sys, time
from pathlib import Path
from shopsim_metrics.record.records import StepRecord
from shopsim_metrics.sinks import JsonlSink
run_dir, tag, first, last, ready, go = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5], sys.argv[6]
sink = JsonlSink(run_dir)
for rid in range(first, last):
    sink.emit(StepRecord(rollout_id=rid, wave_count=tag, submitted_group_count=rid))
    print(rid, sink.path.name, flush=True)
    if rid == first:
        Path(ready).touch()
        deadline = time.monotonic() + 120
        while not Path(go).exists() and time.monotonic() < deadline:  # both writers hold their file before
            time.sleep(0.01)  # either goes on (polled under a deadline: a lost parent does not leave it waiting)
sink.close()
"""


def _start_writer(run: Path, tag: int, first: int, last: int, ready: Path, go: Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", _WRITER, str(run), str(tag), str(first), str(last), str(ready),
                             str(go)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _wait_for(*paths: Path, procs: list[subprocess.Popen]) -> None:
    deadline = time.monotonic() + 120
    while not all(p.exists() for p in paths):
        assert time.monotonic() < deadline, [p.stderr.read() for p in procs if p.poll() is not None]
        time.sleep(0.01)


def test_two_writers_at_once_each_get_their_own_file_and_readers_read_both(tmp_path: Path) -> None:
    run, go = tmp_path / "run", tmp_path / "go"
    a = _start_writer(run, 1, 0, 40, tmp_path / "a", go)
    _wait_for(tmp_path / "a", procs=[a])
    b = _start_writer(run, 2, 0, 40, tmp_path / "b", go)
    _wait_for(tmp_path / "b", procs=[a, b])
    go.touch()
    (out_a, err_a), (out_b, err_b) = a.communicate(timeout=120), b.communicate(timeout=120)
    assert a.returncode == b.returncode == 0, err_a + err_b
    assert {line.split()[1] for line in out_a.splitlines()} == {MAIN}
    (b_file,) = {line.split()[1] for line in out_b.splitlines()}
    assert b_file.startswith("steps.") and b_file.endswith(f"-{b.pid}.jsonl"), "steps.<host>-<pid>.jsonl"
    assert "held by another live writer" not in err_a and err_b.count("held by another live writer") == 1
    files = steps_files(run)
    assert {p.name for p in files} == {MAIN, b_file}
    for name, tag in ((MAIN, 1), (b_file, 2)):  # never interleaved: each file is one writer's, complete
        lines = _strict_lines(run / name)
        assert [(line["rollout_id"], line["wave_count"]) for line in lines] == [(rid, tag) for rid in range(40)]
        assert [r.rollout_id for r in read_steps(run / name)] == list(range(40))
    merged = read_steps(run)  # the directory: both files, the later one's record of each step wins
    assert [r.rollout_id for r in merged] == list(range(40))
    assert {r.wave_count for r in merged} == {int(files[-1] != run / MAIN) + 1}


_DIES_MID_WRITE = """
import os, signal, sys
from shopsim_metrics.record.records import StepRecord
from shopsim_metrics.sinks import JsonlSink
count = {"n": 0}
def write(fd, data):
    count["n"] += 1
    if count["n"] == 6:  # the sixth record: half of it reaches the file, then kill -9
        os.write(fd, bytes(data[: len(data) // 2]))
        os.kill(os.getpid(), signal.SIGKILL)
    return os.write(fd, data)
sink = JsonlSink(sys.argv[1], write=write)
for rid in range(100):
    sink.emit(StepRecord(rollout_id=rid, wave_count=1))
    print(rid, flush=True)
"""


def test_kill_9_mid_write_then_restart_loses_no_finished_step(tmp_path: Path) -> None:
    run = tmp_path / "run"
    dead = subprocess.run([sys.executable, "-c", _DIES_MID_WRITE, str(run)], capture_output=True, text=True,
                          timeout=120)
    assert dead.returncode == -signal.SIGKILL
    finished = [int(x) for x in dead.stdout.split()]
    assert finished == [0, 1, 2, 3, 4]
    assert not (run / MAIN).read_bytes().endswith(b"\n"), "a torn line is left behind"
    go = tmp_path / "go"
    go.touch()
    restarted = _start_writer(run, 2, 4, 9, tmp_path / "ready", go)  # resumes from the checkpoint of step 4
    out, err = restarted.communicate(timeout=120)
    assert restarted.returncode == 0, err
    assert {line.split()[1] for line in out.splitlines()} == {MAIN}, "the dead writer's lock was released"
    assert "cut a torn last line" in err
    assert steps_files(run) == [run / MAIN]
    assert [(line["rollout_id"], line["wave_count"]) for line in _strict_lines(run / MAIN)] == (
        [(rid, 1) for rid in range(5)] + [(rid, 2) for rid in range(4, 9)])
    assert [(r.rollout_id, r.wave_count) for r in read_steps(run)] == (
        [(rid, 1) for rid in range(4)] + [(rid, 2) for rid in range(4, 9)])


def test_kill_9_of_a_live_writer_releases_its_file_to_the_next_run(tmp_path: Path) -> None:
    run, go = tmp_path / "run", tmp_path / "go"
    holder = _start_writer(run, 1, 0, 10**6, tmp_path / "a", go)  # would run for a long time
    _wait_for(tmp_path / "a", procs=[holder])
    go.touch()
    while holder.stdout.readline().split()[0] != "20":
        pass
    os.kill(holder.pid, signal.SIGKILL)
    holder.wait(timeout=60)
    holder.stdout.close()
    holder.stderr.close()
    last = read_steps(run)[-1].rollout_id  # a torn last line, if the kill landed mid-write, is skipped
    restarted = _start_writer(run, 2, last, last + 5, tmp_path / "b", go)
    out, err = restarted.communicate(timeout=120)
    assert restarted.returncode == 0, err
    assert {line.split()[1] for line in out.splitlines()} == {MAIN}
    records = read_steps(run)
    assert [r.rollout_id for r in records] == list(range(last + 5))
    assert [r.wave_count for r in records[last:]] == [2] * 5


_HOOKS_ON_A_FILLING_DISK = """
import resource, signal, sys
from pathlib import Path
from types import SimpleNamespace
import numpy as np
from shopsim_metrics.loop.loop_state import ManualLoopState
from shopsim_metrics.simulator.samples import SimSample
from shopsimrl import slime_runtime
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
args = SimpleNamespace(rollout_batch_size=2, n_samples_per_prompt=2, over_sampling_batch_size=2, global_batch_size=4,
                       reward_key=None, shopsim_run_dir=sys.argv[1], shopsim_wandb="off")
loop = ManualLoopState()
slime_runtime.configure(args, sinks=None, loop_state=loop)  # the default sinks: steps.jsonl in the run dir
for step in range(6):
    loop.step = step
    if step == 2:  # the disk fills up: nothing more fits
        resource.setrlimit(resource.RLIMIT_FSIZE, ((Path(sys.argv[1]) / "steps.jsonl").stat().st_size, hard))
    for gid in (10 * step, 10 * step + 1):
        group = [SimSample(index=2 * gid + k, group_index=np.int64(gid), reward=np.float32(k)) for k in range(2)]
        slime_runtime.fully_scored_group_filter(args, group)
    slime_runtime.log_rollout_step(step, args, [], {}, 0.1)
resource.setrlimit(resource.RLIMIT_FSIZE, (hard, hard))  # freed; the process exits without closing anything
"""


@pytest.mark.skipif(not hasattr(signal, "SIGXFSZ"), reason="needs RLIMIT_FSIZE")
def test_through_the_hooks_numpy_values_and_a_full_disk_lose_no_step_and_exit_writes_the_held_ones(
        tmp_path: Path) -> None:
    out = subprocess.run([sys.executable, "-c", _HOOKS_ON_A_FILLING_DISK, str(tmp_path)], capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    records = read_steps(tmp_path)
    assert [r.rollout_id for r in records] == list(range(6))
    assert [[row.group_index for row in r.decisions] for r in records] == [[10 * s, 10 * s + 1] for s in range(6)]
    assert all(r.train_group_count == 2 for r in records)
    assert out.stderr.count("could not write the step record of rollout_id 2") == 1
    assert out.stderr.count("works again: 4 step record(s) held back were written late") == 1


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_child_writes_its_own_file_never_the_parents(tmp_path: Path) -> None:
    sink = JsonlSink(tmp_path, fsync=False)
    sink.emit(make_record(0, wave_count=1))
    pid = os.fork()
    if pid == 0:  # the child inherits the open file and its lock, which stay the parent's
        code = 1
        try:
            sink.emit(make_record(1, wave_count=2))
            code = 0 if sink.path == sibling_path(tmp_path / MAIN) else 3
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    sink.emit(make_record(2, wave_count=1))
    sink.close()
    child_file = tmp_path / f"{sibling_path(tmp_path / MAIN).name.rsplit('-', 1)[0]}-{pid}.jsonl"
    assert [(line["rollout_id"], line["wave_count"]) for line in _strict_lines(tmp_path / MAIN)] == [(0, 1), (2, 1)]
    assert [(line["rollout_id"], line["wave_count"]) for line in _strict_lines(child_file)] == [(1, 2)]
    assert set(steps_files(tmp_path)) == {tmp_path / MAIN, child_file}


def test_torch_scalars_and_tensors_are_unwrapped_and_a_meta_tensor_stringified(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    values = {"t0": torch.tensor(3), "t1": torch.tensor([0.5]), "bf16": torch.tensor(1.5, dtype=torch.bfloat16),
              "inf": torch.tensor(float("inf")), "b": torch.tensor(True), "vec": torch.tensor([1, 2]),
              "meta": torch.empty((), device="meta")}
    row = DecisionRow(order=1, waves_open=1, group_index=torch.tensor(7), outcome="trained", reason=None,
                      remaining_before=1, unique_rollouts=1, reward_mean=torch.tensor(0.25))
    JsonlSink(tmp_path, fsync=False).emit(StepRecord(rollout_id=0, slime_drop_counts=values, decisions=[row]))
    (line,) = _strict_lines(tmp_path / MAIN)
    counts = line["slime_drop_counts"]
    assert {k: counts[k] for k in ("t0", "t1", "bf16", "inf", "b", "vec")} == {
        "t0": 3, "t1": 0.5, "bf16": 1.5, "inf": None, "b": True, "vec": [1, 2]}
    assert isinstance(counts["meta"], str)
    assert line["decisions"][0]["group_index"] == 7 and line["decisions"][0]["reward_mean"] == 0.25


@pytest.mark.parametrize("how", ["removed", "renamed", "replaced by a symlink"])
def test_a_records_file_removed_or_replaced_while_written_is_opened_afresh(tmp_path: Path, caplog, how: str) -> None:
    run, target = tmp_path / "run", tmp_path / "elsewhere.txt"
    target.write_text("precious\n")
    sink = JsonlSink(run, fsync=False)
    sink.emit(make_record(0))
    if how == "removed":
        (run / MAIN).unlink()
    elif how == "renamed":
        (run / MAIN).rename(tmp_path / "moved.jsonl")
    else:
        (run / MAIN).unlink()
        (run / MAIN).symlink_to(target)
    with caplog.at_level(logging.WARNING, logger="shopsim_metrics"):
        sink.emit(make_record(1))
        sink.emit(make_record(2))
    assert len(_warnings(caplog, "removed or replaced while this process wrote it")) == 1
    assert target.read_text() == "precious\n"
    assert [r.rollout_id for r in read_steps(run)] == [1, 2], "the records after the removal are on disk"
    assert sink.path == (sibling_path(run / MAIN) if how == "replaced by a symlink" else run / MAIN)


def test_a_record_whose_fields_cannot_be_copied_still_gets_its_line(tmp_path: Path) -> None:
    class Broken(StepRecord):
        def to_dict(self):
            raise RuntimeError("a field that cannot be copied")

    row = DecisionRow(order=1, waves_open=1, group_index=np.int64(3), outcome="trained", reason=None,
                      remaining_before=1, unique_rollouts=1)
    JsonlSink(tmp_path, fsync=False).emit(Broken(rollout_id=4, decisions=[row]))
    (line,) = _strict_lines(tmp_path / MAIN)
    assert line["rollout_id"] == 4 and line["decisions"][0]["group_index"] == 3


def test_without_file_locks_the_file_is_written_unlocked_with_one_warning(tmp_path: Path, caplog, monkeypatch) -> None:
    from shopsim_metrics.sinks import line_file

    monkeypatch.setattr(line_file, "fcntl", None)  # a system or file system without flock
    sink = JsonlSink(tmp_path, fsync=False)
    with caplog.at_level(logging.WARNING, logger="shopsim_metrics"):
        sink.emit(make_record(0))
        sink.emit(make_record(1))
    assert len(_warnings(caplog, "cannot be locked")) == 1
    assert sink.path == tmp_path / MAIN and [r.rollout_id for r in read_steps(tmp_path)] == [0, 1]


def test_an_unwritable_run_directory_holds_records_back_and_never_raises(tmp_path: Path, caplog) -> None:
    blocker = tmp_path / "not_a_dir"
    blocker.write_text("")
    bad = JsonlSink(blocker / "run", fsync=False)  # the run dir cannot be created under a file
    nul = JsonlSink(str(tmp_path / "a\0b"), fsync=False)  # a path the system refuses with ValueError
    with caplog.at_level(logging.WARNING, logger="shopsim_metrics"):
        for sink in (bad, nul):
            sink.emit(make_record(0))
            sink.emit(make_record(1))
    assert bad.held_back_count == nul.held_back_count == 2
    assert len(_warnings(caplog, "could not write the step record of rollout_id 0")) == 2


@pytest.mark.parametrize("group_index, prompt_key", [(5, "plain"), (5, "caf\u00e9 \u2028"), (2**70, "big"),
                                                     (5, "lone \ud800 surrogate")])
def test_every_line_parses_back_to_the_converted_record(group_index, prompt_key) -> None:
    """Every line, non-ASCII text, integers beyond 64 bits and lone surrogates included, reads back alike."""
    row = DecisionRow(order=1, waves_open=1, group_index=group_index, outcome="trained", reason=None,
                      remaining_before=1, unique_rollouts=8, reward_mean=1e16, prompt_key=prompt_key)
    record = StepRecord(rollout_id=0, reward_mean=0.1, decisions=[row])
    line = record_line(record)
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    assert json.loads(line.decode("utf-8")) == json.loads(json.dumps(record.to_dict()))


_json_texts = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=4)),
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=3), inner, max_size=3)),
    max_leaves=10,
).map(json.dumps)


@hsettings(max_examples=400, deadline=None)
@given(text=st.one_of(_json_texts, st.text(max_size=12), st.binary(max_size=12).map(lambda b: b.decode("latin-1"))),
       encoding=st.sampled_from(["utf-8", "utf-16"]))
def test_the_readers_parse_a_line_exactly_as_json_loads_does(text: str, encoding: str) -> None:
    from shopsim_metrics.readers.steps import parse_line

    raw = text.encode(encoding, "surrogatepass")
    try:
        expected = json.loads(raw)
    except (ValueError, RecursionError) as exc:
        with pytest.raises(type(exc)):
            parse_line(raw)
        return
    got = parse_line(raw)
    assert json.dumps(got) == json.dumps(expected) and repr(got) == repr(expected)


def test_a_ledger_row_with_an_extra_attribute_is_written_with_its_fields_only() -> None:
    rows = [DecisionRow(order=i, waves_open=1, group_index=i, outcome="trained", reason=None, remaining_before=1,
                        unique_rollouts=8, reward_sum=1.0) for i in range(3)]
    rows[1].scratch = float("nan")  # an attribute that is not a field: neither written nor converted
    line = json.loads(record_line(StepRecord(rollout_id=0, decisions=rows)))
    assert [set(row) for row in line["decisions"]] == [set(rows[0].to_dict())] * 3
    del rows[1].reward_sum  # a field gone: the record is still written
    assert json.loads(record_line(StepRecord(rollout_id=0, decisions=rows)))["rollout_id"] == 0
