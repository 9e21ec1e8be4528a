"""The monitor's state beside slime's checkpoint: a resume reads it instead of replaying every record.

A resumed slime run (``--load``, ``start_rollout_id`` = s) needs the technical streak, the prompt
history and the skip state as an unbroken run would hold them before step s. Replaying the records
(:mod:`shopsim_metrics.run.resume`) reads all of ``steps.jsonl``: minutes for a long run. So at every step
slime checkpoints (``--save-interval``: ``(N + 1) % interval == 0``, and the run's last step, as slime's
``should_run_periodic_action`` says), the monitor writes, once that step's record is written,

    <save>/rollout/shopsim_monitor_state_<N>.json

beside slime's own ``global_dataset_state_dict_<N>.pt``: the state after step N and, for every records
file of the run directory, how many bytes it held then. A resume at s reads the snapshot of the newest
N < s in ``<load>/rollout/`` and replays only the records written after those positions for the steps
N < rollout_id < s (usually none). Without a usable snapshot it replays everything, as before.

The snapshot holds exactly what the replay would rebuild (the pieces registered once in
:mod:`shopsim_metrics.run.state`, each under its own key; a property test checks it), so it is written
only when the live state is that: the step's record is the latest one closed and no group of a later
step has been judged yet (always so in slime's ``train.py`` and ``train_async.py``; with the
fully-async rollout a save may find later groups judged, and then that checkpoint has no snapshot and
the resume replays from an older one). A snapshot is copied and written on a thread of its own, so slime's
log function does not wait for it (:class:`~shopsim_metrics.run.snapshot_writer.SnapshotWriter`), durably
(``fsync``, then replace: :mod:`shopsim_metrics.state_file`); a damaged one is named in one warning and the
records are replayed.

Example:
    >>> plan = SnapshotPlan(save="/ckpt", load=None, save_interval=5, num_rollout=12)
    >>> [n for n in range(12) if plan.due(n)]
    [4, 9, 11]
    >>> str(snapshot_path("/ckpt", 4))
    '/ckpt/rollout/shopsim_monitor_state_4.json'
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from shopsim_metrics.sinks.jsonl import steps_files
from shopsim_metrics.state_file import DamagedStateFile, read_json_object
from shopsim_metrics.run.state import ResumableState
from shopsim_metrics.record.saved_values import saved_count, saved_counts
from shopsim_metrics.general.plain_values import is_int

SNAPSHOT_FORMAT = 1
"""The layout of a snapshot; another value is not read (the resume replays the records)."""

SNAPSHOT_KIND = "shopsim-monitor-state"
_NAME = re.compile(r"^shopsim_monitor_state_(\d+)\.json$")
_REMEDY = ("the resume replays the records instead; move the file away, or --load another checkpoint")


def snapshot_path(directory: str | os.PathLike, rollout_id: int) -> Path:
    """Where the snapshot of step ``rollout_id`` lives under a checkpoint directory (``--save``/``--load``)."""
    return Path(directory) / "rollout" / f"shopsim_monitor_state_{rollout_id}.json"


def _int_or_none(value: Any) -> int | None:
    return value if is_int(value) else None


@dataclass(frozen=True)
class SnapshotPlan:
    """When and where snapshots are written and read: slime's own ``--save``, ``--load``,
    ``--save-interval`` and ``--num-rollout`` (read from ``args``; None when absent)."""

    save: str | None
    load: str | None
    save_interval: int | None
    num_rollout: int | None

    @classmethod
    def from_args(cls, args: Any) -> "SnapshotPlan":
        """slime's flags as they are; anything unreadable is None (no snapshot, nothing found).

        >>> from types import SimpleNamespace
        >>> SnapshotPlan.from_args(SimpleNamespace(save="/c", save_interval=2))
        SnapshotPlan(save='/c', load=None, save_interval=2, num_rollout=None)
        """
        def path(name: str) -> str | None:
            value = getattr(args, name, None)
            return str(value) if isinstance(value, (str, os.PathLike)) and str(value) else None

        interval = _int_or_none(getattr(args, "save_interval", None))
        return cls(save=path("save"), load=path("load"), save_interval=interval if interval and interval > 0 else None,
                   num_rollout=_int_or_none(getattr(args, "num_rollout", None)))

    def due(self, rollout_id: int) -> bool:
        """Whether slime checkpoints after step ``rollout_id`` (its interval rule; epoch ends are not
        known here: a checkpoint there is resumed from the snapshot before it)."""
        if self.save is None or self.save_interval is None:
            return False
        if self.num_rollout is not None and rollout_id == self.num_rollout - 1:
            return True
        return (rollout_id + 1) % self.save_interval == 0


def records_positions(run_dir: str | os.PathLike) -> dict[str, int]:
    """The size in bytes of every records file of ``run_dir`` (by name): where a snapshot's records end.

    >>> import tempfile, pathlib
    >>> d = pathlib.Path(tempfile.mkdtemp()); _ = (d / "steps.jsonl").write_text('{"rollout_id":0}\\n')
    >>> records_positions(d)
    {'steps.jsonl': 17}
    """
    positions = {}
    for path in steps_files(run_dir):
        try:
            positions[path.name] = path.stat().st_size
        except OSError:
            continue
    return positions


def find_snapshot(load_dir: str | os.PathLike | None, start_rollout_id: int) -> tuple[Path, int] | None:
    """The snapshot of the newest step N < ``start_rollout_id`` under ``load_dir`` and its N, or None.

    >>> import tempfile, pathlib
    >>> d = pathlib.Path(tempfile.mkdtemp()); (d / "rollout").mkdir()
    >>> for n in (4, 9): _ = snapshot_path(d, n).write_text("{}")
    >>> find_snapshot(d, 10)[1], find_snapshot(d, 9)[1], find_snapshot(d, 4)
    (9, 4, None)
    """
    if load_dir is None:
        return None
    folder = Path(load_dir) / "rollout"
    best: tuple[Path, int] | None = None
    try:
        names = os.listdir(folder)
    except OSError:
        return None
    for name in names:
        match = _NAME.match(name)
        if match is None:
            continue
        step = int(match.group(1))
        if step < start_rollout_id and (best is None or step > best[1]):
            best = (folder / name, step)
    return best


def read_snapshot(path: str | os.PathLike) -> dict[str, Any]:
    """The snapshot in ``path``; :class:`~shopsim_metrics.state_file.DamagedStateFile` (one line) when it
    is not a readable snapshot of this format."""
    data = read_json_object(path, what="monitor snapshot", remedy=_REMEDY)
    if data.get("kind") != SNAPSHOT_KIND or data.get("format") != SNAPSHOT_FORMAT:
        raise DamagedStateFile(f"{path}: not a monitor snapshot of format {SNAPSHOT_FORMAT}; {_REMEDY}")
    for name, kind in (("rollout_id", int), ("records", dict), ("missing", int)):
        if not isinstance(data.get(name), kind) or isinstance(data.get(name), bool):
            raise DamagedStateFile(f"{path}: damaged monitor snapshot ({name} is missing or not a {kind.__name__}); "
                                   f"{_REMEDY}")
    try:  # the header's values, as the pieces check theirs (shopsim_metrics.record.saved_values)
        step = saved_count(data["rollout_id"], "rollout_id")
        saved_count(data["missing"], "missing", most=step + 1)
        saved_counts(data["records"], "records")
    except ValueError as exc:
        raise DamagedStateFile(f"{path}: damaged monitor snapshot ({exc}); {_REMEDY}") from None
    return data


def build_snapshot(state: ResumableState, *, rollout_id: int, run_id: str | None, missing: int,
                   run_dir: str | os.PathLike, writer: dict[str, Any] | None = None,
                   processes: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """The snapshot of ``state`` after step ``rollout_id`` (every registered entry under its name:
    :meth:`~shopsim_metrics.run.state.ResumableState.state_dict`), with the records positions of ``run_dir``
    taken now: every record up to this step is already written.

    ``missing``: steps before it whose records the state lacks (a resume that found none). ``writer``:
    the writing process's ``process_started_at`` and ``process_start_rollout_id``, as its records say
    them (a resume from the snapshot knows the lineage it continues without reading those records).
    ``processes``: the other processes its writer knew of, the same way
    (:class:`~shopsim_metrics.run.identity.RunWriters`).

    Example:
        >>> import tempfile
        >>> from shopsim_metrics.run.state import monitor_state
        >>> from shopsim_metrics.health.streak import TechnicalStreak
        >>> snapshot = build_snapshot(monitor_state(streak=TechnicalStreak()), rollout_id=4, run_id="r", missing=0,
        ...                           run_dir=tempfile.mkdtemp())
        >>> list(snapshot)
        ['kind', 'format', 'rollout_id', 'run_id', 'writer', 'processes', 'missing', 'streak', 'prompt_settings', 'records']
    """
    header = {"kind": SNAPSHOT_KIND, "format": SNAPSHOT_FORMAT, "rollout_id": rollout_id, "run_id": run_id,
              "writer": writer, "processes": processes or [], "missing": missing}
    return {**header, **state.state_dict(), "records": records_positions(run_dir)}
