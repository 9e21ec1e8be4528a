"""slime's own ``train.py --debug-rollout-only`` with GRESO's skipping: ``--data-source-path
shopsimrl.data_source.PromptSkipDataSource`` and ``shopsim_prompt_skip: greso``.

The second configuration of the launch-path integration test (``test_slime_train.py``, whose harness,
fake engine and dataset this reuses): slime's real driver, ``RolloutManager``, data source (wrapped by the
project's), checkpoints and rollout loop on CPU, the engine fake (``slime_train/fake_sglang_server.py``),
the rewards fixed per prompt by the dataset (``reward_kind``: spread, all-pass, all-fail, technical), the
prompts keyed by the metadata column ``prompt_id`` (``--metadata-key metadata``, ``shopsim_prompt_key:
prompt_id``). Prompts judged zero-std come back in later steps and the rule skips some of them.

What is checked, against what the engine saw (its per-request log, split into rollout steps at slime's
aborts) and slime's own views (its data source checkpoints, its debug rollout data):

- no prompt skipped in a step reached the engine in that step, and every group the data source served
  in a step (slime's served range minus the skipped draws) reached it ``n_samples_per_prompt`` times;
- every step trained ``rollout_batch_size`` groups;
- the records' counts (accepted and aborted groups, per step and per prompt) are what the engine saw;
- each skip's ``zero_std_run``, kind and probability follow from the prompt's earlier verdicts in the
  records and the step's ``p`` values (the monitor's history is the one the data source read).

The rule's ``p`` values start at GRESO's published 0.5 (a prompt after one zero-std visit is skipped
with probability 0.5) and its seed is fixed, so the run is reproducible: it skips several prompts over
the six steps, one of which comes back and is generated again (asserted: the test cannot pass without a
skip). Skipped unless ``SLIME_SRC`` and ``MEGATRON_SRC`` are set (see ``test_slime_train.py``).
"""

from __future__ import annotations

import json
from collections import Counter

import pytest

import harness  # tests/slime_train, put on the path by conftest.py (not a package: never collected)

SLIME_SRC, MEGATRON_SRC = harness.SLIME_SRC, harness.MEGATRON_SRC
pytestmark = harness.pytest_marks(timeout=600)

N_SAMPLES = 4
ROLLOUT_BATCH = 2
OVER_SAMPLING = 4
STEPS = 6
FLOOR = 0.01
DATA_SOURCE = "shopsimrl.data_source.PromptSkipDataSource"
SKIP_SETTINGS = {
    "shopsim_prompt_skip": "greso",
    "shopsim_prompt_key": "prompt_id",  # the metadata column (slime's --metadata-key metadata)
    "shopsim_prompt_skip_seed": 0,
    "shopsim_prompt_skip_p_easy_start": 0.5,
    "shopsim_prompt_skip_p_hard_start": 0.5,
    "shopsim_prompt_skip_floor": FLOOR,
}
PREFIX = "rollout/shopsim/"
PROMPTS = harness.dataset_rows()
KEYS = [row["metadata"]["prompt_id"] for row in PROMPTS]
KIND_OF = {row["metadata"]["prompt_id"]: row["metadata"]["reward_kind"] for row in PROMPTS}
ZERO_STD_VERDICT = {"all_pass": "zero_std_all_pass", "all_fail": "zero_std_all_fail"}


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """One train.py run of ``STEPS`` steps with the skipping data source, against its own fake engine and
    private Ray head; every process started here is stopped here, by its id."""
    work = tmp_path_factory.mktemp("slime_train_greso")
    with harness.one_train_run(work, "greso", STEPS, rollout_batch_size=ROLLOUT_BATCH,
                               over_sampling_batch_size=OVER_SAMPLING, n_samples_per_prompt=N_SAMPLES,
                               settings=SKIP_SETTINGS, extra_args=("--data-source-path", DATA_SOURCE)) as train:
        yield train


@pytest.fixture(scope="module")
def records(run) -> list[dict]:
    return harness.finished_records(run, STEPS)


@pytest.fixture(scope="module")
def steps(run, records) -> list[dict]:
    """Per step, slime's and the engine's view: the group indices slime's data source drew (its
    checkpoint's running counter), those the project's data source skipped (the records), those it
    served (the rest), and the engine's requests in that step by prompt key."""
    engine = run.server_requests_by_step()
    assert len(engine) == STEPS, (f"the engine's log splits into {len(engine)} steps at slime's aborts, "
                                  f"expected {STEPS}")
    out, drawn_before = [], 0
    for record, requests in zip(records, engine):
        state = run.dataset_state(record["rollout_id"])
        drawn = range(drawn_before, state["sample_group_index"])
        assert state["sample_index"] == state["sample_group_index"] * N_SAMPLES
        skipped = [row["group_index"] for row in record["skipped_prompts"]]
        assert len(set(skipped)) == len(skipped) and set(skipped) <= set(drawn), (record["rollout_id"], skipped, drawn)
        served = [g for g in drawn if g not in set(skipped)]
        out.append({"record": record, "drawn": drawn, "skipped": skipped, "served": served, "engine": requests})
        drawn_before = state["sample_group_index"]
    return out


def _key(group_index: int) -> str:
    """slime's data source walks the dataset in order (no shuffle): draw g is prompt g mod 12."""
    return KEYS[group_index % len(KEYS)]


def test_train_py_ran_with_the_skipping_data_source(run, records):
    assert sorted(run.perf_lines()) == list(range(STEPS))
    for record in records:
        assert record["loop_state_source"] == "slime" and not record["terminated"]
        assert record["skipped_prompt_count"] == len(record["skipped_prompts"]), record["rollout_id"]
        assert record["skip_p_easy"] is not None and record["skip_p_hard"] is not None
        # the data source saved its state beside slime's checkpoint of the step
        state_file = run.save / "rollout" / f"shopsim_prompt_skip_state_{record['rollout_id']}.json"
        assert json.loads(state_file.read_text())["mode"] == "greso"
    # the scenario happened: prompts were skipped (else the checks below prove nothing), one came back
    assert sum(r["skipped_prompt_count"] for r in records) >= 1, [r["decisions"] for r in records]
    assert records[0]["skipped_prompt_count"] == 0  # nothing judged yet: nothing to skip
    assert sum(r["skipped_then_generated_group_count"] for r in records) >= 1


def test_every_step_trains_rollout_batch_size_groups(run, records):
    for record in records:
        samples = run.debug_rollout(record["rollout_id"])  # what slime trained on
        assert record["train_group_count"] == ROLLOUT_BATCH
        assert len({sample["group_index"] for sample in samples}) == ROLLOUT_BATCH == len(samples) // N_SAMPLES
        trained = sorted(row["group_index"] for row in record["decisions"] if row["outcome"] in ("trained", "fallback"))
        assert sorted({sample["group_index"] for sample in samples}) == trained
        assert not set(trained) & {row["group_index"] for row in record["skipped_prompts"]}


def test_no_skipped_prompt_reaches_the_engine_in_its_step(steps):
    """Every skipped draw is replaced, never generated: the engine got, in each step, exactly the
    groups served (drawn minus skipped), ``n_samples_per_prompt`` requests each; so a prompt skipped
    in a step and not drawn again in it got no request in that step."""
    checked = 0
    for step in steps:
        record = step["record"]
        expected = Counter()
        for group in step["served"]:
            expected[_key(group)] += N_SAMPLES
        assert step["engine"] == dict(expected), (record["rollout_id"], step["engine"], dict(expected))
        served_keys = {_key(g) for g in step["served"]}
        for row in record["skipped_prompts"]:
            assert row["prompt_key"] == _key(row["group_index"])
            if row["prompt_key"] not in served_keys:
                assert step["engine"].get(row["prompt_key"], 0) == 0, (record["rollout_id"], row)
                checked += 1
        # the judged groups are served ones, none of them a skipped draw
        assert {r["group_index"] for r in record["decisions"]} <= set(step["served"])
        assert all(r["prompt_key"] == _key(r["group_index"]) for r in record["decisions"])
    assert checked >= 1, "no skipped prompt was absent from the rest of its step: nothing was checked"


def test_record_counts_are_what_the_engine_saw(run, steps):
    """accepted + aborted groups, per step and per prompt, times n_samples_per_prompt: the engine's requests."""
    by_prompt = Counter()
    for step in steps:
        record = step["record"]
        total = sum(step["engine"].values())
        assert (record["accepted_group_count"] + record["aborted_group_count"]) * N_SAMPLES == total
        assert record["submitted_group_count"] == len(step["served"]) == record["wave_count"] * OVER_SAMPLING
        assert len(step["drawn"]) == len(step["served"]) + record["skipped_prompt_count"]
        judged = [r["group_index"] for r in record["decisions"]]
        assert len(judged) == record["accepted_group_count"]
        aborted = [g for g in step["served"] if g not in set(judged)]
        assert len(aborted) == record["aborted_group_count"]
        for group in judged + aborted:
            by_prompt[_key(group)] += N_SAMPLES
    assert run.server_delta("requests") == dict(by_prompt) and run.server_stats["unknown"] == 0


def test_skips_follow_the_rule_on_the_monitors_history(records):
    """A skipped prompt's ``zero_std_run`` is its run of zero-std verdicts in the earlier steps' ledgers (the
    rewards are fixed per prompt: every judged visit of an all-pass/all-fail prompt is zero-std), its kind
    the prompt's, and its probability ``1 - max(p ** run, floor)`` with the step's ``p``."""
    visits = Counter()
    for record in records:
        for row in record["skipped_prompts"]:
            key = row["prompt_key"]
            assert KIND_OF[key] in ZERO_STD_VERDICT, (record["rollout_id"], row)
            assert row["kind"] == ZERO_STD_VERDICT[KIND_OF[key]]
            assert row["zero_std_run"] == visits[key] >= 1, (record["rollout_id"], row, visits[key])
            p = record["skip_p_easy"] if row["kind"] == "zero_std_all_pass" else record["skip_p_hard"]
            assert row["skip_probability"] == pytest.approx(1 - max(p ** row["zero_std_run"], FLOOR))
        for row in record["decisions"]:  # the history the next step's draws read
            visits[row["prompt_key"]] += 1


def test_skips_reach_wandb(run, records):
    from shopsim_metrics.readers.wandb_offline import find_run_dirs, read_offline_run

    rows = {}
    tables = []
    for run_dir in find_run_dirs(run.wandb_dir):
        offline = read_offline_run(run_dir)
        for row in offline.history:
            if PREFIX + "skipped_prompt_count" in row:
                rows[row["rollout/step"]] = row[PREFIX + "skipped_prompt_count"]
        tables += offline.tables.get(PREFIX + "skipped_prompts", [])
    assert rows == {r["rollout_id"]: r["skipped_prompt_count"] for r in records}
    with_skips = {r["rollout_id"]: r for r in records if r["skipped_prompt_count"]}
    assert sorted(table.row["rollout/step"] for table in tables) == sorted(with_skips)
    for table in tables:
        want = [row["prompt_key"] for row in with_skips[table.row["rollout/step"]]["skipped_prompts"]]
        assert [row["prompt_key"] for row in table.records()] == want
