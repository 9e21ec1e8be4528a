"""Each step record field has one owner, declared once (record/owners.py); a part giving another's field fails."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings as hsettings, strategies as st

from shopsim_metrics.health.alerts import StreakAlertPolicy
from shopsim_metrics.prompts.lost_signal_guard import LostSignalGuard
from shopsim_metrics.prompts.skip_record import SkippedPrompt, SkipTally
from shopsim_metrics.prompts.value import PromptValueTracker
from shopsim_metrics.record.owners import CLOSED_STEP, OWNED, OWNER_OF, PART_FIELDS, PROMPTS, SKIPPING, SLIME
from shopsim_metrics.record.contract import REASON_ZERO_STD
from shopsim_metrics.record.records import DecisionRow, StepRecord
from shopsim_metrics.sinks import MemorySink
from shopsim_metrics.step.closed_step import ClosedStep, StepKnobs, closed_step_fields
from shopsim_metrics.step.draft import RecordPart, StepDraft
from shopsim_metrics.step.generated_tokens import EpisodeTally, StepTokens
from shopsim_metrics.step.recorder import SlimeFacts, StepRecorder

KNOBS = StepKnobs(rollout_batch_size=2, over_sampling_batch_size=4, n_samples_per_prompt=2)


def test_every_record_field_but_the_step_number_has_exactly_one_owner() -> None:
    every = [name for names in OWNED.values() for name in names]
    assert sorted(every) == sorted(set(every)), "a field declared for two owners"
    assert set(every) == PART_FIELDS == {f.name for f in dataclasses.fields(StepRecord)} - {"rollout_id"}
    assert all(OWNER_OF[name] == owner for owner, names in OWNED.items() for name in names)
    assert all(OWNED.values()), "an owner of nothing"


@hsettings(max_examples=200, deadline=None)
@given(name=st.sampled_from(sorted(PART_FIELDS)), owner=st.sampled_from(sorted(OWNED)))
def test_a_part_giving_a_field_its_owner_does_not_own_is_refused(name: str, owner: str) -> None:
    if OWNER_OF[name] == owner:
        assert dict(StepDraft(0, RecordPart(owner, {name: None}))._fields) == {name: None}
        return
    with pytest.raises(ValueError, match=rf"part of {owner}: {name} is {OWNER_OF[name]}'s field"):
        RecordPart(owner, {name: None})


def test_an_unknown_owner_is_refused() -> None:
    with pytest.raises(ValueError, match="'monitor' is not an owner"):
        RecordPart("monitor", {})


# --- the declaration is what the parts give: no more, no less ----------------------------------------------

def _closed(**changes) -> ClosedStep:
    return ClosedStep(rollout_id=0, knobs=KNOBS, source="mirror", **changes)


def test_the_closed_step_owns_exactly_what_its_facts_make() -> None:
    """A synchronous step, a fully-async one and one with agent episodes: together every field it owns."""
    tally = EpisodeTally(episodes=4, turns_total=10, turns_max=4, turns_from="loss_mask", environment_seconds=6.0,
                         truncated=1)
    given_fields = [set(closed_step_fields(closed)) for closed in (
        _closed(), _closed(fully_async=True, aborted_groups=0),
        _closed(tokens=StepTokens(total=300, aborted=0, observation=100, episodes=tally)))]
    assert set().union(*given_fields) == OWNED[CLOSED_STEP]


def test_slimes_part_holds_exactly_what_slime_owns() -> None:
    recorder = StepRecorder(MemorySink, alerts=StreakAlertPolicy(max_consecutive_failed_groups=8), identity={},
                            num_rollout=None)
    draft = StepDraft(0, RecordPart(CLOSED_STEP, {"environment_seconds_per_episode": 1.0}))
    part = recorder._slime_part(draft, SlimeFacts(rollout_id=0, rollout_extra_metrics={}, rollout_time=4.0))
    assert part.owner == SLIME and set(part) == OWNED[SLIME]


def _judged_row(group_index: int) -> DecisionRow:
    return DecisionRow(order=1, waves_open=1, group_index=group_index, outcome="dropped_zero_std",
                       reason=REASON_ZERO_STD, remaining_before=2, unique_rollouts=2, success_count=0,
                       scorable_rollouts=2, prompt_key="p")


def test_the_skip_tally_and_the_prompt_tracker_give_exactly_what_they_own() -> None:
    skip = SkippedPrompt(prompt_key="k", zero_std_run=2, skip_probability=0.5, kind="zero_std_all_pass",
                         group_index=1)
    given_fields = [set(SkipTally().step_fields([], [skip], p_easy=0.5, p_hard=0.5)),
                    set(SkipTally().step_fields([_judged_row(group_index=2)], [skip], p_easy=None, p_hard=None,
                                                predictions=[(2, 0.4)], guard=LostSignalGuard().record_fields(1)))]
    assert set().union(*given_fields) == OWNED[SKIPPING]  # GRESO's p values, or the predictive rule's calibration and guard
    tracker = PromptValueTracker(table_every=1)
    part = tracker.step_fields(0, [], generated_token_count=0, sources=set())
    assert set(part) == OWNED[PROMPTS]


def test_a_field_given_by_two_parts_of_its_owner_is_refused() -> None:
    """The merge's own check stays: one field, one value."""
    for name, owner in OWNER_OF.items():
        with pytest.raises(ValueError, match=f"{name} given by two parts"):
            StepDraft(0, RecordPart(owner, {name: 1})).finish(RecordPart(owner, {name: 2}))
