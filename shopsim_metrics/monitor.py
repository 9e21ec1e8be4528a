"""The process-wide monitor behind slime's hooks: the hub the four hooks call (settings, accountant, recorder).

slime's hooks are plain functions, so the state they share lives in one :class:`ShopsimRuntime`
per process, created from ``args`` on first use (:func:`get_runtime`) or explicitly with
:func:`configure` (the simulator, tests, notebooks). Nothing here writes on the filter's hot path
except the rare termination record; records are emitted once per step by the log function.

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
  :class:`~shopsim_metrics.step.generated_tokens.GeneratedTokens`, fed by :meth:`ShopsimRuntime.record_sample`;
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
- which of these pieces a resume restores: registered once, by name, in ``self.resumable``
  (:func:`shopsim_metrics.run.state.monitor_state`); the snapshot, its load and the replay iterate it;
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

from shopsim_metrics.step.accounting import StepAccountant
from shopsim_metrics.step.closed_step import ClosedStep, GenerationStats, StepKnobs
from shopsim_metrics.health.advisories import Advisor
from shopsim_metrics.health.alerts import StreakAlertPolicy
from shopsim_metrics.step.generated_tokens import GeneratedTokens
from shopsim_metrics.waves.wave_planner import WavePlanner
from shopsim_metrics.loop.loop_state import LoopState, NoLoopState
from shopsim_metrics.prompts.skip_evidence import MonitorSkipHistory
from shopsim_metrics.prompts.skip_record import SkipTally, SourceSkips
from shopsim_metrics.prompts.value import PromptValueTracker
from shopsim_metrics.step.recorder import SlimeFacts, StepRecorder
from shopsim_metrics.general.warn_once import WarnOnce
from shopsim_metrics.record.records import StepRecord
from shopsim_metrics.sinks.base import SinkSet, StepSink
from shopsim_metrics.sinks.jsonl import JsonlSink
from shopsim_metrics.errors import TechnicalFailureLimitExceeded
from shopsim_metrics.judging.group_judgement import GroupJudgement, judge_group
from shopsim_metrics.settings import ShopsimSettings, fresh_run_dir
from shopsim_metrics.loop.step_number import StepNumbers
from shopsim_metrics.health.streak import TechnicalStreak
from shopsim_metrics.settings import missing_knobs_warning
from shopsim_metrics.run.resume import restore, resume_warning
from shopsim_metrics.run.snapshot import SnapshotPlan, build_snapshot
from shopsim_metrics.run.snapshot_writer import SnapshotWriter
from shopsim_metrics.run.state import ResumableState, monitor_state
from shopsim_metrics.run.identity import RunWriters, check_fresh_run_dir, new_run_id
from shopsim_metrics.general.plain_values import is_int

logger = logging.getLogger("shopsim_metrics")


class ShopsimRuntime:
    """Holds what the four hooks share; every public method is safe across threads (see the module)."""

    def __init__(
        self,
        settings: ShopsimSettings,
        *,
        sinks: list[StepSink] | None = None,
        loop_state: LoopState | None = None,
        snapshots: SnapshotPlan | None = None,
    ) -> None:
        self.settings = settings
        self.run_dir = settings.run_dir or fresh_run_dir()
        """The directory of the records: the settings' (``shopsim_run_dir``, ``--save`` ...), else a new one per run."""
        self.snapshots = snapshots or SnapshotPlan(save=None, load=None, save_interval=None, num_rollout=None)
        """Where the monitor's state is saved beside slime's checkpoints and read back on a resume."""
        self.loop_state: LoopState = loop_state or NoLoopState()
        self.steps = StepNumbers(self.loop_state, first=settings.start_rollout_id)
        """The step numbers' one owner: slime's live id, the sample hook's, the accountant's count, the log function's."""
        accounted = settings.rollout_batch_size is not None  # without slime's knobs nothing is accounted
        self.waves: WavePlanner | None = wave_planner(settings, self.loop_state, self.steps) if accounted else None
        """Sizes and records each wave the data source serves (its one owner); None when nothing is accounted."""
        self.accountant = step_accountant(settings, self.loop_state, self.steps, self.waves) if accounted else None
        """Each step's ledger and close (:mod:`~shopsim_metrics.step.accounting`); None when nothing is accounted."""
        self.streak = TechnicalStreak(limit=settings.max_consecutive_failed_groups)
        """The run's technical streak: fed by every judgement, read by the records, alerts and termination."""
        self._judge_kwargs = dict(
            n_samples=settings.n_samples_per_prompt,
            reward_key=settings.reward_key,
            success_threshold=settings.success_threshold,
            success_key=settings.success_metadata_key,
            unscored_key=settings.unscored_metadata_key,
        )
        self.alerts = StreakAlertPolicy(
            max_consecutive_failed_groups=settings.max_consecutive_failed_groups,
            warn_fraction=settings.alert_warn_fraction, warn_level=settings.alert_warn_level,
            error_level=settings.alert_error_level, enabled=settings.alerts)
        self.advisor: Advisor | None = Advisor() if settings.alerts else None
        """The recent steps' advisories (:mod:`~shopsim_metrics.health.advisories`): fed as each step is emitted."""
        self._explicit_sinks = sinks
        self._sinks: SinkSet | None = None
        self._sinks_lock = threading.Lock()  # builds the sinks once
        self._judge_lock = threading.Lock()  # one judgement at a time: streak and ledger in the same order
        self._hook_started = threading.local()  # perf_counter at the entry of the hook running on this thread
        self._missing_steps = 0  # steps before start_rollout_id a resume found no record of (the snapshots say it on)
        prompts = self.accountant.prompts if self.accountant is not None else None
        self.skip_tally: SkipTally | None = (
            SkipTally(limit=prompts.history.limit)
            if prompts is not None else None)
        """The skip fields of each record (used once a skipping data source attaches; restored on resume)."""
        self.resumable: ResumableState = monitor_state(
            streak=self.streak, prompts=prompts, skips=self.skip_tally,
            recent_orders=self.waves.recent_orders if self.waves is not None else None,
            advisor=self.advisor)
        """What a resume restores and a snapshot saves: the pieces above, each registered once
        (:mod:`~shopsim_metrics.run.state`)."""
        self.prompt_skip_source: Any = None
        """The data source that skips prompts in this process (it attaches itself): its skips go in the records."""
        self._warn_once = WarnOnce(logger)
        self.snapshot_writer = SnapshotWriter(self.snapshots, self._judge_lock, copy=self._snapshot_data,
                                              warn=self._warn_once)
        """Writes the state beside slime's checkpoints, off the log function's thread (its one writer)."""
        self.process_started_at = time.time()
        """When this process's monitor started (every record says it: the readers order writes by it)."""
        self.run_id = new_run_id()
        """The run's identity: new for a fresh run, the records' own for a resumed one (restored by :meth:`start`)."""
        self._generation = 0  # the run's first process; a resumed one follows every process it learns of
        self._known_writers: tuple[dict[str, Any], ...] = ()  # the run's processes the restore learnt of
        self.writer: dict[str, Any] = {"process_started_at": self.process_started_at,
                                       "process_start_rollout_id": settings.start_rollout_id,
                                       "process_generation": self._generation}
        """The writing process as its records and snapshots say it (the readers follow the run's lineage by it)."""
        self.recorder = StepRecorder(
            lambda: self.sinks, alerts=self.alerts, identity={"run_id": self.run_id, **self.writer},
            num_rollout=settings.num_rollout, advisor=self.advisor, prompts=prompts,
            keeps_alerts=self.accountant is not None)
        """Builds each step's record and hands records and alerts to the sinks, in order."""
        self._started = False

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
            self._generation = 1  # unless the restore learns of later ones
            self._restore()
        self.writer["process_generation"] = self._generation
        self.run_writers = RunWriters(self.run_dir, self._known_writers)
        """The run's other processes known (handed on by the snapshots: a resume from one knows of them)."""
        self.recorder.identity = {"run_id": self.run_id, **self.writer}
        self.recorder.history_partial = self._missing_steps > 0
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
        start = self.settings.start_rollout_id
        prompts = self.accountant.prompts if self.accountant is not None else None
        try:
            restored = restore(self.run_dir, self.resumable, start_rollout_id=start,
                               snapshot_dir=self.snapshots.load)
        except Exception as exc:  # noqa: BLE001 - monitoring never stops training
            logger.warning("shopsim-metrics: restoring the run's state from %s failed (%s: %s); the streak and the "
                           "prompt history start empty.", self.run_dir, type(exc).__name__, exc)
            self._missing_steps = start
            return
        if restored.note is not None:
            logger.warning("shopsim-metrics: the monitor snapshot was not used (%s); the records were replayed.",
                           restored.note)
        self._missing_steps = restored.missing
        self._generation = restored.generation
        self._known_writers = restored.writers
        if restored.run_id is not None:
            self.run_id = restored.run_id  # a resumed run stays the same run
        warning = resume_warning(restored, start, self.run_dir)
        if warning:
            logger.warning(warning)
        else:
            logger.info("shopsim-metrics: resumed at rollout step %d: streak %d and %d prompts restored from %s",
                        start, self.streak.count, len(prompts.history) if prompts is not None else 0,
                        self.run_dir if restored.snapshot is None
                        else f"the snapshot of step {restored.snapshot} and the records after it")

    # --- skipping prompts before generation ---------------------------------------------------
    def attach_prompt_skip(self, source: Any) -> MonitorSkipHistory | None:
        """Register the process's skipping data source; returns the monitor's prompt history for it to learn from.

        None when the monitor keeps no prompt history (``shopsim_prompt_history_limit: 0``, or slime's
        knobs missing): then there is nothing to learn from. ``source.take_skipped()`` is read as
        each step closes.
        """
        prompts = self.accountant.prompts if self.accountant is not None else None
        if prompts is None:
            return None
        self.prompt_skip_source = source
        if self.skip_tally is not None:
            self.recorder.attach_skipping(SourceSkips(source, self.skip_tally))
        return MonitorSkipHistory(prompts)

    def serve_one_group_at_a_time(self) -> None:
        """The fully-async rollout function draws one group at a time: there are no waves to size."""
        if self.waves is not None:
            self.waves.one_group_at_a_time = True

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
        judgement = judge_group(samples, **self._judge_kwargs)
        self._observe(judgement, lambda streak: self._account(judgement, samples, streak))
        return judgement.kind

    def judge_decided_group(
        self, samples: Any, decide: Callable[[str], str], *, step: int | None, carried: bool = False,
        weight_version: int | None = None,
    ) -> str:
        """The fully-async path: judge one group, let ``decide(kind)`` choose its outcome, record it; returns the outcome.

        The loop decides (:class:`~shopsim_metrics.fully_async.fully_async_batch.AsyncAdmission`), so the decision
        never depends on the accounting. Raises only :class:`TechnicalFailureLimitExceeded` (the streak
        is the same one the synchronous filter feeds), after writing the terminated step.
        """
        judgement = judge_group(samples, **self._judge_kwargs)
        outcome = decide(judgement.kind)

        def account(streak: int) -> None:
            if self.accountant is None:
                return
            try:
                self.accountant.record_decided(judgement, step, outcome, group=samples, streak=streak,
                                               carried=carried, weight_version=weight_version)
            except Exception as exc:  # noqa: BLE001 - never let accounting break the decision
                self._warn_once("accounting", "shopsim-metrics: accounting failed (%s: %s); the decisions are "
                                "unaffected but this step's record may be incomplete.", type(exc).__name__, exc)

        self._observe(judgement, account)
        return outcome

    def close_fully_async_step(self, rollout_id: int, aborted_groups: int | None = None) -> ClosedStep | None:
        """Close the fully-async step ``rollout_id`` (success and reward over every group it judged)."""
        if self.accountant is None or self.accountant.open_rollout_id() != rollout_id:
            return None
        return self.accountant.close_step(aborted_groups=aborted_groups)

    def _observe(self, judgement: GroupJudgement, account: Callable[[int], None]) -> None:
        """Feed the streak, account the group, send the alerts due, and terminate at the limit."""
        alert, rollout_id, checks, causes = None, None, {}, {}
        with self._judge_lock:
            streak = self.streak.observe(judgement.failed_check, judgement.failure_cause)
            account(streak)
            if streak:
                rollout_id = self.steps.current()
                alert = self.alerts.after_judgement(self.streak, rollout_id)  # the ERROR at the limit, else None
                if streak >= self.settings.max_consecutive_failed_groups:
                    checks, causes = self.streak.checks, self.streak.causes  # read with the streak it ends
        try:
            if alert is not None:
                self.recorder.send_warnings(up_to=None if rollout_id is None else rollout_id - 1)  # earlier first
                self.recorder.send_alert(alert)
            if self.accountant is not None and self.accountant.closed:
                self.flush()  # earlier steps that no log function emitted: write them now, not at exit
        except Exception as exc:  # noqa: BLE001 - never let monitoring break the decision
            self._warn_once("filter_side_effects", "shopsim-metrics: sending an alert or a record from the filter "
                            "failed (%s: %s); the filter's decisions are unaffected.", type(exc).__name__, exc)
        if streak >= self.settings.max_consecutive_failed_groups:
            self._terminate(streak, rollout_id, checks, causes)

    def _account(self, judgement: GroupJudgement, samples: Any, streak: int) -> None:
        """Record the judgement in the step's ledger with the loop's live facts (when accounting is on)."""
        if self.accountant is None:
            return
        try:
            remaining = self.loop_state.remaining_batch_size()
            source = self.loop_state.source if remaining is not None else "mirror"
            self.accountant.judge(judgement, self.steps.of_judgement(), remaining, source, samples, streak)
        except Exception as exc:  # noqa: BLE001 - never let accounting break the decision
            self._warn_once("accounting", "shopsim-metrics: accounting failed (%s: %s); the filter's decisions "
                            "are unaffected but this step's record may be incomplete.", type(exc).__name__, exc)

    def _terminate(self, streak: int, rollout_id: int | None, checks: dict[str, int], causes: dict[str, int]) -> None:
        """Write the step so far (marked terminated) and end the run with the streak's failed checks."""
        try:
            if self.accountant is not None:
                self.accountant.close_step(terminated=True)
            self.flush()
        except Exception as exc:  # noqa: BLE001 - the termination itself must not be lost
            logger.warning("shopsim-metrics: writing the terminated step failed (%s: %s)", type(exc).__name__, exc)
        raise TechnicalFailureLimitExceeded(
            streak=streak, max_consecutive_failed_groups=self.settings.max_consecutive_failed_groups,
            rollout_id=rollout_id, failed_checks=checks, causes=causes,
        )

    # --- the sample hook's side ---------------------------------------------------------------
    def record_sample(self, sample: Any, rollout_id: Any = None) -> None:
        """Count one generate call's tokens in its step (slime's ``rollout_id``, else the loop's step)."""
        if self.accountant is None or self.accountant.tokens is None:
            return
        self.accountant.tokens.observe(sample, self.steps.heard(rollout_id))

    # --- the all-samples hook's side ----------------------------------------------------------
    def close_step(self, all_groups: list | None) -> ClosedStep | None:
        """Close the open step with ``success_rate`` / ``reward_mean`` over every completed group
        (``None``: slime's groups could not be read; the step closes with the ledger's own figures)."""
        if self.accountant is None:
            return None
        if all_groups is None:
            return self.accountant.close_step()
        stats = GenerationStats()
        judged = self.accountant.open_judgements()  # the filter's own judgement of this very group object
        for group in all_groups:
            judgement = judged.get(id(group))
            stats.add(judgement if judgement is not None else judge_group(group, **self._judge_kwargs))
        closed = self.accountant.close_step(stats=stats, all_groups=len(all_groups))
        if closed is not None and len(all_groups) != len(closed.rows):
            self._warn_once("all_groups", "shopsim-metrics: the all-samples hook received %d groups but the filter "
                            "judged %d in step %s; is the filter path set to shopsimrl.slime_runtime."
                            "fully_scored_group_filter?", len(all_groups), len(closed.rows), closed.rollout_id)
        return closed

    # --- the log function's side --------------------------------------------------------------
    def emit_step(
        self, rollout_id: int, rollout_extra_metrics: dict | None, rollout_time: Any = None,
    ) -> list[StepRecord]:
        """Emit every closed step (closing ``rollout_id`` from the ledger if the all-samples hook did not).

        ``rollout_time`` is slime's own (``rollout_seconds``). Inside :meth:`own_time`, the log
        function's time up to the sinks counts in the emitted step's ``filter_seconds``.
        """
        started = getattr(self._hook_started, "value", None)
        if self.accountant is None:
            self.recorder.send_warnings(up_to=rollout_id)
            return []
        with self.recorder.lock:
            if is_int(rollout_id):
                self.accountant.renumber(rollout_id)  # a step the loop could not number is slime's rollout_id
            self.accountant.close_step_of(rollout_id)
            closed = self.accountant.take_closed()
            # each step is recorded whatever slime handed over
            records = self.recorder.record(closed, SlimeFacts(rollout_id, rollout_extra_metrics, rollout_time, started))
            if closed:
                self._save_snapshot(closed[-1].rollout_id)
        return records

    def _save_snapshot(self, rollout_id: int) -> None:
        """Have the snapshot writer save the state after step ``rollout_id`` beside slime's checkpoint of it, when
        slime checkpoints after it (:mod:`~shopsim_metrics.run.snapshot_writer`: slime's log function does not wait
        for it, but at the run's last step)."""
        if self.accountant is not None:
            self.snapshot_writer.save(rollout_id, live_after=self._live_after)

    def _live_after(self, rollout_id: int) -> bool:
        """Whether the live state is what a replay of the records up to step ``rollout_id`` rebuilds: that step is
        the newest closed and no group of a later step is judged yet (called under the judgement lock)."""
        accountant = self.accountant
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
        return build_snapshot(self.resumable, rollout_id=rollout_id, run_id=self.run_id,
                              missing=self._missing_steps, run_dir=self.run_dir, writer=self.writer,
                              processes=self.run_writers.known())

    def wait_for_snapshot(self) -> None:
        """Return once the snapshot being written (if any) is on disk (or has failed, with its warning)."""
        self.snapshot_writer.wait()

    def flush(self) -> None:
        """Emit closed steps that no log function picked up (termination, process exit)."""
        if self.accountant is None:
            return
        with self.recorder.lock:
            self.recorder.record(self.accountant.take_closed())

    def shutdown(self) -> None:
        """Finish the snapshot being written (its copy is the state before anything closes here), close the open
        step from its ledger, emit everything pending, close the sinks."""
        with self.recorder.lock:
            self.wait_for_snapshot()
            if self.accountant is not None:
                self.accountant.close_step()
            self.flush()
            self.recorder.send_warnings()
            if self._sinks is not None:  # no sinks built: no record was ever written, no table either
                self.recorder.final_prompt_table(self.steps.current() if self.accountant else None)
                self._sinks.close()

def wave_planner(settings: ShopsimSettings, loop_state: LoopState, steps: StepNumbers) -> WavePlanner:
    """The run's wave planner, from its settings (``shopsim_wave_fill_probability``, ``shopsim_wave_size_cap``)."""
    assert settings.rollout_batch_size is not None and settings.over_sampling_batch_size is not None
    return WavePlanner(rollout_batch_size=settings.rollout_batch_size,
                       over_sampling_batch_size=settings.over_sampling_batch_size,
                       fill_probability=settings.wave_fill_probability, cap=settings.wave_size_cap, loop_state=loop_state,
                       steps=steps)


def step_accountant(settings: ShopsimSettings, loop_state: LoopState, steps: StepNumbers,
                    waves: WavePlanner | None) -> StepAccountant:
    """The run's accountant, from slime's knobs and the settings, with its prompt tracker (none when
    ``shopsim_prompt_history_limit`` is 0) and its count of every generated token."""
    assert settings.rollout_batch_size is not None and settings.over_sampling_batch_size is not None
    prompts = (PromptValueTracker(metadata_key=settings.prompt_key, limit=settings.prompt_history_limit,
                                  table_every=settings.prompts_table_every,
                                  forgetting=settings.prompt_skip_rule.forgetting)
               if settings.prompt_history_limit else None)
    knobs = StepKnobs(
        rollout_batch_size=settings.rollout_batch_size, over_sampling_batch_size=settings.over_sampling_batch_size,
        n_samples_per_prompt=settings.n_samples_per_prompt, global_batch_size=settings.global_batch_size,
        max_consecutive_failed_groups=settings.max_consecutive_failed_groups)
    return StepAccountant(
        knobs,
        clock=getattr(loop_state, "clock", None),  # a simulated loop's own clock, else monotonic
        prompts=prompts, tokens=GeneratedTokens(continues=settings.partial_rollout),
        steps=steps, waves=waves)


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
        elif monitor.accountant is not None:
            try:
                monitor.accountant.add_hook_seconds(time.perf_counter() - self.started)
            except Exception:  # noqa: BLE001 - monitoring never stops training
                pass


# --- the process-wide runtime ---------------------------------------------------------------------
_runtime: ShopsimRuntime | None = None
_runtime_lock = threading.Lock()
_atexit_registered = False


def get_runtime(args: Any, *, loop_state: Callable[[], LoopState] | None = None) -> ShopsimRuntime:
    """The process's runtime, created from ``args`` on first use (the first ``args`` seen wins).

    ``loop_state`` makes the loop state of a runtime created by this call (the slime adapter passes
    its reader of slime's live state). Creating it checks the settings: a bad value or an unknown
    ``shopsim_*`` key raises :class:`~shopsim_metrics.settings.ShopsimConfigError` from this first hook
    call; a missing accounting knob (``rollout_batch_size`` ...) is one warning.
    """
    runtime = _runtime
    if runtime is not None:
        return runtime
    with _runtime_lock:
        if _runtime is None:
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


def _create(args: Any, **kwargs: Any) -> ShopsimRuntime:
    runtime = ShopsimRuntime(ShopsimSettings.from_args(args), snapshots=SnapshotPlan.from_args(args), **kwargs)
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
