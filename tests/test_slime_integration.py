"""slime's own plugin contract tests and slime's real rollout loop, against the project's hooks.

Skipped unless ``SLIME_SRC`` points to a slime checkout (slime is not on the package index; nothing
of it is committed here). slime's imports need the ``slime-checks`` extra: torch, pillow, aiohttp and pylatexenc.
"""

from __future__ import annotations

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


def test_slimes_real_loop_matches_the_records(tmp_path):
    run_dir = tmp_path / "run"
    result = subprocess.run(
        [sys.executable, str(ROOT / "tests" / "slime_real_loop_check.py"), str(run_dir)],
        env=_env(tmp_path), capture_output=True, text=True, timeout=600,
    )
    assert result.returncode == 0, result.stderr[-4000:]
    steps = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
    assert [s["step"] for s in steps] == [0, 1, 2]
    for step in steps:
        rec = step["record"]
        ours = sorted(d["group_index"] for d in rec["decisions"] if d["outcome"] in ("trained", "fallback"))
        assert ours == step["slime_train_groups"]
        assert rec["reconcile_mismatch_count"] == 0
        assert rec["loop_state_source"] == "slime" and rec["rollout_id"] == step["step"]
        for reason, key in (("shopsim_unscored_technical_group", "technical_group_drop_count"),
                            ("shopsim_zero_std_group", "zero_std_group_drop_count")):
            assert step["slime_metrics"].get(f"rollout/dynamic_filter/drop_{reason}", 0) == rec[key]
        assert rec["train_group_count"] == 16
        assert rec["accepted_group_count"] == rec["all_samples_group_count"]
        assert rec["submitted_group_count"] == rec["wave_count"] * 32
    assert steps[0]["record"]["wave_count"] == 2  # the scripted technical burst opened a second wave
