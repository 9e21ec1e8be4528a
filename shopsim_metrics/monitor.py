"""The process-wide monitor behind slime's hooks: one public method per hook, over the parts built from the settings.

slime's hooks are plain functions, so the state they share lives in one :class:`ShopsimRuntime`
per process, created from ``args`` on first use (:func:`get_runtime`) or explicitly with
:func:`configure` (the simulator, tests, notebooks). Nothing here writes on the filter's hot path
except the rare termination record; records are emitted once per step by the log function.

Each hook calls one method: the filter :meth:`ShopsimRuntime.filter_group`, the all-samples hook
:meth:`~ShopsimRuntime.close_step`, the log function :meth:`~ShopsimRuntime.emit_step`, the sample hook
:meth:`~ShopsimRuntime.record_sample` (the fully-async rollout function: :meth:`~ShopsimRuntime.judge_decided_group`
and :meth:`~ShopsimRuntime.close_fully_async_step`), each inside :meth:`~ShopsimRuntime.own_time`. The parts the
settings make (the streak, the accountant, the wave planner, the prompt history, what a resume restores) are built
once by :func:`~shopsim_metrics.runtime_parts.build_runtime` into a frozen
:class:`~shopsim_metrics.runtime_parts.RuntimeParts` (``runtime.parts``); the runtime adds what belongs to the
process: the sinks, the record's writer identity (:class:`~shopsim_metrics.run.identity.Lineage`), the snapshot
writer and the locks.

Who owns what (one owner per piece of state):

- the settings (:class:`~shopsim_metrics.settings.ShopsimSettings`): read and checked once, from ``args``;
- the technical streak (:class:`~shopsim_metrics.health.streak.TechnicalStreak`): this monitor, fed by
  every judgement, read by the records, the alerts and the termination;
- each step record, and what goes to the sinks in order (records and alerts): the step recorder
  (:class:`~shopsim_metrics.step.recorder.StepRecorder`), from the closed step the accountant hands over
  (:class:`~shopsim_metrics.step.closed_step.ClosedStep`), the writer's identity, slime's time and drop
  counters, the skip fields, the alerts and the final prompts table; every contributor returns its fields,
  none edits a record;
- the current step, its ledger, its close and the closed steps not yet emitted: the accountant
  (:class:`~shopsim_metrics.step.accounting.StepAccountant`);
- a step's number: :class:`~shopsim_metrics.loop.step_number.StepNumbers`, which the accountant, the wave planner
  and the hooks ask (slime's live ``_current_rollout_id``, else the ``rollout_id`` slime's sample hook received;
  when neither says, counted on from ``start_rollout_id`` and renumbered by the log function's ``rollout_id``);
- every token generated per step (the sample hook's counts): the accountant's
  :class:`~shopsim_metrics.step.generated_tokens.GeneratedTokens`, fed by :meth:`ShopsimRuntime.record_sample`
  through the accountant;
- each step's waves (their sizes, the first one's prediction, the recent steps' orders they are sized from): the
  wave planner (:class:`~shopsim_metrics.waves.wave_planner.WavePlanner`), which the data source asks for each wave;
- the prompt history: the accountant's prompt tracker (:class:`~shopsim_metrics.prompts.value.PromptValueTracker`),
  restored on a resumed run by :mod:`shopsim_metrics.run.resume`;
- the project's own time (``filter_seconds``): measured only by :meth:`ShopsimRuntime.own_time`, around
  each of the hooks;
- whether and where to log to W&B: decided once, by the sinks built from the settings
  (:func:`shopsim_metrics.sinks.factory.build_sinks`), lazily, at the first record;
- the alerts' policy (one warning per step at most, the error at the limit): the alert policy;
- the advisories (what the recent steps say is wrong, once per condition): the advisor
  (:class:`~shopsim_metrics.health.advisories.Advisor`), fed each step as it is emitted, restored on a resume;
- which of these pieces a resume restores: registered once, by name, in ``parts.resumable``
  (:func:`shopsim_metrics.run.state.monitor_state`, in :func:`~shopsim_metrics.runtime_parts.build_runtime`); the
  snapshot, its load and the replay iterate it;
- the run's identity and this process's place in it (``run_id``, ``process_generation`` ...): the lineage
  (:class:`~shopsim_metrics.run.identity.Lineage`), restored on a resume;
- the snapshot being written beside slime's checkpoint, its thread and when the run waits for it: the snapshot
  writer (:class:`~shopsim_metrics.run.snapshot_writer.SnapshotWriter`); the monitor says whether the live state
  is the state after the step.

Two threads meet here: slime calls the filter and the all-samples hook on its rollout thread (an
asyncio loop in a background thread) and the log function on its own. One lock orders each
judgement with its streak and ledger row; the recorder's lets one thread at a time hand closed steps and
alerts to the sinks, in order. The accountant guards its open and closed steps itself.

Example:
    >>> from types import SimpleNamespace
    >>> from shopsim_metrics.sinks import MemorySink
    >>> mem = MemorySink()
    >>> rt = configure(SimpleNamespace(rollout_batch_size=16, n_samples_per_prompt=8), sinks=[mem])
    >>> rt.settings.rollout_batch_size
    16
    >>> reset_runtime()
"""

from __future__ import annotations

import atexit
import logging
import threading
import time
from typing import Any, Callable

from shopsim_metrics.errors import TechnicalFailureLimitExceeded
from shopsim_metrics.general.plain_values import is_int
from shopsim_metrics.general.warn_once import WarnOnce
from shopsim_metrics.judging.group_judgement import GroupJudgement, unmarked_kind
from shopsim_metrics.loop.loop_state import LoopState
from shopsim_metrics.prompts.skip_evidence import MonitorSkipHistory
from shopsim_metrics.prompts.skip_record import SkipSource, SourceSkips
from shopsim_metrics.record.records import StepRecord
from shopsim_metrics.run.identity import Lineage, RunWriters, check_fresh_run_dir
from shopsim_metrics.run.resume import restore, resume_warning
from shopsim_metrics.run.snapshot import SnapshotPlan, build_snapshot
from shopsim_metrics.run.snapshot_writer import SnapshotWriter
from shopsim_metrics.runtime_parts import RuntimeParts, build_runtime
from shopsim_metrics.settings import ShopsimSettings, fresh_run_dir, missing_knobs_warning
from shopsim_metrics.settings.wiring import no_judgement_warning
from shopsim_metrics.sinks.base import SinkSet, StepSink
from shopsim_metrics.sinks.jsonl import JsonlSink
from shopsim_metrics.step.closed_step import ClosedStep, GenerationStats
from shopsim_metrics.step.recorder import SlimeFacts, StepRecorder
from shopsim_metrics.waves.wave_planner import WavePlanner

logger = logging.getLogger("shopsim_metrics")


class ShopsimRuntime:
    """The process's monitor: one public method per hook over :attr:`parts`, plus what belongs to the process (the
    sinks, the lineage, the snapshot writer, the locks); every public method is safe across threads (see the module)."""

    def __init__(
        self,
        parts: RuntimeParts,
        *,
        sinks: list[StepSink] | None = None,
        snapshots: SnapshotPlan | None = None,
    ) -> None:
        self.parts = parts
        """What the hooks share, built once from the settings (:func:`~shopsim_metrics.runtime_parts.build_runtime`)."""
        self.run_dir = parts.settings.run_dir or fresh_run_dir()
        """The directory of the records: the settings' (``shopsim_run_dir``, ``--save`` ...), else a new one per run."""
        self.snapshots = snapshots or SnapshotPlan(save=None, load=None, save_interval=None, num_rollout=None)
        """Where the monitor's state is saved beside slime's checkpoints and read back on a resume."""
        self._explicit_sinks = sinks
        self._sinks: SinkSet | None = None
        self._sinks_lock = threading.Lock()  # builds the sinks once
        self._judge_lock = threading.Lock()  # one judgement at a time: streak and ledger in the same order
        self._hook_started = threading.local()  # perf_counter at the entry of the hook running on this thread
        self.prompt_skip_source: SkipSource | None = None
        """The data source that skips prompts in this process (it attaches itself): its skips go in the records."""
        self._warn_once = WarnOnce(logger)
        self.snapshot_writer = SnapshotWriter(self.snapshots, self._judge_lock, copy=self._snapshot_data,
                                              warn=self._warn_once)
        """Writes the state beside slime's checkpoints, off the log function's thread (its one writer)."""
        self.lineage = Lineage.fresh(parts.settings.start_rollout_id)
        """The run's identity and this process's place in it (restored by :meth:`start` on a resumed run)."""
        self.recorder = StepRecorder(
            lambda: self.sinks, alerts=parts.alerts, identity=self.lineage.identity(),
            num_rollout=parts.settings.num_rollout, advisor=parts.advisor, prompts=parts.prompts,
            keeps_alerts=parts.accountant is not None)
        """Builds each step's record and hands records and alerts to the sinks, in order."""
        self._started = False

    @property
    def settings(self) -> ShopsimSettings:
        """The settings, read and checked once (the parts')."""
        return self.parts.settings

    @property
    def waves(self) -> WavePlanner | None:
        """The wave planner the data source asks for each wave (the parts')."""
        return self.parts.waves

    @property
    def loop_state(self) -> LoopState:
        """What the rollout loop says, as the data source reads it too (the parts')."""
        return self.parts.loop_state

    @property
    def run_id(self) -> str:
        """The run's identity: new for a fresh run, the records' own for a resumed one."""
        return self.lineage.run_id

    def start(self) -> "ShopsimRuntime":
        """The monitor's one look at the disk before its first hook's work: a fresh run's directory is checked (it
        never merges with another run's records), a resumed run's state is restored from its records and snapshot.
        Called once, by :func:`get_runtime` / :func:`configure` (the constructor reads nothing)."""
        if self._started:
            return self
        self._started = True
        settings = self.settings
        if self._explicit_sinks is None and settings.start_rollout_id == 0:
            check_fresh_run_dir(self.run_dir)
        if settings.start_rollout_id > 0:
            self.lineage.resuming()
            self._restore()
        self.run_writers = RunWriters(self.run_dir, self.lineage.known_writers, run_id=self.lineage.run_id)
        """The run's other processes known (handed on by the snapshots: a resume from one knows of them)."""
        self.recorder.identity = self.lineage.identity()
        self.recorder.history_partial = self.lineage.missing_steps > 0
        return self

    # --- sinks (built lazily: the filter path never builds them unless it terminates) ----------
    @property
    def sinks(self) -> SinkSet:
        with self._sinks_lock:
            if self._sinks is None:
                if self._explicit_sinks is not None:
                    self._sinks = SinkSet(self._explicit_sinks)
                else:
                    from shopsim_metrics.sinks.factory import build_sinks

                    self._sinks = SinkSet(build_sinks(self.settings, self.run_dir))
            return self._sinks

    def _restore(self) -> None:
        """A resumed run (``start_rollout_id`` > 0): the streak and prompt history as of the records before it."""
        start, lineage, prompts = self.settings.start_rollout_id, self.lineage, self.parts.prompts
        try:
            restored = restore(self.run_dir, self.parts.resumable, start_rollout_id=start,
                               snapshot_dir=self.snapshots.load)
        except Exception as exc:  # noqa: BLE001 - monitoring never stops training
            logger.warning("shopsim-metrics: restoring the run's state from %s failed (%s: %s); the streak and the "
                           "prompt history start empty.", self.run_dir, type(exc).__name__, exc)
            lineage.missing_steps = start
            return
        if restored.note is not None:
            logger.warning("shopsim-metrics: the monitor snapshot was not used (%s); the records were replayed.",
                           restored.note)
        for note in restored.left_out:  # a file that could not be read, another run's records: named, left out
            logger.warning("shopsim-metrics: resuming at rollout step %d: %s.", start, note)
        lineage.restored(run_id=restored.run_id, generation=restored.generation, writers=restored.writers,
                         missing=restored.missing)
        warning = resume_warning(restored, start, self.run_dir)
        if warning:
            logger.warning(warning)
        else:
            logger.info("shopsim-metrics: resumed at rollout step %d: streak %d and %d prompts restored from %s",
                        start, self.parts.streak.count, len(prompts.history) if prompts is not None else 0,
                        self.run_dir if restored.snapshot is None
                        else f"the snapshot of step {restored.snapshot} and the records after it")

    # --- skipping prompts before generation ---------------------------------------------------
    def attach_prompt_skip(self, source: SkipSource) -> MonitorSkipHistory | None:
        """Register the process's skipping data source; returns the monitor's prompt history for it to learn from.

        None when the monitor keeps no prompt history (``shopsim_prompt_history_limit: 0``, or slime's
        knobs missing): then there is nothing to learn from. ``source.take_skipped()`` and
        ``source.take_rule_report()`` are read as each step closes (:class:`~shopsim_metrics.prompts.skip_record.SkipSource`;
        what the source asks of the monitor: :class:`~shopsim_metrics.prompts.skip_monitor.SkipMonitor`).
        """
        prompts, skip_tally = self.parts.prompts, self.parts.skip_tally
        if prompts is None:
            return None
        self.prompt_skip_source = source
        if skip_tally is not None:
            self.recorder.attach_skipping(SourceSkips(source, skip_tally,
                                                      max_lost_signal=self.settings.prompt_skip_rule.max_lost_signal))
        return MonitorSkipHistory(prompts)

    def serve_one_group_at_a_time(self) -> None:
        """The fully-async rollout function draws one group at a time: there are no waves to size."""
        if self.parts.waves is not None:
            self.parts.waves.one_group_at_a_time = True

    # --- the project's own time (filter_seconds) ----------------------------------------------
    def own_time(self, *, emits: bool = False) -> "OwnTime":
        """Count one hook call in ``filter_seconds``: the one place the project's own time is measured.

        The filter's and the all-samples hook's time goes to the open step (else the last closed,
        unemitted one); the log function (``emits=True``) counts its time up to the sinks in the step
        it emits, inside :meth:`emit_step`.
        """
        return OwnTime(self, emits)

    # --- the filter's side --------------------------------------------------------------------
    def filter_group(self, samples: Any) -> str:
        """Judge one group and account for it (once per group); returns its kind (``SPREAD``, ``ZERO_STD``, ``TECHNICAL``).

        Raises only :class:`TechnicalFailureLimitExceeded`, after writing the terminated step.
        """
        judgement = self.parts.judge(samples)
        self._observe(judgement, lambda streak: self._account(judgement, samples, streak))
        return judgement.kind

    def filter_group_outcome(self, samples: Any) -> tuple[str, str | None]:
        """Judge one group and account for it, as :meth:`filter_group`; returns its kind and its outcome under
        slime's drop rule on the loop's ``remaining`` (live, else mirrored): what a loop without
        ``keep_when_insufficient`` (miles) must be told to do. The outcome is None when nothing is accounted.

        Raises only :class:`TechnicalFailureLimitExceeded`, after writing the terminated step.
        """
        judgement = self.parts.judge(samples)
        outcome: list[str | None] = []
        self._observe(judgement, lambda streak: outcome.append(self._account(judgement, samples, streak)))
        return judgement.kind, outcome[0] if outcome else None

    def judge_decided_group(
        self, samples: Any, decide: Callable[[str], str], *, step: int | None, carried: bool = False,
        weight_version: int | None = None,
    ) -> str:
        """The fully-async path: judge one group, let ``decide(kind)`` choose its outcome, record it; returns the outcome.

        The loop decides (:class:`~shopsim_metrics.fully_async.fully_async_batch.AsyncAdmission`), so the decision
        never depends on the accounting. Raises only :class:`TechnicalFailureLimitExceeded` (the streak
        is the same one the synchronous filter feeds), after writing the terminated step.
        """
        judgement = self.parts.judge(samples)
        outcome = decide(judgement.kind)

        def account(streak: int) -> None:
            accountant = self.parts.accountant
            if accountant is None:
                return
            try:
                accountant.record_decided(judgement, step, outcome, group=samples, streak=streak, carried=carried,
                                          weight_version=weight_version)
            except Exception as exc:  # noqa: BLE001 - never let accounting break the decision
                self._warn_once("accounting", "shopsim-metrics: accounting failed (%s: %s); the decisions are "
                                "unaffected but this step's record may be incomplete.", type(exc).__name__, exc)

        self._observe(judgement, account)
        return outcome

    def close_fully_async_step(self, rollout_id: int, aborted_groups: int | None = None) -> ClosedStep | None:
        """Close the fully-async step ``rollout_id`` (success and reward over every group it judged)."""
        accountant = self.parts.accountant
        if accountant is None or accountant.open_rollout_id() != rollout_id:
            return None
        return accountant.close_step(aborted_groups=aborted_groups)

    def _observe(self, judgement: GroupJudgement, account: Callable[[int], None]) -> None:
        """Feed the streak, account the group, send the alerts due, and terminate at the limit."""
        parts = self.parts
        alert, rollout_id, checks, causes, kinds = None, None, {}, {}, {}
        with self._judge_lock:
            tokens = parts.accountant.tokens if parts.accountant is not None else None
            kind = unmarked_kind(judgement) if tokens is not None and tokens.seen_turns else judgement.failure_kind
            streak = parts.streak.observe(judgement.failed_check, judgement.failure_cause, kind)
            account(streak)
            if streak:
                rollout_id = parts.steps.current()
                alert = parts.alerts.after_judgement(parts.streak, rollout_id)  # the ERROR at the limit, else None
                if streak >= parts.settings.max_consecutive_failed_groups:
                    checks, causes, kinds = parts.streak.checks, parts.streak.causes, parts.streak.kinds  # as it ends
        try:
            if alert is not None:
                self.recorder.send_warnings(up_to=None if rollout_id is None else rollout_id - 1)  # earlier first
                self.recorder.send_alert(alert)
            if parts.accountant is not None and parts.accountant.closed:
                self.flush()  # earlier steps that no log function emitted: write them now, not at exit
        except Exception as exc:  # noqa: BLE001 - never let monitoring break the decision
            self._warn_once("filter_side_effects", "shopsim-metrics: sending an alert or a record from the filter "
                            "failed (%s: %s); the filter's decisions are unaffected.", type(exc).__name__, exc)
        if streak >= parts.settings.max_consecutive_failed_groups:
            self._terminate(streak, rollout_id, checks, causes, kinds)

    def _account(self, judgement: GroupJudgement, samples: Any, streak: int) -> str | None:
        """Record the judgement in the step's ledger with the loop's live facts (when accounting is on); its
        outcome (None: not accounted)."""
        parts = self.parts
        if parts.accountant is None:
            return None
        try:
            remaining = parts.loop_state.remaining_batch_size()
            source = parts.loop_state.source if remaining is not None else "mirror"
            return parts.accountant.judge(judgement, parts.steps.of_judgement(), remaining, source, samples, streak)
        except Exception as exc:  # noqa: BLE001 - never let accounting break the decision
            self._warn_once("accounting", "shopsim-metrics: accounting failed (%s: %s); the filter's decisions "
                            "are unaffected but this step's record may be incomplete.", type(exc).__name__, exc)
            return None

    def _terminate(self, streak: int, rollout_id: int | None, checks: dict[str, int], causes: dict[str, int],
                   kinds: dict[str, int]) -> None:
        """Write the step so far (marked terminated) and end the run with the streak's failed checks."""
        try:
            if self.parts.accountant is not None:
                self.parts.accountant.close_step(terminated=True)
            self.flush()
        except Exception as exc:  # noqa: BLE001 - the termination itself must not be lost
            logger.warning("shopsim-metrics: writing the terminated step failed (%s: %s)", type(exc).__name__, exc)
        raise TechnicalFailureLimitExceeded(
            streak=streak, max_consecutive_failed_groups=self.settings.max_consecutive_failed_groups,
            rollout_id=rollout_id, failed_checks=checks, causes=causes, kinds=kinds,
        )

    # --- the sample hook's side ---------------------------------------------------------------
    def record_sample(self, sample: Any, rollout_id: Any = None, *, source: str | None = None) -> None:
        """Count one generate call's tokens in its step (slime's ``rollout_id``, else the loop's step); ``source``
        names the counter when it is not slime's sample hook (the records say it: ``token_count_source``)."""
        accountant = self.parts.accountant
        if accountant is not None:
            accountant.count_generated(sample, self.parts.steps.heard(rollout_id), source=source)

    # --- the all-samples hook's side ----------------------------------------------------------
    def close_step(self, all_groups: list | None) -> ClosedStep | None:
        """Close the open step with ``success_rate`` / ``reward_mean`` over every completed group
        (``None``: slime's groups could not be read; the step closes with the ledger's own figures)."""
        accountant, judge = self.parts.accountant, self.parts.judge
        if accountant is None:
            return None
        if all_groups is None:
            return accountant.close_step()
        stats = GenerationStats()
        judged = accountant.open_judgements()  # the filter's own judgement of this very group object
        for group in all_groups:
            judgement = judged.get(id(group))
            stats.add(judgement if judgement is not None else judge(group))
        closed = accountant.close_step(stats=stats, all_groups=len(all_groups))
        if closed is not None and len(all_groups) != len(closed.rows):
            self._warn_once("all_groups", "shopsim-metrics: the all-samples hook received %d groups but the filter "
                            "judged %d in step %s; is the filter path set to shopsimrl.slime_runtime."
                            "fully_scored_group_filter?", len(all_groups), len(closed.rows), closed.rollout_id)
        return closed

    # --- the log function's side --------------------------------------------------------------
    def emit_step(
        self, rollout_id: int, rollout_extra_metrics: dict | None, rollout_time: Any = None, *, args: Any = None,
    ) -> list[StepRecord]:
        """Emit every closed step (closing ``rollout_id`` from the ledger if the all-samples hook did not).

        ``rollout_time`` is slime's own (``rollout_seconds``). Inside :meth:`own_time`, the log
        function's time up to the sinks counts in the emitted step's ``filter_seconds``. A step that ended
        with no group judged by the filter gets one warning (once per run) naming the likely cause, read from
        slime's ``args`` (:func:`~shopsim_metrics.settings.wiring.no_judgement_warning`).

        The snapshot writer then saves the state after the newest step emitted beside slime's checkpoint of it,
        when slime checkpoints after it (:mod:`~shopsim_metrics.run.snapshot_writer`: slime's log function does not
        wait for it, but at the run's last step).
        """
        started = getattr(self._hook_started, "value", None)
        accountant = self.parts.accountant
        if accountant is None:
            self.recorder.send_warnings(up_to=rollout_id)
            return []
        with self.recorder.lock:
            if is_int(rollout_id):
                accountant.renumber(rollout_id)  # a step the loop could not number is slime's rollout_id
            accountant.close_step_of(rollout_id)
            closed = accountant.take_closed()
            # each step is recorded whatever slime handed over
            records = self.recorder.record(closed, SlimeFacts(rollout_id, rollout_extra_metrics, rollout_time, started))
            if closed:
                self.snapshot_writer.save(closed[-1].rollout_id, live_after=self._live_after)
        if not records and accountant.open_rollout_id() is None:
            self._warn_once("no_judgement", no_judgement_warning(args, rollout_id))
        return records

    def _live_after(self, rollout_id: int) -> bool:
        """Whether the live state is what a replay of the records up to step ``rollout_id`` rebuilds: that step is
        the newest closed and no group of a later step is judged yet (called under the judgement lock)."""
        accountant = self.parts.accountant
        assert accountant is not None  # only asked with accounting on
        prompts = accountant.prompts
        return not (accountant.open_judgements() or accountant.closed or (
            prompts is not None and prompts.last_step is not None and prompts.last_step[0] != rollout_id))

    def _snapshot_data(self, rollout_id: int) -> dict[str, Any]:
        """The snapshot of the state after step ``rollout_id`` (the writer's copy, under the judgement lock), with
        the run's other processes known, once the other records files' new lines are read for them."""
        sinks = self._sinks
        own = [sink.path for sink in sinks.sinks if isinstance(sink, JsonlSink)] if sinks is not None else []
        try:
            self.run_writers.catch_up(own)
        except (OSError, ValueError) as exc:  # the snapshot goes on with the processes known so far
            self._warn_once("writers", "shopsim-metrics: reading the other writers' records for the snapshot failed "
                            "(%s: %s); it names the processes known before.", type(exc).__name__, exc)
        return build_snapshot(self.parts.resumable, rollout_id=rollout_id, run_id=self.lineage.run_id,
                              missing=self.lineage.missing_steps, run_dir=self.run_dir, writer=self.lineage.writer(),
                              processes=self.run_writers.known())

    def wait_for_snapshot(self) -> None:
        """Return once the snapshot being written (if any) is on disk (or has failed, with its warning)."""
        self.snapshot_writer.wait()

    def flush(self) -> None:
        """Emit closed steps that no log function picked up (termination, process exit)."""
        accountant = self.parts.accountant
        if accountant is None:
            return
        with self.recorder.lock:
            self.recorder.record(accountant.take_closed())

    def shutdown(self) -> None:
        """Finish the snapshot being written (its copy is the state before anything closes here), close the open
        step from its ledger, emit everything pending, close the sinks."""
        accountant = self.parts.accountant
        with self.recorder.lock:
            self.wait_for_snapshot()
            if accountant is not None:
                accountant.close_step()
            self.flush()
            self.recorder.send_warnings()
            if self._sinks is not None:  # no sinks built: no record was ever written, no table either
                self.recorder.final_prompt_table(self.parts.steps.current() if accountant else None)
                self._sinks.close()

class OwnTime:
    """The ``with`` block of one hook call, timed for ``filter_seconds`` (:meth:`ShopsimRuntime.own_time`)."""

    __slots__ = ("monitor", "emits", "started")

    def __init__(self, monitor: ShopsimRuntime, emits: bool) -> None:
        self.monitor, self.emits, self.started = monitor, emits, 0.0

    def __enter__(self) -> None:
        self.started = time.perf_counter()
        if self.emits:
            self.monitor._hook_started.value = self.started

    def __exit__(self, *exc_info: Any) -> None:
        monitor = self.monitor
        if self.emits:
            monitor._hook_started.value = None
        elif monitor.parts.accountant is not None:
            try:
                monitor.parts.accountant.add_hook_seconds(time.perf_counter() - self.started)
            except Exception:  # noqa: BLE001 - monitoring never stops training
                pass


# --- the process-wide runtime ---------------------------------------------------------------------
_runtime: ShopsimRuntime | None = None
_runtime_lock = threading.Lock()
_atexit_registered = False


def get_runtime(args: Any, *, loop_state: Callable[[], LoopState] | None = None,
                check: Callable[[Any], None] | None = None) -> ShopsimRuntime:
    """The process's runtime, created from ``args`` on first use (the first ``args`` seen wins).

    ``loop_state`` makes the loop state of a runtime created by this call (the slime adapter passes
    its reader of slime's live state). Creating it checks the settings: a bad value or an unknown
    ``shopsim_*`` key raises :class:`~shopsim_metrics.settings.ShopsimConfigError` from this first hook
    call; a missing accounting knob (``rollout_batch_size`` ...) is one warning. ``check(args)`` runs first
    (the adapter's: what its loop cannot honour raises there).
    """
    runtime = _runtime
    if runtime is not None:
        return runtime
    with _runtime_lock:
        if _runtime is None:
            if check is not None:
                check(args)
            _install(_create(args, loop_state=loop_state() if loop_state is not None else None))
        return _runtime


def configure(args: Any, *, sinks: list[StepSink] | None = None, loop_state: LoopState | None = None) -> ShopsimRuntime:
    """Replace the process's runtime (simulator, tests, notebooks); ``sinks=[]`` records nowhere."""
    with _runtime_lock:
        _shutdown_current()
        return _install(_create(args, sinks=sinks, loop_state=loop_state))


def reset_runtime() -> None:
    """Shut the current runtime down (emitting what is pending) and forget it."""
    global _runtime
    with _runtime_lock:
        _shutdown_current()
        _runtime = None


def _create(args: Any, *, sinks: list[StepSink] | None = None, loop_state: LoopState | None = None) -> ShopsimRuntime:
    parts = build_runtime(ShopsimSettings.from_args(args), loop_state=loop_state)
    runtime = ShopsimRuntime(parts, sinks=sinks, snapshots=SnapshotPlan.from_args(args))
    warning = missing_knobs_warning(args)
    if warning:
        logger.warning(warning)
    return runtime.start()


def _install(runtime: ShopsimRuntime) -> ShopsimRuntime:
    global _runtime, _atexit_registered
    _runtime = runtime
    if not _atexit_registered:
        atexit.register(_shutdown_current)
        _atexit_registered = True
    return runtime


def _shutdown_current() -> None:
    runtime = _runtime
    if runtime is not None:
        try:
            runtime.shutdown()
        except Exception as exc:  # noqa: BLE001 - shutting down must not raise into the caller
            logger.warning("shopsim-metrics: shutdown failed (%s: %s)", type(exc).__name__, exc)
