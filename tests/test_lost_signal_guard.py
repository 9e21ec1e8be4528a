"""The predictive rule's lost-signal guard: probes, calibration, the cap, its state, and what it does in a run."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shopsim_metrics.judging.prompt_keys import prompt_key
from shopsim_metrics.prompts.lost_signal_guard import BINS, HORIZON, PROBE, SERVE, SKIP, STEP_MEMORY, LostSignalGuard
from shopsim_metrics.simulator.config import SimConfig
from shopsim_metrics.simulator.skipping.skip_measure import measure_skipping
from tests.test_data_source import make_args, pool, skip_source

chances = st.floats(min_value=0.0, max_value=1.0, allow_nan=False)
steps = st.lists(st.tuples(st.lists(chances, max_size=12), st.integers(0, 20),
                           st.lists(st.tuples(chances, st.booleans()), max_size=4)), min_size=1, max_size=12)


def _run(guard: LostSignalGuard, script: list) -> list[str]:
    actions = []
    for draws, informative, probes in script:
        actions += [guard.consider(chance) for chance in draws]
        guard.close_step(informative=informative, probes=probes)
    return actions


def _bins_within(guard: LostSignalGuard) -> int:
    return round(guard.cap * BINS)


@given(script=steps, probe_every=st.integers(0, 5))
def test_a_draw_at_or_past_the_cap_is_served_and_a_probe_comes_once_the_credit_reaches_one(script, probe_every) -> None:
    guard = LostSignalGuard(max_lost_signal=0.1, probe_every=probe_every)
    for draws, informative, probes in script:
        for chance in draws:
            within, credit, interval = _bins_within(guard), guard.probe_credit, guard.probe_interval
            spent = guard.open_step_forgone
            action = guard.consider(chance)
            if min(int(max(chance, 1e-6) * BINS), BINS - 1) >= within or spent + max(chance, 1e-6) > guard.step_budget:
                assert action == SERVE
            else:
                assert action == (PROBE if probe_every and credit + 1 / interval >= 1 else SKIP)
            assert 2.0 <= interval <= max(2.0, probe_every)  # probing more while the bound is wide, never less
        guard.close_step(informative=informative, probes=probes)
        assert 0.0 <= guard.cap <= 1.0 and guard.cap * BINS == int(guard.cap * BINS)


@given(script=steps)
def test_the_cap_keeps_the_lost_signal_at_the_bound_within_the_limit_over_the_horizon(script) -> None:
    """The invariant the cap is set by: the would-be skips below it, at the recent steps' rate over the horizon, with
    what was forgone so far, times the calibration's upper bound, stay within the limit of the informative groups."""
    guard = LostSignalGuard(max_lost_signal=0.1, probe_every=3)
    for draws, informative, probes in script:
        [guard.consider(chance) for chance in draws]
        guard.close_step(informative=informative, probes=probes)
        below = sum(guard.chances[:_bins_within(guard)]) * (1 - STEP_MEMORY)  # per step
        trained = guard.run_informative + HORIZON * guard.step_informative * (1 - STEP_MEMORY)
        forgone = guard.run_forgone + HORIZON * guard.step_budget
        assert below <= guard.step_budget * (1 + 1e-9)
        if guard.cap > 0:
            assert guard.calibration_bound * forgone <= 0.1 * trained * (1 + 1e-9) + 1e-12
        [guard.consider(chance) for chance in draws]  # the step budget is never overspent, whatever comes
        assert guard.open_step_forgone <= guard.step_budget * (1 + 1e-9)


@given(script=steps, spread=st.integers(0, 6), extra=st.integers(1, 6))
def test_probes_that_spread_more_never_open_the_cap_wider(script, spread, extra) -> None:
    """Two runs alike but for the last step's probes: the one whose probes spread more skips no more."""
    bold, shy = LostSignalGuard(probe_every=3), LostSignalGuard(probe_every=3)
    for guard, spreads in ((bold, spread), (shy, spread + extra)):
        _run(guard, script)
        guard.close_step(informative=5, probes=[(0.2, i < spreads) for i in range(spread + extra)])
    assert shy.calibration_bound > bold.calibration_bound and shy.cap <= bold.cap


def test_with_nothing_seen_the_bound_is_wide_and_nothing_is_skipped() -> None:
    guard = LostSignalGuard(max_lost_signal=0.1, probe_every=8)
    assert guard.cap == 0.0 and guard.consider(0.01) == SERVE
    guard.close_step(informative=10, probes=[])
    assert guard.calibration_bound > 4 and guard.probe_interval < 4  # no probe seen: one draw in 3.5 would be one
    assert _run(guard, [([0.2] * 10, 10, [])] * 3).count(SKIP) == 0  # 0.2 is past what the wide bound allows


def test_probes_that_stay_zero_std_open_the_cap_and_probing_slows_as_the_bound_narrows() -> None:
    guard = LostSignalGuard(max_lost_signal=0.1, probe_every=8)
    intervals, caps = [], []
    for _ in range(40):
        _run(guard, [([0.2] * 10, 10, [(0.2, False)] * 2)])
        intervals.append(guard.probe_interval)
        caps.append(guard.cap)
    assert caps[0] <= 0.2 < caps[-1] == 1.0  # closed at first (a draw of 0.2 served), open once the probes said so
    assert intervals == sorted(intervals) and intervals[0] < 6 < intervals[-1] <= 8
    assert guard.calibration < guard.calibration_bound < 0.3


def test_probes_that_spread_as_predicted_keep_the_cap_where_the_limit_holds_at_the_bound() -> None:
    """Right predictions (c = 1): the bound stays above 1, so the guard forgoes less than the limit, not more."""
    guard = LostSignalGuard(max_lost_signal=0.1, probe_every=4)
    for step in range(200):
        draws = [0.25] * 8
        actions = [guard.consider(chance) for chance in draws]
        probes = [(0.25, (step * 8 + i) % 4 == 0) for i, a in enumerate(actions) if a != SKIP]
        guard.close_step(informative=20, probes=probes)
    assert 0.8 < guard.calibration < 1.2 < guard.calibration_bound
    assert guard.lost_signal_estimate <= 0.1


def test_no_limit_never_caps_and_no_probe_trusts_the_predictions() -> None:
    guard = LostSignalGuard(max_lost_signal=1.0, probe_every=0)
    assert set(_run(guard, [([0.3] * 50, 0, [(0.3, True)] * 5)] * 5)) == {SKIP} and guard.cap == 1.0
    trusting = LostSignalGuard(max_lost_signal=0.1, probe_every=0)
    _run(trusting, [([0.05] * 10, 10, [])] * 5)
    assert trusting.calibration == trusting.calibration_bound == 1.0 and trusting.cap > 0.05


@settings(max_examples=50)
@given(script=steps, rest=steps)
def test_a_restored_guard_decides_as_the_unbroken_one(script, rest) -> None:
    guard = LostSignalGuard(probe_every=3)
    _run(guard, script)
    twin = LostSignalGuard(probe_every=3)
    twin.load_state_dict(json.loads(json.dumps(guard.state_dict())))
    assert _run(twin, rest) == _run(guard, rest) and twin.state_dict() == guard.state_dict()


@pytest.mark.parametrize("damage", [
    {"format": 1}, {"cap": "1"}, {"cap": float("nan")}, {"cap": 0.33}, {"run_forgone": -1.0}, {"probe_credit": 1.5},
    {"chances": [0.0] * (BINS - 1)}, {"chances": None}, {"chances": [1e308] * BINS}, {"spread_probes": None},
    {"spread_probes": 1e308}, {"run_forgone": 1e308}, {"run_informative": 1e308},
    {"predicted_probes": 1e-300, "spread_probes": 3.0, "counted_probes": 3.0},
    {"spread_probes": 5.0, "counted_probes": 2.0}],
    ids=lambda damage: ",".join(f"{k}={v!r}"[:30] for k, v in damage.items()))
def test_an_impossible_state_is_refused_with_the_field_named(damage) -> None:
    guard = LostSignalGuard()
    _run(guard, [([0.1] * 4, 5, [(0.1, False)])])
    before = guard.state_dict()
    with pytest.raises(ValueError, match="lost-signal guard state"):
        guard.load_state_dict({**before, **damage})
    assert guard.state_dict() == before  # nothing was changed


LUCK = SimConfig(steps=60, prompt_pool=128, n_samples_per_prompt=4, skill_start=0.0, skill_end=0.0,
                 difficulty_spread=1.5, partial_credit_rate=0.0, technical_rate=0.0, prompt_skip="predictive",
                 wave_size="adaptive")
"""A skill that does not move and prompts mostly solved 20% to 80% of the time, in groups of 4: an all-fail visit is
often luck (a prompt solved 30% of the time fails a whole group a quarter of the time)."""
SHORT_DRIFT = SimConfig(steps=40, prompt_pool=800, n_samples_per_prompt=4, skill_start=-3.0, skill_end=3.0,
                        learning_steps=20.0, difficulty_spread=4.0, difficulty_drift=0.05, partial_credit_rate=0.0,
                        technical_rate=0.02, prompt_skip="predictive", wave_size="adaptive")
"""A 40-step run whose policy learns fast, groups of 4, each prompt drawn about 1.6 times: a prompt failed whole once
is skipped, and by its next draw it has often become learnable."""


@pytest.mark.parametrize("world", [LUCK, SHORT_DRIFT], ids=["luck", "short drifting run"])
def test_the_guard_holds_the_lost_signal_the_rule_alone_would_forgo(world) -> None:
    alone = measure_skipping(replace(world, prompt_skip_max_lost_signal=1.0, prompt_skip_probe_every=0), seeds=(0, 1))
    guarded = measure_skipping(world, seeds=(0, 1))
    assert alone.lost_signal > 0.15 and guarded.lost_signal <= 0.1
    assert guarded.skipped_prompts < alone.skipped_prompts


# --- through the data source ---------------------------------------------------------------------
def _predictive(tmp_path, prompts, **settings):
    return skip_source(make_args(tmp_path, shopsim_prompt_skip="predictive", shopsim_prompt_skip_threshold=0.85,
                                 **settings), prompts)


def _failed_whole(ds, keys, steps) -> None:
    n = ds.policy.rule.n_samples
    for step in steps:
        for key in keys:
            ds.history.observe(key, "zero_std_all_fail", successes=0, scored=n)
        ds.history.observe("a prompt that spreads", "spread", successes=n // 2, scored=n)
        ds.history.close_step(step)


def test_the_data_source_serves_what_the_bound_forbids_reads_its_verdicts_and_skips_once_they_say_so(tmp_path) -> None:
    prompts = pool(8)
    ds = _predictive(tmp_path, prompts)
    keys = [prompt_key([p])[0] for p in prompts]
    _failed_whole(ds, keys, range(6))  # every prompt failed whole six times: each is a would-be skip
    served = [prompt_key(g)[0] for g in ds.get_samples(4)]
    assert ds.take_skipped() == [] and len(served) == 4  # nothing seen: the bound is wide, every draw is served
    assert ds.policy.take_guard_fields()["skip_probe_count"] == 0 and len(ds.policy.probes) == 4  # their verdicts will be read
    twin = _predictive(tmp_path, prompts)
    twin.load_state_dict(json.loads(json.dumps(ds.state_dict())))  # a checkpoint with the served draws not judged yet
    for source in (ds, twin):
        _failed_whole(source, keys, [6])  # the served draws stay zero-std: the predictions were right
    before = ds.policy.guard.calibration_bound
    ds.get_samples(1)  # the first wave after the close hands the step and the verdicts to the guard
    twin.get_samples(1)
    assert ds.policy.guard.calibration_bound < before and twin.policy.guard.state_dict() == ds.policy.guard.state_dict()
    for step in range(7, 40):  # as the verdicts keep coming zero-std, the bound narrows and the skips begin
        _failed_whole(ds, keys, [step])
        ds.get_samples(4)
    fields, skipped = ds.policy.take_guard_fields(), ds.take_skipped()
    assert skipped and fields["skip_cap"] > 0.0 and fields["skip_probe_count"] > 0
    assert 0.0 < fields["skip_lost_signal_estimate"] < 0.1


def test_the_guard_counts_the_informative_groups_trained_not_judged() -> None:
    """A step that judges more groups with spread than it trains (surplus): the guard's lost signal is per trained."""
    from shopsim_metrics.prompts.skip_evidence import MonitorSkipHistory
    from shopsim_metrics.prompts.value import PromptValueTracker
    from shopsim_metrics.record.records import DecisionRow, StepRecord

    rows = [DecisionRow(order=i, waves_open=1, group_index=i, outcome="trained" if i < 3 else "surplus",
                        reason="shopsim_trained" if i < 3 else "shopsim_surplus", remaining_before=4,
                        unique_rollouts=2, success_count=1, scorable_rollouts=2, prompt_key=f"b2:{i:015x}")
            for i in range(6)]
    tracker = PromptValueTracker()
    tracker.observe(StepRecord(rollout_id=2, decisions=rows))
    closed = MonitorSkipHistory(tracker).last_closed_step()
    assert (closed.informative, closed.trained_informative) == (6, 3)
    restored = PromptValueTracker()
    restored.load_state_dict(json.loads(json.dumps(tracker.state_dict())))
    assert MonitorSkipHistory(restored).last_closed_step() == closed


@pytest.mark.parametrize("damage", [{"spread_probes": 1e308}, {"run_forgone": 1e308}, {"run_informative": 1e308},
                                    {"predicted_probes": 1e-300}, {"format": 1}, {"pending_probes": [["k", -1, 2]]}])
def test_an_impossible_guard_state_is_left_aside_with_one_warning_and_the_guard_starts_afresh(tmp_path, caplog,
                                                                                              damage) -> None:
    prompts = pool(8)
    ds = _predictive(tmp_path, prompts)
    _failed_whole(ds, [prompt_key([p])[0] for p in prompts], range(6))
    ds.get_samples(4)
    state = json.loads(json.dumps(ds.state_dict()))
    state["guard"].update({"spread_probes": 3.0, "counted_probes": 3.0, **damage})
    twin = _predictive(tmp_path, prompts)
    with caplog.at_level("WARNING", logger="shopsim_metrics"):
        twin.load_state_dict(state)
    warnings = [r.getMessage() for r in caplog.records if "lost-signal guard was left aside" in r.getMessage()]
    assert len(warnings) == 1 and next(iter(damage)) in warnings[0]
    assert twin.policy.guard.state_dict() == LostSignalGuard.of(twin.settings.prompt_skip_rule).state_dict()
    assert twin.policy.probes == {} and twin.adapted_step == ds.adapted_step == 5  # the rest of the state is kept
    assert twin.history.state_dict() == ds.history.state_dict()


class _Monitor:
    def __init__(self, run_id: str, history) -> None:
        self.run_id, self.history = run_id, history

    def attach_prompt_skip(self, source):
        return self.history


def test_another_runs_state_is_refused_with_one_warning(tmp_path, caplog) -> None:
    from tests.fed_history import FedHistory

    prompts = pool(8)
    keys = [prompt_key([p])[0] for p in prompts]
    history = FedHistory()
    ours = skip_source(make_args(tmp_path, shopsim_prompt_skip="predictive", shopsim_prompt_skip_threshold=0.85),
                       prompts, history=None, monitor=_Monitor("run-a", history))
    _failed_whole(ours, keys, range(30))
    ours.get_samples(4)
    state = json.loads(json.dumps(ours.state_dict()))
    assert state["run_id"] == "run-a"
    for run_id, refused in (("run-a", False), ("run-b", True)):
        caplog.clear()
        resumed = skip_source(make_args(tmp_path, shopsim_prompt_skip="predictive", shopsim_prompt_skip_threshold=0.85),
                              prompts, history=None, monitor=_Monitor(run_id, history))
        resumed.load_state_dict(state)
        loaded = resumed.policy.guard
        assert loaded.state_dict() != LostSignalGuard().state_dict()  # the state was loaded
        with caplog.at_level("WARNING", logger="shopsim_metrics"):
            resumed.get_samples(1)
        warned = [r.getMessage() for r in caplog.records if "not this run" in r.getMessage()]
        assert len(warned) == int(refused) and (resumed.policy.guard is not loaded) == refused
        assert all("run-a" in w and "run-b" in w for w in warned)
