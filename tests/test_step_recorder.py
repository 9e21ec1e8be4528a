"""The step record has one assembler: the recorder builds each record from the closed step and the hooks' facts."""

from __future__ import annotations

import ast
import logging
from pathlib import Path

from hypothesis import given, settings as hsettings, strategies as st

from shopsim_metrics.judging.group_judgement import GroupJudgement
from shopsim_metrics.sinks import MemorySink
from shopsim_metrics.step.accounting import StepAccountant
from shopsim_metrics.health.alerts import Alert, StreakAlertPolicy
from shopsim_metrics.step.closed_step import ClosedStep, StepKnobs, closed_step_fields
from shopsim_metrics.step.recorder import SlimeFacts, StepRecorder

ROOT = Path(__file__).resolve().parents[1]
KINDS = {"spread": ("spread", (0.0, 1.0), 1), "zero_std": ("zero_std", (0.0, 0.0), 0),
         "technical": ("technical", (), 0)}


def _judgement(kind: str, index: int) -> GroupJudgement:
    name, rewards, successes = KINDS[kind]
    return GroupJudgement(name, "status_failed" if kind == "technical" else None, index, 2, rewards, successes)


def _closed_steps(steps: list[list[str]]) -> list[ClosedStep]:
    """The accountant's closed steps for ``steps`` (each a list of judged kinds), remaining from the mirror."""
    accountant = StepAccountant(StepKnobs(rollout_batch_size=2, over_sampling_batch_size=4, n_samples_per_prompt=2))
    for step, kinds in enumerate(steps):
        for index, kind in enumerate(kinds):
            accountant.judge(_judgement(kind, index), step=step, remaining=None)
        accountant.close_step()
    return accountant.take_closed()


def _recorder(mem: MemorySink, **kwargs) -> StepRecorder:
    return StepRecorder(lambda: mem, alerts=StreakAlertPolicy(max_consecutive_failed_groups=8),
                        identity={"run_id": "run-1"}, num_rollout=None, **kwargs)


step_kinds = st.lists(st.lists(st.sampled_from(sorted(KINDS)), min_size=1, max_size=6), min_size=1, max_size=5)


@hsettings(max_examples=60, deadline=None)
@given(steps=step_kinds, slime_step=st.integers(0, 5), seconds=st.floats(0.5, 100.0))
def test_each_record_holds_its_closed_steps_fields_and_slime_facts_only_for_slimes_step(steps, slime_step,
                                                                                        seconds) -> None:
    closed = _closed_steps(steps)
    expected = [closed_step_fields(c) for c in closed]
    mem = MemorySink()
    records = _recorder(mem).record(closed, SlimeFacts(slime_step, {}, seconds))
    assert records == mem.records and [r.rollout_id for r in records] == list(range(len(steps)))
    for record, fields in zip(records, expected):
        for name in ("accepted_group_count", "train_group_count", "zero_std_group_drop_count",
                     "technical_group_drop_count", "surplus_group_count", "wave_count", "success_rate"):
            assert getattr(record, name) == fields[name]
        assert (record.rollout_seconds == seconds) == (record.rollout_id == slime_step)
        assert (record.reconcile_mismatch_count is None) == (record.rollout_id != slime_step)
    assert [r.record_sequence for r in records] == list(range(1, len(steps) + 1))
    assert {r.run_id for r in records} == {"run-1"}


def test_a_failing_contributor_costs_the_record_only_its_own_fields(caplog) -> None:
    class Broken:
        def step_fields(self, decisions):
            raise KeyError("skips")

    mem = MemorySink()
    recorder = _recorder(mem)
    recorder.attach_skipping(Broken())
    closed = _closed_steps([["spread", "zero_std", "spread"], ["spread", "spread"]])
    with caplog.at_level(logging.WARNING, logger="shopsim_metrics"):
        recorder.record(closed)
    assert [r.rollout_id for r in mem.records] == [0, 1]
    assert [r.train_group_count for r in mem.records] == [2, 2]  # the closed step's part is kept
    assert [r.skipped_prompt_count for r in mem.records] == [None, None]
    assert sum("recording the skipped prompts failed" in m for m in caplog.messages) == 1  # once, not per step


def test_an_alert_is_carried_once_by_the_first_record_of_its_step_or_later() -> None:
    mem = MemorySink()
    recorder = _recorder(mem)
    recorder.send_alert(Alert(level="WARN", title="t", text="for step 1", rollout_id=1))
    recorder.send_alert(Alert(level="WARN", title="t", text="no step", rollout_id=None))
    recorder.record(_closed_steps([["spread", "spread"], ["spread", "spread"], ["spread", "spread"]]))
    carried = [[a["text"] for a in r.alerts or []] for r in mem.records]
    assert carried == [["no step"], ["for step 1"], []]
    assert [a.text for a in mem.alerts] == ["for step 1", "no step"]


def test_the_final_prompt_table_goes_out_once() -> None:
    class Tracker:
        history = [1, 2]

        def table(self):
            return [["p", 1]]

    class TableSink(MemorySink):
        def __init__(self) -> None:
            super().__init__()
            self.prompt_tables: list = []

        def prompt_table(self, rows, rollout_id) -> None:
            self.prompt_tables.append((rows, rollout_id))

    mem = TableSink()
    recorder = StepRecorder(lambda: mem, alerts=StreakAlertPolicy(max_consecutive_failed_groups=8),
                            identity={}, num_rollout=2, prompts=Tracker())
    recorder.record(_closed_steps([["spread", "spread"], ["spread", "spread"]]))
    assert [r.prompt_table for r in mem.records] == [None, [["p", 1]]]  # the last step (num_rollout - 1) carries it
    recorder.final_prompt_table(1)
    assert mem.prompt_tables == []  # already carried: not again at exit
    unscheduled = TableSink()
    recorder = StepRecorder(lambda: unscheduled, alerts=StreakAlertPolicy(max_consecutive_failed_groups=8),
                            identity={}, num_rollout=None, prompts=Tracker())
    recorder.record(_closed_steps([["spread", "spread"]]))
    recorder.final_prompt_table(0)
    assert unscheduled.prompt_tables == [([["p", 1]], 0)]  # no last step known: the table goes out at exit


def test_only_the_recorder_builds_records() -> None:
    """An AST scan of both packages: ``StepDraft(...)`` and ``draft.finish(...)`` appear only in the closed step's
    draft and the recorder (the one assembler)."""
    builders = set()
    for package in (ROOT / "shopsim_metrics", ROOT / "filter"):
        for path in sorted(package.rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            for node in ast.walk(ast.parse(path.read_text(), filename=rel)):
                if isinstance(node, ast.Call):
                    name = ast.unparse(node.func)
                    if name == "StepDraft" or (name.endswith(".finish") and "draft" in name.lower()):
                        builders.add(rel)
    assert builders == {"shopsim_metrics/step/closed_step.py", "shopsim_metrics/step/recorder.py"}
