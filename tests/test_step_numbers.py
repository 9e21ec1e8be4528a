"""The step number is slime's, even when its live rollout id cannot be read (another slime version)."""

from __future__ import annotations

import logging

import pytest
from conftest import make_args, spread, zero
from hypothesis import given, settings, strategies as st

from shopsim_metrics.sinks import MemorySink
from shopsimrl import slime_runtime


class NoLiveIdSlime:
    """slime's loop as another slime version shows it: no live rollout id, no remaining."""

    source = "slime"

    def rollout_step(self):
        return None

    def remaining_batch_size(self):
        return None

    def live_id_expected(self):
        return True  # slime's rollout runs here, yet its live id cannot be read


@pytest.fixture(autouse=True)
def _fresh_runtime():
    yield
    slime_runtime.reset_runtime()


def _step(args, rollout_id, *, close=True, log=True):
    for gid in range(3):
        slime_runtime.fully_scored_group_filter(args, spread(gid) if gid else zero(gid))
    if close:
        slime_runtime.record_all_samples(args, [], None)
    if log:
        slime_runtime.log_rollout_step(rollout_id, args, [], {}, 0.1)


@settings(max_examples=30, deadline=None)
@given(start=st.integers(0, 50), count=st.integers(1, 5), close=st.booleans(), gap=st.integers(1, 3))
def test_without_a_live_id_each_record_carries_the_log_functions_rollout_id(start, count, close, gap) -> None:
    mem = MemorySink()
    args = make_args(rollout_batch_size=2, over_sampling_batch_size=4, start_rollout_id=start)
    slime_runtime.configure(args, sinks=[mem], loop_state=NoLiveIdSlime())
    ids = [start + gap * k for k in range(count)]
    for rollout_id in ids:
        _step(args, rollout_id, close=close)
    assert [r.rollout_id for r in mem.records] == ids
    slime_runtime.reset_runtime()


def test_a_resumed_run_without_a_live_id_counts_from_start_rollout_id_not_from_0() -> None:
    mem = MemorySink()
    args = make_args(rollout_batch_size=2, over_sampling_batch_size=4, start_rollout_id=3)
    slime_runtime.configure(args, sinks=[mem], loop_state=NoLiveIdSlime())
    for _ in range(3):
        _step(args, None, log=False)  # no log function wired: nothing renumbers
    slime_runtime.reset_runtime()
    assert [r.rollout_id for r in mem.records] == [3, 4, 5]


def test_the_sample_hooks_rollout_id_numbers_the_step() -> None:
    from shopsim_metrics.simulator.samples import SimSample

    mem = MemorySink()
    args = make_args(rollout_batch_size=2, over_sampling_batch_size=4)
    slime_runtime.configure(args, sinks=[mem], loop_state=NoLiveIdSlime())
    slime_runtime.record_generated_sample(args, SimSample(index=0), rollout_id=11)
    _step(args, None, log=False)
    slime_runtime.reset_runtime()
    assert [r.rollout_id for r in mem.records] == [11]


def test_one_warning_when_slimes_live_id_is_missing(caplog) -> None:
    args = make_args(rollout_batch_size=2, over_sampling_batch_size=4)
    slime_runtime.configure(args, sinks=[], loop_state=NoLiveIdSlime())
    with caplog.at_level(logging.WARNING, logger="shopsim_metrics"):
        for rollout_id in range(3):
            _step(args, rollout_id)
    warnings = [r for r in caplog.records if "live rollout id" in r.getMessage()]
    assert len(warnings) == 1


@settings(max_examples=60, deadline=None)
@given(first=st.integers(0, 100), calls=st.lists(st.one_of(st.none(), st.integers(0, 200)), max_size=30))
def test_the_step_numbers_never_go_back_and_count_on_from_the_latest(first, calls) -> None:
    from shopsim_metrics.loop.step_number import StepNumbers

    steps = StepNumbers(first=first)
    latest = None
    for rollout_id in calls:
        if rollout_id is None:  # a step opens with nothing known: counted
            number, counted = steps.open(None)
            assert counted and number == (first if latest is None else latest + 1)
            latest = number
        else:  # slime's log function names a finished step
            assert steps.renumber(rollout_id) == (latest is None or rollout_id > latest)
            latest = rollout_id if latest is None else max(latest, rollout_id)
        assert steps.current() == latest
