"""Exact per-step accounting of slime's dynamic sampling: one verdict per judged group.

For every judged group the accountant knows slime's verdict (``trained``, ``fallback``,
``dropped_technical``, ``dropped_zero_std``, ``surplus``), ``remaining_batch_size`` before it, and
the waves open at that moment. ``remaining`` comes live from the loop (see
:mod:`shopsim_metrics.step.loop_state`); when the loop cannot say, a filter-side mirror stands in
(exact when groups finish one at a time, it drifts when several finish in one batch).

The verdict applies slime's drop rule: a zero-std group is let through (``keep_when_insufficient``)
when ``remaining <= rollout_batch_size``; a dropped group lowers ``remaining`` by one; a kept group enters the
train batch while it holds fewer than ``rollout_batch_size`` groups, otherwise it is surplus.

Submitted groups are derived the same way for every loop: ``submitted = remaining + drops so far``
(slime's ``remaining`` is "submitted minus dropped"). Waves follow as
``ceil(submitted / over_sampling_batch_size)``, unless the data source said how many groups each of the
step's waves had (:meth:`StepAccountant.wave_served`; the project's data source does, and may size them):
then ``wave_count`` is the number of its calls and a row's ``waves_open`` counts the waves served before it.

With a :class:`~shopsim_metrics.step.generated_tokens.GeneratedTokens` (fed by slime's sample hook), each
record also says every token the step generated, aborted groups included (``total_token_count``), and
the headline cost ``tokens_per_informative_group``; without one those fields stay None.

Thread-safe: the filter (rollout thread) and the log function (manager thread) share it.

Example:
    >>> acc = StepAccountant(rollout_batch_size=2, over_sampling_batch_size=4)
    >>> from shopsim_metrics.judging.group_judgement import GroupJudgement
    >>> zero = GroupJudgement("zero_std", None, 0, 8, (0.0,) * 8)
    >>> [acc.judge(zero, step=0, remaining=r) for r in (4, 3, 2)]
    ['dropped_zero_std', 'dropped_zero_std', 'fallback']
"""

from __future__ import annotations

import math
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable, Protocol

from shopsim_metrics.step import contract as C
from shopsim_metrics.step.drop_rule import filter_flags, should_drop
from shopsim_metrics.step.generated_tokens import GeneratedTokens, StepTokens
from shopsim_metrics.step.group_sizes import unequal_size_rows
from shopsim_metrics.step.draft import RecordPart, StepDraft
from shopsim_metrics.step.records import DecisionRow
from shopsim_metrics.step.wave_size import RECENT_WINDOW, RecentOrders, RecentSteps
from shopsim_metrics.judging.group_judgement import SPREAD, TECHNICAL, ZERO_STD, GroupJudgement, finite_mean
from shopsim_metrics.judging.tokens import group_tokens
from shopsim_metrics.judging.verdicts import ZERO_STD_ALL_FAIL, ZERO_STD_ALL_PASS, ZERO_STD_OTHER, verdict_of


@dataclass
class GenerationStats:
    """Scorable rewards and successes: the inputs of ``success_rate`` / ``reward_mean``.

    The rewards themselves are kept (a step holds a few hundred), so the mean is exact and never
    overflows (:func:`finite_mean`).

    Example:
        >>> a = GenerationStats(); a.add(GroupJudgement("spread", None, 0, 4, (0.0, 1.0, 1e308, 1e308), 3))
        >>> (a.scorable, a.rate, a.mean)
        (4, 0.75, 5e+307)
    """

    successes: int = 0
    rewards: list[float] = field(default_factory=list)

    def add(self, judgement: GroupJudgement) -> None:
        self.successes += judgement.success_count
        self.rewards.extend(judgement.rewards)

    @property
    def scorable(self) -> int:
        return len(self.rewards)

    @property
    def rate(self) -> float | None:
        return self.successes / self.scorable if self.scorable else None

    @property
    def mean(self) -> float | None:
        return finite_mean(self.rewards)


@dataclass(slots=True)
class _Judged:
    """One judged group of the open step, as the filter saw it (the ledger row is built at close)."""

    judgement: GroupJudgement
    outcome: str
    remaining_before: int  # remaining_batch_size before the judgement
    submitted: int  # groups submitted so far in the step
    group: Any
    clock: float  # the accountant's clock at the judgement
    carried: bool = False  # fully-async: the group was drawn before its step began
    weight_version: int | None = None  # fully-async: the oldest policy version that generated the group


@dataclass
class _OpenStep:
    rollout_id: int
    source: str
    judged: list[_Judged] = field(default_factory=list)  # in judgement order
    submitted: int = 0
    drops: int = 0
    train_len: int = 0
    streak: int = 0  # the run's technical streak after the step's latest judgement
    max_streak: int = 0
    filled_at: int | None = None  # index of the row whose judgement filled the train batch
    hook_seconds: float = 0.0  # the project's own time inside the hooks for this step
    counted: bool = False  # numbered by the accountant (the loop could not say): slime's log function renumbers it
    fully_async: bool = False  # judged by the fully-async rollout function, which decided each outcome itself


@dataclass(frozen=True)
class WaveView:
    """What a data source sizing a wave needs to know of the step and of the recent ones."""

    kept: int  # groups of the step judged and not dropped so far (train batch, then surplus)
    served: int  # groups the data source served for the step so far (the sum of its waves)
    dropped: int  # groups of the step dropped so far
    judged: int  # groups of the step judged so far
    recent: RecentSteps | None  # the last RECENT_WINDOW closed steps' judged groups in finishing order (None: none)


class StepAnnotator(Protocol):
    """Gives a closed step what only its groups tell: each row's prompt key, then the prompt-value fields
    (:class:`~shopsim_metrics.prompts.value.PromptValueTracker`)."""

    def keys(self, groups: list[Any]) -> list[tuple[str | None, str]] | None: ...

    def step_fields(self, rollout_id: int, decisions: list[DecisionRow], *, generated_token_count: int | None,
                    sources: set[str]) -> RecordPart: ...


class StepAccountant:
    """Turns judgements plus live loop facts into decision rows and, at each close, a step's draft (its record's
    accountant and prompt-tracker fields; :mod:`~shopsim_metrics.step.draft`)."""

    def __init__(
        self,
        *,
        rollout_batch_size: int,
        over_sampling_batch_size: int,
        max_consecutive_failed_groups: int = 8,
        n_samples: int | None = None,
        global_batch_size: int | None = None,
        clock: Callable[[], float] | None = None,
        prompts: StepAnnotator | None = None,
        tokens: GeneratedTokens | None = None,
        first_rollout_id: int = 0,
    ) -> None:
        # the knobs come validated from ShopsimSettings (over_sampling_batch_size >= rollout_batch_size >= 1)
        self.rollout_batch_size = rollout_batch_size
        self.over_sampling_batch_size = over_sampling_batch_size
        self.max_consecutive_failed_groups = max_consecutive_failed_groups
        self.n_samples = n_samples
        self.global_batch_size = global_batch_size
        self.clock: Callable[[], float] = clock or time.monotonic
        """Seconds on a monotonic clock: ``judged_at`` and the wave timings read it."""
        self.prompts = prompts
        """Keys each closed step's groups by prompt and fills its prompt-value fields (None: not tracked)."""
        self.tokens = tokens
        """Every token of each step as slime's sample hook reported it (None: the step's total is unknown)."""
        self._lock = threading.Lock()
        self._wave_sizes: dict[int, list[int]] = {}  # rollout_id -> the groups of each wave the data source served
        self._first_wave_predictions: dict[int, float] = {}  # rollout_id -> P(another wave) as its first wave was sized
        self.recent_orders = RecentOrders(RECENT_WINDOW)
        """The recent steps' judged groups in finishing order (adaptive waves; restored on a resume)."""
        self._open: _OpenStep | None = None
        self.closed: list[StepDraft] = []  # closed steps not yet emitted (read-only outside this class)
        self._last_rollout_id: int | None = None
        self.first_rollout_id = first_rollout_id
        """The step a process numbers first when the loop cannot say: slime's ``start_rollout_id``."""
        self._counted_ids: set[int] = set()  # closed, unemitted steps numbered by the accountant
        self._newest_version: int | None = None  # fully-async: the newest policy version any judged group reported

    # --- judging ------------------------------------------------------------------------------
    def judge(
        self, judgement: GroupJudgement, step: int | None, remaining: int | None, source: str = "mirror",
        group: Any = None, streak: int = 0,
    ) -> str:
        """Record one judged group and return its outcome; ``remaining`` is the loop's live value before it.

        ``streak`` is the run's technical streak after this judgement, read from its one owner
        (:class:`~shopsim_metrics.step.streak.TechnicalStreak`); the step's streak fields come from it.
        Afterwards :attr:`current_rollout_id` is the step. Kept lean: this runs once per group on
        slime's rollout thread; ledger rows are built at close.
        """
        with self._lock:
            state = self._open
            if state is None or (step is not None and step != state.rollout_id):
                state = self._start(step, source)
            drops = state.drops
            if remaining is None:  # filter-side mirror: open waves as slime would between batches
                while state.submitted - drops < self.rollout_batch_size:
                    state.submitted += self.over_sampling_batch_size
                remaining = state.submitted - drops
            else:
                state.submitted = remaining + drops
            kind = judgement.kind
            # slime's drop rule on the filter's answer for this kind; a group not dropped enters the
            # train batch while it has room, else it is surplus
            if should_drop(*filter_flags(kind), remaining_batch_size=remaining, target_data_size=self.rollout_batch_size):
                outcome = C.OUTCOME_DROPPED_TECHNICAL if kind == TECHNICAL else C.OUTCOME_DROPPED_ZERO_STD
            elif state.train_len < self.rollout_batch_size:
                outcome = C.OUTCOME_TRAINED if kind == SPREAD else C.OUTCOME_FALLBACK
            else:
                outcome = C.OUTCOME_SURPLUS
            self._add(state, _Judged(judgement, outcome, remaining, state.submitted, group, self.clock()), streak)
            return outcome

    def record_decided(
        self, judgement: GroupJudgement, step: int | None, outcome: str, *, group: Any = None, streak: int = 0,
        carried: bool = False, weight_version: int | None = None,
    ) -> str:
        """Record one group whose outcome the loop decided itself (the fully-async path, no ``remaining``).

        ``carried``: the group was drawn before the step began; ``weight_version``: the oldest policy
        version that generated it (:func:`~shopsim_metrics.step.async_batch.oldest_weight_version`).
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
            self._add(state, _Judged(judgement, outcome, None, 0, group, self.clock(), carried, weight_version), streak)
            return outcome

    def _add(self, state: _OpenStep, judged: _Judged, streak: int) -> None:
        """Count one decided group in the open step: its drop or its batch slot, its row, the streak after it."""
        if judged.outcome in _DROPS:
            state.drops += 1
        elif judged.outcome in (C.OUTCOME_TRAINED, C.OUTCOME_FALLBACK):
            state.train_len += 1
            if state.train_len == self.rollout_batch_size:
                state.filled_at = len(state.judged)
        state.judged.append(judged)
        state.streak = streak
        if streak > state.max_streak:
            state.max_streak = streak

    @property
    def current_rollout_id(self) -> int | None:
        state = self._open
        return state.rollout_id if state is not None else self._last_rollout_id

    def open_judgements(self) -> dict[int, GroupJudgement]:
        """The judgement of every group judged in the open step, by ``id()`` of the group object (the
        ledger holds the groups, so no other live object has their ids)."""
        with self._lock:
            state = self._open
            return {id(judged.group): judged.judgement for judged in state.judged} if state is not None else {}

    def add_hook_seconds(self, seconds: float) -> None:
        """Add the project's own time in a hook to the open step, else to the last closed, unemitted one."""
        with self._lock:
            if self._open is not None:
                self._open.hook_seconds += seconds
            elif self.closed:
                self.closed[-1].add_filter_seconds(seconds)

    def _start(self, step: int | None, source: str) -> _OpenStep:
        if self._open is not None:  # a new step began without the all-samples hook closing the last one
            self._append_closed(self._draft(self._open, terminated=False, stats=None, all_groups=None), self._open)
        counted = step is None
        if step is None:
            step = self.first_rollout_id if self._last_rollout_id is None else self._last_rollout_id + 1
        self._open = _OpenStep(rollout_id=step, source=source, counted=counted)
        self._last_rollout_id = step
        return self._open

    def renumber(self, rollout_id: int) -> None:
        """slime's log function says step ``rollout_id`` finished: when the accountant's own count (the
        loop could not say) is behind it, the latest step it numbered itself takes that number, and
        counting goes on from it.

        The open step when it is counted (the all-samples hook did not close it), else the latest
        closed, unemitted counted step. A ``rollout_id`` at or below the count changes nothing (a
        log function lagging behind the rollout), and a step numbered by the loop is never renumbered.

        Example:
            >>> acc = StepAccountant(rollout_batch_size=1, over_sampling_batch_size=1)
            >>> zero = GroupJudgement("zero_std", None, 0, 8, (0.0,) * 8)
            >>> _ = acc.judge(zero, step=None, remaining=None); acc.current_rollout_id
            0
            >>> _ = acc.close_step(); acc.renumber(7); [d.rollout_id for d in acc.take_closed()]
            [7]
            >>> _ = acc.judge(zero, step=None, remaining=None); acc.current_rollout_id
            8
        """
        with self._lock:
            if self._last_rollout_id is not None and rollout_id <= self._last_rollout_id:
                return
            state = self._open
            if state is not None and not state.counted:
                return
            if state is not None:
                state.rollout_id = rollout_id
            else:
                counted = [r for r in self.closed if id(r) in self._counted_ids]
                if counted:
                    counted[-1].rollout_id = rollout_id
            self._last_rollout_id = rollout_id

    # --- waves served by the data source ------------------------------------------------------
    def wave_served(self, step: int, size: int) -> None:
        """The data source served a wave of ``size`` groups for rollout step ``step``."""
        with self._lock:
            self._wave_sizes.setdefault(step, []).append(size)

    def first_wave_sized(self, step: int, second_wave_probability: float) -> None:
        """The data source sized the first wave of step ``step`` with ``second_wave_probability`` of another
        (:func:`~shopsim_metrics.step.wave_size.adaptive_wave_size`): the step's record says it beside its
        ``wave_count``."""
        with self._lock:
            self._first_wave_predictions.setdefault(step, second_wave_probability)

    def wave_view(self, step: int | None) -> WaveView:
        """The step's groups judged, kept and served so far, and the recent steps' judged groups (for sizing a wave)."""
        with self._lock:
            state = self._open if self._open is not None and self._open.rollout_id == step else None
            kept = state.train_len + sum(1 for j in state.judged if j.outcome == C.OUTCOME_SURPLUS) if state else 0
            served = sum(self._wave_sizes.get(step, ())) if step is not None else 0
            return WaveView(kept=kept, served=served, dropped=state.drops if state else 0,
                            judged=len(state.judged) if state else 0, recent=self.recent_orders.recent())

    # --- closing ------------------------------------------------------------------------------
    def close_step(
        self, *, stats: GenerationStats | None = None, all_groups: int | None = None, terminated: bool = False,
        aborted_groups: int | None = None,
    ) -> StepDraft | None:
        """Close the open step (all-samples hook, log function, or termination); None if none is open.

        The step's draft holds the accountant's fields and the prompt tracker's; the monitor adds its
        own when it emits the step and builds the record (:meth:`StepDraft.finish`).

        ``stats`` are the generation figures over every completed group (from the all-samples hook);
        without them the ledger's own sums are used. ``aborted_groups``: on the fully-async path, the
        groups put back in the buffer during the step (None: not known).
        """
        with self._lock:
            state, self._open = self._open, None
            if state is None:
                return None
            draft = self._draft(state, terminated=terminated, stats=stats, all_groups=all_groups,
                                aborted_groups=aborted_groups)
            self._append_closed(draft, state)
            return draft

    def open_rollout_id(self) -> int | None:
        with self._lock:
            return self._open.rollout_id if self._open else None

    def close_step_of(self, rollout_id: int) -> StepDraft | None:
        """Close the open step only if it is ``rollout_id`` (one atomic check: the filter may be
        opening the next step on another thread meanwhile)."""
        with self._lock:
            if self._open is None or self._open.rollout_id != rollout_id:
                return None
            state, self._open = self._open, None
            draft = self._draft(state, terminated=False, stats=None, all_groups=None)
            self._append_closed(draft, state)
            return draft

    def _append_closed(self, draft: StepDraft, state: _OpenStep) -> None:
        self.closed.append(draft)
        if state.counted:
            self._counted_ids.add(id(draft))

    def take_closed(self) -> list[StepDraft]:
        """Hand over every closed step not yet emitted (oldest first)."""
        with self._lock:
            closed, self.closed = self.closed, []
            self._counted_ids.clear()
            return closed

    def _ledger(self, state: _OpenStep, wave_sizes: list[int] | None,
                keys: list[str | None] | None) -> list[DecisionRow]:
        """The step's ledger rows, in judgement order (``keys``: each group's prompt key, None: not tracked)."""
        start = state.judged[0].clock if state.judged else 0.0
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
            ))
        return rows

    def _waves_open(self, submitted: int, wave_sizes: list[int] | None) -> int:
        """Waves it took to submit ``submitted`` groups: the served sizes when known, else fixed waves."""
        if not wave_sizes:
            return -(-submitted // self.over_sampling_batch_size)
        waves = served = 0
        for size in wave_sizes:
            if served >= submitted:
                break
            served += size
            waves += 1
        return waves

    def _draft(
        self, state: _OpenStep, *, terminated: bool, stats: GenerationStats | None, all_groups: int | None,
        aborted_groups: int | None = None,
    ) -> StepDraft:
        """The closed step's draft: the accountant's part, and the prompt tracker's (it reads the step's groups)."""
        wave_sizes, predicted_second_wave = self._take_waves(state.rollout_id)
        groups = [judged.group for judged in state.judged]
        # the step's tokens as it closes, before anything else: the sample hook may go on counting on another thread
        live = self.tokens.take(state.rollout_id, groups) if self.tokens is not None else None
        keyed = self.prompts.keys(groups) if self.prompts is not None else None
        rows = self._ledger(state, wave_sizes, [key for key, _ in keyed] if keyed is not None else None)
        counts, samples, tokens = Counter(), Counter(), Counter()  # groups, unique rollouts, tokens per outcome
        failed_checks: Counter[str] = Counter()
        zero_std_seen = 0  # zero-std groups: dropped, fallback or surplus
        zero_std_causes: Counter[str] = Counter()  # the same groups by verdict: all pass, all fail, other
        for row in rows:
            counts[row.outcome] += 1
            samples[row.outcome] += row.unique_rollouts
            tokens[row.outcome] += row.response_tokens
            if row.reason == C.REASON_ZERO_STD:
                zero_std_seen += 1
                zero_std_causes[verdict_of(ZERO_STD, row.success_count, row.scorable_rollouts)] += 1
            if row.failed_check:
                failed_checks[row.failed_check] += 1
        accepted = len(rows)
        train = counts[C.OUTCOME_TRAINED] + counts[C.OUTCOME_FALLBACK]
        accepted_samples = sum(samples.values())
        train_samples = samples[C.OUTCOME_TRAINED] + samples[C.OUTCOME_FALLBACK]
        ledger_stats = GenerationStats() if stats is None else None  # the all-samples hook's figures come first
        train_stats = GenerationStats()
        for judged in state.judged:
            if ledger_stats is not None:
                ledger_stats.add(judged.judgement)
            if judged.outcome in (C.OUTCOME_TRAINED, C.OUTCOME_FALLBACK):
                train_stats.add(judged.judgement)
        all_stats = stats if stats is not None else ledger_stats
        wave_count = len(wave_sizes) if wave_sizes else math.ceil(state.submitted / self.over_sampling_batch_size)
        generated = sum(tokens.values())
        train_tokens = tokens[C.OUTCOME_TRAINED] + tokens[C.OUTCOME_FALLBACK]
        informative = counts[C.OUTCOME_TRAINED]  # trained groups with spread (fallback groups are zero-std)
        self.recent_orders.observe([j.judgement.kind for j in state.judged])
        fill, extra = (None, None) if state.fully_async else self._wave_seconds(rows, state.filled_at, wave_count)
        fields: dict[str, Any] = dict(
            terminated=terminated,
            rollout_batch_size=self.rollout_batch_size,
            n_samples_per_prompt=self.n_samples,
            over_sampling_batch_size=self.over_sampling_batch_size,
            global_batch_size=self.global_batch_size,
            technical_failure_limit=self.max_consecutive_failed_groups,
            loop_state_source=state.source,
            submitted_group_count=state.submitted,
            wave_count=wave_count,
            accepted_group_count=accepted,
            train_group_count=train,
            fallback_group_count=counts[C.OUTCOME_FALLBACK],
            technical_group_drop_count=counts[C.OUTCOME_DROPPED_TECHNICAL],
            zero_std_group_drop_count=counts[C.OUTCOME_DROPPED_ZERO_STD],
            zero_std_group_count=zero_std_seen,
            zero_std_all_pass_group_count=zero_std_causes[ZERO_STD_ALL_PASS],
            zero_std_all_fail_group_count=zero_std_causes[ZERO_STD_ALL_FAIL],
            zero_std_other_group_count=zero_std_causes[ZERO_STD_OTHER],
            surplus_group_count=counts[C.OUTCOME_SURPLUS],
            aborted_group_count=state.submitted - accepted,
            accepted_sample_count=accepted_samples,
            train_sample_count=train_samples,
            scorable_rollout_count=all_stats.scorable,
            technical_group_drop_rate=_ratio(counts[C.OUTCOME_DROPPED_TECHNICAL], accepted),
            zero_std_group_drop_rate=_ratio(counts[C.OUTCOME_DROPPED_ZERO_STD], accepted),
            zero_advantage_train_fraction=_ratio(counts[C.OUTCOME_FALLBACK], train),
            wasted_sample_fraction=_ratio(accepted_samples - train_samples, accepted_samples),
            success_rate=all_stats.rate,
            reward_mean=all_stats.mean,
            train_success_rate=train_stats.rate,
            train_reward_mean=train_stats.mean,
            consecutive_technical_failures=state.streak,
            max_consecutive_technical_failures=state.max_streak,
            remaining_min=min((row.remaining_before for row in rows if row.remaining_before is not None), default=None),
            optimizer_update_count=_ratio(train_samples, self.global_batch_size or 0),
            generation_stats_source="all_samples_hook" if stats is not None else "ledger",
            all_samples_group_count=all_groups,
            failed_check_counts=dict(failed_checks),
            generated_token_count=generated,
            train_token_count=train_tokens,
            trained_token_count=tokens[C.OUTCOME_TRAINED],
            fallback_token_count=tokens[C.OUTCOME_FALLBACK],
            dropped_technical_token_count=tokens[C.OUTCOME_DROPPED_TECHNICAL],
            dropped_zero_std_token_count=tokens[C.OUTCOME_DROPPED_ZERO_STD],
            surplus_token_count=tokens[C.OUTCOME_SURPLUS],
            wasted_token_fraction=1.0 - train_tokens / generated if generated else None,
            filter_seconds=state.hook_seconds,
            first_wave_fill_seconds=fill,
            extra_wave_seconds=extra,
            predicted_second_wave_probability=predicted_second_wave,
            total_token_count=live.total if live is not None else None,
            aborted_token_count=live.aborted if live is not None else None,
            total_wasted_token_fraction=1.0 - train_tokens / live.total if live is not None and live.total else None,
            tokens_per_informative_group=live.total / informative if live is not None and informative else None,
            **train_bias_fields(train_tokens=train_tokens, train_rollouts=train_samples, judged_tokens=generated,
                                judged_rollouts=accepted_samples, live=live),
            **self._unequal_size_fields(rows),
            decisions=rows,
        )
        if state.fully_async:
            fields.update(self._fully_async_fields(state, aborted_groups, rows))
        parts: list[RecordPart] = [fields]
        if self.prompts is not None and keyed is not None:  # reads the step's token counts
            parts.append(self.prompts.step_fields(state.rollout_id, rows, generated_token_count=generated,
                                                  sources={source for _, source in keyed}))
        return StepDraft(state.rollout_id, *parts)

    def _unequal_size_fields(self, rows: list[DecisionRow]) -> dict[str, int | None]:
        """``unequal_size_group_count`` and its train-batch part (:mod:`~shopsim_metrics.step.group_sizes`)."""
        unequal = unequal_size_rows(rows, self.n_samples)
        if unequal is None:
            return {"unequal_size_group_count": None, "unequal_size_train_group_count": None}
        return {"unequal_size_group_count": len(unequal), "unequal_size_train_group_count": sum(
            1 for row in unequal if row.outcome in (C.OUTCOME_TRAINED, C.OUTCOME_FALLBACK))}

    def _fully_async_fields(self, state: _OpenStep, aborted_groups: int | None,
                            rows: list[DecisionRow]) -> dict[str, Any]:
        """The fields of a fully-async step: no waves, no ``remaining`` (null, not 0); carried groups and lag
        (the group mean, and the mean weighted by each group's ``response_tokens``: the lag of the tokens the
        gradient is made of; null when the versioned groups hold no token)."""
        taken = [j for j in state.judged if j.outcome in (C.OUTCOME_TRAINED, C.OUTCOME_FALLBACK)]
        newest = self._newest_version
        versioned = [(j, row.response_tokens) for j, row in zip(state.judged, rows)
                     if j.outcome in (C.OUTCOME_TRAINED, C.OUTCOME_FALLBACK) and j.weight_version is not None
                     and newest is not None]
        lags = [newest - j.weight_version for j, _ in versioned]
        tokens = [n for _, n in versioned]
        return {
            **dict.fromkeys(C.NULL_ON_FULLY_ASYNC),
            "aborted_group_count": aborted_groups,
            "carried_group_count": sum(1 for j in taken if j.carried),
            "policy_version_lag_mean": sum(lags) / len(lags) if lags else None,
            "policy_version_lag_max": max(lags) if lags else None,
            "policy_version_lag_token_mean": _ratio(sum(lag * n for lag, n in zip(lags, tokens)), sum(tokens)),
        }

    def _take_waves(self, step: int) -> tuple[list[int] | None, float | None]:
        """The wave sizes served for ``step`` (None: not reported) and the first one's predicted P(another wave)
        (None: not sized), forgetting those of any earlier step."""
        sizes, predicted = self._wave_sizes.get(step), self._first_wave_predictions.get(step)
        for waves in (self._wave_sizes, self._first_wave_predictions):
            for key in [key for key in waves if key <= step]:
                del waves[key]
        return sizes, predicted

    def _wave_seconds(
        self, rows: list[DecisionRow], filled_at: int | None, wave_count: int
    ) -> tuple[float | None, float]:
        """``first_wave_fill_seconds`` and ``extra_wave_seconds`` from the ledger's clock readings.

        Wave 1 ends at the judgement that filled the train batch when only wave 1 was open, else at
        the last judgement made while only wave 1 was open. Wave 2 was triggered by the first drop
        that took ``remaining`` below ``rollout_batch_size`` while only wave 1 was open (slime
        opens the next wave at the following wait); the extra waves last from it to the step's last
        judgement.
        """
        if not rows:
            return None, 0.0
        first_wave = [row for row in rows if row.waves_open <= 1]
        if filled_at is not None and rows[filled_at].waves_open <= 1:
            fill = rows[filled_at].judged_at
        else:
            fill = first_wave[-1].judged_at if first_wave else 0.0
        if wave_count <= 1:
            return fill, 0.0
        trigger = next(
            (row for row in first_wave if row.outcome in _DROPS and row.remaining_before is not None
             and row.remaining_before - 1 < self.rollout_batch_size),
            first_wave[-1] if first_wave else rows[0],
        )
        return fill, rows[-1].judged_at - trigger.judged_at


_DROPS = (C.OUTCOME_DROPPED_TECHNICAL, C.OUTCOME_DROPPED_ZERO_STD)


def train_bias_fields(*, train_tokens: int, train_rollouts: int, judged_tokens: int, judged_rollouts: int,
                      live: StepTokens | None) -> dict[str, Any]:
    """The bias of what trains: mean response lengths (tokens per unique rollout) and ``length_bias``.

    The train batch's and every judged group's lengths come from the ledger. Every rollout the step
    started is each judged rollout plus each rollout the sample hook saw that no judged group holds
    (``live``; None: the hook is not wired, and those fields stay None): the aborted ones at their
    partial length, so that mean is a lower bound while any rollout was aborted, and ``length_bias``
    (train mean / started mean) an upper bound of the batch's bias.

    Example:
        >>> live = StepTokens(total=1000, aborted=500, unjudged_rollouts=2, unjudged_length=500,
        ...                   aborted_rollouts=1, aborted_length=300)
        >>> f = train_bias_fields(train_tokens=200, train_rollouts=2, judged_tokens=500, judged_rollouts=3, live=live)
        >>> f["train_response_length_mean"], f["started_rollout_count"], f["started_response_length_mean"]
        (100.0, 5, 200.0)
        >>> f["aborted_response_length_mean"], f["length_bias"]
        (300.0, 0.5)
        >>> train_bias_fields(train_tokens=200, train_rollouts=2, judged_tokens=500, judged_rollouts=3,
        ...                   live=None)["length_bias"] is None
        True
    """
    train_mean = _ratio(train_tokens, train_rollouts)
    fields: dict[str, Any] = {
        "train_response_length_mean": train_mean,
        "accepted_response_length_mean": _ratio(judged_tokens, judged_rollouts),
        "started_rollout_count": None,
        "started_response_length_mean": None,
        "aborted_rollout_count": None,
        "aborted_response_length_mean": None,
        "length_bias": None,
    }
    if live is None:
        return fields
    started = judged_rollouts + live.unjudged_rollouts
    started_mean = _ratio(judged_tokens + live.unjudged_length, started)
    fields.update(
        started_rollout_count=started,
        started_response_length_mean=started_mean,
        aborted_rollout_count=live.aborted_rollouts,
        aborted_response_length_mean=_ratio(live.aborted_length, live.aborted_rollouts),
        length_bias=train_mean / started_mean if train_mean is not None and started_mean else None,
    )
    return fields


def _ratio(numerator: float, denominator: float) -> float | None:
    return numerator / denominator if denominator else None
