"""The oracle references of the skipping bench: they skip by the simulator's truth, and only what they may know."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given, settings, strategies as st

from shopsim_metrics.simulator.config import SimConfig
from shopsim_metrics.simulator.loop import Simulator, make_group_source, rng_streams, token_rng
from shopsim_metrics.simulator.skipping.skip_measure import (
    OracleSkip, _oracle_data_source, measure_skipping, spread_probability,
)
from shopsim_metrics.simulator.skipping.skip_saving import alerts_silenced
from shopsim_metrics.simulator.token_model import TokenModel
from shopsim_metrics.sinks.base import MemorySink

POOL = SimConfig(steps=16, prompt_pool=48, skill_start=-2.0, skill_end=2.0, learning_steps=8.0,
                 difficulty_spread=4.0, partial_credit_rate=0.0, technical_rate=0.0, prompt_skip="greso")


def _oracle_run(config: SimConfig, oracle: OracleSkip):
    """The records of one oracle run, and the source whose truth it skipped by."""
    _, reward_rng, _ = rng_streams(config.seed)
    source = make_group_source(config, reward_rng, TokenModel.from_config(config, token_rng(config.seed)))
    source.data_source = _oracle_data_source(source.data_source, source, config, oracle)
    memory = MemorySink()
    with alerts_silenced():
        Simulator(config, sinks=[memory], source=source).run()
    return memory.records, source


@settings(max_examples=8, deadline=None)
@given(seed=st.integers(0, 50), threshold=st.sampled_from([0.1, 0.3, 0.6]), seen_only=st.booleans())
def test_an_oracle_skips_only_draws_whose_true_chance_of_spread_is_below_its_threshold(seed, threshold, seen_only):
    records, source = _oracle_run(replace(POOL, seed=seed), OracleSkip(threshold, seen_only))
    judged_before: set[str] = set()
    skipped = 0
    for record in records:
        spread = spread_probability(source, POOL, record.rollout_id)  # no difficulty drift: the step's truth
        for row in record.skipped_prompts or []:
            pool_id = next(i for i in range(source.pool) if _key_of(source, i) == row["prompt_key"])
            assert spread[pool_id] < threshold
            if seen_only:
                assert row["prompt_key"] in judged_before  # a prompt's first visit is generated
            skipped += 1
        judged_before |= {row.prompt_key for row in record.decisions}
    assert skipped > 0


def _key_of(source, pool_id: int) -> str:
    from shopsim_metrics.judging.prompt_keys import prompt_key
    from shopsim_metrics.simulator.samples import SimSample

    return prompt_key([SimSample(prompt=source.prompts[pool_id], label=f"answer {pool_id}")])[0]


def test_knowing_more_skips_more_and_a_higher_threshold_skips_more():
    seen_low, seen_high, all_high = (measure_skipping(POOL, (0, 1), OracleSkip(t, seen)) for t, seen in
                                     ((0.1, True), (0.3, True), (0.3, False)))
    assert seen_low.skipped_prompts < seen_high.skipped_prompts < all_high.skipped_prompts
    assert seen_low.lost_signal <= seen_high.lost_signal


def test_an_oracle_run_keeps_slimes_identities():
    records, _ = _oracle_run(POOL, OracleSkip(0.3))
    for record in records:
        assert record.train_group_count == POOL.rollout_batch_size
        assert record.submitted_group_count == len(record.decisions) + record.aborted_group_count
