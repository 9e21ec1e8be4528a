"""A resumed run picks up what an unbroken run would hold: the technical streak, the prompt history, the
recent steps behind adaptive waves and the advisories.

slime resumes with ``--load``: a fresh process whose ``args.start_rollout_id`` is s > 0 re-runs the
steps after the checkpoint with the same prompts. Before its first judgement the monitor replays the
records of ``rollout_id < s`` that the run's lineage holds (as every reader takes them,
:class:`~shopsim_metrics.readers.steps.Winners`: the latest write of each ``rollout_id``, and none
of a process whose steps a later process resumed before), in ``rollout_id`` order, through
the same pieces the live steps feed (the monitor's resumable state, :mod:`shopsim_metrics.run.state`). Records of ``rollout_id >= s`` were written by
the crashed process for steps that now run again: they count in no history.

The records are streamed once to find where the chosen line of each ``rollout_id < s`` starts
(memory holds one position per record of those steps, never the file); those lines are then read
again at their positions, in step order (a re-run's sibling file may be older than the stale writer's).

Example (two steps of one technical group each, then a resume at step 1):
    >>> import tempfile, pathlib
    >>> from shopsim_metrics.sinks import JsonlSink
    >>> from shopsim_metrics.record.records import DecisionRow
    >>> run = pathlib.Path(tempfile.mkdtemp())
    >>> row = DecisionRow(order=1, waves_open=1, group_index=0, outcome="dropped_technical", reason=None,
    ...                   remaining_before=32, unique_rollouts=8, failed_check="status_failed")
    >>> sink = JsonlSink(run)
    >>> for rollout_id in (0, 1):
    ...     sink.emit(StepRecord(rollout_id=rollout_id, decisions=[row]))
    >>> sink.close()
    >>> from shopsim_metrics.run.state import monitor_state
    >>> from shopsim_metrics.health.streak import TechnicalStreak
    >>> streak = TechnicalStreak()
    >>> restore(run, monitor_state(streak=streak), start_rollout_id=1)
    Restored(steps=1, missing=0)
    >>> streak.count
    1
"""

from __future__ import annotations

import logging
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO, Iterable, Iterator

from shopsim_metrics.readers.steps import (
    ReadReport, RecordAt, RecordsChanged, Winners, iter_located_records, own_run_id, read_record_at,
)
from shopsim_metrics.sinks.jsonl import steps_files
from shopsim_metrics.run.snapshot import find_snapshot, read_snapshot
from shopsim_metrics.run.state import ResumableState
from shopsim_metrics.state_file import DamagedStateFile
from shopsim_metrics.record.records import StepRecord

logger = logging.getLogger("shopsim_metrics")


@dataclass(frozen=True)
class Restored:
    """What a restore replayed: ``steps`` records, and ``missing`` rollout ids below s without one.

    ``snapshot``: the step of the snapshot it started from (None: every record was replayed);
    ``note``: why a snapshot found was not used (None: used, or none found).
    """

    steps: int
    missing: int
    run_id: str | None = field(default=None, repr=False)  # the run resumed (None: its records carry none)
    snapshot: int | None = field(default=None, repr=False)
    note: str | None = field(default=None, repr=False)
    writers: tuple[dict[str, Any], ...] = field(default=(), repr=False)  # every process of the run learnt of
    left_out: tuple[str, ...] = field(default=(), repr=False)  # records left out whole: files that could not be
    # read, another run's records (:meth:`~shopsim_metrics.readers.steps.ReadReport.trust_notes`): one warning each

    @property
    def generation(self) -> int:
        """The resumed process's ``process_generation``: 1 + the highest among the processes it learnt of
        (the records it read, the snapshot's writer): it follows all of them, whatever the clocks say.

        >>> Restored(steps=0, missing=0).generation, Restored(0, 0, writers=({"process_generation": 2},)).generation
        (1, 3)
        """
        return 1 + max((w.get("process_generation") or 0 for w in self.writers), default=0)

    @property
    def partial(self) -> bool:
        """The history lacks steps an unbroken run would have seen."""
        return self.missing > 0


def restore(run_dir: str | os.PathLike, state: ResumableState, *, start_rollout_id: int,
            snapshot_dir: str | os.PathLike | None = None) -> Restored:
    """Rebuild every piece registered in ``state``, fresh ones (:mod:`shopsim_metrics.run.state`: the streak, the
    prompt history, the skip tally, the recent steps' judged groups in finishing order that adaptive waves are
    sized from, the advisor, as the run keeps them), as of the records of ``rollout_id < start_rollout_id``.

    With ``snapshot_dir`` (slime's ``--load``) holding a snapshot of a step N < s
    (:mod:`shopsim_metrics.run.snapshot`), the state is read from it and only the records written after it,
    of the steps N < rollout_id < s, are replayed; a snapshot that is damaged, of another run, of other
    prompt settings, or whose records are gone is left aside (``note`` says why) and every record is replayed.
    Only the run's own records are replayed (the snapshot's run, else the run of the first record of
    ``steps.jsonl``): another run's records and a records file that cannot be opened are left out, each
    named in ``left_out`` (the caller warns once of each). A missing or unreadable records directory restores
    nothing (every step is missing); the caller warns. Never raises for what the files hold.
    """
    note = None
    found = find_snapshot(snapshot_dir, start_rollout_id)
    if found is not None:
        try:
            restored, note = _from_snapshot(run_dir, start_rollout_id, read_snapshot(found[0]), state)
        except DamagedStateFile as exc:
            restored, note = None, str(exc)
        except (OSError, ValueError, KeyError, TypeError, IndexError) as exc:
            restored, note = None, f"{found[0]}: not usable ({type(exc).__name__}: {str(exc)[:120]})"
        if restored is not None:
            return restored
    return _replay_all(run_dir, start_rollout_id, state, note)


def _replay_all(run_dir: Any, start_rollout_id: int, state: ResumableState, note: str | None) -> Restored:
    report = ReadReport(Path(run_dir))
    try:
        latest, winners = _lineage(iter_located_records(run_dir, report=report), 0, start_rollout_id)
    except (OSError, ValueError):
        return Restored(steps=0, missing=start_rollout_id, note=note, left_out=tuple(report.trust_notes()))
    replayed = _replay(_read_in_step_order(latest), state)
    return Restored(steps=replayed, missing=start_rollout_id - replayed, run_id=report.own_run, note=note,
                    writers=tuple(winners.writers()), left_out=tuple(report.trust_notes()))


def _from_snapshot(run_dir: Any, start_rollout_id: int, snapshot: dict[str, Any],
                   state: ResumableState) -> tuple[Restored | None, str | None]:
    """Restore from ``snapshot`` and the records after it; (None, why) when it cannot stand for the replay."""
    step = snapshot["rollout_id"]
    foreign = _another_run(run_dir, snapshot.get("run_id"))
    if foreign is not None:
        return None, f"the snapshot of step {step} {foreign}"
    unusable = state.unusable(snapshot)
    if unusable is not None:
        return None, f"the snapshot of step {step} {unusable}"
    positions = {str(name): int(size) for name, size in snapshot["records"].items()}
    writer = snapshot.get("writer")  # the process whose lineage the snapshot continues (older snapshots: unknown)
    known = snapshot.get("processes")  # the other processes its writer knew of (older snapshots: none)
    writers = [w for w in [writer, *(known if isinstance(known, list) else [])] if isinstance(w, dict)]
    report = ReadReport(Path(run_dir))
    own_run = snapshot.get("run_id") if isinstance(snapshot.get("run_id"), str) else None
    try:
        latest, winners = _lineage(iter_located_records(run_dir, positions, report, run_id=own_run),
                                   step + 1, start_rollout_id, writers=writers)
        tail = list(_read_in_step_order(latest))  # at most the steps between two checkpoints
    except RecordsChanged as exc:
        return None, f"the records changed since the snapshot of step {step} ({exc})"
    if len(latest) != start_rollout_id - step - 1:
        return None, (f"the records after the snapshot of step {step} lack {start_rollout_id - step - 1 - len(latest)} "
                      f"of the steps before {start_rollout_id}")
    state.load_state_dict(snapshot)  # all or nothing
    _replay(tail, state)
    ended = winners.lineage_end(writer) if isinstance(writer, dict) else math.inf
    if ended <= step:
        logger.warning(
            "shopsim-metrics: resuming at rollout step %d from the monitor snapshot of step %d, written by a process "
            "whose steps from %d on a later process re-ran (two trainers on one --save?). The restored state "
            "is the checkpoint's; the readers follow the later process's records (docs §1.4, the run's lineage), so "
            "they may show steps %d..%d from another lineage, or none.", start_rollout_id, step, ended, ended, step)
    missing = snapshot["missing"]
    return Restored(steps=start_rollout_id - missing, missing=missing, run_id=report.own_run, snapshot=step,
                    writers=tuple(winners.writers()), left_out=tuple(report.trust_notes())), None


def _another_run(run_dir: Any, snapshot_run: Any) -> str | None:
    """Why a snapshot of the run ``snapshot_run`` is not this run's, as the end of a sentence: the records in
    ``run_dir`` are another run's (a checkpoint directory copied from another run); None when it is, or
    either side does not say (an older version's)."""
    if not isinstance(snapshot_run, str):
        return None
    try:
        records_run = own_run_id(steps_files(run_dir))
    except OSError:
        return None
    if records_run is None or records_run == snapshot_run:
        return None
    return f"is of another run ({snapshot_run}; the records in {os.fspath(run_dir)} are of run {records_run})"


def _replay(records: Iterable[dict[str, Any]], state: ResumableState) -> int:
    """Feed ``records`` (the lineage's, in step order) to the state, as the live steps did; returns how many."""
    replayed = 0
    for data in records:
        state.replay(StepRecord.from_dict(data))
        replayed += 1
    return replayed


def _read_in_step_order(latest: dict[int, RecordAt]) -> Iterator[dict[str, Any]]:
    """The chosen records in ``rollout_id`` order, as an unbroken run lived them (never in file order: a
    re-run's steps may sit in a sibling file older than the stale writer's), each read at its position."""
    handles: dict[Path, BinaryIO] = {}
    try:
        for rollout_id in sorted(latest):
            yield read_record_at(latest[rollout_id], handles)
    finally:
        for handle in handles.values():
            handle.close()


def _lineage(records: Iterable[tuple[dict[str, Any], RecordAt]], lower: int, upper: int,
             writers: Iterable[dict[str, Any]] = ()) -> tuple[dict[int, RecordAt], Winners]:
    """Where the record the run's lineage holds of each ``lower <= rollout_id < upper`` starts
    (:class:`~shopsim_metrics.readers.steps.Winners`: the latest write wins, a later process's resume
    supersedes an earlier process's later steps). ``records``: the run's own (another run's are left out as
    they are read: :func:`~shopsim_metrics.readers.steps.iter_located_records`; records without a ``run_id``,
    an older version's, count for any). ``writers``: processes known beside the records read (a snapshot's
    writer, whose own records precede the tail read). The second value: the lineage rule's view of every
    process seen.
    """
    every = Winners()
    where: list[RecordAt] = []
    for data, at in records:
        if lower <= data["rollout_id"] < upper:
            every.offer(data, len(where))
            where.append(at)
        else:  # outside the steps replayed, it still says where its process resumed
            every.note_writer(data)
    for writer in writers:
        every.note_writer(writer)
    every.finish()
    return {rollout_id: where[index] for rollout_id, index in every.index.items()}, every


def resume_warning(restored: Restored, start_rollout_id: int, run_dir: str) -> str | None:
    """One warning when the records do not cover every step before ``start_rollout_id``, else None.

    Example:
        >>> print(resume_warning(Restored(steps=5, missing=0), 5, "/r"))
        None
        >>> "3 of the 5 steps" in resume_warning(Restored(steps=2, missing=3), 5, "/r")
        True
    """
    if not restored.partial:
        return None
    return (f"shopsim-metrics: resuming at rollout step {start_rollout_id}, but the records in {run_dir} lack "
            f"{restored.missing} of the {start_rollout_id} steps before it: the technical streak and the prompt "
            "history start from what was found, and every record of this process says prompt_history_partial: "
            "true. Point shopsim_run_dir at the first process's records to restore them.")
