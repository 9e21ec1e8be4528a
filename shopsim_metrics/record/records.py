"""Per-step records and ledger rows: plain dataclasses that round-trip through JSON.

A :class:`StepRecord` is what one rollout step leaves behind: every per-step field of the metrics
contract, the identity keys, the knobs in force and the decision ledger. Values that do not exist
(a ratio over zero groups) are ``None``, never NaN. ``to_dict`` gives JSON-native data whatever the
fields hold (numpy / torch scalars unwrapped, non-finite numbers ``None``, odd values stringified;
see :mod:`shopsim_metrics.record.json_values`).

Example:
    >>> row = DecisionRow(order=1, waves_open=1, group_index=0, outcome="trained",
    ...                   reason=None, remaining_before=32, unique_rollouts=8)
    >>> rec = StepRecord(rollout_id=0, decisions=[row])
    >>> StepRecord.from_dict(rec.to_dict()) == rec
    True
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

from shopsim_metrics.record.json_values import json_native, json_native_fields

COUNT, RATIO, STREAK, EXTRA, COST, PROMPT_VALUE, ZERO_STD_CAUSE, PROMPT_SKIP, FULLY_ASYNC, TRAIN_BIAS, AGENT = (
    "count", "ratio", "streak", "extra", "cost", "prompt_value", "zero_std_cause", "prompt_skip", "fully_async",
    "train_bias", "agent")
"""The contract's tables of per-step fields (``contract.COUNT_FIELDS`` ... are derived from :class:`StepRecord`)."""

RECORD_ONLY = {"record_only": True}
"""Metadata of a ledger field that the record keeps but the W&B decisions table does not show."""
ABSENT_WHEN_NONE = {"absent_when_none": True}
"""Metadata of a ledger field left out of the row's dict when None (added later: older rows stay as they were)."""


def per_step(table: str, default: Any) -> Any:
    """A :class:`StepRecord` field that is a per-step W&B scalar of the contract table ``table``."""
    return field(default=default, metadata={"table": table})


def step_fields(table: str) -> tuple[str, ...]:
    """The names of the :class:`StepRecord` fields of one contract table, in declaration order.

    Example:
        >>> step_fields(STREAK)
        ('consecutive_technical_failures', 'max_consecutive_technical_failures', 'remaining_min', 'optimizer_update_count')
    """
    return tuple(f.name for f in fields(StepRecord) if f.metadata.get("table") == table)



@dataclass
class DecisionRow:
    """One judged group: what slime did with it and why (a row of the decision ledger)."""

    order: int  # judgement order within the step, from 1
    waves_open: int | None  # waves submitted so far in the step at this judgement (None: the fully-async path has no waves)
    group_index: int | None  # Sample.group_index (or index of the first sample) of the group
    outcome: str  # one of contract.OUTCOMES
    reason: str | None  # DynamicFilterOutput.reason
    remaining_before: int | None  # slime's remaining_batch_size before the decision (None: fully-async path)
    unique_rollouts: int  # unique rollouts after de-duplication by rollout_id
    reward_min: float | None = None  # over scorable unique rollouts; None when there are none
    reward_max: float | None = None
    reward_mean: float | None = None
    success_count: int | None = None
    failed_check: str | None = None  # one of contract.FAILED_CHECKS for technical groups
    # in the record only, not columns of the W&B decisions table
    scorable_rollouts: int = field(default=0, metadata=RECORD_ONLY)  # unique rollouts whose reward is a finite number
    reward_sum: float = field(default=0.0, metadata=RECORD_ONLY)  # sum over scorable rollouts (so step means can be recomputed)
    # cost
    response_tokens: int = 0  # response tokens of the group (every segment of every unique rollout)
    judged_at: float | None = None  # seconds since the step's first judgement (monotonic clock)
    # prompt value over time
    prompt_key: str | None = None  # the group's prompt (shopsim_metrics.judging.prompt_keys); None: no key
    # what broke, as the generate function left it (metadata shopsim_failure_cause)
    technical_cause: str | None = field(default=None, metadata=ABSENT_WHEN_NONE)

    def to_dict(self) -> dict[str, Any]:
        names = tuple(name for name in _ROW_FIELDS if name not in OPTIONAL_ROW_FIELDS or getattr(self, name) is not None)
        return json_native_fields(self, names)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "DecisionRow":
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})


@dataclass(frozen=True)
class StepRecord:
    """Everything recorded for one rollout step (the fields of docs §3.3).

    Frozen: a record is built once, from every contributor's part
    (:class:`~shopsim_metrics.step.draft.StepDraft`), and never edited afterwards.
    """

    rollout_id: int
    terminated: bool = per_step(EXTRA, False)
    # knobs in force for the step
    rollout_batch_size: int | None = None
    n_samples_per_prompt: int | None = None
    over_sampling_batch_size: int | None = None
    global_batch_size: int | None = None
    technical_failure_limit: int | None = per_step(EXTRA, None)
    technical_failure_warn_at: int | None = per_step(EXTRA, None)  # the streak that raises the step's WARN (None: alerts off)
    loop_state_source: str | None = None  # "slime", "miles", "mirror", "fully_async", or a test/simulated loop's name
    # who wrote the record, and when among the run's writes (the readers' order: process generation, then start,
    # then sequence; a process that resumed at s supersedes the records of steps >= s of every process before it)
    run_id: str | None = None  # the run's identity: made by its first process, kept by every resume
    process_started_at: float | None = None  # Unix time the writing process's monitor started
    process_start_rollout_id: int | None = None  # the step the writing process started at (slime's start_rollout_id)
    process_generation: int | None = None  # 0 for the run's first process; a resumed one: 1 + the highest it knew of
    record_sequence: int | None = None  # 1, 2, ... per writing process, in the order its records were emitted
    # counts (submitted_group_count, wave_count: None on the fully-async path, which has no waves)
    submitted_group_count: int | None = per_step(COUNT, 0)
    wave_count: int | None = per_step(COUNT, 0)
    accepted_group_count: int = per_step(COUNT, 0)
    train_group_count: int = per_step(COUNT, 0)
    fallback_group_count: int = per_step(COUNT, 0)
    technical_group_drop_count: int = per_step(COUNT, 0)
    zero_std_group_drop_count: int = per_step(COUNT, 0)
    zero_std_group_count: int = per_step(COUNT, 0)
    zero_std_all_pass_group_count: int = per_step(ZERO_STD_CAUSE, 0)  # why zero-std: every scorable rollout a success
    zero_std_all_fail_group_count: int = per_step(ZERO_STD_CAUSE, 0)  # ... no success
    zero_std_other_group_count: int = per_step(ZERO_STD_CAUSE, 0)  # ... neither (the three add up to zero_std_group_count)
    surplus_group_count: int = per_step(COUNT, 0)
    aborted_group_count: int | None = per_step(COUNT, 0)  # fully-async: groups put back in the buffer (None: unknown)
    accepted_sample_count: int = per_step(EXTRA, 0)
    train_sample_count: int = per_step(EXTRA, 0)
    scorable_rollout_count: int = per_step(EXTRA, 0)
    # ratios (None when the denominator is 0)
    technical_group_drop_rate: float | None = per_step(RATIO, None)
    zero_std_group_drop_rate: float | None = per_step(RATIO, None)
    zero_advantage_train_fraction: float | None = per_step(RATIO, None)
    wasted_sample_fraction: float | None = per_step(RATIO, None)
    success_rate: float | None = per_step(RATIO, None)
    reward_mean: float | None = per_step(RATIO, None)
    train_success_rate: float | None = per_step(RATIO, None)
    train_reward_mean: float | None = per_step(RATIO, None)
    # streak and loop state
    consecutive_technical_failures: int = per_step(STREAK, 0)
    max_consecutive_technical_failures: int = per_step(STREAK, 0)
    remaining_min: int | None = per_step(STREAK, None)
    optimizer_update_count: float | None = per_step(STREAK, None)
    # where success_rate / reward_mean came from: "all_samples_hook" or "ledger"
    generation_stats_source: str | None = None
    all_samples_group_count: int | None = None  # groups handed to the all-samples hook
    reconcile_mismatch_count: int | None = per_step(EXTRA, None)  # set by the log function (None: not reconciled)
    # adaptive waves: P(another wave) the step's first wave was sized with (None: fixed waves, or nothing known yet)
    predicted_second_wave_probability: float | None = per_step(EXTRA, None)
    # judged groups whose unique rollouts (fan-out folded by rollout_id) are not n_samples_per_prompt (None: n unknown)
    unequal_size_group_count: int | None = per_step(EXTRA, None)
    unequal_size_train_group_count: int | None = per_step(EXTRA, None)  # of those, in the train batch
    slime_drop_counts: dict[str, int] | None = None  # slime's own drop_<reason> counters
    failed_check_counts: dict[str, int] = field(default_factory=dict)
    # the alerts raised in the step, as sent to W&B: {"level", "title", "text"} each, oldest first
    alerts: list[dict[str, str]] = field(default_factory=list)
    # cost: tokens (response_length) per outcome, and time
    generated_token_count: int = per_step(COST, 0)
    train_token_count: int = per_step(COST, 0)
    trained_token_count: int = per_step(COST, 0)
    fallback_token_count: int = per_step(COST, 0)
    dropped_technical_token_count: int = per_step(COST, 0)
    dropped_zero_std_token_count: int = per_step(COST, 0)
    surplus_token_count: int = per_step(COST, 0)
    wasted_token_fraction: float | None = per_step(COST, None)
    rollout_seconds: float | None = per_step(COST, None)
    filter_seconds: float = per_step(COST, 0.0)
    filter_time_fraction: float | None = per_step(COST, None)
    first_wave_fill_seconds: float | None = per_step(COST, None)
    extra_wave_seconds: float | None = per_step(COST, None)
    # every generated token, as the sample hook saw them (None: the hook is not wired, never guessed)
    total_token_count: int | None = per_step(COST, None)  # every response token generated in the step
    aborted_token_count: int | None = per_step(COST, None)  # of those, tokens of rollouts whose group was not judged in the step
    total_wasted_token_fraction: float | None = per_step(COST, None)  # 1 - train_token_count / total_token_count
    tokens_per_informative_group: float | None = per_step(COST, None)  # total / trained groups with spread: the headline cost
    # the bias of what trains: mean response length (tokens per unique rollout) of the train batch, of every judged
    # group, and of every rollout the step started (judged, or seen unjudged by the sample hook; None: not wired)
    train_response_length_mean: float | None = per_step(TRAIN_BIAS, None)  # train_token_count / train_sample_count
    accepted_response_length_mean: float | None = per_step(TRAIN_BIAS, None)  # generated_token_count / accepted_sample_count
    started_rollout_count: int | None = per_step(TRAIN_BIAS, None)  # judged unique rollouts + unjudged ones the hook saw
    started_response_length_mean: float | None = per_step(TRAIN_BIAS, None)  # a lower bound while aborted rollouts count
    aborted_rollout_count: int | None = per_step(TRAIN_BIAS, None)  # unjudged rollouts aborted after their first token
    aborted_response_length_mean: float | None = per_step(TRAIN_BIAS, None)  # their partial lengths: a lower bound
    length_bias: float | None = per_step(TRAIN_BIAS, None)  # train_response_length_mean / started_response_length_mean
    # prompt value over time (None: not tracked)
    prompt_key_source: str | None = None  # metadata | prompt_hash | mixed | none (prompt_keys.KEY_SOURCES)
    prompt_history_limit: int | None = None  # shopsim_prompt_history_limit in force
    revisit_group_count: int | None = per_step(PROMPT_VALUE, None)
    repeat_zero_std_group_count: int | None = per_step(PROMPT_VALUE, None)
    zero_std_persistence: float | None = per_step(PROMPT_VALUE, None)
    skippable_group_count: int | None = per_step(PROMPT_VALUE, None)
    skippable_spread_group_count: int | None = per_step(PROMPT_VALUE, None)
    skippable_token_fraction: float | None = per_step(PROMPT_VALUE, None)
    tracked_prompt_count: int | None = per_step(PROMPT_VALUE, None)
    prompt_history_partial: bool | None = per_step(PROMPT_VALUE, None)  # resumed without a record of every earlier step
    # skipping prompts before generation (None, and absent from to_dict: a run that does not skip)
    skipped_prompt_count: int | None = per_step(PROMPT_SKIP, None)  # prompts drawn for the step's waves and skipped
    skipped_for_cost_count: int | None = per_step(PROMPT_SKIP, None)  # predictive: of those, skipped for their token cost
    skip_p_easy: float | None = per_step(PROMPT_SKIP, None)  # the rule's p for all-pass prompts, for the step's draws
    skip_p_hard: float | None = per_step(PROMPT_SKIP, None)  # the rule's p for all-fail (and other zero-std) prompts
    skipped_then_generated_group_count: int | None = per_step(PROMPT_SKIP, None)  # judged, skipped since last generated
    skipped_then_spread_group_count: int | None = per_step(PROMPT_SKIP, None)  # of those, with spread: the signal delayed
    skipped_then_spread_rate: float | None = per_step(PROMPT_SKIP, None)  # spread / generated among them
    skip_predicted_group_count: int | None = per_step(PROMPT_SKIP, None)  # predictive: judged groups it predicted
    skip_predicted_zero_std_mean: float | None = per_step(PROMPT_SKIP, None)  # their mean predicted P(zero-std)
    skip_realised_zero_std_rate: float | None = per_step(PROMPT_SKIP, None)  # the share of them that were zero-std
    skip_brier_score: float | None = per_step(PROMPT_SKIP, None)  # mean (predicted - realised)^2 over them
    skip_probe_count: int | None = per_step(PROMPT_SKIP, None)  # predictive: draws it would skip, served as probes
    skip_cap: float | None = per_step(PROMPT_SKIP, None)  # predictive: largest chance of spread a skipped draw may have
    skip_lost_signal_estimate: float | None = per_step(PROMPT_SKIP, None)  # predictive: the guard's estimate, the run so far
    skip_max_lost_signal: float | None = per_step(PROMPT_SKIP, None)  # predictive: the estimate's limit in force (a setting)
    skipped_prompts: list[dict[str, Any]] | None = None  # rows with contract.SKIPPED_PROMPT_COLUMNS
    # slime's fully-async path (None, and absent from to_dict: a synchronous step)
    carried_group_count: int | None = per_step(FULLY_ASYNC, None)  # trained groups drawn before the step began
    policy_version_lag_mean: float | None = per_step(FULLY_ASYNC, None)  # newest weight version - trained group's oldest
    policy_version_lag_max: int | None = per_step(FULLY_ASYNC, None)  # the largest of those lags
    policy_version_lag_token_mean: float | None = per_step(FULLY_ASYNC, None)  # those lags weighted by the groups' tokens
    # agent episodes (None, and absent from to_dict: a step in which no episode shows a turn structure)
    observation_token_count: int | None = per_step(AGENT, None)  # the environment's tokens (loss_mask 0), aborted incl.
    observation_token_fraction: float | None = per_step(AGENT, None)  # observation / (observation + total_token_count)
    episode_count: int | None = per_step(AGENT, None)  # episodes (samples) the sample hook saw start in the step
    turns_per_episode_mean: float | None = per_step(AGENT, None)
    turns_per_episode_max: int | None = per_step(AGENT, None)
    turn_count_source: str | None = None  # "metadata" (round_number), "loss_mask" (runs of 1s) or "mixed"
    environment_seconds: float | None = per_step(AGENT, None)  # sum of the episodes' non_generation_time
    environment_seconds_per_episode: float | None = per_step(AGENT, None)
    environment_time_fraction: float | None = per_step(AGENT, None)  # environment_seconds_per_episode / rollout_seconds
    truncated_episode_fraction: float | None = per_step(AGENT, None)  # episodes with status truncated / episode_count
    # technical groups by the cause their generate function left (None, and absent: no technical group left one)
    technical_cause_counts: dict[str, int] | None = None
    # who counted total_token_count when not slime's sample hook (None, and absent: the sample hook, or nothing counted):
    # "generate_function" in miles (shopsimrl.miles_generate: miles has no sample hook)
    token_count_source: str | None = None
    # the prompts table on the steps it is due: for W&B only, not part of the record (JSONL, equality)
    prompt_table: list[list[Any]] | None = field(default=None, compare=False, repr=False)
    decisions: list[DecisionRow] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        out = json_native_fields(self, self._field_names())
        out["decisions"] = [_row_dict(row) for row in _rows(self.decisions)]
        return out

    def _field_names(self) -> tuple[str, ...]:
        """The record's fields; the skip fields only when one is set (a run that skips), the fully-async fields
        only on that path, the agent fields only in a step with agent episodes, the technical causes only when
        one was left, the token counter only when it is not slime's sample hook, so other runs' records stay as
        they were."""
        hidden = [group for group in (_SKIP_FIELDS, _FULLY_ASYNC_FIELDS, _AGENT_FIELDS, _CAUSE_FIELDS, _TOKEN_SOURCE_FIELDS)
                  if not any(getattr(self, name, None) is not None for name in group)]
        if not hidden:
            return _STEP_FIELDS
        return tuple(name for name in _STEP_FIELDS if not any(name in group for group in hidden))

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "StepRecord":
        known = {f.name for f in fields(cls)}
        kwargs = {k: v for k, v in data.items() if k in known and k not in ("decisions", "prompt_table")}
        rows = [DecisionRow.from_dict(r) for r in data.get("decisions", [])]
        return cls(**kwargs, decisions=rows)


_ROW_FIELDS = tuple(f.name for f in fields(DecisionRow))
OPTIONAL_ROW_FIELDS = frozenset(f.name for f in fields(DecisionRow) if f.metadata.get("absent_when_none"))
"""Ledger fields a row's dict holds only when set (``technical_cause``)."""
_STEP_FIELDS = tuple(f.name for f in fields(StepRecord) if f.name not in ("decisions", "prompt_table"))
_SKIP_FIELDS = (*step_fields(PROMPT_SKIP), "skipped_prompts")
_FULLY_ASYNC_FIELDS = step_fields(FULLY_ASYNC)
_AGENT_FIELDS = (*step_fields(AGENT), "turn_count_source")
_CAUSE_FIELDS = ("technical_cause_counts",)
_TOKEN_SOURCE_FIELDS = ("token_count_source",)


def _rows(decisions: Any) -> list[Any]:
    """The ledger rows as a list, whatever container (or non-container) the field holds."""
    try:
        return list(decisions)
    except Exception:  # noqa: BLE001 - an unreadable ledger still leaves the step its record
        return [] if decisions is None else [decisions]


def _row_dict(row: Any) -> Any:
    return row.to_dict() if isinstance(row, DecisionRow) else json_native(row)
