"""Why a group was zero-std: all pass (too easy), all fail (too hard) or other, per step."""

from __future__ import annotations

from shopsim_metrics.step.closed_step import StepKnobs, step_draft
from shopsim_metrics.judging.group_judgement import GroupJudgement
from shopsim_metrics.sinks import JsonlSink
from shopsim_metrics.readers import read_steps
from shopsim_metrics.step.accounting import StepAccountant


def _zero(successes: int, reward: float = 1.0) -> GroupJudgement:
    return GroupJudgement("zero_std", None, 0, 4, (reward,) * 4, successes)


def test_every_zero_std_outcome_counts_by_its_verdict_and_technical_and_spread_groups_do_not(tmp_path) -> None:
    acc = StepAccountant(StepKnobs(rollout_batch_size=2, over_sampling_batch_size=6))
    judgements = [
        _zero(4),  # dropped (remaining 6 > 2): all pass
        _zero(0, 0.0),  # dropped: all fail
        GroupJudgement("technical", "status_failed", 0, 4, (), 0),
        _zero(0, 0.0),  # dropped: all fail
        _zero(2, 0.5),  # fallback (remaining 2): other
        GroupJudgement("spread", None, 0, 4, (0.0, 1.0, 1.0, 1.0), 3),  # trained: fills the batch
        _zero(4),  # surplus: all pass
    ]
    remaining = 6
    outcomes = []
    for j in judgements:
        outcomes.append(acc.judge(j, step=0, remaining=remaining))
        remaining -= outcomes[-1].startswith("dropped")
    assert outcomes == ["dropped_zero_std", "dropped_zero_std", "dropped_technical", "dropped_zero_std",
                        "fallback", "trained", "surplus"]
    rec = step_draft(acc.close_step()).finish()
    assert (rec.zero_std_all_pass_group_count, rec.zero_std_all_fail_group_count,
            rec.zero_std_other_group_count) == (2, 2, 1)
    assert rec.zero_std_group_count == 5 and rec.zero_std_group_drop_count == 3
    sink = JsonlSink(tmp_path / "steps.jsonl")
    sink.emit(rec)
    sink.close()
    (back,) = read_steps(tmp_path / "steps.jsonl")
    assert back.zero_std_all_fail_group_count == 2 and back == rec
