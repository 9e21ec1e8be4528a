"""Every command-line flag made from a setting takes what a config file would hold: its own default, written as text.

One test per setting (generated from the settings' table, so a new setting is tested the day it is declared), and
one per flag of each command that has setting flags, through that command's own parser. A command line has only
text where YAML has numbers: ``--prompt-skip-probe-every 8`` once refused its own default ("expected an integer >= 0;
got '8'")."""

from __future__ import annotations

import argparse

import pytest
from hypothesis import given, strategies as st

from shopsim_metrics.cli import build_parser
from shopsim_metrics.replay.measure import REPLAY_SETTINGS
from shopsim_metrics.settings.flags import add_setting_flags, flag_of, given_settings
from shopsim_metrics.settings.shopsim_settings import PREFIX, SETTINGS_BY_NAME


def as_text(value: object) -> str:
    """A value as one writes it on a command line (YAML's spelling: ``null``, ``true``)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return str(value).lower()
    return str(value)


@pytest.mark.parametrize("name", sorted(SETTINGS_BY_NAME))
def test_every_setting_flag_accepts_its_own_default(name):
    row = SETTINGS_BY_NAME[name]
    parser = argparse.ArgumentParser()
    add_setting_flags(parser, [name])
    args = parser.parse_args([flag_of(name), as_text(row.default)])
    assert getattr(args, name.removeprefix(PREFIX)) == row.default


@pytest.mark.parametrize("name", REPLAY_SETTINGS)
def test_every_replay_setting_flag_accepts_its_own_default_through_the_command(name, tmp_path):
    args = build_parser().parse_args(["replay", str(tmp_path), flag_of(name), as_text(SETTINGS_BY_NAME[name].default)])
    assert given_settings(args, [name]) == {name.removeprefix(PREFIX): SETTINGS_BY_NAME[name].default}


INTEGER_SETTINGS = sorted(name for name, row in SETTINGS_BY_NAME.items()
                          if isinstance(row.default, int) and not isinstance(row.default, bool))


@given(name=st.sampled_from(INTEGER_SETTINGS), value=st.integers(-5, 10 ** 6))
def test_an_integer_flag_reads_as_the_setting_reads_the_integer(name, value):
    """The flag's text and the config file's integer get the same answer: the value, or a refusal."""
    row = SETTINGS_BY_NAME[name]
    parser = argparse.ArgumentParser(exit_on_error=False)
    add_setting_flags(parser, [name])
    try:
        expected = row.read(value)
    except Exception:  # noqa: BLE001 - the setting refuses it: so must the flag
        with pytest.raises((argparse.ArgumentError, SystemExit)):
            parser.parse_args([flag_of(name), str(value)])
        return
    assert getattr(parser.parse_args([flag_of(name), str(value)]), name.removeprefix(PREFIX)) == expected


def test_a_refused_flag_names_what_the_setting_allows(capsys):
    parser = argparse.ArgumentParser(prog="replay")
    add_setting_flags(parser, ["shopsim_prompt_skip_probe_every"])
    with pytest.raises(SystemExit):
        parser.parse_args(["--prompt-skip-probe-every", "-1"])
    assert "--prompt-skip-probe-every: expected an integer >= 0; got -1" in capsys.readouterr().err
