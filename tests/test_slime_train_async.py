"""slime's own ``train_async.py --debug-rollout-only`` with the project's fully-async rollout function.

The fourth configuration of the launch-path integration test (``test_slime_train.py``'s harness, fake
engine and dataset): ``--rollout-function-path shopsimrl.async_rollout.generate_rollout_fully_async``
with the log function and the sample hook, no filter and no all-samples hook (slime calls neither on
this path). slime's own ``AsyncRolloutWorker`` keeps a pool of ``sglang_server_concurrency`` groups
generating across steps; the engine's latencies (0.3 s to 2 s by prompt, next to slime's 1 s top-up
period) make groups cross step boundaries. Half the dataset's prompts are zero-std and one is
technical, so every step drops some and the zero-std drop limit (1) lets some in as fallback.

Checked, step by step, against slime's debug rollout data (the groups it trained), its ``perf N``
line (the drop counts it logged) and the engine's own request counts:

- no technical group and no zero-std group beyond the step's fallback reaches slime's batch;
- every step trains ``rollout_batch_size`` groups, and they are the ledger's trained groups;
- the records' counts are slime's and the engine's: drops equal slime's counters, every judged group
  is one the engine answered, the engine answered the first G groups of the dataset in order, the
  groups served but never judged fit in the pool, and each step's generated tokens are what the
  engine returned for the prompts of the groups it judged;
- groups did cross step boundaries (``carried_group_count``), waves and ``remaining`` are null.

Skipped unless ``SLIME_SRC`` and ``MEGATRON_SRC`` are set (see ``test_slime_train.py``).
"""

from __future__ import annotations

from collections import Counter

import pytest

import harness  # tests/slime_train, put on the path by conftest.py (not a package: never collected)

SLIME_SRC, MEGATRON_SRC = harness.SLIME_SRC, harness.MEGATRON_SRC
pytestmark = harness.pytest_marks(timeout=600)

N_SAMPLES = 4
ROLLOUT_BATCH = 2
POOL = 4  # --sglang-server-concurrency x one engine: groups in flight
STEPS = 6
ZERO_STD_LIMIT = 1
SETTINGS = {"shopsim_async_zero_std_drop_limit": ZERO_STD_LIMIT, "shopsim_max_consecutive_failed_groups": 8}
PROMPTS = harness.dataset_rows()
KIND = {row["metadata"]["prompt_id"]: row["metadata"]["reward_kind"] for row in PROMPTS}


def prompt_of(group_index: int) -> str:
    """slime's data source walks the dataset in order (no shuffle): group g is prompt g mod 12."""
    return PROMPTS[group_index % len(PROMPTS)]["metadata"]["prompt_id"]


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    work = tmp_path_factory.mktemp("slime_train_async")
    with harness.one_train_run(work, "async", STEPS, server_args=("--base-delay", "0.3", "--delay-step", "0.15"),
                               timeout=420, rollout_batch_size=ROLLOUT_BATCH, over_sampling_batch_size=ROLLOUT_BATCH,
                               n_samples_per_prompt=N_SAMPLES, settings=SETTINGS, script="train_async.py",
                               hooks=harness.ASYNC_HOOKS, extra_args=("--sglang-server-concurrency", str(POOL))) as train:
        yield train


@pytest.fixture(scope="module")
def records(run) -> list[dict]:
    return harness.finished_records(run, STEPS)


def _taken(record: dict) -> list[dict]:
    return [row for row in record["decisions"] if row["outcome"] in ("trained", "fallback")]


def test_slime_trains_rollout_batch_size_groups_each_step_and_they_are_the_ledgers(run, records):
    for r in records:
        assert r["loop_state_source"] == "fully_async" and not r["terminated"], r["rollout_id"]
        samples = run.debug_rollout(r["rollout_id"])
        trained = sorted(row["group_index"] for row in _taken(r))
        assert sorted({s["group_index"] for s in samples}) == trained
        assert r["train_group_count"] == len(trained) == ROLLOUT_BATCH == len(samples) // N_SAMPLES
        assert r["train_sample_count"] == len(samples)
        assert r["accepted_group_count"] == (r["train_group_count"] + r["technical_group_drop_count"]
                                             + r["zero_std_group_drop_count"])
        assert r["surplus_group_count"] == 0
        for name in ("submitted_group_count", "wave_count", "remaining_min"):
            assert r[name] is None, (name, r["rollout_id"])


def test_no_technical_group_and_no_zero_std_group_beyond_the_fallback_reaches_slimes_batch(run, records):
    for r in records:
        samples = run.debug_rollout(r["rollout_id"])
        kinds = Counter(KIND[prompt_of(g)] for g in {s["group_index"] for s in samples})
        assert kinds["technical"] == 0, r["rollout_id"]
        assert kinds["all_pass"] + kinds["all_fail"] == r["fallback_group_count"], r["decisions"]
        assert r["fallback_group_count"] == 0 or r["zero_std_group_drop_count"] == ZERO_STD_LIMIT
        assert all(s["reward"] is not None for s in samples)
        for row in r["decisions"]:
            assert row["prompt_key"] == prompt_of(row["group_index"])
            expected = {"technical": "dropped_technical", "spread": "trained"}.get(KIND[row["prompt_key"]])
            assert expected is None or row["outcome"] == expected, row
    # the scenario the dataset is laid out for happened
    assert sum(r["technical_group_drop_count"] for r in records) >= 1
    assert sum(r["zero_std_group_drop_count"] for r in records) >= 2
    assert sum(r["fallback_group_count"] for r in records) >= 1


def test_drop_counts_are_slimes_perf_counters(run, records):
    perf = run.perf_lines()
    assert sorted(perf) == list(range(STEPS)), "slime's perf lines are missing from train_async.py's output"
    for r in records:
        counters = perf[r["rollout_id"]]
        assert counters.get("rollout/dynamic_filter/drop_shopsim_zero_std_group", 0) == r["zero_std_group_drop_count"]
        assert (counters.get("rollout/dynamic_filter/drop_shopsim_unscored_technical_group", 0)
                == r["technical_group_drop_count"])


def test_the_records_count_what_the_engine_served(run, records):
    received = run.server_delta("requests")
    assert run.server_stats["unknown"] == 0 and sum(run.server_delta("aborted").values()) == 0
    total = sum(received.values())
    assert total % N_SAMPLES == 0
    served = total // N_SAMPLES  # groups the worker drew: the first `served` groups of the dataset, in order
    expected = Counter()
    for group in range(served):
        expected[prompt_of(group)] += N_SAMPLES
    assert received == dict(expected)
    judged = [row["group_index"] for r in records for row in r["decisions"]]
    assert len(judged) == len(set(judged)) and all(0 <= g < served for g in judged)
    # what was served but never judged is what the pool held when the run ended: in flight or queued
    assert 0 <= served - len(judged) <= 2 * POOL, (served, len(judged))
    # the tokens the sample hook counted are tokens the engine returned (the last ones may be after the last record)
    engine_tokens = sum(run.server_tokens_by_step())
    counted = sum(r["total_token_count"] for r in records)
    assert 0 < counted <= engine_tokens
    # step by step: the tokens of the groups each step judged are the ones the engine returned for their prompts
    tokens_of = {}
    for line in run.server_log():
        assert tokens_of.setdefault(line["key"], line["tokens"]) == line["tokens"]  # one length per prompt
    for r in records:
        assert r["generated_token_count"] == sum(row["response_tokens"] for row in r["decisions"])
        assert r["generated_token_count"] == sum(N_SAMPLES * tokens_of[row["prompt_key"]] for row in r["decisions"])


def test_groups_crossed_step_boundaries(records):
    assert sum(r["carried_group_count"] for r in records) >= 1, [r["carried_group_count"] for r in records]
    for r in records:
        assert 0 <= r["carried_group_count"] <= r["train_group_count"]
