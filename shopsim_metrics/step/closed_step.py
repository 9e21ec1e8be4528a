"""A closed step as the accountant hands it over, and the record fields its facts make.

When a step closes, the :class:`~shopsim_metrics.step.accounting.StepAccountant` has done its job: every
judged group has its outcome and its ledger row, the sample hook's tokens are taken, the prompt tracker has
read the step's groups. It hands over a :class:`ClosedStep`: those facts, and nothing computed from them.
:func:`closed_step_fields` then makes the record's counts, rates, costs, streak and wave fields from them,
in one place; the :class:`~shopsim_metrics.step.recorder.StepRecorder` is its one caller.

A closed step stays open to two changes until it is emitted: its number (slime's log function renumbers a
step the loop could not number) and the project's own time (``hook_seconds``: a hook call after the close).

Example:
    >>> from shopsim_metrics.judging.group_judgement import GroupJudgement
    >>> from shopsim_metrics.step.accounting import StepAccountant
    >>> accountant = StepAccountant(StepKnobs(rollout_batch_size=1, over_sampling_batch_size=2))
    >>> accountant.judge(GroupJudgement("zero_std", None, 0, 2, (0.0, 0.0)), step=0, remaining=2)
    'dropped_zero_std'
    >>> fields = closed_step_fields(accountant.close_step())
    >>> fields["zero_std_group_drop_count"], fields["wave_count"], fields["aborted_group_count"]
    (1, 1, 1)
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from shopsim_metrics.judging.group_judgement import ZERO_STD, GroupJudgement, finite_mean
from shopsim_metrics.judging.verdicts import ZERO_STD_ALL_FAIL, ZERO_STD_ALL_PASS, ZERO_STD_OTHER, verdict_of
from shopsim_metrics.record import contract as C
from shopsim_metrics.record.owners import CLOSED_STEP, PROMPTS
from shopsim_metrics.step.draft import RecordPart, StepDraft
from shopsim_metrics.step.generated_tokens import StepTokens
from shopsim_metrics.step.group_sizes import unequal_size_rows
from shopsim_metrics.record.records import DecisionRow

TRAIN_OUTCOMES = (C.OUTCOME_TRAINED, C.OUTCOME_FALLBACK)
"""The outcomes of the groups that enter the train batch."""
DROP_OUTCOMES = (C.OUTCOME_DROPPED_TECHNICAL, C.OUTCOME_DROPPED_ZERO_STD)
"""The outcomes of the groups slime drops."""


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


@dataclass(frozen=True)
class StepKnobs:
    """slime's knobs every record repeats (validated by the settings: over >= rollout batch >= 1)."""

    rollout_batch_size: int
    over_sampling_batch_size: int
    n_samples_per_prompt: int | None = None
    global_batch_size: int | None = None
    max_consecutive_failed_groups: int = 8


@dataclass(slots=True)
class JudgedGroup:
    """One judged group of a step, as the filter saw it (its ledger row is built at the close)."""

    judgement: GroupJudgement
    outcome: str
    remaining_before: int | None  # remaining_batch_size before the judgement (None: fully-async, no remaining)
    submitted: int  # groups submitted so far in the step
    group: Any
    clock: float  # the accountant's clock at the judgement
    carried: bool = False  # fully-async: the group was drawn before its step began
    weight_version: int | None = None  # fully-async: the oldest policy version that generated the group


@dataclass
class ClosedStep:
    """What the accountant knows of a step: gathered judgement by judgement while the step is open, completed
    (its ledger, waves, tokens) when it closes; :func:`closed_step_fields` then makes the record's fields."""

    rollout_id: int
    """slime's step number, or the accountant's count until slime's log function renumbers it."""
    knobs: StepKnobs
    source: str  # where the live loop facts came from (``loop_state_source``)
    counted: bool = False  # numbered by the accountant (the loop could not say): slime's log function renumbers it
    submitted: int = 0
    drops: int = 0  # groups dropped so far
    train_len: int = 0  # groups in the train batch so far
    judged: list[JudgedGroup] = field(default_factory=list)  # in judgement order
    rows: list[DecisionRow] = field(default_factory=list)  # the ledger, one row per judged group
    terminated: bool = False
    streak: int = 0  # the run's technical streak after the step's latest judgement
    max_streak: int = 0
    filled_at: int | None = None  # index of the row whose judgement filled the train batch
    hook_seconds: float = 0.0
    """The project's own time in the hooks for this step (grows until the step is emitted)."""
    fully_async: bool = False  # judged by the fully-async rollout function, which decided each outcome itself
    stats: GenerationStats | None = None  # over every completed group (all-samples hook); None: the ledger's
    all_groups: int | None = None  # groups the all-samples hook received
    aborted_groups: int | None = None  # fully-async: groups put back in the buffer during the step
    wave_sizes: list[int] | None = None  # the groups of each wave the data source served (None: not reported)
    predicted_second_wave: float | None = None  # P(another wave) as the first wave was sized (None: not sized)
    tokens: StepTokens | None = None  # every token the sample hook saw for the step (None: not wired)
    newest_version: int | None = None  # fully-async: the newest policy version any judged group reported
    prompt_part: dict[str, Any] | None = None  # the prompt tracker's fields (None: prompts not tracked)


def closed_step_fields(closed: ClosedStep) -> dict[str, Any]:
    """The record fields a closed step's facts make: counts per outcome, generation figures, costs, waves, streak."""
    knobs, rows = closed.knobs, closed.rows
    counts, samples, tokens = Counter(), Counter(), Counter()  # groups, unique rollouts, tokens per outcome
    failed_checks: Counter[str] = Counter()
    causes: Counter[str] = Counter()  # technical groups by the cause their generate function left
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
        if row.technical_cause:
            causes[row.technical_cause] += 1
    accepted = len(rows)
    train = counts[C.OUTCOME_TRAINED] + counts[C.OUTCOME_FALLBACK]
    accepted_samples = sum(samples.values())
    train_samples = samples[C.OUTCOME_TRAINED] + samples[C.OUTCOME_FALLBACK]
    ledger_stats = GenerationStats() if closed.stats is None else None  # the all-samples hook's figures come first
    train_stats = GenerationStats()
    for judged in closed.judged:
        if ledger_stats is not None:
            ledger_stats.add(judged.judgement)
        if judged.outcome in TRAIN_OUTCOMES:
            train_stats.add(judged.judgement)
    all_stats = closed.stats if closed.stats is not None else ledger_stats
    wave_count = (len(closed.wave_sizes) if closed.wave_sizes
                  else math.ceil(closed.submitted / knobs.over_sampling_batch_size))
    generated = sum(tokens.values())
    train_tokens = tokens[C.OUTCOME_TRAINED] + tokens[C.OUTCOME_FALLBACK]
    informative = counts[C.OUTCOME_TRAINED]  # trained groups with spread (fallback groups are zero-std)
    live = closed.tokens
    fill, extra = (None, None) if closed.fully_async else wave_seconds(rows, closed.filled_at, wave_count,
                                                                       knobs.rollout_batch_size)
    fields: dict[str, Any] = dict(
        terminated=closed.terminated,
        rollout_batch_size=knobs.rollout_batch_size,
        n_samples_per_prompt=knobs.n_samples_per_prompt,
        over_sampling_batch_size=knobs.over_sampling_batch_size,
        global_batch_size=knobs.global_batch_size,
        technical_failure_limit=knobs.max_consecutive_failed_groups,
        loop_state_source=closed.source,
        submitted_group_count=closed.submitted,
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
        aborted_group_count=closed.submitted - accepted,
        accepted_sample_count=accepted_samples,
        train_sample_count=train_samples,
        scorable_rollout_count=all_stats.scorable,
        technical_group_drop_rate=ratio(counts[C.OUTCOME_DROPPED_TECHNICAL], accepted),
        zero_std_group_drop_rate=ratio(counts[C.OUTCOME_DROPPED_ZERO_STD], accepted),
        zero_advantage_train_fraction=ratio(counts[C.OUTCOME_FALLBACK], train),
        wasted_sample_fraction=ratio(accepted_samples - train_samples, accepted_samples),
        success_rate=all_stats.rate,
        reward_mean=all_stats.mean,
        train_success_rate=train_stats.rate,
        train_reward_mean=train_stats.mean,
        consecutive_technical_failures=closed.streak,
        max_consecutive_technical_failures=closed.max_streak,
        remaining_min=min((row.remaining_before for row in rows if row.remaining_before is not None), default=None),
        optimizer_update_count=ratio(train_samples, knobs.global_batch_size or 0),
        generation_stats_source="all_samples_hook" if closed.stats is not None else "ledger",
        all_samples_group_count=closed.all_groups,
        failed_check_counts=dict(failed_checks),
        generated_token_count=generated,
        train_token_count=train_tokens,
        trained_token_count=tokens[C.OUTCOME_TRAINED],
        fallback_token_count=tokens[C.OUTCOME_FALLBACK],
        dropped_technical_token_count=tokens[C.OUTCOME_DROPPED_TECHNICAL],
        dropped_zero_std_token_count=tokens[C.OUTCOME_DROPPED_ZERO_STD],
        surplus_token_count=tokens[C.OUTCOME_SURPLUS],
        wasted_token_fraction=1.0 - train_tokens / generated if generated else None,
        filter_seconds=closed.hook_seconds,
        first_wave_fill_seconds=fill,
        extra_wave_seconds=extra,
        predicted_second_wave_probability=closed.predicted_second_wave,
        total_token_count=live.total if live is not None else None,
        aborted_token_count=live.aborted if live is not None else None,
        total_wasted_token_fraction=1.0 - train_tokens / live.total if live is not None and live.total else None,
        tokens_per_informative_group=live.total / informative if live is not None and informative else None,
        **train_bias_fields(train_tokens=train_tokens, train_rollouts=train_samples, judged_tokens=generated,
                            judged_rollouts=accepted_samples, live=live),
        **unequal_size_fields(rows, knobs.n_samples_per_prompt),
        **agent_fields(live),
        technical_cause_counts=top_causes(causes),
        token_count_source=live.source if live is not None else None,
        decisions=rows,
    )
    if closed.fully_async:
        fields.update(fully_async_fields(closed))
    return fields


def agent_fields(live: StepTokens | None) -> dict[str, Any]:
    """The agent fields of a step whose episodes show a turn structure (``live.episodes``); none otherwise.

    ``environment_time_fraction`` needs slime's rollout time: the recorder adds it (:func:`environment_time_fraction`).

    Example:
        >>> from shopsim_metrics.step.generated_tokens import EpisodeTally
        >>> tally = EpisodeTally(episodes=4, turns_total=10, turns_max=4, turns_from="loss_mask",
        ...                      environment_seconds=6.0, truncated=1)
        >>> f = agent_fields(StepTokens(total=300, aborted=0, observation=100, episodes=tally))
        >>> f["observation_token_fraction"], f["turns_per_episode_mean"], f["environment_seconds_per_episode"]
        (0.25, 2.5, 1.5)
        >>> agent_fields(StepTokens(total=300, aborted=0))   # single-turn: no agent field at all
        {}
    """
    if live is None or live.episodes is None:
        return {}
    tally = live.episodes
    return {
        "observation_token_count": live.observation,
        "observation_token_fraction": ratio(live.observation, live.observation + live.total),
        "episode_count": tally.episodes,
        "turns_per_episode_mean": tally.turns_mean,
        "turns_per_episode_max": tally.turns_max,
        "turn_count_source": tally.turns_from,
        "environment_seconds": tally.environment_seconds,
        "environment_seconds_per_episode": (tally.environment_seconds / tally.episodes
                                            if tally.environment_seconds is not None else None),
        "truncated_episode_fraction": tally.truncated / tally.episodes,
    }


def environment_time_fraction(per_episode: float | None, rollout_seconds: float | None) -> float | None:
    """The share of the step's rollout (wall) time a mean episode spent in the environment.

    Example:
        >>> environment_time_fraction(3.0, 12.0), environment_time_fraction(None, 12.0)
        (0.25, None)
    """
    return ratio(per_episode, rollout_seconds) if per_episode is not None and rollout_seconds else None


def top_causes(causes: Counter[str]) -> dict[str, int] | None:
    """The step's ``technical_cause_counts``: the :data:`~shopsim_metrics.record.contract.TECHNICAL_CAUSE_LIMIT` most
    frequent causes (ties by name), the rest summed under ``(other causes)``; None when no group left one.

    Example:
        >>> top_causes(Counter({"ToolTimeout: search": 7, "EnvError: cart": 1}))
        {'ToolTimeout: search': 7, 'EnvError: cart': 1}
        >>> top_causes(Counter()) is None
        True
    """
    if not causes:
        return None
    ranked = sorted(causes.items(), key=lambda item: (-item[1], item[0]))
    kept = dict(ranked[:C.TECHNICAL_CAUSE_LIMIT])
    rest = sum(count for _, count in ranked[C.TECHNICAL_CAUSE_LIMIT:])
    if rest:
        kept[C.OTHER_CAUSES] = kept.get(C.OTHER_CAUSES, 0) + rest
    return kept


def unequal_size_fields(rows: list[DecisionRow], n_samples: int | None) -> dict[str, int | None]:
    """``unequal_size_group_count`` and its train-batch part (:mod:`~shopsim_metrics.step.group_sizes`).

    Example:
        >>> unequal_size_fields([], None)
        {'unequal_size_group_count': None, 'unequal_size_train_group_count': None}
    """
    unequal = unequal_size_rows(rows, n_samples)
    if unequal is None:
        return {"unequal_size_group_count": None, "unequal_size_train_group_count": None}
    return {"unequal_size_group_count": len(unequal),
            "unequal_size_train_group_count": sum(1 for row in unequal if row.outcome in TRAIN_OUTCOMES)}


def fully_async_fields(closed: ClosedStep) -> dict[str, Any]:
    """The fields of a fully-async step: no waves, no ``remaining`` (null, not 0); carried groups and lag
    (the group mean, and the mean weighted by each group's ``response_tokens``: the lag of the tokens the
    gradient is made of; null when the versioned groups hold no token)."""
    taken = [j for j in closed.judged if j.outcome in TRAIN_OUTCOMES]
    newest = closed.newest_version
    versioned = [(j, row.response_tokens) for j, row in zip(closed.judged, closed.rows)
                 if j.outcome in TRAIN_OUTCOMES and j.weight_version is not None and newest is not None]
    lags = [newest - j.weight_version for j, _ in versioned]
    tokens = [n for _, n in versioned]
    return {
        **dict.fromkeys(C.NULL_ON_FULLY_ASYNC),
        "aborted_group_count": closed.aborted_groups,
        "carried_group_count": sum(1 for j in taken if j.carried),
        "policy_version_lag_mean": sum(lags) / len(lags) if lags else None,
        "policy_version_lag_max": max(lags) if lags else None,
        "policy_version_lag_token_mean": ratio(sum(lag * n for lag, n in zip(lags, tokens)), sum(tokens)),
    }


def wave_seconds(rows: list[DecisionRow], filled_at: int | None, wave_count: int,
                 rollout_batch_size: int) -> tuple[float | None, float]:
    """``first_wave_fill_seconds`` and ``extra_wave_seconds`` from the ledger's clock readings.

    Wave 1 ends at the judgement that filled the train batch when only wave 1 was open, else at
    the last judgement made while only wave 1 was open. Wave 2 was triggered by the first drop
    that took ``remaining`` below ``rollout_batch_size`` while only wave 1 was open (slime
    opens the next wave at the following wait); the extra waves last from it to the step's last
    judgement.

    Example:
        >>> wave_seconds([], None, 0, 4)
        (None, 0.0)
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
        (row for row in first_wave if row.outcome in DROP_OUTCOMES and row.remaining_before is not None
         and row.remaining_before - 1 < rollout_batch_size),
        first_wave[-1] if first_wave else rows[0],
    )
    return fill, rows[-1].judged_at - trigger.judged_at
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
    train_mean = ratio(train_tokens, train_rollouts)
    fields: dict[str, Any] = {
        "train_response_length_mean": train_mean,
        "accepted_response_length_mean": ratio(judged_tokens, judged_rollouts),
        "started_rollout_count": None,
        "started_response_length_mean": None,
        "aborted_rollout_count": None,
        "aborted_response_length_mean": None,
        "length_bias": None,
    }
    if live is None:
        return fields
    started = judged_rollouts + live.unjudged_rollouts
    started_mean = ratio(judged_tokens + live.unjudged_length, started)
    fields.update(
        started_rollout_count=started,
        started_response_length_mean=started_mean,
        aborted_rollout_count=live.aborted_rollouts,
        aborted_response_length_mean=ratio(live.aborted_length, live.aborted_rollouts),
        length_bias=train_mean / started_mean if train_mean is not None and started_mean else None,
    )
    return fields


def ratio(numerator: float, denominator: float) -> float | None:
    """``numerator / denominator``, None when the denominator is 0.

    Example:
        >>> ratio(1, 4), ratio(1, 0)
        (0.25, None)
    """
    return numerator / denominator if denominator else None


def step_draft(closed: ClosedStep) -> StepDraft:
    """The draft of a closed step's record: its facts' fields and the prompt tracker's (the monitor adds the rest).

    Example:
        >>> closed = ClosedStep(rollout_id=4, knobs=StepKnobs(rollout_batch_size=2, over_sampling_batch_size=2),
        ...                     source="mirror")
        >>> step_draft(closed).finish().rollout_id, step_draft(closed).value("accepted_group_count")
        (4, 0)
    """
    parts = [RecordPart(CLOSED_STEP, closed_step_fields(closed))]
    if closed.prompt_part is not None:
        parts.append(RecordPart(PROMPTS, closed.prompt_part))
    return StepDraft(closed.rollout_id, *parts)
