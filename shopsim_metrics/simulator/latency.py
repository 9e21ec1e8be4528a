"""When submitted groups finish: the latency model and the completion orders the loop waits on.

slime's loop waits with ``asyncio.wait(..., FIRST_COMPLETED)``: every group already finished comes
back in one batch. The simulator models that on a tick clock: a group's generation time is drawn
from a lognormal (``latency_median``, ``latency_sigma``) and rounded up to whole ticks, so groups
finishing in the same tick come back together. At most ``max_concurrent_groups`` groups generate
at once (the rollout servers' capacity); later ones queue in submission order and start when a
slot frees.

Two completion orders implement the same small interface (``begin_step``, ``submit``,
``next_batch``, ``progress``, ``abort``, ``elapsed``):

- :class:`LatencyCompletions`: from the latency model (the default);
- :class:`ScriptedCompletions`: an explicit order, ``next_batch(pending_ids) -> finished_ids``
  (scripted orders for tests and examples).

Example:
    >>> import numpy as np
    >>> model = LatencyModel(median=10.0, sigma=0.0, tick=1.0, rng=np.random.default_rng(0))
    >>> done = LatencyCompletions(model, concurrency=2)
    >>> done.begin_step(); done.submit(range(3))
    >>> done.next_batch(), done.elapsed      # two start at once, both take 10 ticks
    ([0, 1], 10.0)
    >>> done.next_batch(), done.elapsed      # the third started when a slot freed
    ([2], 20.0)

When the train batch fills, slime aborts what is still generating. ``progress()`` says, just before
the abort, how far each of those groups had got: the share of its generation time that has passed
(0 for a group still queued), from which the simulator counts the tokens it had generated:

    >>> done.begin_step(); done.submit(range(3), ticks=[4, 10, 10])
    >>> done.next_batch(), done.progress()   # tick 4: group 1 ran 4 of its 10 ticks, group 2 just started
    ([0], {1: 0.4, 2: 0.0})
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from typing import Callable, Iterable, Protocol

import numpy as np

NextBatch = Callable[[list[int]], list[int]]
"""An explicit completion order: pending ids (submission order) -> the ids finishing now."""


class CompletionOrder(Protocol):
    """Which submitted groups finish next (see the module docstring)."""

    def begin_step(self) -> None: ...

    def submit(self, gids: range, ticks: list[int] | None = None) -> None: ...

    def next_batch(self) -> list[int]: ...

    def progress(self) -> dict[int, float]: ...

    def abort(self) -> list[int]: ...

    @property
    def elapsed(self) -> float: ...


class LatencyModel:
    """Generation time of one group, in whole ticks (>= 1)."""

    def __init__(self, *, median: float, sigma: float, tick: float, rng: np.random.Generator) -> None:
        self.median = median
        self.sigma = sigma
        self.tick = tick
        self.rng = rng
        self._mu = math.log(median)

    def ticks(self, n: int) -> list[int]:
        """``n`` generation times in ticks."""
        seconds = self.rng.lognormal(self._mu, self.sigma, n) if self.sigma > 0 else np.full(n, self.median)
        return np.maximum(1, np.ceil(seconds / self.tick - 1e-9)).astype(np.int64).tolist()


class LatencyCompletions:
    """Completion order from a :class:`LatencyModel` with a concurrency limit (event-driven)."""

    def __init__(self, model: LatencyModel, concurrency: int | None = None) -> None:
        self.model = model
        self.concurrency = concurrency
        self.begin_step()

    def begin_step(self) -> None:
        self._now = 0
        self._running: list[tuple[int, int]] = []  # heap of (finish tick, gid)
        self._queued: deque[tuple[int, int]] = deque()  # (gid, duration in ticks)
        self._durations: dict[int, int] = {}  # gid -> generation ticks, of the running groups

    def submit(self, gids: range, ticks: list[int] | None = None) -> None:
        """Queue a wave; ``ticks``: each group's generation time (from its tokens), else the latency model's."""
        durations = ticks if ticks is not None else self.model.ticks(len(gids))
        self._queued.extend(zip(gids, durations))
        self._start()

    def _start(self) -> None:
        limit = self.concurrency
        while self._queued and (limit is None or len(self._running) < limit):
            gid, duration = self._queued.popleft()
            heapq.heappush(self._running, (self._now + duration, gid))
            self._durations[gid] = duration

    def next_batch(self) -> list[int]:
        if not self._running:
            raise RuntimeError("next_batch() with nothing generating: submit a wave first")
        running = self._running
        now = running[0][0]
        batch = []
        while running and running[0][0] == now:
            gid = heapq.heappop(running)[1]
            del self._durations[gid]
            batch.append(gid)
        self._now = now
        self._start()
        return batch

    def progress(self) -> dict[int, float]:
        """Each unfinished group's share of its generation time passed by now (queued groups: 0)."""
        shares = {}
        for finish, gid in sorted(self._running, key=lambda item: item[1]):
            duration = self._durations[gid]
            shares[gid] = (self._now - (finish - duration)) / duration
        shares.update((gid, 0.0) for gid, _ in self._queued)
        return shares

    def abort(self) -> list[int]:
        """Every group still generating or queued (their generation is discarded)."""
        pending = sorted(gid for _, gid in self._running) + [gid for gid, _ in self._queued]
        self._running, self._queued, self._durations = [], deque(), {}
        return pending

    @property
    def elapsed(self) -> float:
        """Seconds since the step began (the time of the last batch)."""
        return self._now * self.model.tick


class ScriptedCompletions:
    """An explicit completion order: ``next_batch(pending_ids)`` picks the ids that finish now.

    ``elapsed`` counts one second per batch.

    Example:
        >>> done = ScriptedCompletions(lambda pending: pending[:2])
        >>> done.begin_step(); done.submit(range(5)); done.next_batch(), done.abort()
        ([0, 1], [2, 3, 4])
    """

    def __init__(self, next_batch: NextBatch) -> None:
        self._next_batch = next_batch
        self.begin_step()

    def begin_step(self) -> None:
        self._pending: list[int] = []
        self._batches = 0

    def submit(self, gids: range, ticks: list[int] | None = None) -> None:
        self._pending.extend(gids)

    def next_batch(self) -> list[int]:
        batch = list(self._next_batch(list(self._pending)))
        if not batch:
            raise RuntimeError("the completion script must finish at least one pending group per wait")
        unknown = set(batch) - set(self._pending)
        if unknown:
            raise RuntimeError(f"the completion script finished groups that are not pending: {sorted(unknown)}")
        finished = set(batch)
        self._pending = [gid for gid in self._pending if gid not in finished]
        self._batches += 1
        return batch

    def progress(self) -> dict[int, float]:
        """An explicit order has no generation times: every unfinished group counts as not started."""
        return {gid: 0.0 for gid in self._pending}

    def abort(self) -> list[int]:
        pending, self._pending = self._pending, []
        return pending

    @property
    def elapsed(self) -> float:
        return float(self._batches)


def makespan(durations: Iterable[int], concurrency: int | None) -> int:
    """Ticks until every group of one wave has finished, started in order with ``concurrency`` slots.

    Example:
        >>> makespan([3, 1, 2], None), makespan([3, 1, 2], 1), makespan([3, 1, 2], 2)
        (3, 6, 3)
    """
    durations = list(durations)
    if concurrency is None or concurrency >= len(durations):
        return max(durations, default=0)
    slots = [0] * concurrency
    for duration in durations:
        start = heapq.heappop(slots)
        heapq.heappush(slots, start + duration)
    return max(slots)


def reference_wave_time(model: LatencyModel, *, groups: int, concurrency: int | None, trials: int = 2000) -> float:
    """Mean seconds for one wave of ``groups`` groups to finish entirely: the unit of relative rollout time."""
    total = 0
    for _ in range(trials):
        total += makespan(model.ticks(groups), concurrency)
    return total / trials * model.tick
