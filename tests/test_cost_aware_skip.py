"""``predictive`` also skips what teaches little for its cost: a prompt's chance of spread against
``shopsim_prompt_skip_min_yield`` times its relative token cost (its tokens per visit over the tracked mean)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings as hsettings, strategies as st

from shopsim_metrics.judging.group_judgement import SPREAD
from shopsim_metrics.judging.verdicts import ZERO_STD_ALL_FAIL
from shopsim_metrics.prompts.history import PromptHistory
from shopsim_metrics.judging.prompt_keys import prompt_key
from shopsim_metrics.settings.prompt_skip import SkipRuleSettings
from shopsim_metrics.prompts.predictive_rule import PredictiveSkipRule, zero_std_probability
from tests.test_data_source import make_args, pool, skip_source

VISITS = st.lists(st.tuples(st.integers(0, 7), st.sampled_from([SPREAD, ZERO_STD_ALL_FAIL]),
                            st.one_of(st.none(), st.integers(0, 5000))), max_size=60)


# --- the relative cost ---------------------------------------------------------------------------
@hsettings(max_examples=80, deadline=None)
@given(visits=VISITS, limit=st.integers(1, 8), reload_at=st.integers(0, 60))
def test_the_relative_cost_is_the_prompts_tokens_per_visit_over_the_tracked_prompts(visits, limit, reload_at) -> None:
    history = PromptHistory(limit=limit)
    for position, (prompt, verdict, tokens) in enumerate(visits):
        if position == reload_at:  # a snapshot's columns, loaded into a new history, sum to the same
            restored = PromptHistory(limit=limit)
            restored.load_state_columns(history.state_columns())
            history = restored
        history.visit(prompt, verdict, tokens)
    tracked = list(history)
    total_tokens, total_visits = sum(s.tokens for s in tracked), sum(s.visits for s in tracked)
    for prompt in range(8):
        stats = history.stats(prompt)
        got = history.relative_cost(prompt)
        if stats is None or not stats.tokens or not total_tokens:
            assert got is None
        else:
            assert got == pytest.approx((stats.tokens / stats.visits) / (total_tokens / total_visits))


# --- the rule ------------------------------------------------------------------------------------
EVIDENCE = st.tuples(st.floats(0, 40), st.floats(0, 40))


@hsettings(max_examples=150, deadline=None)
@given(evidence=EVIDENCE, cost=st.floats(0.01, 20), more=st.floats(0, 20), threshold=st.floats(0.5, 1),
       min_yield=st.floats(0, 0.5))
def test_a_costlier_prompt_is_never_kept_where_a_cheaper_one_is_skipped(evidence, cost, more, threshold, min_yield):
    rule = PredictiveSkipRule(SkipRuleSettings(threshold=threshold, min_yield=min_yield), n_samples=8)
    if rule.decide(evidence, cost).skip:
        assert rule.decide(evidence, cost + more).skip
    by_threshold = zero_std_probability(*evidence, 8) >= threshold
    assert rule.decide(evidence).skip == by_threshold  # no cost known: the threshold alone
    assert rule.decide(evidence, cost).skip == (by_threshold or 1 - zero_std_probability(*evidence, 8) < min_yield * cost)
    if cost * min_yield <= 1 - threshold:  # an average or cheap prompt: the threshold decides
        assert rule.decide(evidence, cost).skip == by_threshold
    assert PredictiveSkipRule(SkipRuleSettings(threshold=threshold, min_yield=0.0), n_samples=8).decide(evidence, cost).skip == by_threshold


def test_a_prompt_costing_more_than_one_over_min_yield_is_skipped_whatever_its_success_rate() -> None:
    """The documented consequence (docs §3.6): above ``1 / min_yield`` times the mean cost, even a prompt
    whose groups always had spread is skipped; below it such a prompt is kept, and a faded one comes back
    under 5.5x the mean."""
    rule = PredictiveSkipRule(SkipRuleSettings(threshold=0.8, min_yield=0.11), n_samples=8)
    coin_flip = (40.0, 40.0)  # ten visits, half the rollouts succeeded: P(spread) about 0.99
    assert rule.decide(coin_flip, relative_cost=1 / 0.11 + 0.1).skip
    assert not rule.decide(coin_flip, relative_cost=1 / 0.11 - 0.5).skip
    faded = (1e-6, 1e-6)  # evidence forgotten: the prior's P(spread), 0.61
    assert 1 - zero_std_probability(*faded, 8) == pytest.approx(0.607, abs=1e-3)
    assert rule.decide(faded, relative_cost=5.4).skip is False and rule.decide(faded, relative_cost=5.6).skip


def test_a_min_yield_outside_zero_to_one_is_refused() -> None:
    with pytest.raises(ValueError, match="min_yield"):  # by the rule's settings, the one place it is checked
        PredictiveSkipRule(SkipRuleSettings(threshold=0.8, min_yield=1.5), n_samples=8)


# --- through the data source ---------------------------------------------------------------------
def test_of_two_prompts_failed_once_the_long_one_is_skipped_and_the_short_one_served(tmp_path) -> None:
    prompts = pool(12)
    # groups of 2: one all-fail visit predicts 0.79, below this threshold (the test is about the cost part; the
    # rule alone: the guard skips nothing before its probes bound the calibration)
    ds = skip_source(make_args(tmp_path, shopsim_prompt_skip="predictive", shopsim_prompt_skip_threshold=0.85,
                               shopsim_prompt_skip_max_lost_signal=1.0), prompts)
    keys = [prompt_key([p])[0] for p in prompts]
    long, short, *rest = keys
    n = ds.policy.rule.n_samples
    ds.history.observe(long, ZERO_STD_ALL_FAIL, successes=0, scored=n, tokens=8 * 4000)
    ds.history.observe(short, ZERO_STD_ALL_FAIL, successes=0, scored=n, tokens=8 * 500)
    for key in rest:
        ds.history.observe(key, SPREAD, successes=n // 2, scored=n, tokens=8 * 1000)
    ds.history.close_step(0)
    predicted = zero_std_probability(*ds.history.success_evidence(long), n)  # as of the step served
    assert predicted < ds.policy.rule.threshold  # one all-fail visit: the threshold alone skips neither
    assert (1 - predicted) < ds.policy.rule.min_yield * ds.history.relative_cost(long)  # 3.4x the mean
    served = [prompt_key(g)[0] for g in ds.get_samples(11)]
    assert long not in served and short in served and len(set(served)) == 11
    (skipped,) = {s.prompt_key: s for s in ds.take_skipped()}.values()
    assert skipped.prompt_key == long and skipped.skip_probability == pytest.approx(predicted)


def test_min_yield_zero_is_the_threshold_alone(tmp_path) -> None:
    prompts = pool(12)
    ds = skip_source(make_args(tmp_path, shopsim_prompt_skip="predictive", shopsim_prompt_skip_min_yield=0,
                               shopsim_prompt_skip_threshold=0.85), prompts)
    long = prompt_key([prompts[0]])[0]
    n = ds.policy.rule.n_samples
    ds.history.observe(long, ZERO_STD_ALL_FAIL, successes=0, scored=n, tokens=n * 50_000)
    for p in prompts[1:]:
        ds.history.observe(prompt_key([p])[0], SPREAD, successes=n // 2, scored=n, tokens=n * 100)
    ds.history.close_step(0)
    assert zero_std_probability(*ds.history.success_evidence(long), n) < ds.policy.rule.threshold
    assert long in {prompt_key(g)[0] for g in ds.get_samples(12)} and ds.take_skipped() == []


# --- what the records say ------------------------------------------------------------------------
SPREAD_POOL = dict(steps=40, prompt_pool=96, skill_start=-2.0, skill_end=2.0, learning_steps=20.0,
                   difficulty_spread=4.0, partial_credit_rate=0.0, technical_rate=0.0)


def test_each_record_counts_the_prompts_skipped_for_their_cost() -> None:
    from shopsim_metrics.settings import DEFAULTS
    from shopsim_metrics.simulator.config import SimConfig
    from shopsim_metrics.simulator.loop import Simulator
    from shopsim_metrics.simulator.skipping.skip_saving import alerts_silenced

    threshold = DEFAULTS["shopsim_prompt_skip_threshold"]
    with alerts_silenced():
        # the rule alone: the cost part's skips have the larger chances of spread, the first the guard's cap refuses
        records = Simulator(SimConfig(prompt_skip="predictive", prompt_skip_max_lost_signal=1.0,
                                      prompt_skip_probe_every=0, **SPREAD_POOL), sinks=[]).run().records
        greso = Simulator(SimConfig(prompt_skip="greso", **SPREAD_POOL), sinks=[]).run().records
    for record in records:
        below = [row for row in record.skipped_prompts if row["skip_probability"] < threshold]
        assert record.skipped_for_cost_count == len(below) <= record.skipped_prompt_count
    assert sum(r.skipped_for_cost_count for r in records) > 0  # long hard prompts: the cost part skipped some
    assert sum(r.skipped_prompt_count for r in records) > sum(r.skipped_for_cost_count for r in records)
    assert all(r.skipped_for_cost_count is None and r.skipped_prompt_count is not None for r in greso)
