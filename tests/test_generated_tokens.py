"""Every generated token, live: slime's sample hook feeds total_token_count, aborted_token_count and the
headline cost tokens_per_informative_group; the simulator fills them through the same hook."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from hypothesis import given, settings, strategies as st

from shopsim_metrics.settings.preflight import load_function
from shopsim_metrics.simulator.config import SimConfig
from shopsim_metrics.simulator.loop import Simulator
from shopsim_metrics.simulator.samples import SimSample
from shopsim_metrics.record.contract import SAMPLE_HOOK_PATH
from shopsim_metrics.step.generated_tokens import GeneratedTokens, StepTokens
from shopsimrl.slime_runtime import configure, reset_runtime

TOKENS = dict(seconds_per_token=0.01, response_length_median=200.0)


@pytest.fixture(autouse=True)
def _fresh_runtime():
    yield
    reset_runtime()


def _run(**overrides):
    config = SimConfig(**{"steps": 12, "seed": 3, "zero_std_rate": 0.5, "technical_rate": 0.05,
                          "over_sampling_batch_size": 24, **TOKENS, **overrides})
    return Simulator(config, sinks=[]).run()


def test_the_totals_are_judged_plus_aborted_tokens_step_by_step():
    result = _run()
    aborted_any = False
    for record, outcome in zip(result.records, result.outcomes):
        assert record.aborted_token_count == outcome.aborted_tokens
        assert record.total_token_count == record.generated_token_count + outcome.aborted_tokens
        aborted_any |= outcome.aborted_tokens > 0
        informative = sum(1 for row in record.decisions if row.outcome == "trained")
        assert record.tokens_per_informative_group == pytest.approx(record.total_token_count / informative)
        assert record.total_wasted_token_fraction == pytest.approx(
            1 - record.train_token_count / record.total_token_count)
        assert record.total_wasted_token_fraction >= (record.wasted_token_fraction or 0.0) - 1e-12
    assert aborted_any, "the scenario must abort some generation, or the test proves nothing"


def test_without_the_sample_hook_the_fields_are_null_not_guessed():
    config = SimConfig(steps=3, seed=1, **TOKENS)
    records = Simulator(config, sinks=[], sample_hook=False).run().records
    assert all(r.generated_token_count > 0 for r in records)
    for record in records:
        data = record.to_dict()
        for name in ("total_token_count", "aborted_token_count", "total_wasted_token_fraction",
                     "tokens_per_informative_group"):
            assert data[name] is None, name


def test_the_hook_loads_by_dotted_path_returns_none_and_skips_evaluation():
    hook = load_function(SAMPLE_HOOK_PATH)
    args = SimpleNamespace(rollout_batch_size=1, n_samples_per_prompt=1)
    runtime = configure(args, sinks=[])
    assert hook(args, SimSample(index=0, response_length=50), rollout_id=0) is None
    assert hook(args, SimSample(index=1, response_length=70), rollout_id=0, evaluation=True) is None
    assert runtime.parts.accountant.tokens.take(0, []).total == 50


@pytest.mark.parametrize("sample", [None, object(), "text", SimSample(response_length=float("nan")),
                                    SimpleNamespace(response_length="12", status=None, index="x")])
def test_the_hook_never_raises_on_odd_samples(sample):
    hook = load_function(SAMPLE_HOOK_PATH)
    args = SimpleNamespace(rollout_batch_size=1, n_samples_per_prompt=1)
    configure(args, sinks=[])
    assert hook(args, sample, rollout_id=0) is None
    assert hook(args, sample) is None  # no rollout id: the loop's step, else the next step taken


def test_the_hook_never_raises_on_bad_settings():
    hook = load_function(SAMPLE_HOOK_PATH)
    reset_runtime()
    assert hook(SimpleNamespace(shopsim_wandb="loud"), SimSample(response_length=3), rollout_id=0) is None


def test_fan_out_leaves_count_each():
    tokens = GeneratedTokens()
    leaves = [SimSample(index=0, rollout_id=0, response_length=10), SimSample(index=0, rollout_id=0, response_length=5)]
    for leaf in leaves:
        tokens.observe(leaf, 2)
    assert tokens.take(2, [[leaves]]) == StepTokens(total=15, aborted=0)


def test_a_step_takes_its_own_calls_and_never_a_later_steps():
    tokens = GeneratedTokens()
    tokens.observe(SimSample(index=0, response_length=10), 4)
    tokens.observe(SimSample(index=1, response_length=20), 5)
    assert tokens.take(4, []) == StepTokens(total=10, aborted=10, unjudged_rollouts=1, unjudged_length=10)
    assert tokens.take(5, []) == StepTokens(total=20, aborted=20, unjudged_rollouts=1, unjudged_length=20)
    assert tokens.take(5, []) is None  # taken once


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(min_value=0, max_value=500), min_size=1, max_size=6))
def test_partial_rollout_counts_a_continued_sample_once(increments):
    """A sample aborted step after step and continued each time (its earlier tokens kept in
    response_length) is counted, over the steps, for exactly its final length."""
    tokens = GeneratedTokens(continues=True)
    sample = SimSample(index=7, response_length=0)
    counted = 0
    for step, increment in enumerate(increments):
        sample.response_length += increment
        sample.status = "completed" if step == len(increments) - 1 else "aborted"
        tokens.observe(sample, step)
        counted += tokens.take(step, []).total
    assert counted == sample.response_length


def test_without_partial_rollout_a_new_sample_with_a_reused_index_counts_in_full():
    tokens = GeneratedTokens(continues=False)
    tokens.observe(SimSample(index=3, response_length=40, status="aborted"), 0)
    tokens.observe(SimSample(index=3, response_length=40), 1)
    assert tokens.take(0, []).total == 40 and tokens.take(1, []).total == 40


def test_a_dropped_aborted_sample_never_lends_its_tokens_to_a_judged_one() -> None:
    """slime may drop an aborted sample before the step closes: its id is then free for a new object, yet its
    tokens stay aborted ones (the counter holds the sample until the step is taken)."""
    tokens = GeneratedTokens()
    for i in range(50):
        tokens.observe(SimSample(index=i, response_length=10, status="aborted"), 0)  # no reference kept
    judged = [SimSample(index=100 + i, response_length=7) for i in range(4)]
    for sample in judged:
        tokens.observe(sample, 0)
    assert tokens.take(0, [judged]) == StepTokens(total=528, aborted=500, unjudged_rollouts=50, unjudged_length=500,
                                                  aborted_rollouts=50, aborted_length=500)
