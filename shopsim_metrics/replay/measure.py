"""What skipping and adaptive waves would have cost and saved on a trace: one replay per setting, pooled over seeds.

Each setting (a skip rule, a wave size) replays the trace through the simulator's exact slime loop
(waves, ``remaining``, fallback, aborts; the project's real filter, data source and monitor) at the
same knobs and seeds (:class:`~shopsim_metrics.replay.source.TraceGroupSource`: the seed shuffles the
epochs and draws the finishing order). Per setting, pooled over the seeds (sums over sums, never a
chosen seed):

- **tokens per informative group**: every token generated (aborted groups included) / trained groups
  with spread; ``ratio_vs_off`` is that of ``off`` with fixed waves over this one's;
- **lost signal**: skipped draws whose recorded visit (nearest in training time) was informative, per
  informative trained group: the signal a rule forwent for each unit it trained;
- **P(second wave)** and **aborted tokens per step**.

Rules: ``off``, ``greso``, ``predictive`` (the project's data source with its settings) and
``oracle``: skips exactly the draws whose recorded visit was zero-std, knowing the future and blind
to cost; the reference a rule that learns from a prompt's past can approach, not reach.

Technical failures are not replayed (``technical_rate`` 0): they cost every setting alike.

Example:
    >>> from shopsim_metrics.outcomes.trace import trace_from_mapping
    >>> trace = trace_from_mapping({str(i): [float(i % 3 == 0), 0.5] * 6 for i in range(24)}, n_samples=4)
    >>> knobs = ReplayKnobs(rollout_batch_size=4, over_sampling_batch_size=8, steps=12)
    >>> off, oracle = (replay_setting(trace, knobs, skip, "fixed", seeds=(0,)) for skip in ("off", "oracle"))
    >>> off.skipped_prompts, off.lost_signal, oracle.skipped_prompts > 0, oracle.lost_signal
    (0, 0.0, True, 0.0)
"""

from __future__ import annotations

import functools
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Iterable, Mapping

from shopsim_metrics.judging.verdicts import ZERO_STD_ALL_FAIL, ZERO_STD_ALL_PASS, ZERO_STD_OTHER
from shopsim_metrics.replay.source import BY_OUTCOME, TraceGroupSource, trace_prompt_names
from shopsim_metrics.outcomes.trace import Trace
from shopsim_metrics.settings import PREFIX, PROMPT_SKIP_MODES, WAVE_SIZE_MODES
from shopsim_metrics.simulator.config import PREDICTIVE_KNOBS, SimConfig
from shopsim_metrics.simulator.loop import rng_streams, token_rng
from shopsim_metrics.simulator.skipping.skip_measure import (
    CostSink, SkipMeasure, data_source_skipping_by, pool_ids, pooled_measure,
)
from shopsim_metrics.simulator.token_model import TokenModel

ORACLE = "oracle"
REPLAY_SKIPS = (*PROMPT_SKIP_MODES, ORACLE)
"""The rules a replay compares: the project's modes, then the oracle reference."""
REPLAY_SETTINGS = (*(PREFIX + knob for knob in PREDICTIVE_KNOBS), "shopsim_wave_fill_probability")
"""The settings a replay lets the user try (each a flag, read by the setting: ``settings/flags.py``); each is a field
of :class:`~shopsim_metrics.simulator.config.SimConfig` by the same name."""


@dataclass(frozen=True)
class ReplayKnobs:
    """slime's knobs and the rules' settings a replay runs at (None: the settings' defaults)."""

    rollout_batch_size: int
    over_sampling_batch_size: int
    steps: int
    settings: Mapping[str, Any] = field(default_factory=dict)
    """The rules' settings the command line gave (:data:`REPLAY_SETTINGS`, by field name); the rest at their defaults."""
    lengths: str = BY_OUTCOME  # the token model's lengths without recorded tokens (replay.source.LENGTH_MODES)

    def config(self, trace: Trace, prompt_skip: str, wave_size: str) -> SimConfig:
        """The simulator's config of one setting over ``trace`` (``oracle`` asks the data source as ``greso`` would)."""
        return SimConfig(
            rollout_batch_size=self.rollout_batch_size, over_sampling_batch_size=self.over_sampling_batch_size,
            n_samples_per_prompt=trace.n_samples, steps=self.steps, prompt_pool=len(trace.prompts),
            technical_rate=0.0, max_concurrent_groups=None, wave_size=wave_size,
            prompt_skip="greso" if prompt_skip == ORACLE else prompt_skip, **self.settings)


class TraceSink(CostSink):
    """A replay's figures; a skipped draw forgoes one informative group exactly when its recorded visit had spread."""

    def __init__(self, source: TraceGroupSource, steps: int, pool_of: Callable[[], dict[str, int]] | None = None) -> None:
        super().__init__(source.prompts, steps, pool_of)
        self.trace = source.trace

    def forgone(self, step: int, pool_id: int) -> float:
        return 0.0 if self.trace.visit_at(pool_id, step, self.steps).zero_std else 1.0


def trace_pool_ids(trace: Trace) -> Callable[[], dict[str, int]]:
    """The trace's prompt keys -> pool ids, computed once when first called."""
    return functools.cache(lambda: pool_ids(trace_prompt_names(trace)))


def oracle_kind(trace: Trace, steps: int) -> Callable[[Any, str, int, int], str | None]:
    """The oracle's decision: the zero-std kind of the recorded visit at the step, None when it had spread."""
    n = trace.n_samples

    def decide(data_source: Any, key: str, pool_id: int, step: int) -> str | None:
        visit = trace.visit_at(pool_id, step, steps)
        if not visit.zero_std:
            return None
        return ZERO_STD_ALL_PASS if visit.successes == n else ZERO_STD_ALL_FAIL if visit.successes == 0 else ZERO_STD_OTHER

    return decide


def replay_setting(trace: Trace, knobs: ReplayKnobs, prompt_skip: str, wave_size: str, *, seeds: Iterable[int],
                   progress: Callable[[Any], None] | None = None,
                   pool_of: Callable[[], dict[str, int]] | None = None) -> SkipMeasure:
    """One setting replayed at each seed, pooled (see the module docstring); ``pool_of``: the trace's prompt keys
    (:func:`trace_pool_ids`), shared by the settings of one replay (hashed once, when a draw is first skipped)."""
    pool_of = pool_of or trace_pool_ids(trace)
    if prompt_skip not in REPLAY_SKIPS:
        raise ValueError(f"prompt_skip: expected one of {', '.join(REPLAY_SKIPS)}; got {prompt_skip!r}")
    if wave_size not in WAVE_SIZE_MODES:
        raise ValueError(f"wave_size: expected one of {', '.join(WAVE_SIZE_MODES)}; got {wave_size!r}")
    config = knobs.config(trace, prompt_skip, wave_size)

    def prepare(run: SimConfig) -> tuple[TraceGroupSource, CostSink]:
        _, reward_rng, _ = rng_streams(run.seed)
        source = TraceGroupSource(run, reward_rng, trace, TokenModel.from_config(run, token_rng(run.seed)),
                                  lengths=knobs.lengths)
        if prompt_skip == ORACLE:
            source.data_source = data_source_skipping_by(source.data_source, oracle_kind(trace, run.steps))
        return source, TraceSink(source, run.steps, pool_of)

    return pooled_measure(config, seeds, prepare, progress)


@dataclass(frozen=True)
class ReplayRow:
    """One setting's figures, as ``replay --json`` writes them."""

    prompt_skip: str
    wave_size: str
    tokens_per_informative_group: float | None
    ratio_vs_off: float | None  # off with fixed waves' tokens per informative group over this one's
    lost_signal_per_informative: float
    p_second_wave: float
    aborted_tokens_per_step: float
    skipped_per_step: float
    informative_groups: int
    steps: int
    seeds: list[int]
    lengths: str  # "recorded" (the trace's tokens), else the token model's mode (replay.source.LENGTH_MODES)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def replay_rows(trace: Trace, knobs: ReplayKnobs, *, seeds: Iterable[int],
                skips: Iterable[str] = REPLAY_SKIPS, waves: Iterable[str] = WAVE_SIZE_MODES,
                progress: Callable[[Any], None] | None = None) -> list[ReplayRow]:
    """Every (rule, wave size) replayed; ``off`` with fixed waves always runs first (every ratio's baseline).
    ``progress(setting)`` is called after every replayed step with the setting's name (``"greso/adaptive"``)."""
    seeds = tuple(seeds)
    settings = [("off", "fixed")] + [(s, w) for s in skips for w in waves if (s, w) != ("off", "fixed")]
    pool_of = trace_pool_ids(trace)
    measures = {}
    for skip, wave in settings:
        done = (lambda _, name=f"{skip}/{wave}": progress(name)) if progress is not None else None
        measures[skip, wave] = replay_setting(trace, knobs, skip, wave, seeds=seeds, progress=done,
                                                pool_of=pool_of)
    base = measures["off", "fixed"].tokens_per_informative_group
    rows = []
    for (skip, wave), m in measures.items():
        mine = m.tokens_per_informative_group
        rows.append(ReplayRow(
            prompt_skip=skip, wave_size=wave, tokens_per_informative_group=mine,
            ratio_vs_off=base / mine if base and mine else None, lost_signal_per_informative=m.lost_signal,
            p_second_wave=m.second_wave_probability, aborted_tokens_per_step=m.aborted_tokens_per_step,
            skipped_per_step=m.skipped_prompts / m.steps if m.steps else 0.0,
            informative_groups=m.informative_groups, steps=m.steps, seeds=list(seeds),
            lengths="recorded" if trace.tokens_recorded else knobs.lengths))
    return rows


def default_steps(trace: Trace, over_sampling_batch_size: int) -> int:
    """Steps over which a replay without skipping draws each prompt about as often as the trace visited it
    (a recorded run's own steps when the trace has them).

    Example:
        >>> from shopsim_metrics.outcomes.trace import trace_from_mapping
        >>> default_steps(trace_from_mapping({"a": [0.5] * 10, "b": [0.5] * 6}, 8), over_sampling_batch_size=4)
        4
    """
    if trace.run is not None:
        return trace.run.steps
    return max(1, -(-trace.visit_count // over_sampling_batch_size))

