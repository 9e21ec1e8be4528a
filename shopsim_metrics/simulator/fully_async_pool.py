"""slime's fully-async rollout in simulated time: a pool of groups in flight across steps, no waves.

slime's ``AsyncRolloutWorker`` keeps ``concurrency`` groups generating: whenever a slot frees it
draws the next group from the data source (``get_samples(1)``: a group put back first, else a new
one), an aborted group goes back into the data source's buffer, a finished one is queued. Each step
takes finished groups in the order they finished until its batch holds ``rollout_batch_size``;
the others keep generating into the next step. :class:`SimulatedAsyncPool` is that worker on a
simulated clock (an event heap keyed by finishing time); :class:`SimulatedFullyAsyncLoop` runs each
step with the same code as the real rollout function,
:func:`shopsim_metrics.fully_async.fully_async_step.run_fully_async_step` (the judging, the admission, the
record), then calls the rollout log function as slime does. Steps follow each other without a gap
(``train_async.py`` asks for step k + 1 as soon as step k's batch is handed over); the weights are
updated after every step, so the engine's weight version is the number of steps done when a
generation started.

What generates a group is an :class:`AsyncEngine`: :class:`DrawnEngine` for the simulator's drawn
sources (the latency or token model for the time, ``async_abort_rate`` for aborts, the group source
for the contents); tests give scripted ones.

Example:
    >>> from shopsim_metrics.simulator.config import SimConfig
    >>> from shopsim_metrics.simulator.loop import Simulator
    >>> cfg = SimConfig(steps=3, seed=1, rollout="fully-async", max_concurrent_groups=24)
    >>> result = Simulator(cfg, sinks=[]).run()
    >>> [r.train_group_count for r in result.records], result.records[0].wave_count
    ([16, 16, 16], None)
    >>> sum(r.carried_group_count for r in result.records) > 0   # the pool carries groups across steps
    True
"""

from __future__ import annotations

import asyncio
import heapq
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Callable, Protocol

import numpy as np

from shopsim_metrics.judging.group_samples import group_tokens, leaves
from shopsim_metrics.simulator.latency import LatencyModel
from shopsim_metrics.simulator.rewards import GroupSource
from shopsim_metrics.simulator.samples import SimSample
from shopsim_metrics.fully_async.fully_async_step import DrawLog, first_index, run_fully_async_step

Hook = Callable[..., Any]


class AsyncEngine(Protocol):
    """What generates a drawn group in the simulated pool."""

    def start(self, group: list, step: int | None, version: int) -> tuple[float, bool]:
        """The generation of ``group`` starts: (seconds until it ends, whether it ends aborted)."""
        ...

    def finish(self, group: list, slot: int, version: int, aborted: bool) -> list:
        """The generation ends: the samples it produced (slot: the judgement index in the step; aborted: unjudged)."""
        ...


class QueueDataSource:
    """slime's data source as the fully-async worker uses it: a group put back first, else a new one.

    New groups are numbered as slime numbers them: ``group_index`` runs on, ``index`` is ``group_index × n + k``.

    Example:
        >>> source = QueueDataSource(n=2)
        >>> [s.index for s in source.get_samples(1)[0]]
        [0, 1]
        >>> group = source.get_samples(1)[0]; source.add_samples([group])
        >>> source.get_samples(1)[0] is group
        True
    """

    def __init__(self, n: int) -> None:
        self.n = n
        self.next_group = 0
        self.buffer: deque[list] = deque()

    def get_samples(self, num_samples: int) -> list[list[SimSample]]:
        out: list[list[SimSample]] = []
        for _ in range(num_samples):
            if self.buffer:
                out.append(self.buffer.popleft())
                continue
            gid, self.next_group = self.next_group, self.next_group + 1
            out.append([SimSample(index=gid * self.n + k, group_index=gid, prompt=f"prompt {gid}", status="pending")
                        for k in range(self.n)])
        return out

    def add_samples(self, groups: list[list]) -> None:
        self.buffer.extend(groups)

    def __len__(self) -> int:
        return 0


class DrawnEngine:
    """Generation from the simulator's drawn sources: time from the token or latency model, contents from the source.

    A group's properties are drawn when it first starts (``submit(..., carry=True)``: groups of earlier
    steps keep theirs). Each generation is aborted with probability ``abort_rate`` part-way (at a
    uniform share of what it had left) and has then made its rollouts' tokens up to there; generated
    again, the group continues from there (slime's partial rollout: the samples keep their tokens), so
    the sample hook counts every token once.
    """

    def __init__(self, source: GroupSource, latency: LatencyModel, *, tick: float, abort_rate: float,
                 rng: np.random.Generator, token_timing: bool = True) -> None:
        self.source, self.latency, self.tick = source, latency, tick
        self.abort_rate, self.rng, self.token_timing = abort_rate, rng, token_timing
        self._seconds: dict[int, float] = {}  # gid -> its whole generation time, drawn when it first starts
        self._done: dict[int, float] = {}  # gid -> share of its generation made before an abort
        self._abort_at: dict[int, float] = {}  # gid -> share at which its current generation is aborted
        self._versions: dict[int, list[str]] = {}  # gid -> the weight version of each of its generations

    def start(self, group: list, step: int | None, version: int) -> tuple[float, bool]:
        gid = group[0].group_index
        if gid not in self._seconds:
            gids = range(gid, gid + 1)
            self.source.submit(gids, step or 0, carry=True)
            generation_ticks = getattr(self.source, "generation_ticks", None) if self.token_timing else None
            ticks = generation_ticks(gids) if generation_ticks is not None else None
            self._seconds[gid] = float((ticks or self.latency.ticks(1))[0]) * self.tick
        self._versions.setdefault(gid, []).append(str(version))
        done = self._done.get(gid, 0.0)
        left = self._seconds[gid] * (1.0 - done)
        if self.abort_rate and self.rng.random() < self.abort_rate:
            part = float(self.rng.random())
            self._abort_at[gid] = done + part * (1.0 - done)
            return left * part, True
        return left, False

    def finish(self, group: list, slot: int, version: int, aborted: bool) -> list:
        gid = group[0].group_index
        if aborted:
            share = self._abort_at.pop(gid)
            self._done[gid] = share
            lengths = self.source.aborted_lengths(gid, share)  # the tokens made so far (the samples' running length)
            return [SimSample(index=gid * len(group) + k, group_index=gid, status="aborted", response_length=length,
                              weight_versions=list(self._versions[gid])) for k, length in enumerate(lengths)]
        self._seconds.pop(gid, None)
        self._done.pop(gid, None)
        versions = self._versions.pop(gid, [str(version)])
        samples = self.source.group(gid, slot)
        prompt = getattr(group[0], "prompt", "")
        for sample in leaves(samples):
            sample.weight_versions = list(versions)  # slime appends the engine's version at every generate call
            sample.prompt = prompt  # the drawn prompt (the group's prompt key)
        return samples


class SimulatedAsyncPool:
    """slime's fully-async worker on a simulated clock (see the module docstring).

    ``take_finished()`` is the step's view of the worker's queue: the next group to finish (the clock
    moves to its end), every slot topped up from ``draws`` the moment it frees, aborted groups put
    back and generated again; None only when nothing is generating and the data source serves nothing.
    """

    def __init__(self, draws: DrawLog, engine: AsyncEngine, concurrency: int, *, args: Any = None,
                 sample_hook: Hook | None = None) -> None:
        self.draws, self.engine, self.concurrency = draws, engine, concurrency
        self.args, self.sample_hook = args, sample_hook
        self.now = 0.0
        self.step: int | None = None
        self.version = 0  # the weights' version: steps done
        self._heap: list[tuple[float, int, list, bool, int]] = []
        self._seq = 0
        self._slot = 0
        self.aborted_tokens = 0  # tokens this step's aborted generations made
        self._partial: dict[int, int] = {}  # gid -> tokens its aborted generations made so far
        self.aborted_ids: list[int] = []  # this step's, in order

    def begin_step(self, rollout_id: int) -> None:
        self.step, self._slot, self.aborted_tokens, self.aborted_ids = rollout_id, 0, 0, []

    @property
    def in_flight(self) -> int:
        return len(self._heap)

    def _top_up(self) -> None:
        while len(self._heap) < self.concurrency:
            groups = self.draws.get_samples(1)
            if not groups:
                return
            group = groups[0]
            seconds, aborted = self.engine.start(group, self.step, self.version)
            heapq.heappush(self._heap, (self.now + seconds, self._seq, group, aborted, self.version))
            self._seq += 1

    def take_finished(self) -> list | None:
        self._top_up()
        while self._heap:
            ends, _, group, aborted, version = heapq.heappop(self._heap)
            self.now = max(self.now, ends)
            samples = self.engine.finish(group, self._slot, version, aborted)
            if self.sample_hook is not None:  # slime's sample hook sees every generate call, aborted ones too
                for sample in leaves(samples):
                    self.sample_hook(self.args, sample, rollout_id=self.step)
            if aborted:
                gid = group[0].group_index
                made = group_tokens(samples)
                self.aborted_tokens += made - self._partial.get(gid, 0)  # a continued group made only the rest
                self._partial[gid] = made
                self.aborted_ids.append(gid)
                self.draws.add_samples([group])
                self._top_up()
                continue
            self._partial.pop(group[0].group_index, None)
            self._slot += 1
            self._top_up()
            return samples
        return None


@dataclass
class AsyncStepOutcome:
    """What the pool and the step did in one fully-async step: the ground truth of its record."""

    rollout_id: int
    train_ids: list[int]  # the batch, in the order it filled
    judged_ids: list[int]  # every judged group, in judgement order
    outcomes: list[str]  # of judged_ids
    drop_metrics: dict[str, int]  # slime's rollout/dynamic_filter/drop_<reason> counters
    aborted_ids: list[int]  # groups put back during the step
    rollout_time: float  # simulated seconds from the step's start to its batch's last group
    aborted_tokens: int = 0  # tokens made by the step's aborted generations (a group generated again continues them)
    in_flight: int = 0  # groups generating when the step handed its batch over
    waves: None = None  # no waves on this path (the synchronous outcome's field, for progress displays)
    dropped: dict[int, str] = field(default_factory=dict)


async def _nothing_can_finish(seconds: float) -> None:
    raise RuntimeError("the simulated pool is empty and the data source serves nothing: the step cannot fill")


class SimulatedFullyAsyncLoop:
    """One fully-async step at a time: the real step code over the simulated pool, then the log function."""

    def __init__(self, args: Any, runtime: Any, pool: SimulatedAsyncPool, *, log_fn: Hook | None = None) -> None:
        self.args, self.runtime, self.pool, self.log_fn = args, runtime, pool, log_fn
        runtime.serve_one_group_at_a_time()

    def run_step(self, rollout_id: int) -> AsyncStepOutcome:
        """Run one step; TechnicalFailureLimitExceeded propagates (the terminated record is written)."""
        pool, args = self.pool, self.args
        pool.begin_step(rollout_id)
        started = pool.now
        step = asyncio.run(run_fully_async_step(self.runtime, pool.draws, pool.take_finished, args.rollout_batch_size,
                                                rollout_id, poll_seconds=0.0, sleep=_nothing_can_finish))
        rollout_time = pool.now - started
        batch = sorted(step.batch, key=first_index)
        metrics = step.drop_counts()
        if self.log_fn is not None:
            self.log_fn(rollout_id, args, [s for group in batch for s in leaves(group)], dict(metrics), rollout_time)
        pool.version = rollout_id + 1  # the weights are updated after the step
        ids = [_gid(group) for group in step.judged]
        return AsyncStepOutcome(
            rollout_id=rollout_id, train_ids=[_gid(group) for group in step.batch], judged_ids=ids,
            outcomes=list(step.outcomes), drop_metrics=metrics, aborted_ids=list(pool.aborted_ids),
            rollout_time=rollout_time, aborted_tokens=pool.aborted_tokens, in_flight=pool.in_flight,
            dropped={gid: outcome for gid, outcome in zip(ids, step.outcomes) if outcome.startswith("dropped")})


def _gid(group: list) -> int:
    return leaves(group)[0].group_index
