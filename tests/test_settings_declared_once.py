"""Each ``shopsim_*`` setting is declared once (a ShopsimSettings field, or a SkipRuleSettings field for
``shopsim_prompt_skip_<field>``), and every reader reads it by that row.

The monitor (``ShopsimSettings.from_args``), the data source (``shopsimrl.data_source``), check-config and
preflight must agree on every value, default and error message; adding a setting is one field.
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
import os
import re
import textwrap
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Callable

import argparse

import pytest
import yaml
from hypothesis import assume, given, settings as hsettings, strategies as st

from shopsim_metrics.cli import main as cli_main
from shopsim_metrics.settings import (
    ALERT_LEVELS,
    DEFAULTS,
    PREFIX,
    PROMPT_SKIP_MODES,
    SETTING,
    SETTINGS,
    SETTINGS_BY_NAME,
    SKIP_RULE_SETTINGS,
    Setting,
    WANDB_MODES,
    WAVE_SIZE_MODES,
    ShopsimConfigError,
    ShopsimSettings,
    declared_settings,
    integer,
    setting,
    validate_settings,
)
from shopsim_metrics.settings.check import check_mapping
from shopsim_metrics.settings.flags import add_setting_flags, flag_of
from shopsim_metrics.settings.setting_field import SETTINGS_OF
from shopsim_metrics.settings.prompt_skip import SkipRuleSettings
from fed_history import FedHistory
from shopsim_metrics.record.contract import ALL_SAMPLES_PATH, FILTER_PATH, LOG_PATH, SAMPLE_HOOK_PATH
from shopsimrl.data_source import PromptSkipDataSource

SLIME_FIELDS = {"rollout_batch_size", "n_samples_per_prompt", "over_sampling_batch_size", "global_batch_size",
                "reward_key", "wandb_always_use_train_step", "inside_slime", "use_wandb", "num_rollout",
                "start_rollout_id", "partial_rollout"}
"""The ShopsimSettings fields read from slime's own args (not shopsim_* settings)."""
RULE_PREFIX = "shopsim_prompt_skip_"
SKIP_RULE_FIELDS = dataclasses.fields(SkipRuleSettings)


# --- one declaration ----------------------------------------------------------------------------------

def test_the_table_is_the_fields_of_the_dataclasses_in_their_order() -> None:
    """ShopsimSettings' setting fields, and at ``prompt_skip_rule`` the fields of the SkipRuleSettings it holds."""
    expected: list[tuple[str, Any]] = []
    for f in dataclasses.fields(ShopsimSettings):
        if SETTING in f.metadata:
            expected.append((PREFIX + f.name, f.default))
        elif SETTINGS_OF in f.metadata:
            assert f.metadata[SETTINGS_OF] == (SkipRuleSettings, "prompt_skip_") and f.name == "prompt_skip_rule"
            expected += [(RULE_PREFIX + g.name, g.metadata[SETTING].get("default", g.default)) for g in SKIP_RULE_FIELDS]
    assert [(s.name, s.default) for s in SETTINGS] == expected
    declared = {f.name for f in dataclasses.fields(ShopsimSettings) if SETTING in f.metadata}
    assert {f.name for f in dataclasses.fields(ShopsimSettings)} == declared | {"prompt_skip_rule"} | SLIME_FIELDS
    assert list(DEFAULTS) == list(SETTINGS_BY_NAME) == [s.name for s in SETTINGS]


def test_from_args_has_no_name_list_of_its_own() -> None:
    """No setting is named in from_args (``run_dir`` only to resolve it): every one is read by its table row."""
    source = textwrap.dedent(inspect.getsource(ShopsimSettings.from_args))
    function = ast.parse(source).body[0]
    assert isinstance(function, ast.FunctionDef)
    body = function.body[1:]  # without the docstring
    code = "\n".join(ast.unparse(statement) for statement in body)
    named = [s.name for s in SETTINGS if re.search(rf"\b{s.name.removeprefix(PREFIX)}\b", code)]
    assert named == ["shopsim_run_dir"]
    literals = [node.value for statement in body for node in ast.walk(statement)
                if isinstance(node, ast.Constant) and isinstance(node.value, str)]
    assert not [text for text in literals if PREFIX in text]  # no "shopsim_..." key either


# --- the skip rule's settings are its fields: nothing below names one ---------------------------------

def test_every_skip_rule_field_is_one_setting_at_its_default_and_no_other() -> None:
    """Its name, default, allowed text and docs line are the field's own (the seed's key is null: slime's seed)."""
    assert [s.name for s in SKIP_RULE_SETTINGS] == [RULE_PREFIX + f.name for f in SKIP_RULE_FIELDS]
    assert [s for s in SETTINGS if s.name.startswith(RULE_PREFIX)] == list(SKIP_RULE_SETTINGS)
    for rule_field, row in zip(SKIP_RULE_FIELDS, SKIP_RULE_SETTINGS):
        declared = rule_field.metadata[SETTING]
        assert (row.allowed, row.doc) == (declared["allowed"], declared["doc"]) and row.doc, row.name
        assert row.default == declared.get("default", getattr(SkipRuleSettings(), rule_field.name)), row.name
        assert DEFAULTS[row.name] == row.default
        if row.default is not None:
            assert row.read(row.default) == getattr(SkipRuleSettings(), rule_field.name)
    assert [f.name for f in SKIP_RULE_FIELDS if SETTING not in f.metadata] == []


def test_every_skip_rule_setting_is_a_flag_read_by_its_row() -> None:
    """A command that lets the user try any of them gets the flag from the row (help: the docs line)."""
    names = [s.name for s in SKIP_RULE_SETTINGS]
    parser = argparse.ArgumentParser(prog="try", allow_abbrev=False)
    add_setting_flags(parser, names)
    for row in SKIP_RULE_SETTINGS:
        action = next(a for a in parser._actions if flag_of(row.name) in a.option_strings)
        assert row.doc.replace("%", "%%") in action.help and action.default is None


VALID_TEXT = st.one_of(st.floats(0, 1), st.integers(0, 2**40), st.sampled_from(["5e-1", "0.25", "1e0", "3"]))
"""Values some rule setting takes (a row refusing one is skipped: which row takes which is the row's business)."""


def _rule_value(settings: ShopsimSettings, row: Setting) -> Any:
    return getattr(settings.prompt_skip_rule, row.name.removeprefix(RULE_PREFIX))


@given(row=st.sampled_from(SKIP_RULE_SETTINGS), value=VALID_TEXT, rollout_seed=st.integers(0, 2**31))
@hsettings(max_examples=300, deadline=None)
def test_a_valid_value_of_any_skip_rule_key_in_the_yaml_reaches_the_rule(row: Setting, value, rollout_seed) -> None:
    """The key as slime's loader reads it from the YAML lands in ``prompt_skip_rule`` and the data source's rule."""
    assume(not validate_settings({row.name: value})[1] and row.read(value) != row.default)  # the default proves nothing
    loaded = yaml.safe_load(yaml.safe_dump({row.name: value}))
    args = SimpleNamespace(n_samples_per_prompt=8, rollout_seed=rollout_seed, **loaded)
    settings = ShopsimSettings.from_args(args)
    assert _rule_value(settings, row) == row.read(value)
    assert data_source(args).settings.prompt_skip_rule == settings.prompt_skip_rule
    others = [other for other in SKIP_RULE_SETTINGS if other is not row]
    assert [_rule_value(settings, other) for other in others] == [
        rollout_seed if other.default is None else other.default for other in others]  # null seed: slime's


@dataclasses.dataclass(frozen=True, kw_only=True)
class WithOneMore(ShopsimSettings):
    """A settings class with one more setting: the field is all that is written."""

    extra_every: int = setting(3, integer(1), "an integer >= 1", "a new knob, every N steps")


def test_a_declaration_is_all_a_new_setting_takes() -> None:
    table = declared_settings(WithOneMore)
    assert table[:-1] == SETTINGS and (table[-1].name, table[-1].default, table[-1].doc) == (
        "shopsim_extra_every", 3, "a new knob, every N steps")
    assert WithOneMore.from_args(SimpleNamespace()).extra_every == 3
    assert WithOneMore.from_args(SimpleNamespace(shopsim_extra_every=5, shopsim_wandb=False)).extra_every == 5
    with pytest.raises(ShopsimConfigError, match=r"\n  shopsim_extra_every: expected an integer >= 1; got 0$"):
        WithOneMore.from_args(SimpleNamespace(shopsim_extra_every=0))
    with pytest.raises(ShopsimConfigError, match=r"shopsim_extra_every: unknown key"):
        ShopsimSettings.from_args(SimpleNamespace(shopsim_extra_every=5))  # not a setting of the base class


# --- every reader reads the same value ----------------------------------------------------------------

def _rule_field(name: str) -> Callable[[PromptSkipDataSource], Any]:
    return lambda ds: getattr(ds.settings.prompt_skip_rule, name)


DATA_SOURCE_READS: dict[str, Callable[[PromptSkipDataSource], Any]] = {
    "shopsim_prompt_skip": lambda ds: ds.mode,
    "shopsim_wave_size": lambda ds: ds.wave_size,
    "shopsim_prompt_key": lambda ds: ds.metadata_key,
    **{s.name: _rule_field(s.name.removeprefix("shopsim_prompt_skip_")) for s in SKIP_RULE_SETTINGS},
}
"""Where the data source keeps each setting it reads."""

WORDS = [*WANDB_MODES, *PROMPT_SKIP_MODES, *WAVE_SIZE_MODES, *ALERT_LEVELS, "true", "no", "maybe"]
VALUES = st.one_of(
    st.none(), st.booleans(), st.integers(-2, 2_000_000), st.floats(-0.5, 1.5), st.floats(allow_nan=True),
    st.sampled_from(WORDS).flatmap(lambda w: st.sampled_from([w, w.upper(), w.title(), f" {w} "])),
    st.sampled_from(["5e-1", "0.25", "1e0", "", "  ", "prompt_id", "/shared/records", "3"]),
    st.lists(st.integers(), max_size=2),
)


def data_source(args: SimpleNamespace) -> PromptSkipDataSource:
    return PromptSkipDataSource(args, inner=object(), history=FedHistory())


@given(row=st.sampled_from(SETTINGS), value=VALUES)
@hsettings(max_examples=500, deadline=None)
def test_every_setting_reads_the_same_in_the_settings_the_data_source_and_check_config(row, value) -> None:
    """A value that the table accepts lands as read in ShopsimSettings and in the data source; one it refuses
    is the same one-line problem in check-config, in from_args and in the data source."""
    args = SimpleNamespace(n_samples_per_prompt=8, rollout_seed=11, **{row.name: value})
    problems = validate_settings({row.name: value})[1]
    assert check_mapping({row.name: value}) == problems
    if problems:
        # the row's own check, or the rule's check of the combination (p_max: 0 names p_min)
        assert len(problems) == 1 and re.match(r"shopsim_\w+: expected ", problems[0]), problems
        with pytest.raises(ShopsimConfigError) as caught:
            ShopsimSettings.from_args(args)
        assert str(caught.value).splitlines()[1:] == [f"  {problems[0]}"]
        with pytest.raises(ShopsimConfigError) as in_data_source:  # it reads the settings as the monitor does
            data_source(args)
        assert str(in_data_source.value) == str(caught.value)
        return
    read = row.read(value)
    settings = ShopsimSettings.from_args(args)
    field = row.name.removeprefix(PREFIX)
    if row.name == "shopsim_run_dir":
        # None: no --save either, so the monitor makes a new directory per run
        assert settings.run_dir == (os.path.abspath(os.path.expanduser(read)) if read else None)
    elif row in SKIP_RULE_SETTINGS:
        assert _rule_value(settings, row) == (11 if read is None else read)  # the seed's null: slime's rollout_seed
    else:
        assert getattr(settings, field) == read
    if row.name in DATA_SOURCE_READS:
        expected = 11 if row.name == "shopsim_prompt_skip_seed" and read is None else read  # slime's rollout_seed
        assert DATA_SOURCE_READS[row.name](data_source(args)) == expected


def test_the_data_source_reads_every_setting_at_its_default() -> None:
    ds, settings = data_source(SimpleNamespace()), ShopsimSettings.from_args(SimpleNamespace())
    assert (ds.mode, ds.wave_size, ds.metadata_key) == (settings.prompt_skip, settings.wave_size, settings.prompt_key)
    assert ds.settings.prompt_skip_rule == SkipRuleSettings() and ds.policy is None  # off: no rule built


# --- preflight reads the YAML's settings through the table ---------------------------------------------

@pytest.mark.parametrize("yaml_text, acts", [("shopsim_wave_size: Adaptive\n", True),
                                             ("shopsim_prompt_skip: ' GRESO'\n", True),
                                             ("shopsim_prompt_skip: 'OFF'\n", False),
                                             ("shopsim_prompt_skip: no\n", False)])
def test_preflight_reads_the_skip_and_wave_settings_as_the_table_does(tmp_path: Path, capsys, yaml_text: str,
                                                                        acts: bool) -> None:
    config = tmp_path / "shopsim.yaml"
    config.write_text(yaml_text)
    argv = ["--dynamic-sampling-filter-path", FILTER_PATH, "--rollout-all-samples-process-path", ALL_SAMPLES_PATH,
            "--custom-rollout-log-function-path", LOG_PATH, "--rollout-sample-hook-path", SAMPLE_HOOK_PATH,
            "--custom-config-path", str(config), "--rollout-batch-size", "16", "--n-samples-per-prompt", "8",
            "--global-batch-size", "64", "--save", str(tmp_path / "save")]
    code = cli_main(["preflight", "--", *argv])
    err = capsys.readouterr().err
    assert ("acts only through --data-source-path" in err) is acts, err
    assert code == (2 if acts else 0), err
