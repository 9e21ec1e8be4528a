"""The project's four hooks, free of slime: what slime's hooks call and what the simulator drives.

slime loads ``shopsimrl.slime_runtime``'s functions by dotted path; each is this module's hook, bound to
the process's monitor as slime's process creates it (with a reader of slime's live loop state), its
answer turned into slime's types. The simulator calls the same :class:`Hooks` bound to the monitor it
configured, so the core never loads the adapter (by import or by name) and both run one code path.

What the hooks promise slime (signatures are slime's):

- :meth:`Hooks.filter` judges a finished group; it raises only to terminate at the failure limit
  (:class:`~shopsim_metrics.errors.TechnicalFailureLimitExceeded`, after the step's record is written)
  and, at the first call, for bad settings; should the monitor itself fail, the group is kept (slime's
  behaviour without a filter) with one warning; :meth:`Hooks.filter_deciding_fallback` is the same filter
  for a loop without ``keep_when_insufficient`` (miles): it applies slime's fallback itself;
- :meth:`Hooks.all_samples` closes the step over every completed group;
- :meth:`Hooks.log` emits the step's record and returns False (slime's own logging runs too);
- :meth:`Hooks.sample` counts every generated rollout's tokens, aborted ones included.

Example:
    >>> from types import SimpleNamespace
    >>> from shopsim_metrics.monitor import configure, get_runtime, reset_runtime
    >>> from shopsim_metrics.simulator.samples import SimSample
    >>> args = SimpleNamespace(n_samples_per_prompt=2, reward_key=None)
    >>> _ = configure(args, sinks=[])
    >>> Hooks(get_runtime).filter(args, [SimSample(index=0, reward=1.0), SimSample(index=1, reward=1.0)])
    FilterDecision(keep=False, reason='shopsim_zero_std_group', keep_when_insufficient=True)
    >>> reset_runtime()
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Callable

from shopsim_metrics.errors import TechnicalFailureLimitExceeded
from shopsim_metrics.monitor import ShopsimRuntime
from shopsim_metrics.settings import ShopsimConfigError
from shopsim_metrics.record import contract as C
from shopsim_metrics.step.closed_step import DROP_OUTCOMES
from shopsim_metrics.step.drop_rule import filter_flags
from shopsim_metrics.general.warn_once import WarnOnce
from shopsim_metrics.judging.group_judgement import TECHNICAL

logger = logging.getLogger("shopsim_metrics")


@dataclass(frozen=True)
class FilterDecision:
    """The filter's answer, field for field slime's ``DynamicFilterOutput``."""

    keep: bool
    reason: str | None = None
    keep_when_insufficient: bool = False


KEPT_UNJUDGED = FilterDecision(keep=True)
"""The answer when the monitor itself fails (slime's behaviour without a filter), and to a group kept in miles."""


def _decision(kind: str) -> FilterDecision:
    keep, keep_when_insufficient = filter_flags(kind)
    return FilterDecision(keep=keep, reason=C.REASON_OF_KIND[kind], keep_when_insufficient=keep_when_insufficient)


DECISIONS: dict[str, FilterDecision] = {kind: _decision(kind) for kind in C.REASON_OF_KIND}
"""The filter's answer to each judgement kind: fixed, so a call builds none."""


class Hooks:
    """The four hooks over the monitor ``runtime_of(args)`` returns (see the module docstring)."""

    def __init__(self, runtime_of: Callable[[Any], ShopsimRuntime]) -> None:
        self.runtime_of = runtime_of
        self._warn_once = WarnOnce(logger)

    def _judged(self, args: Any, judge: Callable[[ShopsimRuntime], Any]) -> Any:
        """``judge(runtime)`` in the monitor's own time; None (and one warning) when it fails for any reason but
        the failure limit, which is raised: the filter raises only to terminate."""
        runtime = self.runtime_of(args)  # a bad config is refused here, before the first step
        try:
            with runtime.own_time():
                return judge(runtime)
        except TechnicalFailureLimitExceeded:
            raise
        except Exception as exc:  # noqa: BLE001 - the filter raises only to terminate
            self._warn_once("filter", "shopsim-metrics: judging a group failed (%s: %s); the group is kept and "
                            "training goes on.", type(exc).__name__, exc)
            return None

    def filter(self, args: Any, samples: list, **kwargs: Any) -> FilterDecision:
        """slime's dynamic-sampling filter: drop technical groups (no fallback) and zero-std groups (with fallback)."""
        judged = self._judged(args, lambda runtime: runtime.filter_group(samples))
        return KEPT_UNJUDGED if judged is None else DECISIONS[judged]

    def filter_deciding_fallback(self, args: Any, samples: list, **kwargs: Any) -> FilterDecision:
        """The filter for a loop without ``keep_when_insufficient`` (miles): the filter applies slime's drop rule itself.

        A zero-std group is kept (``fallback``) when ``remaining`` is down to ``rollout_batch_size`` (dropping it
        would open another wave), read live from the loop, else mirrored; the answer is the outcome the step's
        ledger records, so the record and what the loop trains agree group for group. A kept group carries no
        reason. With nothing accounted (``rollout_batch_size`` unknown) a zero-std group is kept, so no step can
        wait for groups with spread forever. Raises as :meth:`filter`; should the monitor fail, the group is kept.

        Example:
            >>> from types import SimpleNamespace
            >>> from shopsim_metrics.monitor import configure, get_runtime, reset_runtime
            >>> from shopsim_metrics.simulator.samples import SimSample
            >>> args = SimpleNamespace(n_samples_per_prompt=2, reward_key=None, rollout_batch_size=1,
            ...                        over_sampling_batch_size=2)
            >>> _ = configure(args, sinks=[])
            >>> zero = lambda i: [SimSample(index=i, reward=1.0), SimSample(index=i + 1, reward=1.0)]
            >>> [Hooks(get_runtime).filter_deciding_fallback(args, zero(i)).keep for i in (0, 2)]  # remaining 2, then 1
            [False, True]
            >>> reset_runtime()
        """
        judged = self._judged(args, lambda runtime: runtime.filter_group_outcome(samples))
        if judged is None:
            return KEPT_UNJUDGED
        kind, outcome = judged
        if outcome is None:
            return KEPT_UNJUDGED if kind != TECHNICAL else DECISIONS[kind]
        return DECISIONS[kind] if outcome in DROP_OUTCOMES else KEPT_UNJUDGED

    def all_samples(self, args: Any, all_groups: list, data_source: Any = None) -> None:
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
            runtime = self.runtime_of(args)
            with runtime.own_time():
                runtime.close_step(groups)
        except ShopsimConfigError:
            raise  # a bad config is refused at the first hook call, before the first step
        except Exception:  # noqa: BLE001 - monitoring never stops training
            logger.exception("shopsim-metrics: closing the step failed; training goes on")

    def log(self, rollout_id: int, args: Any, samples: list, rollout_extra_metrics: dict,
            rollout_time: float) -> bool:
        """slime's rollout log function: emits the step record (JSONL, W&B) and returns False.

        Sets ``args.logged_rollout_id``. A step that ended with no group judged by the filter gets one
        warning naming the likely cause (once per run). Whatever the metrics, time or samples, every
        finished step gets its record; raises only :class:`~shopsim_metrics.settings.ShopsimConfigError`,
        at the first call, for bad settings.
        """
        try:
            args.logged_rollout_id = rollout_id
            runtime = self.runtime_of(args)
            with runtime.own_time(emits=True):
                runtime.emit_step(rollout_id, rollout_extra_metrics, rollout_time, args=args)
        except ShopsimConfigError:
            raise  # a bad config is refused at the first hook call, before the first step
        except Exception:  # noqa: BLE001 - monitoring never stops training
            logger.exception("shopsim-metrics: emitting step %r failed; training goes on", rollout_id)
        return False

    def sample(self, args: Any, sample: Any, *, rollout_id: Any = None, evaluation: bool = False,
               source: str | None = None) -> None:
        """slime's rollout sample hook: counts the tokens of every generate call in its step, aborted ones included.

        Returns None (slime keeps its sample) and never raises. Evaluation samples are not counted. ``source``
        names the counter when it is not slime's sample hook (miles' generate-function wrapper).
        """
        try:
            if evaluation:
                return None
            runtime = self.runtime_of(args)
            with runtime.own_time():
                runtime.record_sample(sample, rollout_id, source=source)
        except Exception:  # noqa: BLE001 - monitoring never stops training
            logger.debug("shopsim-metrics: counting a sample's tokens failed", exc_info=True)
        return None


def _groups(all_groups: Any) -> list | None:
    """slime's groups as a list, or None when they are not a list or tuple (never consumed, never raised on)."""
    if isinstance(all_groups, list):
        return all_groups
    if isinstance(all_groups, tuple):
        return list(all_groups)
    return None
