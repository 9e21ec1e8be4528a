"""Waves have one owner: the planner sizes a wave and records it in one call, and hands the step's waves over at
its close."""

from __future__ import annotations

from types import SimpleNamespace

from hypothesis import given, settings as hsettings, strategies as st

from shopsim_metrics.judging.group_judgement import GroupJudgement
from shopsim_metrics.prompts.data_source import PromptSkipDataSource
from shopsim_metrics.step.accounting import StepAccountant
from shopsim_metrics.step.closed_step import StepKnobs, step_draft
from shopsim_metrics.loop.loop_state import ManualLoopState
from shopsim_metrics.waves.wave_planner import WavePlanner

KINDS = {"spread": ("spread", (0.0, 1.0), 1), "zero_std": ("zero_std", (0.0, 0.0), 0),
         "technical": ("technical", (), 0)}


def _judgement(kind: str, index: int) -> GroupJudgement:
    name, rewards, successes = KINDS[kind]
    return GroupJudgement(name, "status_failed" if kind == "technical" else None, index, 2, rewards, successes)


def _planner(loop: ManualLoopState, target: int = 4, over: int = 8) -> tuple[WavePlanner, StepAccountant]:
    planner = WavePlanner(rollout_batch_size=target, over_sampling_batch_size=over, fill_probability=0.95,
                          loop_state=loop)
    knobs = StepKnobs(rollout_batch_size=target, over_sampling_batch_size=over, n_samples_per_prompt=2)
    return planner, StepAccountant(knobs, waves=planner)


steps = st.lists(st.tuples(st.lists(st.integers(1, 12), min_size=1, max_size=4),
                           st.lists(st.sampled_from(sorted(KINDS)), min_size=1, max_size=12)), min_size=1, max_size=6)


@hsettings(max_examples=60, deadline=None)
@given(steps=steps)
def test_each_planned_wave_is_the_one_the_record_counts(steps) -> None:
    """Whatever slime asks, the sizes the planner answered are the waves the step's record counts, in order, and
    the first wave's prediction is the one the record says."""
    loop = ManualLoopState()
    planner, accountant = _planner(loop)
    for step, (asks, kinds) in enumerate(steps):
        loop.step = step
        answered = [planner.plan(asked) for asked in asks]
        assert all(size >= 1 for size in answered)
        for index, kind in enumerate(kinds):
            loop.remaining = sum(answered) - sum(1 for k in kinds[:index] if k != "spread")
            accountant.judge(_judgement(kind, index), step=step, remaining=max(loop.remaining, 0))
        draft = step_draft(accountant.close_step())
        assert draft.value("wave_count") == len(answered)
        predicted = draft.value("predicted_second_wave_probability")
        assert (predicted is None) == (step == 0)  # sized from the recent steps once one has closed
        assert predicted is None or 0.0 <= predicted <= 1.0
    assert len(planner.recent_orders.state_dict()["orders"]) == min(len(steps), 8)


def test_the_first_wave_of_a_known_run_is_sized_from_the_recent_steps_and_predicted_once() -> None:
    loop = ManualLoopState()
    planner, accountant = _planner(loop)
    loop.step = 0
    assert planner.plan(8) == 8  # nothing known yet: what slime asks
    for index, kind in enumerate(["zero_std"] * 6 + ["spread"] * 4):
        accountant.judge(_judgement(kind, index), step=0, remaining=None)
    accountant.close_step()
    loop.step = 1
    first, second = planner.plan(8), planner.plan(8)
    assert first == 8 and second >= 1  # a zero-std-heavy step: the cap
    closed = accountant.close_step() if accountant.open_rollout_id() is not None else None
    assert closed is None  # nothing judged in step 1 yet: the waves stay with the planner until the step closes
    waves = planner.close(1, [])
    assert waves.sizes == [first, second] and 0.0 <= waves.second_wave_probability <= 1.0


def test_the_fully_async_rollout_has_no_waves_to_plan() -> None:
    loop = ManualLoopState()
    loop.step = 0
    planner, _ = _planner(loop)
    planner.one_group_at_a_time = True
    assert planner.plan(1) == 1
    assert planner.close(0, ["spread"]).sizes is None


def test_the_data_source_asks_the_planner_and_nothing_else_of_the_monitor() -> None:
    """The monitor's only wave interface is its planner: a monitor with nothing but ``waves`` serves adaptive waves."""
    loop = ManualLoopState()
    loop.step = 0
    planner, _ = _planner(loop, target=4, over=16)

    class Inner:
        def get_samples(self, n):
            return [[SimpleNamespace(prompt=f"p{i}", metadata={})] for i in range(n)]

        def __len__(self):
            return 100

    ds = PromptSkipDataSource(SimpleNamespace(shopsim_wave_size="adaptive", rollout_batch_size=4,
                                              over_sampling_batch_size=16), inner=Inner(),
                              monitor=SimpleNamespace(waves=planner))
    served = ds.get_samples(16)
    assert len(served) == 16 and planner.close(0, []).sizes == [16]
    fixed = PromptSkipDataSource(SimpleNamespace(), inner=Inner(), monitor=SimpleNamespace())  # never asked
    assert len(fixed.get_samples(5)) == 5
