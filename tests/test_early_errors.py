"""Errors early and true: every input checked before the work it would waste, each error naming the file and the
value; and the progress of a long replay moves."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from shopsim_metrics.cli import main
from shopsim_metrics.replay import command as replay_command
from shopsim_metrics.simulator.progress import LINE_SECONDS, Progress

torch = pytest.importorskip("torch")

from test_dumps import simple_run, slime_sample, write_slime_step  # noqa: E402 - after torch's import check


def _error(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    return err[0]


@pytest.fixture
def no_replay(monkeypatch):
    """The replay's work, refused: an error that comes only after it fails the test."""
    def refused(*args, **kwargs):
        raise AssertionError("the replay ran before the error")

    monkeypatch.setattr(replay_command, "replay_rows", refused)


def test_replay_json_into_a_missing_directory_fails_before_the_replay(tmp_path: Path, capsys, no_replay) -> None:
    trace = tmp_path / "trace.json"
    trace.write_text(json.dumps({str(i): [0.5, 0.0, 1.0] for i in range(8)}))
    out = tmp_path / "nonexistent" / "x"
    assert main(["replay", str(trace), "--n-samples-per-prompt", "2", "--no-progress", "--json", str(out)]) == 2
    err = _error(capsys)
    assert "--json" in err and str(out) in err and "does not exist" in err, err


def test_a_threshold_that_cannot_work_at_the_dumps_group_size_fails_before_the_replay(tmp_path: Path, capsys,
                                                                                     no_replay) -> None:
    """Before: on an n = 2 dump the predictive rule's threshold error came after the replay of off (7 s at 20,000
    prompts, minutes at a million, with nothing printed)."""
    simple_run(tmp_path / "dump", steps=3, groups=4, n=2)
    assert main(["replay", str(tmp_path / "dump"), "--whole-run", "--no-progress",
                 "--prompt-skip-threshold", "0.7"]) == 2
    err = _error(capsys)
    assert str(tmp_path / "dump") in err and "0.7" in err and "0.75" in err and "groups of 2" in err, err


def test_a_response_length_no_response_can_have_names_the_file_and_the_value(tmp_path: Path, capsys) -> None:
    """Before: "Python int too large to convert to C long", with no file named."""
    samples = [slime_sample(0, i, "q", float(i % 2)) for i in range(4)]
    samples[2]["response_length"] = 10**30
    path = write_slime_step(tmp_path / "dump" / "rollout_0.pt", 0, samples)
    assert main(["replay", str(path.parent), "--whole-run", "--no-progress"]) == 2
    err = _error(capsys)
    assert str(path) in err and "response_length" in err and "an integer of 31 digits" in err and "sample 2" in err


def test_duplicate_sample_indices_in_a_group_get_a_true_message(tmp_path: Path, capsys) -> None:
    """Before: the group read as one rollout, and the error spoke of "n_samples_per_prompt 1"."""
    for step in range(3):
        write_slime_step(tmp_path / f"rollout_{step}.pt", step,
                         [slime_sample(step, 7, "q", float(step % 2)) for _ in range(4)])
    assert main(["replay", str(tmp_path), "--whole-run", "--no-progress", "--prompt-skip", "predictive"]) == 2
    err = _error(capsys)
    assert "n_samples_per_prompt 1" not in err and "rollout_0.pt" in err and "index 7" in err, err
    assert "group 0" in err, err


def test_a_group_index_jump_to_1e15_is_refused_with_a_clear_message(tmp_path: Path, capsys) -> None:
    """Before: accepted, with a note of 7,999,999,999,999,992 groups not in the dump."""
    simple_run(tmp_path, steps=2, groups=4, n=4)
    write_slime_step(tmp_path / "rollout_2.pt", 2, [slime_sample(10**15, 100 + i, "q", float(i % 2))
                                                    for i in range(4)])
    assert main(["replay", str(tmp_path), "--whole-run", "--no-progress"]) == 2
    err = _error(capsys)
    assert "rollout_2.pt" in err and "1,000,000,000,000,000" in err and "group_index" in err, err
    assert "not in the dump" not in err


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_a_long_waits_progress_moves_in_a_log_between_its_parts() -> None:
    """Before: a replay of 10 million steps printed "0/10261256 steps" and nothing more for 400 s (its lines came
    every 2% of the total only)."""
    log, clock = io.StringIO(), FakeClock()
    with Progress(10_261_256, unit="step", desc="replayed steps", stream=log, parts=50, clock=clock) as bar:
        for _ in range(3):
            bar.update()
        assert log.getvalue().splitlines() == ["replayed steps: 0/10261256 steps"]
        clock.now += LINE_SECONDS
        bar.update(setting="off/fixed")
        clock.now += LINE_SECONDS / 2
        bar.update()
        assert log.getvalue().splitlines()[-1] == "replayed steps: 4/10261256 steps, setting off/fixed"
    assert len(log.getvalue().splitlines()) == 3
