"""What the renderers draw from: per-step rows and per-step ledgers, loaded from any source.

Sources: a list of :class:`~shopsim_metrics.records.StepRecord`, a ``steps.jsonl`` file, a run
directory holding one, or a W&B offline run (read with :mod:`shopsim_metrics.wandb_offline`).
A W&B history carries the per-step keys only; the decision ledger lives in ``steps.jsonl``, so
:attr:`DashboardData.ledger_note` then says where to find it.

Example:
    >>> from shopsim_metrics.records import StepRecord, DecisionRow
    >>> row = DecisionRow(order=1, waves_open=1, group_index=3, outcome="trained",
    ...                   reason=None, remaining_before=32, unique_rollouts=8)
    >>> data = load_dashboard_data([StepRecord(rollout_id=4, wave_count=1, decisions=[row])])
    >>> data.step_ids(), data.default_ledger_step()
    ([4], 4)
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

from shopsim_metrics import contract
from shopsim_metrics.records import StepRecord

@dataclass
class DashboardData:
    """Per-step rows (contract names, plus ``rollout_id`` and the knobs) and the ledger of each step."""

    steps: list[dict[str, Any]]
    ledgers: dict[int, list[dict[str, Any]]] | None  # None: the source has no ledger
    source: str  # a human-readable description of where the data came from
    ledger_note: str | None = None  # why the ledger is absent or partial, and where the full one is

    def step_ids(self) -> list[int]:
        return [int(s["rollout_id"]) for s in self.steps]

    def column(self, name: str) -> list[Any]:
        """Values of one per-step name over the steps (None where absent)."""
        return [s.get(name) for s in self.steps]

    def ledger_steps(self) -> list[int]:
        """Steps that have at least one ledger row, in order."""
        if not self.ledgers:
            return []
        return sorted(k for k, rows in self.ledgers.items() if rows)

    def default_ledger_step(self) -> int | None:
        """The latest step with more than one wave (the interesting one), else the latest with a ledger."""
        with_rows = self.ledger_steps()
        if not with_rows:
            return None
        waves = {int(s["rollout_id"]): s.get("wave_count") or 0 for s in self.steps}
        multi = [k for k in with_rows if waves.get(k, 0) >= 2]
        return (multi or with_rows)[-1]


def load_dashboard_data(source: Any) -> DashboardData:
    """Load from step records, a ``steps.jsonl`` path, a run directory or a W&B offline run directory.

    A directory holding ``steps.jsonl`` wins over a W&B run inside it, because only the JSONL
    record has the decision ledger.
    """
    if isinstance(source, (str, os.PathLike)):
        path = Path(source)
        if path.is_file():
            return _from_steps_file(path)
        if path.is_dir():
            if _has_steps_files(path):
                return _from_steps_file(path)  # every records file of the run directory
            run_dir = find_wandb_offline_run(path)
            if run_dir is not None:
                return from_wandb_offline_run(run_dir)
            raise FileNotFoundError(
                f"{path} holds neither {contract.STEPS_FILE_NAME} nor a W&B offline run (a directory with a "
                "run-*.wandb file, e.g. wandb/offline-run-*): pass a steps.jsonl, a run directory or a W&B run directory"
            )
        raise FileNotFoundError(f"dashboard source {path} does not exist: expected a steps.jsonl or a run directory")
    records = list(source)
    if records and not all(isinstance(r, StepRecord) for r in records):
        kinds = sorted({type(r).__name__ for r in records})
        raise TypeError(f"dashboard source must be StepRecord objects or a path; got a sequence of {kinds}")
    return from_records(records, source="step records")


def from_records(records: Iterable[StepRecord], *, source: str) -> DashboardData:
    """Rows and ledgers from step records (the ledger is each record's ``decisions``)."""
    steps: list[dict[str, Any]] = []
    ledgers: dict[int, list[dict[str, Any]]] = {}
    for rec in sorted(records, key=lambda r: r.rollout_id):
        row = rec.to_dict()
        decisions = row.pop("decisions")
        steps.append(row)
        ledgers[rec.rollout_id] = sorted(decisions, key=lambda d: d["order"])
    return DashboardData(steps=steps, ledgers=ledgers, source=source)


def _has_steps_files(run_dir: Path) -> bool:
    from shopsim_metrics.sinks.jsonl import steps_files

    return bool(steps_files(run_dir))


def _from_steps_file(path: Path) -> DashboardData:
    from shopsim_metrics.sinks.jsonl import read_steps, steps_files

    if path.is_dir():  # named by its one records file, or by the pattern when a second writer left one
        files = steps_files(path)
        source = str(files[0]) if len(files) == 1 else str(path / "steps*.jsonl")
        return from_records(read_steps(path), source=source)
    return from_records(read_steps(path), source=str(path))


def find_wandb_offline_run(path: Path) -> Path | None:
    """The W&B run directory at or under ``path`` (the newest ``offline-run-*`` when several), or None."""
    if any(path.glob("run-*.wandb")):
        return path
    for base in (path, path / "wandb"):
        latest = base / "latest-run"
        if latest.is_dir() and any(latest.glob("run-*.wandb")):
            return latest.resolve()
        runs = sorted(d for d in base.glob("offline-run-*") if d.is_dir() and any(d.glob("run-*.wandb")))
        if not runs:
            runs = sorted(d for d in base.glob("run-*") if d.is_dir() and any(d.glob("run-*.wandb")))
        if runs:
            return runs[-1]
    return None


def from_wandb_offline_run(run_dir: str | os.PathLike) -> DashboardData:
    """Rows from a W&B offline run's history (``rollout/shopsim/<name>`` against ``rollout/step``)."""
    try:
        from shopsim_metrics.wandb_offline import read_offline_run
    except ImportError as exc:  # pragma: no cover - depends on the W&B helper module being present
        raise RuntimeError(
            "reading a W&B offline run needs shopsim_metrics.wandb_offline (read_offline_run); "
            f"it could not be imported ({exc}). Pass the run's steps.jsonl instead."
        ) from exc
    run = read_offline_run(run_dir)
    steps = history_to_steps(run.history)
    ledgers = ledgers_from_tables(run.tables.get(contract.wandb_key("decisions"), []))
    where = f"the run's {contract.STEPS_FILE_NAME}"
    if ledgers:
        note = (
            "From W&B, the decision ledger exists only for the steps whose table the sink logged (multi-wave, "
            f"terminated and every N-th steps); the complete ledger is in {where}."
        )
    else:
        note = (
            "This W&B run holds no decision-ledger table: the per-group ledger is in "
            f"{where} (render the dashboard from it to see remaining through a step). "
            "Shown instead: remaining_min and wave_count per step."
        )
    return DashboardData(
        steps=steps, ledgers=ledgers or None, source=f"W&B offline run {run_dir}", ledger_note=note
    )


def ledgers_from_tables(tables: Iterable[Any]) -> dict[int, list[dict[str, Any]]]:
    """Ledgers by step from the W&B sink's decision tables (``OfflineTable`` objects).

    The step is the ``rollout/step`` of the history row the table was logged with.
    """
    out: dict[int, list[dict[str, Any]]] = {}
    for table in tables:
        step = table.row.get(contract.WANDB_STEP_KEY)
        if step is None:
            continue
        rows = [{k: r.get(k) for k in contract.LEDGER_COLUMNS} for r in table.records()]
        out[int(step)] = sorted(rows, key=lambda d: d["order"])
    return out


def history_to_steps(history: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Merge W&B history rows into one row per ``rollout/step``, keyed by contract names.

    Example:
        >>> history_to_steps([{"rollout/step": 2, "rollout/shopsim/wave_count": 2, "other": 1},
        ...                   {"rollout/step": 2, "rollout/shopsim/terminated": 1}])
        [{'rollout_id': 2, 'wave_count': 2, 'terminated': True}]
    """
    by_step: dict[int, dict[str, Any]] = {}
    for row in history:
        step = row.get(contract.WANDB_STEP_KEY)
        if step is None or (isinstance(step, float) and not math.isfinite(step)):
            continue
        out = by_step.setdefault(int(step), {"rollout_id": int(step)})
        for name in contract.WANDB_STEP_FIELDS:
            key = contract.wandb_key(name)
            if key not in row:
                continue
            value = row[key]
            if isinstance(value, float) and not math.isfinite(value):
                value = None
            if name == "terminated" and value is not None:
                value = bool(value)
            if value is not None or name not in out:
                out[name] = value
    return [by_step[k] for k in sorted(by_step)]
