"""`shopsim-metrics preflight -- <train.py arguments>`: a launch checked before any GPU starts."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from shopsim_metrics.cli import main as cli_main
from shopsim_metrics.record.contract import ALL_SAMPLES_PATH, FILTER_PATH, LOG_PATH, SAMPLE_HOOK_PATH

EXAMPLE_YAML = str(Path(__file__).resolve().parents[1] / "examples" / "shopsim.yaml")


def launch(tmp_path: Path, **changes: str | None) -> list[str]:
    """A sound train.py command line (the example's knobs and hooks), with flags changed or dropped (None)."""
    flags: dict[str, str | None] = {
        "--dynamic-sampling-filter-path": FILTER_PATH,
        "--rollout-all-samples-process-path": ALL_SAMPLES_PATH,
        "--custom-rollout-log-function-path": LOG_PATH,
        "--rollout-sample-hook-path": SAMPLE_HOOK_PATH,
        "--custom-config-path": EXAMPLE_YAML,
        "--rollout-batch-size": "16",
        "--n-samples-per-prompt": "8",
        "--over-sampling-batch-size": "32",
        "--global-batch-size": "64",
        "--save": str(tmp_path / "save"),
        "--lr": "1e-6",  # one of slime's flags the check lets through
    }
    flags.update(changes)
    argv: list[str] = []
    for flag, value in flags.items():
        if value is not None:
            argv += [flag, value]
    return argv


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = cli_main(["preflight", "--", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_a_sound_launch_passes_with_a_summary(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(launch(tmp_path), capsys)
    assert (code, err) == (0, "")
    assert out.startswith("shopsim-metrics preflight: OK")
    assert FILTER_PATH in out and str(tmp_path / "save" / "shopsim") in out


@pytest.mark.parametrize("changes, expected", [
    ({"--custom-rollout-log-function-path": "shopsimrl.slime_runtime.log_rollout_stepp"},
     "--custom-rollout-log-function-path: shopsimrl.slime_runtime.log_rollout_stepp does not load (AttributeError"),
    ({"--dynamic-sampling-filter-path": "shopsimrl.slime_runtme.fully_scored_group_filter"},
     "--dynamic-sampling-filter-path: shopsimrl.slime_runtme.fully_scored_group_filter does not load "
     "(ModuleNotFoundError"),
    ({"--rollout-all-samples-process-path": "math.sqrt"},
     "--rollout-all-samples-process-path: math.sqrt cannot be called as slime calls it, fn(args, all_groups, "
     "data_source)"),
    ({"--custom-rollout-log-function-path": None},
     "--custom-rollout-log-function-path: not set, but the filter is shopsimrl.slime_runtime.fully_scored_group_filter: "
     "without it no step record is ever written (set it to shopsimrl.slime_runtime.log_rollout_step)"),
    ({"--over-sampling-batch-size": "8"},
     "--over-sampling-batch-size: 8 is smaller than --rollout-batch-size 16"),
    ({"--global-batch-size": "48"}, "--global-batch-size: 48 does not divide the 128 samples of a rollout step"),
    ({"--custom-config-path": "/nonexistent/shopsim.yaml"}, "--custom-config-path: /nonexistent/shopsim.yaml: no such file"),
    ({"--data-source-path": "shopsimrl.data_source.NoSuchSource"}, "--data-source-path: shopsimrl.data_source.NoSuchSource "
     "does not load"),
    ({"--save": "/etc/hostname/below_a_file"}, "--save: the records directory /etc/hostname/below_a_file/shopsim cannot "
     "be created: /etc/hostname is a file"),
])
def test_each_problem_is_one_line_naming_the_flag(tmp_path, capsys, changes, expected) -> None:
    code, out, err = run(launch(tmp_path, **changes), capsys)
    assert code == 2 and out == ""
    lines = err.splitlines()
    errors = [line for line in lines if ": error: " in line]
    assert len(errors) == 1, err
    assert errors[0].startswith("shopsim-metrics preflight: error: " + expected), errors[0]
    assert "Traceback" not in err


def test_a_bad_setting_in_the_yaml_is_named_with_its_line(tmp_path, capsys) -> None:
    yaml_path = tmp_path / "shopsim.yaml"
    yaml_path.write_text("shopsim_max_consecutive_failed_groups: 8\nshopsim_alerts_warn_fraction: 0.5\n")
    code, _, err = run(launch(tmp_path, **{"--custom-config-path": str(yaml_path)}), capsys)
    assert code == 2
    assert f"--custom-config-path: {yaml_path}: line 2: shopsim_alerts_warn_fraction: unknown key" in err


@pytest.mark.parametrize("has_generate_id, suffix_flag, ok", [(False, False, False), (False, True, True), (True, False, True)])
def test_use_wandb_needs_the_suffix_flag_when_wandb_lacks_generate_id(
        tmp_path, capsys, monkeypatch, has_generate_id, suffix_flag, ok) -> None:
    import wandb.util

    if has_generate_id:
        monkeypatch.setattr(wandb.util, "generate_id", lambda: "abc", raising=False)
    else:
        monkeypatch.delattr(wandb.util, "generate_id", raising=False)
    argv = launch(tmp_path) + ["--use-wandb"] + (["--disable-wandb-random-suffix"] if suffix_flag else [])
    code, _, err = run(argv, capsys)
    assert code == (0 if ok else 2)
    assert ("add --disable-wandb-random-suffix" in err) is (not ok)


def test_records_without_save_or_a_relative_dir_are_warnings_not_problems(tmp_path, capsys) -> None:
    code, out, err = run(launch(tmp_path, **{"--save": None}), capsys)
    assert code == 0 and "OK" in out
    assert "warning: records: neither shopsim_run_dir nor --save is set" in err
    yaml_path = tmp_path / "relative.yaml"
    yaml_path.write_text("shopsim_run_dir: runs/shopsim\n")
    code, out, err = run(launch(tmp_path, **{"--custom-config-path": str(yaml_path)}), capsys)
    assert code == 0
    assert "warning: records: shopsim_run_dir gives a relative path (runs/shopsim)" in err


def test_garbage_arguments_give_lines_never_a_traceback(tmp_path: Path) -> None:
    out = subprocess.run([sys.executable, "-m", "shopsim_metrics", "preflight", "--", "--rollout-batch-size", "x",
                          "--dynamic-sampling-filter-path", "nodots"], capture_output=True, text=True)
    assert out.returncode == 2
    assert "Traceback" not in out.stderr
    assert "--rollout-batch-size: 'x' is not an integer" in out.stderr
    assert "--dynamic-sampling-filter-path: nodots does not load" in out.stderr


# --- slime's fully-async launch (train_async.py) --------------------------------------------------

ASYNC_PATH = "shopsimrl.async_rollout.generate_rollout_fully_async"
SLIME_ASYNC_PATH = "slime.rollout.fully_async_rollout.generate_rollout_fully_async"


def async_launch(tmp_path: Path, **changes: str | None) -> list[str]:
    """A sound train_async.py command with the project's rollout function (no filter, no all-samples hook)."""
    base = {"--dynamic-sampling-filter-path": None, "--rollout-all-samples-process-path": None,
            "--rollout-function-path": ASYNC_PATH, "--rollout-sample-hook-path": "shopsimrl.slime_runtime.record_generated_sample"}
    base.update(changes)
    return ["python", "train_async.py", *launch(tmp_path, **base)]


def test_the_project_async_launch_passes_and_says_which_hooks_apply(tmp_path, capsys) -> None:
    code, out, err = run(async_launch(tmp_path), capsys)
    assert (code, err) == (0, ""), err
    assert f"fully-async launch: {ASYNC_PATH} judges every finished group" in out
    assert "not called: --dynamic-sampling-filter-path, --rollout-all-samples-process-path" in out


def test_on_the_async_path_the_filter_needs_no_all_samples_hook_but_is_named_as_not_called(tmp_path, capsys) -> None:
    code, out, err = run(async_launch(tmp_path, **{"--dynamic-sampling-filter-path": FILTER_PATH}), capsys)
    assert code == 0, err
    assert "--rollout-all-samples-process-path: not set" not in err
    assert "warning: --dynamic-sampling-filter-path: not called on the fully-async path" in err


@pytest.mark.parametrize("changes, level, expected", [
    ({"--custom-rollout-log-function-path": None}, "error",
     "--custom-rollout-log-function-path: not set, but the rollout function is " + ASYNC_PATH),
    ({"--rollout-sample-hook-path": None}, "warning", "--rollout-sample-hook-path: not"),
    ({"--rollout-function-path": SLIME_ASYNC_PATH}, "error",
     f"--rollout-function-path: {SLIME_ASYNC_PATH} calls neither the filter nor the all-samples hook: nothing is filtered"),
    ({"--rollout-function-path": "shopsimrl.async_rollout.no_such_function"}, "error",
     "--rollout-function-path: shopsimrl.async_rollout.no_such_function does not load"),
    ({"--colocate": "true"}, "error", "train_async.py: --colocate is not supported"),
])
def test_async_launch_problems_and_warnings(tmp_path, capsys, changes, level, expected) -> None:
    argv = async_launch(tmp_path, **{k: v for k, v in changes.items() if k != "--colocate"})
    if "--colocate" in changes:
        argv.append("--colocate")
    code, _, err = run(argv, capsys)
    assert code == (2 if level == "error" else 0), err
    assert f"shopsim-metrics preflight: {level}: {expected}" in err


def test_slime_async_function_without_the_project_hooks_is_a_warning_only(tmp_path, capsys) -> None:
    argv = ["train_async.py", "--rollout-function-path", SLIME_ASYNC_PATH, "--save", str(tmp_path / "save")]
    code, _, err = run(argv, capsys)
    assert code == 0
    assert f"warning: --rollout-function-path: {SLIME_ASYNC_PATH} calls neither the filter" in err


def test_train_async_with_slime_default_rollout_keeps_every_hook(tmp_path, capsys) -> None:
    code, out, err = run(["train_async.py", *launch(tmp_path)], capsys)
    assert (code, err) == (0, "")
    assert "train_async.py with slime's default rollout function: every hook applies as with train.py" in out
    code, _, err = run(["train_async.py", *launch(tmp_path, **{"--rollout-all-samples-process-path": None})], capsys)
    assert code == 2 and "--rollout-all-samples-process-path: not set, but the filter is" in err


# --- the command line itself ------------------------------------------------------------------------
def test_no_arguments_is_a_problem_not_ok(capsys) -> None:
    code, out, err = run([], capsys)
    assert code == 2 and "OK" not in out
    assert err.splitlines() == [err.splitlines()[0]] and "error: no train.py arguments given" in err  # nothing else


@pytest.mark.parametrize("typo, right", [("--over-sampling-batch-szie", "--over-sampling-batch-size"),
                                         ("--rollout-batch-sise", "--rollout-batch-size"),
                                         ("--dynamic-sampling-filter-pth", "--dynamic-sampling-filter-path")])
def test_a_flag_slime_does_not_know_is_named_with_the_closest(tmp_path, capsys, typo, right) -> None:
    argv = launch(tmp_path) + [typo, "32"]
    code, _, err = run(argv, capsys)
    assert code == 2 and f"{typo}: not a flag slime knows; did you mean {right!r}?" in err


def test_slime_megatron_sglang_and_negated_flags_pass(tmp_path, capsys) -> None:
    argv = launch(tmp_path) + ["--num-rollout", "3", "--tensor-model-parallel-size", "1",
                               "--sglang-mem-fraction-static", "0.7", "--debug-rollout-only", "--save-interval=5"]
    assert run(argv, capsys)[0] == 0


def test_a_relative_config_path_is_a_problem(tmp_path, capsys, monkeypatch) -> None:
    monkeypatch.chdir(Path(EXAMPLE_YAML).parent)
    code, _, err = run(launch(tmp_path, **{"--custom-config-path": Path(EXAMPLE_YAML).name}), capsys)
    assert code == 2 and "is relative" in err and "absolute path" in err


@pytest.mark.parametrize("yaml_text, named", [("shopsim_prompt_skip: greso\n", "shopsim_prompt_skip: greso"),
                                              ("shopsim_wave_size: adaptive\n", "shopsim_wave_size: adaptive")])
def test_skip_or_wave_settings_without_the_data_source_are_a_problem(tmp_path, capsys, yaml_text, named) -> None:
    config = tmp_path / "shopsim.yaml"
    config.write_text(yaml_text + "shopsim_prompt_key: prompt_id\n")
    code, _, err = run(launch(tmp_path, **{"--custom-config-path": str(config)}), capsys)
    assert code == 2 and f"{named} acts only through --data-source-path shopsimrl.data_source.PromptSkipDataSource" in err
    with_source = launch(tmp_path, **{"--custom-config-path": str(config),
                                      "--data-source-path": "shopsimrl.data_source.PromptSkipDataSource"})
    code, _, err = run(with_source, capsys)
    assert "only through" not in err


def test_skip_and_wave_settings_without_the_data_source_are_one_problem_in_the_plural(tmp_path, capsys) -> None:
    config = tmp_path / "shopsim.yaml"
    config.write_text("shopsim_prompt_skip: greso\nshopsim_wave_size: adaptive\nshopsim_prompt_key: prompt_id\n")
    code, _, err = run(launch(tmp_path, **{"--custom-config-path": str(config)}), capsys)
    assert code == 2 and "shopsim_prompt_skip: greso and shopsim_wave_size: adaptive act only through" in err


def test_a_missing_sample_hook_is_a_warning(tmp_path, capsys) -> None:
    code, _, err = run(launch(tmp_path, **{"--rollout-sample-hook-path": None}), capsys)
    assert code == 0 and "warning: --rollout-sample-hook-path" in err and "stay null" in err


def test_without_slime_the_kept_list_decides_and_with_slime_its_own_parser(tmp_path, capsys, monkeypatch) -> None:
    import argparse
    import types

    from shopsim_metrics.settings.slime_flags import slime_parser_flags

    assert slime_parser_flags() is None  # the test interpreter has no slime
    code, out, _ = run(launch(tmp_path), capsys)
    assert code == 0 and "every flag against the slime flags kept in the project" in out

    def parse_args():  # a slime whose parser knows the launch's flags but not --lr
        parser = argparse.ArgumentParser(allow_abbrev=False)
        for flag in launch(tmp_path)[::2]:
            if flag != "--lr":
                parser.add_argument(flag)
        parser.add_argument("--required-flag", required=True)
        return parser.parse_known_args(["train.py"][1:])

    fake = types.ModuleType("slime.utils.arguments")
    fake.parse_args = parse_args
    for name, module in (("slime", types.ModuleType("slime")), ("slime.utils", types.ModuleType("slime.utils")),
                         ("slime.utils.arguments", fake)):
        monkeypatch.setitem(sys.modules, name, module)
    sys.modules["slime.utils"].arguments = fake
    assert "--required-flag" in slime_parser_flags()
    code, out, err = run(launch(tmp_path), capsys)
    assert code == 2 and "--lr: not a flag slime knows" in err  # slime's own parser decided, not the kept list
