"""The simulated slime loop: slime's rules for any completion order, deterministic, the contract's identities,
the latency model's batches and concurrency, the reward model, bursts and termination."""

from __future__ import annotations

import random

import numpy as np
import pytest
from conftest import fifo_batches, group_of, make_args, spread, technical, zero
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from shopsim_metrics.run.identity import WRITER_FIELDS
from shopsim_metrics.loop.loop_state import ManualLoopState
from shopsim_metrics.simulator.samples import SimSample
from shopsim_metrics.simulator.config import FailureBurst, SimConfig
from shopsim_metrics.simulator.loop import SimulatedSlimeLoop, Simulator, simulate
from shopsim_metrics.simulator.latency import LatencyCompletions, LatencyModel, ScriptedCompletions, makespan
from shopsim_metrics.simulator.rewards import FactoryGroupSource
from shopsim_metrics.sinks import MemorySink
from shopsim_metrics import monitor as runtime_module
from shopsimrl import slime_runtime
from shopsim_metrics.errors import TechnicalFailureLimitExceeded
from shopsim_metrics.judging.group_judgement import SPREAD, ZERO_STD, judge_group

TECH = "shopsim_unscored_technical_group"
ZERO = "shopsim_zero_std_group"


@pytest.fixture(autouse=True)
def _reset_runtime():
    yield
    slime_runtime.reset_runtime()


# --- explicit group contents and completion orders ---------------------------------------------------
def make_factory(kinds: list[str], n: int):
    """Group ``gid`` is ``kinds[gid % len(kinds)]``; a fan-out kind splits each rollout in two segments."""

    def make(gid: int) -> list:
        kind = kinds[gid % len(kinds)]
        if kind == "spread":
            return spread(gid, n) if n > 1 else technical(gid, n)
        if kind == "zero":
            return zero(gid, n, value=0.5)
        if kind == "technical":
            return technical(gid, n)
        # fan-out with spread: list[list[Sample]], segments share the rollout id
        rewards = [float(i % 2) for i in range(n)]
        return [[SimSample(index=gid * 1000 + 10 * i + s, group_index=gid, rollout_id=gid * 1000 + i,
                           reward=r if s == 0 else None) for s in range(2)] for i, r in enumerate(rewards)]

    return make


def random_order(seed: int, max_batch: int):
    """A completion order that picks up to ``max_batch`` pending groups at random (same seed, same picks)."""
    rng = random.Random(seed)

    def next_batch(pending: list[int]) -> list[int]:
        return rng.sample(pending, rng.randint(1, min(max_batch, len(pending))))

    return next_batch


def run_simulated(args, make, order, steps):
    state, memory = ManualLoopState(source="loop"), MemorySink()
    slime_runtime.configure(args, sinks=[memory], loop_state=state)
    loop = SimulatedSlimeLoop(args, source=FactoryGroupSource(make), completions=ScriptedCompletions(order),
                              loop_state=state)
    outcomes, error = [], None
    try:
        for step in range(steps):
            outcomes.append(loop.run_step(step))
    except TechnicalFailureLimitExceeded as exc:
        error = exc
    finally:
        slime_runtime.reset_runtime()
    return outcomes, memory.records, error


TIME_FIELDS = ("rollout_seconds", "filter_seconds", "filter_time_fraction", "first_wave_fill_seconds", "extra_wave_seconds", "judged_at")


def untimed(record) -> dict:
    """A record's dict without its clock readings (each loop runs on its own clock)."""
    data = {k: v for k, v in record.to_dict().items() if k not in TIME_FIELDS and k not in WRITER_FIELDS}
    data["decisions"] = [{k: v for k, v in row.items() if k not in TIME_FIELDS} for row in data["decisions"]]
    return data


def filter_answer(group, n: int) -> tuple[bool, bool, str | None]:
    """What the project's filter answers for a group: ``(keep, keep_when_insufficient, reason)``."""
    kind = judge_group(group, n_samples=n).kind
    if kind == SPREAD:
        return True, False, None
    if kind == ZERO_STD:
        return False, True, ZERO
    return False, False, TECH


def assert_follows_slimes_rules(args, make, simulated):
    """Every step obeys slime's loop as slime_integration.md states it, replayed over the loop's own judgement
    order and completion batches: waves open between batches while ``remaining < rollout_batch_size``; a group
    is dropped unless kept or let through at ``remaining <= rollout_batch_size``; a drop lowers ``remaining``;
    kept groups fill the train batch, later ones are surplus; the rest is aborted. The records hold the same
    verdicts, and the run terminates exactly when the technical streak reaches the limit."""
    outcomes, records, error = simulated
    rbs, over, n = args.rollout_batch_size, args.over_sampling_batch_size, args.n_samples_per_prompt
    limit = args.shopsim_max_consecutive_failed_groups
    first_id = streak = 0
    for out, rec in zip(outcomes, records):
        remaining = submitted = waves = 0
        train, surplus, dropped, before, metrics = [], [], {}, [], {}
        judged = iter(out.judged_ids)
        for size in out.batch_sizes:
            assert len(train) < rbs  # the loop waits for groups only while the train batch is not full
            while remaining < rbs:
                remaining, submitted, waves = remaining + over, submitted + over, waves + 1
            for _ in range(size):
                gid = next(judged)
                assert first_id <= gid < first_id + submitted  # only submitted groups finish
                before.append(remaining)
                keep, when_insufficient, reason = filter_answer(make(gid), n)
                streak = streak + 1 if reason == TECH else 0
                if keep or (when_insufficient and remaining <= rbs):
                    (train if len(train) < rbs else surplus).append(gid)
                else:
                    dropped[gid] = reason
                    metrics[f"rollout/dynamic_filter/drop_{reason}"] = metrics.get(f"rollout/dynamic_filter/drop_{reason}", 0) + 1
                    remaining -= 1
        assert next(judged, None) is None and len(train) == rbs
        assert len(set(out.judged_ids)) == len(out.judged_ids)
        assert (out.train_ids, out.surplus_ids, out.dropped, out.remaining_before) == (train, surplus, dropped, before)
        assert (out.submitted, out.waves, out.remaining_end, out.drop_metrics) == (submitted, waves, remaining, metrics)
        assert sorted(out.aborted_ids) == sorted(set(range(first_id, first_id + submitted)) - set(out.judged_ids))
        assert streak < limit
        # the project's record holds the loop's verdicts
        assert [row.group_index for row in rec.decisions] == out.judged_ids
        assert [row.remaining_before for row in rec.decisions] == out.remaining_before
        assert sorted(row.group_index for row in rec.decisions if row.outcome in ("trained", "fallback")) == sorted(train)
        assert [row.group_index for row in rec.decisions if row.outcome == "surplus"] == surplus
        assert {row.group_index: row.reason for row in rec.decisions if row.outcome.startswith("dropped")} == dropped
        assert (rec.submitted_group_count, rec.wave_count, rec.terminated) == (submitted, waves, False)
        first_id += submitted
    assert len(records) == len(outcomes) + (error is not None)
    if error is not None:  # the terminated step: its record ends with the group that reached the limit
        last = records[-1]
        assert last.terminated and error.rollout_id == last.rollout_id == len(outcomes)
        for i, row in enumerate(last.decisions):
            streak = streak + 1 if filter_answer(make(row.group_index), n)[2] == TECH else 0
            assert (streak >= limit) == (i == len(last.decisions) - 1)
        assert error.streak == streak == limit


def test_the_loop_follows_slimes_rules_on_the_design_documents_burst():
    # 17 technical groups then spread: remaining dips to 15 -> a second wave, as in test_design_examples
    args = make_args(shopsim_max_consecutive_failed_groups=100)
    make = lambda gid: technical(gid) if gid < 49 else spread(gid)  # noqa: E731
    simulated = run_simulated(args, make, fifo_batches(1), steps=2)
    assert_follows_slimes_rules(args, make, simulated)
    outcomes = simulated[0]
    assert [o.waves for o in outcomes] == [3, 1]
    assert outcomes[0].judged_ids == list(range(65)) and outcomes[1].judged_ids == list(range(96, 112))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    kinds=st.lists(st.sampled_from(["spread", "zero", "technical", "fanout"]), min_size=1, max_size=40),
    rollout_batch_size=st.integers(1, 6),
    extra=st.integers(0, 8),
    n=st.integers(1, 4),
    max_batch=st.integers(1, 8),
    seed=st.integers(0, 2**31),
    steps=st.integers(1, 3),
    max_consecutive_failed_groups=st.sampled_from([3, 8, 10_000]),
)
def test_the_loop_follows_slimes_rules_for_any_completion_order(kinds, rollout_batch_size, extra, n, max_batch, seed,
                                                               steps, max_consecutive_failed_groups):
    if "technical" in kinds and all(k == "technical" for k in kinds) and max_consecutive_failed_groups == 10_000:
        max_consecutive_failed_groups = 50  # an all-technical source would open waves forever: let the limit end it
    args = make_args(rollout_batch_size=rollout_batch_size, over_sampling_batch_size=rollout_batch_size + extra,
                     n_samples_per_prompt=n, global_batch_size=max(1, rollout_batch_size),
                     shopsim_max_consecutive_failed_groups=max_consecutive_failed_groups)
    make = make_factory(kinds, n)
    simulated = run_simulated(args, make, random_order(seed, max_batch), steps)
    assert_follows_slimes_rules(args, make, simulated)
    # the same completion script gives the same run
    again = run_simulated(args, make, random_order(seed, max_batch), steps)
    assert [untimed(r) for r in again[1]] == [untimed(r) for r in simulated[1]]


# --- determinism ----------------------------------------------------------------------------------
def seeded(record) -> dict:
    """A record's dict without ``filter_seconds`` and its ratio (the wall clock) and who wrote it."""
    data = {k: v for k, v in record.to_dict().items() if k not in WRITER_FIELDS}
    del data["filter_seconds"], data["filter_time_fraction"]
    return data


def test_a_seed_gives_the_same_run_and_another_seed_a_different_one():
    config = SimConfig(steps=25, seed=11, technical_rate=0.1, bursts=(FailureBurst(step=5, rate=0.7),),
                       max_technical_streak=5, max_concurrent_groups=20)
    first, second, other = simulate(config), simulate(config), simulate(config.with_(seed=12))
    assert [seeded(r) for r in first.records] == [seeded(r) for r in second.records]
    assert [o.batch_sizes for o in first.outcomes] == [o.batch_sizes for o in second.outcomes]
    assert [o.rollout_time for o in first.outcomes] == [o.rollout_time for o in second.outcomes]
    assert [seeded(r) for r in first.records] != [seeded(r) for r in other.records]
    simulator = Simulator(config, sinks=[])
    again = [simulator.run(), simulator.run()]
    assert all([seeded(r) for r in run.records] == [seeded(r) for r in first.records] for run in again)


def test_the_runtime_is_reset_after_a_run_even_when_it_terminates():
    simulate(SimConfig(steps=2))
    assert runtime_module._runtime is None
    simulate(SimConfig(steps=5, technical_rate=1.0))
    assert runtime_module._runtime is None


# --- the contract's identities for random configs and seeds -----------------------------------------
configs = st.builds(
    lambda rbs, extra, n, gbs, z, t, tick, conc, seed, steps, prompts: SimConfig(
        rollout_batch_size=rbs, over_sampling_batch_size=rbs + extra, n_samples_per_prompt=n, global_batch_size=gbs,
        zero_std_rate=None if prompts else z, technical_rate=t, latency_tick=tick, max_concurrent_groups=conc,
        seed=seed, steps=steps, max_consecutive_failed_groups=10_000),
    rbs=st.integers(1, 12), extra=st.integers(0, 24), n=st.integers(1, 8), gbs=st.integers(1, 64),
    z=st.floats(0.0, 0.6), t=st.floats(0.0, 0.4), tick=st.sampled_from([0.5, 5.0, 30.0]),
    conc=st.one_of(st.none(), st.integers(1, 40)), seed=st.integers(0, 2**31), steps=st.integers(1, 6),
    prompts=st.booleans(),
)


@settings(max_examples=120, deadline=None)
@given(config=configs)
def test_every_record_satisfies_the_contract_identities_and_matches_the_loop(config):
    result = simulate(config)
    assert not result.terminated
    assert len(result.records) == len(result.outcomes) == config.steps
    over_sampling_batch_size = config.over_sampling_batch_size
    for rec, out in zip(result.records, result.outcomes):
        assert rec.accepted_group_count == (rec.train_group_count + rec.technical_group_drop_count
                                            + rec.zero_std_group_drop_count + rec.surplus_group_count)
        assert rec.train_group_count == config.rollout_batch_size == len(out.train_ids)
        assert rec.submitted_group_count == rec.wave_count * over_sampling_batch_size == out.submitted
        assert rec.aborted_group_count == rec.submitted_group_count - rec.accepted_group_count == len(out.aborted_ids)
        assert rec.wave_count == out.waves
        assert [row.group_index for row in rec.decisions] == out.judged_ids
        assert [row.remaining_before for row in rec.decisions] == out.remaining_before
        assert rec.technical_group_drop_count == out.drop_metrics.get(f"rollout/dynamic_filter/drop_{TECH}", 0)
        assert rec.zero_std_group_drop_count == out.drop_metrics.get(f"rollout/dynamic_filter/drop_{ZERO}", 0)
        assert rec.reconcile_mismatch_count == 0
        assert out.remaining_end == len(out.train_ids) + len(out.surplus_ids) + len(out.aborted_ids)
        assert sum(out.batch_sizes) == rec.accepted_group_count
        assert rec.generation_stats_source == "all_samples_hook"
        # why a group was zero-std: the three verdicts add up, and each is the ledger's own count
        causes = (rec.zero_std_all_pass_group_count, rec.zero_std_all_fail_group_count,
                  rec.zero_std_other_group_count)
        assert sum(causes) == rec.zero_std_group_count
        zero_rows = [row for row in rec.decisions if row.reason == ZERO]
        assert rec.zero_std_all_pass_group_count == sum(row.success_count == row.scorable_rollouts > 0
                                                        for row in zero_rows)
        assert rec.zero_std_all_fail_group_count == sum(row.success_count == 0 for row in zero_rows)


# --- latency model: batches, concurrency, time --------------------------------------------------------
def test_groups_finishing_in_the_same_tick_come_back_in_one_batch():
    model = LatencyModel(median=30.0, sigma=0.3, tick=10.0, rng=np.random.default_rng(0))
    result = Simulator(SimConfig(steps=20, technical_rate=0.0), completions=LatencyCompletions(model, None),
                       sinks=[]).run()
    sizes = [size for out in result.outcomes for size in out.batch_sizes]
    assert max(sizes) > 1  # coarse ticks: several groups per batch
    # the whole batch is judged, even when the train batch fills in the middle of it: surplus appears
    assert sum(r.surplus_group_count for r in result.records) > 0


def test_concurrency_limit_queues_groups_and_sets_the_step_time():
    model = LatencyModel(median=10.0, sigma=0.0, tick=1.0, rng=np.random.default_rng(0))
    one_at_a_time = LatencyCompletions(model, concurrency=1)
    config = SimConfig(steps=2, technical_rate=0.0, zero_std_rate=0.0, rollout_batch_size=4,
                       over_sampling_batch_size=8)
    result = Simulator(config, completions=one_at_a_time, sinks=[]).run()
    for out in result.outcomes:
        assert out.batch_sizes == [1, 1, 1, 1]  # all spread: 4 kept, then the step ends
        assert out.rollout_time == 40.0  # four groups of 10 s, one after the other
        assert len(out.aborted_ids) == 4
    all_at_once = Simulator(config, completions=LatencyCompletions(model, concurrency=None), sinks=[]).run()
    assert [out.batch_sizes for out in all_at_once.outcomes] == [[8], [8]]
    assert all(out.rollout_time == 10.0 for out in all_at_once.outcomes)
    assert [r.surplus_group_count for r in all_at_once.records] == [4, 4]


def test_makespan_respects_the_concurrency_limit():
    assert makespan([5, 5, 5, 5], 2) == 10
    assert makespan([5, 5, 5, 5], 4) == 5
    assert makespan([1, 1, 1, 9], 1) == 12


# --- reward model ---------------------------------------------------------------------------------------
def test_the_learning_curve_raises_the_success_rate():
    # lengths independent of difficulty: otherwise hard prompts run long, are aborted more often, and the
    # judged groups' success rate reads high early on (a real effect, not the one under test here)
    config = SimConfig(steps=60, seed=3, skill_start=-2.0, skill_end=2.0, learning_steps=15.0, technical_rate=0.0,
                       hard_prompt_length_slope=0.0)
    rates = [r.success_rate for r in simulate(config).records]
    assert np.mean(rates[-15:]) > np.mean(rates[:15]) + 0.3


def test_partial_credit_gives_non_binary_rewards_and_intermediate_zero_std_groups():
    # hopeless prompts, but a failing sibling nearly always earns the partial credit 0.5
    config = SimConfig(steps=20, seed=5, skill_start=-8.0, skill_end=-8.0, partial_credit_rate=0.95,
                       partial_credit_levels=(0.5,), technical_rate=0.0)
    records = simulate(config).records
    rows = [row for r in records for row in r.decisions]
    assert {row.reward_min for row in rows} <= {0.0, 0.5, 1.0}
    assert any(row.reason == ZERO and row.reward_min == row.reward_max == 0.5 for row in rows)
    assert any(row.reason is None and row.reward_min == 0.0 and row.reward_max == 0.5 for row in rows)
    reward_mean = np.mean([r.reward_mean for r in records])
    assert reward_mean == pytest.approx(0.5 * 0.95, abs=0.03)
    assert max(r.success_rate for r in records) < 0.02  # partial credit is not success (threshold 1.0)


def test_rates_model_reproduces_the_given_rates():
    config = SimConfig(steps=400, seed=2, zero_std_rate=0.3, technical_rate=0.1,
                       max_consecutive_failed_groups=10_000)
    records = simulate(config).records
    accepted = sum(r.accepted_group_count for r in records)
    assert sum(r.zero_std_group_count for r in records) / accepted == pytest.approx(0.3, abs=0.02)
    assert sum(r.technical_group_drop_count for r in records) / accepted == pytest.approx(0.1, abs=0.015)
    checks = {check for r in records for check in r.failed_check_counts}
    assert checks == {"status_failed", "reward_missing", "metadata_unscored"}


# --- failures: bursts, the streak cap, termination --------------------------------------------------------
def test_a_burst_opens_extra_waves_and_the_streak_cap_keeps_it_below_the_limit():
    config = SimConfig(steps=6, seed=0, technical_rate=0.0, bursts=(FailureBurst(step=3, rate=1.0),),
                       max_technical_streak=6)
    result = simulate(config)
    assert not result.terminated
    by_step = {r.rollout_id: r for r in result.records}
    assert by_step[3].wave_count >= 2 and by_step[3].max_consecutive_technical_failures == 6
    assert all(by_step[s].technical_group_drop_count == 0 for s in (0, 1, 2, 4, 5))
    warns = [a for a in result.alerts if a.level == "WARN"]
    assert [a.rollout_id for a in warns] == [3]  # the burst is one event: one WARN for its step
    assert "the longest 6" in warns[0].text


def test_termination_ends_the_run_like_slime_and_keeps_the_terminated_record():
    config = SimConfig(steps=10, seed=0, technical_rate=0.0, bursts=(FailureBurst(step=2, rate=1.0),))
    result = simulate(config)
    assert result.terminated and result.termination.rollout_id == 2
    assert len(result.outcomes) == 2  # steps 0 and 1 completed; step 2 never finished
    last = result.records[-1]
    assert last.rollout_id == 2 and last.terminated
    assert last.technical_group_drop_count == 8 == last.max_consecutive_technical_failures
    assert [(a.level, a.rollout_id) for a in result.alerts] == [("ERROR", 2)]  # one alert for the step
    with pytest.raises(TechnicalFailureLimitExceeded):
        Simulator(config, sinks=[]).run(raise_on_termination=True)


def test_explicit_group_contents_with_the_latency_model():
    make = lambda gid: group_of(gid, [float(gid % 2)] * 4) if gid % 3 == 0 else spread(gid, 4)  # noqa: E731
    config = SimConfig(steps=3, n_samples_per_prompt=4, rollout_batch_size=4, over_sampling_batch_size=8)
    result = Simulator(config, source=FactoryGroupSource(make), sinks=[]).run()
    for rec in result.records:
        zero_std = [row.group_index for row in rec.decisions if row.reason == ZERO]
        assert all(g % 3 == 0 for g in zero_std)
        assert rec.zero_std_group_count == sum(1 for row in rec.decisions if row.group_index % 3 == 0)


def test_config_errors_name_the_field_and_the_value():
    with pytest.raises(ValueError, match="over_sampling_batch_size: expected an integer >= rollout_batch_size \\(16\\); got 8"):
        SimConfig(over_sampling_batch_size=8)
    with pytest.raises(ValueError, match="zero_std_rate \\+ technical_rate must be <= 1"):
        SimConfig(zero_std_rate=0.8, technical_rate=0.3)
    with pytest.raises(ValueError, match="bursts\\[0\\].rate"):
        SimConfig(bursts=(FailureBurst(step=1, rate=1.5),))


def test_without_kept_records_the_simulator_holds_nothing_per_step_and_the_tally_agrees() -> None:
    from shopsim_metrics.simulator.demo import demo_config
    from shopsim_metrics.simulator.loop import Simulator
    from shopsim_metrics.simulator.tally import RunTally

    config = demo_config(steps=40, seed=3)
    kept = Simulator(config, sinks=[]).run()
    tally = RunTally(edge_rows=5, planned_steps=40)
    tally.wanted.add(config.bursts[0].step)
    lean = Simulator(config, sinks=[], keep_records=False, tally=tally).run()
    assert lean.records == [] and lean.outcomes == [] and lean.alerts == []
    assert tally.steps == len(kept.records) == 40
    assert tally.multi_wave == [(r.rollout_id, r.wave_count) for r in kept.records if r.wave_count > 1]
    worst = max(kept.records, key=lambda r: r.max_consecutive_technical_failures)
    assert tally.worst_streak == (worst.max_consecutive_technical_failures, worst.rollout_id)
    shown = [r.rollout_id for r in tally.table_records()]
    assert shown == [*range(5), config.bursts[0].step, *range(35, 40)]
    assert [a.title for a in tally.alerts] == [a.title for a in kept.alerts] and tally.alert_count == len(kept.alerts)
    from conftest import persistence_by_quarter

    assert tally.persistence_by_quarter() == persistence_by_quarter(kept.records)
