"""Test helpers for real W&B offline runs: an isolated, network-free wandb environment.

``wandb_env`` points every wandb directory (runs, data, cache, config) into a temp dir, forces
offline mode, silences wandb, hides any API key or netrc of the machine, and aims the base URL at a
closed local port so that nothing can reach the network. wandb's process-wide setup is torn down
before and after, so each test's directories are honoured; a run left open is finished.

Use it with ``from tests.wandb_helpers import wandb_env, make_record`` in a test module.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from shopsim_metrics.record import contract
from shopsim_metrics.record.records import DecisionRow, StepRecord


@pytest.fixture
def wandb_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An offline, isolated wandb environment rooted at ``tmp_path / "wb"``; yields that root."""
    root = tmp_path / "wb"
    for var, sub in (("WANDB_DIR", "dir"), ("WANDB_DATA_DIR", "data"), ("WANDB_CACHE_DIR", "cache"),
                     ("WANDB_CONFIG_DIR", "config"), ("WANDB_ARTIFACT_DIR", "artifacts")):
        (root / sub).mkdir(parents=True, exist_ok=True)
        monkeypatch.setenv(var, str(root / sub))
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    monkeypatch.setenv("WANDB_CONSOLE", "off")
    monkeypatch.setenv("WANDB_DISABLE_GIT", "true")
    monkeypatch.setenv("WANDB_BASE_URL", "http://127.0.0.1:9")  # nothing listens there
    monkeypatch.setenv("NETRC", str(root / "no-netrc"))
    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    _teardown()  # wandb reads its environment once per process setup: start from a fresh one
    yield root
    _teardown()


def _teardown() -> None:
    wandb = sys.modules.get("wandb")
    if wandb is None:
        return
    if getattr(wandb, "run", None) is not None:
        wandb.run.finish()
    wandb.teardown()


def make_rows(rollout_id: int, n: int = 3) -> list[DecisionRow]:
    """``n`` ledger rows with every outcome kind represented in turn."""
    rows = []
    for i in range(n):
        outcome = contract.OUTCOMES[i % len(contract.OUTCOMES)]
        technical = outcome == contract.OUTCOME_DROPPED_TECHNICAL
        rows.append(DecisionRow(
            order=i + 1, waves_open=1, group_index=100 * rollout_id + i, outcome=outcome,
            reason=contract.REASON_TECHNICAL if technical else None, remaining_before=32 - i,
            unique_rollouts=8, reward_min=None if technical else 0.0,
            reward_max=None if technical else 1.0, reward_mean=None if technical else 0.5,
            success_count=None if technical else 4,
            failed_check="status_failed" if technical else None,
        ))
    return rows


def make_record(rollout_id: int, **overrides) -> StepRecord:
    """A record where every W&B scalar has a distinct, non-None value depending on the step."""
    values = {}
    for i, name in enumerate(contract.WANDB_STEP_FIELDS):
        if name == "terminated":
            values[name] = False
        elif name in contract.RATIO_FIELDS:
            values[name] = round((i + 1) / 100 + rollout_id / 1000, 6)
        elif name == "optimizer_update_count":
            values[name] = 2.0
        else:
            values[name] = 10 * rollout_id + i
    values["wave_count"] = 1
    values["failed_check_counts"] = {"status_failed": rollout_id, "reward_missing": 1}
    values["episode_end_counts"] = {reason: rollout_id + i for i, reason in enumerate(contract.EPISODE_END_REASONS)}
    values["decisions"] = make_rows(rollout_id)
    values.update(overrides)
    return StepRecord(rollout_id=rollout_id, **values)
