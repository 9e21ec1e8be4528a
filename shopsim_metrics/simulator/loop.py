"""The simulated slime loop: waves, completion batches, ``remaining``, abort, and the real hooks.

:class:`SimulatedSlimeLoop` runs one rollout step exactly as slime's ``generate_rollout_async``
does (docs/training_monitoring.md §4.3): it opens a wave of ``over_sampling_batch_size``
groups whenever ``remaining < rollout_batch_size`` between batches, takes the next completion
batch, judges every group of the batch in turn with the project's real filter
(:func:`shopsimrl.slime_runtime.fully_scored_group_filter`), applies slime's drop rule, aborts what
is still pending once the train batch is full, then calls the all-samples hook and the rollout log
function. The live facts reach the accountant through a
:class:`~shopsim_metrics.step.loop_state.ManualLoopState` set before every filter call.

:class:`Simulator` wires a loop to a fresh runtime (``configure``), runs the steps of a
:class:`~shopsim_metrics.simulator.config.SimConfig`, and always resets the runtime at the end.
When the filter raises :class:`~shopsim_metrics.errors.TechnicalFailureLimitExceeded` the run ends there,
as slime's would: the step's record is already written (``terminated``), and the error is kept in
:attr:`SimulationResult.termination` (or re-raised with ``raise_on_termination=True``).

Example:
    >>> from shopsim_metrics.simulator.config import SimConfig
    >>> result = Simulator(SimConfig(steps=3, seed=1), sinks=[]).run()
    >>> [r.train_group_count for r in result.records]
    [16, 16, 16]
    >>> result.outcomes[0].submitted == result.records[0].submitted_group_count
    True
"""

from __future__ import annotations

import importlib
import time
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from shopsim_metrics.step.alerts import Alert
from shopsim_metrics.step.contract import ALL_SAMPLES_PATH, FILTER_PATH, LOG_PATH, slime_drop_metric
from shopsim_metrics.monitor import configure, reset_runtime
from shopsim_metrics.step.loop_state import ManualLoopState
from shopsim_metrics.step.records import StepRecord
from shopsim_metrics.simulator.config import SimConfig
from shopsim_metrics.simulator.latency import CompletionOrder, LatencyCompletions, LatencyModel
from shopsim_metrics.simulator.epochs import EpochPromptSource
from shopsim_metrics.simulator.rewards import GroupSource, PromptGroupSource, RatesGroupSource, flatten
from shopsim_metrics.simulator.tally import RunTally
from shopsim_metrics.simulator.tokens import TokenModel
from shopsim_metrics.sinks.base import MemorySink, StepSink
from shopsim_metrics.errors import TechnicalFailureLimitExceeded

Hook = Callable[..., Any]



def load_hook(path: str) -> Hook:
    """Load ``module.function`` by dotted path, as slime loads its hooks.

    Example:
        >>> load_hook("math.sqrt")(4.0)
        2.0
    """
    module_name, _, name = path.rpartition(".")
    return getattr(importlib.import_module(module_name), name)


@dataclass
class StepOutcome:
    """What the loop itself did in one step: the ground truth the records are checked against."""

    rollout_id: int
    train_ids: list[int]  # the train batch, in the order it filled
    judged_ids: list[int]  # every judged group, in judgement order
    dropped: dict[int, str | None]  # group id -> reason
    surplus_ids: list[int]
    aborted_ids: list[int]
    submitted: int
    waves: int
    remaining_end: int
    drop_metrics: dict[str, int]  # slime's own rollout/dynamic_filter/drop_<reason> counters
    remaining_before: list[int]  # remaining_batch_size before each judgement
    batch_sizes: list[int]  # groups per completion batch
    rollout_time: float  # seconds from the first submission to the last batch


@dataclass
class SimulationResult:
    """A finished simulated run."""

    config: SimConfig
    outcomes: list[StepOutcome] = field(default_factory=list)  # completed steps only
    records: list[StepRecord] = field(default_factory=list)  # every emitted record (a terminated step too)
    alerts: list[Alert] = field(default_factory=list)
    termination: TechnicalFailureLimitExceeded | None = None
    wall_seconds: float = 0.0

    @property
    def terminated(self) -> bool:
        return self.termination is not None


class SimulatedSlimeLoop:
    """One rollout step at a time, as slime runs it, with the given hooks (see the module docstring)."""

    def __init__(
        self,
        args: Any,
        *,
        source: GroupSource,
        completions: CompletionOrder,
        filter_fn: Hook | None = None,
        all_samples_fn: Hook | None | str = ALL_SAMPLES_PATH,
        log_fn: Hook | None | str = LOG_PATH,
        loop_state: ManualLoopState | None = None,
        token_timing: bool = True,
    ) -> None:
        self.args = args
        self.token_timing = token_timing  # a group takes as long as its slowest rollout's tokens (when the source says)
        self.rollout_batch_size: int = args.rollout_batch_size
        self.over_sampling_batch_size: int = getattr(args, "over_sampling_batch_size", None) or self.rollout_batch_size
        self.source = source
        self.completions = completions
        self.filter_fn = filter_fn or load_hook(FILTER_PATH)
        self.all_samples_fn = load_hook(all_samples_fn) if isinstance(all_samples_fn, str) else all_samples_fn
        self.log_fn = load_hook(log_fn) if isinstance(log_fn, str) else log_fn
        self.loop_state = loop_state or ManualLoopState(source="simulator")
        self._next_id = 0  # group ids run on across steps, as a data source's would

    def run_step(self, rollout_id: int) -> StepOutcome:
        """Run one rollout step; TechnicalFailureLimitExceeded from the filter propagates."""
        args, rollout_batch_size, over_sampling_batch_size = (
            self.args, self.rollout_batch_size, self.over_sampling_batch_size)
        source, completions, filter_fn, state = self.source, self.completions, self.filter_fn, self.loop_state
        remaining = submitted = waves = 0
        data: list[int] = []
        train_groups: list[list] = []
        judged: list[int] = []
        groups: list[list] = []
        dropped: dict[int, str | None] = {}
        surplus: list[int] = []
        drop_metrics: dict[str, int] = {}
        remaining_before: list[int] = []
        batch_sizes: list[int] = []
        state.step = rollout_id
        completions.begin_step()
        while len(data) < rollout_batch_size:
            while remaining < rollout_batch_size:  # step 1a: open a wave
                gids = range(self._next_id, self._next_id + over_sampling_batch_size)
                self._next_id += over_sampling_batch_size
                source.submit(gids, rollout_id)
                generation_ticks = getattr(source, "generation_ticks", None) if self.token_timing else None
                completions.submit(gids, generation_ticks(gids) if generation_ticks is not None else None)
                remaining += over_sampling_batch_size
                submitted += over_sampling_batch_size
                waves += 1
            batch = completions.next_batch()  # step 1b: at least one group finishes
            batch_sizes.append(len(batch))
            for gid in batch:  # step 1c: judge the whole batch in turn
                group = source.group(gid, len(judged))
                judged.append(gid)
                groups.append(group)
                state.remaining = remaining
                remaining_before.append(remaining)
                output = filter_fn(args, group)
                if isinstance(output, bool):  # slime wraps a plain bool as DynamicFilterOutput(keep=b)
                    keep, keep_when_insufficient, reason = output, False, None
                else:
                    keep, keep_when_insufficient, reason = output.keep, output.keep_when_insufficient, output.reason
                if keep or (keep_when_insufficient and remaining <= rollout_batch_size):
                    if len(data) < rollout_batch_size:
                        data.append(gid)
                        train_groups.append(group)
                    else:
                        surplus.append(gid)
                    continue
                if reason:
                    key = slime_drop_metric(reason)
                    drop_metrics[key] = drop_metrics.get(key, 0) + 1
                dropped[gid] = reason
                remaining -= 1
        aborted = completions.abort()  # step 2
        state.remaining = None
        rollout_time = completions.elapsed
        if self.all_samples_fn is not None:  # step 3
            self.all_samples_fn(args, groups, None)
        if self.log_fn is not None:
            order = sorted(range(len(data)), key=data.__getitem__)  # slime sorts the train batch by index
            samples: list = []
            for k in order:
                group = train_groups[k]
                if group and isinstance(group[0], (list, tuple)):  # fanned-out segments
                    samples.extend(flatten(group))
                else:
                    samples.extend(group)
            self.log_fn(rollout_id, args, samples, dict(drop_metrics), rollout_time)
        return StepOutcome(
            rollout_id=rollout_id,
            train_ids=data,
            judged_ids=judged,
            dropped=dropped,
            surplus_ids=surplus,
            aborted_ids=aborted,
            submitted=submitted,
            waves=waves,
            remaining_end=remaining,
            drop_metrics=drop_metrics,
            remaining_before=remaining_before,
            batch_sizes=batch_sizes,
            rollout_time=rollout_time,
        )


def rng_streams(seed: int) -> tuple[np.random.Generator, np.random.Generator, np.random.Generator]:
    """Independent generators for latency, rewards and the reference wave, from one seed."""
    latency, rewards, reference = np.random.SeedSequence(seed).spawn(3)
    return np.random.default_rng(latency), np.random.default_rng(rewards), np.random.default_rng(reference)


def latency_model(config: SimConfig, rng: np.random.Generator) -> LatencyModel:
    """The config's latency model on the given generator."""
    return LatencyModel(median=config.latency_median, sigma=config.latency_sigma, tick=config.latency_tick, rng=rng)


def token_rng(seed: int) -> np.random.Generator:
    """The generator of response lengths: a fourth stream of the seed, so rewards draw as before."""
    return np.random.default_rng(np.random.SeedSequence(seed).spawn(4)[3])


def wave_time_model(config: SimConfig, rng: np.random.Generator) -> LatencyModel | TokenModel:
    """What a group's generation time follows: its tokens (``seconds_per_token``), else the latency model."""
    if config.seconds_per_token:
        return TokenModel.from_config(config, rng)
    return latency_model(config, rng)


def make_group_source(config: SimConfig, rng: np.random.Generator, tokens: TokenModel | None = None) -> GroupSource:
    """The drawn source the config asks for: rates model when ``zero_std_rate`` is set, else prompts
    (epochs over a finite pool when ``prompt_pool`` is set, :mod:`shopsim_metrics.simulator.epochs`).

    ``tokens`` gives every rollout a response length (and each group its generation time)."""
    if config.zero_std_rate is not None:
        return RatesGroupSource(config, rng, tokens)
    if config.prompt_pool is not None:
        return EpochPromptSource(config, rng, tokens)
    return PromptGroupSource(config, rng, tokens)


class Simulator:
    """Runs a :class:`SimConfig` through the project's real hooks; deterministic for a seed.

    ``sinks``: where records go (``[]``: nowhere but the result; ``None``: the runtime's default sinks,
    :func:`shopsim_metrics.sinks.factory.build_sinks`, from ``args``). The result always holds the
    records and alerts (a :class:`MemorySink` is added). ``extra_args`` reach ``args`` (e.g.
    ``shopsim_run_dir``). ``source`` / ``completions`` replace the drawn group contents and the
    latency-driven completion order (explicit orders: :class:`~.rewards.FactoryGroupSource`,
    :class:`~.latency.ScriptedCompletions`). ``all_samples_hook=False`` skips slime's optional
    all-samples hook (the step is then closed from the ledger by the log function).
    ``keep_records=False`` keeps neither records nor outcomes in the result (constant memory for long
    runs: the records are in the sinks); a ``tally`` (:class:`~.tally.RunTally`) then summarises them.
    """

    def __init__(
        self,
        config: SimConfig,
        *,
        sinks: list[StepSink] | None = None,
        extra_args: dict[str, Any] | None = None,
        source: GroupSource | None = None,
        completions: CompletionOrder | None = None,
        all_samples_hook: bool = True,
        keep_records: bool = True,
        tally: "RunTally | None" = None,
    ) -> None:
        self.config = config
        self.keep_records = keep_records
        self.tally = tally
        self.args = config.to_args(**(extra_args or {}))
        self.source = source
        self.completions = completions
        self.sinks = sinks
        self.all_samples_hook = all_samples_hook

    def run(
        self,
        steps: int | None = None,
        *,
        progress: Callable[[StepOutcome], None] | None = None,
        raise_on_termination: bool = False,
    ) -> SimulationResult:
        """Run ``steps`` (default ``config.steps``) rollout steps from rollout id 0."""
        steps = self.config.steps if steps is None else steps
        memory = MemorySink() if self.keep_records else None
        sinks = self.sinks
        if sinks is None:
            from shopsim_metrics.settings import ShopsimSettings
            from shopsim_metrics.sinks.factory import build_sinks

            sinks = build_sinks(ShopsimSettings.from_args(self.args))
        latency_rng, reward_rng, _ = rng_streams(self.config.seed)  # fresh streams: every run is the same
        source = self.source or make_group_source(self.config, reward_rng,
                                                  TokenModel.from_config(self.config, token_rng(self.config.seed)))
        completions = self.completions or LatencyCompletions(latency_model(self.config, latency_rng),
                                                             self.config.max_concurrent_groups)
        state = ManualLoopState(source="simulator")
        state.clock = lambda: completions.elapsed  # judged_at and the wave timings in simulated seconds
        own = [s for s in (memory, self.tally) if s is not None]
        configure(self.args, sinks=[*sinks, *own], loop_state=state)
        loop = SimulatedSlimeLoop(
            self.args, source=source, completions=completions, loop_state=state,
            all_samples_fn=ALL_SAMPLES_PATH if self.all_samples_hook else None,
            token_timing=self.completions is None,  # explicit completion orders keep their own timing
        )
        result = SimulationResult(config=self.config)
        if memory is not None:
            result.records, result.alerts = memory.records, memory.alerts
        started = time.perf_counter()
        try:
            for rollout_id in range(steps):
                outcome = loop.run_step(rollout_id)
                if self.keep_records:
                    result.outcomes.append(outcome)
                if progress is not None:
                    progress(outcome)
        except TechnicalFailureLimitExceeded as exc:
            result.termination = exc
            if raise_on_termination:
                raise
        finally:
            reset_runtime()  # emits anything pending and closes the sinks
            result.wall_seconds = time.perf_counter() - started
        return result


TUNING_ARGS: dict[str, Any] = {"shopsim_prompt_history_limit": 0}
"""``extra_args`` of the runs ``tune`` and its calibration make: they read no prompt-value field, so the
prompts are not tracked (the filter, the accounting and every other field are the same)."""


def simulate(config: SimConfig, **kwargs: Any) -> SimulationResult:
    """Shorthand: ``Simulator(config, sinks=[], ...).run()`` (tuning mode: real filter and accounting only).

    Example:
        >>> from shopsim_metrics.simulator.config import SimConfig
        >>> simulate(SimConfig(steps=2, technical_rate=0.0)).records[-1].technical_group_drop_count
        0
    """
    kwargs.setdefault("sinks", [])
    return Simulator(config, **kwargs).run()
