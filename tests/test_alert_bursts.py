"""A burst of technical failures is one event: one WARN per rollout step, the ERROR at the limit."""

from __future__ import annotations

from hypothesis import given, strategies as st

from shopsim_metrics.health.alerts import StreakAlertPolicy
from shopsim_metrics.health.streak import TechnicalStreak


def _run(policy: StreakAlertPolicy, steps: list[list[str | None]]) -> tuple[TechnicalStreak, list]:
    streak, errors = TechnicalStreak(), []
    for rollout_id, checks in enumerate(steps):
        for check in checks:
            streak.observe(check)
            error = policy.after_judgement(streak, rollout_id)
            if error is not None:
                errors.append(error)
    return streak, errors


def test_twelve_streaks_in_one_step_give_one_warning_with_the_count_and_the_longest() -> None:
    policy = StreakAlertPolicy(max_consecutive_failed_groups=8)
    burst = (["status_failed"] * 4 + [None]) * 11 + ["reward_missing"] * 6 + [None]
    _, errors = _run(policy, [[None], burst, ["status_failed"] * 4])
    assert errors == []
    warnings = policy.take_warnings(up_to=1)
    assert [w.rollout_id for w in warnings] == [1]
    assert warnings[0].title == "shopsim: technical failures piling up at rollout step 1"
    assert "12 streaks of consecutive technical groups reached 4 (limit 8), the longest 6;" in warnings[0].text
    assert "failing checks of the longest: reward_missing=6." in warnings[0].text
    assert policy.take_warnings(up_to=1) == []  # once
    (later,) = policy.take_warnings()  # step 2's own streak, a different title
    assert later.title.endswith("rollout step 2") and "1 streak of" in later.text


def test_below_the_threshold_nothing_and_at_it_one_warning() -> None:
    policy = StreakAlertPolicy(max_consecutive_failed_groups=8)
    _run(policy, [["status_failed"] * 3 + [None]])
    assert policy.take_warnings() == []
    _run(policy, [["status_failed"] * 4 + [None]])
    assert len(policy.take_warnings()) == 1


def test_the_error_replaces_the_steps_warning_and_counts_the_earlier_streaks() -> None:
    policy = StreakAlertPolicy(max_consecutive_failed_groups=8)
    _, errors = _run(policy, [["status_failed"] * 5 + [None] + ["status_failed"] * 8])
    (error,) = errors
    assert error.level == "ERROR" and error.title == ("shopsim: technical-failure limit reached at rollout step 0, "
                                                      "terminating")
    assert "1 earlier streak(s) in this step reached 4" in error.text
    assert policy.take_warnings() == []


def test_a_streak_that_crossed_in_an_earlier_step_is_not_counted_as_earlier_in_the_terminating_one() -> None:
    policy = StreakAlertPolicy(max_consecutive_failed_groups=8)
    _, errors = _run(policy, [["status_failed"] * 5, ["status_failed"] * 3])
    (error,) = errors
    assert error.rollout_id == 1 and "earlier streak" not in error.text
    (warning,) = policy.take_warnings()  # step 0 crossed: its warning stands
    assert warning.rollout_id == 0 and "the longest 5" in warning.text


def test_disabled_alerts_send_nothing() -> None:
    policy = StreakAlertPolicy(max_consecutive_failed_groups=4, enabled=False)
    _, errors = _run(policy, [["status_failed"] * 6])
    assert errors == [] and policy.take_warnings() == []


@given(steps=st.lists(st.lists(st.sampled_from([None, "status_failed"]), max_size=40), max_size=6),
       limit=st.integers(1, 10), fraction=st.floats(0.05, 1.0))
def test_at_most_one_alert_per_step_and_every_crossing_counted(steps, limit, fraction) -> None:
    policy = StreakAlertPolicy(max_consecutive_failed_groups=limit, warn_fraction=fraction)
    streak, crossings, terminated_at = TechnicalStreak(), {}, None
    for rollout_id, checks in enumerate(steps):
        for check in checks:
            if streak.observe(check) == policy.warn_at < limit:
                crossings[rollout_id] = crossings.get(rollout_id, 0) + 1
            if policy.after_judgement(streak, rollout_id) is not None:
                terminated_at = rollout_id
                break
        if terminated_at is not None:
            break
    warnings = policy.take_warnings()
    assert [w.rollout_id for w in warnings] == sorted(s for s in crossings if s != terminated_at)
    for warning in warnings:
        n = crossings[warning.rollout_id]
        assert f"{n} streak{'s' if n > 1 else ''} of" in warning.text
    assert len({w.title for w in warnings}) == len(warnings)
