"""A resumed run picks up what an unbroken run would hold: the technical streak and the prompt history.

slime resumes with ``--load``: a fresh process whose ``args.start_rollout_id`` is s > 0 re-runs the
steps after the checkpoint with the same prompts. Before its first judgement the monitor replays the
records of ``rollout_id < s`` (the latest write of each ``rollout_id`` by the records' own order, as
every reader takes them)
through the same streak and prompt tracker the live steps feed. Records of ``rollout_id >= s`` were
written by the crashed process for steps that now run again: they count in no history.

The records are streamed twice (memory holds one position per step, never the file): the first pass
finds the latest line of each ``rollout_id < s``, the second replays those lines in file order.

Example (two steps of one technical group each, then a resume at step 1):
    >>> import tempfile, pathlib
    >>> from shopsim_metrics.sinks import JsonlSink
    >>> from shopsim_metrics.step.records import DecisionRow
    >>> run = pathlib.Path(tempfile.mkdtemp())
    >>> row = DecisionRow(order=1, waves_open=1, group_index=0, outcome="dropped_technical", reason=None,
    ...                   remaining_before=32, unique_rollouts=8, failed_check="status_failed")
    >>> sink = JsonlSink(run)
    >>> for rollout_id in (0, 1):
    ...     sink.emit(StepRecord(rollout_id=rollout_id, decisions=[row]))
    >>> sink.close()
    >>> streak = TechnicalStreak()
    >>> restore(run, start_rollout_id=1, streak=streak, prompts=None)
    Restored(steps=1, missing=0)
    >>> streak.count
    1
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from shopsim_metrics.prompts.skip_record import SkipTally
from shopsim_metrics.prompts.value import PromptValueTracker
from shopsim_metrics.readers.steps import NoStepRecords, ReadReport, Winners, iter_step_dicts
from shopsim_metrics.step import contract as C
from shopsim_metrics.step.records import StepRecord
from shopsim_metrics.step.streak import TechnicalStreak

logger = logging.getLogger("shopsim_metrics")


@dataclass(frozen=True)
class Restored:
    """What a restore replayed: ``steps`` records, and ``missing`` rollout ids below s without one."""

    steps: int
    missing: int
    run_id: str | None = field(default=None, repr=False)  # the run resumed (None: its records carry none)

    @property
    def partial(self) -> bool:
        """The history lacks steps an unbroken run would have seen."""
        return self.missing > 0


def restore(run_dir: str | os.PathLike, *, start_rollout_id: int, streak: TechnicalStreak,
            prompts: PromptValueTracker | None, skips: "SkipTally | None" = None) -> Restored:
    """Replay the records of ``rollout_id < start_rollout_id`` into ``streak``, ``prompts`` and ``skips``.

    A missing or unreadable records directory restores nothing (every step is missing); the caller
    warns. Never raises for what the files hold.
    """
    report = ReadReport(Path(run_dir))
    try:
        latest, run_id = _latest_lines(run_dir, start_rollout_id, report)
    except (NoStepRecords, OSError, ValueError):
        return Restored(steps=0, missing=start_rollout_id)
    replayed = 0
    for index, data in enumerate(iter_step_dicts(run_dir, ReadReport(report.path))):
        rollout_id = data["rollout_id"]
        if latest.get(rollout_id) != index:
            continue
        record = StepRecord.from_dict(data)
        rows = sorted(record.decisions, key=lambda row: row.order)
        for row in rows:
            technical = row.outcome == C.OUTCOME_DROPPED_TECHNICAL
            streak.observe((row.failed_check or "unknown") if technical else None)
        if prompts is not None:
            prompts.observe(record)
        if skips is not None:
            skips.replay(record)
        replayed += 1
    return Restored(steps=replayed, missing=start_rollout_id - replayed, run_id=run_id)


def _latest_lines(run_dir: Any, start_rollout_id: int, report: ReadReport) -> tuple[dict[int, int], str | None]:
    """The index (among good records, in file order) of the latest write of each ``rollout_id < s``,
    by the records' own order (:func:`~shopsim_metrics.readers.steps.record_order`), and the run
    they belong to.

    The run resumed is the one that wrote last below ``s``; records of another run (a directory that
    holds more than one) are left out, records without a ``run_id`` (an older version's) count for any.
    """
    by_run: dict[str | None, Winners] = {}
    every = Winners()
    for index, data in enumerate(iter_step_dicts(run_dir, report)):
        rollout_id = data["rollout_id"]
        if isinstance(rollout_id, int) and 0 <= rollout_id < start_rollout_id:
            every.offer(data, index)
            run_id = data.get("run_id")
            by_run.setdefault(run_id if isinstance(run_id, str) else None, Winners()).offer(data, index)
    run_id = every.latest_run_id
    if run_id is None or len(by_run) == 1:
        return every.index, run_id
    chosen = dict(by_run.get(None, Winners()).index)
    own = by_run[run_id]
    for rollout_id, index in own.index.items():  # the run's own write wins over an unnamed one
        chosen[rollout_id] = index
    return chosen, run_id


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
