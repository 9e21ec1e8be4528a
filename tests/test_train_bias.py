"""The bias of what trains, and groups of unequal size.

Per step, the mean response length of the train batch, of every judged group, of every rollout the step
started and of the aborted rollouts (their partial lengths), and ``length_bias``: checked exactly against
the lengths the simulated loop drew and served (:attr:`StepOutcome.response_lengths`,
:attr:`StepOutcome.aborted_lengths`), over random configurations. Groups whose unique rollouts are not
``n_samples_per_prompt`` are counted in the record and named in one warning per step.
"""

from __future__ import annotations

import logging

import pytest
from hypothesis import given, settings, strategies as st

from shopsim_metrics.simulator.config import SimConfig
from shopsim_metrics.simulator.latency import ScriptedCompletions
from shopsim_metrics.simulator.loop import Simulator
from shopsim_metrics.simulator.rewards import FactoryGroupSource
from shopsim_metrics.simulator.samples import SimSample
from shopsim_metrics.record import contract as C
from shopsim_metrics.step.generated_tokens import GeneratedTokens, StepTokens
from shopsimrl.slime_runtime import reset_runtime
from tests.wandb_helpers import wandb_env  # noqa: F401 - fixture

HOOK_FIELDS = ("started_rollout_count", "started_response_length_mean", "aborted_rollout_count",
               "aborted_response_length_mean", "length_bias")


@pytest.fixture(autouse=True)
def _fresh_runtime():
    yield
    reset_runtime()


def mean(values: list[int]) -> float | None:
    return sum(values) / len(values) if values else None


def started_unjudged(outcome) -> list[int]:
    """The lengths of the aborted groups' rollouts that had started (a rollout still queued made no token)."""
    return [length for gid in outcome.aborted_ids for length in outcome.response_lengths[gid] if length > 0]


def expected_fields(outcome) -> dict:
    """The length fields of one step, from what the loop itself generated (flat groups: one call per rollout)."""
    lengths = outcome.response_lengths
    train = [length for gid in outcome.train_ids for length in lengths[gid]]
    judged = [length for gid in outcome.judged_ids for length in lengths[gid]]
    started = judged + started_unjudged(outcome)
    aborted = [length for length in outcome.aborted_lengths if length > 0]  # none before its first token
    train_mean, started_mean = mean(train), mean(started)
    return {
        "train_response_length_mean": train_mean,
        "accepted_response_length_mean": mean(judged),
        "started_rollout_count": len(started),
        "started_response_length_mean": started_mean,
        "aborted_rollout_count": len(aborted),
        "aborted_response_length_mean": mean(aborted),
        "length_bias": train_mean / started_mean if train_mean is not None and started_mean else None,
    }


configs = st.builds(
    lambda seed, batch, extra, n, concurrency, sigma, slope, rates: SimConfig(
        steps=3, seed=seed, rollout_batch_size=batch, over_sampling_batch_size=batch + extra, n_samples_per_prompt=n,
        global_batch_size=batch * n, max_concurrent_groups=concurrency, response_length_median=200.0,
        response_length_sigma=sigma, hard_prompt_length_slope=slope, seconds_per_token=0.01,
        zero_std_rate=0.4 if rates else None, technical_rate=0.05, max_consecutive_failed_groups=10**6),
    seed=st.integers(0, 10**6), batch=st.integers(1, 6), extra=st.integers(0, 10), n=st.integers(1, 5),
    concurrency=st.one_of(st.none(), st.integers(1, 8)), sigma=st.floats(0.0, 1.5), slope=st.floats(0.0, 1.0),
    rates=st.booleans(),
)


@settings(max_examples=30, deadline=None)
@given(config=configs)
def test_every_length_field_is_what_the_loop_generated(config: SimConfig) -> None:
    result = Simulator(config, sinks=[]).run()
    assert result.records and len(result.records) == len(result.outcomes)
    for record, outcome in zip(result.records, result.outcomes):
        assert {name: getattr(record, name) for name in C.TRAIN_BIAS_FIELDS} == expected_fields(outcome)
        # the judged part is the ledger's; the rest is what the sample hook saw of the aborted groups
        assert record.started_rollout_count == record.accepted_sample_count + len(started_unjudged(outcome))
        assert record.unequal_size_group_count == record.unequal_size_train_group_count == 0


def test_aborting_the_slow_groups_biases_the_batch_towards_short_answers() -> None:
    """Long-tailed lengths, hard prompts longer, a group as slow as its longest rollout: every step trains on
    shorter answers than it started, and the aborted ones (cut short) ran longer than the trained ones."""
    result = Simulator(SimConfig(steps=8, seed=5), sinks=[]).run()
    assert all(outcome.aborted_lengths for outcome in result.outcomes), "no step aborted a rollout: nothing shown"
    for record in result.records:
        assert record.length_bias < 1.0
        assert record.aborted_response_length_mean > record.train_response_length_mean
        assert record.started_response_length_mean > record.train_response_length_mean


def test_a_finished_sibling_of_an_aborted_group_is_started_but_not_aborted() -> None:
    result = Simulator(SimConfig(steps=4, seed=2, response_length_sigma=1.2), sinks=[]).run()
    finished = 0
    for record, outcome in zip(result.records, result.outcomes):
        started = len(started_unjudged(outcome))
        aborted = sum(1 for length in outcome.aborted_lengths if length > 0)
        finished += started - aborted
        assert record.aborted_rollout_count == aborted <= started
        assert record.started_rollout_count == record.accepted_sample_count + started
    assert finished > 0, "no aborted group had a finished sibling: the distinction was not exercised"


def test_without_the_sample_hook_only_the_judged_lengths_are_known() -> None:
    result = Simulator(SimConfig(steps=3, seed=1), sinks=[], sample_hook=False).run()
    for record, outcome in zip(result.records, result.outcomes):
        expected = expected_fields(outcome)
        assert record.train_response_length_mean == expected["train_response_length_mean"] is not None
        assert record.accepted_response_length_mean == expected["accepted_response_length_mean"] is not None
        assert all(getattr(record, name) is None for name in HOOK_FIELDS)
        assert all(record.to_dict()[name] is None for name in HOOK_FIELDS)


def test_the_hook_folds_a_rollouts_segments_and_leaves_judged_rollouts_out() -> None:
    tokens = GeneratedTokens()
    judged = [SimSample(index=0, rollout_id=0, response_length=40), SimSample(index=1, rollout_id=1, response_length=60)]
    segments = [SimSample(index=2, rollout_id=2, response_length=30, status="aborted"),
                SimSample(index=3, rollout_id=2, response_length=20)]  # one rollout, two segments, one aborted
    finished_sibling = SimSample(index=4, rollout_id=4, response_length=90)
    retried = SimSample(index=9, rollout_id=1, response_length=5, status="aborted")  # an earlier try of rollout 1
    for sample in (*judged, *segments, finished_sibling, retried):
        tokens.observe(sample, 3)
    assert tokens.take(3, [judged]) == StepTokens(total=245, aborted=145, unjudged_rollouts=2, unjudged_length=140,
                                                  aborted_rollouts=1, aborted_length=50)


def test_a_rollout_aborted_before_its_first_token_never_started() -> None:
    tokens = GeneratedTokens()
    queued = [SimSample(index=i, response_length=0, status="aborted") for i in range(3)]
    cut = SimSample(index=3, response_length=7, status="aborted")
    for sample in (*queued, cut):
        tokens.observe(sample, 0)
    assert tokens.take(0, []) == StepTokens(total=7, aborted=7, unjudged_rollouts=1, unjudged_length=7,
                                            aborted_rollouts=1, aborted_length=7)


def test_queued_groups_aborted_at_the_abort_are_not_started_rollouts() -> None:
    """Few slots: groups wait in the engine and are aborted with no token; only the started ones count."""
    config = SimConfig(steps=4, seed=3, max_concurrent_groups=8, zero_std_rate=0.5, technical_rate=0.1,
                       over_sampling_batch_size=24)
    result = Simulator(config, sinks=[]).run()
    queued = 0
    for record, outcome in zip(result.records, result.outcomes):
        served = sum(len(outcome.response_lengths[gid]) for gid in outcome.aborted_ids)
        queued += served - len(started_unjudged(outcome))
        assert {name: getattr(record, name) for name in C.TRAIN_BIAS_FIELDS} == expected_fields(outcome)
    assert queued > 0, "no group was still queued at an abort: nothing shown"


def test_a_sample_seen_twice_counts_at_its_last_length_and_status() -> None:
    tokens = GeneratedTokens(continues=True)
    sample = SimSample(index=5, response_length=10, status="aborted")
    tokens.observe(sample, 0)
    sample.response_length, sample.status = 25, "completed"
    tokens.observe(sample, 0)
    taken = tokens.take(0, [])
    assert (taken.total, taken.unjudged_rollouts, taken.unjudged_length, taken.aborted_rollouts) == (25, 1, 25, 0)


# --- groups of unequal size -----------------------------------------------------------------------
N = 4


def rollouts(gid: int, count: int, *, reward=lambda i: float(i % 2)) -> list[SimSample]:
    return [SimSample(index=gid * 100 + i, rollout_id=gid * 100 + i, group_index=gid, reward=reward(i),
                      response_length=10) for i in range(count)]


def make_group(gid: int) -> list:
    """Step 0 (groups 0-3): a group of 5 rollouts (trained), one of 3 rollouts (a technical drop: too few),
    a fan-out of 4 rollouts in 8 segments (equal size, trained); group 3 is aborted. Step 1: every group has 4."""
    if gid == 0:
        return rollouts(gid, N + 1)
    if gid == 1:
        return rollouts(gid, N - 1)
    if gid == 2:
        return [[seg, SimSample(index=seg.index, rollout_id=seg.rollout_id, group_index=gid, reward=seg.reward,
                                response_length=3)] for seg in rollouts(gid, N)]
    return rollouts(gid, N)


def test_unequal_groups_are_counted_and_named_in_one_warning_per_step(caplog) -> None:
    config = SimConfig(rollout_batch_size=2, over_sampling_batch_size=4, n_samples_per_prompt=N, global_batch_size=8,
                       steps=2, max_consecutive_failed_groups=10**6)
    caplog.set_level(logging.WARNING, logger="shopsim_metrics")
    result = Simulator(config, sinks=[], source=FactoryGroupSource(make_group),
                       completions=ScriptedCompletions(lambda pending: pending[:1])).run()
    first, second = result.records
    assert [row.unique_rollouts for row in first.decisions] == [N + 1, N - 1, N]
    assert [row.outcome for row in first.decisions] == ["trained", "dropped_technical", "trained"]
    assert (first.unequal_size_group_count, first.unequal_size_train_group_count) == (2, 1)
    assert (second.unequal_size_group_count, second.unequal_size_train_group_count) == (0, 0)
    warnings = [r.getMessage() for r in caplog.records if "n_samples_per_prompt=4" in r.getMessage()]
    assert len(warnings) == 1, warnings
    assert warnings[0].startswith("shopsim-metrics: step 0: 2 judged groups")
    assert "group_index 0 (5 rollouts, trained)" in warnings[0]
    assert "group_index 1 (3 rollouts, dropped_technical)" in warnings[0]
    assert "group_index 2 " not in warnings[0]
    assert "1 of them is in the train batch" in warnings[0]
    assert first.to_dict()["unequal_size_group_count"] == 2


def test_without_n_samples_per_prompt_no_verdict_on_sizes() -> None:
    from shopsim_metrics.step.accounting import StepAccountant
    from shopsim_metrics.step.closed_step import StepKnobs, step_draft
    from shopsim_metrics.judging.group_judgement import GroupJudgement

    accountant = StepAccountant(StepKnobs(rollout_batch_size=1, over_sampling_batch_size=1, n_samples_per_prompt=None))
    accountant.judge(GroupJudgement("spread", None, 0, 3, (0.0, 1.0, 1.0), 2), step=0, remaining=1)
    draft = step_draft(accountant.close_step())
    assert draft.value("unequal_size_group_count") is None and draft.value("unequal_size_train_group_count") is None
    sized = StepAccountant(StepKnobs(rollout_batch_size=1, over_sampling_batch_size=1, n_samples_per_prompt=3))
    sized.judge(GroupJudgement("spread", None, 0, 3, (0.0, 1.0, 1.0), 2), step=0, remaining=1)
    assert step_draft(sized.close_step()).value("unequal_size_group_count") == 0


# --- W&B and the dashboards -----------------------------------------------------------------------
def test_the_length_fields_reach_wandb_and_the_dashboard_panel(wandb_env, tmp_path) -> None:  # noqa: F811
    from shopsim_metrics.dashboards.data import load_dashboard_data, off_reason
    from shopsim_metrics.dashboards.html import step_figure_dict, write_html_dashboard
    from shopsim_metrics.dashboards.spec import dashboard_spec
    from shopsim_metrics.readers.wandb_offline import find_run_dirs, read_offline_run

    result = Simulator(SimConfig(steps=4, seed=3), sinks=None, extra_args={"shopsim_run_dir": str(tmp_path / "run")}).run()
    records = result.records
    assert all(r.length_bias is not None for r in records)
    (run_dir,) = find_run_dirs(wandb_env)
    rows = [row for row in read_offline_run(run_dir).history if C.wandb_key("wave_count") in row]
    assert [row[C.WANDB_STEP_KEY] for row in rows] == [r.rollout_id for r in records]
    for row, record in zip(rows, records):
        for name in C.TRAIN_BIAS_FIELDS + ("unequal_size_group_count", "unequal_size_train_group_count"):
            assert row[C.wandb_key(name)] == pytest.approx(getattr(record, name)), name
    panel = dashboard_spec().panel("length_bias")
    data = load_dashboard_data(records)
    (line,) = [trace for trace in step_figure_dict(panel, data)["data"] if trace.get("meta") == "length_bias"]
    assert line["y"] == [r.length_bias for r in records]
    assert off_reason(panel, data) is None
    page = write_html_dashboard(records, tmp_path / "d.html").read_text()
    assert 'id="panel-length_bias"' in page
    unwired = Simulator(SimConfig(steps=2, seed=3), sinks=[], sample_hook=False).run().records
    assert "sample hook" in off_reason(panel, load_dashboard_data(unwired))
