"""Agent fields at the edges: a value no episode could hold is unknown (counted, one warning), a sum never
overflows, every step keeps its record and its counts, a failed group is never trained, and a failure cause
prints as one line that cannot reorder or break the text around it."""

from __future__ import annotations

import json
import logging

import pytest
from hypothesis import given, settings, strategies as st

from conftest import fifo_batches, group_of, run_scripted_step
from shopsim_metrics.errors import TechnicalFailureLimitExceeded
from shopsim_metrics.judging.episodes import MAX_EPISODE_SECONDS, MAX_TOKENS, read_episode
from shopsim_metrics.judging.failure_cause import UNREADABLE_CAUSE, read_failure_cause
from shopsim_metrics.record import contract
from shopsim_metrics.simulator.samples import SimSample
from shopsim_metrics.step.generated_tokens import GeneratedTokens


def _agent_group(gid: int, rewards=(1.0, 0.0) * 4, *, seconds: float = 2.0):
    group = group_of(gid, list(rewards))
    for sample in group:
        sample.response_length, sample.loss_mask = 6, [1, 1, 0, 0, 1, 1]
        sample.non_generation_time = seconds
    return group


def _out_of_range_warnings(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING and "out of range" in r.getMessage()]


def _step(wired, make_group, caplog, **overrides):
    loop, memory, run = wired(rollout_batch_size=2, over_sampling_batch_size=2, **overrides)
    with caplog.at_level(logging.WARNING, logger="shopsim_metrics"):
        run_scripted_step(loop, 0, make_group, fifo_batches(1))
        run_scripted_step(loop, 1, make_group, fifo_batches(1))
    lines = [json.loads(line) for line in (run / contract.STEPS_FILE_NAME).read_text().splitlines()]
    return memory, lines


def test_environment_seconds_near_the_float_limit_are_unknown_and_the_step_keeps_its_record(wired, caplog) -> None:
    """Before: two episodes of 1e308 s made the close raise OverflowError: the step had no record, and the
    warning blamed a missing filter path."""
    def make(gid):
        group = _agent_group(gid)
        group[0].non_generation_time = group[1].non_generation_time = 1e308
        return group

    memory, lines = _step(wired, make, caplog)
    assert [line["rollout_id"] for line in lines] == [0, 1]
    for line in lines:
        assert line["accepted_group_count"] == 2 and line["train_group_count"] == 2
        assert line["environment_seconds"] == pytest.approx(2.0 * 12)  # the 12 episodes with a known time
    warned = _out_of_range_warnings(caplog)
    assert len(warned) == 1 and "non_generation_time" in warned[0] and "1e+308" in warned[0], caplog.messages
    assert not any("filter path" in m for m in caplog.messages), caplog.messages


@pytest.mark.parametrize("field", ["round_number", "response_length"])
def test_a_count_of_10_to_the_400_is_unknown_and_every_count_of_the_step_stays(wired, caplog, field: str) -> None:
    """Before: the record was written with accepted, train and every count 0 (they were 2 and 2)."""
    def make(gid):
        group = _agent_group(gid)
        if field == "round_number":
            group[0].metadata = {"round_number": 10**400}
        else:
            group[0].response_length = 10**400
        return group

    memory, lines = _step(wired, make, caplog)
    assert [line["rollout_id"] for line in lines] == [0, 1]
    for line in lines:
        assert line["accepted_group_count"] == 2 and line["train_group_count"] == 2, line
        assert line["episode_count"] == 16 and line["turns_per_episode_max"] < MAX_TOKENS
        assert line["generated_token_count"] < MAX_TOKENS
    warned = _out_of_range_warnings(caplog)
    assert len(warned) == 1 and field in warned[0], caplog.messages
    assert len(warned[0]) < 400  # the value is named, cut: never 400 digits


class _Exploding(str):
    def strip(self, *args):  # noqa: D102 - a cause whose text cannot be read the usual way
        raise RuntimeError("strip refused")

    def __str__(self):
        raise RuntimeError("str refused")


class _RaisingMetadata(dict):
    def get(self, *args, **kwargs):  # noqa: D102
        raise RuntimeError("get refused")

    def __getitem__(self, key):
        raise RuntimeError("getitem refused")


def test_a_cause_whose_strip_raises_still_drops_its_failed_group(wired, caplog) -> None:
    """Before: reading the cause raised inside the filter, which kept the failed group and trained on it."""
    def make(gid):
        group = _agent_group(gid)
        if gid == 0:
            group[2].status = "failed"
            group[2].metadata = {contract.FAILURE_CAUSE_KEY: _Exploding("ToolTimeout: search")}
        return group

    loop, memory, run = wired(rollout_batch_size=2, over_sampling_batch_size=4)
    run_scripted_step(loop, 0, make, fifo_batches(1))
    record = memory.records[-1]
    (row,) = [r for r in record.decisions if r.group_index == 0]
    assert row.outcome == "dropped_technical" and row.technical_cause in ("ToolTimeout: search", UNREADABLE_CAUSE)
    assert read_failure_cause(SimSample(metadata={contract.FAILURE_CAUSE_KEY: _Exploding("x")})) == "x"


def test_metadata_whose_get_raises_keeps_the_episode_fields(wired, caplog) -> None:
    """Before: the episode's fields were dropped silently (the sample hook gave up on the sample)."""
    def make(gid):
        group = _agent_group(gid)
        group[0].metadata = _RaisingMetadata()
        return group

    memory, lines = _step(wired, make, caplog)
    for line in lines:
        assert line["episode_count"] == 16 and line["environment_seconds"] == pytest.approx(32.0)
        assert line["train_group_count"] == 2
    assert read_episode(SimSample(response_length=6, loss_mask=[1, 1, 0, 0, 1, 1],
                                  metadata=_RaisingMetadata())).turns == 2
    assert read_failure_cause(SimSample(metadata=_RaisingMetadata())) == UNREADABLE_CAUSE


@pytest.mark.parametrize("char", ["\u202e", "\u2028", "\u2029", "\u2066", "\u200f", "\x85", "\ufeff"])
def test_a_cause_with_bidi_or_line_separators_is_printed_escaped_in_the_termination(wired, char: str) -> None:
    cause = f"EnvError: cart{char}gnirts desrever"
    assert char not in read_failure_cause(SimSample(metadata={contract.FAILURE_CAUSE_KEY: cause}))

    def broken(gid):
        group = _agent_group(gid)
        group[2].status = "aborted"
        group[2].metadata = {contract.FAILURE_CAUSE_KEY: cause}
        return group

    loop, memory, _ = wired(rollout_batch_size=2, over_sampling_batch_size=16, shopsim_max_consecutive_failed_groups=4)
    with pytest.raises(TechnicalFailureLimitExceeded) as raised:
        run_scripted_step(loop, 0, broken, fifo_batches(1))
    texts = [str(raised.value), *(alert.text for alert in memory.alerts)]
    assert all(char not in text for text in texts) and any("EnvError: cart" in text for text in texts)


@pytest.mark.parametrize("seconds", [1e308, float("inf"), 10**400, MAX_EPISODE_SECONDS * 2])
def test_environment_seconds_out_of_range_are_named_and_unknown(seconds) -> None:
    episode = read_episode(SimSample(response_length=4, loss_mask=[1, 0, 0, 1], non_generation_time=seconds))
    assert episode.environment_seconds == 0.0 and "non_generation_time" in episode.out_of_range
    for fine in (0.0, float("nan"), -1.0, MAX_EPISODE_SECONDS):
        assert read_episode(SimSample(response_length=4, non_generation_time=fine)).out_of_range is None


@settings(max_examples=60)
@given(seconds=st.lists(st.floats(allow_nan=True, allow_infinity=True) | st.integers(-10**400, 10**400), max_size=8),
       length=st.integers(-10**400, 10**400), rounds=st.integers(-10**400, 10**400))
def test_no_episode_value_makes_a_tally_overflow_or_leave_its_range(seconds, length, rounds) -> None:
    tokens = GeneratedTokens()
    for index, value in enumerate(seconds or [1.0]):
        tokens.observe(SimSample(index=index, response_length=length, loss_mask=None, non_generation_time=value,
                                 metadata={"round_number": rounds}), step=0)
    step = tokens.take(0, [])
    tally = step.episodes
    assert 0 <= step.total <= len(seconds or [1]) * MAX_TOKENS
    if tally is not None:
        assert tally.environment_seconds is None or 0 <= tally.environment_seconds <= 8 * MAX_EPISODE_SECONDS
        assert 0 <= tally.turns_max <= MAX_TOKENS
