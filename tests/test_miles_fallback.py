"""The filter for a loop without ``keep_when_insufficient`` (miles): slime's fallback decided by the filter itself.

A stand-in of miles' class-based rollout (its group-level scheduler: a wave of ``over_sampling_batch_size``
groups while the pending groups are fewer than the groups the batch still needs; finished groups judged in
batches; a kept group trained while the batch has room) runs the core's
:meth:`~shopsim_metrics.hooks.Hooks.filter_deciding_fallback` over the monitor's mirror of ``remaining``. For any
groups and any finishing batches: every step ends, and its record is what the loop did, group for group, wave for
wave; a step whose groups are all zero-std ends in one wave.
"""

from __future__ import annotations

from types import SimpleNamespace

from hypothesis import given
from hypothesis import strategies as st

from shopsim_metrics.hooks import Hooks
from shopsim_metrics.loop.loop_state import NoLoopState
from shopsim_metrics.monitor import configure, get_runtime, reset_runtime
from shopsim_metrics.simulator.samples import SimSample
from shopsim_metrics.sinks import MemorySink

REWARDS = {"spread": (0.0, 1.0), "zero_std": (1.0, 1.0), "technical": (None, None)}
HOOKS = Hooks(get_runtime)


def run(kinds: list[str], batches: list[int], target: int, over: int, steps: int) -> tuple[list[dict], list]:
    """``steps`` steps of the stand-in loop over groups of ``kinds`` (then groups with spread, so every step can end)."""
    args = SimpleNamespace(rollout_batch_size=target, over_sampling_batch_size=over, n_samples_per_prompt=2,
                           reward_key=None, shopsim_max_consecutive_failed_groups=1_000_000)
    mem = MemorySink()
    configure(args, sinks=[mem], loop_state=NoLoopState())
    served, turn, truth = 0, 0, []
    try:
        for rollout_id in range(steps):
            pending, data, judged, dropped, waves = [], [], [], [], 0
            while len(data) < target:
                while len(pending) < target - len(data):
                    for _ in range(over):
                        kind = kinds[served] if served < len(kinds) else "spread"
                        pending.append([SimSample(index=2 * served + i, group_index=served, reward=r)
                                        for i, r in enumerate(REWARDS[kind])])
                        served += 1
                    waves += 1
                    assert waves <= len(kinds) + 2, "the step does not end"
                size = min(batches[turn % len(batches)], len(pending))
                turn += 1
                batch, pending = pending[:size], pending[size:]
                for group in batch:
                    judged.append(group)
                    if not HOOKS.filter_deciding_fallback(args, group).keep:
                        dropped.append(group[0].group_index)
                    elif len(data) < target:
                        data.append(group)
            HOOKS.all_samples(args, judged)
            HOOKS.log(rollout_id, args, [s for g in data for s in g], {}, 1.0)
            truth.append({"trained": sorted(g[0].group_index for g in data), "dropped": sorted(dropped),
                          "waves": waves, "judged": len(judged)})
    finally:
        reset_runtime()
    return truth, mem.records


def outcomes(record, *names: str) -> list[int]:
    return sorted(row.group_index for row in record.decisions if row.outcome in names)


@given(kinds=st.lists(st.sampled_from(sorted(REWARDS)), max_size=40),
       batches=st.lists(st.integers(1, 5), min_size=1, max_size=8),
       target=st.integers(1, 4), extra=st.integers(0, 4), steps=st.integers(1, 3))
def test_every_step_ends_and_its_record_is_what_the_loop_did(kinds, batches, target, extra, steps):
    truth, records = run(kinds, batches, target, target + extra, steps)
    assert [r.rollout_id for r in records] == list(range(steps))
    for t, r in zip(truth, records):
        assert outcomes(r, "trained", "fallback") == t["trained"]
        assert outcomes(r, "dropped_zero_std", "dropped_technical") == t["dropped"]
        assert r.wave_count == t["waves"] and len(r.decisions) == t["judged"]
        assert r.submitted_group_count == t["waves"] * (target + extra)
        # a fallback group is kept only where dropping it would have opened another wave (slime's rule)
        assert all(row.remaining_before <= target for row in r.decisions if row.outcome == "fallback")
        assert all(row.remaining_before > target for row in r.decisions if row.outcome == "dropped_zero_std")


@given(target=st.integers(1, 4), extra=st.integers(0, 4), batches=st.lists(st.integers(1, 5), min_size=1))
def test_a_step_of_zero_std_groups_only_ends_in_its_first_wave(target, extra, batches):
    over = target + extra
    truth, (record,) = run(["zero_std"] * over, batches, target, over, 1)
    assert truth[0]["waves"] == record.wave_count == 1
    assert record.fallback_group_count == target and record.zero_std_group_drop_count == extra
