"""GRESO's skip rule and the prompt history it reads (the monitor's): probabilities, bounds, settings, state."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import given, settings as hsettings, strategies as st

from fed_history import FedHistory
from shopsim_metrics.judging import verdicts
from shopsim_metrics.prompts import history as prompt_history
from shopsim_metrics.judging.verdicts import VERDICTS
from shopsim_metrics.prompts.skip_evidence import StepShares
from shopsim_metrics.prompts.skip_rule import EASY, HARD, OTHER, ZERO_STD_KINDS, GresoSkipRule, skip_probability
from shopsim_metrics.settings.prompt_skip import SkipRuleSettings, SkipRuleSettingsError

# derandomized: every run draws the same examples, so the statistical bounds below cannot flake
DETERMINISTIC = hsettings(max_examples=60, deadline=None, derandomize=True)
unit = st.floats(0.0, 1.0, allow_nan=False)


@st.composite
def rule_settings(draw) -> SkipRuleSettings:
    p_min = draw(unit)
    p_max = draw(st.floats(p_min, 1.0))
    return SkipRuleSettings(
        target_share=draw(unit), easy_share_of_target=draw(unit), floor=draw(unit), step=draw(unit),
        p_min=p_min, p_max=p_max, p_easy_start=draw(st.floats(p_min, p_max)),
        p_hard_start=draw(st.floats(p_min, p_max)), seed=draw(st.integers(0, 2**32)))


# --- the probability -----------------------------------------------------------------------------

def test_skip_probability_is_gresos_formula() -> None:
    assert skip_probability(0.5, 1, 0.01) == 0.5
    assert skip_probability(0.5, 3, 0.01) == pytest.approx(0.875)
    assert skip_probability(0.5, 20, 0.01) == pytest.approx(0.99)  # 0.5**20 is below the floor
    assert skip_probability(0.95, 0, 0.01) == 0.0
    assert skip_probability(0.0, 1, 0.0) == 1.0


def test_each_side_uses_its_own_p_and_other_uses_the_hard_p() -> None:
    rule = GresoSkipRule(SkipRuleSettings(p_easy_start=0.2, p_hard_start=0.8))
    assert rule.skip_probability(2, EASY) == pytest.approx(1 - 0.2**2)
    assert rule.skip_probability(2, HARD) == pytest.approx(1 - 0.8**2)
    assert rule.skip_probability(2, OTHER) == rule.skip_probability(2, HARD)
    assert rule.skip_probability(0, None) == 0.0
    with pytest.raises(ValueError, match=r"kind: expected one of zero_std_all_pass, zero_std_all_fail, "
                                         r"zero_std_other for a zero-std run; got 'spread'"):
        rule.skip_probability(1, "spread")


@DETERMINISTIC
@given(p=st.floats(0.05, 0.95), run=st.integers(1, 6), kind=st.sampled_from(ZERO_STD_KINDS),
       seed=st.integers(0, 2**32))
def test_the_empirical_skip_rate_follows_the_probability(p: float, run: int, kind: str, seed: int) -> None:
    rule = GresoSkipRule(SkipRuleSettings(p_easy_start=p, p_hard_start=p, seed=seed))
    n = 4000
    decisions = [rule.decide(run, kind) for _ in range(n)]
    q = 1 - max(p**run, 0.01)
    assert all(d.probability == pytest.approx(q) for d in decisions)
    skipped = sum(d.skip for d in decisions)
    # six binomial standard deviations (plus one for the discreteness): about 2e-9 per example by chance
    assert abs(skipped - n * q) <= 6 * math.sqrt(n * q * (1 - q)) + 1


def test_the_skip_rate_is_exact_at_the_extremes() -> None:
    always = GresoSkipRule(SkipRuleSettings(floor=0.0, p_min=0.0, p_easy_start=0.0, p_hard_start=0.0))
    assert all(always.decide(1, kind).skip for kind in ZERO_STD_KINDS for _ in range(500))
    never = GresoSkipRule(SkipRuleSettings(floor=1.0))
    assert not any(never.decide(5, HARD).skip for _ in range(500))


@DETERMINISTIC
@given(settings=rule_settings(), kinds=st.lists(st.sampled_from((None,) + ZERO_STD_KINDS), max_size=50))
def test_a_run_of_zero_is_never_skipped_whatever_the_settings(settings: SkipRuleSettings, kinds: list) -> None:
    rule = GresoSkipRule(settings)
    for kind in kinds:
        decision = rule.decide(0, kind)
        assert not decision.skip and decision.probability == 0.0


def test_an_all_spread_pool_is_never_skipped() -> None:
    history = FedHistory()
    rule = GresoSkipRule(SkipRuleSettings(floor=0.0, p_min=0.0, p_easy_start=0.0, p_hard_start=0.0))
    keys = [f"prompt-{i}" for i in range(200)]
    for visit in range(5):
        for key in keys:
            run, kind = history.zero_std_run(key)
            assert not rule.decide(run, kind).skip
            history.observe(key, "spread")
        history.close_step(visit)
        shares = history.last_closed_step()
        rule.adapt(shares.easy_share, shares.hard_share)


# --- adaptation ----------------------------------------------------------------------------------

def test_adapt_lowers_p_at_or_above_the_target_and_raises_it_below() -> None:
    settings = SkipRuleSettings(target_share=0.3, easy_share_of_target=0.5, step=0.1)  # targets 0.15 / 0.15
    rule = GresoSkipRule(settings)
    rule.adapt(easy_share=0.15, hard_share=0.1499)  # exactly at the target counts as at-or-above
    assert (rule.p_easy, rule.p_hard) == (pytest.approx(0.4), pytest.approx(0.6))
    rule.adapt(easy_share=None, hard_share=1.0)  # None: no observation, that p stays
    assert (rule.p_easy, rule.p_hard) == (pytest.approx(0.4), pytest.approx(0.5))


def test_adapt_clamps_at_both_bounds() -> None:
    rule = GresoSkipRule(SkipRuleSettings(step=0.3))
    for _ in range(5):
        rule.adapt(easy_share=1.0, hard_share=0.0)
    assert (rule.p_easy, rule.p_hard) == (0.05, 0.95)


@DETERMINISTIC
@given(settings=rule_settings(),
       shares=st.lists(st.tuples(st.none() | unit, st.none() | unit), max_size=80))
def test_p_stays_within_its_bounds_for_any_observed_shares(settings: SkipRuleSettings, shares: list) -> None:
    rule = GresoSkipRule(settings)
    for easy, hard in shares:
        before = (rule.p_easy, rule.p_hard)
        rule.adapt(easy, hard)
        for p, old, share, target in ((rule.p_easy, before[0], easy, settings.easy_target),
                                      (rule.p_hard, before[1], hard, settings.hard_target)):
            assert settings.p_min <= p <= settings.p_max
            if share is None:
                assert p == old
            else:
                moved = old - settings.step if share >= target else old + settings.step
                assert p == min(max(moved, settings.p_min), settings.p_max)


@pytest.mark.parametrize("shares", [(1.5, 0.1), (0.1, -0.1), (float("nan"), 0.1)])
def test_adapt_rejects_a_share_outside_zero_to_one(shares) -> None:
    with pytest.raises(ValueError, match=r"_share: expected a number in \[0, 1\]"):
        GresoSkipRule().adapt(*shares)


# --- settings ------------------------------------------------------------------------------------

def test_the_defaults_are_gresos_published_values() -> None:
    s = SkipRuleSettings()
    assert (s.target_share, s.floor, s.step, s.p_min, s.p_max, s.p_easy_start, s.p_hard_start) == (
        0.25, 0.01, 0.01, 0.05, 0.95, 0.5, 0.5)
    assert s.easy_target == pytest.approx(0.25 / 3) and s.hard_target == pytest.approx(0.5 / 3)


@pytest.mark.parametrize("field, value, expected", [
    ("target_share", 1.2, "a number in [0, 1]"),
    ("easy_share_of_target", -0.1, "a number in [0, 1]"),
    ("floor", "0.01", "a number in [0, 1]"),
    ("step", True, "a number in [0, 1]"),
    ("p_max", float("inf"), "a number in [0, 1]"),
    ("p_min", 0.99, "a number <= p_max (0.95)"),
    ("p_easy_start", 0.01, "a number in [0.05, 0.95] (between p_min and p_max)"),
    ("p_hard_start", 0.99, "a number in [0.05, 0.95] (between p_min and p_max)"),
    ("seed", -1, "an integer >= 0"),
    ("seed", 1.0, "an integer >= 0"),
])
def test_a_bad_setting_is_named_with_what_is_allowed_and_what_was_given(field, value, expected) -> None:
    with pytest.raises(SkipRuleSettingsError) as caught:
        SkipRuleSettings(**{field: value})
    assert str(caught.value) == f"{field}: expected {expected}; got {value!r}"
    assert (caught.value.field, caught.value.value) == (field, value)


def test_the_kinds_are_the_prompt_historys_zero_std_verdicts() -> None:
    assert set(ZERO_STD_KINDS) == set(verdicts.ZERO_STD_VERDICTS)


# --- state ---------------------------------------------------------------------------------------

@DETERMINISTIC
@given(seed=st.integers(0, 2**63), warmup=st.integers(0, 40),
       shares=st.lists(st.tuples(unit, unit), max_size=10),
       questions=st.lists(st.tuples(st.integers(0, 5), st.sampled_from(ZERO_STD_KINDS)), min_size=1, max_size=60))
def test_a_restored_rule_makes_the_same_next_decisions(seed: int, warmup: int, shares: list, questions: list) -> None:
    settings = SkipRuleSettings(seed=seed)
    rule = GresoSkipRule(settings)
    for easy, hard in shares:
        rule.adapt(easy, hard)
    for _ in range(warmup):
        rule.decide(1, HARD)
    state = json.loads(json.dumps(rule.state_dict()))  # through JSON, as the data source saves it
    restored = GresoSkipRule(SkipRuleSettings(seed=(seed + 1) % 2**63))  # another seed: the state must win
    restored.load_state_dict(state)
    assert (restored.p_easy, restored.p_hard) == (rule.p_easy, rule.p_hard)
    assert [restored.decide(*q) for q in questions] == [rule.decide(*q) for q in questions]


def test_the_seed_decides_the_draws() -> None:  # so that a restored state, not the seed, made them equal above
    one, other = GresoSkipRule(SkipRuleSettings(seed=1)), GresoSkipRule(SkipRuleSettings(seed=2))
    assert [one.decide(1, HARD).skip for _ in range(64)] != [other.decide(1, HARD).skip for _ in range(64)]
    same, again = GresoSkipRule(SkipRuleSettings(seed=1)), GresoSkipRule(SkipRuleSettings(seed=1))
    assert [same.decide(1, HARD).skip for _ in range(64)] == [again.decide(1, HARD).skip for _ in range(64)]


def test_a_restored_p_outside_new_bounds_is_clamped_and_a_bad_state_is_named() -> None:
    rule = GresoSkipRule(SkipRuleSettings(p_easy_start=0.9, p_hard_start=0.1))
    narrower = GresoSkipRule(SkipRuleSettings(p_min=0.2, p_max=0.8, p_easy_start=0.5, p_hard_start=0.5))
    narrower.load_state_dict(rule.state_dict())
    assert (narrower.p_easy, narrower.p_hard) == (0.8, 0.2)
    with pytest.raises(ValueError, match=r"skip rule state: missing p_hard, rng; expected the dict"):
        narrower.load_state_dict({"format": 1, "p_easy": 0.5})
    with pytest.raises(ValueError, match=r"format: expected 1; got 7"):
        narrower.load_state_dict(dict(rule.state_dict(), format=7))


# --- the monitor's history, as the skip rule reads it ----------------------------------------------

def test_history_runs_count_equal_zero_std_verdicts_and_reset_on_spread_or_technical() -> None:
    h = FedHistory()
    for verdict in (HARD, HARD, HARD):
        h.observe("a", verdict)
    assert h.zero_std_run("a") == (3, HARD)
    h.observe("a", EASY)  # a different zero-std verdict starts a new run
    assert h.zero_std_run("a") == (1, EASY)
    h.observe("a", "technical")
    assert h.zero_std_run("a") == (0, None)
    h.observe("a", OTHER)
    h.observe("a", "spread")
    assert h.zero_std_run("a") == (0, None)
    with pytest.raises(ValueError, match=r"verdict: expected one of spread, .*technical; got 'zero_std'"):
        h.observe("a", "zero_std")


@hsettings(max_examples=200, deadline=None)
@given(visits=st.lists(st.tuples(st.sampled_from("abc"), st.sampled_from(VERDICTS)), max_size=60))
def test_history_runs_are_the_prompt_historys_own(visits: list) -> None:
    """What the rule reads (the run and its verdict) is the monitor's prompt history's, visit for visit."""
    ours, monitors = FedHistory(), prompt_history.PromptHistory()
    for key, verdict in visits:
        ours.observe(key, verdict)
        monitors.visit(key, verdict)
    for key in "abc":
        stats = monitors.stats(key)
        run, kind = ours.zero_std_run(key)
        assert run == (stats.zero_std_run if stats else 0)
        assert kind == (stats.last_verdict if run else None)


def test_history_shares_of_a_closed_step_and_the_limit() -> None:
    h = FedHistory(limit=2)
    for key, verdict in (("a", EASY), ("b", HARD), ("c", OTHER), ("d", "spread"), ("e", "technical")):
        h.observe(key, verdict)
    assert h.last_closed_step() is None
    assert h.close_step(4) == StepShares(step=4, easy_share=0.2, hard_share=0.4, judged=5, informative=1)
    assert h.close_step(5) == StepShares(step=5, easy_share=None, hard_share=None, judged=0)
    assert len(h.tracker.history) == 2 and h.zero_std_run("a") == (0, None)  # "a" was the least recently seen


def test_history_state_round_trips_through_json() -> None:
    """The monitor's history is restored from a snapshot (or the records): the rule reads the same evidence."""
    h = FedHistory()
    for key, verdict in (("a", HARD), ("a", HARD), ("b", EASY), ("b", EASY), ("c", "spread")):
        h.observe(key, verdict)
    h.close_step(3)
    restored = FedHistory()
    restored.tracker.load_state_dict(json.loads(json.dumps(h.tracker.state_dict())))
    assert restored.zero_std_run("a") == (2, HARD) and restored.zero_std_run("b") == (2, EASY)
    assert restored.last_closed_step() == h.last_closed_step() == StepShares(3, 0.4, 0.4, 5, informative=1)
    assert restored.success_evidence("a") == h.success_evidence("a")
