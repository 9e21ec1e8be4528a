"""The W&B sink: step records into the run slime already started (or a standalone run outside slime).

``wandb`` is imported lazily, inside the methods that need it: importing the filter never imports
wandb. The run is resolved at the first record, not at construction, so the sink can be built
before slime has called ``wandb.init``.

Modes (``shopsim_wandb``):

- ``auto``: inside slime, join ``wandb.run`` when ``--use-wandb`` is on and a run exists in this
  process, else no W&B; outside slime, join the run in the process or start a standalone one;
- ``join``: join ``wandb.run``; without one the sink disables itself with one warning;
- ``standalone``: join ``wandb.run`` when there is one (never a second run), else start one;
- ``off``: the sink is not built (see :func:`shopsim_metrics.sinks.factory.build_sinks`).

A standalone run is ``offline`` when no API key is configured (``WANDB_API_KEY`` or a netrc entry
for the W&B host); it then lands in ``<dir>/wandb/offline-run-*``.

Failure isolation: wandb missing, misconfigured, or raising in any call makes the sink log ONE
warning and disable itself; no exception leaves it. The JSONL sink keeps the complete record.

Example (wandb is not imported until a record arrives):
    >>> sink = WandbSink(mode="off")
    >>> sink.enabled, sink.run
    (False, None)
    >>> "rollout/shopsim/decisions" in WandbSink.logged_keys()
    True
"""

from __future__ import annotations

import logging
import netrc
import operator
import os
import threading
from dataclasses import asdict, is_dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable
from urllib.parse import urlsplit

from shopsim_metrics.record import contract
from shopsim_metrics.health.alerts import Alert, alert_scalars
from shopsim_metrics.record.records import StepRecord
from shopsim_metrics.sinks.base import StepSink
from shopsim_metrics.sinks.deadline import DeadlinePassed, call_within

if TYPE_CHECKING:  # pragma: no cover - types only
    from shopsim_metrics.settings import ShopsimSettings

logger = logging.getLogger("shopsim_metrics")

DECISIONS_KEY = contract.wandb_key("decisions")
"""Key of the decision-ledger table (a ``wandb.Table`` with columns ``contract.LEDGER_COLUMNS``)."""

PROMPTS_KEY = contract.wandb_key("prompts")
"""Key of the prompts table (columns ``contract.PROMPT_TABLE_COLUMNS``): every N steps and at the run's last step."""

SKIPPED_PROMPTS_KEY = contract.wandb_key("skipped_prompts")
"""The prompts skipped before generation in a step (runs with ``shopsim_prompt_skip: greso``): every step with a skip."""

FAILED_CHECK_PREFIX = contract.wandb_key("failed_check/")
"""Per-check technical drop counts: ``rollout/shopsim/failed_check/<name>``, names from FAILED_CHECKS."""

SINK_MODES = ("auto", "join", "standalone", "off")
_DEFAULT_WANDB_HOST = "https://api.wandb.ai"

row_values = operator.attrgetter(*contract.LEDGER_COLUMNS)
"""A ledger row's values in ``contract.LEDGER_COLUMNS`` order: one row of the decisions table."""


def wandb_role(mode: str, *, inside_slime: bool, use_wandb: bool | None) -> str | None:
    """What the project does with W&B, decided once for the factory and the sink: ``"join"`` (only the run
    already in the process), ``"join_or_start"`` (that run, else a standalone one), or None (no W&B).

    Example:
        >>> [wandb_role("auto", inside_slime=True, use_wandb=u) for u in (True, False)]
        ['join', None]
        >>> wandb_role("auto", inside_slime=False, use_wandb=None), wandb_role("off", inside_slime=False, use_wandb=None)
        ('join_or_start', None)
    """
    if mode == "off":
        return None
    if mode == "auto" and inside_slime:
        return "join" if use_wandb else None
    return "join" if mode == "join" else "join_or_start"


def failed_check_key(name: str) -> str:
    """W&B key of the technical drop count of one failed check (from ``contract.FAILED_CHECKS``)."""
    return FAILED_CHECK_PREFIX + name


def wandb_step(rollout_id: int, *, always_use_train_step: bool = False, rollout_batch_size: int | None = None,
               n_samples_per_prompt: int | None = None, global_batch_size: int | None = None) -> int:
    """The ``rollout/step`` value slime logs for a rollout: ``rollout_id``, or the train step.

    Under ``--wandb-always-use-train-step`` slime uses
    ``rollout_id * rollout_batch_size * n_samples_per_prompt // global_batch_size``; when a knob is
    unknown the rollout id is used.

    Example:
        >>> wandb_step(3)
        3
        >>> wandb_step(3, always_use_train_step=True, rollout_batch_size=16,
        ...            n_samples_per_prompt=8, global_batch_size=64)
        6
    """
    if always_use_train_step and rollout_batch_size and n_samples_per_prompt and global_batch_size:
        return rollout_id * rollout_batch_size * n_samples_per_prompt // global_batch_size
    return rollout_id


def table_due(record: StepRecord, every: int) -> bool:
    """Whether the step's decision ledger is logged as a table.

    Every ``every`` rollout ids (``rollout_id % every == 0``; ``every=0`` means never on schedule),
    and always for a step that needed more than one wave or ended in termination.

    Example:
        >>> table_due(StepRecord(rollout_id=3, wave_count=1), 10)
        False
        >>> table_due(StepRecord(rollout_id=3, wave_count=2), 0)
        True
    """
    if (record.wave_count or 0) > 1 or record.terminated:  # None: the fully-async path has no waves
        return True
    return every > 0 and record.rollout_id % every == 0


def record_scalars(record: StepRecord) -> dict[str, float | int]:
    """The scalars of one record under their W&B keys (None values skipped, ``terminated`` as 0/1), and
    the alerts of its step as numbers (``contract.ALERT_FIELDS``: 0 in a step without an alert, absent
    while the alerts are off).

    Example:
        >>> d = record_scalars(StepRecord(rollout_id=0, terminated=True, success_rate=None))
        >>> d["rollout/shopsim/terminated"], "rollout/shopsim/success_rate" in d
        (1, False)
        >>> warned = StepRecord(rollout_id=1, technical_failure_warn_at=4, alerts=[{"level": "WARN", "title": "t",
        ...                                                                     "text": "x"}])
        >>> record_scalars(warned)["rollout/shopsim/alert_count"], record_scalars(warned)["rollout/shopsim/alert_level"]
        (1, 2)
    """
    out: dict[str, float | int] = {}
    for name, key in _SCALAR_KEYS:
        value = getattr(record, name, None)
        if value is None:
            continue
        out[key] = int(value) if isinstance(value, bool) else value
    counts = record.failed_check_counts or {}
    for check, key in _FAILED_CHECK_KEYS:
        out[key] = int(counts.get(check, 0))
    alerts_on = record.technical_failure_warn_at is not None  # the monitor sets it while the alerts are on
    for name, value in alert_scalars(record.alerts, alerts_on=alerts_on).items():
        out[contract.wandb_key(name)] = value
    out.update(tool_scalars(record))
    return out


def tool_scalars(record: StepRecord) -> dict[str, float | int]:
    """The tool figures of one record under their W&B keys: ``tools/<name>/<figure>`` for each tool of ``tool_stats``
    (at most 20 safe names and ``(other tools)``; beside the record's figures, ``calls_per_episode`` and the error
    rates ``environment_error_rate`` and ``model_error_rate`` over its calls), and ``episode_end/<reason>`` for
    each reason of ``episode_end_counts``. Empty for a record without them.

    Example:
        >>> stats = {"search": {"calls": 4, "errors": 1, "model_errors": 1, "seconds": 2.0, "seconds_p50": 0.5,
        ...                     "seconds_p90": 0.8, "seconds_max": 0.8}}
        >>> d = tool_scalars(StepRecord(rollout_id=0, episode_count=2, tool_stats=stats))
        >>> d["rollout/shopsim/tools/search/calls_per_episode"], d["rollout/shopsim/tools/search/model_error_rate"]
        (2.0, 0.25)
    """
    out: dict[str, float | int] = {}
    episodes = record.episode_count
    for name, figures in (record.tool_stats or {}).items():
        for figure, value in figures.items():
            if figure in contract.TOOL_STAT_FIELDS and value is not None:
                out[contract.tool_key(name, figure)] = value
        calls, errors, model = figures.get("calls") or 0, figures.get("errors") or 0, figures.get("model_errors") or 0
        if episodes:
            out[contract.tool_key(name, "calls_per_episode")] = calls / episodes
        if calls:
            out[contract.tool_key(name, "environment_error_rate")] = (errors - model) / calls
            out[contract.tool_key(name, "model_error_rate")] = model / calls
    for reason, count in (record.episode_end_counts or {}).items():
        if reason in contract.EPISODE_END_REASONS:
            out[contract.episode_end_key(reason)] = count
    return out


_SCALAR_KEYS = tuple((name, contract.wandb_key(name)) for name in contract.WANDB_STEP_FIELDS)
_FAILED_CHECK_KEYS = tuple((check, failed_check_key(check)) for check in contract.FAILED_CHECKS)


def api_key_configured(environ: dict[str, str] | None = None) -> bool:
    """True when a W&B API key is configured: ``WANDB_API_KEY``, or a netrc entry for the W&B host.

    Reads only the environment and the netrc file (``$NETRC`` or ``~/.netrc``); never the network.
    """
    env = os.environ if environ is None else environ
    if env.get("WANDB_API_KEY"):
        return True
    host = urlsplit(env.get("WANDB_BASE_URL") or _DEFAULT_WANDB_HOST).hostname or ""
    path = Path(env.get("NETRC") or Path.home() / ".netrc")
    try:
        auth = netrc.netrc(str(path)).authenticators(host)
    except (OSError, netrc.NetrcParseError):
        return False
    return bool(auth and auth[2])


def _finish_quietly(run: Any) -> None:
    """Finish a run whose start came after the sink gave up on it (nothing is logged into it)."""
    run.finish(quiet=True)


class WandbSink(StepSink):
    """Logs step records, decision tables and alerts to W&B (see the module docstring)."""

    name = "wandb"

    def __init__(
        self,
        *,
        mode: str = "auto",
        inside_slime: bool = False,
        use_wandb: bool | None = None,
        project: str = "shopsim-metrics",
        table_every: int = 10,
        always_use_train_step: bool = False,
        run_dir: str | os.PathLike | None = None,
        config: dict[str, Any] | None = None,
        summary: dict[str, Any] | None = None,
        init_timeout: float = 30.0,
    ) -> None:
        if mode not in SINK_MODES:
            raise ValueError(f"WandbSink mode must be one of {SINK_MODES}; got {mode!r}")
        self.mode = mode
        self.inside_slime = inside_slime
        self.use_wandb = use_wandb
        self.project = project
        self.table_every = table_every
        self.always_use_train_step = always_use_train_step
        self.init_timeout = init_timeout
        """Seconds a standalone run may take to start (``shopsim_wandb_init_timeout``); then W&B is off."""
        self.run_dir = Path(run_dir) if run_dir is not None else None
        self.config = dict(config or {})
        self.summary = dict(summary or {})
        """Put into the run's summary once the run is resolved (where the records land: run dir, host)."""
        self.role = wandb_role(mode, inside_slime=inside_slime, use_wandb=use_wandb)
        self.enabled = self.role is not None
        self.disabled_reason: str | None = None
        if mode == "off":
            self.disabled_reason = "shopsim_wandb is off"
        elif not self.enabled:
            self.disabled_reason = "slime runs without --use-wandb; the project logs to JSONL only"
        self.owns_run = False
        self._run: Any = None
        self._wandb: Any = None
        self._last_step: int | None = None  # rollout/step of the last record logged
        self._lock = threading.RLock()

    @classmethod
    def from_settings(cls, settings: "ShopsimSettings", run_dir: str | os.PathLike | None = None,
                      summary: dict[str, Any] | None = None) -> "WandbSink":
        """The sink a runtime uses, from its validated settings (``summary``: see the attribute)."""
        config = asdict(settings) if is_dataclass(settings) else {}
        return cls(
            mode=settings.wandb,
            inside_slime=settings.inside_slime,
            use_wandb=settings.use_wandb,
            project=settings.wandb_project,
            table_every=settings.wandb_table_every,
            always_use_train_step=settings.wandb_always_use_train_step,
            run_dir=run_dir,
            config={"shopsim": config},
            summary=summary,
            init_timeout=settings.wandb_init_timeout,
        )

    @staticmethod
    def logged_keys() -> tuple[str, ...]:
        """Every fixed ``rollout/shopsim/...`` key this sink can log (docs §3.3 lists exactly these); beside them, each
        tool's ``rollout/shopsim/tools/<name>/<figure>`` (at most 21 names: docs §3.3.15)."""
        scalars = tuple(contract.wandb_key(n) for n in contract.WANDB_SCALAR_NAMES)
        checks = tuple(failed_check_key(c) for c in contract.FAILED_CHECKS)
        ends = tuple(contract.episode_end_key(r) for r in contract.EPISODE_END_REASONS)
        return scalars + checks + ends + (DECISIONS_KEY, PROMPTS_KEY, SKIPPED_PROMPTS_KEY)

    @property
    def run(self) -> Any:
        """The W&B run records go to (resolved on first use), or None when the sink is disabled.

        A joined run that its owner finished (slime's ``RolloutManager.dispose()`` calls
        ``wandb.finish()`` at the end of ``train.py``) is no longer the process's run: the sink stops
        logging into it, quietly. That is the end of the run, not a W&B failure.
        """
        with self._lock:
            if self._run is None and self.enabled:
                self._guarded("start", self._resolve_run)
            if self._run is not None and not self.owns_run and self._wandb.run is not self._run:
                self._disable("the W&B run was finished by its owner (slime ends its run with the last step)",
                              warn=False)
            return self._run if self.enabled else None

    # --- StepSink ---------------------------------------------------------------------------
    def emit(self, record: StepRecord) -> None:
        with self._lock:
            run = self.run
            if run is None:
                return
            self._guarded("log", lambda: self._log(run, record))

    def alert(self, alert: Alert) -> None:
        """``run.alert`` with the alert's level; the runtime writes the log line for every sink."""
        with self._lock:
            run = self.run
            if run is None:
                return

            def send() -> None:
                level = getattr(self._wandb.AlertLevel, alert.level, self._wandb.AlertLevel.WARN)
                run.alert(title=alert.title, text=alert.text, level=level)
                logger.info("shopsim-metrics: W&B alert sent [%s] %s", alert.level, alert.title)

            self._guarded("alert", send)

    def close(self) -> None:
        """Finish the run when this sink started it; a joined run belongs to slime and stays open."""
        with self._lock:
            run, self._run = self._run, None
            if run is not None and self.owns_run:
                if self.enabled:
                    self._guarded("finish", run.finish)
                else:  # already warned once: finish quietly so wandb writes its files
                    try:
                        run.finish()
                    except Exception:  # noqa: BLE001
                        pass
            self.owns_run = False

    # --- internals --------------------------------------------------------------------------
    def _log(self, run: Any, record: StepRecord) -> None:
        # the knobs in force come with the record itself
        step = wandb_step(record.rollout_id, always_use_train_step=self.always_use_train_step,
                          rollout_batch_size=record.rollout_batch_size,
                          n_samples_per_prompt=record.n_samples_per_prompt,
                          global_batch_size=record.global_batch_size)
        data: dict[str, Any] = record_scalars(record)
        data[contract.WANDB_STEP_KEY] = step
        if table_due(record, self.table_every):
            rows = [list(row_values(row)) for row in record.decisions]
            data[DECISIONS_KEY] = self._wandb.Table(columns=list(contract.LEDGER_COLUMNS), data=rows,
                                                    allow_mixed_types=True)
        if record.prompt_table is not None:
            data[PROMPTS_KEY] = self._prompt_table(record.prompt_table)
        if record.skipped_prompts:
            columns = list(contract.SKIPPED_PROMPT_COLUMNS)
            data[SKIPPED_PROMPTS_KEY] = self._wandb.Table(
                columns=columns, data=[[row.get(c) for c in columns] for row in record.skipped_prompts],
                allow_mixed_types=True)
        self._last_step = step
        run.log(data)

    def prompt_table(self, rows: list[list], rollout_id: int | None) -> None:
        """The prompts table at process exit (a run without ``num_rollout``), against the last step logged."""
        with self._lock:
            run = self.run if self._run is not None else None  # never start a run for the table alone
            if run is None or self._last_step is None:
                return

            def log() -> None:
                run.log({PROMPTS_KEY: self._prompt_table(rows), contract.WANDB_STEP_KEY: self._last_step})

            self._guarded("prompt_table", log)

    def _prompt_table(self, rows: list[list]) -> Any:
        return self._wandb.Table(columns=list(contract.PROMPT_TABLE_COLUMNS), data=rows, allow_mixed_types=True)

    def _resolve_run(self) -> None:
        import wandb  # lazy: importing the project never imports wandb

        self._wandb = wandb
        existing = wandb.run
        if existing is not None:
            self._run, self.owns_run = existing, False
        elif self.role == "join":
            self._disable("no W&B run exists in this process to join (slime starts one with --use-wandb); set "
                          "shopsim_wandb: standalone to start a separate run, or off to silence this")
            return
        else:
            self._run, self.owns_run = self._start_standalone(wandb), True
        self._define_metrics(self._run)
        if self.summary:
            self._run.summary.update(self.summary)
        logger.info("shopsim-metrics: logging to W&B run %s (%s)", getattr(self._run, "id", "?"),
                    "started by the sink" if self.owns_run else "joined")

    def _start_standalone(self, wandb: Any) -> Any:
        kwargs: dict[str, Any] = {"project": self.project, "config": self.config}
        if not api_key_configured() and os.environ.get("WANDB_MODE", "").lower() != "disabled":
            kwargs["mode"] = "offline"
        if self.run_dir is not None and not os.environ.get("WANDB_DIR"):
            self.run_dir.mkdir(parents=True, exist_ok=True)
            kwargs["dir"] = str(self.run_dir)
        kwargs["settings"] = wandb.Settings(init_timeout=self.init_timeout)  # W&B's own bound, not tight
        try:  # the hard bound: never block the rollout thread past init_timeout
            return call_within(self.init_timeout, lambda: wandb.init(**kwargs), on_late=_finish_quietly,
                               name="shopsim-wandb-init")
        except DeadlinePassed:
            raise DeadlinePassed(f"wandb.init did not return within shopsim_wandb_init_timeout = "
                                 f"{self.init_timeout:g} s (is the W&B host reachable?)") from None

    @staticmethod
    def _define_metrics(run: Any) -> None:
        run.define_metric(contract.WANDB_STEP_KEY)
        run.define_metric(contract.WANDB_PREFIX + "*", step_metric=contract.WANDB_STEP_KEY)

    def _guarded(self, what: str, call: Callable[[], Any]) -> None:
        try:
            call()
        except ImportError as exc:
            self._disable(f"wandb cannot be imported ({exc}); install it with `pip install wandb`, "
                          "or set shopsim_wandb: off")
        except Exception as exc:  # noqa: BLE001 - monitoring must never stop training
            self._disable(f"W&B failed in {what} ({type(exc).__name__}: {exc})")

    def _disable(self, reason: str, *, warn: bool = True) -> None:
        if not self.enabled:
            return
        self.enabled = False
        self.disabled_reason = reason
        (logger.warning if warn else logger.info)(
            "shopsim-metrics: W&B logging is off for the rest of the run: %s. Training goes on and "
            "the JSONL record (steps.jsonl) stays complete.", reason)
