"""The one assembler of step records: what the sinks receive, in order (each step's record, and the alerts).

A step's record is built once, here, from

- the closed step the accountant hands over (:class:`~shopsim_metrics.step.closed_step.ClosedStep`): its
  counts, rates, costs, streak and waves (:func:`~shopsim_metrics.step.closed_step.closed_step_fields`) and
  the prompt tracker's part;
- the writer's identity (``run_id``, the process, ``record_sequence``);
- what slime's log function hands over (:class:`SlimeFacts`: slime's time and drop counters);
- the skip fields of the data source that skips prompts (:meth:`StepRecorder.attach_skipping`);
- the alerts sent for the step or an earlier one, the advisories the step raises, and the run's
  final prompts table on its last step.

Every contributor returns its fields and :meth:`~shopsim_metrics.step.draft.StepDraft.finish` builds the
frozen record once. Should a contributor fail, the record is built from the parts gathered so far and
still handed to the sinks: a taken step is never lost. The alerts go through here too (:meth:`send_alert`),
so a record carries every alert sent before it.

Example:
    >>> from shopsim_metrics.sinks import MemorySink
    >>> from shopsim_metrics.health.alerts import StreakAlertPolicy
    >>> from shopsim_metrics.step.closed_step import ClosedStep, StepKnobs
    >>> mem = MemorySink()
    >>> recorder = StepRecorder(lambda: mem, alerts=StreakAlertPolicy(max_consecutive_failed_groups=8),
    ...                         identity={"run_id": "r1"}, num_rollout=None)
    >>> closed = ClosedStep(rollout_id=0, knobs=StepKnobs(rollout_batch_size=2, over_sampling_batch_size=4),
    ...                     source="mirror")
    >>> _ = recorder.record([closed], SlimeFacts(rollout_id=0, rollout_extra_metrics={}, rollout_time=12.0))
    >>> record = mem.records[0]
    >>> record.run_id, record.record_sequence, record.rollout_seconds, record.reconcile_mismatch_count
    ('r1', 1, 12.0, 0)
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Protocol, Sized

from shopsim_metrics.record import contract as C
from shopsim_metrics.health.advisories import Advisor, StepFacts
from shopsim_metrics.health.alerts import Alert, StreakAlertPolicy
from shopsim_metrics.step.closed_step import ClosedStep, environment_time_fraction, step_draft
from shopsim_metrics.record.owners import ALERTS, PROMPTS, RESUME, SKIPPING, SLIME, WRITER
from shopsim_metrics.step.draft import RecordPart, StepDraft
from shopsim_metrics.step.group_sizes import unequal_size_warning
from shopsim_metrics.record.records import StepRecord
from shopsim_metrics.general.warn_once import WarnOnce

logger = logging.getLogger("shopsim_metrics")

PENDING_ALERTS_LIMIT = 1000
"""Alerts kept for the next record at most (a run whose records never come does not grow without end)."""


class RecordSinks(Protocol):
    """Where records and alerts go (:class:`~shopsim_metrics.sinks.base.SinkSet`)."""

    def emit(self, record: StepRecord) -> None: ...

    def alert(self, alert: Alert) -> None: ...

    def prompt_table(self, rows: list[list[Any]], rollout_id: int | None) -> None: ...


class PromptTable(Protocol):
    """The prompt tracker as the recorder reads it: the run's prompts table
    (:class:`~shopsim_metrics.prompts.value.PromptValueTracker`)."""

    history: Sized  # the prompts seen

    def table(self) -> list[list[Any]]: ...


class Skipping(Protocol):
    """The skipping data source and the skip tally, as one reader of the step's skip fields."""

    def step_fields(self, decisions: list[Any]) -> dict[str, Any]: ...


@dataclass(frozen=True)
class SlimeFacts:
    """What slime's log function hands over for step ``rollout_id``: its metrics and its time.

    ``started``: when the log function's hook call began (its time up to the sinks counts in the step's
    ``filter_seconds``; None: not timed).
    """

    rollout_id: int
    rollout_extra_metrics: Any
    rollout_time: Any
    started: float | None = None


class StepRecorder:
    """Builds each step's record once and hands records and alerts to the sinks, one thread at a time, in order."""

    def __init__(
        self,
        sinks: Callable[[], RecordSinks],
        *,
        alerts: StreakAlertPolicy,
        identity: dict[str, Any],
        num_rollout: int | None,
        advisor: Advisor | None = None,
        prompts: PromptTable | None = None,
        history_partial: bool = False,
        keeps_alerts: bool = True,
    ) -> None:
        self._sinks = sinks  # built lazily by the monitor: the filter path never builds them unless it terminates
        self.alerts = alerts
        self.advisor = advisor
        """The recent steps' advisories (:mod:`~shopsim_metrics.health.advisories`): fed as each step is recorded."""
        self.identity = identity
        """The writer as every record says it: ``run_id``, ``process_started_at``, ``process_start_rollout_id``."""
        self.num_rollout = num_rollout
        self.prompts = prompts
        self.history_partial = history_partial  # a resume found no record of some earlier steps
        self.keeps_alerts = keeps_alerts  # records carry the alerts (False: no step is accounted, no record comes)
        self.skipping: Skipping | None = None
        """The skip fields' reader, once a skipping data source attached (:meth:`attach_skipping`)."""
        self.lock = threading.RLock()
        """Held while records and alerts go to the sinks (the monitor holds it across a whole emission)."""
        self._pending_alerts: list[Alert] = []  # sent, not yet carried by a record
        self._record_sequence = 0  # records emitted so far
        self._final_table_sent = False  # the run's last step carried the final prompts table
        self._warn_once = WarnOnce(logger)

    def attach_skipping(self, skipping: Skipping) -> None:
        """The step's skip fields come from ``skipping`` from now on."""
        self.skipping = skipping

    # --- records ------------------------------------------------------------------------------
    def record(self, closed_steps: Iterable[ClosedStep], slime: SlimeFacts | None = None) -> list[StepRecord]:
        """Build and emit the record of each closed step, oldest first; ``slime``: what the log function handed
        over (for its step only). The warnings of the steps up to the last one go out after them."""
        records: list[StepRecord] = []
        with self.lock:
            last = None
            for closed in closed_steps:
                draft = self._guarded(closed, slime)
                if draft.record is not None:
                    records.append(draft.record)
                last = closed.rollout_id
            up_to = slime.rollout_id if slime is not None else last
            if slime is not None or last is not None:
                self.send_warnings(up_to=up_to)
        return records

    def _guarded(self, closed: ClosedStep, slime: SlimeFacts | None) -> StepDraft:
        """Build the step's record from every part (the writer's identity first); should a part fail, the record is
        built from the parts gathered and handed to the sinks: a taken step is never lost."""
        self._record_sequence += 1
        parts: list[RecordPart] = []
        draft = None
        try:
            parts.append(RecordPart(WRITER, {**self.identity, "record_sequence": self._record_sequence}))
            draft = step_draft(closed)
            if slime is not None and closed.rollout_id == slime.rollout_id:
                parts.append(self._slime_part(draft, slime))
            self._complete(draft, parts)
            return draft
        except Exception as exc:  # noqa: BLE001 - monitoring never stops training, nor loses a step
            self._warn_once("emit", "shopsim-metrics: completing the record of step %s failed (%s: %s); it is "
                            "written as it stands.", closed.rollout_id, type(exc).__name__, exc)
            if draft is None:
                draft = StepDraft(closed.rollout_id)
            if draft.record is None:
                try:
                    draft.finish(*parts)
                except Exception:  # noqa: BLE001 - a part that cannot be used: the closed step's and the identity
                    draft.finish(*parts[:1])
            self._sinks().emit(draft.record)
            return draft

    def _slime_part(self, draft: StepDraft, slime: SlimeFacts) -> RecordPart:
        """slime's time and drop counters (the log function's own time counted in ``filter_seconds``); whatever
        slime hands over, the record is emitted: a value that cannot be read stays null."""
        try:
            return self._slime_fields(draft, slime)
        except Exception as exc:  # noqa: BLE001 - an unreadable value never costs the step its record
            self._warn_once("slime_facts", "shopsim-metrics: step %s: reading what slime's log function handed "
                            "over failed (%s: %s); the record is written with those fields null.",
                            draft.rollout_id, type(exc).__name__, exc)
            return RecordPart(SLIME, {})

    def _slime_fields(self, draft: StepDraft, slime: SlimeFacts) -> RecordPart:
        seconds = read_seconds(slime.rollout_time)
        if slime.started is not None:
            draft.add_filter_seconds(time.perf_counter() - slime.started)
        part: dict[str, Any] = {"rollout_seconds": seconds}
        if seconds:
            part["filter_time_fraction"] = draft.value("filter_seconds") / seconds
        if draft.has("environment_seconds_per_episode"):
            part["environment_time_fraction"] = environment_time_fraction(
                draft.value("environment_seconds_per_episode"), seconds)
        if slime.rollout_extra_metrics is not None:
            part.update(reconcile({C.REASON_TECHNICAL: draft.value("technical_group_drop_count"),
                                   C.REASON_ZERO_STD: draft.value("zero_std_group_drop_count")},
                                  slime.rollout_extra_metrics))
            if part["reconcile_mismatch_count"]:
                self._warn_once("reconcile", "shopsim-metrics: step %s: the project's drop counts differ from "
                                "slime's own counters %s (reported as rollout/shopsim/reconcile_mismatch_count).",
                                draft.rollout_id, part["slime_drop_counts"])
        return RecordPart(SLIME, part)

    def _complete(self, draft: StepDraft, parts: list[RecordPart]) -> None:
        """Add the skip fields, the alerts and (on the run's last step) the final prompts table to ``parts``, build
        the record once and hand it to the sinks.

        The last step is the one slime's ``train.py`` ends with (``rollout_id == num_rollout - 1``) or a
        terminated one: slime finishes its W&B run right after it, before any exit handler of the
        hooks runs, so nothing may wait for the process's end.
        """
        self._warn_unequal_sizes(draft)
        last = draft.value("terminated") or (self.num_rollout is not None and draft.rollout_id == self.num_rollout - 1)
        if self.prompts is not None:
            parts.append(RecordPart(RESUME, {"prompt_history_partial": self.history_partial}))
        parts.append(self.skip_fields(draft))
        try:
            parts.append(self._carry_alerts(draft, parts))
        except Exception as exc:  # noqa: BLE001 - monitoring never stops training
            self._warn_once("record_alerts", "shopsim-metrics: adding the alerts to the record failed (%s: %s)",
                            type(exc).__name__, exc)
        if last and self.prompts is not None and not self._final_table_sent:
            try:
                if not draft.has("prompt_table"):  # a table on schedule is the final one: no step closed since
                    parts.append(RecordPart(PROMPTS, {"prompt_table": self.prompts.table()}))
                self._final_table_sent = True
            except Exception as exc:  # noqa: BLE001 - monitoring never stops training
                self._warn_once("prompt_table", "shopsim-metrics: the final prompts table failed (%s: %s)",
                                type(exc).__name__, exc)
        self._sinks().emit(draft.finish(*parts))

    def skip_fields(self, draft: StepDraft) -> RecordPart:
        """The skip fields of a step about to be recorded (no skipping data source attached: none)."""
        if self.skipping is None:
            return RecordPart(SKIPPING, {})
        try:
            return RecordPart(SKIPPING, self.skipping.step_fields(draft.value("decisions")))
        except Exception as exc:  # noqa: BLE001 - monitoring never stops training
            self._warn_once("skip_fields", "shopsim-metrics: recording the skipped prompts failed (%s: %s); the "
                            "step's other fields are complete.", type(exc).__name__, exc)
            return RecordPart(SKIPPING, {})

    @staticmethod
    def _warn_unequal_sizes(draft: StepDraft) -> None:
        """One warning for the step naming its judged groups whose size is not ``n_samples_per_prompt``
        (:mod:`~shopsim_metrics.step.group_sizes`; the record counts them)."""
        try:
            warning = unequal_size_warning(draft.rollout_id, draft.value("decisions"),
                                           draft.value("n_samples_per_prompt"))
        except Exception:  # noqa: BLE001 - monitoring never stops training; the record still counts them
            return
        if warning:
            logger.warning(warning)

    def final_prompt_table(self, rollout_id: int | None) -> None:
        """The prompts table at process exit, when no last step carried it (a run without ``num_rollout``)."""
        if self.prompts is None or not len(self.prompts.history) or self._final_table_sent:
            return
        try:
            rows = self.prompts.table()
        except Exception as exc:  # noqa: BLE001 - monitoring never stops training
            self._warn_once("prompt_table", "shopsim-metrics: the final prompts table failed (%s: %s)",
                            type(exc).__name__, exc)
            return
        self._sinks().prompt_table(rows, rollout_id)

    # --- alerts -------------------------------------------------------------------------------
    def send_warnings(self, up_to: int | None = None) -> None:
        """Send the one WARN of each step up to ``up_to`` (every step when None) that had a burst."""
        for alert in self.alerts.take_warnings(up_to):
            self.send_alert(alert)

    def send_alert(self, alert: Alert) -> None:
        """Log and send one alert; the record of its step (or the next one recorded) carries it in ``alerts``."""
        log = logger.error if alert.level == "ERROR" else logger.warning
        log("%s: %s", alert.title, alert.text)
        with self.lock:
            if self.keeps_alerts and len(self._pending_alerts) < PENDING_ALERTS_LIMIT:
                self._pending_alerts.append(alert)
            self._sinks().alert(alert)

    def _carry_alerts(self, draft: StepDraft, parts: list[RecordPart]) -> RecordPart:
        """The ``alerts`` of the step's record (every alert sent for it or an earlier step, not yet carried) and
        its warning threshold.

        The step's WARN is sent here, just before the record that carries it, then the advisories the step
        raises (read from its fields as the record will hold them: the draft's and ``parts``).
        """
        rollout_id = draft.rollout_id
        self.send_warnings(up_to=rollout_id)
        part: dict[str, Any] = {}
        if self.alerts.enabled:
            part["technical_failure_warn_at"] = self.alerts.warn_at
        self._advise(draft, [*parts, part])
        due = [a for a in self._pending_alerts if a.rollout_id is None or a.rollout_id <= rollout_id]
        if due:
            self._pending_alerts = [a for a in self._pending_alerts
                                    if not (a.rollout_id is None or a.rollout_id <= rollout_id)]
            part["alerts"] = [{"level": a.level, "title": a.title, "text": a.text} for a in due]
        return RecordPart(ALERTS, part)

    def _advise(self, draft: StepDraft, parts: list[RecordPart]) -> None:
        """Feed the step to the advisor and send the advisories it raises (never raises: monitoring never stops
        training)."""
        if self.advisor is None:
            return

        def value(name: str) -> Any:
            for part in parts:
                if name in part:
                    return part[name]
            return draft.value(name)

        try:
            raised = self.advisor.observe(StepFacts.read(draft.rollout_id, value))
        except Exception as exc:  # noqa: BLE001 - monitoring never stops training
            self._warn_once("advisories", "shopsim-metrics: the advisories of step %s failed (%s: %s); the record is "
                            "written without them.", draft.rollout_id, type(exc).__name__, exc)
            return
        for alert in raised:
            self.send_alert(alert)


def read_seconds(value: Any) -> float | None:
    """A duration handed over by slime as a finite, non-negative float, else None (never raises).

    Example:
        >>> read_seconds(1.5), read_seconds(None), read_seconds(float("nan")), read_seconds("x")
        (1.5, None, None, None)
    """
    if value is None or isinstance(value, (bool, str, bytes)):
        return None
    try:
        seconds = float(value)
    except Exception:  # noqa: BLE001 - an odd value is "unknown"
        return None
    return seconds if seconds - seconds == 0.0 and seconds >= 0.0 else None


def reconcile(ours: dict[str, int], rollout_extra_metrics: Any) -> dict[str, Any]:
    """``slime_drop_counts`` and ``reconcile_mismatch_count``: a step's drop counts per reason (``ours``) against
    slime's ``rollout/dynamic_filter/drop_<reason>`` counters.

    ``reconcile_mismatch_count`` is the number of the two shopsim reasons whose counts differ (0 when
    all agree). A counter slime did not log is 0 (slime logs only the reasons that dropped a group).
    A counter that cannot be read as a count (NaN, inf, text, negative) is None in
    ``slime_drop_counts`` and not compared; metrics that are not a mapping (a custom rollout
    function's list) leave both fields None. Never raises.

    Example:
        >>> ours = {C.REASON_TECHNICAL: 2, C.REASON_ZERO_STD: 0}
        >>> part = reconcile(ours, {C.slime_drop_metric(C.REASON_TECHNICAL): float("nan")})
        >>> part["slime_drop_counts"][C.REASON_TECHNICAL], part["reconcile_mismatch_count"]
        (None, 0)
        >>> reconcile(ours, [1, 2])
        {'slime_drop_counts': None, 'reconcile_mismatch_count': None}
    """
    get = getattr(rollout_extra_metrics, "get", None)
    if not callable(get):
        return {"slime_drop_counts": None, "reconcile_mismatch_count": None}
    theirs: dict[str, int | None] = {}
    for reason in ours:
        try:
            theirs[reason] = read_count(get(C.slime_drop_metric(reason), 0))
        except Exception:  # noqa: BLE001 - a mapping whose get raises: unreadable
            theirs[reason] = None
    return {"slime_drop_counts": theirs, "reconcile_mismatch_count": sum(
        1 for reason in ours if theirs[reason] is not None and ours[reason] != theirs[reason])}


def read_count(value: Any) -> int | None:
    """A counter handed over by slime as a non-negative whole number, else None (never raises).

    None (not logged) is 0; ``3.0`` and numpy / torch scalars are read; NaN, inf, text, bools,
    fractions and negatives are unreadable.

    Example:
        >>> read_count(3), read_count(3.0), read_count(None), read_count(float("nan")), read_count("n/a"), read_count(-1)
        (3, 3, 0, None, None, None)
    """
    if value is None:
        return 0
    if isinstance(value, (bool, str, bytes)):
        return None
    try:
        number = float(value.item() if hasattr(value, "item") else value)
    except Exception:  # noqa: BLE001 - an odd value is unreadable
        return None
    if not number - number == 0.0 or number < 0 or number != int(number):
        return None
    return int(number)
