"""Reading offline W&B runs back: both readers agree, a torn log still yields its complete records."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from shopsim_metrics.record import contract
from shopsim_metrics.sinks.wandb_sink import WandbSink
from shopsim_metrics.readers.wandb_offline import find_run_dirs, find_wandb_file, read_offline_run
from tests.wandb_helpers import make_record, wandb_env  # noqa: F401 - fixture


@pytest.fixture
def offline_run(wandb_env: Path) -> Path:  # noqa: F811
    import wandb

    run = wandb.init(project="p", config={"rollout_batch_size": 16})
    sink = WandbSink(mode="join", table_every=2)
    for rid in range(40):  # enough rows to span several 32 KiB blocks of the log
        sink.emit(make_record(rid))
    run.finish()
    (run_dir,) = find_run_dirs(wandb_env)
    return run_dir


def test_both_readers_agree(offline_run: Path) -> None:
    leet, direct = read_offline_run(offline_run), read_offline_run(offline_run, prefer_leet=False)
    assert leet.reader == "leet" and direct.reader == "transaction-log"
    for name in ("history", "summary", "alerts", "config", "metrics", "run_id", "project", "exit_code"):
        assert getattr(leet, name) == getattr(direct, name), name
    assert direct.config == {"rollout_batch_size": 16}
    assert find_wandb_file(offline_run).stat().st_size > 2 * 32768
    steps = [row[contract.WANDB_STEP_KEY] for row in direct.history if contract.WANDB_STEP_KEY in row]
    assert steps == list(range(40))
    assert [t.row[contract.WANDB_STEP_KEY] for t in direct.tables["rollout/shopsim/decisions"]] == list(range(0, 40, 2))


def test_torn_log_yields_its_complete_prefix(offline_run: Path, tmp_path: Path) -> None:
    torn = tmp_path / offline_run.name
    shutil.copytree(offline_run, torn)
    log = find_wandb_file(torn)
    data = log.read_bytes()
    log.write_bytes(data[: len(data) // 2])
    run = read_offline_run(torn, prefer_leet=False)
    steps = [row[contract.WANDB_STEP_KEY] for row in run.history if contract.WANDB_STEP_KEY in row]
    assert 0 < len(steps) < 40 and steps == list(range(len(steps)))


def test_not_a_run_dir_says_what_was_expected(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="offline-run"):
        read_offline_run(tmp_path)
    (tmp_path / "run-x.wandb").write_bytes(b"garbage")
    with pytest.raises(ValueError, match="not a W&B transaction log"):
        read_offline_run(tmp_path, prefer_leet=False)


# --- path safety: a crafted run directory never makes the reader open a file outside it ------------


def _table_history(path: str, step: int = 3) -> list[dict]:
    key = "rollout/shopsim/decisions"
    item = {f"{key}._type": "table-file", f"{key}.path": path, "rollout/step": step, "_step": step}
    return [{"type": "history", "history": {"item": item}}]


def _table_json(rows: int) -> str:
    import json

    return json.dumps({"columns": ["order", "outcome"], "data": [[k + 1, "trained"] for k in range(rows)]})


def test_table_paths_outside_the_run_directory_are_refused(tmp_path, caplog) -> None:
    import logging

    from shopsim_metrics.readers.wandb_offline import _assemble

    secret = tmp_path / "secret.json"
    secret.write_text(_table_json(5))
    run_dir = tmp_path / "wandb" / "offline-run-1"
    (run_dir / "files" / "media" / "table").mkdir(parents=True)
    (run_dir / "files" / "media" / "table" / "ok.json").write_text(_table_json(2))
    (run_dir / "files" / "media" / "table" / "link.json").symlink_to(secret)
    hostile = ["../../../secret.json", str(secret), "media/table/link.json", "media/../../../secret.json"]
    for path in hostile:
        with caplog.at_level(logging.WARNING, logger="shopsim_metrics"):
            run = _assemble(_table_history(path), run_dir)
        (table,) = run.tables["rollout/shopsim/decisions"]
        assert table.data == [] and table.columns == [], path
        assert "outside the run directory" in caplog.text, path
        caplog.clear()
    # control: a table inside the run directory is read
    (table,) = _assemble(_table_history("media/table/ok.json"), run_dir).tables["rollout/shopsim/decisions"]
    assert len(table.data) == 2 and table.columns == ["order", "outcome"]


def test_a_transaction_log_linked_from_outside_is_not_read(tmp_path) -> None:
    from shopsim_metrics.readers.wandb_offline import find_wandb_file

    outside = tmp_path / "elsewhere.wandb"
    outside.write_bytes(b":W&B")
    run_dir = tmp_path / "offline-run-1"
    run_dir.mkdir()
    (run_dir / "run-abc.wandb").symlink_to(outside)
    with pytest.raises(FileNotFoundError, match="no .wandb transaction log"):
        find_wandb_file(run_dir)
