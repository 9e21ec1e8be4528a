"""slime's drop rule is held once: the accountant, the simulator and the filter's answers agree with it."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from shopsim_metrics.judging.group_judgement import SPREAD, TECHNICAL, ZERO_STD, GroupJudgement
from shopsim_metrics.record import contract as C
from shopsim_metrics.step.closed_step import StepKnobs
from shopsim_metrics.step.accounting import StepAccountant
from shopsim_metrics.step.drop_rule import filter_flags, should_drop

KINDS = st.sampled_from((SPREAD, ZERO_STD, TECHNICAL))
REWARDS = {SPREAD: (0.0, 1.0), ZERO_STD: (1.0, 1.0), TECHNICAL: ()}


@given(st.booleans(), st.booleans(), st.integers(-3, 40), st.integers(1, 20))
def test_rule_as_the_spec_states_it(keep, when_insufficient, remaining, target):
    """slime_integration.md: kept -> not dropped; fallback allowed and remaining <= target -> not dropped."""
    expected = not (keep or (when_insufficient and remaining <= target))
    assert should_drop(keep, when_insufficient, remaining_batch_size=remaining, target_data_size=target) is expected


def test_both_sides_of_the_threshold():
    flags = filter_flags(ZERO_STD)
    assert should_drop(*flags, remaining_batch_size=5, target_data_size=4)
    assert not should_drop(*flags, remaining_batch_size=4, target_data_size=4)
    assert should_drop(*filter_flags(TECHNICAL), remaining_batch_size=0, target_data_size=4)
    assert not should_drop(*filter_flags(SPREAD), remaining_batch_size=99, target_data_size=4)


@given(st.lists(st.tuples(KINDS, st.integers(0, 12)), min_size=1, max_size=30), st.integers(1, 6))
def test_accountant_drops_exactly_what_the_rule_drops(judged, target):
    acc = StepAccountant(StepKnobs(rollout_batch_size=target, over_sampling_batch_size=target))
    for kind, remaining in judged:
        group = GroupJudgement(kind, None, 0, 2, REWARDS[kind])
        outcome = acc.judge(group, step=0, remaining=remaining)
        dropped = outcome in (C.OUTCOME_DROPPED_TECHNICAL, C.OUTCOME_DROPPED_ZERO_STD)
        assert dropped is should_drop(*filter_flags(kind), remaining_batch_size=remaining, target_data_size=target)

