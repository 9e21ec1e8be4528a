"""Reading ``steps.jsonl`` by the rules of the records file, in one streaming pass.

- Lines are read one at a time (bytes; a line longer than :data:`MAX_LINE_BYTES` is skipped without
  being held in memory), so memory follows what the caller keeps, not the file's length.
- A line that is not a step record (torn, not JSON, foreign JSON such as ``[..]``, ``"str"`` or
  ``null``, nesting too deep to parse, binary, a per-step field that is not a number) is skipped and
  counted; :meth:`ReadReport.warn` logs one warning for all of them.
- The latest record of a ``rollout_id`` wins (a resumed run re-runs steps), by the records' own
  order (:func:`record_order`: the writing process's generation and start, then its sequence), not by
  file times; records without them (written before they existed) rank below, in file order. A process
  that resumed at step s supersedes the records of ``rollout_id >= s`` of every process before it
  (:class:`Winners`): a stale writer's later steps never count. The readers say how many records
  were superseded.
- Only the run's own records count (:func:`own_run_id`: the run of the first record of ``steps.jsonl`` that
  names one): another run's records, placed beside them or in the file, are left out, and so is a records
  file that cannot be opened; one note names each (:meth:`ReadReport.trust_notes`).
- A file with no step record at all is an error (:class:`NoStepRecords`), naming the first bad line.

:func:`read_step_columns` keeps per-step columns only (the names of :data:`COLUMN_NAMES`, plus any
ledger the caller's ``keep_ledger`` asks for); :func:`iter_step_dicts` hands over every good record.

Example:
    >>> import tempfile, pathlib
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "steps.jsonl"
    >>> _ = path.write_text('{"rollout_id": 0, "wave_count": 1}\\n[1, 2]\\n{"rollout_id": 0, "wave_count": 2}\\n')
    >>> table = read_step_columns(path)
    >>> table.rollout_ids, table.column("wave_count"), table.report.skipped_lines, table.report.superseded
    ([0], [2], 1, 1)
"""

from __future__ import annotations

import json
import logging
import math
import os
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, BinaryIO, Callable, Iterator

from shopsim_metrics.record import contract
from shopsim_metrics.record.records import DecisionRow, StepRecord
from shopsim_metrics.sinks.jsonl import steps_files
from shopsim_metrics.general.plain_values import is_int, is_number

logger = logging.getLogger("shopsim_metrics")

MAX_LINE_BYTES = 64 * 1024 * 1024
"""A longer line is not a step record the sink writes (300 KB is a big one): skipped, never held whole."""

_SCALAR_RECORD_FIELDS = tuple(
    f.name for f in fields(StepRecord) if f.name not in ("decisions", "failed_check_counts", "slime_drop_counts")
)
COLUMN_NAMES: tuple[str, ...] = tuple(dict.fromkeys(("rollout_id", *_SCALAR_RECORD_FIELDS, *contract.WANDB_STEP_FIELDS)))
"""Per-step names kept as columns: every scalar field of a step record and every per-step field of the
contract, so a new field added to either flows through the readers without touching them."""

_NUMERIC_FIELDS = frozenset(contract.WANDB_STEP_FIELDS)
_REQUIRED_ROW_KEYS = frozenset(
    f.name for f in fields(DecisionRow) if f.default is f.default_factory  # no default: must be present
)


_NEVER = float("-inf")


def record_order(data: dict[str, Any], index: int) -> tuple[int, float, float, int]:
    """Where a record stands among the writes of its run: (its process's place, :func:`process_order`; its
    sequence; its position read).

    The later write of a ``rollout_id`` is the one with the larger key; a record without these fields (an
    older version's) ranks below any that has them, then by its position in the files.

    Example:
        >>> record_order({"process_started_at": 2.0, "record_sequence": 1}, 0) > record_order(
        ...     {"process_started_at": 1.0, "record_sequence": 9}, 5)
        True
        >>> record_order({}, 3)
        (0, -inf, -inf, 3)
    """
    return (*process_order(data), _number(data.get("record_sequence")), index)


def process_order(data: dict[str, Any]) -> tuple[int, float]:
    """The writing process's place among a run's processes: its ``process_generation`` (0 for the run's first
    process; a resumed one takes 1 + the highest generation it knew of, so it follows every process whose
    records or snapshot it resumed from, whatever the clocks say), then its ``process_started_at`` (the clock
    only orders processes of one generation, which did not know of each other). Records written before these
    fields existed count as generation 0 (and a missing start as ``-inf``).

    Example (P2 resumed from P1 on a node whose clock is an hour behind):
        >>> process_order({"process_generation": 1, "process_started_at": 1000.0}) > process_order(
        ...     {"process_generation": 0, "process_started_at": 4600.0})
        True
    """
    return (_step(data.get("process_generation")) or 0, _number(data.get("process_started_at")))


def _number(value: Any) -> float:
    if is_number(value) and math.isfinite(value):
        return float(value)
    return _NEVER


def _step(value: Any) -> int | None:
    return value if is_int(value) and value >= 0 else None


WRITER_KEYS = ("process_generation", "process_started_at", "process_start_rollout_id")
"""What a record (or a snapshot) says of its writing process: its place in the run, where it resumed."""


class Winners:
    """The record of each ``rollout_id`` that the run's lineage holds, fed one record at a time.

    Two rules decide it (docs §1.4, "the lineage of a run"), over the run's processes ordered by
    :func:`process_order` (a resumed process after every process it knew of when it resumed):

    - the latest write of a ``rollout_id`` wins, by :func:`record_order`;
    - a process that resumed at step s (its records' ``process_start_rollout_id``) ends the lineage of
      every process before it at s: their records of ``rollout_id >= s`` count for nothing, even when
      written later in wall-clock time (a stale writer that woke up after the resume).

    By the second rule a ``rollout_id`` may have no record (only a superseded process wrote it):
    :meth:`finish`, once every record is offered, drops it. No record ever comes back by it: a
    record that loses to a later write is superseded by whatever supersedes that write.

    Example (P1 wrote 0..2 and, after P2 resumed at 1 and wrote step 1 only, a stale step 2):
        >>> w = Winners()
        >>> p1 = {"process_generation": 0, "process_started_at": 1.0, "process_start_rollout_id": 0}
        >>> p2 = {"process_generation": 1, "process_started_at": 2.0, "process_start_rollout_id": 1}
        >>> for i, (rid, writer) in enumerate([(0, p1), (1, p1), (1, p2), (2, p1)]):
        ...     _ = w.offer({"rollout_id": rid, "record_sequence": i, **writer}, i)
        >>> w.finish(), w.index, w.superseded
        ([2], {0: 0, 1: 2}, 1)
        >>> w.highest_generation, len(w.writers())
        (1, 2)
    """

    def __init__(self) -> None:
        self.keys: dict[int, tuple[int, float, float, int]] = {}
        self.index: dict[int, int] = {}  # rollout_id -> position (among the good records) of its winner
        self.superseded = 0  # records that lost to a later write of their rollout_id
        self._resumed_at: dict[tuple[int, float], int] = {}  # a writing process (process_order) -> its resume step

    def offer(self, data: dict[str, Any], index: int) -> bool:
        """Whether this record is now its ``rollout_id``'s winner (it supersedes the earlier one), by the
        first rule; :meth:`finish` applies the second."""
        self.note_writer(data)
        rid = data["rollout_id"]
        key = record_order(data, index)
        held = self.keys.get(rid)
        if held is not None:
            self.superseded += 1
            if key < held:
                return False
        self.keys[rid], self.index[rid] = key, index
        return True

    def note_writer(self, data: dict[str, Any]) -> None:
        """Learn of the process that wrote ``data`` (its :data:`WRITER_KEYS`: where it stands, where it
        resumed), from a record not offered (outside the steps a caller reads) or a snapshot's writer."""
        process, resumed = process_order(data), _step(data.get("process_start_rollout_id"))
        if process[1] != _NEVER and resumed is not None:
            self._resumed_at[process] = min(resumed, self._resumed_at.get(process, resumed))

    def writers(self) -> list[dict[str, Any]]:
        """Every process learnt of, as :data:`WRITER_KEYS` (what a snapshot keeps of them)."""
        return [dict(zip(WRITER_KEYS, (generation, started, resumed)))
                for (generation, started), resumed in self._resumed_at.items()]

    @property
    def highest_generation(self) -> int | None:
        """The highest ``process_generation`` among the processes learnt of (None: none)."""
        return max((generation for generation, _ in self._resumed_at), default=None)

    def lineage_end(self, writer: dict[str, Any]) -> float:
        """The step from which a later process supersedes the writes of the process that wrote ``writer``
        (a record, or a snapshot's writer); ``inf``: none does."""
        return self._end(process_order(writer))

    def _end(self, process: tuple[int, float]) -> float:
        ends = [resumed for other, resumed in self._resumed_at.items() if other > process]
        return float(min(ends)) if ends else math.inf

    def finish(self) -> list[int]:
        """Drop the winners that a later process's resume superseded (second rule); their rollout_ids, sorted."""
        ends: dict[tuple[int, float], float] = {}
        dropped = []
        for rid, key in self.keys.items():
            process = key[:2]
            end = ends.get(process)
            if end is None:
                end = ends[process] = self._end(process)
            if rid >= end:
                dropped.append(rid)
        for rid in dropped:
            del self.keys[rid], self.index[rid]
        return sorted(dropped)


class NoStepRecords(ValueError):
    """The file holds no step record at all (empty, or every line bad: another tool's JSONL)."""


@dataclass
class ReadReport:
    """What a read found besides the records: skipped lines and superseded records."""

    path: Path
    line_count: int = 0  # non-blank lines
    record_count: int = 0  # good records, superseded ones included
    skipped_lines: int = 0
    first_skipped: str | None = None  # "line N: why"
    superseded: int = 0  # earlier records of a rollout_id replaced by a later one
    stale: list[int] = field(default_factory=list)  # rollout_ids whose only writes a later process's resume superseded
    gaps: list[tuple[int, int]] = field(default_factory=list)  # (first, last) runs of rollout_ids with no record
    # at all between the file's first and last (runs, not ids: a record at rollout_id 10**12 costs no memory)
    own_run: str | None = None  # the run read (:func:`own_run_id`); None: its records name none
    foreign: dict[str, dict[str, int]] = field(default_factory=dict)  # file name -> another run's id -> records
    # left out (another run's records in this run's directory or file: never mixed into its figures)
    unreadable: list[str] = field(default_factory=list)  # "file (why)": records files that could not be opened

    def skip(self, where: str, why: str) -> None:
        self.skipped_lines += 1
        if self.first_skipped is None:
            self.first_skipped = f"{where}: {why}"

    def notes(self) -> list[str]:
        """One sentence per thing a reader should know (empty when the file was clean)."""
        out = []
        if self.skipped_lines:
            out.append(f"skipped {self.skipped_lines} bad line{'s' if self.skipped_lines != 1 else ''} of "
                       f"{self.path} (first at {self.first_skipped})")
        if self.superseded:
            out.append(f"{self.superseded} earlier step record(s) in {self.path} were superseded by later records "
                       "of the same rollout_id (a resumed run); the latest of each is kept")
        if self.stale:
            out.append(f"{len(self.stale)} step(s) of {self.path} have no record: only a process whose lineage a later "
                       f"resume superseded wrote them (rollout_id {_ranges_text(id_runs(self.stale))}; a stale writer); the "
                       "resumed run has not reached them")
        if self.gaps:
            missing = sum(last - first + 1 for first, last in self.gaps)
            out.append(f"{missing} step(s) of {self.path} between its first and its last have no record "
                       f"(rollout_id {_ranges_text(self.gaps)}): records lost, as when a process is killed while a full "
                       "disk holds its records back, or a records file is removed")
        return self.trust_notes() + out

    def trust_notes(self) -> list[str]:
        """The notes on records left out whole (a file that could not be read, another run's records): the ones
        a resume warns of too."""
        out = []
        if self.unreadable:
            out.append(f"could not read {len(self.unreadable)} records file(s) of {self.path}, left out: "
                       f"{'; '.join(self.unreadable[:RUNS_SHOWN])}. The other files' records are used; make the "
                       "file readable (its owner, its mode) to count its records")
        if self.foreign:
            left = "; ".join(f"{sum(runs.values())} in {name} (run {', '.join(sorted(runs)[:RUNS_SHOWN])})"
                             for name, runs in sorted(self.foreign.items())[:RUNS_SHOWN])
            out.append(f"left out the records of another run: {left}. They are not of run {self.own_run}, whose "
                       f"records these are (the run of the first record of {contract.STEPS_FILE_NAME}); another "
                       "run's records were placed beside this run's: read that run's own directory for them")
        return out

    def leave_out_foreign(self, name: str, run_id: str) -> None:
        runs = self.foreign.setdefault(name, {})
        runs[run_id] = runs.get(run_id, 0) + 1

    def leave_out_unreadable(self, path: Path, exc: OSError) -> None:
        self.unreadable.append(f"{path.name} ({type(exc).__name__}: {exc.strerror or exc})")

    def take(self, winners: Winners) -> None:
        """Count what ``winners`` left out, once every record is offered (calls :meth:`Winners.finish`)."""
        self.stale = winners.finish()
        self.superseded = winners.superseded
        written = sorted({*winners.keys, *self.stale})
        self.gaps = [(before + 1, after - 1) for before, after in zip(written, written[1:]) if after - before > 1]

    def warn(self) -> None:
        """Log each note once, as a warning."""
        for note in self.notes():
            logger.warning("shopsim-metrics: %s", note)

    def check_not_empty(self) -> None:
        """Raise :class:`NoStepRecords` when no line was a step record."""
        if self.record_count:
            return
        if self.unreadable:
            raise NoStepRecords(f"{self.path} holds no readable step record: could not read "
                                f"{'; '.join(self.unreadable[:RUNS_SHOWN])}; make the file readable (its owner, "
                                "its mode), or read a copy")
        if not self.line_count:
            raise NoStepRecords(f"{self.path} holds no step record: the file is empty")
        raise NoStepRecords(
            f"{self.path} holds no step record of shopsim-metrics: all {self.line_count} lines are bad "
            f"(first at {self.first_skipped}); expected the steps.jsonl the JSONL sink writes"
        )


def id_runs(ids: list[int]) -> list[tuple[int, int]]:
    """Sorted ids as (first, last) runs of consecutive ids.

    >>> id_runs([3, 4, 5, 9])
    [(3, 5), (9, 9)]
    """
    runs: list[tuple[int, int]] = []
    for rid in ids:
        if runs and runs[-1][1] == rid - 1:
            runs[-1] = (runs[-1][0], rid)
        else:
            runs.append((rid, rid))
    return runs


RUNS_SHOWN = 10
"""A warning names this many runs of ids at most (the count says the rest)."""


def _ranges_text(runs: list[tuple[int, int]]) -> str:
    """Runs of ids for a warning: ``3-5, 9``, the first :data:`RUNS_SHOWN` of them.

    >>> _ranges_text([(3, 5), (9, 9)]), _ranges_text([(i, i) for i in range(0, 40, 2)])[-17:]
    ('3-5, 9', '18, ... (20 runs)')
    """
    shown = ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in runs[:RUNS_SHOWN])
    return shown + (f", ... ({len(runs)} runs)" if len(runs) > RUNS_SHOWN else "")


def resolve_steps_path(path: str | os.PathLike) -> Path:
    """``path`` itself, or the ``steps.jsonl`` inside it when it is a run directory; must exist and be a regular
    file (a FIFO or a device is refused before it is opened: one line)."""
    from shopsim_metrics.errors import check_input_path

    path = Path(path)
    if path.is_dir():
        path = path / contract.STEPS_FILE_NAME
    path = check_input_path(path, f"a {contract.STEPS_FILE_NAME} written by the JSONL sink, or the run directory "
                                  "holding it")  # a FIFO or a device is refused unopened
    if path.is_dir():
        raise IsADirectoryError(f"{path} is a directory, not a {contract.STEPS_FILE_NAME}")
    return path


def resolve_steps_files(path: str | os.PathLike) -> tuple[list[Path], str]:
    """The records files to read and how to name them: a file itself, or every records file of a run
    directory (``steps.jsonl`` and a second writer's ``steps.<suffix>.jsonl``, oldest first)."""
    path = Path(path)
    if path.is_dir():
        files = steps_files(path)
        if not files:
            from shopsim_metrics.readers.wandb_offline import find_wandb_offline_run

            wandb_run = find_wandb_offline_run(path)
            if wandb_run is not None:  # a W&B offline run directory: its history is read as the records
                return [wandb_run], f"W&B offline run {wandb_run}"
            try:
                resolve_steps_path(path)  # raises: names the missing steps.jsonl
            except FileNotFoundError as exc:  # a directory above the run's (the demo's out dir): name the run's
                hint = run_dir_hint(path)
                if not hint:
                    raise
                raise FileNotFoundError(f"{exc}{hint}") from None
        return files, (str(files[0]) if len(files) == 1 else str(path / "steps*.jsonl"))
    return [resolve_steps_path(path)], str(path)


def run_dir_hint(path: str | os.PathLike) -> str:
    """For a directory without records: ``"; did you mean <dir>? ..."`` naming the first directory right below
    it that holds some (the demo's ``demo_out`` -> ``demo_out/run``), else empty."""
    try:
        runs = [sub for sub in sorted(Path(path).iterdir()) if sub.is_dir() and steps_files(sub)]
    except OSError:
        return ""
    return f"; did you mean {runs[0]}? (it holds the records)" if runs else ""


def record_problem(data: Any) -> str | None:
    """Why a parsed line is not a step record, or None when it is one.

    Example:
        >>> record_problem({"rollout_id": 3}), record_problem([1]), record_problem({"wave_count": 1})
        (None, 'a JSON list, not an object', 'no integer rollout_id')
        >>> record_problem({"rollout_id": 1, "wave_count": "<b>"})
        'wave_count is str, not a number'
    """
    if not isinstance(data, dict):
        kind = {list: "list", str: "string", type(None): "null", bool: "boolean"}.get(type(data), "number")
        return f"a JSON {kind}, not an object"
    rid = data.get("rollout_id")
    if not is_int(rid):
        return "no integer rollout_id"
    for name in _NUMERIC_FIELDS.intersection(data):
        value = data[name]
        if value is not None and not isinstance(value, (int, float)):
            return f"{name} is {type(value).__name__}, not a number"
    decisions = data.get("decisions")
    if decisions is not None:
        if not isinstance(decisions, list):
            return "decisions is not a list"
        for row in decisions:
            if not isinstance(row, dict) or not _REQUIRED_ROW_KEYS <= row.keys():
                return "a decisions row is not a ledger row"
            order = row.get("order")
            if not is_number(order):
                return "a decisions row has no numeric order"
    return None


def iter_step_dicts(path: str | os.PathLike, report: ReadReport | None = None) -> Iterator[dict[str, Any]]:
    """Every good record as a dict, in file order (superseded ones included), of a file or of every
    records file of a run directory; bad lines are counted in ``report``. Memory: one line at a time."""
    files, name = resolve_steps_files(path)
    report = report if report is not None else ReadReport(Path(name))
    for data, _ in _iter_records(files, report):
        yield data


class RecordsChanged(ValueError):
    """A records file is shorter than a snapshot says it was, or gone: its tail cannot be read."""


@dataclass(frozen=True, slots=True)
class RecordAt:
    """Where a record's line starts: its records file and the byte offset in it."""

    path: Path
    offset: int


def iter_located_records(run_dir: str | os.PathLike, positions: dict[str, int] | None = None,
                         report: ReadReport | None = None, *,
                         run_id: str | None = None) -> Iterator[tuple[dict[str, Any], RecordAt]]:
    """Every good record of a run directory's records files, in file order, with where its line starts;
    with ``positions`` (bytes per records file name, as a snapshot saved them; a file not named there is
    read whole) only the records written after them. Raises :class:`RecordsChanged` before reading when
    a named file is missing or shorter than its position. Memory: one line at a time.

    Records of a run other than ``run_id`` (default: :func:`own_run_id`) and files that cannot be opened
    are left out, counted in ``report`` (:meth:`ReadReport.trust_notes`).

    Example:
        >>> import tempfile, pathlib
        >>> d = pathlib.Path(tempfile.mkdtemp()); f = d / "steps.jsonl"
        >>> _ = f.write_text('{"rollout_id": 0}\\n{"rollout_id": 1}\\n')
        >>> [(r["rollout_id"], at.offset) for r, at in iter_located_records(d)]
        [(0, 0), (1, 18)]
        >>> [r["rollout_id"] for r, _ in iter_located_records(d, {"steps.jsonl": 18})]
        [1]
        >>> read_record_at(RecordAt(f, 18))
        {'rollout_id': 1}
    """
    positions = positions or {}
    files = steps_files(run_dir)
    sizes = {path.name: path.stat().st_size for path in files}
    for name, position in positions.items():
        if name not in sizes or sizes[name] < position:
            raise RecordsChanged(f"{Path(run_dir) / name} is {'gone' if name not in sizes else 'shorter'} "
                                 "since the snapshot")
    report = report if report is not None else ReadReport(Path(run_dir))
    report.own_run = run_id if run_id is not None else own_run_id(files)
    for path in files:
        for data, _, offset in _iter_file(path, report, prefix=f"{path.name} ", start=positions.get(path.name, 0)):
            yield data, RecordAt(path, offset)


def read_record_at(at: RecordAt, handles: dict[Path, BinaryIO] | None = None) -> dict[str, Any]:
    """The record whose line starts at ``at`` (found by :func:`iter_located_records`); ``handles`` keeps
    the files open between calls (the caller closes them). Raises :class:`RecordsChanged` when the line
    there is no longer a step record (the file was rewritten since)."""
    handle = handles.get(at.path) if handles is not None else None
    if handle is None:
        handle = open(at.path, "rb")
        if handles is not None:
            handles[at.path] = handle
    try:
        handle.seek(at.offset)
        raw = handle.readline(MAX_LINE_BYTES)
        try:
            data = parse_line(raw)
        except (ValueError, RecursionError):
            data = None
    finally:
        if handles is None:
            handle.close()
    if record_problem(data) is not None:
        raise RecordsChanged(f"{at.path} changed while it was read: byte {at.offset} no longer starts a step record")
    return data


FIRST_RECORD_LINES = 1000
"""Lines read at most, per records file, looking for the first record that names its run."""


def first_records(path: Path) -> Iterator[dict[str, Any]]:
    """The valid step records among the first :data:`FIRST_RECORD_LINES` lines of the records file ``path``,
    in order; lines that are no record are passed over, and a file that cannot be read yields nothing.

    Example:
        >>> import tempfile, pathlib
        >>> path = pathlib.Path(tempfile.mkdtemp()) / "steps.jsonl"
        >>> _ = path.write_text('not json\\n{"rollout_id": 3, "run_id": "a"}\\n')
        >>> [record["rollout_id"] for record in first_records(path)]
        [3]
    """
    try:
        with open(path, "rb") as fh:
            for _ in range(FIRST_RECORD_LINES):
                raw = fh.readline(MAX_LINE_BYTES)
                if not raw:
                    return
                try:
                    data = parse_line(raw)
                except (ValueError, RecursionError):
                    continue
                if record_problem(data) is None:
                    yield data
    except OSError:
        return


def own_run_id(files: list[Path]) -> str | None:
    """The run whose records ``files`` are: the ``run_id`` of the first record that names one, in
    ``steps.jsonl`` first (the file every process of a run writes in turn: a second writer's sibling only
    while the first holds it), then in the others in their order; None when no record names one (an older
    version's). Reads at most :data:`FIRST_RECORD_LINES` lines of each file; a file that cannot be read
    is passed over.

    Example:
        >>> import tempfile, pathlib
        >>> d = pathlib.Path(tempfile.mkdtemp())
        >>> _ = (d / "steps.b.jsonl").write_text('{"rollout_id": 0, "run_id": "b"}\\n')
        >>> _ = (d / "steps.jsonl").write_text('[]\\n{"rollout_id": 0, "run_id": "a"}\\n')
        >>> own_run_id(steps_files(d)), own_run_id([d / "steps.b.jsonl"])
        ('a', 'b')
    """
    for path in sorted(files, key=lambda p: p.name != contract.STEPS_FILE_NAME):
        if path.is_dir():  # a W&B offline run: its records name no run
            continue
        for data in first_records(path):
            if isinstance(data.get("run_id"), str):
                return data["run_id"]
    return None


def _iter_records(files: list[Path], report: ReadReport) -> Iterator[tuple[dict[str, Any], bytes]]:
    """Every good record of ``files`` in order, with its line as read (another run's left out:
    :func:`own_run_id`)."""
    report.own_run = own_run_id(files)
    for file in files:
        if file.is_dir():  # a W&B offline run (resolve_steps_files): one record per logged step
            yield from _iter_wandb_run(file, report)
        else:
            for data, raw, _ in _iter_file(file, report, prefix=f"{file.name} " if len(files) > 1 else ""):
                yield data, raw


def _iter_wandb_run(run_dir: Path, report: ReadReport) -> Iterator[tuple[dict[str, Any], bytes]]:
    """The steps a W&B offline run logged (``rollout/shopsim/<field>`` per ``rollout/step``) as records:
    the scalar fields only (no decision ledger, no tables), a step per history row group."""
    from shopsim_metrics.readers.wandb_offline import history_to_steps, read_offline_run

    for data in history_to_steps(read_offline_run(run_dir).history):
        report.line_count += 1
        report.record_count += 1
        yield data, json.dumps(data, default=str).encode()


def _iter_file(path: Path, report: ReadReport, *, prefix: str,
               start: int = 0) -> Iterator[tuple[dict[str, Any], bytes, int]]:
    """Every good record of one file from byte ``start``: the record, its line, where the line starts. A file
    that cannot be opened, and the records of a run other than ``report.own_run``, are left out (counted)."""
    try:
        fh = open(path, "rb")
    except OSError as exc:  # another owner's, mode 000, gone since listed: the other files still count
        report.leave_out_unreadable(path, exc)
        return
    own_run = report.own_run
    with fh:
        if start:
            fh.seek(start)
            prefix = f"{prefix}after byte {start}, "
        number = 0
        offset = start
        while True:
            line_start = offset
            raw = fh.readline(MAX_LINE_BYTES)
            offset += len(raw)
            if not raw:
                break
            number += 1
            if len(raw) == MAX_LINE_BYTES and not raw.endswith(b"\n"):
                while (rest := fh.readline(MAX_LINE_BYTES)) and not rest.endswith(b"\n"):
                    offset += len(rest)  # drop the rest of an overlong line without holding it
                offset += len(rest)
                report.line_count += 1
                report.skip(f"{prefix}line {number}", f"longer than {MAX_LINE_BYTES} bytes")
                continue
            if not raw.strip():
                continue
            report.line_count += 1
            try:
                data = parse_line(raw)
            except RecursionError:
                report.skip(f"{prefix}line {number}", "JSON nested too deeply")
                continue
            except ValueError as exc:  # JSONDecodeError, UnicodeDecodeError (binary)
                report.skip(f"{prefix}line {number}", f"not JSON ({type(exc).__name__}: {str(exc)[:80]})")
                continue
            problem = record_problem(data)
            if problem is not None:
                report.skip(f"{prefix}line {number}", problem)
                continue
            run_id = data.get("run_id")
            if own_run is not None and isinstance(run_id, str) and run_id != own_run:
                report.leave_out_foreign(path.name, run_id)
                continue
            report.record_count += 1
            yield data, raw, line_start


def parse_line(raw: bytes) -> Any:
    """One line of JSON, as ``json.loads`` reads it (NaN, Infinity and integers of any size included).

    Example:
        >>> parse_line(b'{"a": 1, "b": NaN, "c": 123456789012345678901}')
        {'a': 1, 'b': nan, 'c': 123456789012345678901}
    """
    return json.loads(raw)


def finite(value: Any) -> Any:
    """``None`` for NaN and infinities (the record's rule: never NaN), the value otherwise."""
    return None if isinstance(value, float) and not math.isfinite(value) else value


LedgerKeeper = Callable[[int, dict[str, Any], bytes], None]
"""Called with ``(rollout_id, record, its line as read)`` for each record that is, when read, the
latest write of its rollout_id; keeps what it wants (the record's ``decisions`` are the ledger; keeping
the line costs less than holding the parsed rows). A later write of the same rollout_id calls it
again: it replaces the earlier one. A rollout_id that ends with no record (:meth:`Winners.finish`: only
a superseded process wrote it) is handed over once more, at the end, as ``{"rollout_id": id}`` with an
empty line: no ledger."""


@dataclass
class StepColumns:
    """Per-step columns of a run, one value per rollout_id (the latest record of each), sorted by step."""

    rollout_ids: list[int]
    columns: dict[str, list[Any]]
    report: ReadReport
    last_values: dict[str, Any] = field(default_factory=dict)  # the latest step's values (knobs in force)

    def column(self, name: str) -> list[Any]:
        """Values of one name over the steps (None where absent)."""
        values = self.columns.get(name)
        return list(values) if values is not None else [None] * len(self.rollout_ids)

    def __len__(self) -> int:
        return len(self.rollout_ids)


def read_step_columns(
    path: str | os.PathLike,
    *,
    keep_ledger: LedgerKeeper | None = None,
    names: tuple[str, ...] = COLUMN_NAMES,
    warn: bool = True,
) -> StepColumns:
    """Stream ``path`` (a file, or every records file of a run directory) into per-step columns (the
    latest record of each rollout_id wins).

    Raises :class:`NoStepRecords` when no line is a step record; logs one warning per note of the
    :class:`ReadReport` (skipped lines, superseded records) unless ``warn`` is false.
    """
    files, shown_as = resolve_steps_files(path)
    report = ReadReport(Path(shown_as))
    position: dict[int, int] = {}
    columns: dict[str, list[Any]] = {name: [] for name in names if name != "rollout_id"}
    order: list[int] = []
    winners = Winners()
    for index, (data, line) in enumerate(_iter_records(files, report)):
        rid = data["rollout_id"]
        if not winners.offer(data, index):
            continue  # an earlier write (a stale writer's) of a step already read
        at = position.get(rid)
        get = data.get
        if at is None:
            position[rid] = len(order)
            order.append(rid)
            for name, values in columns.items():
                values.append(finite(get(name)))
        else:
            for name, values in columns.items():
                values[at] = finite(get(name))
        if keep_ledger is not None:
            keep_ledger(rid, data, line)
    report.take(winners)
    gone = set(report.stale)
    for rid in report.stale:
        if keep_ledger is not None:
            keep_ledger(rid, {"rollout_id": rid}, b"")
    report.check_not_empty()
    if warn:
        report.warn()
    ranked = sorted((i for i, rid in enumerate(order) if rid not in gone), key=order.__getitem__)
    if ranked != list(range(len(order))):
        columns = {name: [values[i] for i in ranked] for name, values in columns.items()}
        order = [order[i] for i in ranked]
    last = {name: values[-1] for name, values in columns.items()} if order else {}
    return StepColumns(rollout_ids=order, columns=columns, report=report, last_values=last)


def read_step_records(path: str | os.PathLike, *, warn: bool = True) -> tuple[list[StepRecord], ReadReport]:
    """Every step as a :class:`StepRecord` (latest per rollout_id, sorted by it), and the report.

    Holds the whole run, ledgers included: for tests and small runs; the tools use
    :func:`read_step_columns`.
    """
    report = ReadReport(Path(resolve_steps_files(path)[1]))
    by_id: dict[int, StepRecord] = {}
    winners = Winners()
    for index, data in enumerate(iter_step_dicts(path, report)):
        if winners.offer(data, index):
            by_id[data["rollout_id"]] = StepRecord.from_dict(data)
    report.take(winners)
    for rid in report.stale:
        del by_id[rid]
    report.check_not_empty()
    if warn:
        report.warn()
    return [by_id[k] for k in sorted(by_id)], report


def read_steps(path: str | os.PathLike) -> list[StepRecord]:
    """Every step of a ``steps.jsonl`` file, or of every records file of a run directory, by the rules
    of the records file: the record the run's lineage holds of each ``rollout_id`` (:class:`Winners`;
    one warning says how many were superseded), records sorted by ``rollout_id``; bad lines (a torn
    last line, another tool's line) are skipped with one warning that counts them.
    """
    return read_step_records(path)[0]
