"""The hooks slime loads by dotted path.

Wire them into a slime launch::

    --dynamic-sampling-filter-path      shopsimrl.slime_runtime.fully_scored_group_filter
    --rollout-all-samples-process-path  shopsimrl.slime_runtime.record_all_samples
    --custom-rollout-log-function-path  shopsimrl.slime_runtime.log_rollout_step
    --rollout-sample-hook-path          shopsimrl.slime_runtime.record_generated_sample
    --custom-config-path                examples/shopsim.yaml   # shopsim_* settings (docs/training_monitoring.md)

Check the YAML before launch with ``shopsim-metrics check-config examples/shopsim.yaml``; the first hook
call runs the same checks and raises :class:`~shopsim_metrics.settings.ShopsimConfigError` on a problem.
Each hook only hands slime's objects to the process's monitor (:mod:`shopsim_metrics.monitor`) and
turns its answer into slime's types.

Example:
    >>> from types import SimpleNamespace
    >>> from shopsim_metrics.simulator.samples import SimSample
    >>> args = SimpleNamespace(n_samples_per_prompt=2, reward_key=None)
    >>> fully_scored_group_filter(args, [SimSample(index=0, reward=0.0), SimSample(index=1, reward=1.0)]).keep
    True
    >>> reset_runtime()
"""

from __future__ import annotations

import logging
from typing import Any

from shopsim_metrics import monitor
from shopsim_metrics.errors import TechnicalFailureLimitExceeded
from shopsim_metrics.step.drop_rule import filter_flags
from shopsim_metrics.monitor import ShopsimRuntime, reset_runtime
from shopsim_metrics.settings import ShopsimConfigError
from shopsim_metrics.sinks.base import StepSink
from shopsim_metrics.step import contract as C
from shopsim_metrics.step.loop_state import LoopState
from shopsimrl.slime_bridge import DynamicFilterOutput, SlimeLoopState
from shopsimrl.wiring import no_judgement_warning

logger = logging.getLogger("shopsim_metrics")

__all__ = [
    "fully_scored_group_filter",
    "record_all_samples",
    "log_rollout_step",
    "record_generated_sample",
    "configure",
    "get_runtime",
    "reset_runtime",
    "TechnicalFailureLimitExceeded",
]


def get_runtime(args: Any) -> ShopsimRuntime:
    """The process's monitor, created on first use with a reader of slime's live loop state."""
    return monitor.get_runtime(args, loop_state=SlimeLoopState)


def configure(args: Any, *, sinks: list[StepSink] | None = None, loop_state: LoopState | None = None) -> ShopsimRuntime:
    """Replace the process's monitor (tests, notebooks); it reads slime's live loop state unless told otherwise."""
    return monitor.configure(args, sinks=sinks, loop_state=loop_state or SlimeLoopState())


def fully_scored_group_filter(args: Any, samples: list, **kwargs: Any) -> DynamicFilterOutput:
    """slime's dynamic-sampling filter: drop technical groups (no fallback) and zero-std groups (with fallback).

    Raises :class:`TechnicalFailureLimitExceeded` when ``shopsim_max_consecutive_failed_groups``
    technical groups came in a row (after writing the step's record, marked terminated), and
    :class:`~shopsim_metrics.settings.ShopsimConfigError` at the first call when the settings are bad.
    Nothing else: should the monitor itself fail, the group is kept (slime's behaviour without a
    filter) with one warning.
    """
    runtime = get_runtime(args)  # a bad config is refused here, before the first step
    try:
        with runtime.own_time():
            kind = runtime.filter_group(samples)
    except TechnicalFailureLimitExceeded:
        raise
    except Exception as exc:  # noqa: BLE001 - the filter raises only to terminate
        _warn_once("filter", "shopsim-metrics: judging a group failed (%s: %s); the group is kept and "
                   "training goes on.", type(exc).__name__, exc)
        return DynamicFilterOutput(keep=True)
    keep, keep_when_insufficient = filter_flags(kind)
    return DynamicFilterOutput(keep=keep, reason=C.REASON_OF_KIND[kind], keep_when_insufficient=keep_when_insufficient)


def record_all_samples(args: Any, all_groups: list, data_source: Any) -> None:
    """slime's all-samples hook: ``success_rate`` / ``reward_mean`` over every completed group; closes the step.

    Sets ``args.processed_group_count`` to the number of groups it saw (None when ``all_groups`` is
    not a list: then it is not iterated, and the step closes with the ledger's figures). Raises only
    :class:`~shopsim_metrics.settings.ShopsimConfigError`, at the first call, for bad settings.
    """
    try:
        groups = _groups(all_groups)
        try:
            args.processed_group_count = len(groups) if groups is not None else None
        except Exception:  # noqa: BLE001 - an args that refuses attributes
            pass
        runtime = get_runtime(args)
        with runtime.own_time():
            runtime.close_step(groups)
    except ShopsimConfigError:
        raise  # a bad config is refused at the first hook call, before the first step
    except Exception:  # noqa: BLE001 - monitoring never stops training
        logger.exception("shopsim-metrics: closing the step failed; training goes on")


def _groups(all_groups: Any) -> list | None:
    """slime's groups as a list, or None when they are not a list or tuple (never consumed, never raised on)."""
    if isinstance(all_groups, list):
        return all_groups
    if isinstance(all_groups, tuple):
        return list(all_groups)
    return None


def log_rollout_step(rollout_id: int, args: Any, samples: list, rollout_extra_metrics: dict, rollout_time: float) -> bool:
    """slime's rollout log function: emits the step record (JSONL, W&B) and returns False.

    False lets slime's own rollout logging run as well. Sets ``args.logged_rollout_id``. A step that
    ended with no group judged by the filter gets one warning naming the likely cause (once per run).
    Whatever the metrics, time or samples, every finished step gets its record; raises only
    :class:`~shopsim_metrics.settings.ShopsimConfigError`, at the first call, for bad settings.
    """
    try:
        args.logged_rollout_id = rollout_id
        runtime = get_runtime(args)
        with runtime.own_time(emits=True):
            records = runtime.emit_step(rollout_id, rollout_extra_metrics, rollout_time)
            accountant = runtime.accountant
            if not records and accountant is not None and accountant.open_rollout_id() is None:
                runtime._warn_once("no_judgement", no_judgement_warning(args, rollout_id))
    except ShopsimConfigError:
        raise  # a bad config is refused at the first hook call, before the first step
    except Exception:  # noqa: BLE001 - monitoring never stops training
        logger.exception("shopsim-metrics: emitting step %r failed; training goes on", rollout_id)
    return False


def record_generated_sample(args: Any, sample: Any, *, rollout_id: Any = None, evaluation: bool = False) -> None:
    """slime's rollout sample hook: counts the tokens of every generate call in its step, aborted ones included.

    Returns None (slime keeps its sample) and never raises. Evaluation samples are not counted. This
    is what ``total_token_count``, ``aborted_token_count`` and ``tokens_per_informative_group`` are
    made of; without this hook they are null.
    """
    try:
        if evaluation:
            return None
        runtime = get_runtime(args)
        with runtime.own_time():
            runtime.record_sample(sample, rollout_id)
    except Exception:  # noqa: BLE001 - monitoring never stops training
        logger.debug("shopsim-metrics: counting a sample's tokens failed", exc_info=True)
    return None


_warned: set[str] = set()


def _warn_once(key: str, message: str, *args: Any) -> None:
    if key not in _warned:
        _warned.add(key)
        logger.warning(message, *args)
