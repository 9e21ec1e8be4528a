"""The lost-signal advisory: a WARN, once per run, when the guard's estimate sits above its limit 3 steps in a row.

Both sides of the rule (3 steps above raise it, 2 do not, a step at the limit breaks the run of steps), once per run
however long the condition lasts or how often it comes back, its text names the figures and what to change, and it
reaches a simulated predictive run's records through the hooks' own path (and stays silent in a run within its limit).
"""

from __future__ import annotations

from hypothesis import given, strategies as st

from shopsim_metrics.health.advisories import LOST_SIGNAL_STEPS, Advisor, StepFacts, advise
from shopsim_metrics.simulator.config import SimConfig
from shopsim_metrics.simulator.loop import simulate

LIMIT = 0.1


def facts(estimates, limit=LIMIT, cap=0.0) -> list[StepFacts]:
    return [StepFacts(rollout_id=i, accepted=16, lost_signal=e, lost_signal_limit=limit, skip_cap=cap)
            for i, e in enumerate(estimates)]


def test_three_steps_above_the_limit_raise_it_and_two_or_one_at_the_limit_do_not():
    assert "lost_signal" in advise(facts([0.11, 0.12, 0.13]))
    assert "lost_signal" not in advise(facts([0.12, 0.13]))
    assert "lost_signal" not in advise(facts([0.12, 0.1, 0.13, 0.14]))  # at the limit: not above
    assert "lost_signal" not in advise(facts([0.12, None, 0.13, 0.14]))  # no estimate: not known to be above
    assert "lost_signal" not in advise(facts([0.2, 0.2, 0.2], limit=None))  # no limit recorded: nothing to compare


def test_its_text_gives_the_figures_and_what_to_change():
    alert = advise(facts([0.11, 0.125, 0.13]))["lost_signal"]
    assert alert.level == "WARN" and alert.title == "shopsim: skipping's lost signal above its limit at rollout step 2"
    for said in ("shopsim_prompt_skip_max_lost_signal 0.1", "0.110, 0.125, 0.130", "The cap is 0.00",
                 "raise shopsim_prompt_skip_threshold", "shopsim_prompt_skip_min_yield: 0",
                 "a lower shopsim_prompt_skip_probe_every", "shopsim_prompt_skip: off", "shopsim_wave_size: adaptive",
                 "Raised once per run"):
        assert said in alert.text, said


@given(st.lists(st.one_of(st.none(), st.floats(0.0, 0.3)), max_size=60))
def test_it_is_raised_at_most_once_per_run_at_the_first_step_three_in_a_row_are_above(estimates):
    advisor = Advisor()
    raised = [step for step, f in enumerate(facts(estimates)) for a in advisor.observe(f)
              if "lost signal" in a.title]
    above = [e is not None and e > LIMIT for e in estimates]
    first = next((i for i in range(LOST_SIGNAL_STEPS - 1, len(above)) if all(above[i - LOST_SIGNAL_STEPS + 1:i + 1])),
                 None)
    assert raised == ([] if first is None else [first])


def test_a_resumed_advisor_does_not_raise_it_again():
    advisor = Advisor()
    for f in facts([0.2] * 5):
        advisor.observe(f)
    resumed = Advisor()
    resumed.load_state_dict(advisor.state_dict())
    later = [StepFacts(rollout_id=5 + i, accepted=16, lost_signal=e, lost_signal_limit=LIMIT)
             for i, e in enumerate([0.05] * 20 + [0.2] * 5)]
    assert not [a for f in later for a in resumed.observe(f) if "lost signal" in a.title]


def _alerts(config: SimConfig) -> list[tuple[int, str, str]]:
    return [(r.rollout_id, a["level"], a["title"]) for r in simulate(config).records for a in r.alerts
            if "lost signal" in a["title"]]


POOL = dict(steps=16, prompt_pool=48, prompt_skip="predictive", technical_rate=0.0, skill_start=0.0, skill_end=0.0,
            difficulty_spread=6.0)


def test_a_simulated_run_past_its_limit_records_one_warn_and_one_within_it_none():
    strict = _alerts(SimConfig(**POOL, prompt_skip_max_lost_signal=0.0))
    assert len(strict) == 1 and strict[0][1] == "WARN"
    assert _alerts(SimConfig(**POOL, prompt_skip_max_lost_signal=1.0)) == []
