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
- ``generated_tokens_per_step``: response tokens generated per step (every judged group, every outcome);
- ``mean_rollout_seconds``: seconds per step (the simulated rollout time). It is a model unless the
  cost was calibrated from a run that recorded ``rollout_seconds`` (:mod:`.calibration`);
- ``wasted_token_fraction``: tokens of judged groups that do not train / tokens of judged groups.

**Recommendation rule**: among the candidates whose zero-advantage fraction is at most
``max_zero_advantage`` (default 0.05) and whose P(second wave) is at most ``max_second_wave``
(default 0.05), the one that generates the fewest tokens per step (ties go to the smaller one;
usually the smallest, but a candidate that avoids second waves can be cheaper than a smaller one).
When none meets both, the candidate that misses them by the smallest factor,
``max(zero_adv / max_zero_advantage, p_second / max_second_wave)``; ties go to fewer tokens, then the
smaller one.

Example:
    >>> report = tune(zero_std_rate=0.4, technical_rate=0.0, candidates=[16, 32], steps=50)
    >>> [c.over_sampling_batch_size for c in report.candidates], report.recommended
    ([16, 32], 32)
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

from shopsim_metrics.step.records import StepRecord
from shopsim_metrics.simulator.calibration import COST_COLUMNS, CostCalibration, LedgerTokens, ObservedCost
from shopsim_metrics.simulator.config import SimConfig
from shopsim_metrics.simulator.latency import reference_wave_time
from shopsim_metrics.simulator.loop import TUNING_ARGS, SimulationResult, Simulator, rng_streams, wave_time_model

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
    generated_tokens_per_step: float = 0.0
    wasted_token_fraction: float = 0.0
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
            "time_measured": self.time_measured,
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


def default_candidates(rollout_batch_size: int) -> list[int]:
    """``DEFAULT_MULTIPLIERS`` times ``rollout_batch_size``, rounded, unique, ascending.

    Example:
        >>> default_candidates(16), default_candidates(5)
        ([16, 24, 32, 48, 64], [5, 8, 10, 15, 20])
    """
    return sorted({max(rollout_batch_size, math.ceil(rollout_batch_size * m)) for m in DEFAULT_MULTIPLIERS})


RATE_COLUMNS = ("rollout_id", "accepted_group_count", "zero_std_group_count", "technical_group_drop_count",
                "rollout_batch_size", "n_samples_per_prompt", "global_batch_size", "over_sampling_batch_size")
"""The per-step columns the rates and the run's knobs are read from."""


def measured_rates(path: str | os.PathLike) -> MeasuredRates:
    """Zero-std and technical rates of a run: ``sum(zero_std_group_count) / sum(accepted)`` and likewise.

    ``path`` is a ``steps.jsonl`` or the run directory holding it. The knobs in force are taken from
    the last record (so ``tune --from`` simulates the run's own batch sizes unless told otherwise).
    """
    from shopsim_metrics.sinks.steps_reader import read_step_columns

    return rates_of(read_step_columns(path, names=RATE_COLUMNS), path)


def measured_rates_and_cost(path: str | os.PathLike) -> tuple[MeasuredRates, ObservedCost]:
    """:func:`measured_rates` and :func:`~.calibration.read_observed_cost` of a run in ONE pass over its
    records (what ``tune --from`` reads: a big file is read once)."""
    from shopsim_metrics.sinks.steps_reader import read_step_columns

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
    return MeasuredRates(
        zero_std_rate=sum(v or 0 for v in table.columns["zero_std_group_count"]) / accepted,
        technical_rate=sum(v or 0 for v in table.columns["technical_group_drop_count"]) / accepted,
        accepted_groups=accepted,
        steps=len(table),
        rollout_batch_size=_knob(last.get("rollout_batch_size")),
        n_samples_per_prompt=_knob(last.get("n_samples_per_prompt")),
        global_batch_size=_knob(last.get("global_batch_size")),
        over_sampling_batch_size=_knob(last.get("over_sampling_batch_size")),
    )


def _knob(value: object) -> int | None:
    """A batch knob read from a record: a positive integer, else None (the simulator's default is used)."""
    return value if isinstance(value, int) and not isinstance(value, bool) and 0 < value <= MAX_KNOB else None


def summarize(size: int, result: SimulationResult, *, reference_seconds: float,
              max_consecutive_failed_groups: int) -> CandidateResult:
    """A candidate's figures from its simulated run (records and the loop's own timing)."""
    records = [r for r in result.records if not r.terminated]
    n = len(records) or 1
    train = sum(r.train_group_count for r in records)
    accepted_samples = sum(r.accepted_sample_count for r in records)
    train_samples = sum(r.train_sample_count for r in records)
    seconds = sum(o.rollout_time for o in result.outcomes) / (len(result.outcomes) or 1)
    judged_tokens = sum(r.generated_token_count for r in records)
    train_tokens = sum(r.train_token_count for r in records)
    return CandidateResult(
        over_sampling_batch_size=size,
        steps=len(records),
        mean_waves=sum(r.wave_count for r in records) / n,
        p_second_wave=sum(r.wave_count >= 2 for r in records) / n,
        p_third_wave=sum(r.wave_count >= 3 for r in records) / n,
        zero_advantage_fraction=sum(r.fallback_group_count for r in records) / train if train else 0.0,
        wasted_sample_fraction=(accepted_samples - train_samples) / accepted_samples if accepted_samples else 0.0,
        aborted_per_step=sum(r.aborted_group_count for r in records) / n,
        submitted_per_step=sum(r.submitted_group_count for r in records) / n,
        relative_rollout_time=seconds / reference_seconds if reference_seconds else float("nan"),
        mean_rollout_seconds=seconds,
        p_limit=sum(r.max_consecutive_technical_failures >= max_consecutive_failed_groups for r in records) / n,
        generated_tokens_per_step=judged_tokens / n,
        wasted_token_fraction=(judged_tokens - train_tokens) / judged_tokens if judged_tokens else 0.0,
    )


def recommend(candidates: Sequence[CandidateResult], targets: TuneTargets) -> tuple[int, str]:
    """The recommendation rule of the module docstring: ``(size, reason)``; marks ``meets_targets``.

    Example:
        >>> mk = lambda size, z, p2: CandidateResult(size, 1, 1, p2, 0, z, 0, 0, 0, 1, 1, 0)
        >>> recommend([mk(16, 0.2, 0.0), mk(32, 0.01, 0.0), mk(48, 0.0, 0.0)], TuneTargets())[0]
        32
        >>> recommend([mk(16, 0.5, 0.0), mk(32, 0.2, 0.0)], TuneTargets())[0]
        32
        >>> cost = lambda size, tokens: CandidateResult(size, 1, 1, 0, 0, 0, 0, 0, 0, 1, 1, 0, tokens)
        >>> recommend([cost(16, 9000.0), cost(24, 7000.0), cost(32, 8000.0)], TuneTargets())[0]
        24
    """
    if not candidates:
        raise ValueError("recommend() needs at least one candidate")
    ordered = sorted(candidates, key=lambda c: c.over_sampling_batch_size)
    for c in ordered:
        c.meets_targets = (c.zero_advantage_fraction <= targets.max_zero_advantage
                           and c.p_second_wave <= targets.max_second_wave)
    meeting = [c for c in ordered if c.meets_targets]
    if meeting:
        c = min(meeting, key=lambda c: c.generated_tokens_per_step)  # min() keeps the smaller on ties
        return c.over_sampling_batch_size, (
            f"fewest tokens per step ({c.generated_tokens_per_step:,.0f}) with zero-advantage fraction "
            f"{c.zero_advantage_fraction:.3f} <= {targets.max_zero_advantage} and P(2nd wave) "
            f"{c.p_second_wave:.3f} <= {targets.max_second_wave}")

    def miss(c: CandidateResult) -> float:
        return max(c.zero_advantage_fraction / max(targets.max_zero_advantage, 1e-12),
                   c.p_second_wave / max(targets.max_second_wave, 1e-12))

    best = min(ordered, key=lambda c: (miss(c), c.generated_tokens_per_step))  # then the smaller on ties
    return best.over_sampling_batch_size, (
        f"no candidate meets both targets (zero-advantage <= {targets.max_zero_advantage}, P(2nd wave) <= "
        f"{targets.max_second_wave}); best trade-off: misses them by a factor {miss(best):.2f}")


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
) -> TuneReport:
    """Simulate every candidate at the given rates and recommend one (see the module docstring).

    ``base`` holds the other knobs and the latency model (default :class:`SimConfig` defaults).
    ``jobs > 1`` simulates candidates in that many processes (same figures: each candidate has its
    own simulation from the same seed). ``calibration`` (:func:`.calibration.calibrate`) replaces
    ``base``'s token model and time per token by those fitted to a run.
    """
    import time

    started = time.perf_counter()
    base = (base or SimConfig()).with_(steps=steps, seed=seed, zero_std_rate=zero_std_rate,
                                       technical_rate=technical_rate, bursts=(), max_technical_streak=None)
    if calibration is not None:
        base = calibration.apply(base)
    targets = targets or TuneTargets()
    sizes = sorted(set(candidates)) if candidates is not None else default_candidates(base.rollout_batch_size)
    if not technical_rate < 1.0:
        raise ValueError(f"technical_rate must be below 1 to tune (every group failing never fills a train batch; "
                         f"the run would terminate at the limit); got {technical_rate}")
    if not sizes:
        raise ValueError("candidates must hold at least one over_sampling_batch_size")
    # each candidate's config is validated as it is built (a size below rollout_batch_size is refused)
    configs = [base.with_(over_sampling_batch_size=size, max_consecutive_failed_groups=TUNING_LIMIT) for size in sizes]
    _, _, reference_rng = rng_streams(seed)
    reference = reference_wave_time(wave_time_model(base, reference_rng), groups=base.rollout_batch_size,
                                    concurrency=base.max_concurrent_groups)
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
    recommended, reason = recommend(results, targets)
    return TuneReport(
        zero_std_rate=zero_std_rate, technical_rate=technical_rate, base=base, targets=targets, candidates=results,
        recommended=recommended, reason=reason, reference_wave_seconds=reference, source=source,
        wall_seconds=time.perf_counter() - started, calibration=calibration,
    )


def _simulate_candidate(item: tuple[SimConfig, float, int]) -> CandidateResult:
    """One candidate's simulation in tuning mode (a module-level function, so worker processes can run it)."""
    config, reference, max_consecutive_failed_groups = item
    result = Simulator(config, sinks=[], extra_args=TUNING_ARGS).run()
    return summarize(config.over_sampling_batch_size, result, reference_seconds=reference,
                     max_consecutive_failed_groups=max_consecutive_failed_groups)


_COLUMNS = (
    ("over", "over_sampling_batch_size", "{:d}"),
    ("waves", "mean_waves", "{:.3f}"),
    ("P(2nd)", "p_second_wave", "{:.3f}"),
    ("P(3rd)", "p_third_wave", "{:.3f}"),
    ("zero-adv", "zero_advantage_fraction", "{:.3f}"),
    ("wasted", "wasted_sample_fraction", "{:.3f}"),
    ("aborted", "aborted_per_step", "{:.1f}"),
    ("rel.time", "relative_rollout_time", "{:.2f}"),
    ("tokens/step", "generated_tokens_per_step", "{:.0f}"),
    ("sec/step", "mean_rollout_seconds", "{:.1f}"),
    ("tok.waste", "wasted_token_fraction", "{:.3f}"),
    ("P(limit)", "p_limit", "{:.4f}"),
)


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
    """The terminal table: one row per candidate, the recommended one marked ``*``."""
    header = "  ".join(f"{name:>11}" for name, _, _ in _COLUMNS) + "  ok"
    lines = [header, "-" * len(header)]
    for c in report.candidates:
        cells = "  ".join(f"{fmt.format(getattr(c, attr)):>11}" for _, attr, fmt in _COLUMNS)
        mark = "*" if c.over_sampling_batch_size == report.recommended else " "
        lines.append(f"{cells}  {'yes' if c.meets_targets else 'no ':>3}{mark}")
    return "\n".join(lines)


def write_plot(report: TuneReport, out_path: str | os.PathLike) -> Path:
    """A self-contained plotly HTML (plotly.js inline): the figures of every candidate against its size."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    sizes = [c.over_sampling_batch_size for c in report.candidates]
    fig = make_subplots(rows=2, cols=2, subplot_titles=(
        "waves per step", "zero-advantage fraction of the train batch", "wasted samples / aborted groups",
        "relative rollout time and tokens per step"), specs=[[{}, {}], [{"secondary_y": True}, {}]])
    fig.add_trace(go.Scatter(x=sizes, y=[c.mean_waves for c in report.candidates], name="mean waves"), 1, 1)
    fig.add_trace(go.Scatter(x=sizes, y=[c.p_second_wave for c in report.candidates], name="P(2nd wave)"), 1, 1)
    fig.add_trace(go.Scatter(x=sizes, y=[c.p_third_wave for c in report.candidates], name="P(3rd wave)"), 1, 1)
    fig.add_trace(go.Scatter(x=sizes, y=[c.zero_advantage_fraction for c in report.candidates],
                             name="zero-advantage fraction"), 1, 2)
    fig.add_hline(y=report.targets.max_zero_advantage, line_dash="dot", row=1, col=2)
    fig.add_trace(go.Scatter(x=sizes, y=[c.wasted_sample_fraction for c in report.candidates],
                             name="wasted sample fraction"), 2, 1)
    fig.add_trace(go.Bar(x=sizes, y=[c.aborted_per_step for c in report.candidates], name="aborted groups / step",
                         opacity=0.4), 2, 1, secondary_y=True)
    fig.add_trace(go.Scatter(x=sizes, y=[c.relative_rollout_time for c in report.candidates],
                             name="relative rollout time"), 2, 2)
    smallest_tokens = report.candidates[0].generated_tokens_per_step or 1.0
    fig.add_trace(go.Scatter(x=sizes, y=[c.generated_tokens_per_step / smallest_tokens for c in report.candidates],
                             name=f"tokens per step / the smallest candidate's ({smallest_tokens:,.0f})"), 2, 2)
    fig.add_vline(x=report.recommended, line_dash="dash", line_color="green")
    fig.update_xaxes(title_text="over_sampling_batch_size", tickvals=sizes)
    fig.update_layout(
        title=html.escape(f"over_sampling_batch_size by simulation: zero-std rate {report.zero_std_rate:.3f}, "
                          f"technical rate {report.technical_rate:.3f} ({report.source}); "
                          f"recommended {report.recommended}"),
        height=800)
    out = Path(out_path)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.write_html(str(out), include_plotlyjs=True, full_html=True)
    return out
