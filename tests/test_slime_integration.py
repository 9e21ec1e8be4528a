"""slime's own plugin contract tests and slime's real rollout loop, against the project's hooks.

Skipped unless ``SLIME_SRC`` points to a slime checkout (slime is not on the package index; nothing
of it is committed here). slime's imports need the ``slime-checks`` extra: torch, pillow, aiohttp and pylatexenc.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

SLIME_SRC = os.environ.get("SLIME_SRC")
ROOT = Path(__file__).resolve().parents[1]
pytestmark = [
    pytest.mark.slime,
    pytest.mark.skipif(not SLIME_SRC, reason="set SLIME_SRC to a slime checkout to run slime's own checks"),
]

HOOKS = {
    "SLIME_CONTRACT_DYNAMIC_SAMPLING_FILTER_PATH": "shopsimrl.slime_runtime.fully_scored_group_filter",
    "SLIME_CONTRACT_ROLLOUT_ALL_SAMPLES_PROCESS_PATH": "shopsimrl.slime_runtime.record_all_samples",
    "SLIME_CONTRACT_CUSTOM_ROLLOUT_LOG_FUNCTION_PATH": "shopsimrl.slime_runtime.log_rollout_step",
}


def _env(tmp_path) -> dict:
    env = dict(os.environ, **HOOKS)
    env["PYTHONPATH"] = SLIME_SRC  # slime itself is not installed: its checkout is the import root
    env["SHOPSIM_RUN_DIR"] = str(tmp_path / "contract_run")
    return env


@pytest.mark.parametrize(
    "contract_file", ["test_plugin_path_loading_contracts.py", "test_plugin_runtime_hook_contracts.py"]
)
def test_slimes_plugin_contract_tests_pass_on_our_hooks(tmp_path, contract_file):
    path = Path(SLIME_SRC) / "tests" / "plugin_contracts" / contract_file
    result = subprocess.run(
        [sys.executable, "-m", "pytest", str(path), "-q", "-p", "no:cacheprovider", "-o", "addopts="],
        cwd=SLIME_SRC, env=_env(tmp_path), capture_output=True, text=True, timeout=600,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert " passed" in result.stdout and "failed" not in result.stdout


def _expected(truth: list[list[list]]) -> dict:
    """success_rate / reward_mean over the scorable rollouts of the given groups (the contract's rules)."""
    rewards = [reward for group in truth for scorable, reward, _ in group if scorable]
    successes = sum(1 for group in truth for scorable, _, success in group if scorable and success)
    return {"rate": successes / len(rewards) if rewards else None,
            "mean": sum(rewards) / len(rewards) if rewards else None}


def _expected_row(truth: list[list]) -> dict:
    rewards = [reward for scorable, reward, _ in truth if scorable]
    technical = len(rewards) < len(truth)
    return {
        "reason": ("shopsim_unscored_technical_group" if technical else
                   "shopsim_zero_std_group" if max(rewards) - min(rewards) <= 1e-6 else None),
        "unique_rollouts": len(truth),
        "reward_min": min(rewards) if rewards else None,
        "reward_max": max(rewards) if rewards else None,
        "reward_mean": sum(rewards) / len(rewards) if rewards else None,
        "success_count": sum(1 for scorable, _, success in truth if scorable and success) if rewards else None,
    }


def test_slimes_real_loop_matches_the_records(tmp_path):
    """Random multi-step runs through slime's own loop: every number of the records is slime's, or
    follows from the scripted truth of each rollout (failed, aborted, None, NaN, missing key,
    conflicting segments, flags, fan-out, dict rewards) by the contract's rules."""
    run_dir = tmp_path / "run"
    result = subprocess.run(
        [sys.executable, str(ROOT / "tests" / "slime_real_loop_check.py"), str(run_dir)],
        env=_env(tmp_path), capture_output=True, text=True, timeout=900,
    )
    assert result.returncode == 0, result.stderr[-4000:]
    steps = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
    assert [(s["run"], s["step"]) for s in steps] == [(0, 0), (0, 1), (0, 2), (1, 0), (1, 1), (1, 2),
                                                      (2, 0), (2, 1), (2, 2), (2, 3), (3, 0), (3, 1), (3, 2)]
    seen_checks = set()
    for step in steps:
        rec = step["record"]
        rows = rec["decisions"]
        train = step["slime_train_groups"]
        # slime's own results
        assert sorted(d["group_index"] for d in rows if d["outcome"] in ("trained", "fallback")) == train
        assert sorted(d["group_index"] for d in rows) == step["slime_all_groups"]
        assert rec["reconcile_mismatch_count"] == 0
        assert rec["loop_state_source"] == "slime" and rec["rollout_id"] == step["step"]
        for reason, key in (("shopsim_unscored_technical_group", "technical_group_drop_count"),
                            ("shopsim_zero_std_group", "zero_std_group_drop_count")):
            assert step["slime_metrics"].get(f"rollout/dynamic_filter/drop_{reason}", 0) == rec[key]
        assert rec["train_group_count"] == 16
        assert rec["accepted_group_count"] == rec["all_samples_group_count"] == len(step["slime_all_groups"])
        assert rec["submitted_group_count"] == rec["wave_count"] * 32
        # every ledger row, technical ones included, from the truth of its rollouts
        truth = step["truth"]
        for row in rows:
            expected = _expected_row(truth[str(row["group_index"])])
            assert {key: row[key] for key in expected} == expected, row
            assert (row["failed_check"] is not None) == (expected["reason"] == "shopsim_unscored_technical_group")
            seen_checks.add(row["failed_check"])
            if row["failed_check"] is not None:
                assert row["group_index"] not in train  # a technical group never trains
        everything = _expected(list(truth.values()))
        trained = _expected([truth[str(gid)] for gid in train])
        assert (rec["success_rate"], rec["reward_mean"]) == (everything["rate"], everything["mean"])
        assert (rec["train_success_rate"], rec["train_reward_mean"]) == (trained["rate"], trained["mean"])
        assert rec["scorable_rollout_count"] == sum(r[0] for group in truth.values() for r in group)
        _check_cost(step)
    assert steps[0]["record"]["wave_count"] == 2  # the scripted technical burst opened a second wave
    _check_prompt_value(steps)
    assert {"status_failed", "status_aborted", "reward_missing", "reward_not_finite", "segments_disagree",
            "metadata_unscored", "metadata_invalid", "reward_key_missing", "reward_not_numeric"} <= seen_checks


def _check_cost(step: dict) -> None:
    """Token fields from the scripted response lengths of every judged rollout; timing fields consistent."""
    rec = step["record"]
    tokens = {int(gid): sum(lengths) for gid, lengths in step["tokens"].items()}
    by_outcome: dict[str, int] = {}
    for row in rec["decisions"]:
        assert row["response_tokens"] == tokens[row["group_index"]], row
        by_outcome[row["outcome"]] = by_outcome.get(row["outcome"], 0) + row["response_tokens"]
    generated = sum(tokens.values())
    train = sum(tokens[gid] for gid in step["slime_train_groups"])
    assert rec["generated_token_count"] == generated
    assert rec["train_token_count"] == train
    for outcome in ("trained", "fallback", "dropped_technical", "dropped_zero_std", "surplus"):
        assert rec[f"{outcome}_token_count"] == by_outcome.get(outcome, 0), outcome
    assert rec["wasted_token_fraction"] == pytest.approx(1 - train / generated)
    assert rec["rollout_seconds"] == step["rollout_time"]
    assert rec["filter_seconds"] >= 0
    span = max(row["judged_at"] for row in rec["decisions"])
    assert min(row["judged_at"] for row in rec["decisions"]) == 0
    assert 0 <= rec["first_wave_fill_seconds"] <= span
    assert (rec["extra_wave_seconds"] == 0) == (rec["wave_count"] == 1)


def _check_prompt_value(steps: list[dict]) -> None:
    """Prompt keys (metadata uid when present, else blake2b of the canonical JSON of [prompt, label]) and
    the prompt-value fields, recomputed from each run's ledger rows."""
    from shopsim_metrics.record.records import StepRecord
    from tests.test_prompt_value import reference_fields

    kinds = set()
    for step in steps:
        for row in step["record"]["decisions"]:
            kind, prompt, label, metadata = step["prompts"][str(row["group_index"])]
            kinds.add(kind)
            if kind == "metadata":
                expected = metadata["uid"]
            else:
                text = json.dumps([prompt, label], sort_keys=True, separators=(",", ":"), ensure_ascii=False)
                expected = "b2:" + hashlib.blake2b(text.encode(), digest_size=8).hexdigest()[:15]
            assert row["prompt_key"] == expected
        assert step["record"]["prompt_key_source"] == "mixed"
    assert kinds == {"metadata", "text", "chat"}
    for run in sorted({s["run"] for s in steps}):  # each run starts a fresh runtime, so a fresh history
        records = [StepRecord.from_dict(s["record"]) for s in steps if s["run"] == run]
        for rec, expected in zip(records, reference_fields(records, limit=1_000_000)):
            assert {name: getattr(rec, name) for name in expected} == pytest.approx(expected), (run, rec.rollout_id)
        assert sum(r.revisit_group_count for r in records) > 0 and records[-1].tracked_prompt_count <= 40
