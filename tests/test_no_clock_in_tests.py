"""No test reads a clock to judge speed, and none depends on how fast the machine is.

Speed is judged in ``benchmarks/``, as ratios measured side by side in one run (``make bench``). In the
tests a clock may only bound a wait for another process or thread (a deadline that fails a hang),
never measure: every ``time.monotonic()`` sits in a statement about a deadline, and the measuring
clocks (``perf_counter``, ``process_time``, ``thread_time``, ``time.time``) appear nowhere, not even in
code a test runs in a subprocess. hypothesis's deadline and its "too slow" health check, which are
clocks too, are off for every test (``tests/conftest.py``).
"""

from __future__ import annotations

import re
from pathlib import Path

import hypothesis
from hypothesis import HealthCheck

TESTS = Path(__file__).resolve().parent
MEASURING = re.compile(r"\b(perf_counter(_ns)?|process_time(_ns)?|thread_time(_ns)?)\s*\(|\btime\.time(_ns)?\s*\(")


def offending_lines(text: str) -> list[str]:
    """The lines of ``text`` that read a clock to measure (see the module docstring).

    >>> offending_lines("t = time.perf_counter()\\ndeadline = time.monotonic() + 30\\nwaited = time.monotonic() - t")
    ['t = time.perf_counter()', 'waited = time.monotonic() - t']
    """
    return [line.strip() for line in text.splitlines()
            if MEASURING.search(line) or ("monotonic(" in line and "deadline" not in line)]


def test_no_test_reads_a_clock_to_measure():
    found = {path.name: lines for path in sorted(TESTS.glob("*.py")) if path.name != Path(__file__).name
             if (lines := offending_lines(path.read_text()))}
    assert found == {}, "a test measures time; speed belongs in benchmarks/ as a side-by-side ratio"


def test_hypothesis_runs_without_a_clock():
    for chosen in (hypothesis.settings.default, hypothesis.settings(max_examples=5)):  # a test's own settings too
        assert chosen.deadline is None
        assert HealthCheck.too_slow in chosen.suppress_health_check
