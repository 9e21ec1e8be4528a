"""The hooks slime (and miles, slime's production fork) load by dotted path.

Wire them into a slime launch::

    --dynamic-sampling-filter-path      shopsimrl.slime_runtime.fully_scored_group_filter
    --rollout-all-samples-process-path  shopsimrl.slime_runtime.record_all_samples
    --custom-rollout-log-function-path  shopsimrl.slime_runtime.log_rollout_step
    --rollout-sample-hook-path          shopsimrl.slime_runtime.record_generated_sample
    --custom-config-path                examples/shopsim.yaml   # shopsim_* settings (docs §2.2)

Check the YAML before launch with ``shopsim-metrics check-config examples/shopsim.yaml``; the first hook
call runs the same checks and raises :class:`~shopsim_metrics.settings.ShopsimConfigError` on a problem.
Each hook is the core's (:class:`shopsim_metrics.hooks.Hooks`, which the simulator drives too) bound to
the process's monitor (:mod:`shopsim_metrics.monitor`) with a reader of slime's live loop state; the
filter's answer is turned into slime's ``DynamicFilterOutput``.

Loaded, this module knows which loop loads it (:data:`shopsimrl.LOOP`: ``slime``, ``miles`` or ``none``; both
slime and miles in one process is refused at import).
In miles (docs/miles.md) the filter returns miles' own ``DynamicFilterOutput`` (``keep``, ``reason``) and,
as miles has no ``keep_when_insufficient``, decides the fallback itself
(:meth:`~shopsim_metrics.hooks.Hooks.filter_deciding_fallback`); the loop state is miles'
(:class:`~shopsimrl.miles_bridge.MilesLoopState`); what miles cannot run with these hooks stops the first
hook call with one line per thing (:func:`~shopsim_metrics.settings.loops.check_launch`), before a record is written.

Example:
    >>> from types import SimpleNamespace
    >>> from shopsim_metrics.simulator.samples import SimSample
    >>> args = SimpleNamespace(n_samples_per_prompt=2, reward_key=None)
    >>> fully_scored_group_filter(args, [SimSample(index=0, reward=0.0), SimSample(index=1, reward=1.0)]).keep
    True
    >>> reset_runtime()
"""

from __future__ import annotations

from typing import Any

from shopsim_metrics import monitor
from shopsim_metrics.errors import TechnicalFailureLimitExceeded
from shopsim_metrics.hooks import Hooks
from shopsim_metrics.monitor import ShopsimRuntime, reset_runtime
from shopsim_metrics.sinks.base import StepSink
from shopsim_metrics.settings.loops import MILES, check_launch
from shopsim_metrics.loop.loop_state import LoopState
from shopsimrl.miles_bridge import MilesLoopState, miles_filter_output
from shopsimrl import LOOP
from shopsimrl.slime_bridge import DynamicFilterOutput, SlimeLoopState

__all__ = [
    "fully_scored_group_filter",
    "record_all_samples",
    "log_rollout_step",
    "record_generated_sample",
    "configure",
    "get_runtime",
    "reset_runtime",
    "TechnicalFailureLimitExceeded",
    "LOOP",
]

_IN_MILES = LOOP == MILES
_FilterOutput: Any = miles_filter_output() if _IN_MILES else DynamicFilterOutput
_LoopState: Any = MilesLoopState if _IN_MILES else SlimeLoopState


def _check_launch(args: Any) -> None:
    check_launch(LOOP, args)


def get_runtime(args: Any) -> ShopsimRuntime:
    """The process's monitor, created on first use with a reader of the loop's live state; creating it refuses
    (one line per thing) what the hooks cannot honour in their loop."""
    return monitor.get_runtime(args, loop_state=_LoopState, check=_check_launch)


def configure(args: Any, *, sinks: list[StepSink] | None = None, loop_state: LoopState | None = None) -> ShopsimRuntime:
    """Replace the process's monitor (tests, notebooks); it reads the loop's live state unless told otherwise."""
    return monitor.configure(args, sinks=sinks, loop_state=loop_state or _LoopState())


HOOKS = Hooks(get_runtime)
"""The core's hooks over the process's monitor as slime's process creates it."""


def fully_scored_group_filter(args: Any, samples: list, **kwargs: Any) -> Any:
    """slime's dynamic-sampling filter: drop technical groups (no fallback) and zero-std groups (with fallback).

    Returns the loop's ``DynamicFilterOutput``: slime's (or its stand-in), or in miles miles' own, whose
    ``keep`` already holds the fallback slime would have let through.

    Raises :class:`TechnicalFailureLimitExceeded` when ``shopsim_max_consecutive_failed_groups``
    technical groups came in a row (after writing the step's record, marked terminated), and
    :class:`~shopsim_metrics.settings.ShopsimConfigError` at the first call when the settings are bad.
    Nothing else: should the monitor itself fail, the group is kept (slime's behaviour without a
    filter) with one warning (:meth:`shopsim_metrics.hooks.Hooks.filter`).
    """
    if _IN_MILES:  # miles' output has no keep_when_insufficient: the filter decides the fallback itself
        decision = HOOKS.filter_deciding_fallback(args, samples)
        return _FilterOutput(keep=decision.keep, reason=decision.reason)
    decision = HOOKS.filter(args, samples)
    return DynamicFilterOutput(keep=decision.keep, reason=decision.reason,
                               keep_when_insufficient=decision.keep_when_insufficient)


def record_all_samples(args: Any, all_groups: list, data_source: Any) -> None:
    """slime's all-samples hook (:meth:`shopsim_metrics.hooks.Hooks.all_samples`): closes the step."""
    HOOKS.all_samples(args, all_groups, data_source)


def log_rollout_step(rollout_id: int, args: Any, samples: list, rollout_extra_metrics: dict, rollout_time: float) -> bool:
    """slime's rollout log function (:meth:`shopsim_metrics.hooks.Hooks.log`): emits the step record, returns False."""
    return HOOKS.log(rollout_id, args, samples, rollout_extra_metrics, rollout_time)


def record_generated_sample(args: Any, sample: Any, *, rollout_id: Any = None, evaluation: bool = False) -> None:
    """slime's rollout sample hook (:meth:`shopsim_metrics.hooks.Hooks.sample`): counts every generated token."""
    HOOKS.sample(args, sample, rollout_id=rollout_id, evaluation=evaluation)
