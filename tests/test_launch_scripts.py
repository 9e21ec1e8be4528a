"""The example launch scripts and YAML carry the documented defaults and the three hook paths."""

from __future__ import annotations

import importlib
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from shopsim_metrics.settings import DEFAULTS
from tests.docs_pages import section

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"

HOOKS = {
    "--dynamic-sampling-filter-path": "shopsimrl.slime_runtime.fully_scored_group_filter",
    "--rollout-all-samples-process-path": "shopsimrl.slime_runtime.record_all_samples",
    "--custom-rollout-log-function-path": "shopsimrl.slime_runtime.log_rollout_step",
    "--rollout-sample-hook-path": "shopsimrl.slime_runtime.record_generated_sample",
}
KNOB_FLAGS = {
    "rollout_batch_size": "--rollout-batch-size",
    "n_samples_per_prompt": "--n-samples-per-prompt",
    "over_sampling_batch_size": "--over-sampling-batch-size",
    "global_batch_size": "--global-batch-size",
}


def script_env(**env: str) -> dict[str, str]:
    """A clean environment for a launch script; its config check runs with this test's Python."""
    return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "SHOPSIM_PYTHON": sys.executable,
            "SAVE_DIR": env.pop("SAVE_DIR", "/tmp/shopsim-launch-test-save"), **env}


def dry_run(script: str, **env: str) -> dict[str, str | None]:
    """The slime command a script would run, as ``{flag: value or None}`` (DRY_RUN=1, clean environment)."""
    out = subprocess.run(["bash", str(EXAMPLES / script)], capture_output=True, text=True,
                         env=script_env(DRY_RUN="1", **env), check=True)
    argv = shlex.split(out.stdout)
    assert argv[0] == "python3" and argv[1].endswith("train.py"), argv[:2]
    flags: dict[str, str | None] = {}
    for i, token in enumerate(argv[2:], start=2):
        if token.startswith("--"):
            nxt = argv[i + 1] if i + 1 < len(argv) else None
            flags[token] = None if nxt is None or nxt.startswith("--") else nxt
    return flags


def knob_table(text: str) -> dict[str, int]:
    """The ``| knob | default | meaning |`` table of a document, as ``{knob: default}``."""
    rows = re.findall(r"^\|\s*`(\w+)`\s*\|\s*(\d+)\s*\|", text, flags=re.M)
    return {k: int(v) for k, v in rows if k in KNOB_FLAGS}


def test_docs_knob_table_has_every_knob() -> None:
    assert set(knob_table(section("2.1").body)) == set(KNOB_FLAGS)


def test_run_full_train_uses_the_documented_defaults() -> None:
    flags = dry_run("run_full_train.sh")
    documented = knob_table(section("2.1").body)
    assert {knob: int(flags[flag]) for knob, flag in KNOB_FLAGS.items()} == documented
    assert documented == {"rollout_batch_size": 16, "n_samples_per_prompt": 8, "over_sampling_batch_size": 32,
                          "global_batch_size": 64}


@pytest.mark.parametrize("script", ["run_full_train.sh", "run_shopsimrl_slime.sh"])
def test_scripts_wire_the_three_hooks_and_the_yaml(script: str) -> None:
    flags = dry_run(script)
    for flag, path in HOOKS.items():
        assert flags[flag] == path
        module, _, name = path.rpartition(".")
        assert callable(getattr(importlib.import_module(module), name)), path
    config = Path(flags["--custom-config-path"])
    assert config == EXAMPLES / "shopsim.yaml" and config.exists()
    assert "--use-wandb" in flags


def test_run_shopsimrl_slime_over_sampling_defaults_to_rollout_batch_size() -> None:
    text = (EXAMPLES / "run_shopsimrl_slime.sh").read_text()
    assert '--over-sampling-batch-size "${OVER_SAMPLING_BATCH_SIZE:-$ROLLOUT_BATCH_SIZE}"' in text
    alone = dry_run("run_shopsimrl_slime.sh")
    assert alone["--over-sampling-batch-size"] == alone["--rollout-batch-size"] == "16"
    assert dry_run("run_shopsimrl_slime.sh", ROLLOUT_BATCH_SIZE="24")["--over-sampling-batch-size"] == "24"
    assert dry_run("run_shopsimrl_slime.sh", OVER_SAMPLING_BATCH_SIZE="48")["--over-sampling-batch-size"] == "48"


def test_knobs_can_be_overridden_from_the_environment() -> None:
    flags = dry_run("run_full_train.sh", ROLLOUT_BATCH_SIZE="32", OVER_SAMPLING_BATCH_SIZE="64")
    assert (flags["--rollout-batch-size"], flags["--over-sampling-batch-size"]) == ("32", "64")


@pytest.mark.parametrize("script", ["run_full_train.sh", "run_shopsimrl_slime.sh"])
def test_scripts_are_valid_bash_and_executable(script: str) -> None:
    path = EXAMPLES / script
    subprocess.run(["bash", "-n", str(path)], check=True)
    assert os.access(path, os.X_OK)


def test_example_yaml_lists_every_setting_at_its_default() -> None:
    loaded = yaml.safe_load((EXAMPLES / "shopsim.yaml").read_text())
    assert loaded == DEFAULTS


# --- the scripts check the config before anything starts -------------------------------------------------
BAD_CONFIG = "shopsim_wandb: loud\nshopsim_max_consecutive_failed_group: 4\n"


def fake_slime(tmp_path: Path) -> Path:
    """A slime checkout whose train.py only leaves a mark that it ran."""
    slime = tmp_path / "slime"
    slime.mkdir()
    (slime / "train.py").write_text(f"open({str(tmp_path / 'trained')!r}, 'w').close()\n")
    return slime


@pytest.mark.parametrize("script", ["run_full_train.sh", "run_shopsimrl_slime.sh"])
@pytest.mark.parametrize("dry", ["1", "0"])
def test_a_bad_config_stops_the_script_before_anything_starts(tmp_path: Path, script: str, dry: str) -> None:
    config = tmp_path / "shopsim.yaml"
    config.write_text(BAD_CONFIG)
    result = subprocess.run(["bash", str(EXAMPLES / script)], capture_output=True, text=True, env=script_env(
        DRY_RUN=dry, SHOPSIM_CONFIG=str(config), SLIME_DIR=str(fake_slime(tmp_path))))
    assert result.returncode == 2
    assert result.stdout == ""  # no command printed under DRY_RUN
    assert not (tmp_path / "trained").exists()  # and none run without it
    problems = [line for line in result.stderr.splitlines() if ": error: " in line]
    prefix = f"shopsim-metrics preflight: error: --custom-config-path: {config}: "
    assert len(problems) == 2 and all(p.startswith(prefix) for p in problems), result.stderr
    assert any("did you mean 'shopsim_max_consecutive_failed_groups'?" in p for p in problems)


@pytest.mark.parametrize("script", ["run_full_train.sh", "run_shopsimrl_slime.sh"])
def test_a_clean_config_is_checked_then_the_run_starts(tmp_path: Path, script: str) -> None:
    config = tmp_path / "shopsim.yaml"
    config.write_text("shopsim_wandb: off\nshopsim_alert_warn_fraction: 5e-1\n")  # YAML 1.1 traps, both fine
    result = subprocess.run(["bash", str(EXAMPLES / script)], capture_output=True, text=True, env=script_env(
        DRY_RUN="0", SHOPSIM_CONFIG=str(config), SLIME_DIR=str(fake_slime(tmp_path))))
    assert result.returncode == 0, result.stderr
    assert result.stderr.startswith("shopsim-metrics preflight: OK"), result.stderr
    assert f"--custom-config-path {config}" in result.stderr
    assert (tmp_path / "trained").exists()


def test_the_dry_run_checks_the_example_config_first() -> None:
    result = subprocess.run(["bash", str(EXAMPLES / "run_full_train.sh")], capture_output=True, text=True,
                            env=script_env(DRY_RUN="1"), check=True)
    assert result.stderr.startswith("shopsim-metrics preflight: OK"), result.stderr
    assert f"--custom-config-path {EXAMPLES / 'shopsim.yaml'}" in result.stderr


def test_the_ray_job_submits_train_py_with_the_records_in_the_runtime_env(tmp_path: Path) -> None:
    import json

    out = subprocess.run(["bash", str(EXAMPLES / "run_ray_job.sh")], capture_output=True, text=True, check=True,
                         env=script_env(DRY_RUN="1", SAVE_DIR=str(tmp_path / "shared"), RAY_ADDRESS="http://head:8265"))
    argv = shlex.split(out.stdout)
    assert argv[:5] == ["ray", "job", "submit", "--address", "http://head:8265"]
    runtime_env = json.loads(argv[argv.index("--runtime-env-json") + 1])
    assert runtime_env["env_vars"]["SHOPSIM_RUN_DIR"] == str(tmp_path / "shared" / "shopsim")
    rest = argv[argv.index("--") + 1:]
    assert rest[0] == "python3" and rest[1].endswith("train.py")
    assert "--disable-wandb-random-suffix" in rest
    assert out.stderr.startswith("shopsim-metrics preflight: OK")


def test_without_the_package_the_dry_run_says_so_in_one_line(tmp_path: Path) -> None:
    bare = tmp_path / "bare-python"
    bare.write_text("#!/bin/sh\nexit 1\n")  # a Python without the package: every import fails
    bare.chmod(0o755)
    result = subprocess.run(["bash", str(EXAMPLES / "run_full_train.sh")], capture_output=True, text=True,
                            env=script_env(DRY_RUN="1", SHOPSIM_PYTHON=str(bare)), cwd=tmp_path)
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.strip().splitlines() == [
        f"shopsim-metrics is not installed for {bare}: pip install the project (pip install -e .), or set "
        "SHOPSIM_PYTHON to a Python that has it"]


def test_the_docs_launch_snippet_checks_an_absolute_config_path_first() -> None:
    """§1.2's command runs in slime's checkout: a relative YAML path would not exist there."""
    snippet = re.search(r"```bash\n(.*?)```", section("1.2").body, flags=re.S).group(1)
    (config,) = re.findall(r"--custom-config-path (\S+)", snippet)
    assert Path(config).is_absolute()
    assert snippet.index(f"check-config {config}") < snippet.index("train.py")
