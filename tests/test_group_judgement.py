"""Every kind of bad reward, fan-out, thresholds on both sides, and the filter's outputs."""

from __future__ import annotations

import enum
import math
from decimal import Decimal
from fractions import Fraction
from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from conftest import group_of

from shopsim_metrics.record.contract import FAILED_CHECKS, REASON_TECHNICAL, REASON_ZERO_STD
from shopsim_metrics.simulator.samples import SimSample
from shopsimrl import slime_runtime
from shopsim_metrics.judging.group_judgement import judge_group, read_reward
from shopsim_metrics.judging.group_samples import group_tokens
from shopsimrl.slime_bridge import DynamicFilterOutput


class ZeroDimTensorLike:
    """What a 0-dim torch tensor offers: ``shape == ()`` and ``item()``."""

    shape = ()

    def __init__(self, value):
        self.value = value

    def item(self):
        return self.value


class VectorLike(ZeroDimTensorLike):
    shape = (2,)


@pytest.fixture(autouse=True)
def _fresh_runtime():
    yield
    slime_runtime.reset_runtime()


def judge(rewards, **kw):
    return judge_group(group_of(7, rewards), n_samples=kw.pop("n", len(rewards)), **kw)


@pytest.mark.parametrize(
    "bad, check",
    [
        (None, "reward_missing"),
        (float("nan"), "reward_not_finite"),
        (float("inf"), "reward_not_finite"),
        (-float("inf"), "reward_not_finite"),
        ("1.0", "reward_not_numeric"),
        ([1.0], "reward_not_numeric"),
        (object(), "reward_not_numeric"),
        (1 + 2j, "reward_not_numeric"),
        (VectorLike(1.0), "reward_not_numeric"),
        ({"other": 1.0}, "reward_key_missing"),
        (np.float32("nan"), "reward_not_finite"),
        (ZeroDimTensorLike(float("inf")), "reward_not_finite"),
    ],
)
def test_bad_rewards_make_the_group_technical(bad, check):
    j = judge([0.0, 1.0, bad, 1.0], reward_key="acc" if isinstance(bad, dict) else None)
    assert (j.kind, j.failed_check) == ("technical", check)
    assert check in FAILED_CHECKS
    assert j.scorable_rollouts == 3  # the scorable siblings still count as completed generations


@pytest.mark.parametrize(
    "good, value",
    [
        (True, 1.0),
        (0, 0.0),
        (np.float64(0.5), 0.5),
        (np.int64(1), 1.0),
        (np.float32(0.25), 0.25),
        (np.array(0.75), 0.75),
        (ZeroDimTensorLike(0.5), 0.5),
        (Decimal("0.5"), 0.5),
        (Fraction(1, 4), 0.25),
        ({"acc": 0.5}, 0.5),
    ],
)
def test_every_numeric_reward_form_is_read(good, value):
    assert read_reward(good, "acc") == (value, None)


def test_torch_zero_dim_tensor_is_read_when_torch_is_installed():
    torch = pytest.importorskip("torch")
    assert read_reward(torch.tensor(0.5, dtype=torch.float64), None) == (0.5, None)
    assert read_reward(torch.tensor([0.5, 1.0]), None) == (None, "reward_not_numeric")


class Status(enum.Enum):  # the shape of slime's Sample.Status
    PENDING = "pending"
    COMPLETED = "completed"
    TRUNCATED = "truncated"
    ABORTED = "aborted"
    FAILED = "failed"


@pytest.mark.parametrize("status, check", [(Status.FAILED, "status_failed"), (Status.ABORTED, "status_aborted"),
                                           ("failed", "status_failed"), ("aborted", "status_aborted")])
def test_failed_and_aborted_rollouts_are_technical_and_never_scorable(status, check):
    group = group_of(1, [0.0, 1.0, 1.0])
    group[0].status = status  # its reward 0.0 is a default, not a completed generation's
    j = judge_group(group, n_samples=3)
    assert (j.kind, j.failed_check) == ("technical", check)
    assert (j.scorable_rollouts, j.rewards, j.success_count, min(j.rewards)) == (2, (1.0, 1.0), 2, 1.0)


@pytest.mark.parametrize("status", ["FAILED", "Status.FAILED", "exploded", None, 3, ["completed"], {"a": 1},
                                    enum.Enum("Other", "COMPLETED").COMPLETED])
def test_unknown_statuses_are_technical(status):
    group = group_of(1, [0.0, 1.0, 1.0])
    group[2].status = status
    j = judge_group(group, n_samples=3)
    assert (j.kind, j.failed_check, j.rewards) == ("technical", "status_unknown", (0.0, 1.0))


@pytest.mark.parametrize("status", list(Status)[:3] + ["completed", "truncated", "pending"])
def test_normal_statuses_as_enum_members_or_strings(status):
    group = group_of(1, [0.0, 1.0])
    group[0].status = status
    assert judge_group(group, n_samples=2).kind == "spread"


def test_truncated_and_pending_are_normal_finishes():
    group = group_of(1, [0.0, 1.0, 1.0])
    group[0].status = "truncated"
    group[1].status = "pending"
    assert judge_group(group, n_samples=3).kind == "spread"


def test_metadata_unscored_flag_and_its_configurable_key():
    group = group_of(1, [0.0, 1.0])
    group[0].metadata = {"shopsim_unscored": True}
    assert judge_group(group).failed_check == "metadata_unscored"
    assert judge_group(group).rewards == (1.0,)  # the unscored rollout's reward is not counted
    group[0].metadata = {"env_unscored": True}
    assert judge_group(group).kind == "spread"
    assert judge_group(group, unscored_key="env_unscored").failed_check == "metadata_unscored"


def test_empty_group_and_too_few_rollouts():
    assert judge_group([], n_samples=8).failed_check == "empty_group"
    assert judge_group(group_of(1, [0.0, 1.0] * 3 + [0.0]), n_samples=8).failed_check == "too_few_rollouts"
    assert judge_group(group_of(1, [0.0, 1.0] * 4), n_samples=8).kind == "spread"
    assert judge_group(group_of(1, [0.0, 1.0]), n_samples=None).kind == "spread"  # unknown n: no check


@pytest.mark.parametrize("gap, kind", [(1e-7, "zero_std"), (1e-6, "zero_std"), (1.5e-6, "spread"), (1e-5, "spread")])
def test_spread_threshold_both_sides(gap, kind):
    assert judge([0.0, gap, 0.0]).kind == kind


def _segments(rollout_id, rewards):
    return [SimSample(index=rollout_id * 10 + k, rollout_id=rollout_id, reward=r) for k, r in enumerate(rewards)]


def test_fanned_out_segments_count_once():
    group = [_segments(i, [float(i % 2)] * 3) for i in range(4)]
    j = judge_group(group, n_samples=4)
    assert (j.kind, j.unique_rollouts, j.scorable_rollouts, j.success_count) == ("spread", 4, 4, 2)


def test_flat_group_deduplicated_by_rollout_id():
    flat = [s for i in range(4) for s in _segments(i, [1.0, 1.0])]
    j = judge_group(flat, n_samples=4)
    assert (j.kind, j.unique_rollouts) == ("zero_std", 4)
    assert judge_group(flat, n_samples=8).failed_check == "too_few_rollouts"


def test_segments_with_none_beside_one_scored_value_are_fine():
    group = [_segments(0, [None, 1.0, None]), _segments(1, [0.0, None])]
    j = judge_group(group, n_samples=2)
    assert (j.kind, min(j.rewards), max(j.rewards)) == ("spread", 0.0, 1.0)


def test_segments_that_disagree_are_technical():
    group = [_segments(0, [1.0, 0.0]), _segments(1, [0.0])]
    assert judge_group(group, n_samples=2).failed_check == "segments_disagree"
    group = [_segments(0, [1.0, 1.0 + 1e-7]), _segments(1, [0.0])]
    assert judge_group(group, n_samples=2).kind == "spread"


def test_rollout_id_falls_back_to_index():
    group = [SimSample(index=i, reward=float(i)) for i in range(3)] + [SimSample(index=0, reward=0.0)]
    assert judge_group(group, n_samples=3).unique_rollouts == 3


def test_success_flag_in_metadata_overrides_the_threshold():
    group = group_of(1, [0.2, 0.9])
    assert judge_group(group).success_count == 0
    assert judge_group(group, success_threshold=0.5).success_count == 1
    group[0].metadata = {"shopsim_success": True}
    assert judge_group(group, success_threshold=0.5).success_count == 2
    group[1].metadata = {"shopsim_success": "false"}  # a string flag is read, not taken as truthy
    assert judge_group(group, success_threshold=0.5).success_count == 1


@pytest.mark.parametrize("flag, success", [(True, True), (False, False), (1, True), (0, False), (1.0, True),
                                           ("true", True), ("FALSE", False), ("True", True), (np.bool_(False), False),
                                           (np.int64(1), True), (np.array(True), True)])
def test_success_flags_read_strictly(flag, success):
    group = group_of(1, [0.0, 1.0])
    group[0].metadata = {"shopsim_success": flag}
    group[1].metadata = {"shopsim_success": flag}
    j = judge_group(group)
    assert (j.kind, j.success_count) == ("spread", 2 if success else 0)


@pytest.mark.parametrize("flag", ["yes", "no", "1", "", " true", 2, -1, 0.5, None, [True], {"v": 1},
                                  np.array([1, 0]), np.array(2), object()])
@pytest.mark.parametrize("key", ["shopsim_success", "shopsim_unscored"])
def test_any_other_flag_value_is_metadata_invalid(flag, key):
    group = group_of(1, [0.0, 1.0, 1.0])
    group[1].metadata = {key: flag}
    j = judge_group(group)
    assert (j.kind, j.failed_check, j.rewards) == ("technical", "metadata_invalid", (0.0, 1.0))


@pytest.mark.parametrize("flag, check", [(False, None), ("false", None), (0, None), ("TRUE", "metadata_unscored"),
                                         (1, "metadata_unscored")])
def test_unscored_flag_is_read_strictly_too(flag, check):
    group = group_of(1, [0.0, 1.0])
    group[0].metadata = {"shopsim_unscored": flag}
    assert judge_group(group).failed_check == check


def test_filter_outputs_match_the_design_document():
    args = SimpleNamespace(n_samples_per_prompt=2, reward_key=None)
    keep = slime_runtime.fully_scored_group_filter(args, group_of(1, [0.0, 1.0]))
    zero = slime_runtime.fully_scored_group_filter(args, group_of(2, [1.0, 1.0]))
    tech = slime_runtime.fully_scored_group_filter(args, group_of(3, [1.0, math.nan]))
    assert isinstance(keep, DynamicFilterOutput)
    assert (keep.keep, keep.reason, keep.keep_when_insufficient) == (True, None, False)
    assert (zero.keep, zero.reason, zero.keep_when_insufficient) == (False, REASON_ZERO_STD, True)
    assert (tech.keep, tech.reason, tech.keep_when_insufficient) == (False, REASON_TECHNICAL, False)
    for out in (keep, zero, tech):
        assert type(out.keep) is bool and type(out.keep_when_insufficient) is bool


def test_bare_args_like_slimes_contract_test():
    class Args:  # what slime's plugin contract test passes: no rollout_batch_size, no W&B settings
        rollout_global_dataset = False
        n_samples_per_prompt = 2
        reward_key = None

    out = slime_runtime.fully_scored_group_filter(Args(), group_of(0, [1.0, 2.0]))
    assert out.keep is True
    out = slime_runtime.fully_scored_group_filter(Args(), group_of(1, [1.0]))
    assert (out.keep, out.reason) == (False, REASON_TECHNICAL)


def test_bare_args_still_terminate_at_the_limit():
    from shopsim_metrics.errors import TechnicalFailureLimitExceeded

    args = SimpleNamespace(n_samples_per_prompt=2, shopsim_max_consecutive_failed_groups=3)
    for _ in range(2):
        slime_runtime.fully_scored_group_filter(args, group_of(1, [1.0, None]))
    with pytest.raises(TechnicalFailureLimitExceeded, match="3 consecutive"):
        slime_runtime.fully_scored_group_filter(args, group_of(1, [1.0, None]))


@pytest.mark.parametrize("value", [0, -1, 2.5, "8", True])
def test_invalid_limit_is_a_clear_error(value):
    from shopsim_metrics.settings import ShopsimConfigError

    args = SimpleNamespace(n_samples_per_prompt=2, shopsim_max_consecutive_failed_groups=value)
    with pytest.raises(ShopsimConfigError, match="shopsim_max_consecutive_failed_groups: expected an integer >= 1"):
        slime_runtime.fully_scored_group_filter(args, group_of(1, [0.0, 1.0]))


_rewards = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True, width=64),
    st.sampled_from([0.0, 1.0, 0.5, 1.0 + 1e-7, 1.0 - 1e-6]),
    st.none(),
    st.integers(-2, 2),
    st.booleans(),
)




@settings(max_examples=400, deadline=None)
@given(
    rewards=st.lists(_rewards, min_size=0, max_size=10),
    ids=st.lists(st.one_of(st.none(), st.integers(0, 12)), min_size=10, max_size=10),
    statuses=st.lists(st.sampled_from(["completed", "truncated", "pending", "failed", "aborted", "FAILED", None]),
                      min_size=10, max_size=10),
    flags=st.lists(st.sampled_from([{}, None, {"x": 1}, {"shopsim_unscored": True}, {"shopsim_success": False},
                                    {"shopsim_success": "maybe"}]), min_size=10, max_size=10),
    n=st.one_of(st.none(), st.integers(1, 10)),
    threshold=st.sampled_from([0.5, 1.0]),
)
def test_judgement_invariants(rewards, ids, statuses, flags, n, threshold):
    group = [SimSample(index=100 + i, group_index=3, rollout_id=ids[i], reward=r, status=statuses[i],
                       metadata=flags[i]) for i, r in enumerate(rewards)]
    j = judge_group(group, n_samples=n, success_threshold=threshold)
    assert (j.kind == "technical") == (j.failed_check is not None)
    assert j.failed_check is None or j.failed_check in FAILED_CHECKS
    assert j.unique_rollouts == len({s.index if s.rollout_id is None else s.rollout_id for s in group})
    assert 0 <= j.success_count <= j.scorable_rollouts <= j.unique_rollouts
    assert all(type(r) is float and math.isfinite(r) for r in j.rewards)
    if j.kind != "technical":
        assert j.scorable_rollouts == j.unique_rollouts
        assert (j.kind == "spread") == (max(j.rewards) - min(j.rewards) > 1e-6)
    # a rollout whose every segment failed, aborted or was flagged never adds a reward
    normal = [s for s in group if s.status in ("completed", "truncated", "pending")
              and not (s.metadata or {}).get("shopsim_unscored") and "maybe" not in (s.metadata or {}).values()]
    assert j.scorable_rollouts <= len({s.index if s.rollout_id is None else s.rollout_id for s in normal})
    if j.rewards:
        reward_min, reward_max, _, reward_mean = j.reward_figures()
        assert reward_min == min(j.rewards) and reward_max == max(j.rewards)
        assert reward_min - 1e-9 <= reward_mean <= reward_max + 1e-9


def test_group_index_is_a_plain_int_for_the_ledger():
    group = group_of(1, [0.0, 1.0])
    group[0].group_index = np.int64(5)
    assert type(judge_group(group).group_index) is int and judge_group(group).group_index == 5
    group[0].group_index = "five"  # not an index: None rather than an odd value in the records
    group[0].index = None
    assert judge_group(group).group_index is None


def test_an_invalid_flag_on_a_later_segment_is_still_invalid():
    first = SimSample(index=0, rollout_id=0, reward=1.0, metadata={"shopsim_success": True})
    later = SimSample(index=1, rollout_id=0, reward=1.0, metadata={"shopsim_success": "yes"})
    other = SimSample(index=2, rollout_id=1, reward=0.0)
    assert judge_group([[first, later], [other]], n_samples=2).failed_check == "metadata_invalid"
    later.metadata = {"shopsim_success": False}  # valid: the first segment's flag counts
    j = judge_group([[first, later], [other]], n_samples=2)
    assert (j.kind, j.success_count) == ("spread", 1)


def test_slime_shaped_groups_are_judged():
    """The default generate function's groups: enum statuses, no rollout_id, metadata with a prompt key,
    success flags."""
    def group(**overrides):
        samples = [SimSample(rollout_id=None, index=10 + i, group_index=1, status=Status.COMPLETED,
                             metadata={"shopsim_prompt_key": "p1", **({"shopsim_success": i == 0} if i < 2 else {})},
                             reward=float(i % 3 == 0)) for i in range(8)]
        for sample in samples:
            for name, value in overrides.items():
                setattr(sample, name, value)
        return samples

    judged = judge_group(group(response_length=5), n_samples=8)
    assert (judged.kind, judged.unique_rollouts, judged.success_count, judged.group_index) == ("spread", 8, 3, 1)
    assert group_tokens(group(response_length=5)) == 40  # what the ledger records for it
