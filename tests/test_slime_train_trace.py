"""slime's own ``train.py --debug-rollout-only`` on recorded outcomes: engine tokens per informative group,
``shopsim_prompt_skip: off`` against ``predictive`` with ``shopsim_wave_size: adaptive``.

The harness of ``test_slime_train.py`` (slime's real driver, ``RolloutManager``, data source and rollout
loop on CPU, the fake engine, a private Ray head), on a pool of prompts from the shared trace
(``benchmarks/data/one_shot_rlvr_dsr_sub_acc.dev.json``: per-prompt success fractions of groups of 8 from a
GRPO run of Qwen2.5-Math-1.5B, from ypwang61/One-Shot-RLVR, Apache-2.0; ``slime_train/trace_pool.py``):

- **rewards follow the trace.** A group generated at step ``s`` of an ``S``-step run gets its prompt's
  recorded visit nearest in training time, ``(s + 1/2) / S`` (``Trace.visit_at``, the project's replay's
  mapping), and exactly ``k`` of its 8 rollouts succeed, ``k`` that visit's successes. The reward function
  (``harness_reward.py``, kind ``trace``) learns the step from slime itself: a rollout sample hook
  (``harness_reward.stamp_rollout_step``, slime's ``--rollout-sample-hook-path``, called after every
  generate and before the reward with slime's live ``rollout_id``) stamps it into the sample's metadata;
  the sibling's position is ``index % n`` (slime numbers a group's samples consecutively). Checked on
  every group slime trained (its debug rollout data).
- **response lengths are the fake engine's**, per prompt and long-tailed: log-normal around a median that
  grows with the prompt's recorded failure rate (an always-failed prompt's is 3x an always-solved one's),
  at most 1,024 tokens, made evenly over the request's delay, so slime's aborts cut long prompts short
  and those partial tokens count too.
- **the figure**: every token the engine generated in the run (its per-request log, aborted requests
  included) over the informative groups trained (the records: ``train_group_count -
  fallback_group_count``), pooled over seeds (sums over sums; ``--rollout-shuffle`` with
  ``--rollout-seed``: the order of each epoch's prompts); off's over predictive's. Beside it, the lost
  signal: skipped draws whose recorded visit at their step was informative, per informative group.

Two scenarios, both with ``rollout_batch_size`` 8, ``n_samples_per_prompt`` 8 (the trace's n: no
re-mapping), ``over_sampling_batch_size`` 16 and the data source ``shopsimrl.data_source.PromptSkipDataSource``
(with ``off`` it only delegates to slime's):

- a pool of ``POOL`` prompts over ``STEPS`` steps (each prompt drawn about ``STEPS * 16 / POOL``, 7.5, times
  without skipping):
  predictive with adaptive waves must cost at least ``1.3x`` fewer engine tokens per informative group;
- a short run, ``SHORT_POOL`` prompts over ``SHORT_STEPS`` steps, in which no prompt is drawn more than
  twice: skipping has little to learn from, and must not cost more (at least ``1.0x``).

The figures are printed (``pytest -s``) and written to ``trace_figures.json`` in the test's temporary
directory (docs §3.6, "Through slime's own train.py, on the shared trace", quotes them). Eight
``train.py`` runs in turn against one engine and one Ray head: 9 to 14 minutes on 2 cores (each
run's start, about 40 s, is most of a short run). Skipped unless ``SLIME_SRC`` and ``MEGATRON_SRC`` are set
(see ``test_slime_train.py``)::

    SLIME_SRC=/path/to/slime-src MEGATRON_SRC=/path/to/megatron-src \
      /path/to/slime-venv/bin/python -m pytest tests/test_slime_train_trace.py -q -s
"""

from __future__ import annotations

import json
from collections import Counter

import pytest

import harness  # tests/slime_train, put on the path by conftest.py (not a package: never collected)
import harness_reward
import trace_pool

SLIME_SRC, MEGATRON_SRC = harness.SLIME_SRC, harness.MEGATRON_SRC
pytestmark = harness.pytest_marks(timeout=3000)  # eight runs in the first test's fixture

N_SAMPLES = trace_pool.TRACE_N
ROLLOUT_BATCH = 8
OVER_SAMPLING = 16
POOL, STEPS = 64, 30
SHORT_POOL, SHORT_STEPS = 80, 8
SEEDS = (0, 1)
MIN_RATIO, SHORT_MIN_RATIO = 1.3, 1.0
DATA_SOURCE = "shopsimrl.data_source.PromptSkipDataSource"
MODES = {
    "off": {"shopsim_prompt_skip": "off", "shopsim_wave_size": "fixed"},
    "predictive": {"shopsim_prompt_skip": "predictive", "shopsim_wave_size": "adaptive"},
}


@pytest.fixture(scope="module")
def pools(tmp_path_factory):
    """The long run's pool and the short run's (disjoint draws from the trace), and one dataset of both
    for the engine and the tokenizer."""
    work = tmp_path_factory.mktemp("trace_pools")
    pool = trace_pool.write_pool(trace_pool.TRACE, work / "pool", size=POOL, seed=0)
    used = frozenset(row["metadata"]["trace_key"] for row in pool.rows)
    short = trace_pool.write_pool(trace_pool.TRACE, work / "short", size=SHORT_POOL, seed=1, exclude=used)
    return {"pool": pool, "short": short, "all": trace_pool.merge_pools(work / "all", pool, short)}


@pytest.fixture(scope="module")
def runs(tmp_path_factory, pools):
    """Every train.py run, ``(scenario, mode, seed) -> TrainRun``, one at a time against one fake engine and
    one private Ray head; every process started here is stopped here, by its id."""
    work = tmp_path_factory.mktemp("slime_train_trace")
    out = {}
    server_args = ("--script", str(pools["all"].script_file))
    with harness.engine_and_ray(work, server_args=server_args, dataset=pools["all"].dataset) as rig:
        for scenario, steps in (("pool", STEPS), ("short", SHORT_STEPS)):
            for seed in SEEDS:
                for mode, settings in MODES.items():
                    name = f"{scenario}_{mode}_{seed}"
                    out[scenario, mode, seed] = rig.train(
                        name, steps, timeout=900, dataset=pools[scenario].dataset,
                        rollout_batch_size=ROLLOUT_BATCH, over_sampling_batch_size=OVER_SAMPLING,
                        n_samples_per_prompt=N_SAMPLES,
                        settings={**settings, harness_reward.TRACE_PATH_ARG: str(trace_pool.TRACE),
                                  "shopsim_wandb_table_every": 0},
                        extra_args=("--data-source-path", DATA_SOURCE,
                                    "--rollout-sample-hook-path", "harness_reward.stamp_rollout_step",
                                    "--rollout-max-response-len", "1024",
                                    "--rollout-shuffle", "--rollout-seed", str(seed)))
    return out


@pytest.fixture(scope="module")
def figures(runs, tmp_path_factory):
    """Per run: engine tokens, informative groups, their ratio; per scenario: the off/predictive
    ratio per seed and pooled over seeds (sums over sums), and predictive's lost signal."""
    per_run = {}
    for (scenario, mode, seed), run in runs.items():
        steps = STEPS if scenario == "pool" else SHORT_STEPS
        records = harness.finished_records(run, steps)
        tokens = sum(int(line["tokens"]) for line in run.server_log())
        informative = sum(r["train_group_count"] - r["fallback_group_count"] for r in records)
        per_run[scenario, mode, seed] = {
            "engine_tokens": tokens, "informative_groups": informative,
            "tokens_per_informative_group": tokens / informative if informative else None,
            "recorded_tokens": sum(r["total_token_count"] for r in records),
            "skipped": sum(r.get("skipped_prompt_count") or 0 for r in records),
            "lost_signal_draws": _lost_signal_draws(records, steps),
            "waves": sum(r["wave_count"] for r in records),
            "submitted_groups": sum(r["submitted_group_count"] for r in records),
        }
    summary = {}
    for scenario in ("pool", "short"):
        pooled = {}
        for mode in MODES:
            rows = [per_run[scenario, mode, seed] for seed in SEEDS]
            pooled[mode] = sum(r["engine_tokens"] for r in rows) / sum(r["informative_groups"] for r in rows)
        predictive = [per_run[scenario, "predictive", seed] for seed in SEEDS]
        summary[scenario] = {
            **pooled, "ratio": pooled["off"] / pooled["predictive"],
            "ratio_per_seed": [per_run[scenario, "off", seed]["tokens_per_informative_group"]
                               / per_run[scenario, "predictive", seed]["tokens_per_informative_group"]
                               for seed in SEEDS],
            "lost_signal": (sum(r["lost_signal_draws"] for r in predictive)
                            / sum(r["informative_groups"] for r in predictive)),
        }
    result = {"summary": summary, "runs": {"/".join(map(str, key)): value for key, value in per_run.items()}}
    path = tmp_path_factory.getbasetemp() / "trace_figures.json"
    path.write_text(json.dumps(result, indent=1))
    print(f"\nthrough slime's train.py on the shared trace ({path}):\n{json.dumps(result, indent=1)}")
    return result


def _lost_signal_draws(records: list[dict], steps: int) -> int:
    """Skipped draws whose recorded visit at their step was informative (the replay's ``lost signal``, before
    dividing by the informative groups trained): what skipping forwent, by the trace."""
    lost = 0
    for record in records:
        for row in record.get("skipped_prompts") or []:
            k = harness_reward.trace_successes(str(trace_pool.TRACE), N_SAMPLES,
                                               trace_pool.trace_key_of(row["prompt_key"]),
                                               record["rollout_id"], steps)
            lost += 0 < k < N_SAMPLES
    return lost


def test_every_run_trains_the_batch_every_step(runs):
    for (scenario, mode, seed), run in runs.items():
        steps = STEPS if scenario == "pool" else SHORT_STEPS
        for record in harness.finished_records(run, steps):
            assert record["train_group_count"] == ROLLOUT_BATCH and not record["terminated"], (scenario, mode, seed)
            assert len(run.debug_rollout(record["rollout_id"])) == ROLLOUT_BATCH * N_SAMPLES


def test_rewards_follow_the_trace_at_the_step_of_generation(runs):
    """Every trained group: its samples carry the step slime generated them in, and exactly the trace's
    ``k`` of them (positions ``0 .. k-1``) succeeded, ``k`` of the visit nearest to that step's time."""
    checked = Counter()
    for (scenario, mode, seed), run in runs.items():
        steps = STEPS if scenario == "pool" else SHORT_STEPS
        for rollout_id in range(steps):
            groups: dict[int, list[dict]] = {}
            for sample in run.debug_rollout(rollout_id):
                groups.setdefault(sample["group_index"], []).append(sample)
            for group in groups.values():
                assert len(group) == N_SAMPLES
                key = group[0]["metadata"]["trace_key"]
                assert {s["metadata"][harness_reward.STEP_KEY] for s in group} == {rollout_id}
                k = harness_reward.trace_successes(str(trace_pool.TRACE), N_SAMPLES, key, rollout_id, steps)
                rewards = [s["reward"] for s in sorted(group, key=lambda s: s["index"])]
                assert rewards == [1.0] * k + [0.0] * (N_SAMPLES - k), (scenario, mode, seed, rollout_id, key)
                checked["spread" if 0 < k < N_SAMPLES else "zero_std"] += 1
    assert checked["spread"] and checked["zero_std"], checked  # both kinds happened: the check could fail


def test_engine_tokens_are_the_recorded_tokens(figures):
    """The engine's log and the records count the same tokens (aborted requests' included)."""
    for name, run in figures["runs"].items():
        assert run["engine_tokens"] == run["recorded_tokens"] > 0, name


def test_short_run_sees_each_prompt_once_or_twice(runs, pools):
    for seed in SEEDS:
        run = runs["short", "off", seed]
        drawn = Counter(line["key"] for line in run.server_log())
        visits = {key: count / N_SAMPLES for key, count in drawn.items()}
        assert len(visits) == SHORT_POOL and set(visits.values()) == {1, 2}, visits


def test_predictive_with_adaptive_waves_costs_fewer_tokens_per_informative_group(figures):
    pool = figures["summary"]["pool"]
    assert pool["ratio"] >= MIN_RATIO, pool


def test_a_short_run_costs_no_more(figures):
    short = figures["summary"]["short"]
    assert short["ratio"] >= SHORT_MIN_RATIO, short
