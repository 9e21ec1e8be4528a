"""Exact per-step accounting of slime's dynamic sampling: one verdict per judged group.

For every judged group the accountant knows slime's verdict (``trained``, ``fallback``,
``dropped_technical``, ``dropped_zero_std``, ``surplus``), ``remaining_batch_size`` before it, and
the waves open at that moment. ``remaining`` comes live from the loop (see
:mod:`shopsim_metrics.loop.loop_state`); when the loop cannot say, a filter-side mirror stands in
(exact when groups finish one at a time, it drifts when several finish in one batch).

The verdict applies slime's drop rule: a zero-std group is let through (``keep_when_insufficient``)
when ``remaining <= rollout_batch_size``; a dropped group lowers ``remaining`` by one; a kept group enters the
train batch while it holds fewer than ``rollout_batch_size`` groups, otherwise it is surplus.

Submitted groups are derived the same way for every loop: ``submitted = remaining + drops so far``
(slime's ``remaining`` is "submitted minus dropped"). Waves follow as
``ceil(submitted / over_sampling_batch_size)``, unless the step's waves were planned (the project's data source
asks the :class:`~shopsim_metrics.waves.wave_planner.WavePlanner` for each, which hands them over at the close):
then ``wave_count`` is the number of its waves and a row's ``waves_open`` counts the waves served before it.

With a :class:`~shopsim_metrics.step.generated_tokens.GeneratedTokens` (fed by slime's sample hook), each
record also says every token the step generated, aborted groups included (``total_token_count``), and
the headline cost ``tokens_per_informative_group``; without one those fields stay None.

Thread-safe: the filter (rollout thread) and the log function (manager thread) share it.

Example:
    >>> from shopsim_metrics.step.closed_step import StepKnobs
    >>> acc = StepAccountant(StepKnobs(rollout_batch_size=2, over_sampling_batch_size=4))
    >>> from shopsim_metrics.judging.group_judgement import GroupJudgement
    >>> zero = GroupJudgement("zero_std", None, 0, 8, (0.0,) * 8)
    >>> [acc.judge(zero, step=0, remaining=r) for r in (4, 3, 2)]
    ['dropped_zero_std', 'dropped_zero_std', 'fallback']
"""

from __future__ import annotations

import threading
import time
from dataclasses import replace
from typing import Any, Callable, Protocol

from shopsim_metrics.record import contract as C
from shopsim_metrics.step.drop_rule import filter_flags, should_drop
from shopsim_metrics.step.generated_tokens import GeneratedTokens, StepTokens, group_tool_counts
from shopsim_metrics.step.closed_step import DROP_OUTCOMES, ClosedStep, GenerationStats, JudgedGroup, StepKnobs
from shopsim_metrics.record.records import DecisionRow
from shopsim_metrics.loop.step_number import StepNumbers
from shopsim_metrics.waves.wave_planner import OpenStepCounts, StepWaves, WavePlanner
from shopsim_metrics.judging.group_judgement import SPREAD, TECHNICAL, GroupJudgement, unmarked_kind
from shopsim_metrics.judging.group_samples import group_tokens


class StepAnnotator(Protocol):
    """Gives a closed step what only its groups tell: each row's prompt key, then the prompt-value fields
    (:class:`~shopsim_metrics.prompts.value.PromptValueTracker`)."""

    def keys(self, groups: list[Any]) -> list[tuple[str | None, str]] | None: ...

    def step_fields(self, rollout_id: int, decisions: list[DecisionRow], *, generated_token_count: int | None,
                    sources: set[str]) -> dict[str, Any]: ...


class StepAccountant:
    """Turns judgements plus live loop facts into decision rows and, at each close, the step's facts
    (:class:`~shopsim_metrics.step.closed_step.ClosedStep`: its ledger, waves and tokens, and the prompt tracker's
    part); the step recorder makes its record from them."""

    def __init__(
        self,
        knobs: StepKnobs,
        *,
        clock: Callable[[], float] | None = None,
        prompts: StepAnnotator | None = None,
        tokens: GeneratedTokens | None = None,
        steps: StepNumbers | None = None,
        waves: WavePlanner | None = None,
    ) -> None:
        self.knobs = knobs
        """slime's knobs, as every closed step repeats them (validated by the settings: over >= rollout batch >= 1)."""
        self.clock: Callable[[], float] = clock or time.monotonic
        """Seconds on a monotonic clock: ``judged_at`` and the wave timings read it."""
        self.prompts = prompts
        """Keys each closed step's groups by prompt and fills its prompt-value fields (None: not tracked)."""
        self.tokens = tokens
        """Every token of each step as slime's sample hook reported it (None: the step's total is unknown)."""
        self._lock = threading.Lock()
        self.waves = waves
        """Each step's waves as the data source served them, handed over at the close (None: not planned)."""
        if waves is not None:
            waves.judged_so_far = self  # a wave is sized from the step's judged groups so far
        self._open: ClosedStep | None = None
        self.closed: list[ClosedStep] = []  # closed steps not yet emitted (read-only outside this class)
        self.steps = steps or StepNumbers()
        """The step numbers' one owner: a step the loop could not number is counted there, and renumbered."""
        self._newest_version: int | None = None  # fully-async: the newest policy version any judged group reported

    # --- judging ------------------------------------------------------------------------------
    def judge(
        self, judgement: GroupJudgement, step: int | None, remaining: int | None, source: str = "mirror",
        group: Any = None, streak: int = 0,
    ) -> str:
        """Record one judged group and return its outcome; ``remaining`` is the loop's live value before it.

        ``streak`` is the run's technical streak after this judgement, read from its one owner
        (:class:`~shopsim_metrics.health.streak.TechnicalStreak`); the step's streak fields come from it.
        Kept lean: this runs once per group on
        slime's rollout thread; ledger rows are built at close.
        """
        with self._lock:
            state = self._open
            if state is None or (step is not None and step != state.rollout_id):
                state = self._start(step, source)
            drops = state.drops
            if remaining is None:  # filter-side mirror: open waves as slime would between batches
                while state.submitted - drops < self.knobs.rollout_batch_size:
                    state.submitted += self.knobs.over_sampling_batch_size
                remaining = state.submitted - drops
            else:
                state.submitted = remaining + drops
            kind = judgement.kind
            # slime's drop rule on the filter's answer for this kind; a group not dropped enters the
            # train batch while it has room, else it is surplus
            if should_drop(*filter_flags(kind), remaining_batch_size=remaining, target_data_size=self.knobs.rollout_batch_size):
                outcome = C.OUTCOME_DROPPED_TECHNICAL if kind == TECHNICAL else C.OUTCOME_DROPPED_ZERO_STD
            elif state.train_len < self.knobs.rollout_batch_size:
                outcome = C.OUTCOME_TRAINED if kind == SPREAD else C.OUTCOME_FALLBACK
            else:
                outcome = C.OUTCOME_SURPLUS
            self._add(state, JudgedGroup(judgement, outcome, remaining, state.submitted, group, self.clock()), streak)
            return outcome

    def record_decided(
        self, judgement: GroupJudgement, step: int | None, outcome: str, *, group: Any = None, streak: int = 0,
        carried: bool = False, weight_version: int | None = None,
    ) -> str:
        """Record one group whose outcome the loop decided itself (the fully-async path, no ``remaining``).

        ``carried``: the group was drawn before the step began; ``weight_version``: the oldest policy
        version that generated it (:func:`~shopsim_metrics.fully_async.fully_async_batch.oldest_weight_version`).
        The step's record then has no waves and no ``remaining`` (null) and says
        ``carried_group_count`` and the trained groups' policy-version lag.
        """
        if outcome not in C.OUTCOMES:
            raise ValueError(f"outcome must be one of {C.OUTCOMES}, got {outcome!r}")
        with self._lock:
            state = self._open
            if state is None or (step is not None and step != state.rollout_id):
                state = self._start(step, C.LOOP_FULLY_ASYNC)
            state.fully_async = True
            if weight_version is not None and (self._newest_version is None or weight_version > self._newest_version):
                self._newest_version = weight_version
            self._add(state, JudgedGroup(judgement, outcome, None, 0, group, self.clock(), carried, weight_version), streak)
            return outcome

    def _add(self, state: ClosedStep, judged: JudgedGroup, streak: int) -> None:
        """Count one decided group in the open step: its drop or its batch slot, its row, the streak after it."""
        if judged.outcome in DROP_OUTCOMES:
            state.drops += 1
        elif judged.outcome in (C.OUTCOME_TRAINED, C.OUTCOME_FALLBACK):
            state.train_len += 1
            if state.train_len == self.knobs.rollout_batch_size:
                state.filled_at = len(state.judged)
        state.judged.append(judged)
        state.streak = streak
        if streak > state.max_streak:
            state.max_streak = streak

    def open_judgements(self) -> dict[int, GroupJudgement]:
        """The judgement of every group judged in the open step, by ``id()`` of the group object (the
        ledger holds the groups, so no other live object has their ids)."""
        with self._lock:
            state = self._open
            return {id(judged.group): judged.judgement for judged in state.judged} if state is not None else {}

    def count_generated(self, sample: Any, step: int | None, *, source: str | None = None) -> None:
        """Count one generate call's tokens in step ``step`` (slime's sample hook: aborted calls too); ``source`` names
        the counter when it is not slime's sample hook (the records' ``token_count_source``)."""
        tokens = self.tokens
        if tokens is None:
            return
        if source is not None and tokens.source != source:
            tokens.source = source
        tokens.observe(sample, step)

    def add_hook_seconds(self, seconds: float) -> None:
        """Add the project's own time in a hook to the open step, else to the last closed, unemitted one."""
        with self._lock:
            if self._open is not None:
                self._open.hook_seconds += seconds
            elif self.closed:
                self.closed[-1].hook_seconds += seconds

    def _start(self, step: int | None, source: str) -> ClosedStep:
        if self._open is not None:  # a new step began without the all-samples hook closing the last one
            self._append_closed(self._close(self._open, terminated=False, stats=None, all_groups=None))
        step, counted = self.steps.open(step)
        self._open = ClosedStep(rollout_id=step, knobs=self.knobs, source=source, counted=counted)
        return self._open

    def renumber(self, rollout_id: int) -> None:
        """slime's log function says step ``rollout_id`` finished: when the accountant's own count (the
        loop could not say) is behind it, the latest step it numbered itself takes that number, and
        counting goes on from it.

        The open step when it is counted (the all-samples hook did not close it), else the latest
        closed, unemitted counted step. A ``rollout_id`` at or below the count changes nothing (a
        log function lagging behind the rollout), and a step numbered by the loop is never renumbered.

        Example:
            >>> acc = StepAccountant(StepKnobs(rollout_batch_size=1, over_sampling_batch_size=1))
            >>> zero = GroupJudgement("zero_std", None, 0, 8, (0.0,) * 8)
            >>> _ = acc.judge(zero, step=None, remaining=None); acc.open_rollout_id()
            0
            >>> _ = acc.close_step(); acc.renumber(7); [d.rollout_id for d in acc.take_closed()]
            [7]
            >>> _ = acc.judge(zero, step=None, remaining=None); acc.open_rollout_id()
            8
        """
        with self._lock:
            state = self._open
            if state is not None and not state.counted:
                return
            if not self.steps.renumber(rollout_id):
                return
            if state is not None:
                state.rollout_id = rollout_id
            else:
                counted = [r for r in self.closed if r.counted]
                if counted:
                    counted[-1].rollout_id = rollout_id

    # --- the step so far, for the wave planner -------------------------------------------------
    def open_counts(self, step: int | None) -> OpenStepCounts:
        """The step ``step``'s groups judged, kept and dropped so far (none when it is not the open step)."""
        with self._lock:
            state = self._open if self._open is not None and self._open.rollout_id == step else None
            if state is None:
                return OpenStepCounts()
            kept = state.train_len + sum(1 for j in state.judged if j.outcome == C.OUTCOME_SURPLUS)
            return OpenStepCounts(judged=len(state.judged), kept=kept, dropped=state.drops)

    # --- closing ------------------------------------------------------------------------------
    def close_step(
        self, *, stats: GenerationStats | None = None, all_groups: int | None = None, terminated: bool = False,
        aborted_groups: int | None = None,
    ) -> ClosedStep | None:
        """Close the open step (all-samples hook, log function, or termination); None if none is open.

        The closed step holds the step's facts (:class:`~shopsim_metrics.step.closed_step.ClosedStep`) and the
        prompt tracker's part; the step recorder makes its record when it is emitted
        (:class:`~shopsim_metrics.step.recorder.StepRecorder`).

        ``stats`` are the generation figures over every completed group (from the all-samples hook);
        without them the ledger's own sums are used. ``aborted_groups``: on the fully-async path, the
        groups put back in the buffer during the step (None: not known).
        """
        with self._lock:
            state, self._open = self._open, None
            if state is None:
                return None
            closed = self._close(state, terminated=terminated, stats=stats, all_groups=all_groups,
                                 aborted_groups=aborted_groups)
            self._append_closed(closed)
            return closed

    def open_rollout_id(self) -> int | None:
        with self._lock:
            return self._open.rollout_id if self._open else None

    def close_step_of(self, rollout_id: int) -> ClosedStep | None:
        """Close the open step only if it is ``rollout_id`` (one atomic check: the filter may be
        opening the next step on another thread meanwhile)."""
        with self._lock:
            if self._open is None or self._open.rollout_id != rollout_id:
                return None
            state, self._open = self._open, None
            closed = self._close(state, terminated=False, stats=None, all_groups=None)
            self._append_closed(closed)
            return closed

    def _append_closed(self, closed: ClosedStep) -> None:
        self.closed.append(closed)

    def take_closed(self) -> list[ClosedStep]:
        """Hand over every closed step not yet emitted (oldest first)."""
        with self._lock:
            closed, self.closed = self.closed, []
            return closed

    def _ledger(self, state: ClosedStep, wave_sizes: list[int] | None,
                keys: list[str | None] | None, live: StepTokens | None = None) -> list[DecisionRow]:
        """The step's ledger rows, in judgement order (``keys``: each group's prompt key, None: not tracked; ``live``:
        the sample hook's figures, whose episodes give each group's tool calls)."""
        start = state.judged[0].clock if state.judged else 0.0
        by_sample = live.by_sample if live is not None else {}
        agent = live is not None and live.episodes is not None  # who failed a group: said in agent steps only
        rows = []
        for order, judged in enumerate(state.judged, start=1):
            key = keys[order - 1] if keys is not None else None
            j = judged.judgement
            technical = j.kind == TECHNICAL
            reward_min, reward_max, reward_sum, reward_mean = j.reward_figures()
            scorable = j.scorable_rollouts
            rows.append(DecisionRow(
                order=order,
                waves_open=None if state.fully_async else self._waves_open(judged.submitted, wave_sizes),
                group_index=j.group_index,
                outcome=judged.outcome,
                reason=C.REASON_OF_KIND[j.kind],
                remaining_before=judged.remaining_before,
                unique_rollouts=j.unique_rollouts,
                reward_min=reward_min,
                reward_max=reward_max,
                reward_mean=reward_mean,
                success_count=j.success_count if scorable else None,
                failed_check=j.failed_check if technical else None,
                scorable_rollouts=scorable,
                reward_sum=reward_sum,  # inf when huge rewards overflow it: null in the record
                response_tokens=group_tokens(judged.group),
                judged_at=judged.clock - start,
                prompt_key=key,
                technical_cause=j.failure_cause if technical else None,
                failure_kind=unmarked_kind(j) if agent else None,
                **group_tool_counts(judged.group, by_sample),
            ))
        return rows

    def _waves_open(self, submitted: int, wave_sizes: list[int] | None) -> int:
        """Waves it took to submit ``submitted`` groups: the served sizes when known, else fixed waves."""
        if not wave_sizes:
            return -(-submitted // self.knobs.over_sampling_batch_size)
        waves = served = 0
        for size in wave_sizes:
            if served >= submitted:
                break
            served += size
            waves += 1
        return waves

    def _close(
        self, state: ClosedStep, *, terminated: bool, stats: GenerationStats | None, all_groups: int | None,
        aborted_groups: int | None = None,
    ) -> ClosedStep:
        """The closed step: the facts gathered while ``state`` was open, with its ledger, its waves, its tokens and
        the prompt tracker's part (it reads the step's groups, gone after the close)."""
        kinds = [j.judgement.kind for j in state.judged]
        waves = self.waves.close(state.rollout_id, kinds) if self.waves is not None else StepWaves(None, None)
        wave_sizes = waves.sizes
        groups = [judged.group for judged in state.judged]
        # the step's tokens as it closes, before anything else: the sample hook may go on counting on another thread
        live = self.tokens.take(state.rollout_id, groups) if self.tokens is not None else None
        keyed = self.prompts.keys(groups) if self.prompts is not None else None
        rows = self._ledger(state, wave_sizes, [key for key, _ in keyed] if keyed is not None else None, live)
        prompt_part = None
        if self.prompts is not None and keyed is not None:  # reads the step's token counts
            prompt_part = self.prompts.step_fields(state.rollout_id, rows,
                                                   generated_token_count=sum(row.response_tokens for row in rows),
                                                   sources={source for _, source in keyed})
        if live is not None and live.by_sample:  # read by the ledger: the closed step keeps no sample's episode
            live = replace(live, by_sample={})
        return replace(state, rows=rows, terminated=terminated, stats=stats, all_groups=all_groups,
                       aborted_groups=aborted_groups, wave_sizes=wave_sizes, tokens=live,
                       predicted_second_wave=waves.second_wave_probability,
                       newest_version=self._newest_version if state.fully_async else None, prompt_part=prompt_part)
