"""The skip policy: what the data source asks of a skip rule, and the one place a rule is chosen.

A policy decides each drawn prompt (:meth:`SkipPolicy.decide`), learns once per closed step
(:meth:`SkipPolicy.close_step`), says what the step's record needs of it (:meth:`SkipPolicy.take_report`) and saves
its own part of the data source's state file (:meth:`SkipPolicy.state_dict`, its keys beside the data source's own).
Two implement it, one module each, and only the chosen one is built (:func:`build_skip_policy`):

- ``greso``: :class:`~shopsim_metrics.prompts.greso_policy.GresoPolicy` (GRESO's rule, its ``p`` values adapted
  once per step);
- ``predictive``: :class:`~shopsim_metrics.prompts.predictive_policy.PredictivePolicy` (the predictive rule with
  its lost-signal guard and the guard's probes).

Example:
    >>> from shopsim_metrics.settings.prompt_skip import SkipRuleSettings
    >>> build_skip_policy("off", SkipRuleSettings(), n_samples=None) is None
    True
    >>> type(build_skip_policy("greso", SkipRuleSettings(), n_samples=None)).__name__
    'GresoPolicy'
    >>> type(build_skip_policy("predictive", SkipRuleSettings(), n_samples=8)).__name__
    'PredictivePolicy'
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any, Mapping, Protocol

from shopsim_metrics.prompts.skip_evidence import SkipHistory, StepShares
from shopsim_metrics.prompts.skip_record import RuleReport
from shopsim_metrics.settings.prompt_skip import SkipRuleSettings

__all__ = ["POLICIES", "PolicyDecision", "RuleReport", "SkipPolicy", "build_skip_policy"]

POLICIES: dict[str, str] = {
    "greso": "shopsim_metrics.prompts.greso_policy.GresoPolicy",
    "predictive": "shopsim_metrics.prompts.predictive_policy.PredictivePolicy",
}
"""Each ``shopsim_prompt_skip`` mode that skips, and the policy that implements it (imported when chosen)."""


@dataclass(frozen=True)
class PolicyDecision:
    """A policy's answer for one drawn prompt, with what a skipped prompt's record row needs."""

    skip: bool
    probability: float  # GRESO: the skip probability drawn with; predictive: the predicted zero-std probability
    zero_std_run: int  # the prompt's run of zero-std visits
    kind: str | None  # the side of zero-std (None: none known)
    for_cost: bool = False  # the predictive rule's cost part skipped it (its threshold alone would not have)


class SkipPolicy(Protocol):
    """What the data source (:class:`~shopsim_metrics.prompts.data_source.PromptSkipDataSource`) asks of a rule."""

    def decide(self, key: str, group_index: Any, history: SkipHistory) -> PolicyDecision:
        """Skip or serve the drawn prompt ``key`` (its group's ``group_index``), reading its ``history``."""
        ...

    def close_step(self, closed: StepShares, history: SkipHistory) -> None:
        """Learn from one closed step, once (at the first wave after it closed)."""
        ...

    def take_report(self) -> RuleReport:
        """What the step's record needs of the rule, since the last call."""
        ...

    def state_dict(self) -> dict[str, Any]:
        """The policy's keys of the data source's state file, JSON-able."""
        ...

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore from the data source's state (the whole file's object; the policy reads its own keys)."""
        ...


def build_skip_policy(mode: str, settings: SkipRuleSettings, *, n_samples: Any) -> SkipPolicy | None:
    """The policy of ``mode`` (None for ``off``), built from the rule's settings; ``n_samples``: slime's
    ``n_samples_per_prompt`` (the predictive rule's group size; unused by GRESO's)."""
    if mode == "off":
        return None
    if mode not in POLICIES:
        raise ValueError(f"shopsim_prompt_skip: expected off or one of {', '.join(POLICIES)}; got {mode!r}")
    module_name, _, name = POLICIES[mode].rpartition(".")
    policy_class = getattr(importlib.import_module(module_name), name)
    return policy_class(settings, n_samples=n_samples)
