"""Fake slime pieces for the fully-async rollout function, with scripted latencies and rewards.

:func:`install` puts into ``sys.modules`` the few slime modules that
:func:`shopsimrl.async_rollout.generate_rollout_fully_async` imports when called:
``slime.rollout.base_types`` (``RolloutFnTrainOutput``), ``slime.utils.async_utils`` (``run``),
``slime.utils.http_utils`` (``get_rollout_num_engines``), ``slime.utils.types`` (``Sample`` with its
``Status``), ``slime.rollout.sglang_rollout`` (``GenerateState``, ``generate_and_rm_group``: the
group ends after its scripted latency on the engine's clock, then gets its scripted rewards and the
engine's weight version) and ``slime.rollout.fully_async_rollout``: slime's own file when
``SLIME_SRC`` names a checkout (it imports only the fakes above), else :class:`PlainWorker`, written
here to slime's documented behaviour (a pool topped up every ``poll_interval`` while fewer than
``concurrency`` groups are in flight and fewer than ``concurrency`` wait; aborted groups back to the
buffer; the rest queued).

The engine's clock is its own, not the wall clock, so no outcome depends on how busy the machine is:
a generation ends only when the step asks the worker for a finished group and none is waiting
(:meth:`Engine.completed_groups`). Then, once the worker has refilled its pool (every drawn group
started, ``concurrency`` in flight or the data source empty), the generation with the earliest
scripted end (ties: the earlier start) ends, the clock moves to its end, and the step gets it once
the worker has queued it (or put it back, aborted) and refilled the pool again. That is the order of
events the simulator's pool keeps (:mod:`shopsim_metrics.simulator.fully_async_pool`): groups end
in order of their scripted ends, and a slot is refilled when it frees, with the weights of the step
that freed it. The worker's own thread, event loop and polling are slime's (or written to them).

The script: one :class:`GroupScript` per group, in the order the data source serves them.
"""

from __future__ import annotations

import asyncio
import enum
import importlib.util
import os
import queue
import sys
import threading
import time
import types
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

NAMES = ("slime", "slime.rollout", "slime.utils", "slime.rollout.base_types", "slime.utils.async_utils",
         "slime.utils.http_utils", "slime.utils.types", "slime.rollout.sglang_rollout",
         "slime.rollout.fully_async_rollout")


@dataclass(frozen=True)
class GroupScript:
    """One served group: how long it generates, its rewards (one per sample), whether it is aborted."""

    latency: float
    rewards: tuple[Any, ...]
    aborted: bool = False
    tokens: int = 10  # response tokens per sample
    aborts: int | None = None  # with ``aborted``: only its first ``aborts`` generations are aborted (None: all)

    def aborted_at(self, attempt: int) -> bool:
        """Whether its ``attempt``-th generation (from 1) is aborted."""
        return self.aborted and (self.aborts is None or attempt <= self.aborts)


class Status(enum.Enum):
    PENDING = "pending"
    COMPLETED = "completed"
    TRUNCATED = "truncated"
    ABORTED = "aborted"
    FAILED = "failed"


@dataclass
class Sample:
    """The fields of slime's ``Sample`` the project and the worker read."""

    index: int | None = None
    group_index: int | None = None
    rollout_id: int | None = None
    reward: Any = None
    status: Any = Status.PENDING
    metadata: dict = field(default_factory=dict)
    response_length: int = 0
    prompt: Any = ""
    label: str | None = None
    weight_versions: list[str] = field(default_factory=list)

    Status = Status

    def get_reward_value(self, args: Any) -> Any:
        return self.reward


@dataclass
class RolloutFnTrainOutput:
    samples: list
    metrics: dict | None = None


class Engine:
    """The scripted engine: the groups' latencies and rewards, and the weight version it reports.

    Its clock (``now``, in scripted seconds) moves only in :meth:`completed_groups` (see the module
    docstring): a started generation waits until that call ends it.
    """

    WAIT_SECONDS = 120.0
    """How long :meth:`completed_groups` waits for the worker's thread before it fails (a hang, not a race)."""

    def __init__(self, scripts: list[GroupScript], n_samples: int, sample_hook: Any = None) -> None:
        self.scripts = scripts
        self.n_samples = n_samples
        self.weight_version = 0
        self.sample_hook = sample_hook  # called as slime calls --rollout-sample-hook-path (args, sample)
        self.started: list[int] = []  # group_index, in start order
        self.finished: list[int] = []
        self.version_of: dict[int, int] = {}  # group_index -> the weight version it was first generated with
        self.attempts: dict[int, int] = {}  # group_index -> generations started
        self.now = 0.0
        self._lock = threading.Lock()
        self._seq = 0
        self._waiting: dict[int, tuple[float, int, bool, Any, Any]] = {}  # gi -> (ends, seq, aborted, loop, future)

    async def generate_and_rm_group(self, args: Any, group: list, sampling_params: dict, evaluation: bool = False):
        gi = group[0].group_index
        script = self.scripts[gi]
        loop = asyncio.get_running_loop()
        end = loop.create_future()
        with self._lock:
            self.started.append(gi)
            self.attempts[gi] = attempt = self.attempts.get(gi, 0) + 1
            aborted = script.aborted_at(attempt)
            version = self.weight_version  # the weights the generation ran with
            self._waiting[gi] = (self.now + script.latency, self._seq, aborted, loop, end)
            self._seq += 1
        if await end == "stopped":  # the worker stopped with the group in flight: it goes back, unfinished
            for sample in group:
                sample.status = Status.ABORTED
            return group
        for sample, reward in zip(group, script.rewards):
            sample.status = Status.ABORTED if aborted else Status.COMPLETED
            sample.reward = None if aborted else reward
            sample.response_length += script.tokens
            sample.weight_versions.append(str(version))
            if self.sample_hook is not None:
                self.sample_hook(args, sample)
        with self._lock:
            self.finished.append(gi)
            self.version_of.setdefault(gi, version)
        return group

    def completed_groups(self, worker: Any, queued: Any, limit: int | None) -> list:
        """The worker's ``get_completed_groups(limit)`` on the engine's clock: when nothing is queued, the
        next generation ends first (the module docstring); empty only when nothing is generating."""
        while True:
            got = queued(limit)
            if got or not self._end_next(worker):
                return got

    def stop(self) -> None:
        """The worker stops: every generation still waiting ends at once, unfinished (put back, not queued)."""
        with self._lock:
            waiting, self._waiting = self._waiting, {}
        for _, _, _, loop, end in waiting.values():
            _resolve(loop, end, "stopped")

    def _end_next(self, worker: Any) -> bool:
        source = getattr(worker.data_buffer, "source", worker.data_buffer)  # through the project's DrawLog
        self._wait_until(lambda: self._pool_refilled(worker, source), "refill its pool")
        with self._lock:
            if not self._waiting:
                return False
            gi = min(self._waiting, key=lambda g: self._waiting[g][:2])
            ends, _, aborted, loop, end = self._waiting.pop(gi)
            self.now = ends
            requeued = len(source.requeued)
        _resolve(loop, end, "ended")
        if aborted:
            self._wait_until(lambda: len(source.requeued) > requeued, f"put back aborted group {gi}")
        else:
            self._wait_until(lambda: worker.output_queue.qsize() > 0, f"queue finished group {gi}")
        self._wait_until(lambda: self._pool_refilled(worker, source), "refill its pool")
        return True

    def _pool_refilled(self, worker: Any, source: "DataSource") -> bool:
        with self._lock:
            in_flight, started = len(self._waiting), len(self.started)
        return started == source.drawn and (
            in_flight >= worker.concurrency or worker.output_queue.qsize() >= worker.concurrency or source.empty())

    def _wait_until(self, condition: Any, what: str) -> None:
        """Wait for the worker's thread (polling: its queue and the data source are not ours to signal)."""
        deadline = time.monotonic() + self.WAIT_SECONDS
        while not condition():
            if time.monotonic() > deadline:
                raise AssertionError(f"the worker did not {what} within {self.WAIT_SECONDS:g} s")
            time.sleep(0.0005)


def _resolve(loop: asyncio.AbstractEventLoop, future: asyncio.Future, value: str) -> None:
    """Resolve ``future`` on its own loop, from any thread (nothing to do if the loop or the future is done)."""
    def resolve() -> None:
        if not future.done():
            future.set_result(value)
    try:
        loop.call_soon_threadsafe(resolve)
    except RuntimeError:  # the worker's loop has closed: its tasks are gone
        pass


class DataSource:
    """slime's data source shape: ``get_samples(n)`` serves buffered groups first, then new ones."""

    def __init__(self, n_samples: int, limit: int) -> None:
        self.n_samples = n_samples
        self.limit = limit  # groups the script has
        self.buffer: list[list[Sample]] = []
        self.served = 0
        self.drawn = 0  # groups handed out, put-back ones again
        self.requeued: list[int] = []
        self._lock = threading.Lock()

    def get_samples(self, num_samples: int) -> list[list[Sample]]:
        out = []
        with self._lock:
            for _ in range(num_samples):
                if self.buffer:
                    out.append(self.buffer.pop(0))
                elif self.served < self.limit:
                    gi = self.served
                    self.served += 1
                    out.append([Sample(index=gi * self.n_samples + k, group_index=gi, prompt=f"p{gi}")
                                for k in range(self.n_samples)])
            self.drawn += len(out)
        return out

    def empty(self) -> bool:
        """Nothing left to serve: no group put back, every scripted group served."""
        with self._lock:
            return not self.buffer and self.served >= self.limit

    def add_samples(self, groups: list[list[Sample]]) -> None:
        with self._lock:
            for group in groups:
                self.requeued.append(group[0].group_index)
                for sample in group:  # continued from scratch, as the script says
                    sample.status = Status.PENDING
                self.buffer.append(group)

    def __len__(self) -> int:
        return self.limit


class PlainWorker:
    """slime's fully-async worker's documented behaviour (used when no slime checkout is at hand)."""

    def __init__(self, args: Any, data_buffer: Any, concurrency: int = 10) -> None:
        self.args, self.data_buffer, self.concurrency = args, data_buffer, concurrency
        self.running = True
        self.output_queue: queue.Queue = queue.Queue()
        self.poll_interval = POLL_INTERVAL
        self.worker_thread: threading.Thread | None = None

    def start(self) -> None:
        if self.worker_thread is None or not self.worker_thread.is_alive():
            self.worker_thread = threading.Thread(target=lambda: asyncio.run(self._loop()), daemon=True)
            self.worker_thread.start()

    def stop(self) -> None:
        self.running = False
        if self.worker_thread is not None and self.worker_thread.is_alive():
            self.worker_thread.join(timeout=5)

    def get_completed_groups(self, limit: int | None = None) -> list:
        out = []
        while limit is None or len(out) < limit:
            try:
                out.append(self.output_queue.get_nowait())
            except queue.Empty:
                break
        return out

    async def _loop(self) -> None:
        active: set[asyncio.Task] = set()
        gid = 0
        generate = sys.modules["slime.rollout.sglang_rollout"].generate_and_rm_group
        while self.running:
            active = {task for task in active if not task.done()}
            while len(active) < self.concurrency and self.output_queue.qsize() < self.concurrency:
                groups = self.data_buffer.get_samples(1)
                if not groups:
                    break
                for group in groups:
                    task = asyncio.create_task(generate(self.args, group, sampling_params={}, evaluation=False))
                    task.add_done_callback(self._done(gid))
                    active.add(task)
                    gid += 1
            await asyncio.sleep(self.poll_interval)  # models slime's worker: it tops its pool up at each poll

    def _done(self, gid: int) -> Any:
        def callback(task: asyncio.Task) -> None:
            if task.cancelled():  # the worker stopped with the group in flight
                return
            group = task.result()
            if any(sample.status == Status.ABORTED for sample in group):
                self.data_buffer.add_samples([group])
            else:
                self.output_queue.put((gid, group))
        return callback


POLL_INTERVAL = 0.005
"""The worker's top-up period in these tests (slime's is 1 s): how soon a freed slot is refilled."""


def on_engine_clock(worker_cls: type, engine: Engine) -> type:
    """``worker_cls`` with its finished groups taken on ``engine``'s clock and a short top-up period."""

    class Worker(worker_cls):  # type: ignore[misc, valid-type]
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.poll_interval = POLL_INTERVAL

        def get_completed_groups(self, limit: int | None = None) -> list:
            return engine.completed_groups(self, super().get_completed_groups, limit)

        def stop(self) -> None:
            self.running = False
            engine.stop()
            super().stop()

    Worker.__name__ = Worker.__qualname__ = worker_cls.__name__
    return Worker


def install(engine: Engine) -> dict[str, Any]:
    """Put the fakes in ``sys.modules`` (returns what was there before, for :func:`uninstall`)."""
    before = {name: sys.modules.get(name) for name in NAMES}
    for name in ("slime", "slime.rollout", "slime.utils"):
        package = types.ModuleType(name)
        package.__path__ = []  # a package with nothing else in it: other slime imports fail as without slime
        sys.modules[name] = package
    base_types = _module("slime.rollout.base_types", RolloutFnTrainOutput=RolloutFnTrainOutput)
    async_utils = _module("slime.utils.async_utils", run=asyncio.run)
    http_utils = _module("slime.utils.http_utils", get_rollout_num_engines=lambda args: 1)
    types_module = _module("slime.utils.types", Sample=Sample)

    class GenerateState:
        def __init__(self, args: Any) -> None:
            self.sampling_params: dict = {}
            self.aborted = False

    _module("slime.rollout.sglang_rollout", GenerateState=GenerateState,
            generate_and_rm_group=engine.generate_and_rm_group)
    slime_src = os.environ.get("SLIME_SRC")
    real = Path(slime_src, "slime/rollout/fully_async_rollout.py") if slime_src else None
    if real is not None and real.is_file():
        spec = importlib.util.spec_from_file_location("slime.rollout.fully_async_rollout", real)
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        spec.loader.exec_module(module)
        module.AsyncRolloutWorker = on_engine_clock(module.AsyncRolloutWorker, engine)
    else:
        _module("slime.rollout.fully_async_rollout", AsyncRolloutWorker=on_engine_clock(PlainWorker, engine))
    del base_types, async_utils, http_utils, types_module
    return before


def uninstall(before: dict[str, Any]) -> None:
    for name, module in before.items():
        if module is None:
            sys.modules.pop(name, None)
        else:
            sys.modules[name] = module


def uses_real_worker() -> bool:
    return not issubclass(sys.modules["slime.rollout.fully_async_rollout"].AsyncRolloutWorker, PlainWorker)


def _module(name: str, **attrs: Any) -> types.ModuleType:
    module = types.ModuleType(name)
    module.__dict__.update(attrs)
    sys.modules[name] = module
    return module
