"""The names every part of the project shares: outcomes, reasons, failed checks, per-step fields.

The names of docs §3.3, each declared once: outcomes, reasons and failed checks here, the per-step
fields and the ledger columns by :class:`~shopsim_metrics.record.records.StepRecord` and
:class:`~shopsim_metrics.record.records.DecisionRow` (the tables below are derived from them). The W&B sink,
the JSONL sink, the dashboards and docs §3.3 all read their keys from here,
so metric keys stay bounded and every part computes the same thing.

Example:
    >>> wandb_key("success_rate")
    'rollout/shopsim/success_rate'
    >>> "dropped_technical" in OUTCOMES
    True
"""

from __future__ import annotations

from dataclasses import fields
from typing import Final

from shopsim_metrics.judging import failure_cause
from shopsim_metrics.judging.group_judgement import SPREAD, TECHNICAL, ZERO_STD
from shopsim_metrics.record import records
from shopsim_metrics.record.records import DecisionRow, step_fields

WANDB_PREFIX: Final = "rollout/shopsim/"
"""Every W&B key of the project lives under this prefix."""

WANDB_STEP_KEY: Final = "rollout/step"
"""slime's step metric: the project's keys are declared against it."""

# --- the hooks slime loads by dotted path ------------------------------------------------------
HOOKS_MODULE: Final = "shopsimrl.slime_runtime"
FILTER_PATH: Final = f"{HOOKS_MODULE}.fully_scored_group_filter"
ALL_SAMPLES_PATH: Final = f"{HOOKS_MODULE}.record_all_samples"
LOG_PATH: Final = f"{HOOKS_MODULE}.log_rollout_step"
SAMPLE_HOOK_PATH: Final = f"{HOOKS_MODULE}.record_generated_sample"
"""slime's ``--rollout-sample-hook-path``: every generate call's tokens, aborted ones included."""
DATA_SOURCE_PATH: Final = "shopsimrl.data_source.PromptSkipDataSource"
"""slime's ``--data-source-path``: the data source that skips prompts and sizes waves (docs §3.6, §3.7)."""
ASYNC_ROLLOUT_PATH: Final = "shopsimrl.async_rollout.generate_rollout_fully_async"
"""slime's ``--rollout-function-path`` for the fully-async path: slime's worker, every finished group judged."""
SLIME_ASYNC_ROLLOUT_PATH: Final = "slime.rollout.fully_async_rollout.generate_rollout_fully_async"
"""slime's own fully-async rollout function: it calls neither the filter nor the all-samples hook."""
MILES_GENERATE_PATH: Final = "shopsimrl.miles_generate.count_generated_tokens"
"""miles' ``--custom-generate-function-path`` that counts every generated token (miles has no sample hook)."""

# --- reasons (DynamicFilterOutput.reason, and so slime's drop_<reason> counters) ---------------
REASON_TECHNICAL: Final = "shopsim_unscored_technical_group"
REASON_ZERO_STD: Final = "shopsim_zero_std_group"
REASON_OF_KIND: Final = {TECHNICAL: REASON_TECHNICAL, ZERO_STD: REASON_ZERO_STD, SPREAD: None}
"""The reason of each judgement kind (``judging.group_judgement``): a kept group has none."""
KIND_OF_REASON: Final = {reason: kind for kind, reason in REASON_OF_KIND.items()}
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
# declared once, with their types and defaults, by StepRecord; each table below is derived from it
COUNT_FIELDS: Final = step_fields(records.COUNT)
RATIO_FIELDS: Final = step_fields(records.RATIO)
STREAK_FIELDS: Final = step_fields(records.STREAK)
EXTRA_FIELDS: Final = step_fields(records.EXTRA)
"""Per-step scalars beyond the contract's table: sample counts, the limit in force, ``terminated`` (1 when
the step ended in termination; bool in JSONL) and ``reconcile_mismatch_count``."""
STEP_FIELDS: Final = COUNT_FIELDS + RATIO_FIELDS + STREAK_FIELDS
"""The per-step table of the contract, in its order."""

# --- what dynamic sampling costs: tokens and time per step --------------------------------------
OUTCOME_TOKEN_FIELDS: Final = tuple(f"{outcome}_token_count" for outcome in OUTCOMES)
"""Response tokens of the groups of each outcome (``trained_token_count``, ...)."""
COST_FIELDS: Final = step_fields(records.COST)
"""The cost table of the contract ("What dynamic sampling costs"), in its order."""
if not set(OUTCOME_TOKEN_FIELDS) <= set(COST_FIELDS):
    raise ImportError(f"StepRecord needs one cost field per outcome: {OUTCOME_TOKEN_FIELDS}")
# --- the bias of what trains (per step) -----------------------------------------------------------
TRAIN_BIAS_FIELDS: Final = step_fields(records.TRAIN_BIAS)
"""Mean response lengths of the train batch, of every judged group, of every rollout the step started and of
the aborted rollouts, and ``length_bias`` (docs §3.3, "The bias of what trains")."""

# --- prompt value over time (per step) ------------------------------------------------------------
PROMPT_VALUE_FIELDS: Final = step_fields(records.PROMPT_VALUE)
"""The prompt-value table of the contract ("Prompt value over time"), in its order."""

# --- why a group was zero-std (per step) -----------------------------------------------------------
ZERO_STD_CAUSE_FIELDS: Final = step_fields(records.ZERO_STD_CAUSE)
"""The contract's "Why a group was zero-std" table: too easy, too hard, or neither."""

# --- skipping prompts before generation (per step; only in runs with shopsim_prompt_skip: greso) --------
PROMPT_SKIP_FIELDS: Final = step_fields(records.PROMPT_SKIP)
"""The skip table of the contract ("Skipping prompts before generation"), in its order."""
SKIPPED_PROMPT_COLUMNS: Final = ("prompt_key", "zero_std_run", "kind", "skip_probability", "group_index")
"""Columns of the ``skipped_prompts`` rows (records file) and table (W&B ``rollout/shopsim/skipped_prompts``)."""

# --- slime's fully-async path (per step; only in records of that path) --------------------------
FULLY_ASYNC_FIELDS: Final = step_fields(records.FULLY_ASYNC)
"""The fully-async table of the contract: carried groups and the trained groups' policy-version lag."""
NULL_ON_FULLY_ASYNC: Final = ("submitted_group_count", "wave_count", "remaining_min", "first_wave_fill_seconds",
                              "extra_wave_seconds")
"""Per-step fields that do not exist on the fully-async path (no waves, no ``remaining``): null there, never 0."""
LOOP_FULLY_ASYNC: Final = "fully_async"
"""``loop_state_source`` of a step judged by :func:`shopsimrl.async_rollout.generate_rollout_fully_async`."""

# --- agent episodes (per step; only in steps where some episode shows a turn structure) -----------
AGENT_FIELDS: Final = step_fields(records.AGENT)
"""The agent table of the contract: the environment's tokens, episodes, turns, environment time, truncation."""
FAILURE_CAUSE_KEY: Final = failure_cause.FAILURE_CAUSE_KEY
"""The metadata key where a generate function leaves why an episode failed (``judging.failure_cause``)."""
TECHNICAL_CAUSE_LIMIT: Final = 5
"""``technical_cause_counts`` keeps this many causes, the most frequent; the rest are summed under OTHER_CAUSES."""
OTHER_CAUSES: Final = "(other causes)"

RECONCILE_FIELD: Final = "reconcile_mismatch_count"
"""Logged by the log function: drop counts that disagree with slime's own counters (0 = agree)."""

WANDB_STEP_FIELDS: Final = (STEP_FIELDS + EXTRA_FIELDS + COST_FIELDS + TRAIN_BIAS_FIELDS + PROMPT_VALUE_FIELDS
                             + ZERO_STD_CAUSE_FIELDS + PROMPT_SKIP_FIELDS + FULLY_ASYNC_FIELDS + AGENT_FIELDS)
"""Every per-step scalar field of the record the W&B sink logs under WANDB_PREFIX."""

# --- the alerts of a step as numbers on the timeline (derived from the record's ``alerts``) -------
ALERT_LEVEL_CODES: Final = {"INFO": 1, "WARN": 2, "ERROR": 3}
"""``alert_level`` of a step: the code of its highest alert (0: none; an unknown level counts as WARN)."""
ALERT_FIELDS: Final = ("alert_count", "alert_level")
"""Per-step scalars of the alerts raised in the step, derived from the record's ``alerts`` list (which
``steps.jsonl`` keeps; the numbers are not stored beside it): logged to W&B every step while alerts are on
(0 in a step without one), absent when ``shopsim_alerts`` is off."""
WANDB_SCALAR_NAMES: Final = WANDB_STEP_FIELDS + ALERT_FIELDS
"""Every per-step scalar name the W&B sink logs under WANDB_PREFIX: the record's fields, then the alerts'."""

# --- the per-group decision ledger --------------------------------------------------------------
LEDGER_COLUMNS: Final = tuple(f.name for f in fields(DecisionRow) if not f.metadata.get("record_only"))
"""The columns of the W&B decisions table: every :class:`DecisionRow` field the record does not keep
for itself alone (``scorable_rollouts``, ``reward_sum``)."""

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
