"""The filter gives a decision for every group, whatever its samples hold.

The only exception the filter may raise is ``TechnicalFailureLimitExceeded`` at the failure limit.
Each odd input below either reads normally or makes the group technical with a named check.
"""

from __future__ import annotations

import enum
import math
import random
from decimal import Decimal
from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from conftest import group_of, make_args
from shopsim_metrics.record.contract import FAILED_CHECKS, OUTCOMES, REASONS
from shopsim_metrics.errors import TechnicalFailureLimitExceeded
from shopsim_metrics.judging.group_judgement import judge_group
from shopsim_metrics.loop.loop_state import ManualLoopState
from shopsim_metrics.simulator.samples import SimSample
from shopsim_metrics.sinks import MemorySink
from shopsimrl import slime_runtime


@pytest.fixture(autouse=True)
def _fresh_runtime():
    yield
    slime_runtime.reset_runtime()


class Raising:
    """Every conversion raises, as a torch meta tensor's ``item()`` / ``__float__`` do."""

    shape = ()

    def item(self):
        raise NotImplementedError("Cannot copy out of meta tensor; no data!")

    def __float__(self):
        raise RuntimeError("no data")


class FloatRaises:
    def __float__(self):
        raise RuntimeError("cannot convert")


class OldSample:
    """An older slime ``Sample``: no ``rollout_id`` attribute at all."""

    def __init__(self, index, reward, status="completed", metadata=None):
        self.index, self.group_index, self.reward, self.status = index, 1, reward, status
        self.metadata = {} if metadata is None else metadata


class RaisingRolloutId(OldSample):
    """A ``Sample`` version whose ``rollout_id`` raises when read."""

    @property
    def rollout_id(self):
        raise AttributeError("rollout_id is not set") from KeyError("rollout_id")


class BrokenStatus(OldSample):
    @property
    def status(self):
        raise RuntimeError("status unavailable")

    @status.setter
    def status(self, value):
        pass


class OtherStatus(enum.Enum):
    COMPLETED = 3


def _decide(group, **args_overrides):
    args = SimpleNamespace(n_samples_per_prompt=args_overrides.pop("n", 3), reward_key=args_overrides.pop("key", None),
                           **args_overrides)
    slime_runtime.configure(args, sinks=[])  # these settings, no records
    return slime_runtime.fully_scored_group_filter(args, group)


def _outcome(out):
    return "keep" if out.keep else out.reason


def test_no_rollout_id_attribute_falls_back_to_index():
    group = [OldSample(i, float(i % 2)) for i in range(3)]
    assert _outcome(_decide(group)) == "keep"
    assert judge_group(group + [OldSample(0, 0.0)], n_samples=3).unique_rollouts == 3


def test_rollout_id_that_raises_on_read_falls_back_to_index():
    group = [RaisingRolloutId(i, float(i % 2)) for i in range(3)]
    assert _outcome(_decide(group)) == "keep"
    assert judge_group(group, n_samples=3).unique_rollouts == 3


def test_unhashable_rollout_id_falls_back_to_index():
    group = group_of(1, [0.0, 1.0, 1.0])
    group[0].rollout_id = [1, 2]
    assert judge_group(group, n_samples=3).kind == "spread"


def test_metadata_none_beside_a_sibling_with_flags():
    group = group_of(1, [0.0, 1.0, 1.0])
    group[0].metadata = None
    group[1].metadata = {"shopsim_success": True, "turns": 3}
    j = judge_group(group, n_samples=3)
    assert (j.kind, j.success_count) == ("spread", 2)
    assert _outcome(_decide(group)) == "keep"


@pytest.mark.parametrize("metadata", [["shopsim_success"], "shopsim_unscored", 7, 1.5, ("a", 1)])
def test_metadata_that_is_not_a_mapping_is_invalid(metadata):
    group = group_of(1, [0.0, 1.0, 1.0])
    group[2].metadata = metadata
    assert judge_group(group, n_samples=3).failed_check == "metadata_invalid"
    assert _outcome(_decide(group)) == REASONS[0]


@pytest.mark.parametrize("status", [["completed"], {"status": "completed"}, {"completed"}])
def test_unhashable_status_is_unknown(status):
    group = group_of(1, [0.0, 1.0, 1.0])
    group[1].status = status
    assert judge_group(group, n_samples=3).failed_check == "status_unknown"
    assert _outcome(_decide(group)) == REASONS[0]


@pytest.mark.parametrize("reward, check", [
    (Raising(), "reward_not_numeric"),
    (FloatRaises(), "reward_not_numeric"),
    (10**400, "reward_not_finite"),
    (-(10**400), "reward_not_finite"),
    (Decimal("sNaN"), "reward_not_finite"),
    (Decimal("NaN"), "reward_not_finite"),
    (Decimal("-Infinity"), "reward_not_finite"),
    (Decimal("1e400"), "reward_not_finite"),
    (np.array([1.0, 0.0]), "reward_not_numeric"),
    (b"1.0", "reward_not_numeric"),
])
def test_rewards_that_cannot_be_read(reward, check):
    group = group_of(1, [0.0, 1.0, 1.0])
    group[1].reward = reward
    j = judge_group(group, n_samples=3)
    assert (j.kind, j.failed_check, j.rewards) == ("technical", check, (0.0, 1.0))
    assert _outcome(_decide(group)) == REASONS[0]


def test_torch_meta_tensor_reward_is_not_numeric():
    torch = pytest.importorskip("torch")
    group = group_of(1, [0.0, 1.0, 1.0])
    group[0].reward = torch.empty((), device="meta")
    assert judge_group(group, n_samples=3).failed_check == "reward_not_numeric"


def test_numpy_array_in_the_success_flag():
    group = group_of(1, [0.0, 1.0, 1.0])
    group[0].metadata = {"shopsim_success": np.array([True, False])}
    assert judge_group(group, n_samples=3).failed_check == "metadata_invalid"
    assert _outcome(_decide(group)) == REASONS[0]


def test_a_status_that_raises_on_read_is_sample_unreadable():
    group = [OldSample(0, 0.0), BrokenStatus(1, 1.0), OldSample(2, 1.0)]
    j = judge_group(group, n_samples=3)
    assert (j.failed_check, j.rewards) == ("sample_unreadable", (0.0, 1.0))


@pytest.mark.parametrize("group", [None, 3, "abc", object(), [None, None, None], [[None], [3]]])
def test_groups_that_are_not_lists_of_samples(group):
    j = judge_group(group, n_samples=3)
    assert j.kind == "technical" and j.failed_check in FAILED_CHECKS


def test_a_foreign_enum_member_is_unknown_and_a_huge_reward_mean_stays_finite():
    group = group_of(1, [1e308, 1e308, 1e308])
    j = judge_group(group, n_samples=3)
    assert (j.kind, j.reward_figures()[3], j.reward_figures()[1]) == ("zero_std", 1e308, 1e308)
    group[0].status = OtherStatus.COMPLETED
    assert judge_group(group, n_samples=3).failed_check == "status_unknown"


# --- arbitrary objects --------------------------------------------------------------------------
_scalars = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=6), st.binary(max_size=4),
    st.complex_numbers(), st.decimals(), st.fractions(), st.sampled_from(
        ["completed", "failed", "aborted", "truncated", "pending", "TRUE", "false", "FAILED", 10**400]),
    st.builds(Raising), st.builds(FloatRaises), st.sampled_from(list(OtherStatus)),
    hnp.arrays(dtype=st.sampled_from([np.float64, np.int64, np.bool_]), shape=hnp.array_shapes(min_dims=0, max_dims=2,
                                                                                                 max_side=2)),
)
_values = st.recursive(
    _scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(st.sampled_from(
        ["shopsim_success", "shopsim_unscored", "acc", "x"]), inner, max_size=3)),
    max_leaves=6,
)
_attribute_names = ("index", "group_index", "rollout_id", "reward", "status", "metadata", "response_length")


@st.composite
def _samples(draw):
    present = draw(st.lists(st.sampled_from(_attribute_names), unique=True))
    return SimpleNamespace(**{name: draw(_values) for name in present})


_groups = st.one_of(
    st.lists(_samples(), max_size=6),
    st.lists(st.lists(_samples(), max_size=3), max_size=4),
    _values,
)


@settings(max_examples=300, deadline=None)
@given(group=_groups, n=st.one_of(st.none(), st.integers(1, 4)), key=st.sampled_from([None, "acc"]))
def test_arbitrary_objects_always_get_a_decision(group, n, key):
    j = judge_group(group, n_samples=n, reward_key=key)
    assert j.kind in ("spread", "zero_std", "technical")
    assert (j.kind == "technical") == (j.failed_check is not None)
    assert j.failed_check is None or j.failed_check in FAILED_CHECKS
    assert all(type(r) is float and math.isfinite(r) for r in j.rewards)
    assert j.reward_figures()[3] is None or math.isfinite(j.reward_figures()[3])
    out = _decide(group, n=n, key=key, shopsim_max_consecutive_failed_groups=10**9)
    assert type(out.keep) is bool and (out.reason is None or out.reason in REASONS)


# --- a seeded fuzz through the real hook with accounting -----------------------------------------
_PALETTE_REWARDS = [0.0, 1.0, 0.5, None, math.nan, math.inf, 1e308, -1e308, 10**400, Decimal("sNaN"), "1",
                    np.float32(1.0), np.array([1.0]), Raising(), {"acc": 1.0}, {"other": 0.0}, True, [1.0]]
_PALETTE_STATUS = ["completed", "completed", "truncated", "pending", "failed", "aborted", "FAILED", None, 3,
                   ["x"], OtherStatus.COMPLETED]
_PALETTE_META = [{}, {}, None, {"shopsim_success": True}, {"shopsim_success": "false"}, {"shopsim_unscored": 1},
                 {"shopsim_success": np.array([1, 0])}, [], "meta", 4, {"shopsim_unscored": "maybe"}]


def _fuzz_group(rng: random.Random, gid: int):
    def sample(i):
        if rng.random() < 0.03:
            return rng.choice([None, 7, "s", OldSample(i, 1.0), RaisingRolloutId(i, 0.0), BrokenStatus(i, 1.0)])
        return SimSample(index=gid * 100 + i, group_index=gid, rollout_id=rng.choice([None, None, i, i % 3, [i]]),
                         reward=rng.choice(_PALETTE_REWARDS), status=rng.choice(_PALETTE_STATUS),
                         metadata=rng.choice(_PALETTE_META))

    plain = rng.random() < 0.5  # half the groups are ordinary: spread or zero-std
    if plain:
        value = rng.choice([0.0, 1.0])
        return [SimSample(index=gid * 100 + i, group_index=gid, reward=rng.choice([0.0, 1.0, value]))
                for i in range(4)]
    size = rng.choice([0, 3, 4, 4, 5])
    if rng.random() < 0.2:  # fanned-out segments
        return [[sample(i) for _ in range(rng.randint(1, 3))] for i in range(size)]
    return [sample(i) for i in range(size)]


def test_fuzz_of_ten_thousand_groups_raises_nothing_but_the_termination():
    rng = random.Random(20240607)
    memory = MemorySink()
    state = ManualLoopState(source="fuzz")
    args = make_args(rollout_batch_size=4, n_samples_per_prompt=4, over_sampling_batch_size=8, global_batch_size=16,
                     reward_key="acc", shopsim_max_consecutive_failed_groups=6)
    slime_runtime.configure(args, sinks=[memory], loop_state=state)
    terminations = 0
    decisions = 0
    for gid in range(10_000):
        state.step = gid // 40
        state.remaining = 8 - (gid % 4)
        try:
            out = slime_runtime.fully_scored_group_filter(args, _fuzz_group(rng, gid))
        except TechnicalFailureLimitExceeded:
            terminations += 1
            continue
        decisions += 1
        assert type(out.keep) is bool and (out.reason is None or out.reason in REASONS)
    slime_runtime.reset_runtime()
    assert decisions + terminations == 10_000 and terminations > 0 and decisions > 5_000
    assert memory.records and len({r.rollout_id for r in memory.records if not r.terminated}) > 0
    for record in memory.records:
        assert record.accepted_group_count == len(record.decisions)
        assert all(row.outcome in OUTCOMES for row in record.decisions)
        assert all(row.failed_check is None or row.failed_check in FAILED_CHECKS for row in record.decisions)
        for value in (record.reward_mean, record.success_rate):
            assert value is None or math.isfinite(value)


def test_huge_rewards_keep_every_mean_finite_in_the_step_and_the_ledger(tmp_path):
    from shopsim_metrics.sinks import JsonlSink
    from shopsim_metrics.readers import read_steps

    memory = MemorySink()
    state = ManualLoopState(source="huge")
    args = make_args(rollout_batch_size=2, n_samples_per_prompt=4, over_sampling_batch_size=2)
    slime_runtime.configure(args, sinks=[memory, JsonlSink(tmp_path)], loop_state=state)
    state.step, state.remaining = 0, 2
    groups = [group_of(1, [1e308, 1e308, 1e308, 0.0]), group_of(2, [1e308] * 4)]
    for group in groups:
        slime_runtime.fully_scored_group_filter(args, group)
    slime_runtime.record_all_samples(args, groups, None)
    slime_runtime.log_rollout_step(0, args, [], {}, 1.0)
    for record in (memory.records[-1], read_steps(tmp_path)[-1]):
        assert record.reward_mean == pytest.approx(8.75e307) and record.train_reward_mean == pytest.approx(8.75e307)
        assert record.success_rate == 7 / 8
        rows = record.decisions
        assert [row.reward_mean for row in rows] == [pytest.approx(7.5e307), 1e308]
        assert [row.reward_max for row in rows] == [1e308, 1e308]
