"""What the renderers draw from: per-step rows and per-step ledgers, loaded from any source.

Sources: a list of :class:`~shopsim_metrics.record.records.StepRecord`, a ``steps.jsonl`` file, a run
directory holding one, or a W&B offline run (read with :mod:`shopsim_metrics.readers.wandb_offline`).
A W&B history carries the per-step keys only; the decision ledger lives in ``steps.jsonl``, so
:attr:`DashboardData.ledger_note` then says where to find it.

Example:
    >>> from shopsim_metrics.record.records import StepRecord, DecisionRow
    >>> row = DecisionRow(order=1, waves_open=1, group_index=3, outcome="trained",
    ...                   reason=None, remaining_before=32, unique_rollouts=8)
    >>> data = load_dashboard_data([StepRecord(rollout_id=4, wave_count=1, decisions=[row])])
    >>> data.step_ids(), data.default_ledger_step()
    ([4], 4)
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Collection, Iterable

from shopsim_metrics.record import contract
from shopsim_metrics.health.alerts import alert_scalars
from shopsim_metrics.record.records import AGENT, FULLY_ASYNC, PROMPT_SKIP, StepRecord, step_fields
from shopsim_metrics.readers.wandb_offline import find_wandb_offline_run, history_to_steps  # noqa: F401 - re-exported
from shopsim_metrics.general.plain_values import is_number

if TYPE_CHECKING:
    from shopsim_metrics.dashboards.spec import Panel, Series

class DashboardData:
    """Per-step columns (contract names, plus ``rollout_id`` and the knobs) and the ledgers of some steps.

    Build it from row dicts (``steps=[{"rollout_id": 0, ...}, ...]``) or from columns
    (``rollout_ids=[...], columns={name: [...]}``); renderers read columns, so a 100k-step run costs
    one list per name. ``ledgers`` holds the steps a page can show (all of them for records in memory;
    from a file, the interesting ones: see :class:`LedgerKeeper`). ``notes`` are the reader's remarks
    (skipped lines, superseded records).
    """

    def __init__(
        self,
        steps: list[dict[str, Any]] | None = None,
        ledgers: dict[int, list[dict[str, Any]]] | None = None,
        source: str = "",
        ledger_note: str | None = None,
        *,
        rollout_ids: list[int] | None = None,
        columns: dict[str, list[Any]] | None = None,
        notes: Iterable[str] = (),
    ) -> None:
        if steps is not None:
            rows = sorted(steps, key=lambda s: int(s["rollout_id"]))
            rollout_ids = [int(s["rollout_id"]) for s in rows]
            names = dict.fromkeys(k for s in rows for k in s if k != "rollout_id")
            columns = {name: [s.get(name) for s in rows] for name in names}
        self.rollout_ids: list[int] = list(rollout_ids or [])
        self.columns: dict[str, list[Any]] = dict(columns or {})
        self.columns.update(alert_columns(self.columns))
        self.ledgers = ledgers
        self.source = source
        self.ledger_note = ledger_note
        self.notes: list[str] = list(notes)
        self._positions: dict[int, int] | None = None  # index of each rollout_id, built on first use

    @property
    def steps(self) -> list[dict[str, Any]]:
        """The steps as row dicts (built on demand: prefer :meth:`column` for long runs)."""
        names = list(self.columns)
        return [{"rollout_id": rid, **{n: self.columns[n][i] for n in names}} for i, rid in enumerate(self.rollout_ids)]

    def step_ids(self) -> list[int]:
        return list(self.rollout_ids)

    def column(self, name: str) -> list[Any]:
        """Values of one per-step name over the steps (None where absent)."""
        if name == "rollout_id":
            return self.step_ids()
        values = self.columns.get(name)
        return list(values) if values is not None else [None] * len(self.rollout_ids)

    def values_at(self, step: int) -> dict[str, Any]:
        """Every per-step value of one step (empty when the step is unknown)."""
        if self._positions is None:  # the ids are fixed at construction
            self._positions = {rid: i for i, rid in enumerate(self.rollout_ids)}
        i = self._positions.get(step)
        if i is None:
            return {}
        return {name: values[i] for name, values in self.columns.items()}

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
        waves = dict(zip(self.rollout_ids, self.column("wave_count")))
        multi = [k for k in with_rows if _number(waves.get(k)) >= 2]
        return (multi or with_rows)[-1]


ALERT_SOURCE_NAMES = ("alerts", "technical_failure_warn_at")
"""The per-step names :func:`alert_columns` reads."""


def alert_columns(columns: dict[str, list[Any]]) -> dict[str, list[Any]]:
    """``contract.ALERT_FIELDS`` per step, from the records' ``alerts`` (as the W&B sink logs them), unless
    the columns hold them already (a W&B run's history); empty without an ``alerts`` column.

    Example:
        >>> alert_columns({"alerts": [[], [{"level": "ERROR"}]], "technical_failure_warn_at": [4, 4]})
        {'alert_count': [0, 1], 'alert_level': [0, 3]}
    """
    if "alerts" not in columns or any(name in columns for name in contract.ALERT_FIELDS):
        return {}
    warn_at = columns.get("technical_failure_warn_at") or [None] * len(columns["alerts"])
    per_step = [alert_scalars(alerts if isinstance(alerts, list) else [], alerts_on=at is not None)
                for alerts, at in zip(columns["alerts"], warn_at)]
    return {name: [values.get(name) for values in per_step] for name in contract.ALERT_FIELDS}


def series_values(series: "Series", data: DashboardData) -> list[float | None]:
    """The values of one series over the steps (derived ``key - minus`` when ``minus`` is set)."""
    values = _numbers(data.column(series.key))
    if series.minus is None:
        return values
    return [None if a is None or b is None else a - b for a, b in zip(values, _numbers(data.column(series.minus)))]


def _numbers(values: list[Any]) -> list[Any]:
    """``values`` with booleans as numbers (0.0, 1.0), as plotly draws them; the rest as they are."""
    return [float(v) if type(v) is bool else v for v in values]


def off_reason(panel: "Panel", data: DashboardData) -> str | None:
    """Why a step panel has nothing to draw (every value of every series null), or None when it has data.
    Both renderers say it: the HTML page over the panel, the W&B workspace built from a run in a note.

    Example:
        >>> from shopsim_metrics.dashboards.spec import dashboard_spec
        >>> skip = next(p for p in dashboard_spec().panels if p.id == "skipped_prompts")
        >>> off_reason(skip, DashboardData(steps=[{"rollout_id": 0, "skipped_prompt_count": None}]))
        'prompt skipping is off (shopsim_prompt_skip: off, or no --data-source-path shopsimrl.data_source.PromptSkipDataSource)'
    """
    if not data.rollout_ids:
        return None
    if panel.source == "ledger":  # its series are ledger columns: off only where no ledger row has a remaining
        fully_async = all(v == contract.LOOP_FULLY_ASYNC for v in data.column("loop_state_source"))
        return FULLY_ASYNC_LEDGER_OFF if fully_async else None

    def empty(series: list["Series"]) -> bool:
        return bool(series) and all(v is None for one in series for v in series_values(one, data))

    for fields, reason in OPTIONAL_FIELDS:  # a panel of a feature the run does not use: its series are null
        if empty([one for one in panel.series if one.key in fields]):
            return reason
        if panel.breakdown_key in fields and all(v is None for v in data.column(panel.breakdown_key)):
            return reason
    if empty(list(panel.series)):
        return "no step of this run carries " + ", ".join(sorted(set(panel.keys())))
    return None


OPTIONAL_FIELDS: tuple[tuple[frozenset[str], str], ...] = (
    (frozenset(step_fields(PROMPT_SKIP)), "prompt skipping is off (shopsim_prompt_skip: off, or no --data-source-path "
                                          "shopsimrl.data_source.PromptSkipDataSource)"),
    (frozenset(step_fields(FULLY_ASYNC)), "these fields exist only on slime's fully-async path (train_async.py, "
                                          "docs §3.8)"),
    (frozenset({"total_token_count", "aborted_token_count", "total_wasted_token_fraction",
                "tokens_per_informative_group", "started_rollout_count", "started_response_length_mean",
                "aborted_rollout_count", "aborted_response_length_mean", "length_bias"}),
     "no live token counts: the sample hook (--rollout-sample-hook-path "
     "shopsimrl.slime_runtime.record_generated_sample) is not wired"),
    (frozenset(step_fields(AGENT)), "no agent episode: single-turn rollouts (no loss_mask 0, no "
                                    "metadata round_number, no non_generation_time), or the sample hook "
                                    "(--rollout-sample-hook-path shopsimrl.slime_runtime.record_generated_sample), "
                                    "which counts them, is not wired"),
    (frozenset({"technical_cause_counts"}), "no technical group left a cause (metadata shopsim_failure_cause: docs "
                                            "\"Monitoring an agent run\"), or the source is a W&B run (the causes "
                                            "are in steps.jsonl)"),
    (frozenset({*contract.TOOL_FIELDS, "tool_stats"}), "no tool calls: the generate function leaves no metadata "
                                                       "shopsim_tool_calls (docs §3.9.3), or the source is a "
                                                       "W&B run (the per-tool figures are in steps.jsonl)"),
    (frozenset({"episode_end_counts"}), "no agent episode, or the source is a W&B run (why episodes ended is in "
                                        "steps.jsonl)"),
    (frozenset(contract.ALERT_FIELDS), "the alerts are off (shopsim_alerts: false)"),
)
"""Fields of features a run may not use, and what the panel says when they are null throughout."""


FULLY_ASYNC_LEDGER_OFF = ("slime's fully-async path has no waves and no remaining_batch_size (train_async.py, docs "
                          "§3.8): each finished group is judged as it comes, and the step takes the first "
                          "rollout_batch_size it lets in; the outcome panels count them, the policy-version lag and "
                          "carried-groups panels say how stale they were")
"""What the ledger panel says on a fully-async run, whose ledger rows carry no ``remaining_before``."""


MAX_BREAKDOWN_LABELS = 8
"""A breakdown panel stacks at most this many labels, the most frequent over the run; the rest as one,
``contract.OTHER_CAUSES`` (the records' own name for the causes beyond their top 5)."""


def breakdown_values(panel: "Panel", data: DashboardData) -> list[tuple[str, list[Any]]]:
    """``(label, count per step)`` of a panel's ``breakdown_key`` mappings, the most frequent label over the run
    first; past :data:`MAX_BREAKDOWN_LABELS` labels the rest are summed as ``contract.OTHER_CAUSES``; empty without
    any mapping.

    Example:
        >>> from shopsim_metrics.dashboards.spec import dashboard_spec
        >>> panel = dashboard_spec().panel("agent_technical_causes")
        >>> data = DashboardData(steps=[{"rollout_id": 0, "technical_cause_counts": {"A: x": 1, "B: y": 3}},
        ...                             {"rollout_id": 1, "technical_cause_counts": None}])
        >>> breakdown_values(panel, data)
        [('B: y', [3, 0]), ('A: x', [1, 0])]
    """
    if panel.breakdown_key is None:
        return []
    if panel.breakdown_key == "tool_stats":
        return tool_values(panel.breakdown_figure or "calls", data)
    steps = [counts if isinstance(counts, dict) else {} for counts in data.column(panel.breakdown_key)]
    totals: dict[str, int] = {}
    for counts in steps:
        for label, count in counts.items():
            totals[str(label)] = totals.get(str(label), 0) + int(_number(count))
    ranked = sorted(totals, key=lambda label: (-totals[label], label))
    kept, rest = ranked[:MAX_BREAKDOWN_LABELS], set(ranked[MAX_BREAKDOWN_LABELS:])
    if rest and contract.OTHER_CAUSES in kept:  # the records' own rest joins the labels cut here
        kept.remove(contract.OTHER_CAUSES)
        rest.add(contract.OTHER_CAUSES)
    out = [(label, [int(_number(counts.get(label))) for counts in steps]) for label in kept]
    if rest:
        out.append((contract.OTHER_CAUSES, [sum(int(_number(v)) for k, v in counts.items() if str(k) in rest)
                                   for counts in steps]))
    return out


def tool_values(figure: str, data: DashboardData) -> list[tuple[str, list[Any]]]:
    """``(label, value per step)`` of one figure of each tool in the records' ``tool_stats``: the
    :data:`MAX_BREAKDOWN_LABELS` tools called most over the run (ties by name), each tool's ``figure``
    (``calls_per_episode``: its calls / ``episode_count``; ``error_rate``: two series per tool, ``<tool>: environment``
    and ``<tool>: model``, its failed calls of each kind / its calls); None where the step has no value.

    Example:
        >>> stats = {"search": {"calls": 4, "errors": 2, "model_errors": 1}, "view": {"calls": 1, "errors": 0,
        ...                                                                          "model_errors": 0}}
        >>> data = DashboardData(steps=[{"rollout_id": 0, "episode_count": 2, "tool_stats": stats}])
        >>> tool_values("calls_per_episode", data)
        [('search', [2.0]), ('view', [0.5])]
        >>> tool_values("error_rate", data)[:2]
        [('search: environment', [0.25]), ('search: model', [0.25])]
    """
    steps = [stats if isinstance(stats, dict) else {} for stats in data.column("tool_stats")]
    episodes = data.column("episode_count")
    totals: dict[str, float] = {}
    for stats in steps:
        for name, figures in stats.items():
            calls = figures.get("calls") if isinstance(figures, dict) else None
            totals[str(name)] = totals.get(str(name), 0.0) + _number(calls)
    ranked = sorted(totals, key=lambda name: (-totals[name], name))[:MAX_BREAKDOWN_LABELS]

    def figure_of(stats: dict[str, Any], name: str, key: str) -> float | None:
        figures = stats.get(name)
        value = figures.get(key) if isinstance(figures, dict) else None
        return float(value) if is_number(value) else None

    out: list[tuple[str, list[Any]]] = []
    for name in ranked:
        calls = [figure_of(stats, name, "calls") for stats in steps]
        if figure == "calls_per_episode":
            out.append((name, [c / _number(e) if c is not None and _number(e) else None
                               for c, e in zip(calls, episodes)]))
        elif figure == "error_rate":
            errors = [figure_of(stats, name, "errors") for stats in steps]
            model = [figure_of(stats, name, "model_errors") for stats in steps]
            out.append((f"{name}: environment", [(e - m) / c if c and e is not None and m is not None else None
                                                 for c, e, m in zip(calls, errors, model)]))
            out.append((f"{name}: model", [m / c if c and m is not None else None for c, m in zip(calls, model)]))
        else:
            out.append((name, [figure_of(stats, name, figure) for stats in steps]))
    return out


def _number(value: Any) -> float:
    return float(value) if is_number(value) else 0.0


LEDGER_KINDS = ("multi-wave", "most waves", "terminated", "highest waste", "latest")
"""Why a step's ledger is worth offering, in the order the page's step picker fills its places."""


def ledger_kinds(values: dict[str, Any]) -> list[str]:
    """The kinds of :data:`LEDGER_KINDS` (but ``latest``) that fit one step's per-step values.

    Example:
        >>> ledger_kinds({"wave_count": 3, "terminated": False, "wasted_sample_fraction": 0.5})
        ['multi-wave', 'most waves', 'highest waste']
    """
    kinds = []
    if _number(values.get("wave_count")) >= 2:
        kinds += ["multi-wave", "most waves"]
    if values.get("terminated") is True:
        kinds.append("terminated")
    if _number(values.get("wasted_sample_fraction")) > 0:
        kinds.append("highest waste")
    return kinds


def ledger_score(kind: str, step: int, values: dict[str, Any]) -> tuple[float, int]:
    """Higher is more worth showing: the waste for ``highest waste``, the wave count for ``most waves``,
    the step (later first) otherwise; ties go to the later step."""
    if kind == "highest waste":
        return (_number(values.get("wasted_sample_fraction")), step)
    if kind == "most waves":
        return (_number(values.get("wave_count")), step)
    return (float(step), step)


class LedgerKeeper:
    """Keeps, while a file streams by, the ledgers of at most ``per_kind`` steps of each kind of
    :data:`LEDGER_KINDS` (with some slack), plus the ``wanted`` step: bounded memory for any run length.

    It keeps a step's line as read (one bytes object) and parses the ledgers it still keeps at the end:
    cheaper than holding the parsed rows of every candidate step. A later record of a step replaces the
    earlier one everywhere.

    Example:
        >>> import json
        >>> keeper = LedgerKeeper(per_kind=1)
        >>> for step in range(10):
        ...     record = {"rollout_id": step, "wave_count": 2 if step in (3, 7) else 1, "decisions": [{"order": 1}]}
        ...     keeper(step, record, json.dumps(record).encode())
        >>> sorted(keeper.ledgers())  # both multi-wave steps, and the latest (8 is slack, pruned later)
        [3, 7, 8, 9]
        >>> keeper.ledgers()[9]
        [{'order': 1}]
    """

    def __init__(self, *, per_kind: int = 25, wanted: int | None = None) -> None:
        self.per_kind = per_kind
        self.wanted = wanted
        self._scores: dict[str, dict[int, tuple[float, int]]] = {kind: {} for kind in LEDGER_KINDS}
        self._lines: dict[int, bytes] = {}  # every step of the scores, and the wanted one

    def __call__(self, step: int, record: dict[str, Any], line: bytes) -> None:
        """Consider one record (``line`` parsed: its per-step values and ``decisions``)."""
        if step in self._lines:
            for scores in self._scores.values():
                scores.pop(step, None)
            del self._lines[step]
        if not record.get("decisions"):
            return
        kinds = [*ledger_kinds(record), "latest"]
        for kind in kinds:
            self._scores[kind][step] = ledger_score(kind, step, record)
        self._lines[step] = line
        for kind in kinds:
            if len(self._scores[kind]) > 2 * self.per_kind:
                self._prune(kind)

    def _prune(self, kind: str) -> None:
        scores = self._scores[kind]
        best = sorted(scores, key=scores.__getitem__, reverse=True)[: self.per_kind]
        self._scores[kind] = {step: scores[step] for step in best}
        kept = set().union(*self._scores.values())
        for step in [s for s in self._lines if s not in kept and s != self.wanted]:
            del self._lines[step]

    def ledgers(self) -> dict[int, list[dict[str, Any]]]:
        """The kept ledgers by step, rows in judgement order."""
        from shopsim_metrics.readers.steps import parse_line

        return {step: sorted(parse_line(line)["decisions"], key=lambda d: _number(d.get("order")))
                for step, line in self._lines.items()}


def load_dashboard_data(source: Any, *, ledger_step: int | None = None,
                        names: Collection[str] | None = None) -> DashboardData:
    """Load from step records, a ``steps.jsonl`` path, a run directory or a W&B offline run directory.

    A directory holding ``steps.jsonl`` wins over a W&B run inside it, because only the JSONL
    record has the decision ledger. From a file, the ledgers kept are those of :class:`LedgerKeeper`
    and the one of ``ledger_step``, and the columns those of ``names`` (default: every per-step name;
    a long run's file is read into the columns a renderer draws, not all of them).
    """
    if isinstance(source, (str, os.PathLike)):
        from shopsim_metrics.errors import check_input_path

        path = check_input_path(source, f"a {contract.STEPS_FILE_NAME}, the run directory holding it, or a W&B "
                                        "offline run directory")
        if path.is_file() or _has_steps_files(path):  # a directory: every records file of the run directory
            return _from_steps_file(path, ledger_step, names)
        run_dir = find_wandb_offline_run(path)
        if run_dir is not None:
            return from_wandb_offline_run(run_dir)
        from shopsim_metrics.readers.steps import run_dir_hint

        raise FileNotFoundError(
            f"{path} holds neither {contract.STEPS_FILE_NAME} nor a W&B offline run (a directory with a "
            "run-*.wandb file, e.g. wandb/offline-run-*): pass a steps.jsonl, a run directory or a W&B run directory"
            + run_dir_hint(path)
        )
    records = list(source)
    if records and not all(isinstance(r, StepRecord) for r in records):
        kinds = sorted({type(r).__name__ for r in records})
        raise TypeError(f"dashboard source must be StepRecord objects or a path; got a sequence of {kinds}")
    return from_records(records, source="step records")


def from_records(records: Iterable[StepRecord], *, source: str) -> DashboardData:
    """Rows and ledgers from step records (the ledger is each record's ``decisions``; the latest record
    of a rollout_id wins)."""
    latest: dict[int, StepRecord] = {}
    for rec in records:
        latest[rec.rollout_id] = rec
    steps: list[dict[str, Any]] = []
    ledgers: dict[int, list[dict[str, Any]]] = {}
    for rid in sorted(latest):
        row = latest[rid].to_dict()
        decisions = row.pop("decisions")
        steps.append(row)
        ledgers[rid] = sorted(decisions, key=lambda d: d["order"])
    return DashboardData(steps=steps, ledgers=ledgers, source=source)


def _has_steps_files(run_dir: Path) -> bool:
    from shopsim_metrics.sinks.jsonl import steps_files

    return bool(steps_files(run_dir))


def _from_steps_file(path: Path, ledger_step: int | None = None,
                     names: Collection[str] | None = None) -> DashboardData:
    """Stream a records file, or every records file of a run directory, into columns (those of ``names``, or every
    per-step name) and kept ledgers."""
    from shopsim_metrics.readers.steps import COLUMN_NAMES, read_step_columns

    keeper = LedgerKeeper(wanted=ledger_step)
    read = COLUMN_NAMES if names is None else tuple(n for n in COLUMN_NAMES if n in names)
    table = read_step_columns(path, keep_ledger=keeper, names=read)
    return DashboardData(
        rollout_ids=table.rollout_ids, columns=table.columns, ledgers=keeper.ledgers(),
        source=str(table.report.path), notes=table.report.notes(),
    )


def from_wandb_offline_run(run_dir: str | os.PathLike) -> DashboardData:
    """Rows from a W&B offline run's history (``rollout/shopsim/<name>`` against ``rollout/step``)."""
    try:
        from shopsim_metrics.readers.wandb_offline import read_offline_run
    except ImportError as exc:  # pragma: no cover - depends on the W&B helper module being present
        raise RuntimeError(
            "reading a W&B offline run needs shopsim_metrics.readers.wandb_offline (read_offline_run); "
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
