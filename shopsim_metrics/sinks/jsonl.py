"""The local record: ``<run_dir>/steps.jsonl``, one JSON object per finished step.

Each record is one line, appended and flushed (and fsync'ed) when the step is emitted, so a finished
step's line survives a crash. The rules of the file (docs §1.4):

- every value is JSON-native (:mod:`shopsim_metrics.record.json_values`): numpy / torch scalars unwrapped,
  non-finite numbers ``null``, anything odd stringified; one odd value never costs a step its record;
- lines are whole, one live writer per file, no symlinks followed (:mod:`.line_file`);
- records that cannot be written (disk full, I/O error) are **held back** in memory, in order, and
  written as soon as writing works again. At most ``held_back_limit`` (1,000) are held: beyond that
  the oldest held-back record is dropped and counted. One warning when writing starts failing, one
  when it recovers (with the number of steps held back and written late); :meth:`JsonlSink.close`
  gives held-back records a last try and logs an error naming any that are lost.

:func:`shopsim_metrics.readers.steps.read_steps` reads it back by the rules of the records file (bad
lines skipped and counted, the latest record of each ``rollout_id`` wins).

Example:
    >>> import tempfile, pathlib
    >>> from shopsim_metrics.record.records import StepRecord
    >>> d = pathlib.Path(tempfile.mkdtemp())
    >>> sink = JsonlSink(d)
    >>> sink.emit(StepRecord(rollout_id=0)); sink.emit(StepRecord(rollout_id=1))
    >>> from shopsim_metrics.readers.steps import read_steps
    >>> [r.rollout_id for r in read_steps(d / "steps.jsonl")]
    [0, 1]
"""

from __future__ import annotations

import json
import logging
import os
import threading
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any

from shopsim_metrics.record.contract import STEPS_FILE_NAME
from shopsim_metrics.record.json_values import json_native
from shopsim_metrics.record.records import StepRecord
from shopsim_metrics.sinks.base import StepSink
from shopsim_metrics.sinks.line_file import LineFile

logger = logging.getLogger("shopsim_metrics")

HELD_BACK_LIMIT = 1000  # records kept in memory while writing fails (the most recent ones)


def record_line(record: StepRecord) -> bytes:
    """One record as one line of strict JSON (no NaN/Infinity, UTF-8), never raising for odd values.

    Non-ASCII text is written as UTF-8; a lone surrogate (which UTF-8 cannot hold) as its ``\\udXXX``
    escape, which reads back as the same string.

    >>> record_line(StepRecord(rollout_id=3, reward_mean=float("nan")))[:40]
    b'{"rollout_id":3,"terminated":false,"roll'
    """
    try:
        data: Any = record.to_dict()
    except Exception:  # noqa: BLE001 - an unreadable field still leaves the step a record
        data = json_native(getattr(record, "__dict__", {"rollout_id": getattr(record, "rollout_id", None)}))
    text = json.dumps(data, allow_nan=False, ensure_ascii=False, separators=(",", ":")) + "\n"
    return text.encode("utf-8", "backslashreplace")  # a lone surrogate becomes its JSON escape


class JsonlSink(StepSink):
    """Appends each step record as one line of ``steps.jsonl`` in ``run_dir`` (see the module doc).

    ``write`` is the system call used for writing (``os.write``): a seam for tests of a full disk.
    Counters: ``held_back_count`` (records waiting now), ``written_late_count`` and ``dropped_count``
    (over the sink's life).
    """

    name = "jsonl"

    def __init__(self, run_dir: str | os.PathLike, *, fsync: bool = True, held_back_limit: int = HELD_BACK_LIMIT,
                 write: Callable[[int, bytes], int] = os.write) -> None:
        if held_back_limit < 1:
            raise ValueError(f"held_back_limit must be at least 1, got {held_back_limit!r}")
        self.run_dir = Path(run_dir)
        self.held_back_limit = held_back_limit
        self._file = LineFile(self.run_dir / STEPS_FILE_NAME, fsync=fsync, write=write)
        self._lock = threading.Lock()
        self._held: deque[tuple[Any, bytes]] = deque()  # (rollout_id, line), oldest first
        self.written_late_count = 0
        self.dropped_count = 0
        self._failing = False  # a failing spell: writing failed and the held-back records wait
        self._spell_held = 0
        self._spell_dropped = 0

    @property
    def path(self) -> Path:
        """The file this sink writes: ``steps.jsonl``, or its sibling when that one was refused."""
        return self._file.path

    @property
    def fsync(self) -> bool:
        return self._file.fsync

    @property
    def held_back_count(self) -> int:
        return len(self._held)

    def emit(self, record: StepRecord) -> None:
        line = record_line(record)
        with self._lock:
            self._write_held()  # records held back earlier go first (and make room if writing works again)
            self._hold(getattr(record, "rollout_id", None), line)
            self._write_held(just_emitted=True)

    def close(self) -> None:
        """Last try for held-back records (an error names any that stay lost), then release the file."""
        with self._lock:
            self._write_held()
            if self._held:
                ids = [rid for rid, _ in self._held]
                logger.error(
                    "shopsim-metrics: %d step record(s) could not be written to %s and are lost "
                    "(rollout_id %s to %s, held back since writing started failing; %d older ones "
                    "were dropped beyond the %d held back).",
                    len(ids), self.path, ids[0], ids[-1], self._spell_dropped, self.held_back_limit)
                self._held.clear()
                self._failing = False
            self._file.close()

    # --- internals -----------------------------------------------------------------------------
    def _hold(self, rollout_id: Any, line: bytes) -> None:
        if len(self._held) >= self.held_back_limit:
            self._held.popleft()
            self.dropped_count += 1
            self._spell_dropped += 1
            if self._spell_dropped == 1:
                logger.warning(
                    "shopsim-metrics: more than %d step records are held back because %s cannot be "
                    "written; the oldest held-back records are dropped from now on (counted, reported "
                    "when writing works again).", self.held_back_limit, self.path)
        self._held.append((rollout_id, line))

    def _write_held(self, just_emitted: bool = False) -> None:
        """Write the held-back records, oldest first; ``just_emitted``: the newest was never tried."""
        if not self._held:
            return
        written, error = self._file.write_lines([line for _, line in self._held])
        for _ in range(written):
            self._held.popleft()
        if error is not None:
            if self._failing:
                self._spell_held += int(just_emitted)  # the new record joins those already waiting
            else:
                self._failing = True
                self._spell_held, self._spell_dropped = len(self._held), 0
                logger.warning(
                    "shopsim-metrics: could not write the step record of rollout_id %s to %s (%s: %s). "
                    "Training goes on; records are held back in memory (up to %d steps) and written in "
                    "order as soon as writing works again.",
                    self._held[0][0], self.path, type(error).__name__, error, self.held_back_limit)
            return
        if self._failing:
            late = self._spell_held - self._spell_dropped
            self.written_late_count += late
            logger.warning(
                "shopsim-metrics: writing to %s works again: %d step record(s) held back were written "
                "late%s.", self.path, late,
                f"; {self._spell_dropped} older one(s) were dropped beyond the {self.held_back_limit} "
                "held back" if self._spell_dropped else "")
            self._failing = False


def steps_files(run_dir: str | os.PathLike) -> list[Path]:
    """Every records file of a run directory: ``steps.jsonl`` and the ``steps.<suffix>.jsonl`` files a
    second writer leaves beside it, oldest modification first (so later files win in :func:`~shopsim_metrics.readers.steps.read_steps`).
    Symbolic links are left out, as the writer never follows them.

    >>> import tempfile, pathlib
    >>> d = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (d / "steps.jsonl").write_text(""); _ = (d / "other.jsonl").write_text("")
    >>> [p.name for p in steps_files(d)]
    ['steps.jsonl']
    """
    run_dir = Path(run_dir)
    stem, suffix = os.path.splitext(STEPS_FILE_NAME)
    found = [p for p in run_dir.glob(f"{stem}*{suffix}")
             if p.is_file() and not p.is_symlink() and (p.name == STEPS_FILE_NAME or p.name.startswith(f"{stem}."))]
    return sorted(found, key=lambda p: (p.stat().st_mtime_ns, p.name != STEPS_FILE_NAME, p.name))
