"""The local record: ``<run_dir>/steps.jsonl``, one JSON object per finished step.

Appended and flushed (and fsync'ed) when a step is emitted, so a finished step's line survives a
crash. :func:`read_steps` tolerates a torn last line (a crash mid-write) with one warning.

Example:
    >>> import tempfile, pathlib
    >>> from shopsim_metrics.records import StepRecord
    >>> d = pathlib.Path(tempfile.mkdtemp())
    >>> sink = JsonlSink(d)
    >>> sink.emit(StepRecord(rollout_id=0)); sink.emit(StepRecord(rollout_id=1))
    >>> [r.rollout_id for r in read_steps(d / "steps.jsonl")]
    [0, 1]
"""

from __future__ import annotations

import json
import logging
import os
import threading
from pathlib import Path

from shopsim_metrics.contract import STEPS_FILE_NAME
from shopsim_metrics.records import StepRecord
from shopsim_metrics.sinks.base import StepSink

logger = logging.getLogger("shopsim_metrics")


class JsonlSink(StepSink):
    """Appends each step record as one line of ``steps.jsonl`` in ``run_dir``."""

    name = "jsonl"

    def __init__(self, run_dir: str | os.PathLike, *, fsync: bool = True) -> None:
        self.run_dir = Path(run_dir)
        self.path = self.run_dir / STEPS_FILE_NAME
        self.fsync = fsync
        self._lock = threading.Lock()

    def emit(self, record: StepRecord) -> None:
        line = json.dumps(record.to_dict(), allow_nan=False, separators=(",", ":")) + "\n"
        with self._lock:
            self.run_dir.mkdir(parents=True, exist_ok=True)
            with open(self.path, "a", encoding="utf-8") as fh:
                fh.write(line)
                fh.flush()
                if self.fsync:
                    os.fsync(fh.fileno())


def read_steps(path: str | os.PathLike) -> list[StepRecord]:
    """Read every complete step of a ``steps.jsonl`` file (or of the run directory holding it).

    A last line that is not valid JSON (torn by a crash) is skipped with a warning; a bad line in
    the middle of the file is an error, because that is not what a crash leaves.
    """
    path = Path(path)
    if path.is_dir():
        path = path / STEPS_FILE_NAME
    if not path.exists():
        raise FileNotFoundError(f"no step records at {path}: expected a {STEPS_FILE_NAME} written by the JSONL sink")
    lines = path.read_text(encoding="utf-8").splitlines()
    records: list[StepRecord] = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            data = json.loads(line)
        except json.JSONDecodeError as exc:
            if number == len(lines):
                logger.warning("shopsim-metrics: skipped a torn last line (%d) of %s: %s", number, path, exc)
                break
            raise ValueError(f"{path}:{number} is not valid JSON ({exc}); only the last line may be torn") from exc
        records.append(StepRecord.from_dict(data))
    return records
