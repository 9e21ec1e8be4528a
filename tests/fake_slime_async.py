"""Fake slime pieces for the fully-async rollout function, with scripted latencies and rewards.

:func:`install` puts into ``sys.modules`` the few slime modules that
:func:`shopsimrl.async_rollout.generate_rollout_fully_async` imports when called:
``slime.rollout.base_types`` (``RolloutFnTrainOutput``), ``slime.utils.async_utils`` (``run``),
``slime.utils.http_utils`` (``get_rollout_num_engines``), ``slime.utils.types`` (``Sample`` with its
``Status``), ``slime.rollout.sglang_rollout`` (``GenerateState``, ``generate_and_rm_group``: waits the
group's scripted latency, then sets its scripted rewards and the engine's weight version) and
``slime.rollout.fully_async_rollout``: slime's own file when ``SLIME_SRC`` names a checkout (it
imports only the fakes above), else :class:`PlainWorker`, written here to slime's documented
behaviour (a pool topped up every ``poll_interval`` while fewer than ``concurrency`` groups are in
flight and fewer than ``concurrency`` wait; aborted groups back to the buffer; the rest queued).

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
    """The scripted engine: the groups' latencies and rewards, and the weight version it reports."""

    def __init__(self, scripts: list[GroupScript], n_samples: int, sample_hook: Any = None) -> None:
        self.scripts = scripts
        self.n_samples = n_samples
        self.weight_version = 0
        self.sample_hook = sample_hook  # called as slime calls --rollout-sample-hook-path (args, sample)
        self.started: list[int] = []  # group_index, in start order
        self.finished: list[int] = []
        self.version_of: dict[int, int] = {}  # group_index -> the weight version it was first generated with
        self.attempts: dict[int, int] = {}  # group_index -> generations started

    async def generate_and_rm_group(self, args: Any, group: list, sampling_params: dict, evaluation: bool = False):
        gi = group[0].group_index
        script = self.scripts[gi]
        self.started.append(gi)
        self.attempts[gi] = attempt = self.attempts.get(gi, 0) + 1
        aborted = script.aborted_at(attempt)
        version = self.weight_version  # the weights the generation ran with
        await asyncio.sleep(script.latency)
        for sample, reward in zip(group, script.rewards):
            sample.status = Status.ABORTED if aborted else Status.COMPLETED
            sample.reward = None if aborted else reward
            sample.response_length += script.tokens
            sample.weight_versions.append(str(version))
            if self.sample_hook is not None:
                self.sample_hook(args, sample)
        self.finished.append(gi)
        self.version_of.setdefault(gi, version)
        return group


class DataSource:
    """slime's data source shape: ``get_samples(n)`` serves buffered groups first, then new ones."""

    def __init__(self, n_samples: int, limit: int) -> None:
        self.n_samples = n_samples
        self.limit = limit  # groups the script has
        self.buffer: list[list[Sample]] = []
        self.served = 0
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
        return out

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
            await asyncio.sleep(self.poll_interval)

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
"""The worker's top-up period in these tests (slime's is 1 s): small next to the scripted latencies."""


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
        original = module.AsyncRolloutWorker.__init__

        def init(self: Any, *args: Any, **kwargs: Any) -> None:
            original(self, *args, **kwargs)
            self.poll_interval = POLL_INTERVAL

        module.AsyncRolloutWorker.__init__ = init
    else:
        _module("slime.rollout.fully_async_rollout", AsyncRolloutWorker=PlainWorker)
    del base_types, async_utils, http_utils, types_module
    return before


def uninstall(before: dict[str, Any]) -> None:
    for name, module in before.items():
        if module is None:
            sys.modules.pop(name, None)
        else:
            sys.modules[name] = module


def uses_real_worker() -> bool:
    return sys.modules["slime.rollout.fully_async_rollout"].AsyncRolloutWorker is not PlainWorker


def _module(name: str, **attrs: Any) -> types.ModuleType:
    module = types.ModuleType(name)
    module.__dict__.update(attrs)
    sys.modules[name] = module
    return module
