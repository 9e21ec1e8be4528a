"""Per-step records and ledger rows: plain dataclasses that round-trip through JSON.

A :class:`StepRecord` is what one rollout step leaves behind: every per-step field of the metrics
contract, the identity keys, the knobs in force and the decision ledger. Values that do not exist
(a ratio over zero groups) are ``None``, never NaN. ``to_dict`` gives JSON-native data whatever the
fields hold (numpy / torch scalars unwrapped, non-finite numbers ``None``, odd values stringified;
see :mod:`shopsim_metrics.step.json_values`).

Example:
    >>> row = DecisionRow(order=1, waves_open=1, group_index=0, outcome="trained",
    ...                   reason=None, remaining_before=32, unique_rollouts=8)
    >>> rec = StepRecord(rollout_id=0, decisions=[row])
    >>> StepRecord.from_dict(rec.to_dict()) == rec
    True
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from itertools import chain
from typing import Any

from shopsim_metrics.step.contract import PROMPT_SKIP_FIELDS
from shopsim_metrics.step.json_values import json_native, json_native_fields, json_native_rows


@dataclass
class DecisionRow:
    """One judged group: what slime did with it and why (a row of the decision ledger)."""

    order: int  # judgement order within the step, from 1
    waves_open: int  # waves submitted so far in the step at this judgement
    group_index: int | None  # Sample.group_index (or index of the first sample) of the group
    outcome: str  # one of contract.OUTCOMES
    reason: str | None  # DynamicFilterOutput.reason
    remaining_before: int | None  # slime's remaining_batch_size before the decision
    unique_rollouts: int  # unique rollouts after de-duplication by rollout_id
    reward_min: float | None = None  # over scorable unique rollouts; None when there are none
    reward_max: float | None = None
    reward_mean: float | None = None
    success_count: int | None = None
    failed_check: str | None = None  # one of contract.FAILED_CHECKS for technical groups
    scorable_rollouts: int = 0  # unique rollouts whose reward is a finite number
    reward_sum: float = 0.0  # sum over scorable rollouts (so step means can be recomputed)
    # cost
    response_tokens: int = 0  # response tokens of the group (every segment of every unique rollout)
    judged_at: float | None = None  # seconds since the step's first judgement (monotonic clock)
    # prompt value over time
    prompt_key: str | None = None  # the group's prompt (shopsim_metrics.prompts.keys); None: no key

    def to_dict(self) -> dict[str, Any]:
        return json_native_fields(self, _ROW_FIELDS)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "DecisionRow":
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})


@dataclass
class StepRecord:
    """Everything recorded for one rollout step (see metrics_contract.md)."""

    rollout_id: int
    terminated: bool = False
    # knobs in force for the step
    rollout_batch_size: int | None = None
    n_samples_per_prompt: int | None = None
    over_sampling_batch_size: int | None = None
    global_batch_size: int | None = None
    technical_failure_limit: int | None = None
    loop_state_source: str | None = None  # "slime", "mirror", or the name of a test/simulated loop
    # counts
    submitted_group_count: int = 0
    wave_count: int = 0
    accepted_group_count: int = 0
    train_group_count: int = 0
    fallback_group_count: int = 0
    technical_group_drop_count: int = 0
    zero_std_group_drop_count: int = 0
    zero_std_group_count: int = 0
    surplus_group_count: int = 0
    aborted_group_count: int = 0
    accepted_sample_count: int = 0
    train_sample_count: int = 0
    scorable_rollout_count: int = 0
    # ratios (None when the denominator is 0)
    technical_group_drop_rate: float | None = None
    zero_std_group_drop_rate: float | None = None
    zero_advantage_train_fraction: float | None = None
    wasted_sample_fraction: float | None = None
    success_rate: float | None = None
    reward_mean: float | None = None
    train_success_rate: float | None = None
    train_reward_mean: float | None = None
    # streak and loop state
    consecutive_technical_failures: int = 0
    max_consecutive_technical_failures: int = 0
    remaining_min: int | None = None
    optimizer_update_count: float | None = None
    # where success_rate / reward_mean came from: "all_samples_hook" or "ledger"
    generation_stats_source: str | None = None
    all_samples_group_count: int | None = None  # groups handed to the all-samples hook
    reconcile_mismatch_count: int | None = None  # set by the log function (None: not reconciled)
    slime_drop_counts: dict[str, int] | None = None  # slime's own drop_<reason> counters
    failed_check_counts: dict[str, int] = field(default_factory=dict)
    # cost: tokens (response_length) per outcome, and time (see contract.COST_FIELDS)
    generated_token_count: int = 0
    train_token_count: int = 0
    trained_token_count: int = 0
    fallback_token_count: int = 0
    dropped_technical_token_count: int = 0
    dropped_zero_std_token_count: int = 0
    surplus_token_count: int = 0
    wasted_token_fraction: float | None = None
    rollout_seconds: float | None = None
    filter_seconds: float = 0.0
    filter_time_fraction: float | None = None
    first_wave_fill_seconds: float | None = None
    extra_wave_seconds: float | None = None
    # prompt value over time (None: not tracked)
    prompt_key_source: str | None = None  # metadata | prompt_hash | mixed | none (prompt_keys.KEY_SOURCES)
    prompt_history_limit: int | None = None  # shopsim_prompt_history_limit in force
    revisit_group_count: int | None = None
    repeat_zero_std_group_count: int | None = None
    zero_std_persistence: float | None = None
    skippable_group_count: int | None = None
    skippable_spread_group_count: int | None = None
    skippable_token_fraction: float | None = None
    tracked_prompt_count: int | None = None
    prompt_history_partial: bool | None = None  # resumed without a record of every earlier step (None: not tracked)
    # skipping prompts before generation (contract.PROMPT_SKIP_FIELDS; None, and absent from to_dict: no skipping)
    skipped_prompt_count: int | None = None
    skip_p_easy: float | None = None
    skip_p_hard: float | None = None
    skip_saved_token_estimate: int | None = None
    skip_saved_token_fraction: float | None = None
    skipped_then_generated_group_count: int | None = None
    skipped_then_spread_group_count: int | None = None
    skipped_then_spread_rate: float | None = None
    skipped_prompts: list[dict[str, Any]] | None = None  # rows with contract.SKIPPED_PROMPT_COLUMNS
    # the prompts table on the steps it is due: for W&B only, not part of the record (JSONL, equality)
    prompt_table: list[list[Any]] | None = field(default=None, compare=False, repr=False)
    decisions: list[DecisionRow] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        out = json_native_fields(self, self._field_names())
        rows = _rows(self.decisions)
        if all(type(row) is DecisionRow for row in rows):
            out["decisions"] = json_native_rows(rows, _ROW_FIELDS)
        else:
            out["decisions"] = [_row_dict(row) for row in rows]
        return out

    def to_json_data(self) -> dict[str, Any]:
        """:meth:`to_dict` for orjson, which writes a dataclass as the dict of its attributes, a
        non-finite float as null and refuses integers beyond 64 bits.

        Ledger rows that hold only None, bool, str, int and float values, and no attribute besides
        their fields, stay :class:`DecisionRow` objects: orjson writes them as :meth:`to_dict` would
        (or refuses them), without a dict built per row (a ledger holds 1,000s at scale).
        """
        rows = _rows(self.decisions)
        if (not all(type(row) is DecisionRow for row in rows) or set(map(len, map(vars, rows))) - {len(_ROW_FIELDS)}
                or not set(map(type, chain.from_iterable(map(dict.values, map(vars, rows))))) <= _ORJSON_AS_IS):
            return self.to_dict()
        out = json_native_fields(self, self._field_names())
        out["decisions"] = rows
        return out

    def _field_names(self) -> tuple[str, ...]:
        """The record's fields; the skip fields only when one is set (a run that skips), so other runs' records stay as they were."""
        if any(getattr(self, name, None) is not None for name in _SKIP_FIELDS):
            return _STEP_FIELDS
        return _STEP_FIELDS_WITHOUT_SKIPS

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "StepRecord":
        known = {f.name for f in fields(cls)}
        kwargs = {k: v for k, v in data.items() if k in known and k not in ("decisions", "prompt_table")}
        rows = [DecisionRow.from_dict(r) for r in data.get("decisions", [])]
        return cls(**kwargs, decisions=rows)


_ROW_FIELDS = tuple(f.name for f in fields(DecisionRow))
_ORJSON_AS_IS = {type(None), bool, str, int, float}  # orjson writes these as the conversion rules do
_STEP_FIELDS = tuple(f.name for f in fields(StepRecord) if f.name not in ("decisions", "prompt_table"))
_SKIP_FIELDS = (*PROMPT_SKIP_FIELDS, "skipped_prompts")
_STEP_FIELDS_WITHOUT_SKIPS = tuple(name for name in _STEP_FIELDS if name not in _SKIP_FIELDS)


def _rows(decisions: Any) -> list[Any]:
    """The ledger rows as a list, whatever container (or non-container) the field holds."""
    try:
        return list(decisions)
    except Exception:  # noqa: BLE001 - an unreadable ledger still leaves the step its record
        return [] if decisions is None else [decisions]


def _row_dict(row: Any) -> Any:
    return row.to_dict() if isinstance(row, DecisionRow) else json_native(row)
