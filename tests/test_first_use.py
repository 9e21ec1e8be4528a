"""What a new user tripped on, on a fresh clone: each input misread or output misleading, pinned by its fix.

Flags: every parser takes a flag only spelt in full (argparse's prefix matching read ``tune --rollout
fully-async`` as ``--rollout-batch-size``), and a misspelt flag gets the nearest one ("did you mean").
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from shopsim_metrics.cli import _commands, build_parser, main

ROOT = Path(__file__).resolve().parents[1]


def _error(capsys, argv: list[str]) -> str:
    with pytest.raises(SystemExit) as stop:
        main(argv)
    err = capsys.readouterr().err
    assert stop.value.code == 2 and err.count("\n") == 1, err
    return err


# --- flags ------------------------------------------------------------------------------------------------

def test_no_parser_takes_an_abbreviated_flag(capsys):
    parser = build_parser()
    assert all(not command.allow_abbrev for command in [parser, *_commands(parser)])
    err = _error(capsys, ["tune", "--agent", "--rollout", "fully-async"])
    assert "--rollout-batch-size: must be" not in err
    assert "--rollout is an option of shopsim-metrics demo, not of shopsim-metrics tune" in err
    err = _error(capsys, ["replay", "t.json", "--seed", "2"])
    assert "unrecognized arguments: --seed 2; did you mean --seeds?" in err


def test_every_argument_parser_in_the_project_refuses_abbreviations():
    found = [f"{path.relative_to(ROOT)}:{number}" for folder in ("shopsim_metrics", "filter", "benchmarks", "tests")
             for path in sorted((ROOT / folder).rglob("*.py")) if path.name != Path(__file__).name
             for number, line in enumerate(path.read_text().splitlines(), 1)
             if "ArgumentParser(" in line and "allow_abbrev=False" not in line and ">>>" not in line]
    assert found == []


@pytest.mark.parametrize("argv, hint", [
    (["replay", "t.json", "--sedes", "2"], "did you mean --seeds?"),
    (["inspect", "run", "--jsn"], "did you mean --json?"),
    (["dashboard", "html", "run", "--ot", "x.html"], "did you mean --out?"),
    (["replay", "t.json", "--n-samples", "4"], "did you mean --n-samples-per-prompt?"),
    (["tune", "--stpes", "3", "--sed", "1"], "--stpes: did you mean --steps?; --sed: did you mean --seed?"),
])
def test_a_misspelt_flag_gets_the_nearest_one_and_the_commands_help(capsys, argv, hint):
    err = _error(capsys, argv)
    assert hint in err and f"(see shopsim-metrics {' '.join(argv[:2] if argv[0] == 'dashboard' else argv[:1])} " \
                           "--help)" in err


def test_a_flag_without_a_near_one_gets_no_guess(capsys):
    err = _error(capsys, ["inspect", "run", "--zzzzzz"])
    assert "did you mean" not in err and "unrecognized arguments: --zzzzzz" in err


def test_parse_args_of_a_plain_parser_is_untouched():
    assert argparse.ArgumentParser(allow_abbrev=False).parse_args([]) == argparse.Namespace()
