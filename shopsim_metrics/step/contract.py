"""The names every part of the project shares: outcomes, reasons, failed checks, per-step fields.

This module is the single source of truth for the names of docs/training_monitoring.md §3.3. The W&B sink,
the JSONL sink, the dashboards and `docs/training_monitoring.md` §3.3 all read their keys from here,
so metric keys stay bounded and every part computes the same thing.

Example:
    >>> wandb_key("success_rate")
    'rollout/shopsim/success_rate'
    >>> "dropped_technical" in OUTCOMES
    True
"""

from __future__ import annotations

from typing import Final

WANDB_PREFIX: Final = "rollout/shopsim/"
"""Every W&B key of the project lives under this prefix."""

WANDB_STEP_KEY: Final = "rollout/step"
"""slime's step metric: the project's keys are declared against it."""

# --- the hooks slime loads by dotted path ------------------------------------------------------
HOOKS_MODULE: Final = "shopsimrl.slime_runtime"
FILTER_PATH: Final = f"{HOOKS_MODULE}.fully_scored_group_filter"
ALL_SAMPLES_PATH: Final = f"{HOOKS_MODULE}.record_all_samples"
LOG_PATH: Final = f"{HOOKS_MODULE}.log_rollout_step"

# --- reasons (DynamicFilterOutput.reason, and so slime's drop_<reason> counters) ---------------
REASON_TECHNICAL: Final = "shopsim_unscored_technical_group"
REASON_ZERO_STD: Final = "shopsim_zero_std_group"
REASONS: Final = (REASON_TECHNICAL, REASON_ZERO_STD)
SLIME_DROP_METRIC_PREFIX: Final = "rollout/dynamic_filter/drop_"

# --- outcome of one judged group (exactly one) --------------------------------------------------
OUTCOME_TRAINED: Final = "trained"
OUTCOME_FALLBACK: Final = "fallback"
OUTCOME_DROPPED_TECHNICAL: Final = "dropped_technical"
OUTCOME_DROPPED_ZERO_STD: Final = "dropped_zero_std"
OUTCOME_SURPLUS: Final = "surplus"
OUTCOMES: Final = (
    OUTCOME_TRAINED,
    OUTCOME_FALLBACK,
    OUTCOME_DROPPED_TECHNICAL,
    OUTCOME_DROPPED_ZERO_STD,
    OUTCOME_SURPLUS,
)
ABORTED: Final = "aborted"
"""Submitted groups still generating when the step ended: never judged, never a ledger row."""

# --- the check that made a group technical (fixed set: bounded keys) ----------------------------
FAILED_CHECKS: Final = (
    "empty_group",  # the group holds no sample at all
    "too_few_rollouts",  # fewer unique rollouts than args.n_samples_per_prompt
    "status_failed",  # a sample's status is FAILED
    "status_aborted",  # a sample's status is ABORTED
    "reward_missing",  # every segment of a rollout has reward None
    "reward_not_numeric",  # a reward that is not a number (str, list, object, ...)
    "reward_not_finite",  # NaN or +-inf
    "reward_key_missing",  # a dict reward without args.reward_key
    "metadata_unscored",  # the environment flagged the episode unscored in its metadata
    "segments_disagree",  # segments of one rollout carry different rewards
    "status_unknown",  # a status that is not one of slime's five (e.g. "FAILED", None, 3)
    "metadata_invalid",  # metadata that is not a dict, or a flag that is not true/false/0/1
    "sample_unreadable",  # a sample (or the group) whose attributes raise when read
)

# --- per-step fields (W&B key = WANDB_PREFIX + name; JSONL key = name) --------------------------
COUNT_FIELDS: Final = (
    "submitted_group_count",
    "wave_count",
    "accepted_group_count",
    "train_group_count",
    "fallback_group_count",
    "technical_group_drop_count",
    "zero_std_group_drop_count",
    "zero_std_group_count",
    "surplus_group_count",
    "aborted_group_count",
)
RATIO_FIELDS: Final = (
    "technical_group_drop_rate",
    "zero_std_group_drop_rate",
    "zero_advantage_train_fraction",
    "wasted_sample_fraction",
    "success_rate",
    "reward_mean",
    "train_success_rate",
    "train_reward_mean",
)
STREAK_FIELDS: Final = (
    "consecutive_technical_failures",
    "max_consecutive_technical_failures",
    "remaining_min",
    "optimizer_update_count",
)
EXTRA_FIELDS: Final = (
    "accepted_sample_count",  # unique rollouts of accepted groups
    "train_sample_count",  # unique rollouts of the train batch
    "scorable_rollout_count",  # denominator of success_rate / reward_mean
    "technical_failure_limit",  # shopsim_max_consecutive_failed_groups in force
    "terminated",  # 1 when the step ended in termination (bool in JSONL)
)
STEP_FIELDS: Final = COUNT_FIELDS + RATIO_FIELDS + STREAK_FIELDS
"""The per-step table of the contract, in its order."""

# --- what dynamic sampling costs: tokens and time per step --------------------------------------
OUTCOME_TOKEN_FIELDS: Final = tuple(f"{outcome}_token_count" for outcome in OUTCOMES)
"""Response tokens of the groups of each outcome (``trained_token_count``, ...)."""
COST_FIELDS: Final = (
    "generated_token_count",  # tokens of every unique rollout of every judged group
    "train_token_count",  # the same over trained + fallback groups
    *OUTCOME_TOKEN_FIELDS,
    "wasted_token_fraction",  # 1 - train / generated (None when nothing was generated)
    "rollout_seconds",  # slime's rollout_time handed to the log function (None when unknown)
    "filter_seconds",  # the project's own time inside the three hooks during the step
    "filter_time_fraction",  # filter_seconds / rollout_seconds (None when rollout_seconds is unknown or 0)
    "first_wave_fill_seconds",  # first judgement -> the one that filled the batch (or wave 1's last)
    "extra_wave_seconds",  # judgement that triggered wave 2 -> the step's last judgement (0 with one wave)
)
"""The cost table of the contract ("What dynamic sampling costs"), in its order."""
# --- prompt value over time (per step) ------------------------------------------------------------
PROMPT_VALUE_FIELDS: Final = (
    "revisit_group_count",  # judged groups whose prompt had been judged before
    "repeat_zero_std_group_count",  # revisits zero-std now and at the previous visit
    "zero_std_persistence",  # repeat / skippable: P(zero-std now | zero-std last time)
    "skippable_group_count",  # revisits whose previous visit was zero-std
    "skippable_spread_group_count",  # skippable groups that had spread after all
    "skippable_token_fraction",  # tokens of repeat zero-std groups / generated_token_count
    "tracked_prompt_count",  # prompts held in the history at step end
    "prompt_history_partial",  # a resumed run found no record for some step before it (history and streak partial)
)
"""The prompt-value table of the contract ("Prompt value over time"), in its order."""

# --- skipping prompts before generation (per step; only in runs with shopsim_prompt_skip: greso) --------
PROMPT_SKIP_FIELDS: Final = (
    "skipped_prompt_count",  # prompts drawn for the step's waves and skipped without generating
    "skip_p_easy",  # the rule's p for all-pass prompts, in force for the step's draws
    "skip_p_hard",  # the rule's p for all-fail (and other zero-std) prompts
    "skip_saved_token_estimate",  # per skipped prompt: its tokens per visit, else the step's mean group tokens
    "skip_saved_token_fraction",  # saved estimate / (generated_token_count + saved estimate)
    "skipped_then_generated_group_count",  # judged groups whose prompt had been skipped since last generated
    "skipped_then_spread_group_count",  # of those, the groups with spread: the signal skipping delayed
    "skipped_then_spread_rate",  # spread / generated among them (None when none)
)
"""The skip table of the contract ("Skipping prompts before generation"), in its order."""
SKIPPED_PROMPT_COLUMNS: Final = ("prompt_key", "zero_std_run", "kind", "skip_probability", "group_index",
                                 "token_estimate")
"""Columns of the ``skipped_prompts`` rows (records file) and table (W&B ``rollout/shopsim/skipped_prompts``)."""

RECONCILE_FIELD: Final = "reconcile_mismatch_count"
"""Logged by the log function: drop counts that disagree with slime's own counters (0 = agree)."""

WANDB_STEP_FIELDS: Final = (STEP_FIELDS + EXTRA_FIELDS + (RECONCILE_FIELD,) + COST_FIELDS + PROMPT_VALUE_FIELDS
                             + PROMPT_SKIP_FIELDS)
"""Every per-step scalar the W&B sink logs under WANDB_PREFIX."""

# --- the per-group decision ledger --------------------------------------------------------------
LEDGER_COLUMNS: Final = (
    "order",
    "waves_open",
    "group_index",
    "outcome",
    "reason",
    "remaining_before",
    "unique_rollouts",
    "reward_min",
    "reward_max",
    "reward_mean",
    "success_count",
    "failed_check",
    # cost
    "response_tokens",  # the group's response tokens (every segment of every unique rollout)
    "judged_at",  # seconds since the step's first judgement (monotonic clock)
    # prompt value over time
    "prompt_key",  # the group's prompt key (metadata value, or "b2:" + hash of prompt and label)
)

# --- the local record (one JSON object per step in steps.jsonl) ---------------------------------
PROMPT_TABLE_COLUMNS: Final = ("prompt_key", "visits", "verdicts", "zero_std_run", "zero_std_visits", "tokens",
                               "wasted_tokens")
"""Columns of the prompts table (W&B ``rollout/shopsim/prompts``, ``shopsim-metrics prompts``)."""

STEPS_FILE_NAME: Final = "steps.jsonl"
RECORD_IDENTITY_KEYS: Final = ("rollout_id", "terminated", "decisions")


def wandb_key(name: str) -> str:
    """The W&B key of a per-step field: the one place the prefix is applied."""
    return WANDB_PREFIX + name


def slime_drop_metric(reason: str) -> str:
    """slime's own counter key for a drop reason, e.g. ``rollout/dynamic_filter/drop_<reason>``."""
    return SLIME_DROP_METRIC_PREFIX + reason
