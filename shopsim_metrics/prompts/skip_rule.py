"""GRESO's rule for skipping a prompt before generation (arXiv 2506.02177, "Act Only When It Pays").

A prompt whose last ``k`` visits were zero-std (its ``zero_std_run``, ``k >= 1``) is skipped with
probability ``1 - max(p ** k, floor)``; a prompt with ``k = 0`` (it spread, or was technical, at its
last visit, or was never seen) is never skipped. ``p`` is kept apart for the two sides of zero-std:

- ``p_easy`` for prompts whose latest zero-std run is all-pass (``zero_std_all_pass``);
- ``p_hard`` for prompts whose latest zero-std run is all-fail (``zero_std_all_fail``), and also for
  ``zero_std_other`` (zero-std rewards with mixed success flags): such a group teaches as little as
  any zero-std group, so it is skipped like one, on the side that holds the larger share of the target.

Once per step each ``p`` moves by ``step`` toward a target zero-std share of the step's judged
groups (``target_share``, 0.25, of which ``easy_share_of_target``, a third, is all-pass and the rest
all-fail or other): lowered, so more skipping, when that side's observed share is at or above its
target, raised otherwise; always within ``[p_min, p_max]``.

The rule is pure: it reads no history and knows nothing of slime. Every :meth:`GresoSkipRule.decide`
takes exactly one draw from the rule's own generator, so a rule restored from
:meth:`~GresoSkipRule.state_dict` answers the same questions with the same decisions.

Example:
    >>> rule = GresoSkipRule(SkipRuleSettings(seed=7))
    >>> rule.skip_probability(0, None), rule.skip_probability(1, HARD), rule.skip_probability(2, EASY)
    (0.0, 0.5, 0.75)
    >>> rule.adapt(easy_share=0.10, hard_share=0.05)   # easy at/above its target 1/12, hard below 1/6
    >>> rule.p_easy, rule.p_hard
    (0.49, 0.51)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from shopsim_metrics.judging.verdicts import ZERO_STD_ALL_FAIL, ZERO_STD_ALL_PASS, ZERO_STD_OTHER
from shopsim_metrics.settings.prompt_skip import SkipRuleSettings, checked_number

EASY, HARD, OTHER = ZERO_STD_ALL_PASS, ZERO_STD_ALL_FAIL, ZERO_STD_OTHER
ZERO_STD_KINDS = (EASY, HARD, OTHER)
"""The kinds of a zero-std run: the zero-std verdicts (:mod:`shopsim_metrics.judging.verdicts`)."""

STATE_FORMAT = 1


@dataclass(frozen=True)
class SkipDecision:
    """One answer of the rule: whether to skip, and the probability it was drawn with."""

    skip: bool
    probability: float
    for_cost: bool = False  # the predictive rule's cost part skipped it (its threshold alone would not have)


def skip_probability(p: float, zero_std_run: int, floor: float) -> float:
    """``1 - max(p ** k, floor)`` for a run of ``k >= 1`` zero-std visits; 0 for ``k = 0``.

    Example:
        >>> skip_probability(0.5, 3, 0.01), skip_probability(0.5, 0, 0.01), skip_probability(0.05, 10, 0.01)
        (0.875, 0.0, 0.99)
    """
    if zero_std_run < 1:
        return 0.0
    return 1.0 - max(p**zero_std_run, floor)


class GresoSkipRule:
    """GRESO's probabilistic skip rule with its two adaptive ``p`` values (see the module docstring).

    State: ``p_easy``, ``p_hard`` and the random generator; :meth:`state_dict` holds all three as
    plain JSON-able values and :meth:`load_state_dict` puts them back.

    Example:
        >>> rule = GresoSkipRule(SkipRuleSettings(seed=3))
        >>> state = rule.state_dict()
        >>> first = [rule.decide(2, HARD).skip for _ in range(8)]
        >>> twin = GresoSkipRule(SkipRuleSettings(seed=99)); twin.load_state_dict(state)
        >>> [twin.decide(2, HARD).skip for _ in range(8)] == first
        True
    """

    def __init__(self, settings: SkipRuleSettings | None = None) -> None:
        self.settings = settings if settings is not None else SkipRuleSettings()
        self.p_easy = self.settings.p_easy_start
        self.p_hard = self.settings.p_hard_start
        import numpy as np  # lazy: the settings table reads this module, and importing the hooks stays light

        self._rng = np.random.Generator(np.random.PCG64(self.settings.seed))

    def p_for(self, kind: str) -> float:
        """The ``p`` that applies to a zero-std run of this kind (``other`` uses ``p_hard``)."""
        if kind == EASY:
            return self.p_easy
        if kind in (HARD, OTHER):
            return self.p_hard
        raise ValueError(f"kind: expected one of {', '.join(ZERO_STD_KINDS)} for a zero-std run; got {kind!r}")

    def skip_probability(self, zero_std_run: int, kind: str | None) -> float:
        """The probability to skip a prompt with this run of zero-std visits (0 for a run of 0, whatever the kind)."""
        if zero_std_run < 1:
            return 0.0
        return skip_probability(self.p_for(kind), zero_std_run, self.settings.floor)  # type: ignore[arg-type]

    def decide(self, zero_std_run: int, kind: str | None) -> SkipDecision:
        """Skip or keep one prompt; takes exactly one draw from the generator, whatever the answer."""
        probability = self.skip_probability(zero_std_run, kind)
        return SkipDecision(skip=bool(self._rng.random() < probability), probability=probability)

    def adapt(self, easy_share: float | None, hard_share: float | None) -> None:
        """Move each ``p`` once by ``step`` after a step with these observed shares (None: that ``p`` stays).

        ``easy_share``: all-pass groups / judged groups; ``hard_share``: all-fail and other zero-std
        groups / judged groups.
        """
        s = self.settings
        if easy_share is not None:
            self.p_easy = self._moved(self.p_easy, checked_number("easy_share", easy_share, 0.0, 1.0), s.easy_target)
        if hard_share is not None:
            self.p_hard = self._moved(self.p_hard, checked_number("hard_share", hard_share, 0.0, 1.0), s.hard_target)

    def _moved(self, p: float, share: float, target: float) -> float:
        s = self.settings
        moved = p - s.step if share >= target else p + s.step
        return min(max(moved, s.p_min), s.p_max)

    def state_dict(self) -> dict[str, Any]:
        """Both ``p`` values and the generator's state, as JSON-able values (ints, floats, strings)."""
        return {"format": STATE_FORMAT, "p_easy": self.p_easy, "p_hard": self.p_hard,
                "rng": self._rng.bit_generator.state}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore what :meth:`state_dict` saved; a ``p`` outside the current ``[p_min, p_max]`` is clamped."""
        missing = [k for k in ("format", "p_easy", "p_hard", "rng") if k not in state]
        if missing:
            raise ValueError(f"skip rule state: missing {', '.join(missing)}; expected the dict that "
                             f"GresoSkipRule.state_dict() returns; got keys {sorted(state)}")
        if state["format"] != STATE_FORMAT:
            raise ValueError(f"skip rule state: format: expected {STATE_FORMAT}; got {state['format']!r}")
        s = self.settings
        self.p_easy = min(max(checked_number("p_easy", state["p_easy"], 0.0, 1.0), s.p_min), s.p_max)
        self.p_hard = min(max(checked_number("p_hard", state["p_hard"], 0.0, 1.0), s.p_min), s.p_max)
        import numpy as np

        rng = np.random.Generator(np.random.PCG64())
        rng.bit_generator.state = dict(state["rng"])
        self._rng = rng
