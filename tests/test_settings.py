"""The settings table: YAML 1.1 values, errors that name key / allowed / received, unknown keys, run dir."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml
from hypothesis import given, settings as hsettings, strategies as st

from shopsim_metrics.settings import (
    DEFAULTS,
    SETTINGS,
    SETTINGS_BY_NAME,
    ShopsimConfigError,
    shown,
    ShopsimSettings,
    closest_key,
    fresh_run_dir,
    resolve_run_dir,
    validate_settings,
    validate_slime_knobs,
)

ROOT = Path(__file__).resolve().parents[1]


def from_yaml(text: str) -> tuple[dict, list[str]]:
    """Settings read from YAML text with slime's own loader (yaml.safe_load, YAML 1.1)."""
    return validate_settings(yaml.safe_load(text))


def test_defaults_come_from_the_table_and_each_default_is_valid() -> None:
    assert list(DEFAULTS) == [s.name for s in SETTINGS]
    assert all(name.startswith("shopsim_") for name in DEFAULTS)
    for setting in SETTINGS:
        assert setting.read(setting.default) == setting.default, setting.name
        assert setting.doc and setting.allowed


def test_an_empty_config_gives_every_default() -> None:
    assert validate_settings({}) == (DEFAULTS, [])


@pytest.mark.parametrize("word, mode", [("off", "off"), ("no", "off"), ("false", "off"), ("Off", "off"),
                                        ("on", "auto"), ("yes", "auto"), ("true", "auto"),
                                        ("'off'", "off"), ("standalone", "standalone"), ("JOIN", "join")])
def test_yaml_booleans_are_wandb_modes(word: str, mode: str) -> None:
    values, problems = from_yaml(f"shopsim_wandb: {word}\n")
    assert problems == [] and values["shopsim_wandb"] == mode


@pytest.mark.parametrize("key", ["shopsim_success_threshold", "shopsim_alert_warn_fraction"])
@pytest.mark.parametrize("written, value", [("5e-1", 0.5), ("1e0", 1.0), ("'0.25'", 0.25), ("0.5", 0.5), ("1", 1.0)])
def test_numeric_strings_are_numbers(key: str, written: str, value: float) -> None:
    values, problems = from_yaml(f"{key}: {written}\n")
    assert problems == [] and values[key] == value and isinstance(values[key], float)


@pytest.mark.parametrize("written, value", [("yes", True), ("off", False), ("'False'", False), ("1", True)])
def test_alerts_flag_reads_yaml_words(written: str, value: bool) -> None:
    values, problems = from_yaml(f"shopsim_alerts: {written}\n")
    assert problems == [] and values["shopsim_alerts"] is value


@pytest.mark.parametrize("key, value, allowed", [
    ("shopsim_max_consecutive_failed_groups", 0, "an integer >= 1"),
    ("shopsim_max_consecutive_failed_groups", True, "an integer >= 1"),
    ("shopsim_max_consecutive_failed_groups", 2.5, "an integer >= 1"),
    ("shopsim_success_threshold", "high", "a finite number"),
    ("shopsim_success_threshold", float("nan"), "a finite number"),
    ("shopsim_success_threshold", ".inf", "a finite number"),
    ("shopsim_success_metadata_key", False, "a non-empty string"),
    ("shopsim_unscored_metadata_key", "", "a non-empty string"),
    ("shopsim_run_dir", 3, "null or a directory path"),
    ("shopsim_wandb", "loud", "one of auto, join, standalone, off"),
    ("shopsim_wandb", 1, "one of auto, join, standalone, off"),
    ("shopsim_wandb_project", ["a"], "a non-empty string"),
    ("shopsim_wandb_table_every", -1, "an integer >= 0"),
    ("shopsim_alerts", "maybe", "true or false"),
    ("shopsim_alerts", 2, "true or false"),
    ("shopsim_alert_warn_fraction", 0, "a number in (0, 1]"),
    ("shopsim_alert_warn_fraction", 1.5, "a number in (0, 1]"),
    ("shopsim_alert_warn_level", "LOUD", "one of INFO, WARN, ERROR"),
    ("shopsim_alert_error_level", True, "one of INFO, WARN, ERROR"),
])
def test_a_bad_value_names_the_key_the_allowed_values_and_the_value(key: str, value, allowed: str) -> None:
    values, problems = validate_settings({key: value})
    assert problems == [f"{key}: expected {allowed}; got {value!r}" + (
        " (YAML reads unquoted on/off/yes/no/true/false as a boolean: quote the value)"
        if isinstance(value, bool) else "")]
    assert values[key] == DEFAULTS[key]


def test_edges_of_the_ranges() -> None:
    assert validate_settings({"shopsim_max_consecutive_failed_groups": 1})[1] == []
    assert validate_settings({"shopsim_wandb_table_every": 0})[1] == []
    assert validate_settings({"shopsim_alert_warn_fraction": 1})[1] == []
    assert validate_settings({"shopsim_alert_warn_fraction": 1e-9})[1] == []
    assert validate_settings({"shopsim_alert_warn_fraction": 1.0000001})[1] != []


@pytest.mark.parametrize("typo, meant", [
    ("shopsim_max_consecutive_failed_group", "shopsim_max_consecutive_failed_groups"),
    ("shopsim_wandb_tabel_every", "shopsim_wandb_table_every"),
    ("shopsim_alert_warn_fracton", "shopsim_alert_warn_fraction"),
    ("shopsim_rundir", "shopsim_run_dir"),
])
def test_unknown_keys_name_the_closest_known_key(typo: str, meant: str) -> None:
    assert closest_key(typo) == meant
    assert validate_settings({typo: 1})[1] == [f"{typo}: unknown key; did you mean {meant!r}?"]


def test_an_unknown_key_far_from_any_lists_the_known_keys() -> None:
    (problem,) = validate_settings({"shopsim_zzz": 1})[1]
    assert problem.startswith("shopsim_zzz: unknown key; known keys: shopsim_max_consecutive_failed_groups,")


def test_keys_without_the_prefix_are_not_looked_at() -> None:
    assert validate_settings({"lr": "x", "use_wandb": "off", "shopsimrl": 1})[1] == []


@given(st.sampled_from(SETTINGS), st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(allow_nan=True), st.text(max_size=12),
    st.lists(st.integers(), max_size=2), st.dictionaries(st.text(max_size=3), st.integers(), max_size=2)))
@hsettings(max_examples=400, deadline=None)
def test_any_value_is_read_to_an_accepted_value_or_named_in_the_error(setting, value) -> None:
    try:
        read = setting.read(value)
    except ShopsimConfigError as exc:
        message = str(exc)
        assert message.startswith(f"{setting.name}: expected {setting.allowed}; got {shown(value)}")
        assert "\n" not in message
    else:
        assert setting.read(read) == read  # what was read is itself a valid, normalised value


def test_slime_knobs_are_positive_integers_and_over_is_at_least_rollout_batch_size() -> None:
    assert validate_slime_knobs({"rollout_batch_size": 16, "over_sampling_batch_size": 16})[1] == []
    assert validate_slime_knobs({})[0] == dict.fromkeys(validate_slime_knobs({})[0])
    assert validate_slime_knobs({"rollout_batch_size": 0})[1] == ["rollout_batch_size: expected a positive integer; got 0"]
    assert validate_slime_knobs({"global_batch_size": "64"})[1] == ["global_batch_size: expected a positive integer; got '64'"]
    assert validate_slime_knobs({"rollout_batch_size": 16, "over_sampling_batch_size": 15})[1] == [
        "over_sampling_batch_size: expected an integer >= rollout_batch_size (16); got 15"]


# --- from slime's args ---------------------------------------------------------------------------------
def test_from_args_reads_the_yaml_traps() -> None:
    loaded = yaml.safe_load("shopsim_wandb: off\nshopsim_alert_warn_fraction: 5e-1\nshopsim_alerts: no\n")
    s = ShopsimSettings.from_args(SimpleNamespace(rollout_batch_size=4, **loaded))
    assert (s.wandb, s.alert_warn_fraction, s.alerts) == ("off", 0.5, False)


def test_from_args_raises_for_an_unknown_key_with_every_problem() -> None:
    args = SimpleNamespace(rollout_batch_size=16, over_sampling_batch_size=8,
                           shopsim_max_consecutive_failed_group=4, shopsim_wandb="loud")
    with pytest.raises(ShopsimConfigError) as info:
        ShopsimSettings.from_args(args)
    lines = str(info.value).splitlines()
    assert "check-config" in lines[0]
    assert sorted(line.strip() for line in lines[1:]) == sorted([
        "shopsim_max_consecutive_failed_group: unknown key; did you mean 'shopsim_max_consecutive_failed_groups'?",
        "shopsim_wandb: expected one of auto, join, standalone, off; got 'loud'",
        "over_sampling_batch_size: expected an integer >= rollout_batch_size (16); got 8",
    ])


def test_from_args_of_a_bare_args_uses_the_defaults() -> None:
    s = ShopsimSettings.from_args(SimpleNamespace())
    assert (s.rollout_batch_size, s.over_sampling_batch_size, s.max_consecutive_failed_groups, s.wandb) == (None, None, 8, "auto")
    assert s.run_dir is None  # the monitor makes a new one per run when it starts


# --- the run directory ----------------------------------------------------------------------------------
def test_run_dir_order_setting_then_env_then_save_then_cwd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    env = {"SHOPSIM_RUN_DIR": "from_env"}
    assert resolve_run_dir("mine", save="/ckpt", environ=env) == str(tmp_path / "mine")
    assert resolve_run_dir(None, save="/ckpt", environ=env) == str(tmp_path / "from_env")
    assert resolve_run_dir(None, save="/ckpt", environ={}) == "/ckpt/shopsim"
    assert resolve_run_dir(None, save="ckpt", environ={}) == str(tmp_path / "ckpt" / "shopsim")
    assert resolve_run_dir(None, save=None, load="/ckpt", environ={}) == "/ckpt/shopsim"  # a resume saving nothing
    assert resolve_run_dir(None, save=None, environ={}) is None and resolve_run_dir(None, save="", environ={}) is None
    fresh = [fresh_run_dir(), fresh_run_dir()]
    assert all(Path(d).parent == tmp_path / "shopsim_run" and Path(d).name.startswith("run-") for d in fresh)
    assert fresh[0] != fresh[1]  # a new directory per run: runs in one working directory never share records


def test_reading_the_settings_twice_gives_the_same_settings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("SHOPSIM_RUN_DIR", raising=False)
    for args in (SimpleNamespace(), SimpleNamespace(save="ckpt", rollout_batch_size=4, over_sampling_batch_size=8)):
        assert ShopsimSettings.from_args(args) == ShopsimSettings.from_args(args)


def test_settings_resolve_the_run_dir_against_args_save(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SHOPSIM_RUN_DIR", raising=False)
    monkeypatch.chdir(tmp_path)
    assert ShopsimSettings.from_args(SimpleNamespace(save=str(tmp_path / "ckpt"))).run_dir == str(
        tmp_path / "ckpt" / "shopsim")
    assert ShopsimSettings.from_args(SimpleNamespace(save=None)).run_dir is None  # the monitor's own, per run
    rel = ShopsimSettings.from_args(SimpleNamespace(shopsim_run_dir="rel", save="/x"))
    assert rel.run_dir == str(tmp_path / "rel")


def test_every_setting_has_its_row() -> None:
    assert set(SETTINGS_BY_NAME) == set(DEFAULTS) and len(SETTINGS) == len(SETTINGS_BY_NAME)


# --- skipping prompts before generation: the settings table holds the mode and every rule field ----------

def test_every_skip_rule_field_is_a_setting_at_grescos_default() -> None:
    import dataclasses

    from shopsim_metrics.settings.prompt_skip import SkipRuleSettings
    from shopsim_metrics.settings import DEFAULTS, skip_rule_settings

    names = {f"shopsim_prompt_skip_{f.name}" for f in dataclasses.fields(SkipRuleSettings)}
    assert names <= set(DEFAULTS) and DEFAULTS["shopsim_prompt_skip"] == "off"
    assert skip_rule_settings(DEFAULTS) == SkipRuleSettings()


def test_check_config_reads_the_skip_settings_both_sides() -> None:
    from shopsim_metrics.settings import ShopsimSettings, validate_settings
    from types import SimpleNamespace

    good, problems = validate_settings({"shopsim_prompt_skip": "greso", "shopsim_prompt_skip_floor": "2e-2",
                                        "shopsim_prompt_skip_seed": 3})
    assert problems == [] and (good["shopsim_prompt_skip"], good["shopsim_prompt_skip_floor"]) == ("greso", 0.02)
    assert validate_settings({"shopsim_prompt_skip": False})[0]["shopsim_prompt_skip"] == "off"
    assert validate_settings({"shopsim_prompt_skip": "gerso"})[1] == [
        "shopsim_prompt_skip: expected one of off, greso, predictive; got 'gerso'"]
    assert validate_settings({"shopsim_prompt_skip_step": 1.5})[1] == [
        "shopsim_prompt_skip_step: expected a number in [0, 1]; got 1.5"]
    assert validate_settings({"shopsim_prompt_skip_seed": -1})[1] == [
        "shopsim_prompt_skip_seed: expected null or an integer >= 0; got -1"]
    assert validate_settings({"shopsim_prompt_skip_p_easy_start": 0.99})[1] == [
        "shopsim_prompt_skip_p_easy_start: expected a number in [0.05, 0.95] (between p_min and p_max); got 0.99"]
    assert "did you mean 'shopsim_prompt_skip_floor'" in validate_settings({"shopsim_prompt_skip_flor": 0.1})[1][0]
    settings = ShopsimSettings.from_args(SimpleNamespace(shopsim_prompt_skip="greso", shopsim_prompt_skip_p_max=0.9))
    assert (settings.prompt_skip, settings.prompt_skip_rule.p_max, settings.prompt_skip_rule.seed) == ("greso", 0.9, 0)
    with_seed = ShopsimSettings.from_args(SimpleNamespace(shopsim_prompt_skip_seed=None, rollout_seed=5))
    assert with_seed.prompt_skip_rule.seed == 5  # null: slime's --rollout-seed
