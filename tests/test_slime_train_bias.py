"""slime's own ``train.py --debug-rollout-only`` with long-tailed lengths: the bias of what trains, measured live.

A configuration of the launch-path integration test (``test_slime_train.py``'s harness and dataset): the
project's four hooks, slime's default data source, and the fake engine with ``--long-tail``: every request
its own lognormal length (partly the prompt's in that step: hard prompts write long answers), its delay
following it, so the long answers are the slow ones and slime's abort cuts them off when the batch fills (the engine returns the tokens made so far with ``finish_reason``
abort, as SGLang does).

Checked against the engine's own per-request log (split into rollout steps at slime's aborts: one request
is one rollout here, no fan-out, no ``--partial-rollout``) and slime's debug rollout data:

- every step's ``started_rollout_count`` is the requests the engine answered in the step (less those
  aborted before their first token), and ``started_response_length_mean`` the mean of their tokens
  (aborted ones at what they had made);
- ``aborted_rollout_count`` and ``aborted_response_length_mean`` are the engine's requests aborted part-way;
- ``train_response_length_mean`` is the mean ``response_length`` of the samples slime trained on;
- ``length_bias`` is their ratio, and over the run the batch trained on shorter answers than were
  started (below 1).

Skipped unless ``SLIME_SRC`` and ``MEGATRON_SRC`` are set (see ``test_slime_train.py``).
"""

from __future__ import annotations

import pytest

import harness  # tests/slime_train, put on the path by conftest.py (not a package: never collected)

SLIME_SRC, MEGATRON_SRC = harness.SLIME_SRC, harness.MEGATRON_SRC
pytestmark = harness.pytest_marks(timeout=600)

N_SAMPLES = 4
ROLLOUT_BATCH = 2
# a wave is the whole dataset (12 prompts, 6 with spread): the two fastest groups with spread train, the
# zero-std groups are dropped (never a fallback: remaining stays above the batch), the rest is aborted. With
# waves of 4 the dataset's zero-std prompts make most steps train a fallback group, the last zero-std group
# to finish: the slowest (dropping zero-std groups shifts the batch too, the other way)
OVER_SAMPLING = 12
STEPS = 6
MAX_RESPONSE_LEN = 64  # room for the long tail (the harness's default is 8)
ENGINE = ("--long-tail", "6", "--seconds-per-token", "0.1")  # slow enough that slime's dispatch of a wave
# (its requests reach the engine over a few tenths of a second) does not decide which groups finish first


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    work = tmp_path_factory.mktemp("slime_train_bias")
    with harness.one_train_run(work, "bias", STEPS, server_args=ENGINE, rollout_batch_size=ROLLOUT_BATCH,
                               over_sampling_batch_size=OVER_SAMPLING, n_samples_per_prompt=N_SAMPLES,
                               extra_args=("--rollout-max-response-len", str(MAX_RESPONSE_LEN))) as train:
        yield train


@pytest.fixture(scope="module")
def records(run) -> list[dict]:
    return harness.finished_records(run, STEPS)


def mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def test_every_length_field_is_what_the_engine_served(run, records):
    steps = run.server_log_by_step()
    assert len(steps) == STEPS, f"the engine's log splits into {len(steps)} steps at slime's aborts"
    for r, served in zip(records, steps):
        started, aborted = harness.started_tokens(served), harness.aborted_tokens(served)
        assert r["started_rollout_count"] == len(started), r["rollout_id"]
        assert r["started_response_length_mean"] == pytest.approx(mean(started))
        assert r["aborted_rollout_count"] == len(aborted)
        assert r["aborted_response_length_mean"] == (pytest.approx(mean(aborted)) if aborted else None)
        trained = [sample["response_length"] for sample in run.debug_rollout(r["rollout_id"])]
        assert len(trained) == ROLLOUT_BATCH * N_SAMPLES
        assert r["train_response_length_mean"] == pytest.approx(mean(trained))
        judged = r["generated_token_count"] / r["accepted_sample_count"]
        assert r["accepted_response_length_mean"] == pytest.approx(judged)
        assert r["length_bias"] == pytest.approx(r["train_response_length_mean"] / r["started_response_length_mean"])
        assert r["unequal_size_group_count"] == r["unequal_size_train_group_count"] == 0
    assert any(line["finish"] == "abort" and line["tokens"] > 0 for served in steps for line in served), (
        "no request was aborted part-way: the scenario did not happen")


def test_with_long_tailed_lengths_the_batch_trains_on_shorter_answers_than_were_started(run, records):
    trained = sum(r["train_response_length_mean"] * r["train_sample_count"] for r in records)
    started = sum(r["started_response_length_mean"] * r["started_rollout_count"] for r in records)
    pooled = (trained / sum(r["train_sample_count"] for r in records)) / (
        started / sum(r["started_rollout_count"] for r in records))
    assert pooled < 1.0, f"the run's length bias {pooled:.3f}: the slow (long) answers were not the ones cut off"
    # the aborted answers, even cut short, ran longer than the trained ones
    aborted = [(r["aborted_response_length_mean"], r["aborted_rollout_count"]) for r in records
               if r["aborted_rollout_count"]]
    assert aborted, "no step aborted a rollout"
    aborted_mean = sum(length * count for length, count in aborted) / sum(count for _, count in aborted)
    assert aborted_mean > trained / sum(r["train_sample_count"] for r in records)
