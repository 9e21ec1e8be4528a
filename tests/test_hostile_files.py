"""The command line on damaged and hostile inputs: one line on stderr and exit code 2, or a complete read
that counts the lines it skipped. Never a traceback.

Every command that reads a run (``inspect``, ``inspect --json``, ``tune --from``, ``dashboard html``) is
run over a corpus of damaged ``steps.jsonl`` files (in this process, through ``main``; a closed pipe and a
missing W&B key in a subprocess, as a user meets them).
"""

from __future__ import annotations

import contextlib
import io
import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

from shopsim_metrics.record.records import DecisionRow, StepRecord
from shopsim_metrics.sinks import JsonlSink

GOOD_STEPS = 4


def _good_lines(tmp_path: Path) -> list[str]:
    run = tmp_path / "good"
    sink = JsonlSink(run, fsync=False)
    for rid in range(GOOD_STEPS):
        rows = [DecisionRow(order=k + 1, waves_open=1, group_index=k, outcome="trained", reason=None,
                            remaining_before=16 - k, unique_rollouts=8) for k in range(3)]
        sink.emit(StepRecord(rollout_id=rid, wave_count=1 + rid % 2, accepted_group_count=20, train_group_count=16,
                             zero_std_group_count=3, technical_group_drop_count=1, rollout_batch_size=16,
                             decisions=rows))
    return (run / "steps.jsonl").read_text().splitlines()


def _nested(depth: int) -> str:
    return "[" * depth + "]" * depth


# name -> (bytes of the file, records a complete read finds: None = the file holds none -> one-line error)
def _corpus(good: list[str]) -> dict[str, tuple[bytes, int | None]]:
    text = lambda lines: ("\n".join(lines) + "\n").encode()  # noqa: E731
    return {
        "torn_last": (text(good)[:-40], GOOD_STEPS - 1),
        "torn_middle": (text([good[0], good[1][:50], *good[2:]]), GOOD_STEPS - 1),
        "duplicated": (text([*good, *good[1:3]]), GOOD_STEPS),
        "list_string_null": (text([good[0], "[1, 2]", '"str"', "null", "true", "42", *good[1:]]), GOOD_STEPS),
        "nested_object": (text([good[0], '{"rollout_id": 1, "x": ' + _nested(100_000) + "}", *good[1:]]), GOOD_STEPS),
        "nested_list": (text([_nested(200_000), *good]), GOOD_STEPS),
        "wrong_types": (text([good[0], '{"rollout_id": 9, "wave_count": "<script>"}',
                              '{"rollout_id": 10, "decisions": [1]}', '{"rollout_id": true}', *good[1:]]), GOOD_STEPS),
        "binary_lines": (text(good[:2]).replace(b"\n", b"\n\xff\xfe\x00\x9c\n", 1) + text(good[2:]), GOOD_STEPS),
        "empty": (b"", None),
        "blank_lines": (b"\n\n   \n", None),
        "foreign": (text([json.dumps({"event": "login", "user": k}) for k in range(5)]), None),
        "foreign_lists": (text(["[1, 2, 3]"] * 3), None),
        "nulls": (text(["null"] * 3), None),
        "binary": (bytes(range(256)) * 64, None),
        "nested_only": (text([_nested(100_000)]), None),
    }


COMMANDS = {
    "inspect": ["inspect", "{src}"],
    "inspect_json": ["inspect", "--json", "{src}"],
    "tune": ["tune", "--from", "{src}", "--candidates", "16", "--steps", "5", "--jobs", "1"],
    "dashboard": ["dashboard", "html", "--from", "{src}", "--out", "{out}"],
}


def _run_here(args: list[str]) -> subprocess.CompletedProcess:
    """``main(args)`` in this process; stderr holds what the terminal would show (warnings included)."""
    from shopsim_metrics.cli import main

    out, err = io.StringIO(), io.StringIO()
    handler = logging.StreamHandler(err)
    logger = logging.getLogger("shopsim_metrics")
    logger.addHandler(handler)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = main(args)
            except SystemExit as exc:  # argparse
                code = exc.code
    finally:
        logger.removeHandler(handler)
    return subprocess.CompletedProcess(args, code, out.getvalue(), err.getvalue())


def _run(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    env.pop("SHOPSIM_METRICS_TRACEBACK", None)
    return subprocess.run([sys.executable, "-m", "shopsim_metrics.cli", *args], capture_output=True, text=True,
                          cwd=cwd, env=env, timeout=300)


def _assert_one_line_error(proc: subprocess.CompletedProcess, *, command: str) -> None:
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith(f"shopsim-metrics {command}") or lines[0].startswith("tune:"), lines[0]


def test_damaged_files_give_one_line_or_a_complete_read_with_a_count(tmp_path: Path) -> None:
    corpus = _corpus(_good_lines(tmp_path))
    for name, (content, expected) in corpus.items():
        src = tmp_path / name / "steps.jsonl"
        src.parent.mkdir()
        src.write_bytes(content)
        for label, template in COMMANDS.items():
            out = tmp_path / name / f"{label}.html"
            proc = _run_here([a.format(src=src, out=out) for a in template])
            context = f"{name} / {label}: rc={proc.returncode}\n{proc.stderr[-2000:]}"
            assert "Traceback" not in proc.stderr, context
            if expected is None:
                _assert_one_line_error(proc, command=template[0])
                assert str(src) in proc.stderr and ("no step record" in proc.stderr), context
                continue
            assert proc.returncode == 0, context
            if label == "inspect":
                ids = [int(row.split()[0]) for row in proc.stdout.splitlines()[1:-3]]  # header; summary, cost, legend
                assert len(ids) == expected and ids == sorted(set(ids)), context
                summary = proc.stdout.splitlines()[-3]
                assert summary.startswith(f"{expected} steps"), context
                if name != "duplicated":
                    assert "skipped" in summary and "bad line" in summary, context
                else:
                    assert "2 earlier step record(s)" in summary, context
            elif label == "inspect_json":
                ids = [json.loads(line)["rollout_id"] for line in proc.stdout.splitlines()]
                assert sorted(ids) == sorted(set(ids)) and len(ids) == expected, context
            elif label == "dashboard":
                assert out.is_file() and out.stat().st_size > 1000, context
            warnings = [line for line in proc.stderr.splitlines() if "skipped" in line]
            assert len(warnings) == (0 if name == "duplicated" else 1), context


def test_unreadable_inputs_and_unwritable_outputs_are_one_line(tmp_path: Path) -> None:
    good = _good_lines(tmp_path)
    run = tmp_path / "run"
    run.mkdir()
    (run / "steps.jsonl").write_text("\n".join(good) + "\n")
    blocker = tmp_path / "a_file"
    blocker.write_text("x")
    cases = [
        (["inspect", str(tmp_path / "missing")], "inspect"),
        (["inspect", str(tmp_path)], "inspect"),  # a directory without steps.jsonl
        (["dashboard", "html", "--from", str(run), "--out", str(tmp_path)], "dashboard"),  # --out a directory
        (["dashboard", "html", "--from", str(run), "--out", str(blocker / "d.html")], "dashboard"),  # under a file
        (["tune", "--zero-std-rate", "0.3", "--candidates", "99999999999999999999"], "shopsim-metrics tune"),
        (["tune", "--zero-std-rate", "0.3", "--steps", "99999999999999999999"], "shopsim-metrics tune"),
        (["demo", "--steps", "0"], "shopsim-metrics demo"),
        (["tune", "--zero-std-rate", "nan"], "shopsim-metrics tune"),
        (["dashboard", "spec", "--out", str(blocker / "panels.json")], "dashboard"),
        (["dashboard", "wandb", "--dry-run", "--out", str(blocker)], "dashboard"),
        (["no-such-command"], "shopsim-metrics"),
    ]
    if os.geteuid() != 0:  # root reads everything
        locked = tmp_path / "locked.jsonl"
        locked.write_text(good[0] + "\n")
        locked.chmod(0)
        cases.append((["inspect", str(locked)], "inspect"))
    for args, command in cases:
        proc = _run_here(args)
        assert proc.returncode == 2, (args, proc.stderr)
        lines = proc.stderr.splitlines()
        assert len(lines) == 1 and "Traceback" not in proc.stderr, (args, proc.stderr)
        assert command.split()[-1] in lines[0], (args, lines[0])


def test_inspect_into_a_closed_pipe_exits_quietly(tmp_path: Path) -> None:
    run = tmp_path / "run"
    sink = JsonlSink(run, fsync=False)
    for rid in range(20_000):
        sink.emit(StepRecord(rollout_id=rid, wave_count=1))
    cmd = f"{sys.executable} -m shopsim_metrics.cli inspect {run} | head -n 3"
    proc = subprocess.run(["bash", "-o", "pipefail", "-c", cmd], capture_output=True, text=True, timeout=300)
    assert len(proc.stdout.splitlines()) == 3
    assert proc.stderr == "", proc.stderr
    assert proc.returncode == 2


def test_wandb_without_an_api_key_says_how_to_log_in_or_dry_run(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("WANDB_")}
    env.update(HOME=str(tmp_path), WANDB_CONFIG_DIR=str(tmp_path / "wandb-config"), WANDB_MODE="offline",
               NETRC=str(tmp_path / "netrc"))
    proc = subprocess.run([sys.executable, "-m", "shopsim_metrics.cli", "dashboard", "wandb", "--entity", "e",
                           "--project", "p"], capture_output=True, text=True, cwd=tmp_path, env=env, timeout=300)
    assert proc.returncode == 2, proc.stderr
    (line,) = proc.stderr.splitlines()
    assert "wandb login" in line and "--dry-run" in line


@pytest.mark.parametrize("content", [b"[" * 100_000, b'{"rollout_id": 0}\n' + b"{" * 50_000])
def test_read_steps_never_raises_recursion_error(tmp_path: Path, content: bytes) -> None:
    from shopsim_metrics.readers.steps import NoStepRecords, read_step_columns

    (tmp_path / "steps.jsonl").write_bytes(content)
    try:
        table = read_step_columns(tmp_path)
    except NoStepRecords:
        return
    assert table.rollout_ids == [0] and table.report.skipped_lines == 1


@pytest.mark.parametrize("line", [
    b'{"filter_seconds": 0.0027167000025656307, "n": 1}',  # a small float: 19 digits of fraction
    b'[1.000000000000000000000000000001]',
    b'[123456789012345678901, 0.5]',  # beyond 64 bits: the integer is kept
    b'[0.5, -123456789012345678901]',
    b'123456789012345678901',
    b'["x.1234567890123456789", 7]',
    b'[1e1234567890123456789]',
])
def test_lines_are_read_as_json_loads_reads_them(line: bytes) -> None:
    from shopsim_metrics.readers import steps as steps_reader

    expected = json.loads(line)
    assert repr(steps_reader.parse_line(line)) == repr(expected)
