"""slime's own ``train.py --debug-rollout-only``: its ``--save-debug-rollout-data`` files read back as the run's trace.

The harness of ``test_slime_train.py`` (slime's real driver, data source and rollout loop on CPU, the fake
engine, a private Ray head) on a pool of 24 prompts of the shared trace (``slime_train/trace_pool.py``: each
group's rewards are its prompt's recorded visit at the step, exactly ``k`` of 8 succeed; the engine's response
lengths per prompt, long-tailed). Two runs of 6 steps, 4 groups of 8 per step:

- **without a dynamic filter** (none of the project's hooks; waves of 4, the batch: every group generated
  trains, none is aborted): the trace read from slime's dump (``shopsim_metrics.outcomes``, ``--whole-run``,
  ``--prompt-key prompt_id``) equals the run's ground truth exactly: per step, each group's successes and
  zero-std verdict from the rewards the reward function returned (its own log,
  ``harness_reward.REWARD_LOG_ARG``), and its tokens from the engine's per-request log. ``replay``,
  ``prompts`` and ``dashboard html`` take the dump;
- **with the project's filter** (its four hooks; waves of 8, so zero-std groups are dropped, with fallback):
  the dump is refused unless the user says what it holds; with ``--kept-only`` it reads exactly the groups
  the project's records say slime trained (outcome ``trained`` or ``fallback``), says the figures are biased,
  and counts the groups missing between the dump's group numbers (dropped or aborted).

Skipped unless ``SLIME_SRC`` and ``MEGATRON_SRC`` are set (see ``test_slime_train.py``)::

    PYTHONPATH=<this checkout>:<this checkout>/filter SLIME_SRC=... MEGATRON_SRC=... \\
      /work/slime-venv/bin/python -m pytest tests/test_slime_train_dumps.py -q
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict

import pytest

import harness  # tests/slime_train, put on the path by conftest.py (not a package: never collected)
import harness_reward
import trace_pool

from shopsim_metrics.cli import main
from shopsim_metrics.outcomes.groups import KEPT_ONLY, WHOLE_RUN, DumpOptions
from shopsim_metrics.outcomes.sources import load_outcomes

SLIME_SRC, MEGATRON_SRC = harness.SLIME_SRC, harness.MEGATRON_SRC
pytestmark = harness.pytest_marks(timeout=1500)

N_SAMPLES = trace_pool.TRACE_N
ROLLOUT_BATCH = 4
STEPS = 6
POOL = 24  # one epoch: each prompt once in the run


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    work = tmp_path_factory.mktemp("slime_train_dumps")
    pool = trace_pool.write_pool(trace_pool.TRACE, work / "pool", size=POOL, seed=5)
    out = {}
    settings = {harness_reward.TRACE_PATH_ARG: str(trace_pool.TRACE), "shopsim_wandb_table_every": 0}
    common = ("--rollout-sample-hook-path", "harness_reward.stamp_rollout_step", "--rollout-max-response-len",
              "1024", "--rollout-shuffle", "--rollout-seed", "3")
    with harness.engine_and_ray(work, server_args=("--script", str(pool.script_file)), dataset=pool.dataset) as rig:
        for name, hooks, over_sampling in (("whole", {}, ROLLOUT_BATCH), ("filtered", None, 2 * ROLLOUT_BATCH)):
            log = work / f"{name}_rewards.jsonl"
            out[name] = rig.train(name, STEPS, timeout=900, hooks=hooks, rollout_batch_size=ROLLOUT_BATCH,
                                  over_sampling_batch_size=over_sampling, n_samples_per_prompt=N_SAMPLES,
                                  settings={**settings, harness_reward.REWARD_LOG_ARG: str(log)},
                                  extra_args=common)
            out[name].reward_log = log
    return out


def visits_by_step(trace) -> Counter:
    return Counter((v.step, key, v.successes, v.zero_std, v.tokens)
                   for key, visits in zip(trace.prompts, trace.visits) for v in visits)


def test_a_run_without_a_filter_reads_back_as_its_ground_truth_exactly(runs):
    run = runs["whole"]
    assert run.returncode == 0, f"train.py exited with {run.returncode}; last output:\n{run.output[-4000:]}"
    rewards: dict[int, list[dict]] = defaultdict(list)  # group_index -> what the reward function returned
    for line in run.reward_log.read_text().splitlines():
        entry = json.loads(line)
        rewards[entry["group_index"]].append(entry)
    engine = run.server_log_by_step()
    assert len(engine) == STEPS and not any(line["finish"] == "abort" for lines in engine for line in lines)
    tokens = {(step, line["key"]): 0 for step, lines in enumerate(engine) for line in lines}
    for step, lines in enumerate(engine):
        for line in lines:
            tokens[step, line["key"]] += int(line["tokens"])
    truth = Counter()
    for group in rewards.values():
        values = [entry["reward"] for entry in group]
        step, key = group[0]["step"], group[0]["prompt_id"]
        assert len(values) == N_SAMPLES and {e["step"] for e in group} == {step}
        truth[step, key, sum(value >= 1.0 for value in values), max(values) == min(values), tokens[step, key]] += 1
    assert sum(truth.values()) == STEPS * ROLLOUT_BATCH
    trace = load_outcomes(run.debug_dir, options=DumpOptions(WHOLE_RUN, prompt_key="prompt_id"))
    assert visits_by_step(trace) == truth
    assert trace.n_samples == N_SAMPLES and trace.run.rollout_batch_size == ROLLOUT_BATCH and not trace.notes
    assert any(zero for (_, _, _, zero, _) in truth) and not all(zero for (_, _, _, zero, _) in truth)


def test_the_commands_take_the_dump_of_a_run_without_a_filter(runs, tmp_path, capsys):
    dump = str(runs["whole"].debug_dir)
    assert main(["replay", dump, "--whole-run", "--prompt-key", "prompt_id", "--seeds", "1", "--no-progress",
                 "--over-sampling-batch-size", str(ROLLOUT_BATCH)]) == 0
    printed = capsys.readouterr().out
    assert f"{POOL} prompts, {STEPS * ROLLOUT_BATCH} visits (n = {N_SAMPLES}" in printed
    assert "tokens: the recorded response tokens" in printed and "within a lost signal of 0.15" in printed
    assert "warning: prompts were visited 1.0 times each on average" in printed  # one epoch: no history
    assert main(["prompts", dump, "--whole-run", "--prompt-key", "prompt_id"]) == 0
    assert f"{POOL} prompts tracked over {STEPS} steps" in capsys.readouterr().out
    assert main(["dashboard", "html", dump, "--whole-run", "--prompt-key", "prompt_id",
                 "--out", str(tmp_path / "prompts.html")]) == 0
    assert (tmp_path / "prompts.html").stat().st_size > 0


def test_a_run_with_the_projects_filter_is_refused_and_read_as_kept_groups_with_its_bias(runs, capsys):
    run = runs["filtered"]
    records = harness.finished_records(run, STEPS)
    dump = str(run.debug_dir)
    assert main(["replay", dump, "--prompt-key", "prompt_id", "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1
    assert "--kept-only" in err and "--rollout-all-samples-process-path shopsimrl.slime_runtime.record_all_samples" in err
    trace = load_outcomes(dump, options=DumpOptions(KEPT_ONLY, prompt_key="prompt_id"))
    trained = Counter()
    for record in records:
        for row in record["decisions"]:
            if row["outcome"] in ("trained", "fallback"):
                spread = row["reward_max"] - row["reward_min"] > 1e-6
                trained[record["rollout_id"], row["prompt_key"], row["success_count"], not spread,
                        row["response_tokens"]] += 1
    assert visits_by_step(trace) == trained
    dropped = sum(r["zero_std_group_drop_count"] + r["technical_group_drop_count"] for r in records)
    assert dropped > 0, "the filter dropped nothing: the scenario did not happen"
    assert any(note.startswith("figures biased (--kept-only)") for note in trace.notes)
    missing = next(note for note in trace.notes if "groups slime started are not in the dump" in note)
    assert 0 < int(missing.split()[0]) <= sum(r["submitted_group_count"] - r["train_group_count"] for r in records)
    assert main(["replay", dump, "--kept-only", "--prompt-key", "prompt_id", "--seeds", "1", "--no-progress",
                 "--prompt-skip", "off", "--wave-size", "fixed"]) == 0
    assert "the figures above are biased (--kept-only)" in capsys.readouterr().out
