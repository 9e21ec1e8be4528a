"""Calibrate the simulator's cost model from a run's own records: response lengths and seconds per token.

``tune --from RUN`` fits two numbers so that simulating **the run's own loop** (its knobs, its
``over_sampling_batch_size``, its measured zero-std and technical rates) reproduces what the run
recorded:

- ``response_length_median``: the simulated judged groups must average the same tokens per rollout
  as the run's judged groups (ledger ``response_tokens`` / ``unique_rollouts``). The fit re-simulates
  instead of taking the recorded mean at face value, because judged groups are a biased sample: a
  group is as slow as its longest rollout, so the long groups are the ones still generating when
  slime aborts the rest of a wave. A plain mean underestimates the lengths, the more so the larger
  the over-sampling. Simulating the run's own loop reproduces that selection.
- ``seconds_per_token`` (only when the records hold ``rollout_seconds``): scaled until the simulated
  mean step rollout time equals the recorded one.

Both fits are multiplicative fixed points on common random numbers (the same seed every round),
so the simulated figure is close to proportional to the fitted parameter and a few rounds settle
it. The shape (``response_length_sigma``) and the dependence on prompt hardness
(``hard_prompt_length_slope``) stay the base config's: per-group token sums cannot separate them
from each other.

Example:
    >>> from shopsim_metrics.record.records import DecisionRow, StepRecord
    >>> rows = [DecisionRow(order=1, waves_open=1, group_index=0, outcome="trained", reason=None,
    ...                     remaining_before=4, unique_rollouts=4, response_tokens=400),
    ...         DecisionRow(order=2, waves_open=1, group_index=1, outcome="trained", reason=None,
    ...                     remaining_before=3, unique_rollouts=4, response_tokens=0)]
    >>> judged_tokens_per_rollout([StepRecord(rollout_id=0, decisions=rows)])
    (100.0, 1)
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Iterable, Sequence

from shopsim_metrics.record.records import StepRecord
from shopsim_metrics.simulator.config import SimConfig

ROUNDS = 6
"""Rounds of each fixed point at most (they settle within 1% in two or three)."""

TOLERANCE = 0.005
"""Relative gap between the simulated and the recorded figure at which a fit stops."""

CALIBRATION_STEPS = 200
"""Simulated steps per round of the fit (the CLI's default)."""

CALIBRATION_LIMIT = 10**9
"""The termination limit while calibrating: none, so a technical streak does not end the simulated run."""


@dataclass(frozen=True)
class CostCalibration:
    """The fitted cost model and what it was fitted to."""

    source: str
    response_length_median: float
    seconds_per_token: float | None  # None: the run holds no rollout_seconds, time stays a model
    observed_tokens_per_rollout: float  # mean over the run's judged groups that have tokens
    simulated_tokens_per_rollout: float  # the same in the calibrated simulation of the run's own loop
    judged_groups: int
    observed_rollout_seconds: float | None
    simulated_rollout_seconds: float | None
    timed_steps: int

    @property
    def time_measured(self) -> bool:
        """Whether the time per token comes from the run (else the time column is a model)."""
        return self.seconds_per_token is not None

    def apply(self, config: SimConfig) -> SimConfig:
        """``config`` with the fitted median (and seconds per token when measured)."""
        changes: dict = {"response_length_median": self.response_length_median}
        if self.seconds_per_token is not None:
            changes["seconds_per_token"] = self.seconds_per_token
        return config.with_(**changes)

    def to_dict(self) -> dict:
        return {name: getattr(self, name) for name in self.__dataclass_fields__} | {
            "time_measured": self.time_measured}


def judged_tokens_per_rollout(records: Sequence[StepRecord]) -> tuple[float | None, int]:
    """Tokens per rollout over the judged groups that have tokens (ratio of sums), and how many groups.

    Rows with 0 tokens (a run without response lengths) or no unique rollouts are left out; ``None``
    when no row is left.
    """
    tokens, rollouts, groups = _token_sums(
        (row.response_tokens, row.unique_rollouts) for record in records for row in record.decisions)
    return (tokens / rollouts if rollouts else None), groups


def mean_rollout_seconds(records: Sequence[StepRecord]) -> tuple[float | None, int]:
    """Mean ``rollout_seconds`` over the completed steps that have a positive one, and how many they are."""
    return _mean_seconds((r.rollout_seconds, r.terminated) for r in records)


def _token_sums(rows: Iterable[tuple[Any, Any]]) -> tuple[int, float, int]:
    """Tokens, unique rollouts and groups over the ``(response_tokens, unique_rollouts)`` rows that have
    tokens (the rule of :func:`judged_tokens_per_rollout`)."""
    tokens = rollouts = groups = 0
    for row_tokens, row_rollouts in rows:
        if (isinstance(row_tokens, int) and row_tokens > 0
                and isinstance(row_rollouts, (int, float)) and row_rollouts > 0):
            tokens, rollouts, groups = tokens + row_tokens, rollouts + row_rollouts, groups + 1
    return tokens, rollouts, groups


def _mean_seconds(steps: Iterable[tuple[Any, Any]]) -> tuple[float | None, int]:
    """The rule of :func:`mean_rollout_seconds` over ``(rollout_seconds, terminated)`` pairs."""
    seconds = [s for s, terminated in steps if not terminated and isinstance(s, (int, float)) and s > 0]
    return (sum(seconds) / len(seconds), len(seconds)) if seconds else (None, 0)


@dataclass(frozen=True)
class ObservedCost:
    """What a run recorded that the fit reproduces (see :func:`judged_tokens_per_rollout` and
    :func:`mean_rollout_seconds`)."""

    tokens_per_rollout: float | None  # None: no judged group has tokens
    judged_groups: int
    rollout_seconds: float | None  # None: no completed step has a rollout_seconds
    timed_steps: int

    @classmethod
    def of_records(cls, records: Sequence[StepRecord]) -> "ObservedCost":
        return cls(*judged_tokens_per_rollout(records), *mean_rollout_seconds(records))


COST_COLUMNS = ("rollout_id", "terminated", "rollout_seconds")
"""The per-step columns :class:`LedgerTokens` needs beside the ledgers."""


class LedgerTokens:
    """A ``keep_ledger`` callback of :func:`~shopsim_metrics.readers.steps.read_step_columns`: per step,
    the tokens, rollouts and groups of its ledger rows with tokens (the latest record of a step wins); a few
    numbers per step are held, never the ledgers, so a run of any length fits in memory."""

    def __init__(self) -> None:
        self.sums: dict[int, tuple[int, int, int]] = {}  # step -> (tokens, rollouts, groups)

    def __call__(self, step: int, record: dict[str, Any], line: bytes) -> None:
        self.sums[step] = _token_sums((row.get("response_tokens", 0), row.get("unique_rollouts"))
                                      for row in record.get("decisions") or ())

    def observed(self, table: Any) -> ObservedCost:
        """:class:`ObservedCost` from the ledgers seen and ``table``'s :data:`COST_COLUMNS` (the same pass)."""
        tokens = sum(t for t, _, _ in self.sums.values())
        rollouts = sum(r for _, r, _ in self.sums.values())
        groups = sum(g for _, _, g in self.sums.values())
        seconds, timed_steps = _mean_seconds(zip(table.column("rollout_seconds"), table.column("terminated")))
        return ObservedCost(tokens / rollouts if rollouts else None, groups, seconds, timed_steps)


def read_observed_cost(path: str | os.PathLike) -> ObservedCost:
    """:meth:`ObservedCost.of_records` of a ``steps.jsonl`` (or its run directory) in one streaming pass,
    by the rules of the records file (the latest record of a step wins)."""
    from shopsim_metrics.readers.steps import read_step_columns

    tokens = LedgerTokens()
    return tokens.observed(read_step_columns(path, names=COST_COLUMNS, keep_ledger=tokens, warn=False))


def calibrate(observed: ObservedCost | Sequence[StepRecord], run: SimConfig, *, source: str = "records",
              steps: int = CALIBRATION_STEPS) -> CostCalibration:
    """Fit ``run``'s token model (and seconds per token) to what a run recorded: ``observed``, or its step
    records (see the module docstring).

    ``run`` is the run's own loop: its knobs, ``over_sampling_batch_size`` and rates (the rates model).
    ValueError when no judged group has tokens.
    """
    from shopsim_metrics.simulator.loop import tuning_run

    if not isinstance(observed, ObservedCost):
        observed = ObservedCost.of_records(observed)
    target, groups = observed.tokens_per_rollout, observed.judged_groups
    if target is None:
        raise ValueError(f"{source}: no judged group with response tokens (ledger response_tokens are 0 or "
                         "missing); the cost cannot be calibrated from this run")
    target_seconds, timed_steps = observed.rollout_seconds, observed.timed_steps
    config = run.with_(steps=steps, bursts=(), max_technical_streak=None,
                       max_consecutive_failed_groups=CALIBRATION_LIMIT,
                       seconds_per_token=run.seconds_per_token or SimConfig.seconds_per_token)
    simulated = target
    for _ in range(ROUNDS):
        simulated = judged_tokens_per_rollout(tuning_run(config).records)[0] or 1.0
        gap = target / simulated
        if abs(gap - 1) < TOLERANCE:
            break
        config = config.with_(response_length_median=max(1.0, config.response_length_median * gap))
    simulated_seconds = None
    if target_seconds is not None:
        for _ in range(ROUNDS):
            outcomes = tuning_run(config).outcomes
            simulated_seconds = sum(o.rollout_time for o in outcomes) / len(outcomes) if outcomes else 0.0
            gap = target_seconds / simulated_seconds if simulated_seconds else 1.0
            if abs(gap - 1) < TOLERANCE:
                break
            config = config.with_(seconds_per_token=config.seconds_per_token * gap)
    return CostCalibration(
        source=source,
        response_length_median=config.response_length_median,
        seconds_per_token=config.seconds_per_token if target_seconds is not None else None,
        observed_tokens_per_rollout=target,
        simulated_tokens_per_rollout=simulated,
        judged_groups=groups,
        observed_rollout_seconds=target_seconds,
        simulated_rollout_seconds=simulated_seconds,
        timed_steps=timed_steps,
    )
