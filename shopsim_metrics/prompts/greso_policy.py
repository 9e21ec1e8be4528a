"""GRESO's rule as a skip policy: each draw decided by its run of zero-std visits, the ``p`` values adapted per step.

The rule itself is :class:`~shopsim_metrics.prompts.skip_rule.GresoSkipRule`; this module is what the data source
asks of it (:class:`~shopsim_metrics.prompts.skip_policy.SkipPolicy`). State: the rule's, under ``rule``.

Example:
    >>> from shopsim_metrics.prompts.skip_evidence import StepShares
    >>> from shopsim_metrics.settings.prompt_skip import SkipRuleSettings
    >>> policy = GresoPolicy(SkipRuleSettings(seed=7, step=0.1))
    >>> policy.close_step(StepShares(step=0, easy_share=0.5, hard_share=0.0, judged=4), history=None)
    >>> policy.take_report()
    RuleReport(p_easy=0.4, p_hard=0.6, predictions=None, guard=None)
"""

from __future__ import annotations

from typing import Any, Mapping

from shopsim_metrics.prompts.skip_evidence import SkipHistory, StepShares
from shopsim_metrics.prompts.skip_policy import PolicyDecision
from shopsim_metrics.prompts.skip_record import RuleReport
from shopsim_metrics.prompts.skip_rule import GresoSkipRule
from shopsim_metrics.settings.prompt_skip import SkipRuleSettings


class GresoPolicy:
    """GRESO's probabilistic skipping (``shopsim_prompt_skip: greso``); ``n_samples`` is not read."""

    def __init__(self, settings: SkipRuleSettings, *, n_samples: Any = None) -> None:
        self.settings = settings
        self.rule = GresoSkipRule(settings)

    def decide(self, key: str, group_index: Any, history: SkipHistory) -> PolicyDecision:
        run, kind = history.zero_std_run(key)
        decision = self.rule.decide(run, kind)
        return PolicyDecision(skip=decision.skip, probability=decision.probability, zero_std_run=run, kind=kind)

    def close_step(self, closed: StepShares, history: SkipHistory | None) -> None:
        self.rule.adapt(closed.easy_share, closed.hard_share)

    def take_report(self) -> RuleReport:
        return RuleReport(p_easy=self.rule.p_easy, p_hard=self.rule.p_hard)

    def state_dict(self) -> dict[str, Any]:
        return {"rule": self.rule.state_dict()}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.rule.load_state_dict(state["rule"])
