"""slime's own ``train.py --debug-rollout-only``, on CPU, with the project's three hooks loaded by dotted path.

Everything slime does here is slime's real code: its argument parsing, its Ray placement group and
``RolloutManager`` actor, its data source and checkpoints, its rollout loop and drop counters, its
W&B runs (offline). Only the engine is fake (``slime_train/fake_sglang_server.py`` on 127.0.0.1) and
the rewards are scripted per prompt (``slime_train/dataset.jsonl``'s ``reward_kind``). The records
the hooks write are checked against slime's three views of the same steps: the debug rollout data
(the groups trained), its ``perf N`` log line (its drop counters) and its data source checkpoint (the
groups served); and the W&B rows against the records.

Skipped unless ``SLIME_SRC`` (a slime checkout) and ``MEGATRON_SRC`` (a directory holding Megatron-LM's
``megatron/`` at slime's pinned commit) are set and this interpreter imports ray and torch; build that
interpreter with ``tests/slime_train/setup_env.sh`` (README: "slime's own train.py").

The dataset (12 prompts, 4 rollouts each, 2 groups trained per step from waves of 4) is laid out so that
the groups of a step finish one at a time in a fixed order (the engine delays each prompt by its rank):
step 0 trains a zero-std group as fallback, steps 0 to 2 drop zero-std groups, step 2 drops the
technical prompt and opens a second wave, and every step aborts or fully uses its waves. So slime's
steps are reproducible, and a resumed run can be compared with an unbroken one field by field.
"""

from __future__ import annotations

import json
import math
import sys

import pytest

from shopsim_metrics.run.identity import WRITER_FIELDS

import harness  # tests/slime_train, put on the path by conftest.py (not a package: never collected)

SLIME_SRC, MEGATRON_SRC = harness.SLIME_SRC, harness.MEGATRON_SRC
pytestmark = harness.pytest_marks(timeout=900)

N_SAMPLES = 4
ROLLOUT_BATCH = 2
OVER_SAMPLING = 4
FIRST_STEPS = 3  # the first run, and where the resumed run starts
ALL_STEPS = 5  # the resumed run and the unbroken run end here
PREFIX = "rollout/shopsim/"
TIMING_SUFFIXES = ("_seconds", "_time_fraction")
# the fake engine makes tokens over time: what an aborted request had made when slime aborted it, and the
# figures built on it, follow the wall clock as the timings do (generated_token_count, the judged groups'
# tokens, does not). Whether an aborted request had made its first token decides whether it counts as
# started, so the started and aborted counts and lengths follow the clock too; test_slime_train_bias.py
# checks each of them against the engine's own log of the step
CLOCK_TOKEN_FIELDS = ("total_token_count", "aborted_token_count", "total_wasted_token_fraction",
                      "tokens_per_informative_group", "started_rollout_count", "started_response_length_mean",
                      "aborted_rollout_count", "aborted_response_length_mean", "length_bias")
# who wrote a record: another process, another run (record_sequence counts per writing process)
WRITER_KEYS = (*WRITER_FIELDS, "record_sequence")
PROMPTS = harness.dataset_rows()


@pytest.fixture(scope="module")
def slime(tmp_path_factory):
    """The three train.py runs (first, resumed from its checkpoint, unbroken), against one fake engine
    and one private Ray head; every process started here is stopped here, by its id."""
    if "shopsim_cpu_accelerator" not in sys.modules:
        pytest.fail("the CPU accelerator hook is not installed in this interpreter (slime refuses to start "
                    "without an accelerator): build the venv with tests/slime_train/setup_env.sh")
    work = tmp_path_factory.mktemp("slime_train")
    tokenizer = harness.build_tokenizer(work / "tokenizer")
    env = harness.base_env(SLIME_SRC, MEGATRON_SRC, work)
    server = harness.start_fake_server(work, tokenizer)
    head = None
    runs = {}
    try:
        head = harness.start_ray(env, work / "ray.log")

        def train(name, num_rollout, *, load=None, **dirs):
            run = harness.new_run(work / name, num_rollout, **dirs)
            harness.run_train(run, server, tokenizer, env, head.address, slime_src=SLIME_SRC, load=load,
                              rollout_batch_size=ROLLOUT_BATCH, over_sampling_batch_size=OVER_SAMPLING,
                              n_samples_per_prompt=N_SAMPLES)
            runs[name] = run
            return run

        first = train("first", FIRST_STEPS)
        if first.returncode == 0:
            # slime keeps --load only when it holds Megatron's tracker file, which rollout-only actors do not write
            harness.mark_checkpoint(first.save, FIRST_STEPS - 1)
            train("resumed", ALL_STEPS, save=first.save, start_rollout_id=FIRST_STEPS, run_dir=first.run_dir,
                  load=first.save)
            train("unbroken", ALL_STEPS)
        yield runs
    finally:
        if head is not None:
            harness.stop_ray(head)
        harness.stop_process(server.proc)
        for name, run in runs.items():
            print(f"slime train.py run {name}: rc={run.returncode}, log {run.work / 'train.log'}")


def _records(path) -> list[dict]:
    """The records of a ``steps.jsonl`` or of a run directory, read by the project's reader (latest
    record of each ``rollout_id``), as the JSON objects the file holds."""
    from shopsim_metrics.readers import read_steps

    return [record.to_dict() for record in read_steps(path)]


def _ok(run) -> None:
    assert run.returncode == 0, f"train.py exited with {run.returncode}; last output:\n{run.output[-4000:]}"


def _trained_group_indices(samples: list[dict]) -> list[int]:
    return sorted({sample["group_index"] for sample in samples})


def _shopsim_history(run) -> tuple[object, list[dict]]:
    """The offline W&B run holding the project's rows (the RolloutManager's secondary run), and its rows."""
    from shopsim_metrics.readers.wandb_offline import find_run_dirs, read_offline_run

    found = []
    for run_dir in find_run_dirs(run.wandb_dir):
        offline = read_offline_run(run_dir)
        rows = [row for row in offline.history if any(key.startswith(PREFIX) for key in row)]
        if rows:
            found.append((offline, rows))
    assert len(found) == 1, f"expected one W&B run with {PREFIX} rows under {run.wandb_dir}, found {len(found)}"
    return found[0]


def _same(a, b) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)
    return a == b


# --- the first run against slime's own views ----------------------------------------------------------
def test_train_py_ran_every_step_with_the_hooks(slime):
    first = slime["first"]
    _ok(first)
    records = _records(first.records_at_end / "steps.jsonl")
    assert [r["rollout_id"] for r in records] == list(range(FIRST_STEPS))
    assert all(r["loop_state_source"] == "slime" and not r["terminated"] for r in records)
    # the contract's identities, on slime's real loop
    for r in records:
        assert r["train_group_count"] == ROLLOUT_BATCH
        assert r["submitted_group_count"] == r["wave_count"] * OVER_SAMPLING
        assert r["accepted_group_count"] == (r["train_group_count"] + r["technical_group_drop_count"]
                                             + r["zero_std_group_drop_count"] + r["surplus_group_count"])
        assert r["aborted_group_count"] == r["submitted_group_count"] - r["accepted_group_count"]
    # the scenario the dataset is laid out for happened (else the checks below prove little)
    assert records[0]["fallback_group_count"] == 1, records[0]["decisions"]
    assert records[2]["wave_count"] == 2 and records[2]["technical_group_drop_count"] == 1, records[2]["decisions"]
    assert sum(r["zero_std_group_drop_count"] for r in records) >= 3
    assert sum(r["aborted_group_count"] for r in records) >= 1


def test_trained_groups_are_slimes_debug_rollout_data(slime):
    first = slime["first"]
    _ok(first)
    for record in _records(first.records_at_end / "steps.jsonl"):
        samples = first.debug_rollout(record["rollout_id"])
        trained = sorted(row["group_index"] for row in record["decisions"] if row["outcome"] in ("trained", "fallback"))
        assert _trained_group_indices(samples) == trained
        assert record["train_group_count"] == len(trained) == len(samples) // N_SAMPLES
        assert record["train_sample_count"] == len(samples)
        # the rewards slime trained on are the ones the ledger summarises
        by_group: dict[int, list] = {}
        for sample in samples:
            by_group.setdefault(sample["group_index"], []).append(sample["reward"])
        for row in record["decisions"]:
            if row["group_index"] in by_group:
                rewards = by_group[row["group_index"]]
                assert (row["reward_min"], row["reward_max"]) == (min(rewards), max(rewards))
        assert record["train_token_count"] == sum(sample["response_length"] for sample in samples)


def test_drop_counts_are_slimes_perf_counters(slime):
    first = slime["first"]
    _ok(first)
    perf = first.perf_lines()
    assert sorted(perf) == list(range(FIRST_STEPS)), "slime's perf lines are missing from train.py's output"
    for record in _records(first.records_at_end / "steps.jsonl"):
        counters = perf[record["rollout_id"]]
        assert counters.get("rollout/dynamic_filter/drop_shopsim_zero_std_group", 0) == record["zero_std_group_drop_count"]
        assert (counters.get("rollout/dynamic_filter/drop_shopsim_unscored_technical_group", 0)
                == record["technical_group_drop_count"])
        unknown = [key for key in counters if key.startswith("rollout/dynamic_filter/drop_")
                   and key.rsplit("drop_", 1)[1] not in harness.REASONS]
        assert not unknown


def test_groups_served_are_slimes_data_source_checkpoints(slime):
    first = slime["first"]
    _ok(first)
    served = 0
    for record in _records(first.records_at_end / "steps.jsonl"):
        served += record["submitted_group_count"]
        state = first.dataset_state(record["rollout_id"])
        assert state["sample_group_index"] == served
        assert state["sample_index"] == served * N_SAMPLES
        # every judged group is one slime served in this step
        assert all(served - record["submitted_group_count"] <= row["group_index"] < served
                   for row in record["decisions"])


def test_the_engine_received_the_prompts_slime_served(slime):
    """The fake engine's own count, keyed by the dataset's ``prompt_id``: slime's data source walks
    the dataset in order (no shuffle), so group g is prompt g mod 12, asked N_SAMPLES times."""
    first = slime["first"]
    _ok(first)
    records = _records(first.records_at_end / "steps.jsonl")
    served = sum(r["submitted_group_count"] for r in records)
    expected: dict[str, int] = {}
    for group in range(served):
        key = PROMPTS[group % len(PROMPTS)]["metadata"]["prompt_id"]
        expected[key] = expected.get(key, 0) + N_SAMPLES
    received = first.server_delta("requests")
    assert received == expected and first.server_stats["unknown"] == 0
    # and the ledger's prompt keys are those prompts
    for record in records:
        for row in record["decisions"]:
            assert row["prompt_key"] == PROMPTS[row["group_index"] % len(PROMPTS)]["metadata"]["prompt_id"]


def test_wandb_rows_are_the_records(slime):
    first = slime["first"]
    _ok(first)
    records = {r["rollout_id"]: r for r in _records(first.records_at_end / "steps.jsonl")}
    offline, rows = _shopsim_history(first)
    by_step: dict[int, dict] = {}
    for row in rows:
        by_step.setdefault(row["rollout/step"], {}).update(row)
    assert sorted(by_step) == sorted(records)
    compared = set()
    for step, row in by_step.items():
        record = records[step]
        for key, value in row.items():
            name = key[len(PREFIX):] if key.startswith(PREFIX) else None
            if name is None or isinstance(value, (dict, list)) or name not in record:
                continue
            expected = record[name]
            if expected is None:
                assert value is None or (isinstance(value, float) and math.isnan(value)), (step, name, value)
            else:
                assert _same(value, expected), (step, name, value, expected)
            compared.add(name)
    core = {"submitted_group_count", "wave_count", "accepted_group_count", "train_group_count",
            "fallback_group_count", "technical_group_drop_count", "zero_std_group_drop_count",
            "zero_std_group_count", "surplus_group_count", "aborted_group_count", "success_rate", "reward_mean",
            "remaining_min", "generated_token_count"}
    assert core <= compared, f"not logged to W&B: {sorted(core - compared)}"
    # the decision ledger table of every step (tables every step in the test's settings)
    ledgers = offline.tables.get(PREFIX + "decisions", [])
    assert sorted(table.row["rollout/step"] for table in ledgers) == sorted(records)
    for table in ledgers:
        got = [(row["group_index"], row["outcome"]) for row in table.records()]
        want = [(row["group_index"], row["outcome"]) for row in records[table.row["rollout/step"]]["decisions"]]
        assert got == want


def test_end_of_run_prompts_table_reaches_wandb(slime):
    """What the hooks log at the end of the run must arrive before slime finishes the W&B run
    (``RolloutManager.dispose()`` calls ``wandb.finish()`` before any ``atexit`` handler of the hooks)."""
    first = slime["first"]
    _ok(first)
    offline, _ = _shopsim_history(first)
    tables = offline.tables.get(PREFIX + "prompts", [])
    said = [line[-400:] for line in first.output.splitlines() if "prompt_table" in line or "prompts table" in line]
    assert tables, (f"no {PREFIX}prompts table in the W&B run {offline.run_dir} (tables: {sorted(offline.tables)}); "
                    f"the RolloutManager said: {said}")
    judged = {row["prompt_key"] for record in _records(first.records_at_end / "steps.jsonl")
              for row in record["decisions"]}
    assert {row.get("prompt_key") for row in tables[-1].records()} == judged


# --- resuming from slime's checkpoint ---------------------------------------------------------------
def _without_timing(record: dict) -> dict:
    kept = {k: v for k, v in record.items()
            if not k.endswith(TIMING_SUFFIXES) and k not in CLOCK_TOKEN_FIELDS and k not in WRITER_KEYS}
    kept["decisions"] = [{k: v for k, v in row.items() if k != "judged_at"} for row in record["decisions"]]
    return kept


def test_resumed_run_restored_slimes_data_source(slime):
    resumed = slime.get("resumed")
    assert resumed is not None, "the first run failed: no resumed run"
    _ok(resumed)
    assert "load metadata from" in resumed.output and "global_dataset_state_dict_2.pt" in resumed.output
    steps = sorted(resumed.perf_lines())
    assert steps == list(range(FIRST_STEPS, ALL_STEPS))
    # the monitor's snapshot beside slime's checkpoint it resumed from (--save-interval 1): read, not the records
    snapshot = json.loads((resumed.save / "rollout" / f"shopsim_monitor_state_{FIRST_STEPS - 1}.json").read_text())
    assert snapshot["rollout_id"] == FIRST_STEPS - 1 and snapshot["missing"] == 0
    assert snapshot["records"]["steps.jsonl"] > 0 and snapshot["prompts"]["history"]["keys"]


def test_resumed_records_equal_an_unbroken_runs_except_timing(slime):
    resumed, unbroken = slime.get("resumed"), slime.get("unbroken")
    assert resumed is not None and unbroken is not None, "the first run failed: nothing to compare"
    _ok(resumed)
    _ok(unbroken)
    got = _records(resumed.run_dir)  # the first run's records and the resumed run's, in one run dir
    want = _records(unbroken.run_dir)
    assert [r["rollout_id"] for r in got] == [r["rollout_id"] for r in want] == list(range(ALL_STEPS))
    differences = {}
    for a, b in zip(got, want):
        a, b = _without_timing(a), _without_timing(b)
        differing = sorted(k for k in set(a) | set(b) if not _same(a.get(k), b.get(k)))
        if differing:
            differences[a["rollout_id"]] = {k: (a.get(k), b.get(k)) for k in differing if k != "decisions"}
            if "decisions" in differing:
                differences[a["rollout_id"]]["decisions"] = "ledger rows differ"
    assert not differences, f"resumed (left) vs unbroken (right), by rollout_id: {differences}"
    # the clock-dependent counts left out above: in each run, what the engine served in the step
    for run, records in ((resumed, got[FIRST_STEPS:]), (unbroken, want)):
        served = [(len(harness.started_tokens(lines)), len(harness.aborted_tokens(lines)))
                  for lines in run.server_log_by_step()]
        assert [(r["started_rollout_count"], r["aborted_rollout_count"]) for r in records] == served, run.work.name
