"""The design document's examples (§3-§5), run through the simulated slime loop and the real hooks."""

from __future__ import annotations

import pytest
from conftest import fifo_batches, run_scripted_step, spread, technical, zero

from shopsim_metrics.readers import read_steps
from shopsim_metrics.errors import TechnicalFailureLimitExceeded


@pytest.mark.parametrize("batch", [1, 3, 7])
def test_first_wave_sixteen_zero_std_then_fourteen_spread_then_two_zero_std(wired, batch):
    loop, memory, run_dir = wired()
    kinds = ["zero"] * 16 + ["spread"] * 14 + ["zero"] * 2
    make = lambda gid: zero(gid) if kinds[gid] == "zero" else spread(gid)  # noqa: E731
    result = run_scripted_step(loop, 0, make, fifo_batches(batch))

    assert result.waves == 1
    assert len(result.train_ids) == 16
    assert result.remaining_end == len(result.train_ids)
    (record,) = memory.records
    assert record.train_group_count == 16
    assert record.fallback_group_count == 2
    assert record.zero_std_group_drop_count == 16
    assert record.zero_std_group_count == 18
    assert record.wave_count == 1 and record.submitted_group_count == 32
    assert record.aborted_group_count == 0
    assert record.zero_advantage_train_fraction == pytest.approx(2 / 16)
    assert [r.outcome for r in record.decisions][-2:] == ["fallback", "fallback"]
    assert record.remaining_min == 16
    assert result.drop_metrics == {"rollout/dynamic_filter/drop_shopsim_zero_std_group": 16}
    assert record.reconcile_mismatch_count == 0
    assert read_steps(run_dir)[0] == record


def test_technical_burst_opens_a_second_and_a_third_wave(wired):
    loop, memory, _ = wired(shopsim_max_consecutive_failed_groups=100)
    # 17 technical groups push remaining to 15 -> wave 2; 32 more -> 15 again -> wave 3.
    make = lambda gid: technical(gid) if gid < 49 else spread(gid)  # noqa: E731
    result = run_scripted_step(loop, 0, make, fifo_batches(1))

    (record,) = memory.records
    assert result.waves == record.wave_count == 3
    assert record.submitted_group_count == 96
    assert record.technical_group_drop_count == 49
    assert record.train_group_count == 16 and record.fallback_group_count == 0
    assert record.aborted_group_count == 96 - 65 == len(result.aborted_ids)
    waves_open = [row.waves_open for row in record.decisions]
    assert waves_open[:17] == [1] * 17 and waves_open[17:49] == [2] * 32 and waves_open[49:] == [3] * 16
    assert [row.remaining_before for row in record.decisions] == result.remaining_before
    assert record.max_consecutive_technical_failures == 49
    assert record.consecutive_technical_failures == 0
    assert record.failed_check_counts == {"status_failed": 49}


def test_zero_std_groups_alone_never_open_a_third_wave(wired):
    loop, memory, _ = wired(shopsim_max_consecutive_failed_groups=100)
    make = lambda gid: technical(gid) if gid < 17 else zero(gid, value=1.0)  # noqa: E731
    result = run_scripted_step(loop, 0, make, fifo_batches(1))

    (record,) = memory.records
    assert result.waves == record.wave_count == 2
    assert record.zero_std_group_drop_count == 31
    assert record.fallback_group_count == 16 == record.train_group_count
    assert record.zero_advantage_train_fraction == 1.0
    assert record.remaining_min == 16  # a wave opens before the next judgement whenever remaining < 16


@pytest.mark.parametrize("batch", [1, 20])
def test_zero_std_group_in_data_is_not_pushed_out_by_later_spread(wired, batch):
    loop, memory, _ = wired(over_sampling_batch_size=16)
    make = lambda gid: zero(gid) if gid == 0 else spread(gid)  # noqa: E731
    result = run_scripted_step(loop, 0, make, fifo_batches(batch))

    (record,) = memory.records
    assert 0 in result.train_ids
    assert record.decisions[0].outcome == "fallback"
    assert record.fallback_group_count == 1 and record.train_group_count == 16


def test_later_spread_groups_in_a_full_batch_are_surplus(wired):
    loop, memory, _ = wired()
    make = lambda gid: spread(gid)  # noqa: E731
    result = run_scripted_step(loop, 0, make, fifo_batches(20))
    (record,) = memory.records
    assert record.surplus_group_count == 4 == len(result.surplus_ids)
    assert record.aborted_group_count == 12
    assert record.wasted_sample_fraction == pytest.approx(4 / 20)


def _streak_steps(loop, technical_in_step_1: int):
    # step 0: 16 spread, then 3 technical in the same (last) batch -> streak 3 carried over
    run_scripted_step(loop, 0, lambda gid: spread(gid) if gid < 16 else technical(gid), fifo_batches(19))
    offset = 32
    make = lambda gid: technical(gid) if gid - offset < technical_in_step_1 else spread(gid)  # noqa: E731
    return run_scripted_step(loop, 1, make, fifo_batches(1))


def test_termination_not_one_group_before_the_limit(wired):
    loop, memory, run_dir = wired()
    _streak_steps(loop, technical_in_step_1=4)  # streak reaches 7 < 8
    records = read_steps(run_dir)
    assert [r.terminated for r in records] == [False, False]
    assert records[0].consecutive_technical_failures == 3
    assert records[1].max_consecutive_technical_failures == 7


def test_termination_at_exactly_the_limit_across_a_step_boundary(wired):
    loop, memory, run_dir = wired()
    with pytest.raises(TechnicalFailureLimitExceeded) as info:
        _streak_steps(loop, technical_in_step_1=5)  # 3 + 5 = 8
    err = info.value
    assert (err.streak, err.max_consecutive_failed_groups, err.rollout_id) == (8, 8, 1)
    assert err.failed_checks == {"status_failed": 8}
    for text in ("8 consecutive", "=8", "rollout step 1", "status_failed=8"):
        assert text in str(err)
    records = read_steps(run_dir)  # written before the exception left the filter
    assert [r.rollout_id for r in records] == [0, 1]
    last = records[1]
    assert last.terminated is True
    assert last.technical_group_drop_count == 5 == last.accepted_group_count
    assert last.consecutive_technical_failures == 8
    assert last.decisions[-1].outcome == "dropped_technical"
