"""No test reads a clock to judge speed, none depends on how fast the machine is, and none sleeps to provoke a race.

Speed is judged in ``benchmarks/``, as ratios measured side by side in one run (``make bench``). The rule
covers every file under ``tests/``: the tests, their helpers, and the code they run in other processes
(the ``train.py`` harness and the fake SGLang engine in ``tests/slime_train/``, the stubs):

- **Measuring clocks** (``perf_counter``, ``process_time``, ``thread_time``, ``time.time``) appear nowhere.
- **``time.monotonic()``** only bounds a wait: every use sits in a statement about a ``deadline``. A harness
  that runs real processes (slime's ``train.py``, Ray, the fake engine) may bound each wait for them so
  (``proc.wait(timeout=...)``, polling for a port or a log line under a deadline); it never keeps, prints or
  compares an elapsed time.
- **A modelled duration** is a timeout, not a reading: the fake engine makes a token each time a wait on its
  abort event runs out (it counts the waits, it reads no clock); a fake component's documented delay (slime's
  worker polling its pool, an engine's generation time) is a sleep marked ``# models ...``.
- **``sleep``** otherwise only polls for a condition under a deadline (a ``deadline`` in the loop around it),
  never to widen a window in which threads or processes could interleave: a test that checks a race
  makes the interleaving happen (an event, a barrier, a lock that says who holds it) or checks the invariant
  that excludes it on every call.

hypothesis's deadline and its "too slow" health check, which are clocks too, are off for every test
(``tests/conftest.py``).
"""

from __future__ import annotations

import re
from pathlib import Path

import hypothesis
from hypothesis import HealthCheck

TESTS = Path(__file__).resolve().parent
MEASURING = re.compile(r"\b(perf_counter(_ns)?|process_time(_ns)?|thread_time(_ns)?)\s*\(|\btime\.time(_ns)?\s*\(")
SLEEP = re.compile(r"\bsleep\s*\(")


def polls_under_a_deadline(lines: list[str], number: int) -> bool:
    """Whether line ``number`` (a sleep) is in a ``while`` loop with a ``deadline`` in its condition or body,
    or in the two lines that set it up.

    >>> polls_under_a_deadline(["deadline = 9", "while not ready():", "    time.sleep(1)", "time.sleep(1)"], 2)
    True
    >>> polls_under_a_deadline(["deadline = 9", "while not ready():", "    time.sleep(1)", "time.sleep(1)"], 3)
    False
    """
    indent = len(lines[number]) - len(lines[number].lstrip())
    for header in range(number - 1, -1, -1):
        text = lines[header].strip()
        depth = len(lines[header]) - len(lines[header].lstrip())
        if not text or depth >= indent:
            continue
        if text.startswith("while "):
            return any("deadline" in line for line in lines[max(0, header - 2):number + 1])
        indent = depth  # an enclosing block that is not the loop: look further out
    return False


def offending_lines(text: str) -> list[str]:
    """The lines of ``text`` that break the rule (see the module docstring).

    >>> offending_lines("t = time.perf_counter()\\ndeadline = time.monotonic() + 30\\nwaited = time.monotonic() - t")
    ['t = time.perf_counter()', 'waited = time.monotonic() - t']
    >>> offending_lines("deadline = time.monotonic() + 9\\nwhile not ready():\\n    time.sleep(0.1)\\ntime.sleep(0.001)")
    ['time.sleep(0.001)']
    >>> offending_lines("await asyncio.sleep(delay)  # models generation time")
    []
    """
    lines = text.splitlines()
    return [line.strip() for number, line in enumerate(lines)
            if MEASURING.search(line) or ("monotonic(" in line and "deadline" not in line)
            or (SLEEP.search(line) and "# models" not in line and not polls_under_a_deadline(lines, number))]


def test_no_test_or_helper_reads_a_clock_to_measure_or_sleeps_to_provoke_a_race():
    files = [path for path in sorted(TESTS.rglob("*.py")) if path != Path(__file__).resolve()]
    assert any(path.parent.name == "slime_train" for path in files)  # the harness and the fake engine are scanned
    found = {str(path.relative_to(TESTS)): lines for path in files if (lines := offending_lines(path.read_text()))}
    assert found == {}, "a test measures time or sleeps; speed belongs in benchmarks/ as a side-by-side ratio"


def test_hypothesis_runs_without_a_clock():
    for chosen in (hypothesis.settings.default, hypothesis.settings(max_examples=5)):  # a test's own settings too
        assert chosen.deadline is None
        assert HealthCheck.too_slow in chosen.suppress_health_check
