"""Property-based tests: for random rewards, failures, fan-out, knobs and completion orders, every
identity of the metrics contract holds and the recorded verdicts equal the loop's own."""

from __future__ import annotations

import random
from pathlib import Path
from types import SimpleNamespace

from hypothesis import HealthCheck, given, settings
from conftest import run_scripted_step, scripted_loop
from hypothesis import strategies as st

from shopsim_metrics.step.closed_step import StepKnobs, step_draft
from shopsim_metrics.step.accounting import StepAccountant
from shopsim_metrics.loop.loop_state import ManualLoopState
from shopsim_metrics.simulator.samples import SimSample
from shopsim_metrics.sinks import JsonlSink, MemorySink
from shopsim_metrics.readers import read_steps
from shopsimrl import slime_runtime
from shopsim_metrics.judging.group_judgement import judge_group

knobs = st.fixed_dictionaries(
    {
        "rollout_batch_size": st.integers(1, 6),
        "extra_over_sampling_batch_size": st.integers(0, 8),
        "n_samples_per_prompt": st.integers(1, 4),
        "global_batch_size": st.integers(1, 8),
        "p_technical": st.floats(0.0, 0.45),
        "p_zero": st.floats(0.0, 1.0),
        "p_fanout": st.floats(0.0, 1.0),
        "max_batch": st.integers(1, 6),
        "seed": st.integers(0, 2**32 - 1),
        "steps": st.integers(1, 3),
    }
)


def make_group_factory(k, rng_seed):
    n = k["n_samples_per_prompt"]

    def make(gid: int):
        rng = random.Random(rng_seed * 7919 + gid)
        kind = rng.random()
        if kind < k["p_technical"]:
            rewards = [rng.choice([0.0, 1.0]) for _ in range(n)]
            bad = rng.choice(["none", "nan", "status", "string", "few"])
            if bad == "few" and n > 1:
                rewards = rewards[:-1]
        elif rng.random() < k["p_zero"]:
            rewards = [rng.choice([0.0, 0.5, 1.0])] * n
            bad = None
        else:
            rewards = [rng.choice([0.0, 0.3, 1.0]) for _ in range(n)]
            rewards[0], rewards[-1] = (0.0, 1.0) if n > 1 else (rewards[0], rewards[0])
            bad = None
        fan = rng.random() < k["p_fanout"]
        group = []
        for i, r in enumerate(rewards):
            rid = gid * 100 + i
            segs = [SimSample(index=rid * 10 + s, group_index=gid, rollout_id=rid, reward=r if s == 0 else None)
                    for s in range(rng.randint(1, 3) if fan else 1)]
            group.append(segs if fan else segs[0])
        if bad is not None and bad != "few":
            first = group[0][0] if fan else group[0]
            if bad == "none":
                first.reward = None
                if fan:
                    for seg in group[0]:
                        seg.reward = None
            elif bad == "nan":
                first.reward = float("nan")
            elif bad == "string":
                first.reward = "1.0"
            else:
                first.status = "failed"
        return group

    return make


def random_batches(seed, max_batch):
    rng = random.Random(seed)

    def next_batch(pending):
        k = rng.randint(1, min(max_batch, len(pending)))
        return rng.sample(pending, k)

    return next_batch


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(k=knobs)
def test_records_match_the_loop_and_every_identity_holds(tmp_path_factory, k):
    run_dir = Path(tmp_path_factory.mktemp("run"))
    rollout_batch_size = k["rollout_batch_size"]
    args = SimpleNamespace(
        rollout_batch_size=rollout_batch_size,
        over_sampling_batch_size=rollout_batch_size + k["extra_over_sampling_batch_size"],
        n_samples_per_prompt=k["n_samples_per_prompt"],
        global_batch_size=k["global_batch_size"],
        reward_key=None,
        shopsim_max_consecutive_failed_groups=10_000,
    )
    state = ManualLoopState(source="scripted")
    memory = MemorySink()
    slime_runtime.configure(args, sinks=[memory, JsonlSink(run_dir)], loop_state=state)
    loop = scripted_loop(args, state)
    make = make_group_factory(k, k["seed"])
    results = []
    try:
        for step in range(k["steps"]):
            results.append(run_scripted_step(loop, step, make, random_batches(k["seed"] + step, k["max_batch"])))
    finally:
        slime_runtime.reset_runtime()

    assert [r.rollout_id for r in memory.records] == list(range(k["steps"]))
    assert read_steps(run_dir) == memory.records
    for res, rec in zip(results, memory.records):
        outcome = {row.group_index: row.outcome for row in rec.decisions}
        # the recorded verdicts are the loop's own
        assert [row.group_index for row in rec.decisions] == res.judged_ids
        assert sorted(g for g, o in outcome.items() if o in ("trained", "fallback")) == sorted(res.train_ids)
        assert sorted(g for g, o in outcome.items() if o == "surplus") == sorted(res.surplus_ids)
        assert {g: ("shopsim_unscored_technical_group" if o == "dropped_technical" else "shopsim_zero_std_group")
                for g, o in outcome.items() if o.startswith("dropped")} == res.dropped
        assert [row.remaining_before for row in rec.decisions] == res.remaining_before
        # the contract's identities
        assert rec.accepted_group_count == (rec.train_group_count + rec.technical_group_drop_count
                                            + rec.zero_std_group_drop_count + rec.surplus_group_count)
        assert rec.train_group_count == rollout_batch_size
        assert rec.submitted_group_count == rec.wave_count * args.over_sampling_batch_size == res.submitted
        assert rec.wave_count == res.waves
        assert rec.aborted_group_count == rec.submitted_group_count - rec.accepted_group_count == len(res.aborted_ids)
        assert rec.reconcile_mismatch_count == 0
        assert res.drop_metrics.get("rollout/dynamic_filter/drop_shopsim_unscored_technical_group", 0) == \
            rec.technical_group_drop_count
        assert res.drop_metrics.get("rollout/dynamic_filter/drop_shopsim_zero_std_group", 0) == \
            rec.zero_std_group_drop_count
        assert rec.remaining_min == min(res.remaining_before)
        assert all(1 <= row.waves_open <= rec.wave_count for row in rec.decisions)
        assert [row.order for row in rec.decisions] == list(range(1, rec.accepted_group_count + 1))
        # success_rate over all completed generations = direct computation over every judged group
        judged = [judge_group(make(g), n_samples=args.n_samples_per_prompt) for g in res.judged_ids]
        assert rec.zero_std_group_count == sum(j.kind == "zero_std" for j in judged)
        assert rec.fallback_group_count <= rec.zero_std_group_count - rec.zero_std_group_drop_count
        zero = [j for j in judged if j.kind == "zero_std"]
        all_pass = sum(j.success_count == j.scorable_rollouts for j in zero)
        all_fail = sum(j.success_count == 0 for j in zero)
        assert (rec.zero_std_all_pass_group_count, rec.zero_std_all_fail_group_count,
                rec.zero_std_other_group_count) == (all_pass, all_fail, len(zero) - all_pass - all_fail)
        scorable = sum(j.scorable_rollouts for j in judged)
        if scorable:
            assert rec.success_rate == sum(j.success_count for j in judged) / scorable
        else:
            assert rec.success_rate is None
        assert rec.optimizer_update_count == rec.train_sample_count / args.global_batch_size
        for ratio in (rec.technical_group_drop_rate, rec.zero_std_group_drop_rate, rec.wasted_sample_fraction,
                      rec.zero_advantage_train_fraction):
            assert ratio is None or 0.0 <= ratio <= 1.0


@settings(max_examples=200, deadline=None)
@given(kinds=st.lists(st.sampled_from(["technical", "spread", "zero_std"]), min_size=1, max_size=60),
       steps=st.lists(st.integers(0, 2), min_size=60, max_size=60))
def test_streak_is_the_run_of_technical_groups_and_the_records_read_it(kinds, steps):
    from shopsim_metrics.judging.group_judgement import GroupJudgement
    from shopsim_metrics.health.streak import TechnicalStreak

    acc = StepAccountant(StepKnobs(rollout_batch_size=4, over_sampling_batch_size=4))
    streak = TechnicalStreak()
    expected, step, seen = 0, 0, {}
    for i, kind in enumerate(kinds):
        step += steps[i]  # steps only move forward; the streak carries across them
        check = ["status_failed", "reward_missing"][i % 2] if kind == "technical" else None
        j = GroupJudgement(kind, check, i, 2, (0.0, 1.0), 1)
        count = streak.observe(check)
        acc.judge(j, step=step, remaining=None, streak=count)
        expected = expected + 1 if kind == "technical" else 0
        assert count == streak.count == expected
        assert sum(streak.checks.values()) == expected
        last, peak = seen.get(step, (0, 0))
        seen[step] = (count, max(peak, count))
    acc.close_step()
    for record in (step_draft(closed).finish() for closed in acc.take_closed()):
        assert (record.consecutive_technical_failures, record.max_consecutive_technical_failures) == \
            seen[record.rollout_id]


@settings(max_examples=200, deadline=None)
@given(
    rollout_batch_size=st.integers(1, 8),
    extra=st.integers(0, 10),
    zero_flags=st.lists(st.booleans(), min_size=200, max_size=200),
    max_batch=st.integers(1, 8),
    seed=st.integers(0, 2**16),
)
def test_without_technical_failures_there_is_never_a_second_wave(rollout_batch_size, extra, zero_flags, max_batch,
                                                                  seed):
    """§5 of the design document: zero-std groups switch to the fallback at remaining == rollout_batch_size,
    so on their own they never cause re-sampling, whatever the completion order."""
    args = SimpleNamespace(rollout_batch_size=rollout_batch_size,
                           over_sampling_batch_size=rollout_batch_size + extra,
                           n_samples_per_prompt=2, global_batch_size=2, reward_key=None)
    state = ManualLoopState(source="scripted")
    memory = MemorySink()
    slime_runtime.configure(args, sinks=[memory], loop_state=state)
    loop = scripted_loop(args, state)

    def make(gid):
        rewards = [1.0, 1.0] if zero_flags[gid % 200] else [0.0, 1.0]
        return [SimSample(index=gid * 2 + i, group_index=gid, reward=r) for i, r in enumerate(rewards)]

    try:
        result = run_scripted_step(loop, 0, make, random_batches(seed, max_batch))
    finally:
        slime_runtime.reset_runtime()
    (record,) = memory.records
    assert result.waves == record.wave_count == 1
    assert record.remaining_min >= rollout_batch_size
    assert record.zero_std_group_drop_count <= extra  # only the over-sampled slots can be given up
