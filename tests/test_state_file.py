"""State files written beside slime's checkpoint: nothing planted beside them is followed."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from shopsim_metrics.state_file import read_json_object, write_json


def _planted_temporaries(path: Path, target: Path, pids: range) -> None:
    """Links at every temporary name of the old scheme (``.{name}.{pid}.tmp``) for the given pids."""
    for pid in pids:
        path.with_name(f".{path.name}.{pid}.tmp").symlink_to(target)


def test_a_link_planted_at_the_temporary_name_is_never_written_through(tmp_path: Path) -> None:
    target = tmp_path / "precious.txt"
    target.write_text("precious\n")
    path = tmp_path / "run" / "state.json"
    path.parent.mkdir()
    _planted_temporaries(path, target, range(os.getpid() - 2, os.getpid() + 3))
    write_json(path, {"format": 1})
    assert target.read_text() == "precious\n"
    assert not path.is_symlink() and path.is_file()
    assert read_json_object(path, what="a state", remedy="delete it") == {"format": 1}
    leftovers = {p.name for p in path.parent.iterdir()} - {path.name}
    assert all(path.with_name(name).is_symlink() for name in leftovers)  # only what was planted


def test_a_link_planted_at_the_state_file_itself_is_replaced_not_written_through(tmp_path: Path) -> None:
    target = tmp_path / "precious.txt"
    target.write_text("precious\n")
    path = tmp_path / "state.json"
    path.symlink_to(target)
    write_json(path, {"a": [1, 2]})
    assert target.read_text() == "precious\n"
    assert not path.is_symlink()
    assert read_json_object(path, what="a state", remedy="delete it") == {"a": [1, 2]}


def test_a_failed_write_leaves_the_old_state_and_no_temporary(tmp_path: Path) -> None:
    path = tmp_path / "state.json"
    write_json(path, {"step": 1})
    with pytest.raises(ValueError):
        write_json(path, {"step": float("nan")})  # refused by allow_nan=False mid-write
    assert read_json_object(path, what="a state", remedy="delete it") == {"step": 1}
    assert [p.name for p in tmp_path.iterdir()] == ["state.json"]


def test_the_state_file_takes_the_mode_a_plain_open_would_give(tmp_path: Path) -> None:
    path = tmp_path / "state.json"
    plain = tmp_path / "plain.json"
    plain.write_text("{}")
    write_json(path, {})
    assert path.stat().st_mode & 0o777 == plain.stat().st_mode & 0o777
