"""The run's own population of prompts as a prior: empirical Bayes over the outcomes of every visit so far.

A prompt seen once says little alone: one all-fail group of 4 is a hard prompt, or a prompt solved 30% of the time
that was unlucky. What tells the two apart is the run's population: where most prompts are solved always or never
(a polarised pool), one all-fail visit is strong evidence; where most are solved some of the time, it is weak.
:class:`PopulationPrior` keeps the moments of every scored visit's success fraction ``f = k / n`` and fits a
``Beta(a, b)`` to the prompts' success rates by the method of moments, the binomial noise taken out:

    m = E[f],   E[p^2] = (E[f^2] - m E[1/n]) / (1 - E[1/n]),   var = E[p^2] - m^2,   a + b = m (1 - m) / var - 1

The predictive rule reads it for a prompt seen once (:mod:`shopsim_metrics.prompts.predictive_rule`), in place of
Jeffreys' ``Beta(1/2, 1/2)``. It is None (Jeffreys' then) until :data:`MIN_VISITS` visits are scored, or while
every visit succeeded or every one failed; with no spread among prompts beyond the noise it is as strong as
:data:`MAX_STRENGTH` allows.

Example:
    >>> prior = PopulationPrior()
    >>> for i in range(100):   # half the prompts always solved, half never: a polarised pool
    ...     prior.observe(8 * (i % 2), 8)
    >>> a, b = prior.prior(); round(a, 3), round(b, 3)
    (0.05, 0.05)
    >>> mixed = PopulationPrior()
    >>> for k in [3, 4, 5, 4] * 25:   # every prompt solved about half the time
    ...     mixed.observe(k, 8)
    >>> mixed.prior()                   # no spread beyond the noise of groups of 8: prompts alike
    (32.0, 32.0)
"""

from __future__ import annotations

from typing import Any

from shopsim_metrics.record.saved_values import saved_number

MIN_VISITS = 32
"""Scored visits before the population says anything."""
MIN_PARAMETER, MAX_STRENGTH = 0.05, 64.0
"""The fitted ``a + b`` is at least what makes the smaller of ``a`` and ``b`` this, and at most ``MAX_STRENGTH`` (the
prior never outweighs eight visits of 8); the mean is the visits' either way."""


class PopulationPrior:
    """The moments of every scored visit's success fraction, and the ``Beta`` they fit (module docstring)."""

    def __init__(self) -> None:
        self.visits = 0.0
        self.fractions = 0.0  # sum of k / n
        self.squares = 0.0  # sum of (k / n)^2
        self.inverse_sizes = 0.0  # sum of 1 / n

    def observe(self, successes: int, scored: int) -> None:
        """One scored visit: ``successes`` of ``scored`` rollouts."""
        if scored <= 0:
            return
        fraction = min(max(successes, 0), scored) / scored
        self.visits += 1.0
        self.fractions += fraction
        self.squares += fraction * fraction
        self.inverse_sizes += 1.0 / scored

    def prior(self) -> tuple[float, float] | None:
        """``(a, b)`` of the fitted ``Beta`` (None: too few visits, or all of one side)."""
        if self.visits < MIN_VISITS:
            return None
        mean = self.fractions / self.visits
        inverse = self.inverse_sizes / self.visits
        if inverse >= 1.0:  # groups of one: nothing to tell the noise from
            return None
        second = (self.squares / self.visits - mean * inverse) / (1.0 - inverse)
        variance = second - mean * mean
        if not 0.0 < mean < 1.0:
            return None
        # no spread beyond the noise: the prompts are alike, the prior as strong as it may be
        strength = mean * (1.0 - mean) / variance - 1.0 if variance > 1e-9 else MAX_STRENGTH
        strength = min(max(strength, MIN_PARAMETER / min(mean, 1.0 - mean)), MAX_STRENGTH)
        return mean * strength, (1.0 - mean) * strength

    def state(self) -> list[float]:
        return [self.visits, self.fractions, self.squares, self.inverse_sizes]

    def load(self, values: Any) -> None:
        """Put back :meth:`state`'s four sums (``ValueError`` naming what is wrong)."""
        if not isinstance(values, list) or len(values) != 4:
            raise ValueError(f"the population's moments: expected 4 numbers; got {values!r}"[:200])
        visits, fractions, squares, inverse = (saved_number(v, "the population's moments") for v in values)
        if fractions > visits or squares > fractions or inverse > visits:
            raise ValueError(f"the population's moments: {values!r} no run reaches (each sum at most the visits)"[:200])
        self.visits, self.fractions, self.squares, self.inverse_sizes = visits, fractions, squares, inverse
