"""The hooks inside miles' own rollout loop (opt-in: set MILES_SRC to a miles checkout; run in the venv that
``tests/miles_loop/setup_env.sh`` builds)::

    MILES_SRC=/work/miles-src /work/miles-venv/bin/python -m pytest tests/test_miles_loop.py -q -p no:cacheprovider -o addopts=

miles' own CPU fixtures (``tests/fast/fixtures/rollout_fixtures.py``: its argument parser, its data source, its
router and its mock SGLang server, which answers ``What is a+b?`` with ``\\boxed{a+b}``) run miles' rollout
functions, both of them: the class-based ``InferenceRolloutFn`` (the default) and the old
``miles.rollout.sglang_rollout.generate_rollout``. The hooks are wired as docs/miles.md says; groups of 2 samples
get rewards from a reward function of this test by their prompt's label (``spread``: 0 and 1 in each group,
``pass``/``fail``: all 1 / all 0, ``broken``: none, a technical group), so drops and second waves happen. After each step miles' own ``log_rollout_data`` runs (it calls
the log function first, then logs miles' metrics). Checked against what miles itself did: the groups it trained
(its train batch), the groups it judged (what it handed the all-samples hook), its drop counters, the requests
its mock server received (waves = requests / (over_sampling_batch_size x n_samples_per_prompt)), every token the
server generated; an all-zero-std step ends; the log function's figures land beside miles' metrics in W&B.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

MILES_SRC = os.environ.get("MILES_SRC")
if not MILES_SRC:
    pytest.skip("set MILES_SRC to a miles checkout (and use the venv tests/miles_loop/setup_env.sh builds) to run "
                "the hooks in miles' own loop", allow_module_level=True)
if MILES_SRC not in sys.path:
    sys.path.insert(0, MILES_SRC)
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from miles.ray.rollout import metrics as miles_metrics  # noqa: E402
from miles.rollout.base_types import RolloutFnConstructorInput, RolloutFnTrainInput  # noqa: E402
from miles.rollout.inference_rollout.compatibility import call_rollout_function, load_rollout_function  # noqa: E402
from miles.utils.misc import function_registry  # noqa: E402
from tests.fast.fixtures import rollout_fixtures  # noqa: E402 (miles' own fixtures, from the checkout)

from shopsim_metrics.readers import read_steps  # noqa: E402
from shopsimrl import LOOP, slime_runtime  # noqa: E402

RolloutEnvConfig = rollout_fixtures.RolloutEnvConfig
rollout_env = rollout_fixtures.rollout_env  # miles' fixture: its args, data source, router and mock server

TOKENIZER = os.environ.get("MILES_TOKENIZER", str(Path(sys.prefix) / "tokenizer"))
INFERENCE_ROLLOUT = "miles.rollout.inference_rollout.inference_rollout_common.InferenceRolloutFn"
OLD_ROLLOUT = "miles.rollout.sglang_rollout.generate_rollout"
BATCH, N, OVER = 2, 2, 4
ROWS_MIXED = [{"input": f"What is 1+{b}?", "label": label} for b, label in enumerate([
    "broken", "broken", "spread", "broken",  # three technical drops: a second wave, whatever the finishing order
    "spread", "pass", "fail", "spread",
    "pass", "spread", "fail", "pass"])]
ROWS_ZERO_STD = [{"input": f"What is 2+{b}?", "label": "pass"} for b in range(8)]
judged_groups: list[list] = []


async def reward_by_label(args, sample, **kwargs) -> float | None:
    """``spread``: the group's samples alternate 0, 1 (miles' ``index`` runs on within a group); ``broken``: no reward
    (a technical group); else all 1 or all 0."""
    if sample.label == "broken":
        return None
    if sample.label == "spread":
        return float(sample.index % 2)
    return 1.0 if sample.label == "pass" else 0.0


def capture_then_record(args, all_groups, data_source) -> None:
    """The all-samples hook as wired, with what miles handed it kept for the test."""
    judged_groups.extend(all_groups)
    slime_runtime.record_all_samples(args, all_groups, data_source)


def config(rollout: str, rows: list[dict], all_samples: str = "test:capture_then_record") -> RolloutEnvConfig:
    return RolloutEnvConfig(extra_argv=[
        "--rollout-function-path", rollout,
        "--hf-checkpoint", TOKENIZER,
        "--rollout-batch-size", str(BATCH), "--n-samples-per-prompt", str(N), "--over-sampling-batch-size", str(OVER),
        "--global-batch-size", str(BATCH * N),
        "--custom-rm-path", "test:reward_by_label",
        "--dynamic-sampling-filter-path", "shopsimrl.slime_runtime.fully_scored_group_filter",
        "--rollout-all-samples-process-path", all_samples,
        "--custom-rollout-log-function-path", "shopsimrl.slime_runtime.log_rollout_step",
        "--custom-generate-function-path", "shopsimrl.miles_generate.count_generated_tokens",
    ], data_rows=rows)


@pytest.fixture
def registered():
    judged_groups.clear()
    slime_runtime.reset_runtime()
    with function_registry.temporary("test:reward_by_label", reward_by_label), \
            function_registry.temporary("test:capture_then_record", capture_then_record):
        yield
    slime_runtime.reset_runtime()


def run_steps(env, run_dir: Path, steps: int, logged: list[dict]) -> list[dict]:
    """Run ``steps`` rollout steps as miles' RolloutManager does (rollout function, then ``log_rollout_data``); per
    step, what miles did."""
    env.args.shopsim_run_dir = str(run_dir)
    fn = load_rollout_function(RolloutFnConstructorInput(args=env.args, data_source=env.data_source),
                               env.args.rollout_function_path)
    truth = []
    for rollout_id in range(steps):
        env.mock_server.reset_stats()
        judged_groups.clear()
        output = call_rollout_function(fn, RolloutFnTrainInput(rollout_id=rollout_id))
        samples = [s for group in output.samples for s in group]
        miles_metrics.log_rollout_data(rollout_id, env.args, samples, output.metrics, 1.0)
        requests = list(env.mock_server.request_log)
        tokenizer = env.mock_server.tokenizer
        generated = sum(len(tokenizer.encode(env.mock_server.process_fn(tokenizer.decode(r["input_ids"])).text,
                                             add_special_tokens=False)) for r in requests)
        truth.append({"trained": sorted(g[0].group_index for g in output.samples),
                      "judged": sorted(g[0].group_index for g in judged_groups),
                      "drops": {k: v for k, v in output.metrics.items() if v},
                      "requests": len(requests), "generated": generated})
    assert len(logged) == steps, "miles' own logging did not run after the log function (it must return False)"
    return truth


def step_records(run_dir: Path) -> list[dict]:
    return [r.to_dict() for r in read_steps(run_dir)]


def outcomes(record: dict, *names: str) -> list[int]:
    return sorted(d["group_index"] for d in record["decisions"] if d["outcome"] in names)


@pytest.fixture
def miles_logged(monkeypatch) -> list[dict]:
    """miles' own rollout metrics, as ``log_rollout_data`` hands them to its tracking."""
    logged: list[dict] = []
    monkeypatch.setattr(miles_metrics.tracking, "log", lambda args, d, step_key=None: logged.append(dict(d)))
    return logged


def test_the_hooks_and_preflight_know_they_are_in_miles(tmp_path):
    from shopsim_metrics.settings.preflight import preflight

    assert LOOP == "miles" and slime_runtime._FilterOutput.__module__ == "miles.rollout.filter_hub.base_types"
    launch = ["--rollout-batch-size", "2", "--n-samples-per-prompt", "2", "--over-sampling-batch-size", "4",
              "--dynamic-sampling-filter-path", "shopsimrl.slime_runtime.fully_scored_group_filter",
              "--rollout-all-samples-process-path", "shopsimrl.slime_runtime.record_all_samples",
              "--custom-rollout-log-function-path", "shopsimrl.slime_runtime.log_rollout_step",
              "--custom-generate-function-path", "shopsimrl.miles_generate.count_generated_tokens"]
    report = preflight(launch, environ={"SHOPSIM_RUN_DIR": str(tmp_path)})  # the loop: the one installed
    assert report.problems == [] and any(line.startswith("loop: miles") for line in report.checked)


@pytest.mark.parametrize("rollout_env,source", [
    pytest.param(config(INFERENCE_ROLLOUT, ROWS_MIXED), "mirror", id="inference_rollout"),
    pytest.param(config(OLD_ROLLOUT, ROWS_MIXED), "miles", id="old_sglang_rollout"),
], indirect=["rollout_env"])
def test_records_equal_what_miles_trained_and_dropped(registered, miles_logged, rollout_env, tmp_path, source):
    truth = run_steps(rollout_env, tmp_path / "run", 3, miles_logged)
    records = step_records(tmp_path / "run")
    assert [r["rollout_id"] for r in records] == [0, 1, 2]  # numbered without a live rollout id
    dropped_any = 0
    for t, r, logged in zip(truth, records, miles_logged):
        assert outcomes(r, "trained", "fallback") == t["trained"], (t, r["decisions"])
        assert sorted(d["group_index"] for d in r["decisions"]) == t["judged"]
        drops = {f"rollout/dynamic_filter/drop_{reason}": n for reason, n in r["slime_drop_counts"].items() if n}
        assert drops == t["drops"]
        assert r["zero_std_group_drop_count"] + r["technical_group_drop_count"] == sum(t["drops"].values())
        assert {k: v for k, v in logged.items() if k.startswith("rollout/dynamic_filter/")} == t["drops"]
        assert t["requests"] == r["wave_count"] * OVER * N, (t, r["wave_count"])  # waves = requests / over-sampling
        assert r["submitted_group_count"] == r["wave_count"] * OVER
        assert r["total_token_count"] == t["generated"] and r["token_count_source"] == "generate_function"
        assert r["loop_state_source"] == source
        dropped_any += len(outcomes(r, "dropped_zero_std"))
    assert dropped_any > 0, "no zero-std group was dropped: the rows did not exercise the filter"
    assert any(outcomes(r, "trained") for r in records) and any(outcomes(r, "fallback") for r in records)
    assert [r["wave_count"] for r in records] == [2, 1, 2]  # three technical drops open a second wave


@pytest.mark.parametrize("rollout_env", [
    pytest.param(config(INFERENCE_ROLLOUT, ROWS_ZERO_STD), id="inference_rollout"),
    pytest.param(config(OLD_ROLLOUT, ROWS_ZERO_STD), id="old_sglang_rollout"),
], indirect=["rollout_env"])
def test_a_step_whose_groups_are_all_zero_std_ends(registered, miles_logged, rollout_env, tmp_path):
    truth = run_steps(rollout_env, tmp_path / "run", 1, miles_logged)
    (record,) = step_records(tmp_path / "run")
    assert record["wave_count"] == 1 and truth[0]["requests"] == OVER * N
    assert record["fallback_group_count"] == BATCH and outcomes(record, "fallback") == truth[0]["trained"]
    assert record["zero_std_group_drop_count"] == OVER - BATCH == sum(truth[0]["drops"].values())


@pytest.mark.parametrize("rollout_env", [
    pytest.param(config(INFERENCE_ROLLOUT, ROWS_MIXED, "shopsimrl.slime_runtime.record_all_samples"), id="wandb"),
], indirect=["rollout_env"])
def test_the_log_functions_figures_land_beside_miles_metrics(registered, rollout_env, tmp_path, monkeypatch):
    """miles' W&B backend logs its rollout metrics with ``wandb.log``; the hooks log into the run that exists."""
    import wandb

    from shopsim_metrics.readers.wandb_offline import find_run_dirs, read_offline_run

    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    run = wandb.init(project="shopsim-miles", dir=str(tmp_path), mode="offline")
    logged: list[dict] = []

    def wandb_log(args, d, step_key=None):
        logged.append(dict(d))
        wandb.log(d)

    monkeypatch.setattr(miles_metrics.tracking, "log", wandb_log)
    rollout_env.args.use_wandb = True
    try:
        run_steps(rollout_env, tmp_path / "run", 2, logged)
        slime_runtime.reset_runtime()
    finally:
        run.finish()
    rows = read_offline_run(find_run_dirs(tmp_path)[0]).history
    ours = [row for row in rows if "rollout/shopsim/zero_std_group_drop_count" in row]
    theirs = [row for row in rows if any(k.startswith("rollout/dynamic_filter/") for k in row) or "rollout/response_len/mean" in row]
    assert [row["rollout/step"] for row in ours] == [0, 1] and len(theirs) == 2, json.dumps(rows)[:2000]
    for mine, miles_row in zip(ours, theirs):
        assert mine["rollout/step"] == miles_row["rollout/step"]
        assert mine["rollout/shopsim/zero_std_group_drop_count"] == miles_row.get(
            "rollout/dynamic_filter/drop_shopsim_zero_std_group", 0)
