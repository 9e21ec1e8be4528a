"""The hooks know which loop loads them (slime, miles, or neither) and are never silently wrong in it.

Each case loads the hooks in a fresh interpreter (``tests/loop_check.py``) beside tiny stand-ins of slime and
miles written here, each to the contract read from that framework's source: slime's ``DynamicFilterOutput`` has
``keep_when_insufficient``, miles' has ``keep`` and ``reason`` only and its ``call_dynamic_filter`` wraps any other
answer as ``keep`` (so a foreign class would keep every group), miles' old rollout keeps
``remaining_batch_size`` in a ``GenerateState`` singleton, its class-based rollout keeps none, and neither keeps a
live rollout id.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from shopsim_metrics.settings.loops import MILES, NO_LOOP, SLIME, LoopUnknown, detect_loop, unsupported


CHECK = Path(__file__).resolve().parent / "loop_check.py"
ROOT = CHECK.parents[1]

FAKES = {
    "slime/__init__.py": "",
    "slime/rollout/__init__.py": "",
    "slime/rollout/filter_hub/__init__.py": "",
    "slime/rollout/filter_hub/base_types.py": (
        "from dataclasses import dataclass\n\n\n@dataclass\nclass DynamicFilterOutput:\n    keep: bool\n"
        "    reason: str | None = None\n    keep_when_insufficient: bool = False\n"),
    "miles/__init__.py": "",
    "miles/rollout/__init__.py": "",
    "miles/rollout/filter_hub/__init__.py": "",
    "miles/rollout/filter_hub/base_types.py": (
        "from dataclasses import dataclass\n\n\n@dataclass\nclass DynamicFilterOutput:\n    keep: bool\n"
        "    reason: str | None = None\n\n\ndef call_dynamic_filter(fn, *args, **kwargs):\n"
        "    output = fn(*args, **kwargs)\n"
        "    return output if isinstance(output, DynamicFilterOutput) else DynamicFilterOutput(keep=output)\n"),
    "miles/rollout/sglang_rollout.py": (
        "class Singleton(type):\n    _instances = {}\n\n    def __call__(cls, *args):\n"
        "        if cls not in cls._instances:\n            cls._instances[cls] = super().__call__(*args)\n"
        "        return cls._instances[cls]\n\n\nclass GenerateState(metaclass=Singleton):\n"
        "    def __init__(self, args):\n        self.args = args\n        self.remaining_batch_size = 0\n\n\n"
        "async def generate(args, sample, sampling_params):\n    return sample\n"),
    "miles/rollout/generate_hub/__init__.py": "",
    "miles/rollout/generate_hub/single_turn.py": (
        "class Output:\n    def __init__(self, samples):\n        self.samples = samples\n\n\n"
        "async def generate(input):\n    return Output(input.sample)\n"),
    "miles/rollout/inference_rollout/__init__.py": "",
    "miles/rollout/inference_rollout/compatibility.py": (
        "import importlib\n\nfrom miles.rollout.generate_hub.single_turn import Output\n\n\n"
        "def load_generate_function(path):\n    module, _, name = path.rpartition('.')\n"
        "    fn = getattr(importlib.import_module(module), name)\n    if name == 'generate' and 'sglang' in module:\n"
        "        async def legacy(input):\n            return Output(await fn(input.state.args, input.sample, {}))\n"
        "        return legacy\n    return fn\n"),
}


@pytest.fixture(scope="module")
def fakes(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("fakes")
    for name, text in FAKES.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def check(fakes: Path, loop: str, scenario: str, run_dir: Path) -> dict:
    done = subprocess.run([sys.executable, str(CHECK), str(fakes), loop, scenario, str(run_dir)],
                          capture_output=True, text=True, cwd=ROOT, timeout=300,
                          env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "WANDB_MODE": "disabled"})
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


# --- which loop ------------------------------------------------------------------------------------
def test_the_loop_is_the_one_imported_else_the_one_importable():
    assert detect_loop({"slime.rollout": 1, "slime": 1}, importable=lambda name: True) == SLIME
    assert detect_loop({"miles": 1}, importable=lambda name: True) == MILES
    assert detect_loop({}, importable=lambda name: name == "miles") == MILES
    assert detect_loop({}, importable=lambda name: False) == NO_LOOP
    for modules, importable in (({"slime": 1, "miles": 1}, False), ({}, True)):
        with pytest.raises(LoopUnknown) as err:
            detect_loop(modules, importable=lambda name, i=importable: i)
        assert "\n" not in str(err.value) and "slime and miles" in str(err.value)


def test_slime_and_no_loop_refuse_nothing_here():
    from types import SimpleNamespace
    args = SimpleNamespace(fully_async=True, rollout_submission_granularity="sample",
                           data_source_path="shopsimrl.data_source.PromptSkipDataSource")
    assert unsupported(SLIME, args) == [] and unsupported(NO_LOOP, args) == []
    assert len(unsupported(MILES, args)) == 3


@pytest.mark.parametrize("loop,module,fields", [
    ("slime", "slime.rollout.filter_hub.base_types", ["keep", "keep_when_insufficient", "reason"]),
    ("miles", "miles.rollout.filter_hub.base_types", ["keep", "reason"]),
    ("none", "shopsimrl.slime_bridge", ["keep", "keep_when_insufficient", "reason"]),
])
def test_each_loop_gets_its_own_filter_output(fakes, tmp_path, loop, module, fields):
    got = check(fakes, loop, "load", tmp_path / "run")
    assert (got["loop"], got["output_module"], got["fields"]) == (loop, module, fields)
    # slime lets a zero-std group through itself (keep_when_insufficient); in miles the filter decides: with
    # nothing accounted (no rollout_batch_size) a zero-std group is kept (no reason), so no step can wait forever
    assert got["keep"] is (loop == "miles")
    assert got["reason"] == (None if loop == "miles" else "shopsim_zero_std_group")


@pytest.mark.parametrize("loop,says", [("both", "both slime and miles are imported"),
                                       ("unimported", "both slime and miles are importable")])
def test_both_loops_in_one_process_stop_the_load_with_one_line(fakes, tmp_path, loop, says):
    got = check(fakes, loop, "load", tmp_path / "run")
    assert "\n" not in got["error"] and says in got["error"]


def test_what_miles_cannot_run_stops_the_first_call_with_one_line(fakes, tmp_path):
    got = check(fakes, "miles", "refuse", tmp_path / "run")
    assert set(got) == {"fully_async", "sample_granularity", "prompt_skip", "async_rollout", "data_source"}
    for name, line in got.items():
        assert line is not None, f"{name}: not refused"
        assert line.startswith("LoopUnsupported: ") and "\n" not in line and "docs/miles.md" in line, line
    assert "--fully-async" in got["fully_async"] and "AsyncRolloutWorker" in got["async_rollout"]
    assert not (tmp_path / "run" / "steps.jsonl").exists()  # nothing recorded


# --- miles' loop: records equal to what miles trained, every step ends ---------------------------
@pytest.mark.parametrize("scenario,source", [("steps-new", "mirror"), ("steps-old", "miles")])
def test_in_miles_the_records_are_what_miles_trained_and_every_step_ends(fakes, tmp_path, scenario, source):
    got = check(fakes, "miles", scenario, tmp_path / "run")
    assert "error" not in got, got.get("error")
    truth, records = got["truth"], got["records"]
    assert [r["rollout_id"] for r in records] == [t["rollout_id"] for t in truth] == [0, 1, 2, 3]  # no live id
    for t, r in zip(truth, records):
        assert r["trained"] == t["trained"] and r["dropped"] == t["dropped"], (t, r)
        assert r["wave_count"] == t["waves"] and r["submitted"] == t["submitted"]
        assert {reason: n for reason, n in r["slime_drop_counts"].items() if n} == t["drops"]
        assert r["loop_state_source"] == source
        assert r["total_token_count"] == t["tokens"] and r["token_count_source"] == "generate_function"
        assert "keep_when_insufficient" not in json.dumps(r)
    zero = records[2]  # every group zero-std: slime's fallback, decided by the filter, ends it in its first wave
    assert truth[2]["waves"] == 1 and zero["fallback"] == 4 and len(zero["dropped"]) == 2
    assert any(r["fallback"] < len(r["trained"]) for r in records)  # groups with spread trained as such


# --- preflight and check-config know the loop too ---------------------------------------------------
MILES_LAUNCH = ["--rollout-batch-size", "4", "--n-samples-per-prompt", "2", "--over-sampling-batch-size", "8",
                "--dynamic-sampling-filter-path", "shopsimrl.slime_runtime.fully_scored_group_filter",
                "--rollout-all-samples-process-path", "shopsimrl.slime_runtime.record_all_samples",
                "--custom-rollout-log-function-path", "shopsimrl.slime_runtime.log_rollout_step",
                "--custom-generate-function-path", "shopsimrl.miles_generate.count_generated_tokens"]


def test_preflight_for_miles_checks_what_miles_can_run(tmp_path):
    from shopsim_metrics.settings.preflight import preflight

    env = {"SHOPSIM_RUN_DIR": str(tmp_path)}
    sound = preflight(MILES_LAUNCH, environ=env, loop="miles")
    assert sound.problems == [] and any(line.startswith("loop: miles") for line in sound.checked)
    # miles-only flags are not "unknown to slime" there; slime's sample hook is
    bad = preflight([*MILES_LAUNCH, "--fully-async", "--rollout-submission-granularity", "sample",
                     "--rollout-sample-hook-path", "shopsimrl.slime_runtime.record_generated_sample"],
                    environ=env, loop="miles")
    assert len(bad.problems) == 3 and all("\n" not in line for line in bad.problems)
    assert bad.problems[-1].startswith("--rollout-sample-hook-path: miles has no such flag")
    no_counter = preflight(MILES_LAUNCH[:-2], environ=env, loop="miles")
    assert no_counter.problems == [] and any("stay null" in w for w in no_counter.warnings)
    # for slime, a miles-only flag is one slime does not know
    assert any(p.startswith("--rollout-submission-granularity: not a flag slime knows") for p in preflight(
        [*MILES_LAUNCH, "--rollout-submission-granularity", "group"], environ=env, loop="slime").problems)


def test_check_config_for_miles_refuses_what_acts_through_slime_only(tmp_path):
    from shopsim_metrics.settings.check import check_file

    path = tmp_path / "shopsim.yaml"
    path.write_text("shopsim_prompt_skip: greso\nshopsim_wave_size: adaptive\n")
    assert check_file(path) == [] and check_file(path, loop="slime") == []
    problems = check_file(path, loop="miles")
    assert [p.split(":")[0] for p in problems] == ["line 1", "line 2"] and all("miles cannot run" in p for p in problems)
