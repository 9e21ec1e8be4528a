"""Every finished step gets its record, whatever slime hands the hooks (issue: nothing lost)."""

from __future__ import annotations

import math

import pytest
from conftest import make_args, spread, zero
from hypothesis import given, settings, strategies as st

from shopsim_metrics.sinks import MemorySink
from shopsim_metrics.record import contract as C
from shopsimrl import slime_runtime


@pytest.fixture(autouse=True)
def _fresh_runtime():
    yield
    slime_runtime.reset_runtime()


def _one_step(args, rollout_id: int, metrics, rollout_time=0.5, samples=()):
    for gid in range(4):
        slime_runtime.fully_scored_group_filter(args, zero(gid) if gid % 2 else spread(gid))
    slime_runtime.record_all_samples(args, [zero(1)], None)
    slime_runtime.log_rollout_step(rollout_id, args, samples, metrics, rollout_time)


ODD_VALUES = st.one_of(
    st.none(), st.integers(-5, 10**20), st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=5),
    st.booleans(), st.lists(st.integers(), max_size=2), st.dictionaries(st.text(max_size=2), st.integers(), max_size=2),
)
ODD_METRICS = st.one_of(
    st.none(), st.lists(ODD_VALUES, max_size=3), st.text(max_size=5), st.integers(), st.floats(allow_nan=True),
    st.fixed_dictionaries({C.slime_drop_metric(C.REASON_TECHNICAL): ODD_VALUES,
                           C.slime_drop_metric(C.REASON_ZERO_STD): ODD_VALUES}),
)


@settings(max_examples=60, deadline=None)
@given(metrics=ODD_METRICS, rollout_time=ODD_VALUES)
def test_every_finished_step_gets_its_record_whatever_metrics_and_time(metrics, rollout_time) -> None:
    mem = MemorySink()
    args = make_args(rollout_batch_size=2, over_sampling_batch_size=4)
    slime_runtime.configure(args, sinks=[mem])
    for rollout_id in range(2):
        _one_step(args, rollout_id, metrics, rollout_time, samples=metrics)
    assert [r.rollout_id for r in mem.records] == [0, 1]
    for record in mem.records:
        counts = record.slime_drop_counts
        assert counts is None or all(v is None or (isinstance(v, int) and v >= 0) for v in counts.values())
        assert record.rollout_seconds is None or math.isfinite(record.rollout_seconds)
    slime_runtime.reset_runtime()


@pytest.mark.parametrize("value", [float("nan"), float("inf"), "n/a", -1, 2.5])
def test_an_unreadable_slime_counter_is_null_and_not_compared(value) -> None:
    mem = MemorySink()
    args = make_args(rollout_batch_size=2, over_sampling_batch_size=4)
    slime_runtime.configure(args, sinks=[mem])
    _one_step(args, 0, {C.slime_drop_metric(C.REASON_ZERO_STD): value, C.slime_drop_metric(C.REASON_TECHNICAL): 0})
    (record,) = mem.records
    assert record.slime_drop_counts == {C.REASON_TECHNICAL: 0, C.REASON_ZERO_STD: None}
    assert record.reconcile_mismatch_count == 0


def test_metrics_that_are_a_list_leave_the_reconcile_fields_null() -> None:
    mem = MemorySink()
    args = make_args(rollout_batch_size=2, over_sampling_batch_size=4)
    slime_runtime.configure(args, sinks=[mem])
    _one_step(args, 0, [{"a": 1}])
    (record,) = mem.records
    assert (record.slime_drop_counts, record.reconcile_mismatch_count) == (None, None)
    assert record.accepted_group_count == 4


def _exploding_generator():
    raise RuntimeError("boom")
    yield  # pragma: no cover


@pytest.mark.parametrize("groups", [None, _exploding_generator(), iter([[1]]), 3, "text", object()])
def test_the_all_samples_hook_never_raises_and_the_step_still_closes(groups) -> None:
    mem = MemorySink()
    args = make_args(rollout_batch_size=2, over_sampling_batch_size=4)
    slime_runtime.configure(args, sinks=[mem])
    slime_runtime.fully_scored_group_filter(args, spread(0))
    assert slime_runtime.record_all_samples(args, groups, None) is None
    slime_runtime.log_rollout_step(0, args, [], {}, 0.1)
    assert [r.rollout_id for r in mem.records] == [0]


def test_a_failing_monitor_keeps_the_group_and_does_not_raise(monkeypatch) -> None:
    args = make_args()
    runtime = slime_runtime.configure(args, sinks=[])
    monkeypatch.setattr(runtime, "filter_group", lambda samples: (_ for _ in ()).throw(KeyError("x")))
    assert slime_runtime.fully_scored_group_filter(args, zero(0)).keep is True


def test_a_record_is_written_even_when_completing_it_fails(monkeypatch) -> None:
    mem = MemorySink()
    args = make_args(rollout_batch_size=2, over_sampling_batch_size=4)
    runtime = slime_runtime.configure(args, sinks=[mem])
    monkeypatch.setattr(runtime.recorder, "skip_fields", lambda draft: 1 / 0)
    _one_step(args, 0, {})
    _one_step(args, 1, {})
    assert [r.rollout_id for r in mem.records] == [0, 1]
