"""The monitor's resumable state is declared once (shopsim_metrics.run.state): the snapshot, its load and the
replay of the records iterate the registry, so what is saved is what is loaded and what is replayed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shopsim_metrics.prompts.skip_record import SkipTally
from shopsim_metrics.prompts.value import PromptValueTracker
from shopsim_metrics.run.resume import restore
from shopsim_metrics.run.snapshot import SNAPSHOT_FORMAT, build_snapshot, snapshot_path
from shopsim_metrics.run.state import SNAPSHOT_HEADER
from shopsim_metrics.run.state import ResumableState, monitor_state, prompt_settings
from shopsim_metrics.sinks import JsonlSink
from shopsim_metrics.state_file import write_json
from shopsim_metrics.health.advisories import Advisor
from shopsim_metrics.record.records import StepRecord
from shopsim_metrics.health.streak import TechnicalStreak
from shopsim_metrics.waves.wave_size import RecentOrders
from test_snapshot import record_of, steps


def pieces(*, prompts: bool = True, advisor: bool = True) -> dict[str, Any]:
    """Fresh pieces as the monitor keeps them (None: a piece this run does not keep)."""
    return dict(streak=TechnicalStreak(), prompts=PromptValueTracker(limit=6, forgetting=0.9) if prompts else None,
                skips=SkipTally(limit=4) if prompts else None, recent_orders=RecentOrders(window=3),
                advisor=Advisor() if advisor else None)


def states(of: dict[str, Any]) -> dict[str, Any]:
    return {name: piece.state_dict() for name, piece in of.items() if piece is not None}


def fed(contents: list, **kept: bool) -> tuple[dict[str, Any], ResumableState]:
    """Pieces that replayed one record per item of ``contents`` (step 0, 1, ...)."""
    live = pieces(**kept)
    state = monitor_state(**live)
    for step, content in enumerate(contents):
        state.replay(record_of(step, 1, step + 1, content))
    return live, state


CONTENTS = [([("trained", 3, 1), ("dropped_technical", 0, 2)], [5]),  # two steps; p5 skipped, then generated
            ([("dropped_zero_std", 0, 1), ("dropped_technical", 0, 5)], [])]


# --- round trips ------------------------------------------------------------------------------
@settings(max_examples=80, deadline=None)
@given(contents=st.lists(steps, max_size=8), cut=st.integers(0, 8), prompts=st.booleans(), advisor=st.booleans())
def test_a_snapshot_loaded_and_the_steps_after_it_replayed_hold_what_replaying_every_step_holds(
        contents, cut, prompts, advisor) -> None:
    cut = min(cut, len(contents))
    live, state = fed(contents[:cut], prompts=prompts, advisor=advisor)
    saved = json.loads(json.dumps(state.state_dict(), allow_nan=False))  # as the file holds it
    resumed = pieces(prompts=prompts, advisor=advisor)
    resumed_state = monitor_state(**resumed)
    assert resumed_state.unusable(saved) is None
    resumed_state.load_state_dict(saved)
    assert states(resumed) == states(live)
    for step, content in enumerate(contents[cut:], start=cut):
        record = record_of(step, 1, step + 1, content)
        state.replay(record)
        resumed_state.replay(record)
    assert states(resumed) == states(live)
    assert resumed_state.state_dict() == state.state_dict()


def test_the_snapshot_of_every_piece_has_the_layout_older_versions_wrote(tmp_path: Path) -> None:
    """Format 1, byte for byte: the header (with the writer's other known processes since they were kept: a
    key an older version leaves aside), then each piece under the key it always had, then the records."""
    live, state = fed(CONTENTS)
    writer = {"process_started_at": 1.0, "process_start_rollout_id": 0}
    built = build_snapshot(state, rollout_id=1, run_id="run-1", missing=0, run_dir=tmp_path, writer=writer)
    as_written_before = {  # the snapshot builder of format 1, each piece named
        "kind": "shopsim-monitor-state", "format": 1, "rollout_id": 1, "run_id": "run-1", "writer": writer,
        "processes": [], "missing": 0, "streak": live["streak"].state_dict(), "prompt_settings": prompt_settings(live["prompts"]),
        "prompts": live["prompts"].state_dict(), "skips": live["skips"].state_dict(),
        "recent_orders": live["recent_orders"].state_dict(), "advisories": live["advisor"].state_dict(),
        "records": {}}
    assert SNAPSHOT_FORMAT == 1
    assert json.dumps(built, separators=(",", ":")) == json.dumps(as_written_before, separators=(",", ":"))


# --- what is registered is what is saved --------------------------------------------------------
def test_a_piece_the_run_does_not_keep_is_not_in_its_snapshot(tmp_path: Path) -> None:
    _, state = fed([([("trained", 3, 1)], [])], prompts=False, advisor=False)
    snapshot = build_snapshot(state, rollout_id=0, run_id=None, missing=0, run_dir=tmp_path)
    assert list(snapshot) == [*SNAPSHOT_HEADER[:-1], "streak", "prompt_settings", "recent_orders", "records"]
    assert snapshot["prompt_settings"] is None  # said, so a run with a prompt history does not take it
    assert "prompts" not in snapshot and "skips" not in snapshot and "advisories" not in snapshot


def test_a_saved_piece_the_run_does_not_keep_is_left_aside() -> None:
    """Alerts off in the resumed process: the advisories saved by one with alerts on are not loaded anywhere."""
    live, with_advisor = fed(CONTENTS, advisor=True)
    resumed = pieces(advisor=False)
    state = monitor_state(**resumed)
    saved = with_advisor.state_dict()
    assert state.unusable(saved) is None
    state.load_state_dict(saved)
    assert states(resumed) == {name: value for name, value in states(live).items() if name != "advisor"}


def test_a_snapshot_without_a_piece_the_run_keeps_is_not_used_unless_the_piece_is_optional() -> None:
    _, state = fed([([("trained", 3, 1)], [])], prompts=False, advisor=False)
    saved = state.state_dict()
    assert monitor_state(**pieces(prompts=True)).unusable(saved) == (
        "was taken with another prompt_settings (None against {'limit': 6, 'forgetting': 0.9, 'metadata_key': None})")
    assert monitor_state(**pieces(prompts=False, advisor=True)).unusable(saved) is None  # the advisor starts empty
    without_orders = {name: value for name, value in saved.items() if name != "recent_orders"}
    assert monitor_state(**pieces(prompts=False)).unusable(without_orders) == "holds no recent_orders"


class Recording:
    """A piece that notes the steps replayed into it."""

    def __init__(self) -> None:
        self.seen: list[int] = []

    def state_dict(self) -> dict[str, Any]:
        return {"seen": list(self.seen)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.seen = [int(step) for step in state["seen"]]

    def replay(self, record: StepRecord) -> None:
        self.seen.append(record.rollout_id)


def test_every_registered_piece_is_saved_loaded_and_replayed_in_registration_order() -> None:
    first, second = Recording(), Recording()
    state = ResumableState()
    state.register("first", first)
    state.require_setting("window", 3)
    state.register("second", second)
    for step in (0, 1):
        state.replay(StepRecord(rollout_id=step))
    saved = state.state_dict()
    assert list(saved.items()) == [("first", {"seen": [0, 1]}), ("window", 3), ("second", {"seen": [0, 1]})]
    copies = Recording(), Recording()
    other = ResumableState()
    other.register("first", copies[0])
    other.require_setting("window", 3)
    other.register("second", copies[1])
    other.load_state_dict(saved)
    assert [copy.seen for copy in copies] == [[0, 1], [0, 1]]


# --- declared once ------------------------------------------------------------------------------
def test_a_name_is_registered_once() -> None:
    state = ResumableState()
    state.register("streak", TechnicalStreak())
    with pytest.raises(ValueError, match="'streak' is registered already"):
        state.register("streak", TechnicalStreak())
    with pytest.raises(ValueError, match="'streak' is registered already"):
        state.require_setting("streak", 1)
    for header in SNAPSHOT_HEADER:
        with pytest.raises(ValueError, match=f"'{header}' is a snapshot header field"):
            state.register(header, TechnicalStreak())
    assert state.names == ("streak",)


def test_a_load_is_all_or_nothing() -> None:
    """A damaged piece after loaded ones: every piece keeps the state it had, and the error says why."""
    live, state = fed([([("dropped_technical", 0, 1), ("trained", 2, 3)], [4])])
    saved = state.state_dict()
    saved["advisories"] = {"window": ["x"], "quiet": {}}  # registered last: the others are loaded by then
    resumed = pieces()
    before = states(resumed)
    with pytest.raises(ValueError, match="advisor state"):
        monitor_state(**resumed).load_state_dict(saved)
    assert states(resumed) == before
    saved["advisories"] = ["not", "a", "state"]
    with pytest.raises(TypeError, match="advisories: a saved state is a JSON object, not list"):
        monitor_state(**resumed).load_state_dict(saved)
    assert states(resumed) == before


# --- older snapshots ----------------------------------------------------------------------------
def write_records(run: Path, contents: list) -> None:
    sink = JsonlSink(run)
    for step, content in enumerate(contents):
        sink.emit(record_of(step, 1, step + 1, content))
    sink.close()


def test_an_older_format_1_snapshot_is_read_as_it_always_was(tmp_path: Path) -> None:
    """Older versions wrote null for a piece not kept, the recent steps as counts under "rates", and no
    advisories: the streak and the counts load, the advisor starts empty, the prompts are left aside."""
    run, ckpt = tmp_path / "run", tmp_path / "ckpt"
    write_records(run, CONTENTS)
    positions = {"steps.jsonl": (run / "steps.jsonl").stat().st_size}
    write_json(snapshot_path(ckpt, 1), {
        "kind": "shopsim-monitor-state", "format": 1, "rollout_id": 1, "run_id": "run-1", "missing": 0,
        "streak": {"count": 1, "checks": {"status_failed": 1}}, "prompt_settings": None, "prompts": None,
        "skips": None, "rates": {"steps": [[1, 2], [1, 1, 2]]}, "records": positions})
    resumed = pieces(prompts=False)
    restored = restore(run, monitor_state(**resumed), start_rollout_id=2, snapshot_dir=ckpt)
    assert (restored.snapshot, restored.note, restored.missing) == (1, None, 0)
    assert resumed["streak"].checks == {"status_failed": 1}
    assert resumed["recent_orders"].state_dict() == {"orders": [[1, 0, 2], [1, 1, 2]]}
    assert resumed["advisor"].state_dict() == Advisor().state_dict()


def test_a_snapshot_of_another_format_is_refused_by_name_and_the_records_are_replayed(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    run, ckpt = tmp_path / "run", tmp_path / "ckpt"
    write_records(run, CONTENTS)
    live, state = fed(CONTENTS)
    snapshot = build_snapshot(state, rollout_id=1, run_id="run-1", missing=0, run_dir=run)
    write_json(snapshot_path(ckpt, 1), {**snapshot, "format": SNAPSHOT_FORMAT + 1, "streak": {"count": 99}})
    resumed = pieces()
    restored = restore(run, monitor_state(**resumed), start_rollout_id=2, snapshot_dir=ckpt)
    assert restored.snapshot is None and restored.steps == 2
    assert f"not a monitor snapshot of format {SNAPSHOT_FORMAT}" in restored.note
    assert str(snapshot_path(ckpt, 1)) in restored.note and "--load another checkpoint" in restored.note
    assert states(resumed) == states(live)  # replayed from the records


def test_a_snapshot_taken_with_other_prompt_settings_is_named_and_the_records_are_replayed(tmp_path: Path) -> None:
    run, ckpt = tmp_path / "run", tmp_path / "ckpt"
    write_records(run, CONTENTS)
    live, state = fed(CONTENTS)
    snapshot = build_snapshot(state, rollout_id=1, run_id="run-1", missing=0, run_dir=run)
    snapshot["prompt_settings"]["limit"] = 7
    write_json(snapshot_path(ckpt, 1), snapshot)
    resumed = pieces()
    restored = restore(run, monitor_state(**resumed), start_rollout_id=2, snapshot_dir=ckpt)
    assert restored.snapshot is None and restored.note.startswith(
        "the snapshot of step 1 was taken with another prompt_settings ({'limit': 7")
    assert states(resumed) == states(live)
