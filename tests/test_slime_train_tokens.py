"""slime's own ``train.py --debug-rollout-only``: every generated token counted live, with skipping and adaptive waves.

The third configuration of the launch-path integration test (``test_slime_train.py``'s harness, fake engine
and dataset): the project's four hooks (the sample hook ``record_generated_sample`` among them), the
skipping data source with ``shopsim_prompt_skip: predictive`` and ``shopsim_wave_size: adaptive``. The fake
engine makes each request's tokens evenly over its delay and, when slime aborts a step's stragglers,
returns the tokens made so far with ``finish_reason`` abort, as SGLang does.

Checked against the engine's own per-request log (split into rollout steps at slime's aborts) and slime's
debug rollout data:

- every step's ``total_token_count`` equals the tokens the engine returned in that step, aborted
  requests included, and ``aborted_token_count`` is what was not judged (some step aborts some tokens);
- every step trained ``rollout_batch_size`` groups, and slime's batch holds as many samples;
- ``submitted_group_count`` is the sum of the waves the data source served (the records' identities).

Skipped unless ``SLIME_SRC`` and ``MEGATRON_SRC`` are set (see ``test_slime_train.py``).
"""

from __future__ import annotations

import pytest

import harness  # tests/slime_train, put on the path by conftest.py (not a package: never collected)

SLIME_SRC, MEGATRON_SRC = harness.SLIME_SRC, harness.MEGATRON_SRC
pytestmark = harness.pytest_marks(timeout=600)

N_SAMPLES = 4
ROLLOUT_BATCH = 2
OVER_SAMPLING = 4
STEPS = 6
SETTINGS = {
    "shopsim_prompt_skip": "predictive",
    "shopsim_prompt_key": "prompt_id",
    "shopsim_prompt_skip_threshold": 0.8,  # the dataset's all-pass / all-fail prompts are skipped after two visits
    "shopsim_wave_size": "adaptive",
}


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    work = tmp_path_factory.mktemp("slime_train_tokens")
    with harness.one_train_run(work, "tokens", STEPS, rollout_batch_size=ROLLOUT_BATCH,
                               over_sampling_batch_size=OVER_SAMPLING, n_samples_per_prompt=N_SAMPLES,
                               settings=SETTINGS, extra_args=("--data-source-path", "shopsimrl.data_source.PromptSkipDataSource")) as train:
        yield train


@pytest.fixture(scope="module")
def records(run) -> list[dict]:
    return harness.finished_records(run, STEPS)


def test_every_step_counts_the_tokens_the_engine_returned_aborted_ones_included(run, records):
    engine = run.server_tokens_by_step()
    assert len(engine) == STEPS, f"the engine's log splits into {len(engine)} steps at slime's aborts"
    assert [r["total_token_count"] for r in records] == engine
    for r in records:
        assert r["aborted_token_count"] == r["total_token_count"] - r["generated_token_count"] >= 0
        informative = r["train_group_count"] - r["fallback_group_count"]
        expected = r["total_token_count"] / informative if informative else None
        assert r["tokens_per_informative_group"] == (pytest.approx(expected) if expected else None)
    aborted_lines = [line for line in run.server_log() if line["finish"] == "abort"]
    assert any(line["tokens"] > 0 for line in aborted_lines), "no aborted request had made tokens: nothing checked"
    # an aborted group's siblings that finished count too: at least the aborted requests' own tokens
    assert sum(r["aborted_token_count"] for r in records) >= sum(line["tokens"] for line in aborted_lines) > 0


def test_with_skipping_and_adaptive_waves_every_step_trains_the_batch(run, records):
    for r in records:
        assert r["train_group_count"] == ROLLOUT_BATCH and not r["terminated"], r["rollout_id"]
        assert len(run.debug_rollout(r["rollout_id"])) == ROLLOUT_BATCH * N_SAMPLES
        assert r["skip_p_easy"] is None and r["skip_predicted_group_count"] is not None  # predictive's fields
        assert r["skip_max_lost_signal"] == 0.1  # the guard's limit, the line its panel draws (the setting's default)
        assert r["submitted_group_count"] == r["accepted_group_count"] + r["aborted_group_count"]
        assert r["wave_count"] >= 1
    # every first wave after the first step was sized from the recent steps, with its chance of another wave
    predicted = [r["predicted_second_wave_probability"] for r in records]
    assert predicted[0] is None and all(isinstance(p, float) and 0.0 <= p <= 1.0 for p in predicted[1:])
    assert sum(r["skipped_prompt_count"] for r in records) >= 1, "no prompt skipped: the scenario did not happen"
