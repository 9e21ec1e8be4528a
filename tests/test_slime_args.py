"""The custom-config YAML through slime's own ``parse_args`` and ``slime_validate_args``: every setting lands.

Skipped unless ``SLIME_SRC`` points to a slime checkout. Runs tests/slime_args_check.py in a
subprocess with the checkout on ``PYTHONPATH`` (slime is not installed; nothing of it is committed).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from shopsim_metrics.settings import DEFAULTS, SETTINGS, SKIP_RULE_SETTINGS

SLIME_SRC = os.environ.get("SLIME_SRC")
ROOT = Path(__file__).resolve().parents[1]
pytestmark = [
    pytest.mark.slime,
    pytest.mark.skipif(not SLIME_SRC, reason="set SLIME_SRC to a slime checkout to run slime's own checks"),
]
KNOB_FLAGS = ["--rollout-batch-size", "16", "--n-samples-per-prompt", "8", "--over-sampling-batch-size", "32",
              "--global-batch-size", "64"]

# every setting at a value other than its default, written as a user would (YAML 1.1 traps included),
# and the value the settings must read from it
NOT_DEFAULT = {
    "shopsim_max_consecutive_failed_groups": ("5", 5),
    "shopsim_success_threshold": ("5e-1", 0.5),  # YAML 1.1: a string
    "shopsim_success_metadata_key": ("env_success", "env_success"),
    "shopsim_unscored_metadata_key": ("env_unscored", "env_unscored"),
    "shopsim_run_dir": ("/shared/run/records", "/shared/run/records"),
    "shopsim_wandb": ("off", "off"),  # YAML 1.1: False
    "shopsim_wandb_project": ("my-project", "my-project"),
    "shopsim_wandb_init_timeout": ("5", 5.0),
    "shopsim_wandb_table_every": ("3", 3),
    "shopsim_alerts": ("no", False),  # YAML 1.1: False
    "shopsim_alert_warn_fraction": ("0.25", 0.25),
    "shopsim_alert_warn_level": ("info", "INFO"),
    "shopsim_alert_error_level": ("WARN", "WARN"),
    "shopsim_prompt_key": ("prompt_id", "prompt_id"),
    "shopsim_prompt_history_limit": ("1000", 1000),
    "shopsim_prompts_table_every": ("0", 0),
    "shopsim_prompt_skip": ("greso", "greso"),
    "shopsim_prompt_skip_target_share": ("0.3", 0.3),
    "shopsim_prompt_skip_easy_share_of_target": ("0.5", 0.5),
    "shopsim_prompt_skip_floor": ("2e-2", 0.02),  # YAML 1.1: a string
    "shopsim_prompt_skip_step": ("0.02", 0.02),
    "shopsim_prompt_skip_p_min": ("0.1", 0.1),
    "shopsim_prompt_skip_p_max": ("0.9", 0.9),
    "shopsim_prompt_skip_p_easy_start": ("0.4", 0.4),
    "shopsim_prompt_skip_p_hard_start": ("0.6", 0.6),
    "shopsim_prompt_skip_seed": ("5", 5),
    "shopsim_prompt_skip_threshold": ("0.6", 0.6),
    "shopsim_prompt_skip_forgetting": ("0.9", 0.9),
    "shopsim_prompt_skip_min_yield": ("0.2", 0.2),
    "shopsim_wave_size": ("Adaptive", "adaptive"),
    "shopsim_wave_fill_probability": ("0.9", 0.9),
    "shopsim_wave_size_cap": ("64", 64),
    "shopsim_async_zero_std_drop_limit": ("0", 0),
}


def landed(settings: dict, key: str) -> object:
    """Where ``ShopsimSettings`` keeps setting ``key`` (``asdict``): its field, or the skip rule's field."""
    if key in {s.name for s in SKIP_RULE_SETTINGS}:
        return settings["prompt_skip_rule"][key.removeprefix("shopsim_prompt_skip_")]
    return settings[key.removeprefix("shopsim_")]


def through_slime(tmp_path: Path, config: Path, *flags: str) -> dict:
    env = dict(os.environ, PYTHONPATH=SLIME_SRC)
    env.pop("SHOPSIM_RUN_DIR", None)
    result = subprocess.run([sys.executable, str(ROOT / "tests" / "slime_args_check.py"), str(config), *flags],
                            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-4000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_the_example_yaml_lands_in_slimes_args_and_in_the_settings(tmp_path: Path) -> None:
    example = ROOT / "examples" / "shopsim.yaml"
    out = through_slime(tmp_path, example, *KNOB_FLAGS, "--save", str(tmp_path / "ckpt"))
    assert out["args"] == yaml.safe_load(example.read_text()) == DEFAULTS
    assert out["knobs"] == {"rollout_batch_size": 16, "n_samples_per_prompt": 8, "over_sampling_batch_size": 32,
                            "global_batch_size": 64}
    settings = out["settings"]
    assert {k: settings[k] for k in out["knobs"]} == out["knobs"]
    assert settings["run_dir"] == str(tmp_path / "ckpt" / "shopsim")  # slime's --save, resolved
    assert settings["inside_slime"] is True and settings["use_wandb"] is False
    for setting in SETTINGS:
        if setting.name == "shopsim_prompt_skip_seed":  # null: slime's --rollout-seed (42 by default)
            assert landed(settings, setting.name) == 42 and setting.default is None
        elif setting.name != "shopsim_run_dir":
            assert landed(settings, setting.name) == setting.default, setting.name


def test_every_setting_at_a_non_default_value_lands(tmp_path: Path) -> None:
    assert set(NOT_DEFAULT) == set(DEFAULTS), "give every setting a non-default value here"
    config = tmp_path / "shopsim.yaml"
    config.write_text("".join(f"{key}: {written}\n" for key, (written, _) in NOT_DEFAULT.items()))
    out = through_slime(tmp_path, config, *KNOB_FLAGS)
    assert set(out["args"]) == set(DEFAULTS)
    assert out["args"]["shopsim_wandb"] is False and out["args"]["shopsim_success_threshold"] == "5e-1"
    for key, (_, expected) in NOT_DEFAULT.items():
        assert landed(out["settings"], key) == expected != DEFAULTS[key], key


def test_slime_applies_a_misspelled_key_silently_and_the_settings_name_it(tmp_path: Path) -> None:
    config = tmp_path / "shopsim.yaml"
    config.write_text("shopsim_max_consecutive_failed_group: 4\n")
    out = through_slime(tmp_path, config, *KNOB_FLAGS)
    assert out["args"] == {"shopsim_max_consecutive_failed_group": 4}  # slime: just another attribute
    assert "settings" not in out
    assert "did you mean 'shopsim_max_consecutive_failed_groups'?" in out["error"]


def test_without_save_the_run_dir_is_absolute_in_the_working_directory(tmp_path: Path) -> None:
    out = through_slime(tmp_path, ROOT / "examples" / "shopsim.yaml", *KNOB_FLAGS)
    assert out["save"] is None and out["settings"]["run_dir"] is None  # the settings name none: the monitor makes it
    run_dir, records = Path(out["monitor"]["run_dir"]), Path(out["monitor"]["records"])
    assert run_dir.is_absolute() and run_dir.parent == tmp_path / "shopsim_run" and run_dir.name.startswith("run-")
    assert records == run_dir / "steps.jsonl"
