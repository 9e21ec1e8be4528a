"""Who gives each :class:`~shopsim_metrics.record.records.StepRecord` field: one owner per field, declared here.

A step's record is built once from parts (:class:`~shopsim_metrics.step.draft.RecordPart`), each given by one
owner; a part holding a field its owner does not own is an error, checked when the part is made. The owners:

- ``closed_step``: the accountant's facts of the closed step (:func:`~shopsim_metrics.step.closed_step.closed_step_fields`):
  knobs, counts, rates, costs, streak, waves, bias, agent episodes, the fully-async fields and the ledger;
- ``prompts``: the prompt tracker (:meth:`~shopsim_metrics.prompts.value.PromptValueTracker.step_fields`, and the
  run's final prompts table the recorder asks it for);
- ``resume``: whether a resumed run found a record of every earlier step (``prompt_history_partial``);
- ``writer``: the writing process's identity and its count of records (the monitor's, :mod:`shopsim_metrics.run.identity`);
- ``slime``: what slime's log function hands over (:class:`~shopsim_metrics.step.recorder.SlimeFacts`): its time and
  drop counters, and the fractions of the step's time that need them;
- ``skipping``: the skipping data source's tally (:mod:`shopsim_metrics.prompts.skip_record`);
- ``alerts``: the alerts a record carries and the streak that raises the step's WARN (:mod:`shopsim_metrics.health.alerts`).

``rollout_id`` is no part's: it is the draft's own (slime's number, or the accountant's until slime renumbers it).

Example:
    >>> OWNER_OF["accepted_group_count"], OWNER_OF["rollout_seconds"], OWNER_OF["skip_p_easy"]
    ('closed_step', 'slime', 'skipping')
"""

from __future__ import annotations

from dataclasses import fields
from types import MappingProxyType
from typing import Final, Mapping

from shopsim_metrics.record import records as R
from shopsim_metrics.record.records import StepRecord, step_fields

CLOSED_STEP, PROMPTS, RESUME, WRITER, SLIME, SKIPPING, ALERTS = (
    "closed_step", "prompts", "resume", "writer", "slime", "skipping", "alerts")

_PROMPTS = frozenset(step_fields(R.PROMPT_VALUE)) - {"prompt_history_partial"} | {
    "prompt_key_source", "prompt_history_limit", "prompt_table"}
_GIVEN_APART = {
    PROMPTS: _PROMPTS,
    RESUME: frozenset({"prompt_history_partial"}),
    WRITER: frozenset({"run_id", "process_started_at", "process_start_rollout_id", "process_generation",
                       "record_sequence"}),
    SLIME: frozenset({"rollout_seconds", "filter_time_fraction", "environment_time_fraction", "slime_drop_counts",
                      "reconcile_mismatch_count"}),
    SKIPPING: frozenset({*step_fields(R.PROMPT_SKIP), "skipped_prompts"}),
    ALERTS: frozenset({"technical_failure_warn_at", "alerts"}),
}
_CLOSED_STEP_TABLES = (R.COUNT, R.RATIO, R.STREAK, R.EXTRA, R.COST, R.ZERO_STD_CAUSE, R.FULLY_ASYNC, R.TRAIN_BIAS,
                       R.AGENT)
_CLOSED_STEP = frozenset(name for table in _CLOSED_STEP_TABLES for name in step_fields(table)).difference(
    *_GIVEN_APART.values()) | {
    "rollout_batch_size", "n_samples_per_prompt", "over_sampling_batch_size", "global_batch_size",
    "loop_state_source", "generation_stats_source", "all_samples_group_count", "failed_check_counts",
    "turn_count_source", "technical_cause_counts", "token_count_source", "decisions"}

OWNED: Final[Mapping[str, frozenset[str]]] = MappingProxyType({CLOSED_STEP: _CLOSED_STEP, **_GIVEN_APART})
"""Each owner's fields: the closed step's are its contract tables' (less the few fields given apart) and the
knobs, sources and ledger it repeats."""
OWNER_OF: Final[Mapping[str, str]] = MappingProxyType(
    {name: owner for owner, names in OWNED.items() for name in sorted(names)})
"""The owner of each field (the one declaration read backwards)."""
PART_FIELDS: Final = frozenset(f.name for f in fields(StepRecord) if f.name != "rollout_id")
"""The fields a part may give: every :class:`StepRecord` field but ``rollout_id`` (the draft's own)."""
