"""One run per records directory: the run's identity, and the refusal of a fresh run into another's records.

Every record carries the ``run_id`` of its run, the writing process's place among the run's processes
(``process_generation``: 0 for the first, 1 + the highest it learnt of for a resumed one), its start
(``process_started_at``), the step it started at (``process_start_rollout_id``) and its
``record_sequence``: the readers order writes by them and follow the run's lineage
(:class:`~shopsim_metrics.readers.steps.Winners`). A run's first process (``start_rollout_id``
0) makes a new ``run_id``; a resumed process (``--load``, ``start_rollout_id`` > 0) keeps the one
its records carry. A fresh run whose directory already holds step records (another run's, or an
earlier attempt's) is refused before its first step (:class:`RunDirInUse`): it never merges with them.

Example:
    >>> import tempfile, pathlib
    >>> d = pathlib.Path(tempfile.mkdtemp())
    >>> check_fresh_run_dir(d)            # empty: fine
    >>> _ = (d / "steps.jsonl").write_text('{"rollout_id": 0, "run_id": "abc"}\\n')
    >>> try:
    ...     check_fresh_run_dir(d)
    ... except RunDirInUse as exc:
    ...     "records of run abc" in str(exc)
    True
"""

from __future__ import annotations

import os
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

from shopsim_metrics.settings import ShopsimConfigError



class RunDirInUse(ShopsimConfigError):
    """A fresh run (``start_rollout_id`` 0) was pointed at a directory holding another run's step records."""

WRITER_FIELDS = ("run_id", "process_started_at", "process_start_rollout_id", "process_generation")
"""The record fields that say which process wrote it: two runs of the same seed differ only in them
(and in the wall-clock ``*_seconds``); a resumed run's records also in ``process_start_rollout_id`` and
``process_generation``."""


def new_run_id() -> str:
    """A new run's identity: its start time and a random part, sortable and unique.

    >>> a, b = new_run_id(), new_run_id()
    >>> a != b and len(a) == 24
    True
    """
    return time.strftime("%Y%m%dT%H%M%S", time.gmtime()) + "-" + uuid.uuid4().hex[:8]


def existing_run(run_dir: str | os.PathLike) -> tuple[bool, str | None]:
    """Whether ``run_dir`` holds a step record, and the ``run_id`` of the first one found (None: unnamed).

    Reads at most :data:`FIRST_RECORD_LINES` lines of each records file; never raises for what they hold.
    """
    from shopsim_metrics.sinks.jsonl import steps_files
    from shopsim_metrics.readers.steps import first_records

    try:
        files = steps_files(run_dir) if Path(run_dir).is_dir() else []
    except OSError:
        return False, None
    for path in files:
        for data in first_records(path):
            run_id = data.get("run_id")
            return True, run_id if isinstance(run_id, str) else None
    return False, None


def check_fresh_run_dir(run_dir: str | os.PathLike) -> None:
    """Raise :class:`RunDirInUse` when ``run_dir`` already holds step records (a fresh run must not merge)."""
    found, run_id = existing_run(run_dir)
    if not found:
        return
    whose = f"run {run_id}" if run_id else "an earlier run"
    raise RunDirInUse(
        f"shopsim-metrics: {os.fspath(run_dir)} already holds the step records of {whose}, and this run starts "
        "fresh (start_rollout_id 0): its records would merge with them. Resume that run with --load, point "
        "shopsim_run_dir (or --save) at a new directory, or move the old steps*.jsonl away.")


@dataclass
class Lineage:
    """This process's place in its run, as every record and snapshot says it (the fields of :data:`WRITER_FIELDS`),
    with what a resume learnt: the run's other processes and the steps before it that no record holds.

    Example:
        >>> lineage = Lineage.fresh(start_rollout_id=0)
        >>> sorted(lineage.identity()) == sorted(WRITER_FIELDS), lineage.process_generation
        (True, 0)
    """

    run_id: str
    """The run's identity: new for a fresh run, the records' own for a resumed one."""
    process_started_at: float
    """When this process's monitor started (the readers order writes by it)."""
    process_start_rollout_id: int
    process_generation: int = 0
    """0 for the run's first process; a resumed one follows every process it learnt of."""
    known_writers: tuple[dict[str, Any], ...] = ()
    """The run's processes a resume learnt of (handed on by the snapshots)."""
    missing_steps: int = 0
    """Steps before ``start_rollout_id`` a resume found no record of (the snapshots say it on)."""

    @classmethod
    def fresh(cls, start_rollout_id: int) -> "Lineage":
        """A new process's lineage, before a resume (if any) restores the run's."""
        return cls(run_id=new_run_id(), process_started_at=time.time(), process_start_rollout_id=start_rollout_id)

    def resuming(self) -> None:
        """A resumed process (``start_rollout_id`` > 0): the run's second at least, unless the restore learns of later ones."""
        self.process_generation = 1

    def restored(self, *, run_id: str | None, generation: int, writers: tuple[dict[str, Any], ...], missing: int) -> None:
        """What a resume learnt from the run's records and snapshot: the run's ``run_id`` (None: none recorded, this
        process's stays), this process's generation, the run's other processes, the steps no record holds."""
        if run_id is not None:
            self.run_id = run_id  # a resumed run stays the same run
        self.process_generation, self.known_writers, self.missing_steps = generation, writers, missing

    def writer(self) -> dict[str, Any]:
        """The writing process as its records and snapshots say it."""
        return {"process_started_at": self.process_started_at,
                "process_start_rollout_id": self.process_start_rollout_id,
                "process_generation": self.process_generation}

    def identity(self) -> dict[str, Any]:
        """Every record's writer fields: the run and the writing process."""
        return {"run_id": self.run_id, **self.writer()}


class RunWriters:
    """The processes known to have written a run's records, each as its records say it (its generation, start
    and resume step: :data:`~shopsim_metrics.readers.steps.WRITER_KEYS`).

    A resumed process starts from those its restore learnt of (the records it read, the snapshot's writer and
    the processes that writer knew) and, before each snapshot, learns of the writers of what the other records
    files gained since it last looked (:meth:`catch_up`: normally nothing, never its own file). A snapshot
    hands them on, so a resume from it knows of a process whose records precede the snapshot's positions (a
    later process that resumed while a stale writer still ran: the warning of docs §1.4), and of the highest
    generation (a resumed process follows all of them).

    Example:
        >>> import tempfile
        >>> writers = RunWriters(tempfile.mkdtemp(), [{"process_generation": 1, "process_started_at": 5.0,
        ...                                            "process_start_rollout_id": 3}])
        >>> writers.catch_up(); writers.known()
        [{'process_generation': 1, 'process_started_at': 5.0, 'process_start_rollout_id': 3}]
    """

    def __init__(self, run_dir: str | os.PathLike, known: Iterable[dict[str, Any]] = (), *,
                 run_id: str | None = None) -> None:
        from shopsim_metrics.readers.steps import Winners

        self.run_dir = Path(run_dir)
        self.run_id = run_id  # the run's own writers only: another run's records beside it name none of them
        self._seen = Winners()  # only its writers are used
        for writer in known:
            self._seen.note_writer(writer)
        self._read_to = self._sizes()  # bytes of each records file already known

    def known(self) -> list[dict[str, Any]]:
        """Every process known, as :data:`~shopsim_metrics.readers.steps.WRITER_KEYS`."""
        return self._seen.writers()

    def catch_up(self, own: Iterable[Path] = ()) -> None:
        """Learn of the writers of the records appended since the last look, to every records file but ``own``
        (this process's; a file that shrank is read again whole). Raises ``OSError``/``ValueError`` for
        files that cannot be read (the caller goes on without)."""
        from shopsim_metrics.readers.steps import iter_located_records

        sizes = self._sizes()
        positions = {name: (self._read_to.get(name, 0) if self._read_to.get(name, 0) <= size else 0)
                     for name, size in sizes.items()}
        for path in own:
            if path.name in sizes:
                positions[path.name] = sizes[path.name]
        for data, _ in iter_located_records(self.run_dir, positions, run_id=self.run_id):
            self._seen.note_writer(data)
        self._read_to = sizes

    def _sizes(self) -> dict[str, int]:
        from shopsim_metrics.run.snapshot import records_positions

        try:
            return records_positions(self.run_dir)
        except OSError:
            return {}
