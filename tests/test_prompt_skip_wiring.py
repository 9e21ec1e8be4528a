"""The skipping data source and the monitor in one process: the data source learns from the monitor's
prompt history (fed by the filter's judgements through slime's hooks, loaded by dotted path) and the
monitor records the skips in each step's record."""

from __future__ import annotations

import importlib
from types import SimpleNamespace

import pytest

from shopsim_metrics.judging.prompt_keys import prompt_key
from shopsim_metrics.sinks import MemorySink
from shopsim_metrics.record.contract import SKIPPED_PROMPT_COLUMNS
from shopsim_metrics.loop.loop_state import ManualLoopState
from tests.test_data_source import CERTAIN, FakeSlimeDataSource, pool
from tests.wandb_helpers import wandb_env  # noqa: F401 - a fixture

N = 4
HOOKS = importlib.import_module("shopsimrl.slime_runtime")
DATA_SOURCE = importlib.import_module("shopsimrl.data_source").PromptSkipDataSource


def is_hard(group) -> bool:
    return int(group[0].label) % 2 == 0  # even prompts: every rollout fails, always


def generate(group, step: int) -> None:
    """Rewards and tokens for one served group: hard prompts all-fail, the others spread."""
    for i, sample in enumerate(group):
        sample.rollout_id = step * 10_000 + sample.index
        sample.reward = 0.0 if is_hard(group) else float(i % 2)
        sample.response_length = 100


def run_steps(tmp_path, steps: int, sinks: str | None = None, **settings) -> tuple[list, object, MemorySink]:
    """``steps`` rollout steps of 4 groups, each through the three hooks; returns the served groups, source, sink.

    ``sinks="built"``: the monitor builds its own (JSONL under ``tmp_path/run``, W&B as ``shopsim_wandb`` says).
    """
    args = SimpleNamespace(rollout_batch_size=4, n_samples_per_prompt=N, over_sampling_batch_size=4,
                           global_batch_size=16, reward_key=None, rollout_shuffle=False, rollout_seed=1,
                           rollout_global_dataset=True, save=str(tmp_path / "ckpt"), load=None,
                           shopsim_run_dir=str(tmp_path / "run"), **{"shopsim_wandb": "off", **settings})
    sink, loop = MemorySink(), ManualLoopState("test")
    HOOKS.configure(args, sinks=None if sinks == "built" else [sink], loop_state=loop)
    ds = DATA_SOURCE(args, inner=FakeSlimeDataSource(args, pool(16)))
    served_per_step = []
    for step in range(steps):
        loop.step, loop.remaining = step, 4
        groups = ds.get_samples(4)
        served_per_step.append(groups)
        for group in groups:
            generate(group, step)
            if HOOKS.fully_scored_group_filter(args, group).keep:
                loop.remaining -= 1
        HOOKS.record_all_samples(args, groups, ds.get_samples)
        HOOKS.log_rollout_step(step, args, [], {}, 10.0)
    return served_per_step, ds, sink


@pytest.fixture(autouse=True)
def _fresh_monitor():
    yield
    HOOKS.reset_runtime()


def test_the_data_source_learns_from_the_monitors_history_fed_by_the_filter(tmp_path) -> None:
    served, ds, _ = run_steps(tmp_path, 6, shopsim_prompt_skip="greso", **CERTAIN)
    assert ds.history.tracker is HOOKS.get_runtime(ds.args).parts.prompts  # one history, the monitor's
    first_epoch = [g for step in served[:4] for g in step]
    assert sum(map(is_hard, first_epoch)) == 8  # nothing known yet: slime's order, hard prompts generated
    later = [g for step in served[4:] for g in step]
    assert later and not any(map(is_hard, later))  # every hard prompt was skipped from then on


def test_off_never_attaches_and_serves_slimes_order(tmp_path) -> None:
    served, ds, sink = run_steps(tmp_path, 6, shopsim_prompt_skip="off")
    assert ds._history is None and HOOKS.get_runtime(ds.args).prompt_skip_source is None
    assert [int(g[0].label) for step in served for g in step] == [i % 16 for i in range(24)]


def test_each_record_says_what_was_skipped_and_what_it_cost(tmp_path) -> None:
    served, ds, sink = run_steps(tmp_path, 8, shopsim_prompt_skip="greso", **CERTAIN)
    records = {r.rollout_id: r for r in sink.records}
    assert [records[s].skipped_prompt_count for s in range(4)] == [0, 0, 0, 0]  # nothing known in epoch 1
    later = [records[s] for s in range(4, 8)]
    hard_keys = {prompt_key(g)[0] for step in served[:4] for g in step if is_hard(g)}
    for record in later:
        assert record.skipped_prompt_count == len(record.skipped_prompts) > 0
        assert {row["prompt_key"] for row in record.skipped_prompts} <= hard_keys
        assert all(row["zero_std_run"] == 1 and row["skip_probability"] == 1.0 for row in record.skipped_prompts)
        assert all(set(row) == set(SKIPPED_PROMPT_COLUMNS) for row in record.skipped_prompts)
        assert not any("saved" in name for name in vars(record))  # a skip is replaced by a draw: never "saved"
        assert (record.skip_p_easy, record.skip_p_hard) == (0.0, 0.0)
        assert record.skipped_then_generated_group_count == 0 and record.skipped_then_spread_rate is None
    assert sum(r.skipped_prompt_count for r in later) == 16  # 16 spread prompts served = 2 epochs: 8 hard skipped in each
    assert ds.take_skipped() == []  # the monitor took every skip into a record


def test_a_skipped_prompt_generated_again_with_spread_is_counted(tmp_path) -> None:
    from dataclasses import replace

    from shopsim_metrics.prompts.skip_record import SkippedPrompt, SkipTally
    from shopsim_metrics.record.records import DecisionRow, StepRecord

    def row(gi, key, spread):
        return DecisionRow(order=gi, waves_open=1, group_index=gi, outcome="trained" if spread else "dropped_zero_std",
                           reason=None if spread else "shopsim_zero_std_group", remaining_before=4, unique_rollouts=2,
                           success_count=1 if spread else 0, scorable_rollouts=2, prompt_key=key)

    tally = SkipTally()
    first = StepRecord(rollout_id=0, decisions=[row(1, "a", False), row(5, "b", True)])
    # "b" was served (5) before its skip (7): not a skipped-then-generated group; "a" skipped at 3 and not back yet
    first = replace(first, **tally.step_fields(first.decisions, [
        SkippedPrompt("a", 1, 0.5, "zero_std_all_fail", 3), SkippedPrompt("b", 1, 0.5, "zero_std_all_fail", 7)],
        p_easy=0.5, p_hard=0.5))
    assert (first.skipped_then_generated_group_count, first.skipped_then_spread_group_count) == (0, 0)
    second = StepRecord(rollout_id=1, decisions=[row(9, "a", True), row(10, "b", False), row(11, "a", True)])
    second = replace(second, **tally.step_fields(second.decisions, [], p_easy=0.49, p_hard=0.51))
    assert (second.skipped_then_generated_group_count, second.skipped_then_spread_group_count) == (2, 1)
    assert second.skipped_then_spread_rate == 0.5 and second.skipped_prompt_count == 0


def test_off_records_and_jsonl_are_as_without_the_feature(tmp_path) -> None:
    import json

    run_steps(tmp_path, 3, sinks="built", shopsim_prompt_skip="off")
    HOOKS.reset_runtime()
    lines = [json.loads(line) for line in (tmp_path / "run" / "steps.jsonl").read_text().splitlines()]
    from shopsim_metrics.record import contract

    skip_keys = set(contract.PROMPT_SKIP_FIELDS) | {"skipped_prompts"}
    assert len(lines) == 3 and not skip_keys & {k for line in lines for k in line}


def test_the_skips_reach_the_records_file_and_a_wandb_table(tmp_path, wandb_env) -> None:  # noqa: F811
    import json
    from pathlib import Path

    import wandb

    from shopsim_metrics.readers.wandb_offline import read_offline_run
    from shopsim_metrics.sinks.wandb_sink import SKIPPED_PROMPTS_KEY
    from shopsim_metrics.record import contract

    slime_run = wandb.init(project="slime")
    run_dir = Path(slime_run.dir).parent
    run_steps(tmp_path, 6, sinks="built", shopsim_prompt_skip="greso", shopsim_wandb="join", use_wandb=True,
              **CERTAIN)
    HOOKS.reset_runtime()
    slime_run.finish()
    lines = [json.loads(line) for line in (tmp_path / "run" / "steps.jsonl").read_text().splitlines()]
    counts = [line["skipped_prompt_count"] for line in lines]
    assert counts[:4] == [0, 0, 0, 0] and all(counts[4:])
    run = read_offline_run(run_dir)
    tables = run.tables[SKIPPED_PROMPTS_KEY]
    assert [t.row[contract.WANDB_STEP_KEY] for t in tables] == [4, 5]
    assert [r["prompt_key"] for r in tables[0].records()] == [r["prompt_key"] for r in lines[4]["skipped_prompts"]]
    scalars = [r for r in run.history if contract.wandb_key("skipped_prompt_count") in r]
    assert [r[contract.wandb_key("skipped_prompt_count")] for r in scalars] == counts


def _step(args, ds, loop, step: int) -> list[str]:
    """One step through the hooks, then slime's checkpoint of the data source; returns the served labels."""
    loop.step, loop.remaining = step, 4
    groups = ds.get_samples(4)
    for group in groups:
        generate(group, step)
        if HOOKS.fully_scored_group_filter(args, group).keep:
            loop.remaining -= 1
    HOOKS.record_all_samples(args, groups, ds.get_samples)
    HOOKS.log_rollout_step(step, args, [], {}, 10.0)
    ds.save(step)
    return [g[0].label for g in groups]


@pytest.mark.parametrize("rule", [
    {"shopsim_prompt_skip": "greso", "shopsim_prompt_skip_p_easy_start": 0.2, "shopsim_prompt_skip_p_hard_start": 0.2},
    # a loose limit: the guard skips nothing until its bound allows, and ten steps of 16 prompts show little
    {"shopsim_prompt_skip": "predictive", "shopsim_prompt_skip_threshold": 0.8, "shopsim_prompt_skip_probe_every": 2,
     "shopsim_prompt_skip_max_lost_signal": 0.6}])
def test_a_resumed_run_skips_as_the_unbroken_one(tmp_path, rule) -> None:
    """GRESO's random rule (seeded): the p values and random state come from the data source's file; the
    predictive rule's guard: its numbers and pending probes; the prompt history from the monitor's records: the
    steps after the checkpoint serve the same prompts."""
    import json
    import shutil

    def make(run_dir, **extra):
        return SimpleNamespace(rollout_batch_size=4, n_samples_per_prompt=N, over_sampling_batch_size=4,
                               global_batch_size=16, reward_key=None, rollout_shuffle=True, rollout_seed=1,
                               rollout_global_dataset=True, save=str(tmp_path / "ckpt"), shopsim_run_dir=str(run_dir),
                               shopsim_wandb="off", **rule, **extra)

    def records(run_dir):
        return [json.loads(x) for x in (run_dir / "steps.jsonl").read_text().splitlines()]

    args, loop = make(tmp_path / "run", load=None), ManualLoopState("test")
    HOOKS.configure(args, sinks=None, loop_state=loop)
    ds = DATA_SOURCE(args, inner=FakeSlimeDataSource(args, pool(16)))
    unbroken = [_step(args, ds, loop, step) for step in range(10)]
    HOOKS.reset_runtime()
    assert sum(r["skipped_prompt_count"] for r in records(tmp_path / "run")[6:]) > 0  # skipping happened

    resumed_dir = tmp_path / "resumed"
    shutil.copytree(tmp_path / "run", resumed_dir)
    (resumed_dir / "steps.jsonl").write_text("".join(
        json.dumps(r) + "\n" for r in records(tmp_path / "run") if r["rollout_id"] < 6))  # what step 5's checkpoint saw
    args, loop = make(resumed_dir, load=str(tmp_path / "ckpt"), start_rollout_id=6), ManualLoopState("test")
    HOOKS.configure(args, sinks=None, loop_state=loop)
    ds = DATA_SOURCE(args, inner=FakeSlimeDataSource(args, pool(16)))
    ds.load(5)
    resumed = [_step(args, ds, loop, step) for step in range(6, 10)]
    HOOKS.reset_runtime()
    assert resumed == unbroken[6:]
    from shopsim_metrics.record import contract

    def skip_fields(run_dir):
        return [{k: r[k] for k in (*contract.PROMPT_SKIP_FIELDS, "skipped_prompts")} for r in records(run_dir)[6:]]

    assert skip_fields(resumed_dir) == skip_fields(tmp_path / "run")  # pending skips restored from the records too
    after = records(tmp_path / "run")[6:]
    if rule["shopsim_prompt_skip"] == "greso":  # skipped prompts generated again after the checkpoint
        assert sum(r["skipped_then_generated_group_count"] for r in after) > 0
    else:  # the guard served probes after the checkpoint, and its estimate moved
        assert sum(r["skip_probe_count"] for r in after) > 0 and len({r["skip_lost_signal_estimate"] for r in after}) > 1
