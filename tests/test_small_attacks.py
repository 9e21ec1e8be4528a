"""The smaller cases of an attack on the tools (issue 41, item 8): each one a test.

Terminal escapes in prompt keys, snapshot writes that keep failing and the temporary files kills leave, a
gap in the records, and the messages that gave the wrong advice or named the wrong thing.
"""

from __future__ import annotations

import json
import os
from dataclasses import replace
from pathlib import Path

import pytest

from dashboard_records import make_records
from shopsim_metrics.cli import main
from shopsim_metrics.sinks import JsonlSink


def _write(records, run_dir: Path) -> Path:
    sink = JsonlSink(run_dir, fsync=False)
    for record in records:
        sink.emit(record)
    sink.close()
    return run_dir


# --- prompt keys that hold terminal escapes ------------------------------------------------------------
HOSTILE_KEY = "evil\x1b[2J\x1b]0;owned\x07\x9b31m\u202e\ttab"


def test_prompts_escapes_every_control_character_of_a_prompt_key(tmp_path: Path, capsys) -> None:
    records = make_records(steps=4, terminate=False)
    first = records[0]
    records[0] = replace(first, decisions=[replace(row, prompt_key=HOSTILE_KEY) for row in first.decisions])
    assert main(["prompts", str(_write(records, tmp_path / "run")), "--top", "1000"]) == 0
    out = capsys.readouterr().out
    assert "evil" in out
    for raw in ("\x1b", "\x07", "\x9b", "\u202e", "\t"):
        assert raw not in out, repr(raw)
    assert "\\x1b[2J" in out


# --- snapshot writes that keep failing, and the temporary files kills leave --------------------------------
def test_every_failed_snapshot_write_is_warned(tmp_path: Path, caplog) -> None:
    """The checkpoint directory's rollout/ is a file: every snapshot write fails, and each says so (before, only
    the first did: a run whose later resumes all replay the records was told once, early)."""
    import logging

    from test_snapshot import run_steps

    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    (ckpt / "rollout").write_text("not a directory")
    with caplog.at_level(logging.WARNING, logger="shopsim_metrics"):
        run_steps(tmp_path / "run", ckpt, range(6), start=0, first_gids={})  # checkpoints after steps 1, 3, 5
    failed = [m for m in caplog.messages if "writing the monitor snapshot of step" in m]
    assert [m.split("step ")[1].split(" ")[0] for m in failed] == ["1", "3", "5"], caplog.messages


def test_temporary_files_left_by_a_kill_are_removed_by_the_next_write(tmp_path: Path) -> None:
    from shopsim_metrics.state_file import LEFTOVER_SECONDS, write_json

    folder = tmp_path / "rollout"
    folder.mkdir()
    old = folder / ".shopsim_monitor_state_4.json.4242.0123456789abcdef.tmp"  # a process killed mid-write
    fresh = folder / ".shopsim_monitor_state_9.json.4343.fedcba9876543210.tmp"  # another process writing now
    foreign = folder / ".something_else.tmp"
    for path in (old, fresh, foreign):
        path.write_text("{")
    past = fresh.stat().st_mtime - 2 * LEFTOVER_SECONDS  # the file system's own clock, not the test's
    os.utime(old, (past, past))
    os.utime(foreign, (past, past))
    write_json(folder / "shopsim_monitor_state_14.json", {"format": 1})
    assert not old.exists() and fresh.exists() and foreign.exists()
    assert json.loads((folder / "shopsim_monitor_state_14.json").read_text()) == {"format": 1}


# --- a gap in the records ------------------------------------------------------------------------------
def test_inspect_flags_steps_without_a_record(tmp_path: Path, capsys, caplog) -> None:
    """Steps 4..6 were held back while the disk was full, and the process was killed: no record of them."""
    import logging

    records = [r for r in make_records(steps=10, terminate=False) if r.rollout_id not in (4, 5, 6)]
    run = _write(records, tmp_path / "run")
    with caplog.at_level(logging.WARNING, logger="shopsim_metrics"):
        assert main(["inspect", str(run)]) == 0
    said = [m for m in caplog.messages if "no record" in m and "4-6" in m]
    assert len(said) == 1, caplog.messages


# --- messages that gave the wrong advice or named the wrong thing ----------------------------------------
@pytest.fixture
def trace(tmp_path: Path) -> Path:
    path = tmp_path / "trace.json"
    path.write_text(json.dumps({"a": [0.5, 1.0, 0.0, 0.5], "b": [0, 0.5, 0.5, 1], "c": [1, 1, 1, 0.5]}))
    return path


def _error(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    return err[0]


def test_a_wave_fill_probability_of_zero_is_refused_as_the_flag_it_is(trace: Path, capsys) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["replay", str(trace), "--n-samples-per-prompt", "2", "--wave-fill-probability", "0"])
    assert exit_.value.code == 2
    err = _error(capsys)
    assert "--wave-fill-probability" in err and "(0, 1]" in err and "YAML" not in err and "check-config" not in err


def test_predictive_skipping_with_groups_of_one_says_why_it_cannot_run(trace: Path, capsys) -> None:
    trace.write_text(json.dumps({"a": [0, 1, 1, 0], "b": [1, 1, 0, 1], "c": [0, 0, 1, 1]}))
    assert main(["replay", str(trace), "--n-samples-per-prompt", "1", "--prompt-skip", "predictive", "--seeds", "1",
                 "--no-progress"]) == 2
    err = _error(capsys)
    assert "above 1" not in err and "n_samples_per_prompt 1" in err and "every group is zero-std" in err


def test_the_zero_std_advisory_never_weighs_a_share_of_one_against_itself() -> None:
    """Groups of one rollout: every group is zero-std and every revisit too (1.00 against 1.00). Neither skipping
    nor over-sampling finds a group with spread; the advisory says so, not that skipping pays."""
    from shopsim_metrics.health.advisories import Advisor, StepFacts

    advisor = Advisor()
    alerts = [a for i in range(9) for a in advisor.observe(StepFacts(
        rollout_id=i, accepted=32, zero_std=32, all_fail=16, all_pass=16, waves=1, repeat_zero_std=32, skippable=32))]
    (alert,) = [a for a in alerts if "zero-std" in a.title]
    assert "skipping pays" not in alert.text and "over-sampling pays" not in alert.text
    assert "every judged group was zero-std" in alert.text and "n_samples_per_prompt" in alert.text


def test_a_setting_that_saves_nothing_visible_is_not_called_the_best() -> None:
    from shopsim_metrics.replay.command import best_line
    from shopsim_metrics.replay.measure import ReplayRow

    def row(skip, wave, ratio, lost):
        return ReplayRow(skip, wave, 1.0, ratio, lost, 0.0, 0.0, 0.0, 1, 1, [0], "x")

    line = best_line([row("off", "fixed", 1.0, 0.0), row("off", "adaptive", 1.004, 0.0)], 0.15)
    assert line.startswith("nothing saves tokens") and "1.00x fewer" not in line


def test_a_value_error_in_a_trace_names_the_file(trace: Path, capsys) -> None:
    trace.write_text(json.dumps({"a": [0.5, 1.5]}))
    assert main(["replay", str(trace), "--n-samples-per-prompt", "2", "--no-progress"]) == 2
    err = _error(capsys)
    assert str(trace) in err and "prompt 'a', visit 2: 1.5 is outside [0, 1]" in err


def test_a_json_trace_named_jsonl_and_records_named_json_are_read_for_what_they_hold(trace: Path, tmp_path: Path,
                                                                                     capsys) -> None:
    named_jsonl = tmp_path / "trace.jsonl"
    named_jsonl.write_text(trace.read_text())
    assert main(["replay", str(named_jsonl), "--n-samples-per-prompt", "2", "--steps", "2", "--seeds", "1",
                 "--no-progress", "--prompt-skip", "off", "--wave-size", "fixed"]) == 0
    assert "3 prompts, 12 visits" in capsys.readouterr().out
    run = _write(make_records(steps=6, terminate=False), tmp_path / "run")
    named_json = tmp_path / "records.json"
    named_json.write_bytes((run / "steps.jsonl").read_bytes())
    assert main(["replay", str(named_json), "--steps", "2", "--seeds", "1", "--no-progress", "--prompt-skip", "off",
                 "--wave-size", "fixed"]) in (0, 2)
    out = capsys.readouterr()
    assert "not JSON" not in out.err and "Extra data" not in out.err


def test_a_fifo_given_to_dashboard_html_is_named_a_fifo(tmp_path: Path, capsys) -> None:
    fifo = tmp_path / "steps.jsonl"
    os.mkfifo(fifo)
    assert main(["dashboard", "html", str(fifo), "--out", str(tmp_path / "d.html")]) == 2
    err = _error(capsys)
    assert "a FIFO (named pipe), not a file" in err and "no such file" not in err
