"""Agent episodes: the tokens the model generated (loss_mask), the environment's tokens, turns, environment
time and technical failures by cause, through the hooks loaded by dotted path (docs §3.3.14, §3.9)."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
from hypothesis import given, settings, strategies as st

from conftest import fifo_batches, group_of, run_scripted_step, spread
from shopsim_metrics.errors import TechnicalFailureLimitExceeded
from shopsim_metrics.judging.episodes import read_episode
from shopsim_metrics.judging.failure_cause import CAUSE_LENGTH, UNREADABLE_CAUSE, read_failure_cause
from shopsim_metrics.judging.group_samples import group_tokens, read_generated_tokens
from shopsim_metrics.simulator.samples import SimSample
from shopsim_metrics.record import contract
from shopsim_metrics.step.closed_step import top_causes
from shopsim_metrics.step.generated_tokens import GeneratedTokens
from shopsim_metrics.record.records import StepRecord

CAUSE = "ToolTimeout: search_products"


def _runs_of_ones(mask: list[int]) -> int:
    return sum(1 for i, bit in enumerate(mask) if bit == 1 and (i == 0 or mask[i - 1] == 0))


# --- one episode --------------------------------------------------------------------------------
@given(st.lists(st.integers(0, 1), max_size=300), st.floats(0, 1e4, allow_nan=False))
def test_an_aligned_mask_splits_the_response_into_generated_and_observation_tokens(mask, seconds):
    sample = SimSample(response_length=len(mask), loss_mask=list(mask), non_generation_time=seconds)
    episode = read_episode(sample)
    assert episode.generated == sum(mask) == read_generated_tokens(sample)
    assert episode.observation == len(mask) - sum(mask)
    assert episode.generated + episode.observation == len(mask)
    assert episode.turns == _runs_of_ones(mask)
    assert episode.turns_from == ("loss_mask" if 0 in mask else None)
    assert episode.environment_seconds == seconds
    assert episode.multi_turn == (0 in mask or seconds > 0)


@given(st.lists(st.integers(0, 1), min_size=1, max_size=50), st.integers(1, 5))
def test_a_mask_that_is_not_aligned_counts_the_whole_response_as_generated(mask, extra):
    sample = SimSample(response_length=len(mask) + extra, loss_mask=list(mask))
    assert read_generated_tokens(sample) == len(mask) + extra
    assert read_episode(sample).observation == 0


@pytest.mark.parametrize("mask", [[1, 2, 0], [1.0, 0.0, 1.0], [1, None, 0], "101", (1, 0, 1)])
def test_a_mask_of_other_values_is_not_read_as_a_mask_except_a_tuple(mask):
    sample = SimSample(response_length=3, loss_mask=mask)
    assert read_generated_tokens(sample) == (2 if mask == (1, 0, 1) else 3)


def test_round_number_in_metadata_decides_the_turns_and_says_so():
    sample = SimSample(response_length=6, loss_mask=[1, 1, 0, 1, 0, 1], metadata={"round_number": 5})
    episode = read_episode(sample)
    assert (episode.turns, episode.turns_from, episode.multi_turn) == (5, "metadata", True)
    for bad in (-1, True, "5", 2.0):
        assert read_episode(SimSample(response_length=6, loss_mask=[1, 1, 0, 1, 0, 1],
                                      metadata={"round_number": bad})).turns_from == "loss_mask"


def test_a_single_turn_sample_is_its_response():
    episode = read_episode(SimSample(response_length=40))
    assert (episode.generated, episode.observation, episode.turns, episode.multi_turn) == (40, 0, 1, False)
    assert group_tokens([SimSample(index=0, response_length=40), SimSample(index=1, response_length=2)]) == 42


@pytest.mark.parametrize("value, expected", [
    (CAUSE, CAUSE),
    (TimeoutError("search_products"), "TimeoutError: search_products"),
    (KeyError(), "KeyError"),
    ("  \n ", None),
    (None, None),
    (42, UNREADABLE_CAUSE),
    ("tool\x1b[2J\nbroke", "tool\\x1b[2J\\x0abroke"),
    ("x" * 500, "x" * (CAUSE_LENGTH - 3) + "..."),
])
def test_a_failure_cause_is_one_short_printable_line(value, expected):
    assert read_failure_cause(SimSample(metadata={contract.FAILURE_CAUSE_KEY: value})) == expected


def test_top_causes_keeps_five_and_sums_the_rest():
    from collections import Counter
    causes = Counter({f"E{i}: tool": 10 - i for i in range(8)})
    kept = top_causes(causes)
    assert list(kept) == [f"E{i}: tool" for i in range(5)] + [contract.OTHER_CAUSES]
    assert kept[contract.OTHER_CAUSES] == 5 + 4 + 3 and sum(kept.values()) == sum(causes.values())


# --- the sample hook's tally --------------------------------------------------------------------
def _episode(index: int, turns: int, per_turn: int, obs: int, *, seconds: float = 0.0, status: str = "completed",
             **kw) -> SimSample:
    mask: list[int] = []
    for turn in range(turns):
        mask += [1] * per_turn + ([0] * obs if turn < turns - 1 else [])
    return SimSample(index=index, rollout_id=index, response_length=len(mask), loss_mask=mask,
                     non_generation_time=seconds, status=status, **kw)


def test_the_tally_counts_generated_and_observation_tokens_and_the_episodes():
    tokens = GeneratedTokens()
    judged = [_episode(0, 3, 10, 5, seconds=1.5), _episode(1, 1, 7, 0)]
    aborted = _episode(2, 2, 4, 6, seconds=0.5, status="aborted")
    queued = SimSample(index=3, rollout_id=3, status="aborted")  # aborted before its first token: never started
    for sample in [*judged, aborted, queued]:
        tokens.observe(sample, step=0)
    step = tokens.take(0, [judged])
    assert step.total == 30 + 7 + 8 and step.aborted == 8
    assert step.observation == 10 + 0 + 6
    assert step.unjudged_length == 8  # the aborted episode at its generated length, not its response
    tally = step.episodes
    assert (tally.episodes, tally.turns_total, tally.turns_max) == (3, 3 + 1 + 2, 3)
    assert tally.environment_seconds == 2.0 and tally.turns_from == "loss_mask"


def test_a_single_turn_step_has_no_episode_tally():
    tokens = GeneratedTokens()
    tokens.observe(SimSample(index=0, response_length=10), step=0)
    assert tokens.take(0, []).episodes is None


def test_a_continued_partial_rollout_counts_only_its_new_tokens_of_each_kind():
    tokens = GeneratedTokens(continues=True)
    first = _episode(0, 2, 5, 3, status="aborted")  # 13 tokens: 10 generated, 3 observation
    tokens.observe(first, step=0)
    assert (tokens.take(0, []).total, ) == (10,)
    first.loss_mask += [0, 0, 1, 1, 1, 1]  # continued: 2 more observation tokens, 4 generated
    first.response_length += 6
    first.status = "completed"
    tokens.observe(first, step=1)
    step = tokens.take(1, [[first]])
    assert (step.total, step.observation) == (4, 2)


# --- through the hooks --------------------------------------------------------------------------
def _agent_group(gid: int, rewards, *, turns: int = 3, seconds: float = 2.0, status: str = "completed", **kw):
    group = group_of(gid, rewards, **kw)
    for sample in group:
        episode = _episode(sample.index, turns, 20, 12, seconds=seconds, status=status)
        sample.response_length, sample.loss_mask = episode.response_length, episode.loss_mask
        sample.non_generation_time = seconds
    return group


def test_an_agent_step_records_its_episodes_and_counts_only_generated_tokens(wired):
    loop, memory, run = wired(rollout_batch_size=2, over_sampling_batch_size=2)
    run_scripted_step(loop, 0, lambda gid: _agent_group(gid, [1.0, 0.0] * 4), fifo_batches(1))
    record = memory.records[-1]
    episodes = record.accepted_sample_count
    assert record.total_token_count == episodes * 3 * 20
    assert record.generated_token_count == episodes * 3 * 20
    assert record.observation_token_count == episodes * 2 * 12
    assert record.observation_token_fraction == pytest.approx(24 / (24 + 60))
    assert (record.episode_count, record.turns_per_episode_mean, record.turns_per_episode_max) == (episodes, 3.0, 3)
    assert record.turn_count_source == "loss_mask"
    assert record.environment_seconds == pytest.approx(2.0 * episodes)
    assert record.environment_seconds_per_episode == pytest.approx(2.0)
    assert record.rollout_seconds > 0
    assert record.environment_time_fraction == pytest.approx(2.0 / record.rollout_seconds)
    assert record.truncated_episode_fraction == 0.0
    line = json.loads((run / contract.STEPS_FILE_NAME).read_text().splitlines()[-1])
    assert line["observation_token_count"] == record.observation_token_count


def test_a_single_turn_step_has_no_agent_field_in_its_record(wired):
    loop, memory, run = wired(rollout_batch_size=2, over_sampling_batch_size=2)
    run_scripted_step(loop, 0, spread, fifo_batches(1))
    line = json.loads((run / contract.STEPS_FILE_NAME).read_text().splitlines()[-1])
    agent = set(contract.AGENT_FIELDS) | {"turn_count_source", "technical_cause_counts"}
    assert agent.isdisjoint(line)
    assert all("technical_cause" not in row for row in line["decisions"])
    assert StepRecord.from_dict(line).to_dict() == line


def _broken(gid: int, cause=CAUSE):
    group = _agent_group(gid, [1.0, 0.0] * 4)
    group[2].status = "aborted"
    group[2].metadata = {contract.FAILURE_CAUSE_KEY: cause}
    return group


def test_technical_groups_are_counted_by_the_cause_their_generate_function_left(wired):
    loop, memory, run = wired(rollout_batch_size=2, over_sampling_batch_size=4)
    causes = {0: CAUSE, 1: "EnvError: cart", 2: CAUSE}
    run_scripted_step(loop, 0, lambda gid: _broken(gid, causes[gid]) if gid in causes else _agent_group(gid, [1.0, 0.0] * 4),
                      fifo_batches(1))
    record = memory.records[-1]
    assert record.technical_cause_counts == {CAUSE: 2, "EnvError: cart": 1}
    assert record.failed_check_counts == {"status_aborted": 3}
    assert [row.technical_cause for row in record.decisions if row.outcome == "dropped_technical"] == \
        [CAUSE, "EnvError: cart", CAUSE]


def test_the_streak_alert_and_the_termination_name_the_leading_cause(wired):
    loop, memory, _ = wired(rollout_batch_size=2, over_sampling_batch_size=16,
                            shopsim_max_consecutive_failed_groups=8)
    with pytest.raises(TechnicalFailureLimitExceeded) as raised:
        run_scripted_step(loop, 0, lambda gid: _broken(gid, CAUSE if gid != 3 else "EnvError: cart"),
                          fifo_batches(1))
    assert "8 consecutive technical groups" in str(raised.value) and f"7 of them `{CAUSE}`" in str(raised.value)
    assert raised.value.causes == {CAUSE: 7, "EnvError: cart": 1}
    (error,) = [a for a in memory.alerts if a.level == "ERROR"]
    assert f"7 of them `{CAUSE}`" in error.text
    assert memory.records[-1].terminated


def test_the_hook_never_raises_on_odd_episodes():
    from shopsim_metrics.settings.preflight import load_function
    from shopsimrl.slime_runtime import configure, reset_runtime
    hook = load_function(contract.SAMPLE_HOOK_PATH)
    args = SimpleNamespace(rollout_batch_size=1, n_samples_per_prompt=1)
    configure(args, sinks=[])
    try:
        for sample in [SimSample(response_length=3, loss_mask=[1, "x", 0]),
                       SimSample(response_length=2, loss_mask=[1, 0], non_generation_time=float("nan")),
                       SimSample(response_length=2, loss_mask=[1, 0], metadata={"round_number": 10**30}),
                       SimpleNamespace(response_length=4, loss_mask=[0] * 4, non_generation_time="slow")]:
            assert hook(args, sample, rollout_id=0) is None
    finally:
        reset_runtime()


@settings(max_examples=30, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 5), st.integers(1, 30), st.integers(0, 20)), min_size=1, max_size=12))
def test_generated_plus_observation_is_every_response_token_the_hook_saw(shapes):
    tokens = GeneratedTokens()
    samples = [_episode(i, turns, per_turn, obs) for i, (turns, per_turn, obs) in enumerate(shapes)]
    for sample in samples:
        tokens.observe(sample, step=0)
    step = tokens.take(0, [samples])
    assert step.total + step.observation == sum(s.response_length for s in samples)
    assert step.total == sum(turns * per_turn for turns, per_turn, _ in shapes)


def test_environment_time_nobody_measured_is_unknown_not_zero():
    tokens = GeneratedTokens()
    tokens.observe(_episode(0, 3, 10, 5), step=0)  # a generate function that leaves non_generation_time at 0
    tally = tokens.take(0, []).episodes
    assert tally.episodes == 1 and tally.environment_seconds is None


def test_once_an_agent_run_every_step_has_its_episodes_even_one_turn_answers():
    tokens = GeneratedTokens()
    tokens.observe(_episode(0, 3, 10, 5, seconds=1.0), step=0)
    assert tokens.take(0, []).episodes.turns_max == 3
    tokens.observe(_episode(1, 1, 10, 0), step=1)  # every episode of the step answered at once
    tally = tokens.take(1, []).episodes
    assert (tally.episodes, tally.turns_max, tally.environment_seconds) == (1, 1, None)


def test_an_agent_step_without_environment_time_records_null_environment_fields(wired):
    loop, memory, run = wired(rollout_batch_size=2, over_sampling_batch_size=2)
    run_scripted_step(loop, 0, lambda gid: _agent_group(gid, [1.0, 0.0] * 4, seconds=0.0), fifo_batches(1))
    line = json.loads((run / contract.STEPS_FILE_NAME).read_text().splitlines()[-1])
    assert line["observation_token_count"] > 0 and line["episode_count"] == 16
    assert line["environment_seconds"] is None and line["environment_time_fraction"] is None
