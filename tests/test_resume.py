"""A resumed run (slime's --load: a fresh process, args.start_rollout_id = s) records what an unbroken run would."""

from __future__ import annotations

import dataclasses
import logging
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import fifo_batches, group_of, make_args, run_scripted_step, scripted_loop
from shopsim_metrics.sinks import JsonlSink
from shopsim_metrics.readers import read_steps
from shopsim_metrics.run.identity import WRITER_FIELDS
from shopsim_metrics.loop.loop_state import ManualLoopState
from shopsimrl import slime_runtime

TIMING_FIELDS = {"filter_seconds", "rollout_seconds", "filter_time_fraction", "first_wave_fill_seconds",
                 "extra_wave_seconds", *WRITER_FIELDS, "record_sequence"}  # who wrote it, and when
STEPS = 6


def group_for(step: int, k: int, gid: int, pattern: int):
    """The k-th group of a step: its prompt (from a pool of 9, so prompts come back) and its rewards.

    Step 2 ends with technical groups judged after the batch filled, so the streak carries into step 3.
    """
    prompt = f"prompt {(step * 5 + k * pattern) % 9}"
    if step == 2:  # 16 with spread fill the batch; the rest of the last batch of 3 is technical
        group = group_of(gid, [1.0, 0.0] * 4, prompt=prompt)
        if k >= 16:
            group[0].status = "failed"
        return group
    if step == 3 and k < 2:
        group = group_of(gid, [1.0, 0.0] * 4, prompt=prompt)
        group[0].status = "failed"
        return group
    kind = (step + k * pattern) % 3
    rewards = [1.0] * 8 if kind == 0 else [0.0] * 8 if (kind == 1 and k % 2) else [1.0, 0.0] * 4
    return group_of(gid, rewards, prompt=prompt)


def run_steps(run_dir: Path, steps: range, *, start_rollout_id: int, first_gids: dict[int, int], pattern: int) -> None:
    """One process: a fresh monitor (as slime's actor starts one), the given steps, then the process ends."""
    args = make_args(shopsim_run_dir=str(run_dir), start_rollout_id=start_rollout_id, num_rollout=STEPS,
                     shopsim_alerts=False)
    state = ManualLoopState(source="scripted")
    slime_runtime.configure(args, sinks=[JsonlSink(args.shopsim_run_dir)], loop_state=state)
    loop = scripted_loop(args, state)
    for step in steps:
        if step in first_gids:
            loop._next_id = first_gids[step]  # slime restores its data source's group counter from the checkpoint
        first_gids.setdefault(step, loop._next_id)
        first = loop._next_id
        run_scripted_step(loop, step, lambda gid, s=step, f=first: group_for(s, gid - f, gid, pattern),
                          fifo_batches(3))
    slime_runtime.reset_runtime()


def comparable(record) -> dict:
    data = dataclasses.asdict(record)
    for name in TIMING_FIELDS:
        data.pop(name)
    for row in data["decisions"]:
        row.pop("judged_at", None)
    return data


@settings(max_examples=8, deadline=None)
@given(start=st.integers(1, STEPS - 1), crash_after=st.integers(0, STEPS - 1), pattern=st.sampled_from([1, 2, 4]))
def test_a_resumed_run_records_what_an_unbroken_run_records(tmp_path_factory, start, crash_after, pattern) -> None:
    crash_after = max(crash_after, start - 1)  # the checkpoint at s - 1 was written before the crash
    unbroken, resumed = tmp_path_factory.mktemp("unbroken"), tmp_path_factory.mktemp("resumed")
    first_gids: dict[int, int] = {}
    run_steps(unbroken, range(STEPS), start_rollout_id=0, first_gids=first_gids, pattern=pattern)
    run_steps(resumed, range(crash_after + 1), start_rollout_id=0, first_gids=dict(first_gids), pattern=pattern)
    run_steps(resumed, range(start, STEPS), start_rollout_id=start, first_gids=dict(first_gids), pattern=pattern)

    expected, got = read_steps(unbroken), read_steps(resumed)
    assert [r.rollout_id for r in got] == list(range(STEPS))
    assert [comparable(r) for r in got] == [comparable(r) for r in expected]
    # the case the restore exists for: the streak crossed from step 2 into step 3, prompts came back
    assert expected[3].max_consecutive_technical_failures == 4
    assert any(r.revisit_group_count for r in expected[start:])
    assert all(r.prompt_history_partial is False for r in got)


def test_without_the_earlier_records_the_resumed_records_say_the_history_is_partial(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="shopsim_metrics"):
        run_steps(tmp_path / "empty", range(3, STEPS), start_rollout_id=3, first_gids={}, pattern=1)
    records = read_steps(tmp_path / "empty")
    assert all(r.prompt_history_partial is True for r in records)
    (warning,) = [r.getMessage() for r in caplog.records if "resuming at rollout step 3" in r.getMessage()]
    assert "lack 3 of the 3 steps before it" in warning
    assert records[0].max_consecutive_technical_failures == 2  # the streak starts from nothing


def test_records_of_the_re_run_steps_count_in_no_history(tmp_path: Path) -> None:
    """The crashed process wrote steps 3..5; the resumed one (s = 3) must not count them as visits."""
    first_gids: dict[int, int] = {}
    run_steps(tmp_path / "a", range(STEPS), start_rollout_id=0, first_gids=first_gids, pattern=2)
    once = read_steps(tmp_path / "a")
    run_steps(tmp_path / "a", range(3, STEPS), start_rollout_id=3, first_gids=dict(first_gids), pattern=2)
    twice = read_steps(tmp_path / "a")
    assert [comparable(r) for r in twice] == [comparable(r) for r in once]
