"""``shopsim-metrics check-config``: one line per problem, exit 2 on problems, 0 when clean."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from shopsim_metrics.cli import main

ROOT = Path(__file__).resolve().parents[1]
PREFIX = "shopsim-metrics check-config: error: "


def check(tmp_path: Path, capsys: pytest.CaptureFixture, text: str) -> tuple[int, list[str], str]:
    path = tmp_path / "shopsim.yaml"
    path.write_text(text, encoding="utf-8")
    code = main(["check-config", str(path)])
    out, err = capsys.readouterr()
    assert all(line.startswith(f"{PREFIX}{path}: ") for line in err.splitlines())
    lines = [re.sub(r"^line \d+: ", "", line.removeprefix(f"{PREFIX}{path}: ")) for line in err.splitlines()]
    return code, lines, out


def test_the_example_config_is_clean(capsys: pytest.CaptureFixture) -> None:
    assert main(["check-config", str(ROOT / "examples" / "shopsim.yaml")]) == 0
    out, err = capsys.readouterr()
    assert err == "" and out.strip().endswith("shopsim.yaml: OK")


# --- the three YAML traps -----------------------------------------------------------------------------
@pytest.mark.parametrize("word", ["off", "no", "false", "on", "yes"])
def test_trap_wandb_off_is_a_boolean_and_is_accepted(tmp_path, capsys, word: str) -> None:
    assert check(tmp_path, capsys, f"shopsim_wandb: {word}\n")[:2] == (0, [])


@pytest.mark.parametrize("key", ["shopsim_alert_warn_fraction", "shopsim_success_threshold"])
def test_trap_scientific_notation_is_a_string_and_is_accepted(tmp_path, capsys, key: str) -> None:
    assert check(tmp_path, capsys, f"{key}: 5e-1\n")[:2] == (0, [])


def test_trap_a_misspelled_key_is_named_with_the_closest_known_one(tmp_path, capsys) -> None:
    code, lines, out = check(tmp_path, capsys, "shopsim_max_consecutive_failed_group: 4\n")
    assert code == 2 and out == ""
    assert lines == ["shopsim_max_consecutive_failed_group: unknown key; "
                     "did you mean 'shopsim_max_consecutive_failed_groups'?"]


def test_every_problem_gets_one_line_and_slimes_keys_are_left_alone(tmp_path, capsys) -> None:
    code, lines, _ = check(tmp_path, capsys, "\n".join([
        "shopsim_wandb: loud",
        "shopsim_alert_warn_fraction: 2",
        "shopsim_success_metadata_key: no",
        "shopsim_wandb_tabel_every: 5",
        "rollout_batch_size: 16",
        "over_sampling_batch_size: 8",
        "lr: 1e-6",
        "use_wandb: off",
        "",
    ]))
    assert code == 2
    assert sorted(lines) == sorted([
        "shopsim_wandb: expected one of auto, join, standalone, off; got 'loud'",
        "shopsim_alert_warn_fraction: expected a number in (0, 1]; got 2",
        "shopsim_success_metadata_key: expected a non-empty string; got False "
        "(YAML reads unquoted on/off/yes/no/true/false as a boolean: quote the value)",
        "shopsim_wandb_tabel_every: unknown key; did you mean 'shopsim_wandb_table_every'?",
        "over_sampling_batch_size: expected an integer >= rollout_batch_size (16); got 8",
    ])


@pytest.mark.parametrize("text, problem", [
    ("shopsim_wandb: [off\n", "not valid YAML"),
    ("- shopsim_wandb\n", "expected a mapping of key: value at the top level; got a list"),
])
def test_an_unreadable_config_is_one_line(tmp_path, capsys, text: str, problem: str) -> None:
    code, lines, _ = check(tmp_path, capsys, text)
    assert code == 2 and len(lines) == 1 and lines[0].startswith(problem)


def test_an_empty_config_is_clean(tmp_path, capsys) -> None:
    assert check(tmp_path, capsys, "# nothing set\n")[:2] == (0, [])


def test_a_missing_file_is_one_line(tmp_path, capsys) -> None:
    assert main(["check-config", str(tmp_path / "nope.yaml")]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line == (f"{PREFIX}{tmp_path / 'nope.yaml'}: no such file or directory (expected a YAML file of "
                    "shopsim_* settings)")


def test_a_missing_path_reads_the_same_in_every_command(tmp_path, capsys) -> None:
    missing = tmp_path / "nope"
    messages = {}
    for argv in (["inspect", str(missing)], ["prompts", str(missing)], ["dashboard", "html", str(missing)],
                 ["tune", "--from", str(missing), "--steps", "10"], ["check-config", str(missing)]):
        assert main(argv) == 2
        (line,) = capsys.readouterr().err.splitlines()
        command = " ".join(argv[:2] if argv[0] == "dashboard" else argv[:1])
        assert line.startswith(f"shopsim-metrics {command}: error: {missing}: no such file or directory (expected "), line
        messages[command] = line
    assert len(messages) == 5


@pytest.mark.parametrize("key, right", [("shopsim-wandb", "shopsim_wandb"), ("Shopsim_alerts", "shopsim_alerts"),
                                        ("SHOPSIM_RUN_DIR", "shopsim_run_dir"), ("shopsim.wandb-project",
                                                                                 "shopsim_wandb_project")])
def test_a_near_miss_of_a_shopsim_key_is_flagged_with_the_right_name(tmp_path, capsys, key: str, right: str) -> None:
    code, lines, _ = check(tmp_path, capsys, f"{key}: off\n")
    assert code == 2 and lines == [f"{key}: not read (shopsim_* keys are lower case with '_'); did you mean {right!r}?"]


def test_keys_that_are_not_shopsim_keys_stay_unread(tmp_path, capsys) -> None:
    assert check(tmp_path, capsys, "shopsimple: 1\nlr: 1e-6\nShop_sim: 2\n")[:2] == (0, [])


def test_each_file_gets_its_own_verdict(tmp_path, capsys) -> None:
    good, bad = tmp_path / "good.yaml", tmp_path / "bad.yaml"
    good.write_text("shopsim_wandb: off\n")
    bad.write_text("shopsim-wandb: off\n")
    assert main(["check-config", str(good), str(bad)]) == 2
    out, err = capsys.readouterr()
    assert out.splitlines() == [f"shopsim-metrics check-config: {good}: OK"]
    assert err.splitlines() == [f"{PREFIX}{bad}: line 1: shopsim-wandb: not read (shopsim_* keys are lower case "
                                "with '_'); did you mean 'shopsim_wandb'?"]
    assert main(["check-config", str(good), str(good)]) == 0


def test_the_command_line_exits_2_on_problems(tmp_path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("shopsim_alerts: maybe\n")
    result = subprocess.run([sys.executable, "-m", "shopsim_metrics.cli", "check-config", str(bad)],
                            capture_output=True, text=True)
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.strip() == f"{PREFIX}{bad}: line 1: shopsim_alerts: expected true or false; got 'maybe'"


def test_each_problem_names_the_line_of_its_key_and_a_key_set_twice_is_a_problem(tmp_path, capsys) -> None:
    path = tmp_path / "shopsim.yaml"
    path.write_text("# settings\nshopsim_wandb: loud\nlr: 1e-6\nshopsim_alerts: true\nshopsim_alerts: maybe\n")
    assert main(["check-config", str(path)]) == 2
    assert capsys.readouterr().err.splitlines() == [  # in the file's order
        f"{PREFIX}{path}: line 2: shopsim_wandb: expected one of auto, join, standalone, off; got 'loud'",
        f"{PREFIX}{path}: line 5: shopsim_alerts: set 2 times (lines 4, 5); slime applies the last",
        f"{PREFIX}{path}: line 5: shopsim_alerts: expected true or false; got 'maybe'",
    ]


def test_problems_are_listed_in_the_files_line_order(tmp_path, capsys) -> None:
    path = tmp_path / "shopsim.yaml"
    path.write_text("shopsim_wandb: maybe\nshopsim_max_consecutive_failed_group: 8\nshopsim-alerts: true\n"
                    "lr: 1\nshopsim_alert_warn_fraction: 2\nshopsim_prompt_skip_p_min: 0.95\n"
                    "shopsim_prompt_skip_p_max: 0.9\n")
    assert main(["check-config", str(path)]) == 2
    lines = [int(line.split(": line ")[1].split(":")[0]) for line in capsys.readouterr().err.splitlines()]
    assert lines == [1, 2, 3, 5, 6]


# --- files that must not be read whole (or at all) ----------------------------------------------------
def _alias_bomb(levels: int = 9) -> str:
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 9) + "]" for i in range(1, levels)]
    return "\n".join(lines + [f"shopsim_wandb: *a{levels - 1}"]) + "\n"


def test_an_alias_bomb_is_refused_in_one_line(tmp_path, capsys) -> None:
    code, lines, _ = check(tmp_path, capsys, _alias_bomb())
    assert code == 2 and len(lines) == 1 and "alias" in lines[0] and "not loaded" in lines[0]


def test_aliases_within_the_bound_are_read_as_yaml_reads_them(tmp_path, capsys) -> None:
    code, lines, _ = check(tmp_path, capsys, "base: &w off\nshopsim_wandb: *w\n")
    assert (code, lines) == (0, [])


def test_a_fifo_is_named_and_never_opened(tmp_path, capsys) -> None:
    import os

    fifo = tmp_path / "shopsim.yaml"
    os.mkfifo(fifo)  # opening it for reading would block forever: no writer
    assert main(["check-config", str(fifo)]) == 2
    err = capsys.readouterr().err
    assert err.strip() == f"{PREFIX}{fifo}: is a FIFO (named pipe), not a YAML file"


def test_a_directory_and_an_oversized_file_are_refused_unread(tmp_path, capsys) -> None:
    from shopsim_metrics.settings.check import MAX_CONFIG_BYTES

    assert main(["check-config", str(tmp_path)]) == 2
    assert capsys.readouterr().err.strip() == f"{PREFIX}{tmp_path}: is a directory, not a YAML file"
    code, lines, _ = check(tmp_path, capsys, "# " + "x" * MAX_CONFIG_BYTES + "\n")
    assert code == 2 and len(lines) == 1 and lines[0].startswith("larger than 1 MB")


def test_preflight_names_a_fifo_config_without_blocking(tmp_path) -> None:
    import os

    from shopsim_metrics.settings.preflight import preflight

    fifo = tmp_path / "shopsim.yaml"
    os.mkfifo(fifo)
    report = preflight(["--custom-config-path", str(fifo)], environ={})
    assert any("FIFO" in problem and str(fifo) in problem for problem in report.problems)


def test_a_shopsim_key_without_its_prefix_is_named(tmp_path, capsys) -> None:
    code, lines, _ = check(tmp_path, capsys, "max_consecutive_failed_groups: 8\nwandb_project: mine\nlr: 1.0e-6\n")
    assert code == 2
    assert lines == ["max_consecutive_failed_groups: not read (no shopsim_ prefix); did you mean "
                     "'shopsim_max_consecutive_failed_groups'?"]  # slime's own wandb_project and lr are left alone


def test_a_device_is_named_and_never_read(capsys) -> None:
    assert main(["check-config", "/dev/zero"]) == 2  # reading it would never end (or exhaust memory)
    assert capsys.readouterr().err.strip() == f"{PREFIX}/dev/zero: is a character device, not a YAML file"
