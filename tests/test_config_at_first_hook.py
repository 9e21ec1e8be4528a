"""The settings checks at the first hook call, and the warnings of a miswired launch (one each)."""

from __future__ import annotations

import logging
from types import SimpleNamespace

import pytest

from shopsim_metrics.loop.loop_state import ManualLoopState
from shopsim_metrics.simulator.samples import SimSample
from shopsim_metrics.settings import ShopsimConfigError
from shopsim_metrics.sinks import MemorySink
from shopsimrl import slime_runtime
from shopsim_metrics.settings.wiring import DEFAULT_ROLLOUT_FUNCTION, FILTER_PATH

KNOBS = dict(rollout_batch_size=2, n_samples_per_prompt=2, over_sampling_batch_size=2, global_batch_size=4,
             reward_key=None)


@pytest.fixture(autouse=True)
def fresh_runtime(tmp_path, monkeypatch):
    monkeypatch.setenv("SHOPSIM_RUN_DIR", str(tmp_path / "run"))
    slime_runtime.reset_runtime()
    yield
    slime_runtime.reset_runtime()


def group(gid: int, rewards=(0.0, 1.0)) -> list[SimSample]:
    return [SimSample(index=gid * 10 + i, group_index=gid, rollout_id=gid * 10 + i, reward=r)
            for i, r in enumerate(rewards)]


def warnings_of(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING and r.name == "shopsim_metrics"]


@pytest.mark.parametrize("hook", ["filter", "all_samples", "log"])
def test_an_unknown_shopsim_key_raises_at_the_first_hook_call(hook: str) -> None:
    args = SimpleNamespace(**KNOBS, shopsim_max_consecutive_failed_group=4)
    calls = {
        "filter": lambda: slime_runtime.fully_scored_group_filter(args, group(0)),
        "all_samples": lambda: slime_runtime.record_all_samples(args, [group(0)], object()),
        "log": lambda: slime_runtime.log_rollout_step(0, args, [], {}, 0.1),
    }
    with pytest.raises(ShopsimConfigError, match="did you mean 'shopsim_max_consecutive_failed_groups'"):
        calls[hook]()


def test_a_bad_value_raises_at_the_first_hook_call_naming_key_allowed_and_value() -> None:
    args = SimpleNamespace(**KNOBS, shopsim_alert_warn_level="LOUD")
    with pytest.raises(ShopsimConfigError, match=r"shopsim_alert_warn_level: expected one of INFO, WARN, ERROR; "
                                                 r"got 'LOUD'"):
        slime_runtime.fully_scored_group_filter(args, group(0))


def test_yaml_booleans_work_at_the_first_hook_call() -> None:
    args = SimpleNamespace(**KNOBS, shopsim_wandb=False, shopsim_alert_warn_fraction="5e-1")
    assert slime_runtime.fully_scored_group_filter(args, group(0)).keep
    runtime = slime_runtime.get_runtime(args)
    assert (runtime.settings.wandb, runtime.settings.alert_warn_fraction) == ("off", 0.5)


def test_a_missing_rollout_batch_size_is_one_clear_warning(caplog) -> None:
    args = SimpleNamespace(n_samples_per_prompt=2, reward_key=None)
    with caplog.at_level(logging.WARNING, logger="shopsim_metrics"):
        for gid in range(3):
            slime_runtime.fully_scored_group_filter(args, group(gid))
        slime_runtime.log_rollout_step(0, args, [], {}, 0.1)
    (warning,) = warnings_of(caplog)
    assert "lack rollout_batch_size, global_batch_size" in warning
    assert "no step is accounted or recorded" in warning and "--rollout-batch-size" in warning


def test_complete_knobs_give_no_warning(caplog) -> None:
    args = SimpleNamespace(**KNOBS, dynamic_sampling_filter_path=FILTER_PATH)
    with caplog.at_level(logging.WARNING, logger="shopsim_metrics"):
        for rollout_id in range(2):
            for gid in range(2):
                slime_runtime.fully_scored_group_filter(args, group(10 * rollout_id + gid))
            slime_runtime.record_all_samples(args, [group(10 * rollout_id), group(10 * rollout_id + 1)], None)
            slime_runtime.log_rollout_step(rollout_id, args, [], {}, 0.1)
    assert warnings_of(caplog) == []


@pytest.mark.parametrize("wiring, cause", [
    ({}, "--dynamic-sampling-filter-path is not set"),
    ({"dynamic_sampling_filter_path": "my.filter"}, "--dynamic-sampling-filter-path is my.filter"),
    ({"dynamic_sampling_filter_path": FILTER_PATH,
      "rollout_function_path": "slime.rollout.fully_async_rollout.generate_rollout_fully_async"},
     "the rollout function slime.rollout.fully_async_rollout.generate_rollout_fully_async does not call the filter"),
    ({"dynamic_sampling_filter_path": FILTER_PATH, "rollout_function_path": DEFAULT_ROLLOUT_FUNCTION},
     "or an asynchronous rollout function"),
])
def test_a_step_with_no_judged_group_warns_once_naming_the_likely_cause(caplog, wiring: dict, cause: str) -> None:
    args = SimpleNamespace(**KNOBS, **wiring)
    with caplog.at_level(logging.WARNING, logger="shopsim_metrics"):
        for rollout_id in range(3):  # the filter is never called
            slime_runtime.record_all_samples(args, [group(rollout_id)], None)
            assert slime_runtime.log_rollout_step(rollout_id, args, [], {}, 0.1) is False
    (warning,) = warnings_of(caplog)
    assert "rollout step 0 ended with no group judged by the filter" in warning and cause in warning


def test_a_step_with_judged_groups_after_a_silent_one_still_records(caplog) -> None:
    mem = MemorySink()
    args = SimpleNamespace(**KNOBS)
    loop = ManualLoopState()
    slime_runtime.configure(args, sinks=[mem], loop_state=loop)
    with caplog.at_level(logging.WARNING, logger="shopsim_metrics"):
        slime_runtime.log_rollout_step(0, args, [], {}, 0.1)  # nothing judged
        loop.step = 1
        slime_runtime.fully_scored_group_filter(args, group(1))
        slime_runtime.fully_scored_group_filter(args, group(2))
        slime_runtime.log_rollout_step(1, args, [], {}, 0.1)
    assert len(warnings_of(caplog)) == 1
    assert [(r.rollout_id, r.train_group_count) for r in mem.records] == [(1, 2)]
