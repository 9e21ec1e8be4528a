"""Choose ``over_sampling_batch_size`` by simulation: what each candidate costs and buys.

For a zero-std rate and a technical-failure rate (given, or measured from a run's ``steps.jsonl``
with :func:`measured_rates`), every candidate runs the simulated loop in tuning mode (the real
filter and accounting; records kept in memory only) on the fixed-rates reward model, from the same
seed (common random numbers, so candidates differ by their knob, not by luck). The termination limit
is lifted during tuning, so long runs are not cut short; ``P(limit)`` reports how often a step's
technical streak reached the real limit instead.

Figures per candidate (over the simulated steps):

- ``mean_waves``, ``p_second_wave`` (P(waves >= 2)), ``p_third_wave`` (P(waves >= 3));
- ``zero_advantage_fraction``: fallback groups / train groups (zero-advantage share of the train batch);
- ``wasted_sample_fraction``: samples of judged groups that do not train / samples of judged groups;
- ``aborted_per_step``: groups whose generation was discarded at the end of a step;
- ``relative_rollout_time``: mean step rollout time / the time of one wave of ``rollout_batch_size``
  groups run to completion (same latency model), so 1.0 means "as slow as no over-sampling";
- ``generated_tokens_per_step``: response tokens of the judged groups per step (what the live
  ``generated_token_count`` records);
- ``aborted_tokens_per_step``: tokens the aborted groups had generated when slime aborted them. No live
  record sees them (they are never judged); the simulator counts them from the lengths it drew and how
  far each group had got (:func:`~shopsim_metrics.simulator.token_model.tokens_generated_by`);
- ``total_tokens_per_step``: the two together, every token generated per step: **the cost**;
- ``mean_rollout_seconds``: seconds per step (the simulated rollout time, aborted groups' time included:
  the step ends when the batch fills). It is a model unless the cost was calibrated from a run that
  recorded ``rollout_seconds`` (:mod:`.calibration`);
- ``wasted_token_fraction``: tokens of judged groups that do not train / tokens of judged groups (the
  live field's definition); ``total_wasted_token_fraction``: every token that does not train (aborted
  included) / every token generated.

With agent episodes (``base.agent``, ``tune --agent``) the tokens are the generated ones (tool output is not
generated: it costs no decoding) and a step's time goes to generation and to the environment apart
(episode-seconds summed over every episode the step started, aborted ones up to the abort):

- ``generation_seconds_per_step``: generated tokens × ``seconds_per_token``;
- ``environment_seconds_per_step``: the episodes' tool-call seconds (``non_generation_time``);
- ``aborted_environment_seconds_per_step``: of those, the seconds of episodes slime aborted at the step's end
  (a tool call cut short included): environment time spent on episodes that never train.

:func:`wave_price` divides the first two by the waves per step: what one wave costs in each.

**Recommendation rule** (:func:`recommend`): among the candidates whose zero-advantage fraction is at
most ``max_zero_advantage`` (default 0.05) and whose P(second wave) is at most ``max_second_wave``
(default 0.05), the one with the lowest cost, ``total_tokens_per_step`` (ties: fewer seconds per step,
then the smaller size). When none meets both, the one closest to them: the smallest
``max(zero_adv / max_zero_advantage, p_second / max_second_wave)`` (ties: lowest cost, then the
smaller size). When the recommendation is the smallest or the largest candidate, :func:`tune` widens
the range once beyond that edge (:func:`widened_candidates`) and applies the rule again; if the
recommendation is still at an edge that could be widened, the reason says so plainly.

Example:
    >>> report = tune(zero_std_rate=0.4, technical_rate=0.0, candidates=[16, 32], steps=50, widen=False)
    >>> [c.over_sampling_batch_size for c in report.candidates], report.recommended
    ([16, 32], 32)
    >>> "may lie above 32" in report.reason
    True
    >>> report.by_size(16).zero_advantage_fraction > report.by_size(32).zero_advantage_fraction
    True
"""

from __future__ import annotations

import html
import math
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

from shopsim_metrics.simulator.tuning.calibration import COST_COLUMNS, CostCalibration, LedgerTokens, ObservedCost
from shopsim_metrics.simulator.config import FailureBurst, SimConfig
from shopsim_metrics.simulator.tuning.step_rates import RateEstimate, estimate_rates
from shopsim_metrics.simulator.latency import reference_wave_time
from shopsim_metrics import tables
from shopsim_metrics.simulator.loop import SimulationResult, rng_streams, tuning_run, wave_time_model
from shopsim_metrics.general.plain_values import is_int

TUNING_LIMIT = 10**9
"""The termination limit while tuning: effectively none (``p_limit`` reports the real one)."""

MAX_KNOB = 1_000_000
"""Largest batch knob (groups, samples) the simulator accepts: beyond it a simulated step would not fit in memory."""

DEFAULT_MULTIPLIERS = (1.0, 1.5, 2.0, 3.0, 4.0)
"""Default candidates: these multiples of ``rollout_batch_size`` (16 -> 16, 24, 32, 48, 64)."""


@dataclass(frozen=True)
class TuneTargets:
    """What "good enough" means for the recommendation rule (see the module docstring)."""

    max_zero_advantage: float = 0.05
    max_second_wave: float = 0.05


@dataclass
class CandidateResult:
    """The simulated figures of one ``over_sampling_batch_size`` candidate."""

    over_sampling_batch_size: int
    steps: int
    mean_waves: float
    p_second_wave: float
    p_third_wave: float
    zero_advantage_fraction: float
    wasted_sample_fraction: float
    aborted_per_step: float
    submitted_per_step: float
    relative_rollout_time: float
    mean_rollout_seconds: float
    p_limit: float  # share of steps whose technical streak reached the real limit
    generated_tokens_per_step: float = 0.0  # judged groups' tokens (the live generated_token_count)
    wasted_token_fraction: float = 0.0  # of the judged groups' tokens (the live field's definition)
    aborted_tokens_per_step: float = 0.0  # aborted groups' tokens until the abort: simulated only
    total_tokens_per_step: float = 0.0  # judged + aborted: every token generated, the cost
    total_wasted_token_fraction: float = 0.0  # tokens that do not train / every token generated
    burst_steps: int = 0  # simulated steps with a scheduled burst: in the cost, not in P(2nd), P(3rd), zero-adv
    # agent episodes only (None: single-turn rollouts): episode-seconds per step, every episode started
    generation_seconds_per_step: float | None = None  # generated tokens x seconds_per_token
    environment_seconds_per_step: float | None = None  # tool calls' seconds
    aborted_environment_seconds_per_step: float | None = None  # of those, in episodes slime aborted at the step's end
    # tool -> its calls' seconds per step (the calls that ended: a call slime's abort cut short is in no tool's)
    tool_seconds_per_step: dict[str, float] | None = None
    meets_targets: bool = False


@dataclass
class TuneReport:
    """Every candidate's figures, the inputs, and the recommendation."""

    zero_std_rate: float
    technical_rate: float
    base: SimConfig
    targets: TuneTargets
    candidates: list[CandidateResult]
    recommended: int
    reason: str
    reference_wave_seconds: float
    source: str = "given rates"
    wall_seconds: float = 0.0
    extra: dict = field(default_factory=dict)
    calibration: CostCalibration | None = None  # the cost model fitted to a run (None: the base config's)
    widened: list[int] = field(default_factory=list)  # candidates tune added beyond an edge of the range
    bursts: list[tuple[int, float]] = field(default_factory=list)  # (simulated step, technical rate) of scheduled bursts

    @property
    def time_measured(self) -> bool:
        """Whether the seconds per step rest on a run's measured time per token (else they are a model)."""
        return self.calibration is not None and self.calibration.time_measured

    def by_size(self, size: int) -> CandidateResult:
        for candidate in self.candidates:
            if candidate.over_sampling_batch_size == size:
                return candidate
        raise KeyError(f"no candidate with over_sampling_batch_size={size}; have "
                       f"{[c.over_sampling_batch_size for c in self.candidates]}")

    def to_dict(self) -> dict:
        return {
            "zero_std_rate": self.zero_std_rate, "technical_rate": self.technical_rate, "source": self.source,
            "rollout_batch_size": self.base.rollout_batch_size, "steps": self.base.steps, "seed": self.base.seed,
            "targets": asdict(self.targets), "recommended": self.recommended, "reason": self.reason,
            "reference_wave_seconds": self.reference_wave_seconds,
            "candidates": [asdict(c) for c in self.candidates],
            "calibration": self.calibration.to_dict() if self.calibration else None,
            "time_measured": self.time_measured, "widened": self.widened,
            "bursts": [list(b) for b in self.bursts],
            "agent": asdict(self.base.agent) if self.base.agent is not None else None,
        }


@dataclass(frozen=True)
class MeasuredRates:
    """Rates measured from step records: shares of judged groups."""

    zero_std_rate: float
    technical_rate: float
    accepted_groups: int
    steps: int
    rollout_batch_size: int | None
    n_samples_per_prompt: int | None
    global_batch_size: int | None
    over_sampling_batch_size: int | None
    estimate: RateEstimate | None = None  # the rates step by step: bursts and dominant steps (:mod:`.step_rates`)
    zero_std_persistence: float | None = None  # P(zero-std | zero-std at the prompt's last visit), pooled; None: unknown


def default_candidates(rollout_batch_size: int) -> list[int]:
    """``DEFAULT_MULTIPLIERS`` times ``rollout_batch_size``, rounded, unique, ascending.

    Example:
        >>> default_candidates(16), default_candidates(5)
        ([16, 24, 32, 48, 64], [5, 8, 10, 15, 20])
    """
    return sorted({max(rollout_batch_size, math.ceil(rollout_batch_size * m)) for m in DEFAULT_MULTIPLIERS})


RATE_COLUMNS = ("rollout_id", "accepted_group_count", "zero_std_group_count", "technical_group_drop_count",
                "rollout_batch_size", "n_samples_per_prompt", "global_batch_size", "over_sampling_batch_size",
                "repeat_zero_std_group_count", "skippable_group_count")
"""The per-step columns the rates and the run's knobs are read from."""


def measured_rates(path: str | os.PathLike) -> MeasuredRates:
    """Zero-std and technical rates of a run: ``sum(zero_std_group_count) / sum(accepted)`` and likewise.

    ``path`` is a ``steps.jsonl`` or the run directory holding it. The knobs in force are taken from
    the last record (so ``tune --from`` simulates the run's own batch sizes unless told otherwise).
    """
    from shopsim_metrics.readers.steps import read_step_columns

    return rates_of(read_step_columns(path, names=RATE_COLUMNS), path)


def measured_rates_and_cost(path: str | os.PathLike) -> tuple[MeasuredRates, ObservedCost]:
    """:func:`measured_rates` and :func:`~.calibration.read_observed_cost` of a run in ONE pass over its
    records (what ``tune --from`` reads: a big file is read once)."""
    from shopsim_metrics.readers.steps import read_step_columns

    tokens = LedgerTokens()
    names = RATE_COLUMNS + tuple(name for name in COST_COLUMNS if name not in RATE_COLUMNS)
    table = read_step_columns(path, names=names, keep_ledger=tokens)
    return rates_of(table, path), tokens.observed(table)


def rates_of(table: Any, path: str | os.PathLike) -> MeasuredRates:
    """:class:`MeasuredRates` from a run's per-step columns (:data:`RATE_COLUMNS`); ValueError without a judged group."""
    accepted = sum(v or 0 for v in table.columns["accepted_group_count"])
    if not accepted:
        raise ValueError(f"{path}: no judged group in {len(table)} step record(s); cannot measure rates")
    last = table.last_values
    skippable = sum(v or 0 for v in table.columns["skippable_group_count"])
    return MeasuredRates(
        zero_std_rate=sum(v or 0 for v in table.columns["zero_std_group_count"]) / accepted,
        technical_rate=sum(v or 0 for v in table.columns["technical_group_drop_count"]) / accepted,
        accepted_groups=accepted,
        steps=len(table),
        rollout_batch_size=_knob(last.get("rollout_batch_size")),
        n_samples_per_prompt=_knob(last.get("n_samples_per_prompt")),
        global_batch_size=_knob(last.get("global_batch_size")),
        over_sampling_batch_size=_knob(last.get("over_sampling_batch_size")),
        estimate=estimate_rates(table.rollout_ids, table.columns["accepted_group_count"],
                                table.columns["technical_group_drop_count"], table.columns["zero_std_group_count"]),
        zero_std_persistence=(sum(v or 0 for v in table.columns["repeat_zero_std_group_count"]) / skippable
                              if skippable else None),
    )


def _knob(value: object) -> int | None:
    """A batch knob read from a record: a positive integer, else None (the simulator's default is used)."""
    return value if is_int(value) and 0 < value <= MAX_KNOB else None


def summarize(size: int, result: SimulationResult, *, reference_seconds: float,
              max_consecutive_failed_groups: int, burst_steps: frozenset[int] = frozenset()) -> CandidateResult:
    """A candidate's figures from its simulated run (records and the loop's own timing).

    ``burst_steps``: the steps of scheduled bursts. The two target figures (P(2nd wave), P(3rd wave) and
    the zero-advantage fraction) are over the other steps, since no size avoids a burst's extra waves;
    every cost figure counts every step, bursts included.
    """
    records = [r for r in result.records if not r.terminated]
    n = len(records) or 1
    calm = [r for r in records if r.rollout_id not in burst_steps] or records
    n_calm = len(calm) or 1
    train = sum(r.train_group_count for r in calm)
    accepted_samples = sum(r.accepted_sample_count for r in records)
    train_samples = sum(r.train_sample_count for r in records)
    seconds = sum(o.rollout_time for o in result.outcomes) / (len(result.outcomes) or 1)
    judged_tokens = sum(r.generated_token_count for r in records)
    train_tokens = sum(r.train_token_count for r in records)
    completed = {r.rollout_id for r in records}
    aborted_tokens = sum(o.aborted_tokens for o in result.outcomes if o.rollout_id in completed)
    total_tokens = judged_tokens + aborted_tokens
    episodes = [o.episodes for o in result.outcomes if o.rollout_id in completed and o.episodes is not None]
    agent = {}
    if episodes:
        tools: dict[str, float] = {}
        for e in episodes:
            for name, (_, _, _, seconds) in e.tools.items():
                tools[name] = tools.get(name, 0.0) + seconds / n
        agent = dict(generation_seconds_per_step=sum(e.generation_seconds for e in episodes) / n,
                     environment_seconds_per_step=sum(e.environment_seconds for e in episodes) / n,
                     aborted_environment_seconds_per_step=sum(e.aborted_environment_seconds for e in episodes) / n,
                     tool_seconds_per_step=dict(sorted(tools.items(), key=lambda item: -item[1])) or None)
    return CandidateResult(
        over_sampling_batch_size=size,
        steps=len(records),
        mean_waves=sum(r.wave_count for r in records) / n,
        p_second_wave=sum(r.wave_count >= 2 for r in calm) / n_calm,
        p_third_wave=sum(r.wave_count >= 3 for r in calm) / n_calm,
        zero_advantage_fraction=sum(r.fallback_group_count for r in calm) / train if train else 0.0,
        wasted_sample_fraction=(accepted_samples - train_samples) / accepted_samples if accepted_samples else 0.0,
        aborted_per_step=sum(r.aborted_group_count for r in records) / n,
        submitted_per_step=sum(r.submitted_group_count for r in records) / n,
        relative_rollout_time=seconds / reference_seconds if reference_seconds else float("nan"),
        mean_rollout_seconds=seconds,
        p_limit=sum(r.max_consecutive_technical_failures >= max_consecutive_failed_groups for r in records) / n,
        generated_tokens_per_step=judged_tokens / n,
        wasted_token_fraction=(judged_tokens - train_tokens) / judged_tokens if judged_tokens else 0.0,
        aborted_tokens_per_step=aborted_tokens / n,
        total_tokens_per_step=total_tokens / n,
        total_wasted_token_fraction=(total_tokens - train_tokens) / total_tokens if total_tokens else 0.0,
        burst_steps=len(records) - len(calm),
        **agent,
    )


def recommend(candidates: Sequence[CandidateResult], targets: TuneTargets) -> tuple[int, str]:
    """The recommendation rule of the module docstring: ``(size, reason)``; marks ``meets_targets``.

    Example:
        >>> mk = lambda size, z, tokens: CandidateResult(size, 1, 1, 0, 0, z, 0, 0, 0, 1, 1, 0,
        ...                                              total_tokens_per_step=tokens)
        >>> recommend([mk(16, 0.2, 5000.0), mk(32, 0.01, 8000.0), mk(48, 0.0, 9000.0)], TuneTargets())[0]
        32
        >>> recommend([mk(16, 0.5, 5000.0), mk(32, 0.2, 8000.0)], TuneTargets())[0]
        32
        >>> recommend([mk(16, 0.0, 9000.0), mk(24, 0.0, 7000.0), mk(32, 0.0, 8000.0)], TuneTargets())[0]
        24
    """
    if not candidates:
        raise ValueError("recommend() needs at least one candidate")
    ordered = sorted(candidates, key=lambda c: c.over_sampling_batch_size)
    for c in ordered:
        c.meets_targets = (c.zero_advantage_fraction <= targets.max_zero_advantage
                           and c.p_second_wave <= targets.max_second_wave)

    def cost(c: CandidateResult) -> tuple[float, float, int]:
        return c.total_tokens_per_step, c.mean_rollout_seconds, c.over_sampling_batch_size

    def miss(c: CandidateResult) -> float:
        return max(c.zero_advantage_fraction / max(targets.max_zero_advantage, 1e-12),
                   c.p_second_wave / max(targets.max_second_wave, 1e-12))

    meeting = [c for c in ordered if c.meets_targets]
    if meeting:
        best = min(meeting, key=cost)
        return best.over_sampling_batch_size, (
            f"lowest cost among the {len(meeting)} candidate(s) within the targets: "
            f"{best.total_tokens_per_step:,.0f} tokens per step generated ({best.aborted_tokens_per_step:,.0f} of "
            f"them by aborted groups), {best.mean_rollout_seconds:.1f} s per step; zero-advantage fraction "
            f"{best.zero_advantage_fraction:.3f} <= {targets.max_zero_advantage}, P(2nd wave) "
            f"{best.p_second_wave:.3f} <= {targets.max_second_wave}")
    best = min(ordered, key=lambda c: (miss(c), *cost(c)))
    return best.over_sampling_batch_size, (
        f"no candidate meets both targets (zero-advantage <= {targets.max_zero_advantage}, P(2nd wave) <= "
        f"{targets.max_second_wave}); the closest misses them by a factor {miss(best):.2f}")


WIDEN_UP = (1.5, 2.0)
"""Multiples of the largest candidate added when the recommendation is the largest."""


def widened_candidates(sizes: Sequence[int], recommended: int, rollout_batch_size: int) -> list[int]:
    """The candidates beyond the edge of ``sizes`` that ``recommended`` sits on (empty: not at an edge,
    or an edge nothing lies beyond).

    Above the largest: :data:`WIDEN_UP` times it (up to :data:`MAX_KNOB`). Below the smallest:
    ``rollout_batch_size`` (the least slime accepts) and the midpoint between it and the smallest.

    Example:
        >>> widened_candidates([16, 32, 64], 64, 16), widened_candidates([32, 48], 32, 16)
        ([96, 128], [16, 24])
        >>> widened_candidates([16, 32, 64], 32, 16), widened_candidates([16, 32], 16, 16)
        ([], [])
    """
    low, high = min(sizes), max(sizes)
    if recommended == high:
        extra = {min(MAX_KNOB, math.ceil(high * m)) for m in WIDEN_UP}
    elif recommended == low:
        extra = {rollout_batch_size, (rollout_batch_size + low) // 2}
    else:
        extra = set()
    return sorted(extra - set(sizes))


def edge_note(sizes: Sequence[int], recommended: int, rollout_batch_size: int) -> str:
    """What the reason adds when the recommendation is at an edge of the range that could be widened.

    Example:
        >>> edge_note([16, 32], 32, 16)
        '; it is the largest candidate: the best value may lie above 32 (try larger --candidates)'
        >>> edge_note([16, 32], 16, 16)
        ''
    """
    if recommended == max(sizes) and recommended < MAX_KNOB:
        return (f"; it is the largest candidate: the best value may lie above {recommended} "
                f"(try larger --candidates)")
    if recommended == min(sizes) and recommended > rollout_batch_size:
        return (f"; it is the smallest candidate: the best value may lie below {recommended} "
                f"(try smaller --candidates, down to rollout_batch_size {rollout_batch_size})")
    return ""


def tune(
    *,
    zero_std_rate: float,
    technical_rate: float,
    candidates: Iterable[int] | None = None,
    steps: int = 2000,
    seed: int = 0,
    base: SimConfig | None = None,
    targets: TuneTargets | None = None,
    source: str = "given rates",
    progress: Callable[[int, CandidateResult], None] | None = None,
    jobs: int = 1,
    calibration: CostCalibration | None = None,
    widen: bool = True,
    bursts: Sequence[tuple[int, float]] = (),
) -> TuneReport:
    """Simulate every candidate at the given rates and recommend one (see the module docstring).

    ``base`` holds the other knobs and the latency model (default :class:`SimConfig` defaults).
    ``jobs > 1`` simulates candidates in that many processes (same figures: each candidate has its
    own simulation from the same seed). ``calibration`` (:func:`.calibration.calibrate`) replaces
    ``base``'s token model and time per token by those fitted to a run. ``widen=False`` keeps exactly
    ``candidates`` (an edge recommendation is then only noted in the reason). ``bursts``: ``(step, rate)``
    of simulated steps whose technical rate is ``rate`` (a run's bursts at their frequency,
    :meth:`.step_rates.RateEstimate.scheduled_bursts`); the other steps run at ``technical_rate``.
    """
    import time

    started = time.perf_counter()
    base = (base or SimConfig()).with_(steps=steps, seed=seed, zero_std_rate=zero_std_rate,
                                       technical_rate=technical_rate, max_technical_streak=None,
                                       bursts=tuple(FailureBurst(step=int(step), rate=float(rate)) for step, rate in bursts))
    if calibration is not None:
        base = calibration.apply(base)
    targets = targets or TuneTargets()
    sizes = sorted(set(candidates)) if candidates is not None else default_candidates(base.rollout_batch_size)
    if not technical_rate < 1.0:
        raise ValueError(f"technical_rate must be below 1 to tune (every group failing never fills a train batch; "
                         f"the run would terminate at the limit); got {technical_rate}")
    if not sizes:
        raise ValueError("candidates must hold at least one over_sampling_batch_size")
    too_small = [size for size in sizes if size < base.rollout_batch_size]
    if too_small:
        raise ValueError(f"candidates: every over_sampling_batch_size must be >= rollout_batch_size "
                         f"({base.rollout_batch_size}); got {too_small[0]}")
    _, _, reference_rng = rng_streams(seed)
    reference = reference_wave_time(wave_time_model(base, reference_rng), groups=base.rollout_batch_size,
                                    concurrency=base.max_concurrent_groups)
    results = _simulate_sizes(sizes, base, reference, jobs, progress)
    recommended, reason = recommend(results, targets)
    widened = widened_candidates(sizes, recommended, base.rollout_batch_size) if widen else []
    if widened:
        results = sorted(results + _simulate_sizes(widened, base, reference, jobs, progress),
                         key=lambda c: c.over_sampling_batch_size)
        recommended, reason = recommend(results, targets)
        reason += f"; candidates {', '.join(map(str, widened))} added beyond the edge of the range"
    reason += edge_note([c.over_sampling_batch_size for c in results], recommended, base.rollout_batch_size)
    return TuneReport(
        zero_std_rate=zero_std_rate, technical_rate=technical_rate, base=base, targets=targets, candidates=results,
        recommended=recommended, reason=reason, reference_wave_seconds=reference, source=source,
        wall_seconds=time.perf_counter() - started, calibration=calibration, widened=widened,
        bursts=[(int(step), float(rate)) for step, rate in bursts],
    )


def _simulate_sizes(sizes: Sequence[int], base: SimConfig, reference: float, jobs: int,
                    progress: Callable[[int, CandidateResult], None] | None) -> list[CandidateResult]:
    """Every size's :class:`CandidateResult`, in ``jobs`` processes when more than one."""
    # each candidate's config is validated as it is built (a size below rollout_batch_size is refused)
    configs = [base.with_(over_sampling_batch_size=size, max_consecutive_failed_groups=TUNING_LIMIT) for size in sizes]
    work = [(config, reference, base.max_consecutive_failed_groups) for config in configs]
    results: list[CandidateResult] = []
    if jobs > 1 and len(work) > 1:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        context = multiprocessing.get_context("spawn")  # a fresh interpreter: no runtime or threads inherited
        with ProcessPoolExecutor(max_workers=min(jobs, len(work)), mp_context=context) as pool:
            for candidate in pool.map(_simulate_candidate, work):
                results.append(candidate)
                if progress is not None:
                    progress(candidate.over_sampling_batch_size, candidate)
    else:
        for item in work:
            candidate = _simulate_candidate(item)
            results.append(candidate)
            if progress is not None:
                progress(candidate.over_sampling_batch_size, candidate)
    return results


def _simulate_candidate(item: tuple[SimConfig, float, int]) -> CandidateResult:
    """One candidate's simulation in tuning mode (a module-level function, so worker processes can run it)."""
    config, reference, max_consecutive_failed_groups = item
    result = tuning_run(config)
    return summarize(config.over_sampling_batch_size, result, reference_seconds=reference,
                     max_consecutive_failed_groups=max_consecutive_failed_groups,
                     burst_steps=frozenset(b.step for b in config.bursts))


_COLUMNS = (
    ("over", "over_sampling_batch_size", "d"),
    ("waves", "mean_waves", ".3f"),
    ("P(2nd)", "p_second_wave", ".3f"),
    ("P(3rd)", "p_third_wave", ".3f"),
    ("zero-adv", "zero_advantage_fraction", ".3f"),
    ("wasted", "wasted_sample_fraction", ".3f"),
    ("aborted", "aborted_per_step", ".1f"),
    ("rel.time", "relative_rollout_time", ".2f"),
    ("judged.tok", "generated_tokens_per_step", ",.0f"),
    ("aborted.tok", "aborted_tokens_per_step", ",.0f"),
    ("tokens/step", "total_tokens_per_step", ",.0f"),
    ("sec/step", "mean_rollout_seconds", ".1f"),
    ("tok.waste", "total_wasted_token_fraction", ".3f"),
    ("P(limit)", "p_limit", ".4f"),
)
"""The terminal table's columns: header, CandidateResult field, format spec. ``tokens/step`` (judged + aborted)
is the cost the recommendation weighs; ``tok.waste`` counts the aborted tokens too."""

def table_legend(report: TuneReport) -> str:
    """What every column of :func:`format_table` means, printed under it (the agent columns when shown).

    Example:
        >>> legend = table_legend(tune(zero_std_rate=0.3, technical_rate=0.0, candidates=[16], steps=3, widen=False))
        >>> [line.split()[0] for line in legend.splitlines() if not line.startswith(" ")][-3:]
        ['tok.waste', 'P(limit)', 'ok']
    """
    limit = report.base.max_consecutive_failed_groups
    lines = list(TABLE_LEGEND)
    lines.insert(-1, ("P(limit)", f"share of steps whose technical streak reached {limit} consecutive failed groups "
                                  "(--max-consecutive-failed-groups): a real run would have stopped there"))
    if report.base.agent is not None:
        lines[-1:-1] = _AGENT_LEGEND
    width = max(len(name) for name, _ in lines) + 2
    return "\n".join(f"{name:<{width}}{text}" for name, text in lines)


TABLE_LEGEND = (
    ("over", "the candidate over_sampling_batch_size (groups submitted per wave)"),
    ("waves", "waves per step, mean; P(2nd), P(3rd): the share of steps that opened a second, a third wave "
              "(target for P(2nd): --max-second-wave)"),
    ("zero-adv", "fallback groups / train groups: the zero-advantage share of the train batch (target: "
                 "--max-zero-advantage)"),
    ("wasted", "samples of judged groups that do not train / samples of judged groups"),
    ("aborted", "groups aborted per step when the batch filled (their generation discarded)"),
    ("rel.time", "step rollout time / one wave of rollout_batch_size groups run to completion"),
    ("judged.tok", "tokens of the judged groups per step; aborted.tok: of the aborted groups; tokens/step: both, the "
                   "cost weighed"),
    ("sec/step", "seconds per step (a model unless --from calibrated it, see below)"),
    ("tok.waste", "every token that does not train (aborted included) / every token generated"),
    ("ok", "yes: within both targets (zero-adv and P(2nd)); * the recommended candidate"),
)
"""The legend's lines: a column (or several) and what it means; ``P(limit)`` is added with the run's limit."""

_AGENT_LEGEND = (
    ("gen.s/step", "episode-seconds of generation per step; env.s/step: in tool calls; env.s.aborted: of those, in "
                   "episodes aborted at the step's end"),
)

_AGENT_COLUMNS = (
    ("gen.s/step", "generation_seconds_per_step", ",.0f"),
    ("env.s/step", "environment_seconds_per_step", ",.0f"),
    ("env.s.aborted", "aborted_environment_seconds_per_step", ",.0f"),
)
"""The columns an agent run adds (episode-seconds per step: generation, tools, tools of aborted episodes)."""


def cost_note(report: TuneReport) -> str:
    """Where the cost columns come from: fitted to a run, or the simulator's model (not a measurement).

    Example:
        >>> cost_note(tune(zero_std_rate=0.3, technical_rate=0.0, candidates=[16], steps=3)).startswith("sec/step")
        True
    """
    c = report.calibration
    tokens = ("tokens fitted to the run: response_length_median {:.0f} reproduces its {:.0f} tokens per judged "
              "rollout".format(c.response_length_median, c.observed_tokens_per_rollout) if c else
              "tokens/step from the simulator's token model (response_length_median "
              f"{report.base.response_length_median:.0f})")
    if report.time_measured:
        return (f"sec/step fitted to the run's rollout_seconds ({c.seconds_per_token:.4g} s per token of a group's "
                f"slowest rollout, {c.timed_steps} timed steps); {tokens}")
    return f"sec/step is a model, not a measurement (no rollout_seconds calibrated it); {tokens}"


def format_table(report: TuneReport) -> str:
    """The terminal table: one row per candidate, the recommended one marked ``*``, columns as wide as
    their widest cell.

    Example:
        >>> table = format_table(tune(zero_std_rate=0.3, technical_rate=0.0, candidates=[16, 32], steps=3, widen=False))
        >>> table.splitlines()[0].split()[:3], len(table.splitlines())
        (['over', 'waves', 'P(2nd)'], 4)
    """
    shown = _COLUMNS + (_AGENT_COLUMNS if report.base.agent is not None else ())
    columns = [tables.Column(name, spec=spec) for name, _, spec in shown] + [tables.Column("ok", align="<")]
    rows = [[getattr(c, attr) for _, attr, _ in shown]
            + [("yes" if c.meets_targets else "no") + ("*" if c.over_sampling_batch_size == report.recommended else "")]
            for c in report.candidates]
    return tables.format_table(columns, rows, rule=True)


PLOT_PANELS = (
    ("extra waves", "probability per step"),
    ("zero-advantage share of the train batch", "fallback groups / train groups"),
    ("cost per step: every token generated, and the time", "tokens per step"),
    ("aborted groups and waste", "aborted groups per step"),
)
"""The plot's four panels: title and y-axis title (the x axis is always ``over_sampling_batch_size``)."""

PLOT_SECONDARY_Y = {3: "seconds per step", 4: "fraction that does not train"}
"""Panels (numbered as :data:`PLOT_PANELS`, from 1) with a second y axis on the right, and its title."""


def wave_price(report: TuneReport) -> str | None:
    """One wave at the recommended size priced in generation and in environment time (None: single-turn).

    Example:
        >>> from shopsim_metrics.simulator.config import AgentModel, SimConfig
        >>> report = tune(zero_std_rate=0.3, technical_rate=0.0, candidates=[16], steps=3, widen=False,
        ...               base=SimConfig(agent=AgentModel()))
        >>> wave_price(report).startswith("one wave of 16 groups (128 agent episodes) costs")
        True
        >>> wave_price(report).splitlines()[1].startswith("its environment time by tool: search_products")
        True
    """
    if report.base.agent is None:
        return None
    c = report.by_size(report.recommended)
    waves = c.mean_waves or 1.0
    generation = (c.generation_seconds_per_step or 0.0) / waves
    environment = (c.environment_seconds_per_step or 0.0) / waves
    aborted = (c.aborted_environment_seconds_per_step or 0.0) / waves
    both = generation + environment
    share = f"{environment / both:.0%}" if both else "-"
    return (f"one wave of {c.over_sampling_batch_size} groups ({c.over_sampling_batch_size * report.base.n_samples_per_prompt} "
            f"agent episodes) costs {generation:,.0f} s of generation and {environment:,.0f} s in the environment "
            f"(episode-seconds, the mean over the steps' waves; {share} in the environment), {aborted:,.0f} s of them in "
            f"tool calls of episodes slime aborted at the step's end"
            + tool_price(c.tool_seconds_per_step, waves))


def tool_price(tools: dict[str, float] | None, waves: float) -> str:
    """The wave's environment time by tool (a second line; empty without tools).

    Example:
        >>> tool_price({"search_products": 300.0, "view_item": 100.0}, 2.0)
        '\\nits environment time by tool: search_products 150 s (75%), view_item 50 s (25%)'
    """
    total = sum((tools or {}).values())
    if not total:
        return ""
    return "\nits environment time by tool: " + ", ".join(
        f"{name} {seconds / waves:,.0f} s ({seconds / total:.0%})" for name, seconds in tools.items())


def plot_title(report: TuneReport, width: int = 150) -> str:
    """The plot's title: the recommendation, then the inputs on smaller lines wrapped at ``width``
    characters (a long ``--from`` path never runs off the page). HTML-escaped, lines joined by ``<br>``.

    Example:
        >>> report = tune(zero_std_rate=0.3, technical_rate=0.0, candidates=[16], steps=2, widen=False)
        >>> plot_title(report).split("<br>")[0]
        '<b>over_sampling_batch_size by simulation: recommended 16</b>'
    """
    import textwrap

    inputs = (f"zero-std rate {report.zero_std_rate:.3f}, technical rate {report.technical_rate:.3f} "
              f"({report.source}); rollout_batch_size {report.base.rollout_batch_size}, "
              f"{report.base.steps} simulated steps per candidate")
    lines = [f"<b>over_sampling_batch_size by simulation: recommended {report.recommended}</b>"]
    lines += [f"<span style='font-size:12px'>{html.escape(line)}</span>" for line in textwrap.wrap(inputs, width)]
    return "<br>".join(lines)


def write_plot(report: TuneReport, out_path: str | os.PathLike) -> Path:
    """A self-contained plotly HTML (plotly.js inline) of :func:`tune_figure`."""
    out = Path(out_path)
    out.parent.mkdir(parents=True, exist_ok=True)
    tune_figure(report).write_html(str(out), include_plotlyjs=True, full_html=True)
    return out


def tune_figure(report: TuneReport) -> Any:
    """The plotly figure of every candidate's figures against its size, sized for a 1400 x 900 window.

    Four panels (:data:`PLOT_PANELS`), each with its own legend below it, axis titles on every axis
    and the recommended size marked on all of them.
    """
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    cs = report.candidates
    sizes = [c.over_sampling_batch_size for c in cs]
    fig = make_subplots(rows=2, cols=2, subplot_titles=[title for title, _ in PLOT_PANELS],
                        specs=[[{}, {}], [{"secondary_y": True}, {"secondary_y": True}]],
                        horizontal_spacing=0.12, vertical_spacing=0.27)
    panels = {1: (1, 1), 2: (1, 2), 3: (2, 1), 4: (2, 2)}

    def add(panel: int, trace: Any, secondary: bool = False) -> None:
        trace.legend = "legend" if panel == 1 else f"legend{panel}"
        row, col = panels[panel]
        fig.add_trace(trace, row, col, secondary_y=secondary if panel in PLOT_SECONDARY_Y else None)

    add(1, go.Scatter(x=sizes, y=[c.p_second_wave for c in cs], name="P(2nd wave)"))
    add(1, go.Scatter(x=sizes, y=[c.p_third_wave for c in cs], name="P(3rd wave)"))
    add(2, go.Scatter(x=sizes, y=[c.zero_advantage_fraction for c in cs], name="zero-advantage fraction"))
    add(3, go.Bar(x=sizes, y=[c.generated_tokens_per_step for c in cs], name="judged groups' tokens"))
    add(3, go.Bar(x=sizes, y=[c.aborted_tokens_per_step for c in cs], name="aborted groups' tokens (simulated)"))
    add(3, go.Scatter(x=sizes, y=[c.mean_rollout_seconds for c in cs], name="seconds per step (right axis)",
                      mode="lines+markers"), secondary=True)
    add(4, go.Bar(x=sizes, y=[c.aborted_per_step for c in cs], name="aborted groups per step",
                  marker_color="#d9d9d9"))
    add(4, go.Scatter(x=sizes, y=[c.total_wasted_token_fraction for c in cs],
                      name="tokens that do not train (right axis)"), secondary=True)
    add(4, go.Scatter(x=sizes, y=[c.wasted_sample_fraction for c in cs],
                      name="judged samples that do not train (right axis)"), secondary=True)
    fig.add_hline(y=report.targets.max_second_wave, line_dash="dot", row=1, col=1,
                  annotation_text=f"target {report.targets.max_second_wave}")
    fig.add_hline(y=report.targets.max_zero_advantage, line_dash="dot", row=1, col=2,
                  annotation_text=f"target {report.targets.max_zero_advantage}")
    for panel, (row, col) in panels.items():
        fig.add_vline(x=report.recommended, line_dash="dash", line_color="green", row=row, col=col)
        fig.update_xaxes(title_text="over_sampling_batch_size", tickvals=sizes, row=row, col=col)
        fig.update_yaxes(title_text=PLOT_PANELS[panel - 1][1], rangemode="tozero", row=row, col=col,
                         **({"secondary_y": False} if panel in PLOT_SECONDARY_Y else {}))
        if panel in PLOT_SECONDARY_Y:
            fig.update_yaxes(title_text=PLOT_SECONDARY_Y[panel], rangemode="tozero", showgrid=False,
                             showticklabels=True, tickmode="auto", nticks=6, row=row, col=col, secondary_y=True)
    legends = {}
    for panel, (row, col) in panels.items():
        domain_x = fig.get_subplot(row, col).xaxis.domain
        domain_y = fig.get_subplot(row, col).yaxis.domain
        legends["legend" if panel == 1 else f"legend{panel}"] = dict(
            orientation="h", x=domain_x[0], xanchor="left", y=domain_y[0] - 0.11, yanchor="top",
            traceorder="normal")
    title = plot_title(report)
    top = 80 + 20 * title.count("<br>")  # room for every line of the title above the panels' own titles
    fig.update_layout(title=dict(text=title, x=0.01, xanchor="left", yref="container", y=1.0, yanchor="top",
                                 pad=dict(t=14)),
                      barmode="stack", height=900, margin=dict(t=top, b=30, l=70, r=70), **legends)
    return fig
