"""Waits longer than a few seconds show progress with a total; a log (not a terminal) gets lines, never ``\\r``."""

from __future__ import annotations

import io

from shopsim_metrics.cli import main
from shopsim_metrics.simulator.progress import Progress


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_log_gets_plain_lines_with_the_total_and_a_terminal_a_bar() -> None:
    log = io.StringIO()
    with Progress(10, unit="step", desc="steps", stream=log) as progress:
        for _ in range(10):
            progress.update(waves=1)
    lines = log.getvalue().splitlines()
    assert lines[0] == "steps: 0/10 steps" and lines[-1] == "steps: 10/10 steps (done)"
    assert len(lines) <= 6 and "\r" not in log.getvalue()  # start, quarters, end: not one line per step
    terminal = Terminal()
    with Progress(3, unit="step", desc="steps", stream=terminal) as progress:
        for _ in range(3):
            progress.update()
    assert "\r" in terminal.getvalue() and "3/3" in terminal.getvalue()


def test_a_long_wait_asks_for_more_lines_each_with_the_figures_it_was_last_given() -> None:
    log = io.StringIO()
    with Progress(200, unit="step", desc="replayed steps", stream=log, parts=50) as progress:
        for i in range(200):
            progress.update(setting="greso/adaptive" if i >= 100 else "off/fixed")
    lines = log.getvalue().splitlines()
    assert len(lines) == 51  # the start, every 2%, and the end
    assert lines[1] == "replayed steps: 4/200 steps, setting off/fixed"
    assert lines[-2] == "replayed steps: 196/200 steps, setting greso/adaptive"
    assert lines[-1] == "replayed steps: 200/200 steps (done)"


def test_a_total_that_grows_is_shown_grown() -> None:
    log = io.StringIO()
    with Progress(2, unit="candidate", desc="c", stream=log) as progress:
        progress.update()
        progress.update()
        progress.grow(3)
        progress.update()
    assert log.getvalue().splitlines()[-1] == "c: 3/3 candidates (done)"


def test_tune_shows_its_candidates_progress_in_a_log(capsys) -> None:
    assert main(["tune", "--zero-std-rate", "0.3", "--steps", "3", "--candidates", "16,32", "--no-widen"]) == 0
    err = capsys.readouterr().err
    assert "simulating candidates: 0/2 candidates" in err and "simulating candidates: 2/2 candidates (done)" in err
    assert "\r" not in err
