"""The predictive rule's lost-signal guard: probes, calibration, the cap, its state, and what it does in a run."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shopsim_metrics.judging.prompt_keys import prompt_key
from shopsim_metrics.prompts.lost_signal_guard import BINS, PROBE, SERVE, SKIP, LostSignalGuard
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


@given(script=steps, probe_every=st.integers(0, 5))
def test_a_draw_above_the_cap_is_served_and_every_nth_draw_within_it_is_a_probe(script, probe_every) -> None:
    guard = LostSignalGuard(max_lost_signal=0.1, probe_every=probe_every)
    within = 0
    for draws, informative, probes in script:
        for chance in draws:
            cap = guard.cap
            action = guard.consider(chance)
            if chance > cap:
                assert action == SERVE
            else:
                within += 1
                assert action == (PROBE if probe_every and within % probe_every == 0 else SKIP)
        guard.close_step(informative=informative, probes=probes)
        assert 0.0 <= guard.cap <= 1.0 and guard.cap * BINS == int(guard.cap * BINS)


@given(script=steps, spread=st.integers(0, 6), extra=st.integers(1, 6))
def test_probes_that_spread_more_never_open_the_cap_wider(script, spread, extra) -> None:
    """Two runs alike but for the last step's probes: the one whose probes spread more skips no more."""
    bold, shy = LostSignalGuard(probe_every=3), LostSignalGuard(probe_every=3)
    for guard, spreads in ((bold, spread), (shy, spread + extra)):
        _run(guard, script)
        guard.close_step(informative=5, probes=[(0.2, i < spreads) for i in range(spread + extra)])
    assert shy.calibration > bold.calibration and shy.cap <= bold.cap


def test_the_cap_closes_past_the_limit_and_reopens_as_informative_groups_come() -> None:
    guard = LostSignalGuard(max_lost_signal=0.1, probe_every=4)
    assert _run(guard, [([0.25] * 12, 10, [])]) == [SKIP, SKIP, SKIP, PROBE] * 3
    assert guard.lost_signal_estimate == pytest.approx(9 * 0.25 / 10)  # c = 1: no probe judged yet
    assert guard.cap == 0.0 and guard.consider(0.01) == SERVE
    for _ in range(40):
        guard.close_step(informative=10, probes=[])
    assert guard.cap == 1.0 and guard.lost_signal_estimate < 0.1


def test_probes_that_stay_zero_std_let_more_through_than_the_predictions_alone() -> None:
    trusting, checked = LostSignalGuard(probe_every=2), LostSignalGuard(probe_every=2)
    for _ in range(30):
        trusting.close_step(informative=4, probes=[])
        checked.close_step(informative=4, probes=[(0.25, False)] * 4)
        for guard in (trusting, checked):
            [guard.consider(0.25) for _ in range(6)]
    assert checked.calibration < 0.1 < trusting.calibration == 1.0
    assert checked.cap == 1.0 > trusting.cap


def test_no_limit_never_caps() -> None:
    guard = LostSignalGuard(max_lost_signal=1.0, probe_every=0)
    assert set(_run(guard, [([0.3] * 50, 0, [(0.3, True)] * 5)] * 5)) == {SKIP} and guard.cap == 1.0


@settings(max_examples=50)
@given(script=steps, rest=steps)
def test_a_restored_guard_decides_as_the_unbroken_one(script, rest) -> None:
    guard = LostSignalGuard(probe_every=3)
    _run(guard, script)
    twin = LostSignalGuard(probe_every=3)
    twin.load_state_dict(json.loads(json.dumps(guard.state_dict())))
    assert _run(twin, rest) == _run(guard, rest) and twin.state_dict() == guard.state_dict()


@pytest.mark.parametrize("damage", [
    {"format": 2}, {"cap": "1"}, {"cap": float("nan")}, {"run_forgone": -1.0}, {"skips": 1.5}, {"skips": True},
    {"chances": [0.0] * (BINS - 1)}, {"chances": None}, {"predicted_probes": 0.0}, {"spread_probes": None}])
def test_a_damaged_state_is_refused_with_the_field_named(damage) -> None:
    state = {**LostSignalGuard().state_dict(), **damage}
    with pytest.raises(ValueError, match="lost-signal guard state"):
        LostSignalGuard().load_state_dict(state)


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
def test_the_data_source_serves_every_nth_skip_as_a_probe_and_its_verdict_reaches_the_guard(tmp_path) -> None:
    prompts = pool(8)
    ds = skip_source(make_args(tmp_path, shopsim_prompt_skip="predictive", shopsim_prompt_skip_threshold=0.85,
                               shopsim_prompt_skip_probe_every=2), prompts)
    keys = [prompt_key([p])[0] for p in prompts]
    n = ds.predictor.n_samples
    for step in range(6):  # every prompt failed whole six times: each is a skip
        for key in keys:
            ds.history.observe(key, "zero_std_all_fail", successes=0, scored=n)
        ds.history.close_step(step)
    served = [prompt_key(g)[0] for g in ds.get_samples(4)]
    skipped = ds.take_skipped()
    assert len(skipped) == 4 and len(served) == 4  # 8 draws: 4 skipped, every 2nd served as a probe
    assert ds.take_guard_fields() == {"skip_probe_count": 4, "skip_cap": 1.0, "skip_lost_signal_estimate": None}
    twin = skip_source(make_args(tmp_path, shopsim_prompt_skip="predictive", shopsim_prompt_skip_threshold=0.85,
                                 shopsim_prompt_skip_probe_every=2), prompts)
    twin.load_state_dict(json.loads(json.dumps(ds.state_dict())))  # a checkpoint with the probes not judged yet
    for source in (ds, twin):
        for key in served:  # the probes spread: the predictions were wrong
            source.history.observe(key, "spread", successes=n // 2, scored=n)
        source.history.close_step(6)
    before = ds.guard.calibration
    ds.get_samples(1)  # the first wave after the close hands the step to the guard
    assert ds.guard.calibration > before and ds.guard.cap < 1.0
    fields = ds.take_guard_fields()
    assert fields["skip_cap"] == ds.guard.cap and fields["skip_lost_signal_estimate"] > 0.1
    twin.get_samples(1)
    assert twin.guard.state_dict() == ds.guard.state_dict()  # the resumed guard read the pending probes' verdicts
