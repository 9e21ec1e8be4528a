"""Advisories: each rule on both sides of its threshold, raised once per condition, in the record, on W&B and in
the HTML dashboard, rebuilt on resume, never raised into slime; the demo raises none it should not."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from conftest import group_of, make_args, spread, zero

from shopsim_metrics.step.closed_step import StepKnobs, step_draft
from shopsim_metrics.dashboards.data import load_dashboard_data
from shopsim_metrics.dashboards.html import render_html, step_figure_dict
from shopsim_metrics.dashboards.spec import dashboard_spec
from shopsim_metrics.readers import read_steps
from shopsim_metrics.readers.wandb_offline import find_run_dirs, read_offline_run
from shopsim_metrics.simulator.demo import demo_config
from shopsim_metrics.simulator.loop import Simulator
from shopsim_metrics.sinks import JsonlSink, MemorySink
from shopsim_metrics.record import contract
from shopsim_metrics.health.advisories import (
    ADVISORY_WINDOW, RULES, Advisor, StepFacts, advise, skipping_pays,
)
from shopsimrl import slime_runtime
from tests.wandb_helpers import wandb_env  # noqa: F401 - fixture


@pytest.fixture(autouse=True)
def _fresh_runtime():
    yield
    slime_runtime.reset_runtime()


def window(n: int = ADVISORY_WINDOW, **columns) -> list[StepFacts]:
    """``n`` steps of facts; each column a constant or a list with one value per step (oldest first)."""
    return [StepFacts(rollout_id=i, **{k: v[i] if isinstance(v, list) else v for k, v in columns.items()})
            for i in range(n)]


def held(facts: list[StepFacts]) -> set[str]:
    return set(advise(facts))


def recent(earlier, later) -> list:
    """Four steps at ``earlier``, then four at ``later``."""
    return [earlier] * 4 + [later] * 4


# --- collapse and saturation: a share toward 1, not falling ------------------------------------
@pytest.mark.parametrize("condition,column", [("collapse", "all_fail"), ("saturation", "all_pass")])
def test_a_share_rising_to_three_quarters_raises_and_just_below_does_not(condition, column) -> None:
    assert condition in held(window(accepted=100, zero_std=recent(30, 75), **{column: recent(30, 75)}))
    assert condition not in held(window(accepted=100, zero_std=recent(30, 74), **{column: recent(30, 74)}))


@pytest.mark.parametrize("condition,column", [("collapse", "all_fail"), ("saturation", "all_pass")])
def test_a_share_stuck_near_one_raises_and_a_falling_one_does_not(condition, column) -> None:
    assert condition in held(window(accepted=100, zero_std=100, **{column: 100}))  # broken from the start
    assert condition not in held(window(accepted=100, zero_std=recent(90, 80), **{column: recent(90, 80)}))  # learning


def test_the_share_is_over_the_groups_that_are_not_technical() -> None:
    # 60 all-fail of 80 judged with a verdict (20 technical): 0.75; over every accepted group it would be 0.6
    assert "collapse" in held(window(accepted=100, technical=20, zero_std=60, all_fail=60))
    assert "collapse" not in held(window(accepted=100, technical=19, zero_std=60, all_fail=60))


def test_one_step_near_one_does_not_move_the_median() -> None:
    fails = [30, 30, 30, 30, 30, 30, 30, 100]
    assert "collapse" not in held(window(accepted=100, zero_std=fails, all_fail=fails))
    fails = [30, 30, 30, 30, 30, 30, 100, 100]  # the median of the last four: (30 + 100) / 2 = 0.65
    assert "collapse" not in held(window(accepted=100, zero_std=fails, all_fail=fails))
    fails = [30, 30, 30, 30, 30, 100, 100, 100]
    assert "collapse" in held(window(accepted=100, zero_std=fails, all_fail=fails))


def test_no_advisory_before_the_window_is_full() -> None:
    assert held(window(ADVISORY_WINDOW - 1, accepted=32, zero_std=32, all_fail=32)) == set()
    assert held(window(ADVISORY_WINDOW, accepted=32, zero_std=32, all_fail=32)) == {"collapse"}


# --- most groups zero-std: over-sampling or skipping ---------------------------------------------
def test_zero_std_above_one_half_in_each_of_the_last_four_steps_raises() -> None:
    split = dict(accepted=100, all_pass=25)
    assert "zero_std" in held(window(zero_std=[0, 0, 0, 0, 51, 51, 51, 51], **split))
    assert "zero_std" not in held(window(zero_std=[0, 0, 0, 0, 51, 51, 50, 51], **split))  # one step at 1/2
    assert "zero_std" in held(window(zero_std=[0, 0, 0, 0, 60, 60, 60, 60], **split))
    assert "zero_std" not in held(window(zero_std=[90, 90, 90, 90, 90, 90, 90, 10], **split))  # not for several steps


def test_zero_std_is_not_raised_beside_a_collapse() -> None:
    assert held(window(accepted=100, zero_std=90, all_fail=90)) == {"collapse"}
    assert held(window(accepted=100, zero_std=90, all_fail=45, all_pass=45)) == {"zero_std"}


def test_skipping_pays_from_halfway_between_the_luck_of_the_draw_and_certainty() -> None:
    assert skipping_pays(0.8, 0.6) and not skipping_pays(0.79, 0.6) and not skipping_pays(None, 0.6)

    def text(**columns) -> str:
        columns = {"waves": 1, **columns}  # the synchronous path unless said
        return advise(window(accepted=100, zero_std=60, all_fail=30, all_pass=30, **columns))["zero_std"].text

    persistent = text(repeat_zero_std=8, skippable=10)  # 0.8 against a share of 0.6
    assert "skipping pays" in persistent and "shopsim_prompt_skip: predictive" in persistent and "0.80" in persistent
    lucky = text(repeat_zero_std=79, skippable=100)
    assert "over-sampling pays" in lucky and "tune --from" in lucky and "skipping pays" not in lucky
    unknown = text()
    assert "No prompt was revisited yet" in unknown and "over-sampling pays" in unknown
    already = text(repeat_zero_std=9, skippable=10, skipping=True)
    assert "lower shopsim_prompt_skip_threshold" in already
    fixed, fully_async = text(waves=1), text(waves=None)  # the fully-async path has no waves to over-sample
    assert "over_sampling_batch_size" in fixed and "shopsim_async_zero_std_drop_limit" not in fixed
    assert "shopsim_async_zero_std_drop_limit" in fully_async and "over_sampling_batch_size" not in fully_async


# --- abort storm ------------------------------------------------------------------------------
def test_aborted_tokens_at_half_of_every_token_raise_and_below_do_not() -> None:
    assert "abort_storm" in held(window(accepted=32, waves=1, total_tokens=1000, aborted_tokens=500))
    assert "abort_storm" not in held(window(accepted=32, waves=1, total_tokens=1000, aborted_tokens=499))
    # the steps pooled (8,000 of 16,000 tokens), not the mean of their shares (0 and 2/3: 1/3)
    totals = [1000] * 4 + [3000] * 4
    assert "abort_storm" in held(window(accepted=32, waves=1, total_tokens=totals, aborted_tokens=recent(0, 2000)))
    assert "abort_storm" not in held(window(accepted=32, waves=1, total_tokens=totals, aborted_tokens=recent(0, 1999)))


def test_an_abort_storm_needs_the_sample_hook_and_waves() -> None:
    assert "abort_storm" not in held(window(accepted=32, waves=None, total_tokens=1000, aborted_tokens=900))
    assert "abort_storm" not in held(window(accepted=32, waves=1, total_tokens=None, aborted_tokens=None))


def test_the_abort_storm_text_says_adaptive_waves_or_their_cap() -> None:
    fixed = advise(window(accepted=32, waves=1, total_tokens=1000, aborted_tokens=600))["abort_storm"].text
    adaptive = advise(window(accepted=32, waves=1, total_tokens=1000, aborted_tokens=600, adaptive=True))
    assert "shopsim_wave_size: adaptive" in fixed and "60%" in fixed
    assert "lower shopsim_wave_size_cap" in adaptive["abort_storm"].text


# --- frequent second waves ------------------------------------------------------------------
def test_three_steps_of_eight_with_another_wave_raise_and_two_do_not() -> None:
    advice = advise(window(accepted=40, technical=2, zero_std=20, waves=[1, 1, 2, 1, 1, 3, 1, 2]))
    assert "steps 2, 5, 7" in advice["second_waves"].text and "over_sampling_batch_size" in advice["second_waves"].text
    assert "second_waves" not in held(window(accepted=40, waves=[1, 1, 2, 1, 1, 1, 1, 2]))


def test_a_burst_step_is_left_out_of_the_second_waves() -> None:
    waves, bursts = [1, 1, 2, 1, 1, 4, 1, 2], [False] * 5 + [True] + [False] * 2
    assert "second_waves" not in held(window(accepted=40, waves=waves, burst=bursts))
    assert StepFacts.read(5, {"max_consecutive_technical_failures": 4, "technical_failure_warn_at": 4}.get).burst
    assert not StepFacts.read(5, {"max_consecutive_technical_failures": 3, "technical_failure_warn_at": 4}.get).burst
    assert not StepFacts.read(5, {"max_consecutive_technical_failures": 9}.get).burst  # alerts off: no threshold


# --- technical failures rising ---------------------------------------------------------------
def test_technical_failures_at_a_tenth_and_rising_raise_and_below_do_not() -> None:
    checks = {"reward_missing": 30, "status_failed": 10}
    advice = advise(window(accepted=100, technical=recent(2, 10), failed_checks=checks))
    assert "reward_missing=120, status_failed=40" in advice["technical"].text  # the last four steps' checks
    assert "technical" not in held(window(accepted=100, technical=recent(2, 9)))
    assert "technical" not in held(window(accepted=100, technical=recent(30, 20)))  # falling


def test_one_burst_step_is_not_technical_failures_rising() -> None:
    assert "technical" not in held(window(accepted=100, technical=[3] * 7 + [90]))
    assert "technical" in held(window(accepted=100, technical=[3] * 5 + [90] * 3))


# --- policy lag (fully-async) ------------------------------------------------------------------
def test_a_policy_lag_of_four_updates_raises_and_below_does_not() -> None:
    assert "policy_lag" in held(window(accepted=16, lag=4.0))
    assert "policy_lag" not in held(window(accepted=16, lag=3.9))
    assert "policy_lag" not in held(window(accepted=16, waves=1))  # a synchronous run has no lag


def test_the_lag_weighted_by_tokens_counts_beside_the_group_mean() -> None:
    advice = advise(window(accepted=16, lag=2.0, token_lag=4.0))
    assert "2.0 weight updates behind" in advice["policy_lag"].text and "4.0 weighted by their tokens" in advice[
        "policy_lag"].text
    assert "long generations are the stalest" in advice["policy_lag"].text
    assert "policy_lag" not in held(window(accepted=16, lag=2.0, token_lag=3.9))


# --- every rule: quiet on a healthy window, a level, a title naming the step -----------------------
def test_a_healthy_window_raises_nothing() -> None:
    assert held(window(accepted=32, technical=1, zero_std=12, all_fail=6, all_pass=6, waves=[1] * 7 + [2],
                       total_tokens=1000, aborted_tokens=300, repeat_zero_std=4, skippable=8)) == set()


def test_each_advisory_has_a_level_and_its_step_in_the_title() -> None:
    facts = window(accepted=100, technical=recent(2, 10), zero_std=90, all_fail=90, waves=[2] * 8,
                   total_tokens=1000, aborted_tokens=900, lag=5.0, lost_signal=0.2, lost_signal_limit=0.1)
    advice = advise(facts)
    assert set(advice) == set(RULES) - {"saturation", "zero_std"}
    for alert in advice.values():
        assert alert.level in contract.ALERT_LEVEL_CODES and alert.title.endswith("at rollout step 7")
        assert alert.rollout_id == 7


# --- once per condition ------------------------------------------------------------------------
def raised_steps(kinds: str) -> list[tuple[int, str]]:
    """Feed one step per letter (``F``: every group all-fail, ``S``: spread) and list what was raised."""
    advisor, out = Advisor(), []
    for step, kind in enumerate(kinds):
        fails = 32 if kind == "F" else 0
        for alert in advisor.observe(StepFacts(rollout_id=step, accepted=32, zero_std=fails, all_fail=fails)):
            out.append((step, alert.title.split(":")[1].split(" at ")[0].strip()))
    return out


def test_a_lasting_condition_is_raised_once() -> None:
    assert raised_steps("F" * 40) == [(7, "all-fail groups rising toward 1")]


def test_a_condition_is_raised_again_only_after_a_whole_window_without_it() -> None:
    # held through step 10 (the last four medians still 1), quiet from step 11; eight quiet steps re-arm it
    assert raised_steps("F" * 10 + "S" * 8 + "F" * 6) == [(7, "all-fail groups rising toward 1"),
                                                           (20, "all-fail groups rising toward 1")]
    assert raised_steps("F" * 10 + "S" * 6 + "F" * 8) == [(7, "all-fail groups rising toward 1")]


def test_the_advisor_state_round_trips_and_a_damaged_one_changes_nothing() -> None:
    first = Advisor()
    for step in range(9):
        first.observe(StepFacts(rollout_id=step, accepted=32, zero_std=32, all_fail=32))
    second = Advisor()
    second.load_state_dict(first.state_dict())
    assert second.state_dict() == first.state_dict()
    facts = StepFacts(rollout_id=9, accepted=32, zero_std=32, all_fail=32)
    assert second.observe(facts) == first.observe(facts) == []  # raised already, in both
    before = second.state_dict()
    for damaged in ({"window": [{"accepted": 1}], "quiet": {}}, {"window": ["x"], "quiet": {}}, {"window": []}):
        with pytest.raises(ValueError, match="advisor state"):
            second.load_state_dict(damaged)  # no rollout_id; not a mapping; no quiet conditions
    assert second.state_dict() == before


# --- through the hooks: the record, W&B, the dashboard ------------------------------------------
def run_hooks(args, kinds: str, *, start: int = 0, sinks=None) -> None:
    """One process through slime's hooks: ``F`` a step of 32 all-fail groups, ``S`` one of 32 with spread."""
    slime_runtime.configure(args, sinks=sinks)
    for step, kind in enumerate(kinds, start=start):
        for gid in range(step * 100, step * 100 + 32):
            slime_runtime.fully_scored_group_filter(args, zero(gid) if kind == "F" else spread(gid))
        slime_runtime.log_rollout_step(step, args, [], {}, 1.0)
    slime_runtime.reset_runtime()


def test_a_collapse_is_in_its_steps_record_exactly_as_sent_and_nowhere_else(tmp_path) -> None:
    memory = MemorySink()
    run_hooks(make_args(shopsim_run_dir=str(tmp_path)), "F" * 12, sinks=[memory])
    (sent,) = memory.alerts
    assert sent.title == "shopsim: all-fail groups rising toward 1 at rollout step 7" and sent.level == "WARN"
    by_step = {r.rollout_id: r.alerts for r in memory.records}
    assert by_step[7] == [{"level": "WARN", "title": sent.title, "text": sent.text}]
    assert all(alerts == [] for step, alerts in by_step.items() if step != 7)


def test_a_healthy_run_through_the_hooks_raises_nothing_and_alerts_off_raise_no_advisory(tmp_path) -> None:
    memory = MemorySink()
    run_hooks(make_args(shopsim_run_dir=str(tmp_path / "a")), "S" * 12, sinks=[memory])
    assert memory.alerts == [] and len(memory.records) == 12
    off = MemorySink()
    run_hooks(make_args(shopsim_run_dir=str(tmp_path / "b"), shopsim_alerts=False), "F" * 12, sinks=[off])
    assert off.alerts == [] and all(r.alerts == [] for r in off.records) and len(off.records) == 12


def test_a_failing_advisor_never_reaches_slime_and_the_record_is_written(tmp_path, monkeypatch, caplog) -> None:
    memory = MemorySink()
    args = make_args(shopsim_run_dir=str(tmp_path))
    runtime = slime_runtime.configure(args, sinks=[memory])

    def broken(facts):
        raise RuntimeError("boom")

    monkeypatch.setattr(runtime.parts.advisor, "observe", broken)
    with caplog.at_level(logging.WARNING, logger="shopsim_metrics"):
        for step in range(2):
            for g in range(32):
                slime_runtime.fully_scored_group_filter(args, zero(step * 100 + g))
            slime_runtime.log_rollout_step(step, args, [], {}, 1.0)
    assert [r.rollout_id for r in memory.records] == [0, 1]
    warnings = [r.getMessage() for r in caplog.records if "advisories of step" in r.getMessage()]
    assert len(warnings) == 1 and "RuntimeError: boom" in warnings[0]


def test_the_advisory_reaches_the_wandb_run_once_and_its_level_the_timeline(wandb_env, tmp_path) -> None:  # noqa: F811
    run_hooks(make_args(shopsim_run_dir=str(tmp_path / "run")), "F" * 10)  # the settings' sinks: JSONL and W&B
    (run_dir,) = find_run_dirs(wandb_env)
    run = read_offline_run(run_dir)
    assert [(a["level"], a["title"]) for a in run.alerts] == [
        ("WARN", "shopsim: all-fail groups rising toward 1 at rollout step 7")]
    level = contract.wandb_key("alert_level")
    rows = [row for row in run.history if level in row]
    assert [row[level] for row in rows] == [0] * 7 + [contract.ALERT_LEVEL_CODES["WARN"]] + [0, 0]


def test_the_html_dashboard_lists_the_advisory_and_marks_its_step_once(tmp_path) -> None:
    facts = dict(level="INFO", title="shopsim: most groups zero-std at rollout step 3", text="over-sampling pays")
    records = read_steps(_records_with_alerts(tmp_path, {3: [facts, {**facts, "level": "WARN", "title": "w"}]}))
    page = render_html(load_dashboard_data(records))
    assert "shopsim: most groups zero-std at rollout step 3" in page and "over-sampling pays" in page
    figure = step_figure_dict(dashboard_spec().panel("outcomes"), load_dashboard_data(records))
    marks = [(s["x0"], a["text"]) for s, a in zip(figure["layout"]["shapes"], figure["layout"]["annotations"])]
    assert marks == [(3, "WARN")]  # one mark per step, its highest level


def _records_with_alerts(tmp_path: Path, alerts: dict[int, list[dict]]) -> Path:
    from shopsim_metrics.record.records import StepRecord

    sink = JsonlSink(tmp_path)
    for step in range(6):
        sink.emit(StepRecord(rollout_id=step, submitted_group_count=32, wave_count=1, accepted_group_count=32,
                             technical_failure_warn_at=4, alerts=alerts.get(step, [])))
    sink.close()
    return tmp_path


# --- a resumed run raises what an unbroken run would ---------------------------------------------
KINDS = "F" * 10 + "S" * 8 + "F" * 6  # collapse raised at steps 7 and 20 (test_a_condition_is_raised_again...)


def alerts_by_step(run_dir: Path) -> dict[int, list[str]]:
    return {r.rollout_id: [a["title"] for a in r.alerts] for r in read_steps(run_dir)}


def test_a_resumed_run_raises_what_the_unbroken_run_raises(tmp_path) -> None:
    run_hooks(make_args(shopsim_run_dir=str(tmp_path / "unbroken")), KINDS, sinks=[JsonlSink(tmp_path / "unbroken")])
    expected = alerts_by_step(tmp_path / "unbroken")
    assert [step for step, titles in expected.items() if titles] == [7, 20]
    resumed = tmp_path / "resumed"
    run_hooks(make_args(shopsim_run_dir=str(resumed)), KINDS[:17], sinks=[JsonlSink(resumed)])  # crashed after 16
    run_hooks(make_args(shopsim_run_dir=str(resumed), start_rollout_id=15), KINDS[15:], start=15,
              sinks=[JsonlSink(resumed)])
    assert alerts_by_step(resumed) == expected
    # without the earlier records the window starts empty at 15 and fills only at 22: the restore is what matters
    alone = tmp_path / "alone"
    run_hooks(make_args(shopsim_run_dir=str(alone), start_rollout_id=15), KINDS[15:], start=15,
              sinks=[JsonlSink(alone)])
    assert [step for step, titles in alerts_by_step(alone).items() if titles] == [22]


def test_a_resume_from_the_monitors_snapshot_raises_what_the_unbroken_run_raises(tmp_path, monkeypatch) -> None:
    run_hooks(make_args(shopsim_run_dir=str(tmp_path / "unbroken")), KINDS, sinks=[JsonlSink(tmp_path / "unbroken")])
    expected = alerts_by_step(tmp_path / "unbroken")
    run, ckpt = tmp_path / "run", tmp_path / "ckpt"
    flags = dict(shopsim_run_dir=str(run), save=str(ckpt), save_interval=5, num_rollout=len(KINDS))
    run_hooks(make_args(**flags), KINDS[:17], sinks=[JsonlSink(run)])
    assert (ckpt / "rollout" / "shopsim_monitor_state_14.json").exists()
    import shopsim_metrics.run.resume as resume

    def no_replay(*args, **kwargs):
        raise AssertionError("the records were replayed instead of the snapshot read")

    monkeypatch.setattr(resume, "_replay_all", no_replay)
    run_hooks(make_args(**flags, load=str(ckpt), start_rollout_id=15), KINDS[15:], start=15, sinks=[JsonlSink(run)])
    assert alerts_by_step(run) == expected


# --- the demo raises none it should not ----------------------------------------------------------
@pytest.mark.parametrize("rollout", ["sync", "fully-async"])
def test_the_default_demo_raises_no_advisory_only_the_bursts_streak_warning(rollout) -> None:
    memory = MemorySink()
    config = demo_config(rollout=rollout)
    Simulator(config, sinks=[memory]).run()
    titles = [(r.rollout_id, a["title"]) for r in memory.records for a in r.alerts]
    burst = config.bursts[0].step
    assert titles == [(burst, f"shopsim: technical failures piling up at rollout step {burst}")]
    assert len(memory.records) == config.steps >= ADVISORY_WINDOW


# --- the lag weighted by tokens, beside the group mean -------------------------------------------
@pytest.mark.parametrize("tokens,expected", [((30, 10), 1.5), ((0, 0), None)])
def test_the_token_weighted_lag_weighs_each_trained_group_by_its_tokens(tokens, expected) -> None:
    from shopsim_metrics.judging.group_judgement import judge_group
    from shopsim_metrics.step.accounting import StepAccountant

    accountant = StepAccountant(StepKnobs(rollout_batch_size=2, over_sampling_batch_size=2))
    for gid, (version, n) in enumerate(zip((3, 5), tokens)):  # lags 2 and 0 behind the newest version, 5
        group = group_of(gid, [1.0, 0.0], response_length=n // 2)
        accountant.record_decided(judge_group(group, n_samples=2), 0, "trained", group=group, weight_version=version)
    draft = step_draft(accountant.close_step())
    assert draft.value("policy_version_lag_mean") == 1.0
    assert draft.value("policy_version_lag_token_mean") == expected  # (2 × 30 + 0 × 10) / 40


def test_a_fully_async_pool_ten_batches_deep_raises_the_policy_lag_through_its_long_generations() -> None:
    from dataclasses import replace

    memory = MemorySink()
    config = replace(demo_config(rollout="fully-async", steps=20), max_concurrent_groups=160)  # the demo's: 48
    Simulator(config, sinks=[memory]).run()
    raised = [(r.rollout_id, a) for r in memory.records for a in r.alerts if "policy lag" in a["title"]]
    ((step, alert),) = raised
    window = [r for r in memory.records if step - 4 < r.rollout_id <= step]
    group_median = sorted(r.policy_version_lag_mean for r in window)[1:3]
    token_median = sorted(r.policy_version_lag_token_mean for r in window)[1:3]
    assert sum(token_median) / 2 >= 4.0 > sum(group_median) / 2  # the tokens' lag, not the groups', crossed it
    assert alert["level"] == "WARN" and "long generations are the stalest" in alert["text"]


@pytest.mark.parametrize("over_sampling,wave_size,expected", [
    (64, "fixed", ["abort storm"]),  # waves four times the batch: most tokens aborted
    (64, "adaptive", []),  # the abort storm's advice followed
    (16, "fixed", ["frequent second waves"]),  # no over-sampling: zero-std drops open second waves
    (32, "fixed", []),  # tune's recommendation for these rates
])
def test_simulated_runs_raise_the_advisory_of_their_waves_and_following_it_clears_it(
        over_sampling, wave_size, expected) -> None:
    from dataclasses import replace

    memory = MemorySink()
    config = replace(demo_config(steps=14, wave_size=wave_size), over_sampling_batch_size=over_sampling, bursts=())
    Simulator(config, sinks=[memory]).run()
    raised = [a["title"].split(": ")[1].split(" at rollout")[0] for r in memory.records for a in r.alerts]
    assert raised == expected


def test_a_damaged_advisor_state_in_the_snapshot_is_named_and_the_records_replayed(tmp_path, caplog) -> None:
    import json

    run_hooks(make_args(shopsim_run_dir=str(tmp_path / "unbroken")), KINDS, sinks=[JsonlSink(tmp_path / "unbroken")])
    run, ckpt = tmp_path / "run", tmp_path / "ckpt"
    flags = dict(shopsim_run_dir=str(run), save=str(ckpt), save_interval=5, num_rollout=len(KINDS))
    run_hooks(make_args(**flags), KINDS[:17], sinks=[JsonlSink(run)])
    path = ckpt / "rollout" / "shopsim_monitor_state_14.json"
    snapshot = json.loads(path.read_text())
    snapshot["advisories"] = {"window": ["x"], "quiet": {}}
    path.write_text(json.dumps(snapshot))
    with caplog.at_level(logging.WARNING, logger="shopsim_metrics"):
        run_hooks(make_args(**flags, load=str(ckpt), start_rollout_id=15), KINDS[15:], start=15,
                  sinks=[JsonlSink(run)])
    (note,) = [r.getMessage() for r in caplog.records if "monitor snapshot was not used" in r.getMessage()]
    assert "advisor state" in note
    assert alerts_by_step(run) == alerts_by_step(tmp_path / "unbroken")
