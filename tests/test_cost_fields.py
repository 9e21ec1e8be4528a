"""What dynamic sampling costs: tokens per outcome and time per wave, through the real hooks."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from hypothesis import given, settings, strategies as st

from shopsim_metrics.step.closed_step import StepKnobs, step_draft
from shopsim_metrics.record import contract as C
from shopsim_metrics.step.accounting import StepAccountant
from shopsim_metrics.judging.group_judgement import judge_group
from shopsim_metrics.simulator.samples import SimSample
from shopsim_metrics.simulator.config import SimConfig
from shopsim_metrics.simulator.latency import ScriptedCompletions
from shopsim_metrics.simulator.loop import Simulator
from shopsim_metrics.simulator.rewards import FactoryGroupSource
from shopsim_metrics.judging.group_samples import MAX_TOKENS, group_tokens, read_response_length

N = 4


# --- reading tokens ------------------------------------------------------------------------------
def test_group_tokens_sums_segments_of_fanned_out_rollouts_and_counts_an_object_once() -> None:
    a0 = SimSample(rollout_id=0, index=0, response_length=100)
    a1 = SimSample(rollout_id=0, index=1, response_length=40)  # second segment of rollout 0
    b = SimSample(rollout_id=1, index=2, response_length=7)
    assert group_tokens([[a0, a1], [b]]) == 147
    assert group_tokens([a0, a1, b]) == 147  # flat segments sharing a rollout_id each count
    assert group_tokens([a0, a0, b]) == 107  # the same object listed twice counts once
    assert group_tokens([]) == 0


def test_numpy_and_tensor_like_lengths_count() -> None:
    np = pytest.importorskip("numpy")
    assert read_response_length(SimpleNamespace(response_length=np.int64(12))) == 12
    assert read_response_length(SimpleNamespace(response_length=np.array(5))) == 5
    assert read_response_length(SimpleNamespace(response_length=np.array([5, 6]))) == 0
    assert read_response_length(SimpleNamespace()) == 0


class _Raising:
    @property
    def response_length(self) -> int:
        raise RuntimeError("boom")


odd_lengths = st.one_of(
    st.none(), st.booleans(), st.integers(-10**6, 10**6), st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=3), st.lists(st.integers(), max_size=2), st.dictionaries(st.text(max_size=2), st.integers()),
)


@settings(max_examples=200, deadline=None)
@given(st.lists(odd_lengths, max_size=10), st.booleans())
def test_unreadable_lengths_count_zero_and_never_raise(values: list, nested: bool) -> None:
    samples: list = [SimpleNamespace(response_length=v) for v in values] + [_Raising(), object()]
    group = [samples] if nested else samples
    # a length above MAX_TOKENS is no response's: out of range, unknown (0)
    expected = sum(v for v in values if type(v) is int and 0 < v <= MAX_TOKENS) + sum(
        int(v) for v in values if type(v) is float and v == v and abs(v) != float("inf") and v >= 0 and v == int(v)
        and v <= MAX_TOKENS)
    assert group_tokens(group) == expected
    assert group_tokens(None) == 0 and group_tokens(5) == 0


# --- accounting ----------------------------------------------------------------------------------
class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def group(rewards: list[float], lengths: list[int], status: str = "completed") -> list[SimSample]:
    return [SimSample(index=i, rollout_id=i, reward=r, response_length=n, status=status)
            for i, (r, n) in enumerate(zip(rewards, lengths))]


def test_tokens_per_outcome_and_ledger_rows() -> None:
    clock = FakeClock()
    acc = StepAccountant(StepKnobs(rollout_batch_size=1, over_sampling_batch_size=3), clock=clock)
    groups = [
        group([0.0] * N, [10] * N),  # zero-std, remaining 3 > 1: dropped_zero_std
        group([0.0, 1.0, 0.0, 1.0], [1, 2, 3, 4]),  # trained
        group([0.0, 1.0, 0.0, 1.0], [5, 5, 5, 5]),  # surplus
    ]
    for g, remaining, t in zip(groups, (3, 2, 2), (100.0, 102.5, 104.0)):
        clock.now = t
        acc.judge(judge_group(g, n_samples=N), step=0, remaining=remaining, group=g)
    rec = step_draft(acc.close_step()).finish()
    assert [r.outcome for r in rec.decisions] == ["dropped_zero_std", "trained", "surplus"]
    assert [r.response_tokens for r in rec.decisions] == [40, 10, 20]
    assert [r.judged_at for r in rec.decisions] == [0.0, 2.5, 4.0]
    assert (rec.generated_token_count, rec.train_token_count) == (70, 10)
    assert (rec.dropped_zero_std_token_count, rec.trained_token_count, rec.surplus_token_count) == (40, 10, 20)
    assert rec.fallback_token_count == rec.dropped_technical_token_count == 0
    assert rec.wasted_token_fraction == pytest.approx(1 - 10 / 70)
    assert rec.wave_count == 1 and rec.extra_wave_seconds == 0.0
    assert rec.first_wave_fill_seconds == 2.5  # the trained group filled the batch of 1
    assert rec.to_dict()["decisions"][0]["response_tokens"] == 40


def test_second_wave_times() -> None:
    clock = FakeClock()
    acc = StepAccountant(StepKnobs(rollout_batch_size=2, over_sampling_batch_size=2), clock=clock)
    zero, spread = group([1.0] * N, [3] * N), group([0.0, 1.0, 1.0, 1.0], [1] * N)
    # wave 1: remaining 2 -> the zero-std group is fallback (remaining <= rollout_batch_size); a technical drop
    # takes remaining to 1 and triggers wave 2 (remaining 3); the next zero-std drop, then a spread fills
    steps = [(zero, 2, 0.0), (group([1.0] * N, [9] * N, "failed"), 2, 1.0), (zero, 3, 5.0), (spread, 2, 7.0)]
    for g, remaining, t in steps:
        clock.now = t
        acc.judge(judge_group(g, n_samples=N), step=4, remaining=remaining, group=g)
    rec = step_draft(acc.close_step()).finish()
    assert [r.outcome for r in rec.decisions] == ["fallback", "dropped_technical", "dropped_zero_std", "trained"]
    assert [r.waves_open for r in rec.decisions] == [1, 1, 2, 2]
    assert rec.wave_count == 2
    assert rec.first_wave_fill_seconds == 1.0  # wave 1 did not fill: its last judgement
    assert rec.extra_wave_seconds == 6.0  # from the technical drop (t=1) to the last judgement (t=7)
    assert rec.dropped_technical_token_count == 36 and rec.train_token_count == 12 + 4


def test_an_empty_step_has_no_fraction_and_no_times() -> None:
    acc = StepAccountant(StepKnobs(rollout_batch_size=2, over_sampling_batch_size=2))
    acc.judge(judge_group([], n_samples=N), step=0, remaining=2, group=[])
    rec = step_draft(acc.close_step()).finish()
    assert rec.generated_token_count == 0 and rec.wasted_token_fraction is None
    assert rec.to_dict()["wasted_token_fraction"] is None


# --- end to end through the real hooks, in the simulated slime loop -------------------------------
def lengths_of(gid: int) -> list[int]:
    return [(gid * 37 + 11 * i) % 300 + (0 if i else 1) for i in range(N)]


@settings(max_examples=25, deadline=None)
@given(
    kinds=st.lists(st.sampled_from(["spread", "zero", "technical"]), min_size=8, max_size=40),
    batch=st.integers(1, 5),
    over=st.integers(2, 6),
)
def test_every_token_field_matches_the_loops_own_ground_truth(kinds: list[str], batch: int, over: int) -> None:
    kinds = [*kinds, "spread"]  # every cycle holds a group with spread, so every step can fill

    def make(gid: int) -> list[SimSample]:
        kind = kinds[gid % len(kinds)]
        rewards = [float(i % 2) for i in range(N)] if kind == "spread" else [1.0] * N
        return group(rewards, lengths_of(gid), "failed" if kind == "technical" else "completed")

    cfg = SimConfig(rollout_batch_size=2, over_sampling_batch_size=over, n_samples_per_prompt=N,
                    global_batch_size=8, steps=3, max_consecutive_failed_groups=10**6)
    sim = Simulator(cfg, sinks=[], source=FactoryGroupSource(make),
                    completions=ScriptedCompletions(lambda pending: pending[:batch]))
    result = sim.run()
    for outcome, rec in zip(result.outcomes, result.records):
        tokens = {gid: sum(lengths_of(gid)) for gid in outcome.judged_ids}
        train = sum(tokens[g] for g in outcome.train_ids)
        assert rec.generated_token_count == sum(tokens.values())
        assert rec.train_token_count == train == rec.trained_token_count + rec.fallback_token_count
        assert rec.surplus_token_count == sum(tokens[g] for g in outcome.surplus_ids)
        for reason, field in ((C.REASON_TECHNICAL, "dropped_technical_token_count"),
                              (C.REASON_ZERO_STD, "dropped_zero_std_token_count")):
            assert getattr(rec, field) == sum(tokens[g] for g, r in outcome.dropped.items() if r == reason)
        assert sum(getattr(rec, f) for f in C.OUTCOME_TOKEN_FIELDS) == rec.generated_token_count
        assert [r.response_tokens for r in rec.decisions] == [tokens[g] for g in outcome.judged_ids]
        # timing: the simulated clock counts one second per completion batch
        assert rec.rollout_seconds == outcome.rollout_time
        assert rec.filter_seconds > 0
        span = rec.decisions[-1].judged_at
        assert rec.decisions[0].judged_at == 0.0
        assert [r.judged_at for r in rec.decisions] == sorted(r.judged_at for r in rec.decisions)
        assert 0.0 <= rec.first_wave_fill_seconds <= span
        assert (rec.extra_wave_seconds == 0.0) == (rec.wave_count == 1)
        assert rec.extra_wave_seconds <= span


# --- the simulator models tokens ------------------------------------------------------------------
def test_token_model_is_long_tailed_longer_for_hard_prompts_and_clipped() -> None:
    np = pytest.importorskip("numpy")
    from shopsim_metrics.simulator.token_model import TokenModel

    model = TokenModel(median=500.0, sigma=0.8, slope=0.5, max_tokens=4000, seconds_per_token=0.01, tick=1.0,
                       n=8, rng=np.random.default_rng(0))
    easy = np.array(model.lengths([-1.0] * 2000))
    hard = np.array(model.lengths([1.0] * 2000))
    assert hard.mean() > 1.5 * easy.mean()  # exp(0.5 * 2) = 2.7 times the median
    flat = easy.ravel()
    assert flat.mean() > np.median(flat) * 1.2  # right tail: mean well above the median
    assert hard.max() == 4000 and easy.min() >= 1  # clipped to response_length_max, never empty
    assert model.group_ticks([[100, 250, 30], [1]]) == [3, 1]  # the slowest rollout sets the group time


def test_simulated_groups_carry_the_lengths_that_set_their_generation_time() -> None:
    np = pytest.importorskip("numpy")
    from shopsim_metrics.simulator.loop import make_group_source
    from shopsim_metrics.simulator.token_model import TokenModel

    for zero_std_rate in (None, 0.3):  # prompt model and rates model
        config = SimConfig(zero_std_rate=zero_std_rate, seconds_per_token=0.05, latency_tick=1.0)
        source = make_group_source(config, np.random.default_rng(1), TokenModel.from_config(config, np.random.default_rng(2)))
        gids = range(10)
        source.submit(gids, step=0)
        ticks = source.generation_ticks(gids)
        for slot, gid in enumerate(gids):
            lengths = [s.response_length for s in source.group(gid, slot)]
            assert min(lengths) >= 1
            assert ticks[slot] == max(1, -(-max(lengths) * 5 // 100))  # ceil(max * 0.05)


def test_simulated_run_records_real_looking_cost_and_a_tiny_own_time_share() -> None:
    from shopsim_metrics.simulator.demo import demo_config, format_cost
    from shopsim_metrics.simulator.loop import simulate

    result = simulate(demo_config(steps=16, seed=0))
    records = [r for r in result.records if not r.terminated]
    for rec, outcome in zip(records, result.outcomes):
        assert rec.generated_token_count > 0 and rec.train_token_count > 0
        assert rec.rollout_seconds == outcome.rollout_time > 0
        assert (rec.extra_wave_seconds > 0) == (rec.wave_count > 1)
        assert rec.first_wave_fill_seconds <= rec.decisions[-1].judged_at
    assert any(r.wave_count > 1 for r in records)  # the burst
    assert all(r.filter_seconds > 0 for r in records)  # measured (its size is the benchmark's business)
    assert "filter_seconds / simulated rollout_seconds" in format_cost(records)
    assert "simulated seconds per step" in format_cost(records)


# --- W&B: the cost keys read back from an offline run, at the step's rollout/step ----------------------
from tests.wandb_helpers import wandb_env  # noqa: E402,F401 - fixture


def test_cost_keys_read_back_from_an_offline_wandb_run(wandb_env, tmp_path) -> None:  # noqa: F811
    from shopsim_metrics.readers.wandb_offline import find_run_dirs, read_offline_run

    config = SimConfig(steps=4, seed=2, technical_rate=0.3, max_technical_streak=3)
    result = Simulator(config, sinks=None, extra_args={"shopsim_run_dir": str(tmp_path / "run")}).run()
    (run_dir,) = find_run_dirs(wandb_env)
    rows = [row for row in read_offline_run(run_dir).history  # rows of step scalars (tables may come apart)
            if C.WANDB_STEP_KEY in row and C.wandb_key("wave_count") in row]
    assert [row[C.WANDB_STEP_KEY] for row in rows] == [r.rollout_id for r in result.records] == [0, 1, 2, 3]
    for rec, row in zip(result.records, rows):
        assert rec.filter_time_fraction == pytest.approx(rec.filter_seconds / rec.rollout_seconds)
        for name in C.COST_FIELDS:
            assert row[C.wandb_key(name)] == pytest.approx(getattr(rec, name)), name
        assert row[C.wandb_key("generated_token_count")] > 0
