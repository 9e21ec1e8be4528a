"""What a skip rule costs in signal, measured against the simulator's truth (``benchmarks/bench_prompt_skip.py``).

A live run cannot know what a skipped prompt would have taught; the simulator can: every pool
prompt has a true success rate ``p = sigmoid(skill(step) - difficulty)`` at every step. From it:

- **lost signal**: for every skipped draw, ``P(spread) = 1 - p^n - (1 - p)^n`` (the chance its group
  would have been informative) summed, per informative trained group: the informative groups the
  rule forwent for each one trained;
- **return delay**: a prompt *becomes learnable* at the first step its ``P(spread)`` reaches 1/2
  after a step below it; its delay is the steps until it is next judged. Prompts never judged again
  count with the steps left in the run (a lower bound), so the median never flatters a rule.

The same truth gives the **reference** every rule is judged against (:class:`OracleSkip`): a rule that
skips a drawn prompt when its true ``P(spread)`` at that step is below a threshold, either knowing
every prompt from the start (``oracle``), or only the prompts judged before in the run
(``oracle_seen``: what any rule that learns from a prompt's own visits could at best do by the
chance of spread alone, since a prompt's first visit tells nothing before it is generated; both are
blind to a prompt's token cost). It runs through the real data source and
loop (:class:`~shopsim_metrics.prompts.data_source.PromptSkipDataSource` with its decision replaced), so its waves,
aborts and records are those of a real rule.

Everything else (tokens per informative group, P(second wave), aborted tokens) is the records'.

Example:
    >>> from shopsim_metrics.simulator.config import SimConfig
    >>> cfg = SimConfig(steps=20, prompt_pool=64, skill_start=-2.0, skill_end=2.0, learning_steps=10.0,
    ...                 difficulty_spread=4.0, partial_credit_rate=0.0, technical_rate=0.0, prompt_skip="greso")
    >>> m = measure_skipping(cfg, seeds=(0,))
    >>> m.skipped_prompts > 0, m.lost_signal > 0, m.steps
    (True, True, 20)
    >>> seen = measure_skipping(cfg, seeds=(0,), oracle=OracleSkip(threshold=0.3, seen_only=True))
    >>> everything = measure_skipping(cfg, seeds=(0,), oracle=OracleSkip(threshold=0.3))
    >>> 0 < seen.skipped_prompts < everything.skipped_prompts
    True
"""

from __future__ import annotations

import functools
import statistics
from dataclasses import dataclass, replace
from typing import Any, Callable, Iterable

import numpy as np

from shopsim_metrics.judging.verdicts import ZERO_STD_ALL_FAIL, ZERO_STD_ALL_PASS
from shopsim_metrics.judging.prompt_keys import prompt_key
from shopsim_metrics.prompts.skip_policy import PolicyDecision
from shopsim_metrics.simulator.config import SimConfig
from shopsim_metrics.simulator.epochs import EpochPromptSource
from shopsim_metrics.simulator.loop import Simulator, make_group_source, rng_streams, token_rng
from shopsim_metrics.simulator.samples import SimSample
from shopsim_metrics.simulator.skipping.skip_saving import alerts_silenced
from shopsim_metrics.simulator.token_model import TokenModel
from shopsim_metrics.sinks.base import StepSink
from shopsim_metrics.record.records import StepRecord


@dataclass(frozen=True)
class SkipMeasure:
    """One setting's figures, pooled over seeds (sums over sums; the median over every prompt's delay)."""

    steps: int
    total_tokens: int
    aborted_tokens: int
    informative_groups: int
    multi_wave_steps: int
    skipped_prompts: int
    forgone_informative: float  # expected informative groups of the skipped draws
    return_delays: tuple[int, ...]
    seed_lost_signals: tuple[float, ...] = ()  # each seed's lost signal (its forgone over its informative trained)
    estimated_forgone: float | None = None
    """The guard's estimate at each seed's last record times that seed's informative trained groups, summed (None:
    no estimate recorded: not ``predictive``): over ``informative_groups``, the estimate pooled as the truth is."""

    @property
    def tokens_per_informative_group(self) -> float | None:
        return self.total_tokens / self.informative_groups if self.informative_groups else None

    @property
    def second_wave_probability(self) -> float:
        return self.multi_wave_steps / self.steps if self.steps else 0.0

    @property
    def aborted_tokens_per_step(self) -> float:
        return self.aborted_tokens / self.steps if self.steps else 0.0

    @property
    def lost_signal(self) -> float:
        """Expected informative groups forgone per informative group trained."""
        return self.forgone_informative / self.informative_groups if self.informative_groups else 0.0

    @property
    def lost_signal_estimate(self) -> float | None:
        """The guard's lost signal estimate, pooled over the seeds as :attr:`lost_signal` is (None: none recorded)."""
        if self.estimated_forgone is None or not self.informative_groups:
            return None
        return self.estimated_forgone / self.informative_groups

    @property
    def median_return_delay(self) -> float | None:
        return statistics.median(self.return_delays) if self.return_delays else None


@dataclass(frozen=True)
class OracleSkip:
    """The reference rule: skip a draw whose true ``P(spread)`` is below ``threshold`` (see the module docstring).

    ``seen_only``: only prompts already judged in the run can be skipped (their first visit is generated).
    """

    threshold: float
    seen_only: bool = False

    @property
    def name(self) -> str:
        return f"oracle_seen<{self.threshold:g}" if self.seen_only else f"oracle<{self.threshold:g}"


def success_probability(source: EpochPromptSource, config: SimConfig, step: int) -> np.ndarray:
    """Every pool prompt's true success rate ``p = sigmoid(skill(step) - difficulty)`` at ``step``."""
    return 1.0 / (1.0 + np.exp(source.difficulty - config.skill_at(step)))


def spread_probability(source: EpochPromptSource, config: SimConfig, step: int) -> np.ndarray:
    """Every pool prompt's true ``P(spread) = 1 - p^n - (1 - p)^n`` at ``step``.

    Example:
        >>> import numpy as np
        >>> cfg = SimConfig(prompt_pool=2, skill_start=0.0, skill_end=0.0, technical_rate=0.0)
        >>> src = EpochPromptSource(cfg, np.random.default_rng(0)); src.difficulty[:] = (0.0, 20.0)
        >>> np.round(spread_probability(src, cfg, 0), 3).tolist()
        [0.992, 0.0]
    """
    return _spread(success_probability(source, config, step), config.n_samples_per_prompt)


def _spread(p: Any, n: int) -> Any:
    """``1 - p^n - (1 - p)^n``: the chance a group of ``n`` with success rate ``p`` (a number or an array) has spread."""
    return 1.0 - p**n - (1.0 - p) ** n


def _oracle_data_source(data_source: Any, source: EpochPromptSource, config: SimConfig, oracle: OracleSkip) -> Any:
    """The run's real data source with its skip decision replaced by ``oracle``'s (same waves, same records)."""

    def decide(ds: Any, key: str, pool_id: int, step: int) -> str | None:
        if oracle.seen_only and ds.history.success_evidence(key) is None:
            return None
        source._drift(step)  # the difficulties of this step, as its groups will be drawn (idempotent)
        p = float(success_probability(source, config, step)[pool_id])
        if _spread(p, config.n_samples_per_prompt) >= oracle.threshold:
            return None
        return ZERO_STD_ALL_PASS if p > 0.5 else ZERO_STD_ALL_FAIL

    return data_source_skipping_by(data_source, decide)


def data_source_skipping_by(data_source: Any, decide: Callable[[Any, str, int, int], str | None]) -> Any:
    """The run's real data source with its skip decision replaced by ``decide(data_source, key, pool_id, step)``:
    the zero-std kind a draw is skipped as, or None to keep it (same waves, same records as a real rule's).

    The reference rules use it: they know the truth of a pool prompt (``metadata["pool_id"]``) at a step."""

    class TruthDataSource(type(data_source)):  # type: ignore[misc]
        def _skips(self, policy: Any, group: list[Any]) -> bool:  # the truth decides, not the policy
            key, _ = prompt_key(group, self.metadata_key)
            if key is None:
                return False
            kind = decide(self, key, group[0].metadata["pool_id"], self.monitor.loop_state.rollout_step() or 0)
            if kind is None:
                return False
            self._record_skip(group, key, PolicyDecision(skip=True, probability=1.0, zero_std_run=0, kind=kind))
            return True

    return TruthDataSource(data_source.args, inner=data_source.inner, monitor_of=data_source.monitor_of)


def pool_ids(prompts: list[Any]) -> dict[str, int]:
    """Each pool prompt's key, as :class:`~shopsim_metrics.simulator.epochs.PoolDataSource` serves it -> its pool id.

    >>> ids = pool_ids(["a", "b"]); sorted(ids.values())
    [0, 1]
    """
    return {prompt_key([SimSample(prompt=prompt, label=f"answer {i}", metadata={"pool_id": i})])[0]: i
            for i, prompt in enumerate(prompts)}


class CostSink(StepSink):
    """Pools a run's records into the figures of :class:`SkipMeasure`; ``forgone(step, pool_id)`` says what
    a skipped draw of a pool prompt at a step cost in expected informative groups (subclasses know the truth)."""

    name = "cost"

    def __init__(self, prompts: list[Any], steps: int, pool_of: Callable[[], dict[str, int]] | None = None) -> None:
        self._pool_of = pool_of or functools.cache(lambda: pool_ids(prompts))
        self.steps = steps
        self.records = 0
        self.totals = dict(total_tokens=0, aborted_tokens=0, informative_groups=0, multi_wave_steps=0,
                           skipped_prompts=0)
        self.forgone_informative = 0.0
        self.lost_signal_estimate: float | None = None  # the guard's, as of the last record that had one

    @property
    def pool_of(self) -> dict[str, int]:
        """Each pool prompt's key -> its pool id, made when first asked for (a run that skips nothing never
        hashes its pool; ``pool_of``, given, shares one among runs of one pool)."""
        return self._pool_of()

    def forgone(self, step: int, pool_id: int) -> float:
        raise NotImplementedError

    def delays(self) -> list[int]:
        """Steps before each prompt that became learnable was judged again (none known by default)."""
        return []

    def emit(self, record: StepRecord) -> None:
        step = record.rollout_id
        for row in record.skipped_prompts or []:
            self.forgone_informative += self.forgone(step, self.pool_of[row["prompt_key"]])
        t = self.totals
        t["total_tokens"] += record.total_token_count or 0
        t["aborted_tokens"] += record.aborted_token_count or 0
        t["informative_groups"] += record.train_group_count - record.fallback_group_count
        t["multi_wave_steps"] += record.wave_count > 1
        t["skipped_prompts"] += record.skipped_prompt_count or 0
        if record.skip_lost_signal_estimate is not None:
            self.lost_signal_estimate = record.skip_lost_signal_estimate
        self.records += 1


class _TruthSink(CostSink):
    """Reads each emitted record against the source's true success rates at that step."""

    def __init__(self, source: EpochPromptSource, config: SimConfig) -> None:
        super().__init__(source.prompts, config.steps)
        self.source, self.config = source, config
        self._spread: tuple[int, np.ndarray] | None = None  # (step, every prompt's P(spread) at it)
        self.spread_before = np.zeros(source.pool)
        self.learnable_since: dict[int, int] = {}  # pool id -> the step it became learnable, not judged since
        self.judged_delays: list[int] = []

    def spread_at(self, step: int) -> np.ndarray:
        if self._spread is None or self._spread[0] != step:
            self._spread = (step, spread_probability(self.source, self.config, step))
        return self._spread[1]

    def forgone(self, step: int, pool_id: int) -> float:
        return float(self.spread_at(step)[pool_id])

    def emit(self, record: StepRecord) -> None:
        step = record.rollout_id
        spread = self.spread_at(step)
        for i in np.flatnonzero((spread >= 0.5) & (self.spread_before < 0.5)) if step else ():
            self.learnable_since.setdefault(int(i), step)
        self.spread_before = spread
        for row in record.decisions:
            since = self.learnable_since.pop(self.pool_of.get(row.prompt_key, -1), None)
            if since is not None:
                self.judged_delays.append(step - since)
        super().emit(record)

    def delays(self) -> list[int]:
        """The judged delays, then those of the prompts still waiting at the end (the steps left: a lower bound)."""
        return self.judged_delays + [self.steps - since for since in self.learnable_since.values()]


def measure_skipping(config: SimConfig, seeds: Iterable[int], oracle: OracleSkip | None = None) -> SkipMeasure:
    """Run ``config`` (it needs a ``prompt_pool``) at each seed and pool the figures of the module docstring.

    ``oracle``: skip by the simulator's truth instead of ``config.prompt_skip``'s rule (the reference).
    """
    if oracle is not None and config.prompt_skip == "off":
        config = replace(config, prompt_skip="greso")  # the data source must be asked; the oracle decides

    def prepare(run: SimConfig) -> tuple[EpochPromptSource, CostSink]:
        _, reward_rng, _ = rng_streams(run.seed)  # the streams Simulator.run would draw: the same run
        source = make_group_source(run, reward_rng, TokenModel.from_config(run, token_rng(run.seed)))
        if not isinstance(source, EpochPromptSource):
            raise ValueError("measure_skipping needs SimConfig.prompt_pool (a pool whose prompts come back)")
        if oracle is not None:
            source.data_source = _oracle_data_source(source.data_source, source, run, oracle)
        return source, _TruthSink(source, run)

    return pooled_measure(config, seeds, prepare)


def pooled_measure(config: SimConfig, seeds: Iterable[int],
                   prepare: Callable[[SimConfig], tuple[Any, CostSink]],
                   progress: Callable[[Any], None] | None = None) -> SkipMeasure:
    """Run ``config`` at each seed with the group source and sink ``prepare(run)`` makes, and pool the sinks'
    figures (sums over sums). ``progress`` is called after every simulated step."""
    totals = dict(steps=0, total_tokens=0, aborted_tokens=0, informative_groups=0, multi_wave_steps=0,
                  skipped_prompts=0)
    forgone, delays, per_seed, estimated = 0.0, [], [], None
    for seed in seeds:
        run = replace(config, seed=seed)
        source, sink = prepare(run)
        with alerts_silenced():
            Simulator(run, sinks=[sink], source=source, keep_records=False).run(progress=progress)
        totals["steps"] += sink.records
        for name, value in sink.totals.items():
            totals[name] += value
        forgone += sink.forgone_informative
        delays += sink.delays()
        informative = sink.totals["informative_groups"]
        per_seed.append(sink.forgone_informative / informative if informative else 0.0)
        if sink.lost_signal_estimate is not None:
            estimated = (estimated or 0.0) + sink.lost_signal_estimate * informative
    return SkipMeasure(**totals, forgone_informative=forgone, return_delays=tuple(delays),
                       seed_lost_signals=tuple(per_seed), estimated_forgone=estimated)
