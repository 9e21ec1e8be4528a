"""A skip rule that predicts: skip a drawn prompt when its group is likely to be zero-std.

Each prompt's evidence is its successes and failures over its scored rollouts (the ledger's
``success_count`` of ``scorable_rollouts``), each visit's counts weighed by ``forgetting ** age``
(``age``: rollout steps since that visit; ``shopsim_prompt_skip_forgetting``, 0.995), kept by the monitor's prompt history
(:meth:`~shopsim_metrics.prompts.history.PromptHistory.evidence`). With Jeffreys' prior
``Beta(1/2, 1/2)`` the success rate's posterior is ``Beta(1/2 + successes, 1/2 + failures)``, and
the probability that a group of ``n`` siblings is zero-std (all succeed or all fail) is the
beta-binomial's two ends:

    P(zero-std) = B(a + n, b) / B(a, b) + B(a, b + n) / B(a, b)

A prompt is skipped when that is at least ``threshold`` (``shopsim_prompt_skip_threshold``, 0.7), or
when it teaches little for what it costs: its predicted chance of spread, ``1 - P(zero-std)``, is below
``min_yield × relative cost`` (``shopsim_prompt_skip_min_yield``, 0.11; the relative cost is the prompt's
tokens per visit over the tracked prompts' mean, :meth:`~shopsim_metrics.prompts.history.PromptHistory.relative_cost`).
What a run pays for is generated tokens per informative group, and a prompt three times as long as
the average costs three draws: of two prompts equally unlikely to have spread, the longer one goes
first. For a prompt of average cost or less the threshold decides alone (with the defaults the cost
rule only adds skips for prompts above 2.7 times the mean). The rule is deterministic: no draw.
The threshold, forgetting and min_yield were chosen on the real outcomes of a GRPO run, replayed
(``shopsim-metrics replay``, docs §3.6), and the guard makes them safe beyond it: with them, one all-fail or all-pass visit of 8 (0.713) skips a prompt for 15 steps, two in
a row (0.819) for about 150: that run's prompts stayed zero-std once they were (after a zero-std visit
the next one was zero-std 77% of the time).
What brings a skipped prompt back is forgetting: unvisited, its evidence fades toward the prior
(``P(zero-std)`` of the prior alone is 0.39 for ``n = 8``), so after enough steps it is served again
and, if it has become learnable, seen to be so. That needs a threshold above the prior's own chance of
a zero-std group (0.75 for ``n = 2``; 1 for ``n = 1``, where every group is zero-std): a lower one is an
error, since a prompt once skipped would never come back. The threshold is the same at every ``n``: the
posterior after one all-fail visit hardly depends on ``n`` (0.72 at 4, 0.71 at 8 and 16), but how often luck
alone makes a group zero-std does (a prompt solved 30% of the time fails a whole group of 4 a quarter of the
time), and evidence goes stale as prompts become learnable. Neither is in the model; both are measured on the
run by the data source's guard (:mod:`shopsim_metrics.prompts.lost_signal_guard`), which serves some of the
draws the rule would skip as probes and lets it skip only as much as keeps the run's lost signal, at an upper
credible bound of what the probes measured, under ``shopsim_prompt_skip_max_lost_signal``.

Calibration: the data source records the prediction of every prompt it lets through; the monitor
compares it with the realised verdict when the group is judged (``skip_predicted_zero_std_mean``,
``skip_realised_zero_std_rate``, ``skip_brier_score`` per step).

Example:
    >>> round(zero_std_probability(0.0, 0.0, 8), 3)          # nothing known: the prior's
    0.393
    >>> round(zero_std_probability(0.0, 32.0, 8), 3)         # four all-fail visits of 8: below 0.9
    0.895
    >>> round(zero_std_probability(0.0, 40.0, 8), 3)         # five
    0.913
    >>> round(zero_std_probability(4.0, 4.0, 8), 3)          # one visit, half succeeded
    0.045
    >>> from shopsim_metrics.settings.prompt_skip import SkipRuleSettings
    >>> rule = PredictiveSkipRule(SkipRuleSettings(threshold=0.9, min_yield=0.0), n_samples=8)
    >>> rule.decide((0.0, 40.0)).skip, rule.decide((4.0, 4.0)).skip, rule.decide(None).skip
    (True, False, False)
    >>> PredictiveSkipRule(SkipRuleSettings(threshold=0.7), n_samples=2)
    Traceback (most recent call last):
    ...
    ValueError: threshold: 0.7 is not above 0.75, the chance that a group of 2 is zero-std with nothing known: a prompt once skipped would never come back; set shopsim_prompt_skip_threshold above 0.75
    >>> costly = PredictiveSkipRule(SkipRuleSettings(threshold=0.9, min_yield=0.11), n_samples=8)
    >>> costly.decide((0.0, 16.0)).skip, costly.decide((0.0, 16.0), relative_cost=3.0).skip   # P(spread) 0.18
    (False, True)
    >>> costly.decide((4.0, 4.0), relative_cost=3.0).skip    # P(spread) 0.95: worth its cost
    False
"""

from __future__ import annotations

import math

from shopsim_metrics.general.plain_values import is_int
from shopsim_metrics.prompts.skip_rule import SkipDecision
from shopsim_metrics.settings.prompt_skip import SkipRuleSettings

PRIOR = 0.5
"""Jeffreys' prior: ``Beta(1/2, 1/2)`` on a prompt's success rate."""


def zero_std_probability(successes: float, failures: float, n: int, prior: float = PRIOR) -> float:
    """P(a group of ``n`` is all-success or all-fail) under ``Beta(prior + successes, prior + failures)``.

    Example:
        >>> round(zero_std_probability(0.0, 0.0, 1), 12)   # a group of one is always zero-std
        1.0
        >>> zero_std_probability(3.0, 0.0, 8) > zero_std_probability(3.0, 1.0, 8)
        True
    """
    a, b = prior + max(successes, 0.0), prior + max(failures, 0.0)
    log_norm = math.lgamma(a + b) - math.lgamma(a + b + n)
    all_pass = math.exp(log_norm + math.lgamma(a + n) - math.lgamma(a))
    all_fail = math.exp(log_norm + math.lgamma(b + n) - math.lgamma(b))
    return min(all_pass + all_fail, 1.0)


class PredictiveSkipRule:
    """Skip when the predicted zero-std probability of a group of ``n_samples`` is at least ``threshold``, or
    its chance of spread is below ``min_yield`` times the prompt's relative token cost.

    Stateless: what it learns is in the prompt history (restored from the records on resume), so a
    resumed run decides as an unbroken one.
    """

    def __init__(self, settings: SkipRuleSettings, *, n_samples: int) -> None:
        """``settings``: the rule's knobs (``threshold``, ``min_yield``; their ranges are checked there, once)."""
        threshold, min_yield = settings.threshold, settings.min_yield
        if not is_int(n_samples) or n_samples < 1:
            raise ValueError(f"n_samples: expected an integer >= 1; got {n_samples!r}")
        prior = zero_std_probability(0.0, 0.0, n_samples)
        if n_samples == 1:
            raise ValueError("n_samples_per_prompt 1: every group is zero-std (one rollout has nothing to differ from), "
                             "so a predicted chance of zero-std cannot tell one prompt from another; keep "
                             "shopsim_prompt_skip off, or sample more than one rollout per prompt")
        if threshold <= prior:
            raise ValueError(f"threshold: {threshold:g} is not above {prior:.3g}, the chance that a group of {n_samples} "
                             "is zero-std with nothing known: a prompt once skipped would never come back; set "
                             f"shopsim_prompt_skip_threshold above {prior:.3g}")
        self.threshold = threshold
        self.n_samples = n_samples
        self.min_yield = min_yield

    def predict(self, evidence: tuple[float, float] | None) -> float | None:
        """The zero-std probability of a prompt with this ``(successes, failures)`` evidence (None: never scored)."""
        if evidence is None:
            return None
        return zero_std_probability(evidence[0], evidence[1], self.n_samples)

    def decide(self, evidence: tuple[float, float] | None, relative_cost: float | None = None) -> SkipDecision:
        """Skip or keep; ``probability`` is the predicted zero-std probability (0 for a prompt never scored).

        ``relative_cost``: the prompt's tokens per visit over the tracked prompts' mean (None: unknown,
        the threshold decides alone).
        """
        predicted = self.predict(evidence)
        if predicted is None:
            return SkipDecision(skip=False, probability=0.0)
        by_threshold = predicted >= self.threshold
        too_costly = relative_cost is not None and 1.0 - predicted < self.min_yield * relative_cost
        return SkipDecision(skip=by_threshold or too_costly, probability=predicted,
                            for_cost=too_costly and not by_threshold)
