"""``tune --from`` on a run with one burst: rates step by step, the burst weighed as a burst, dominance said."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from shopsim_metrics.cli import main
from shopsim_metrics.simulator.config import FailureBurst, SimConfig
from shopsim_metrics.simulator.loop import Simulator
from shopsim_metrics.simulator.tuning.step_rates import estimate_rates
from shopsim_metrics.simulator.tuning.tune import measured_rates
from shopsim_metrics.sinks import JsonlSink

BURST_STEP = 15


@pytest.fixture(scope="module")
def burst_run(tmp_path_factory):
    """40 steps at a background technical rate of 0.01, and one step (15) whose reward service fails 80% of groups."""
    run = tmp_path_factory.mktemp("burst_run")
    config = SimConfig(steps=40, seed=3, zero_std_rate=0.35, technical_rate=0.01,
                       bursts=(FailureBurst(step=BURST_STEP, rate=0.8),), max_consecutive_failed_groups=10**6)
    result = Simulator(config, sinks=[JsonlSink(run)]).run()
    return run, result.records


def test_the_burst_step_is_found_and_the_background_is_the_other_steps_rate(burst_run) -> None:
    run, records = burst_run
    estimate = measured_rates(run).estimate
    assert [b.rollout_id for b in estimate.bursts] == [BURST_STEP]
    calm = [r for r in records if r.rollout_id != BURST_STEP]
    background = sum(r.technical_group_drop_count for r in calm) / sum(r.accepted_group_count for r in calm)
    assert estimate.technical_background == pytest.approx(background)
    assert estimate.technical_pooled > 3 * estimate.technical_background  # what the old rule used on every step
    assert estimate.technical_dominance.dominated
    assert estimate.technical_dominance.steps[0][0] == BURST_STEP


def test_cli_schedules_the_burst_at_its_frequency_and_says_which_step_dominates(burst_run, capsys) -> None:
    run, _ = burst_run
    args = ["tune", "--from", str(run), "--candidates", "16,32", "--steps", "200", "--no-widen", "--jobs", "1"]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert f"1 burst step in 40 (step {BURST_STEP} (" in out
    assert "note: one step or a few dominate a rate: technical drops:" in out and f"(step {BURST_STEP})" in out
    assert main([*args, "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    estimate = measured_rates(run).estimate
    assert report["technical_rate"] == pytest.approx(estimate.technical_background)
    assert len(report["bursts"]) == 5  # 1 in 40 steps -> 5 in 200
    assert all(c["burst_steps"] == 5 for c in report["candidates"])
    assert any("burst step" in line for line in report["rate_notes"])
    # the old figure, on request: every step at the pooled rate, no scheduled burst
    assert main([*args, "--json", "--burst-rule", "pooled"]) == 0
    pooled = json.loads(capsys.readouterr().out)
    assert pooled["technical_rate"] == pytest.approx(estimate.technical_pooled) and pooled["bursts"] == []
    # a technical rate given on the command line is used as given, with no burst
    assert main([*args, "--json", "--technical-rate", "0.02"]) == 0
    given_ = json.loads(capsys.readouterr().out)
    assert given_["technical_rate"] == 0.02 and given_["bursts"] == []


@settings(max_examples=40, deadline=None)
@given(rate=st.floats(0.0, 0.2), accepted=st.integers(20, 200), steps=st.integers(20, 200), seed=st.integers(0, 10**6))
def test_a_steady_rate_has_no_burst_and_one_added_burst_is_found(rate, accepted, steps, seed) -> None:
    rng = np.random.default_rng(seed)
    technical = rng.binomial(accepted, rate, size=steps).tolist()
    ids, acc, zero = list(range(steps)), [accepted] * steps, [0] * steps
    steady = estimate_rates(ids, acc, technical, zero)
    assert len(steady.bursts) <= steps // 100  # 4 sigma + 3 groups: ordinary scatter is no burst
    at = steps // 2
    technical[at] = max(technical[at], int(0.9 * accepted))
    if technical[at] <= accepted * rate + 4 * (accepted * rate) ** 0.5 + 3 + 4 * (accepted * rate) ** 0.5:
        return  # the "burst" is within the steady scatter: nothing to find
    burst = estimate_rates(ids, acc, technical, zero)
    assert at in [b.rollout_id for b in burst.bursts]
    # the background is the steady rate again, not pulled up by the burst
    assert abs(burst.technical_background - rate) <= 5 * (max(rate, 1e-3) / (accepted * (steps - 1))) ** 0.5 + 0.01
