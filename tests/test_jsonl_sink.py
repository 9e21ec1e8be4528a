"""The local record: steps.jsonl survives crashes, round-trips every field and never holds NaN."""

from __future__ import annotations

import json
import logging
import math
from dataclasses import fields
from pathlib import Path

import pytest
from hypothesis import given, settings as hsettings, strategies as st

from shopsim_metrics.record import contract
from shopsim_metrics.record.records import OPTIONAL_ROW_FIELDS, DecisionRow, StepRecord
from shopsim_metrics.sinks import JsonlSink
from shopsim_metrics.readers import read_steps
from tests.wandb_helpers import make_record


def _write(tmp_path: Path, n: int) -> Path:
    sink = JsonlSink(tmp_path)
    for rid in range(n):
        sink.emit(make_record(rid))
    return tmp_path / contract.STEPS_FILE_NAME


def test_each_step_is_one_flushed_line_with_the_contract_keys(tmp_path: Path) -> None:
    path = _write(tmp_path, 3)
    lines = path.read_text().splitlines()
    assert len(lines) == 3
    for rid, line in enumerate(lines):
        data = json.loads(line)
        assert data["rollout_id"] == rid
        assert set(contract.STEP_FIELDS) | set(contract.RECORD_IDENTITY_KEYS) <= set(data)
        assert isinstance(data["terminated"], bool)
        for row in data["decisions"]:
            assert set(contract.LEDGER_COLUMNS) - OPTIONAL_ROW_FIELDS <= set(row)


@pytest.mark.parametrize("torn", ['{"rollout_id": 3, "wave_co', "{", '{"rollout_id": 3, "decisions": [{"order"'])
def test_torn_last_line_is_skipped_with_one_warning(tmp_path: Path, caplog, torn: str) -> None:
    path = _write(tmp_path, 3)
    with open(path, "a") as fh:
        fh.write(torn)  # a crash in the middle of writing step 3
    with caplog.at_level(logging.WARNING, logger="shopsim_metrics"):
        records = read_steps(tmp_path)
    assert [r.rollout_id for r in records] == [0, 1, 2]
    assert records == [make_record(rid) for rid in range(3)], "earlier steps intact"
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "skipped 1 bad line" in warnings[0].getMessage()
    assert "first at line 4" in warnings[0].getMessage()


def test_a_torn_line_followed_by_more_records_is_skipped_and_the_rest_read(tmp_path: Path) -> None:
    path = _write(tmp_path, 2)
    with open(path, "a") as fh:
        fh.write('{"rollout_id": 2, "wave\n')
    JsonlSink(tmp_path).emit(make_record(3))
    assert [r.rollout_id for r in read_steps(path)] == [0, 1, 3]


def test_bad_middle_lines_are_skipped_and_counted_in_one_warning(tmp_path: Path, caplog) -> None:
    path = _write(tmp_path, 4)
    lines = path.read_text().splitlines()
    lines[1] = lines[1][:-5]
    lines[2] = "null"
    path.write_text("\n".join(lines) + "\n")
    with caplog.at_level(logging.WARNING, logger="shopsim_metrics"):
        assert [r.rollout_id for r in read_steps(path)] == [0, 3]
    skipped, gap = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert "skipped 2 bad lines" in skipped and "first at line 2" in skipped
    assert "rollout_id 1-2" in gap and "no record" in gap  # the steps those lines held are missing: said too


def test_the_latest_record_of_a_rollout_id_wins_and_the_superseded_are_counted(tmp_path: Path, caplog) -> None:
    sink = JsonlSink(tmp_path)
    for rid in (0, 1, 2, 1, 2, 3):  # resumed from the checkpoint of step 0
        sink.emit(make_record(rid) if rid != 2 else StepRecord(rollout_id=2, wave_count=len(caplog.records) + 7))
    sink.emit(StepRecord(rollout_id=2, wave_count=9))
    with caplog.at_level(logging.WARNING, logger="shopsim_metrics"):
        records = read_steps(tmp_path)
    assert [r.rollout_id for r in records] == [0, 1, 2, 3]
    assert records[2].wave_count == 9
    (warning,) = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert "3 earlier step record(s)" in warning


def test_missing_file_says_what_was_expected(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="steps.jsonl written by the JSONL sink"):
        read_steps(tmp_path)


def test_blank_lines_are_ignored(tmp_path: Path) -> None:
    path = _write(tmp_path, 2)
    path.write_text(path.read_text().replace("\n", "\n\n"))
    assert [r.rollout_id for r in read_steps(path)] == [0, 1]


def test_non_finite_values_are_written_as_null(tmp_path: Path) -> None:
    sink = JsonlSink(tmp_path)
    row = DecisionRow(order=1, waves_open=1, group_index=0, outcome="dropped_technical", reason=None,
                      remaining_before=32, unique_rollouts=8, reward_mean=math.nan)
    sink.emit(StepRecord(rollout_id=0, success_rate=math.inf, reward_mean=math.nan, decisions=[row]))
    text = (tmp_path / contract.STEPS_FILE_NAME).read_text()
    assert "NaN" not in text and "Infinity" not in text
    (back,) = read_steps(tmp_path)
    assert back.success_rate is None and back.reward_mean is None and back.decisions[0].reward_mean is None


# --- round trip of every field ----------------------------------------------------------------------
_opt_float = st.one_of(st.none(), st.floats(allow_nan=False, allow_infinity=False, width=64))
_opt_int = st.one_of(st.none(), st.integers(-(2**40), 2**40))
_text = st.one_of(st.none(), st.text(max_size=20))

_rows = st.builds(
    DecisionRow,
    order=st.integers(1, 10_000), waves_open=st.integers(1, 50), group_index=_opt_int,
    outcome=st.sampled_from(contract.OUTCOMES), reason=st.one_of(st.none(), st.sampled_from(contract.REASONS)),
    remaining_before=_opt_int, unique_rollouts=st.integers(0, 64), reward_min=_opt_float, reward_max=_opt_float,
    reward_mean=_opt_float, success_count=_opt_int,
    failed_check=st.one_of(st.none(), st.sampled_from(contract.FAILED_CHECKS)),
    scorable_rollouts=st.integers(0, 64), reward_sum=st.floats(allow_nan=False, allow_infinity=False),
    prompt_key=_text,
)


def _field_strategy(f) -> st.SearchStrategy:
    if f.name == "decisions":
        return st.lists(_rows, max_size=5)
    if f.name in ("failed_check_counts",):
        return st.dictionaries(st.sampled_from(contract.FAILED_CHECKS), st.integers(0, 100))
    if f.name == "slime_drop_counts":
        return st.one_of(st.none(), st.dictionaries(st.sampled_from(contract.REASONS), st.integers(0, 100)))
    if f.name == "terminated":
        return st.booleans()
    kind = str(f.type)
    if "float" in kind:
        return _opt_float
    if "str" in kind:
        return _text
    if "None" in kind:
        return _opt_int
    return st.integers(0, 2**40)


_records = st.fixed_dictionaries({f.name: _field_strategy(f) for f in fields(StepRecord)}).map(
    lambda kw: StepRecord(**kw))


@hsettings(max_examples=100, deadline=None)
@given(records=st.lists(_records, min_size=1, max_size=4, unique_by=lambda r: r.rollout_id))
def test_round_trip_of_every_field(tmp_path_factory, records: list[StepRecord]) -> None:
    run_dir = tmp_path_factory.mktemp("rt")
    sink = JsonlSink(run_dir, fsync=False)
    for rec in records:
        sink.emit(rec)
    # the records file's rules: the latest record wins (one per rollout_id here), and none that a
    # later process's resume superseded (docs §1.4, the run's lineage: processes by generation, then start)
    # and only the run's own: records of another run_id than the first one named are left out (docs §1.4)
    named = [rec.run_id for rec in records if isinstance(rec.run_id, str)]
    records = [rec for rec in records if rec.run_id is None or rec.run_id == named[0]]

    def place(rec: StepRecord) -> tuple:
        generation = rec.process_generation if rec.process_generation is not None and rec.process_generation >= 0 else 0
        return generation, rec.process_started_at if rec.process_started_at is not None else float("-inf")

    kept = {rec.rollout_id: rec for rec in records if not any(
        other.process_started_at is not None and place(other) > place(rec)
        and other.process_start_rollout_id is not None and 0 <= other.process_start_rollout_id <= rec.rollout_id
        for other in records)}
    assert read_steps(run_dir) == [kept[k] for k in sorted(kept)]
