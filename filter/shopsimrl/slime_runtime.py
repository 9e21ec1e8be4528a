"""The hooks slime loads by dotted path.

Wire them into a slime launch::

    --dynamic-sampling-filter-path      shopsimrl.slime_runtime.fully_scored_group_filter
    --rollout-all-samples-process-path  shopsimrl.slime_runtime.record_all_samples
    --custom-rollout-log-function-path  shopsimrl.slime_runtime.log_rollout_step
    --custom-config-path                shopsim.yaml   # shopsim_* settings (docs/training_monitoring.md)

Check the YAML before launch with ``shopsim-metrics check-config shopsim.yaml``; the first hook call
runs the same checks and raises :class:`~shopsim_metrics.settings.ShopsimConfigError` on a problem.

Example:
    >>> from types import SimpleNamespace
    >>> from shopsim_metrics.samples import SimSample
    >>> args = SimpleNamespace(n_samples_per_prompt=2, reward_key=None)
    >>> fully_scored_group_filter(args, [SimSample(index=0, reward=0.0), SimSample(index=1, reward=1.0)]).keep
    True
    >>> reset_runtime()
"""

from __future__ import annotations

import logging
from time import perf_counter
from typing import Any

from shopsim_metrics.errors import TechnicalFailureLimitExceeded
from shopsimrl import runtime as _runtime
from shopsimrl.runtime import configure, get_runtime, reset_runtime
from shopsimrl.slime_bridge import DynamicFilterOutput
from shopsimrl.wiring import no_judgement_warning

logger = logging.getLogger("shopsim_metrics")

__all__ = [
    "fully_scored_group_filter",
    "record_all_samples",
    "log_rollout_step",
    "configure",
    "reset_runtime",
    "TechnicalFailureLimitExceeded",
]


def fully_scored_group_filter(args: Any, samples: list, **kwargs: Any) -> DynamicFilterOutput:
    """slime's dynamic-sampling filter: drop technical groups (no fallback) and zero-std groups (with fallback).

    Raises :class:`TechnicalFailureLimitExceeded` when ``shopsim_max_consecutive_failed_groups``
    technical groups came in a row (after writing the step's record, marked terminated).
    """
    started = perf_counter()
    runtime = _runtime._runtime or get_runtime(args)  # no lock once the runtime exists
    output = runtime.filter_group(samples)
    _count_own_time(runtime, started)
    return output


def record_all_samples(args: Any, all_groups: list, data_source: Any) -> None:
    """slime's all-samples hook: ``success_rate`` / ``reward_mean`` over every completed group; closes the step.

    Sets ``args.processed_group_count`` to the number of groups it saw.
    """
    started = perf_counter()
    args.processed_group_count = len(all_groups)
    runtime = get_runtime(args)
    try:
        runtime.close_step(all_groups)
    except Exception:  # noqa: BLE001 - monitoring never stops training
        logger.exception("shopsim-metrics: closing the step failed; training goes on")
    _count_own_time(runtime, started)


def log_rollout_step(rollout_id: int, args: Any, samples: list, rollout_extra_metrics: dict, rollout_time: float) -> bool:
    """slime's rollout log function: emits the step record (JSONL, W&B) and returns False.

    False lets slime's own rollout logging run as well. Sets ``args.logged_rollout_id``. A step that
    ended with no group judged by the filter gets one warning naming the likely cause (once per run).
    """
    started = perf_counter()
    args.logged_rollout_id = rollout_id
    runtime = get_runtime(args)
    try:
        records = runtime.emit_step(rollout_id, rollout_extra_metrics, rollout_time, started=started)
        accountant = runtime.accountant
        if not records and accountant is not None and accountant.open_rollout_id() is None:
            runtime._warn_once("no_judgement", no_judgement_warning(args, rollout_id))
    except Exception:  # noqa: BLE001 - monitoring never stops training
        logger.exception("shopsim-metrics: emitting step %s failed; training goes on", rollout_id)
    return False


def _count_own_time(runtime: Any, started: float) -> None:
    """Add the time since ``started`` to the step's ``filter_seconds`` (the project's own time)."""
    accountant = runtime.accountant
    if accountant is not None:
        try:
            accountant.add_hook_seconds(perf_counter() - started)
        except Exception:  # noqa: BLE001 - monitoring never stops training
            pass
