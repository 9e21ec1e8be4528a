"""The knobs of the skip rules (GRESO's, :mod:`shopsim_metrics.prompts.skip_rule`, and the predictive one,
:mod:`shopsim_metrics.prompts.predictive_rule`), checked when they are made.

Each field is the setting ``shopsim_prompt_skip_<field>``, declared (at the field's default) in
:class:`shopsim_metrics.settings.ShopsimSettings`; the settings table reads them, the rule uses them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any
from shopsim_metrics.judging.plain_values import is_int, is_number


class SkipRuleSettingsError(ValueError):
    """A :class:`SkipRuleSettings` field has a value that cannot work; ``field``, ``expected``, ``value`` say which."""

    def __init__(self, field: str, expected: str, value: Any) -> None:
        self.field = field
        self.expected = expected
        self.value = value
        super().__init__(f"{field}: expected {expected}; got {value!r}")


def checked_number(field: str, value: Any, low: float, high: float, bounds: str = "") -> float:
    """``value`` as a float in ``[low, high]`` (ints and floats only, never a bool or a string)."""
    expected = f"a number in [{low:g}, {high:g}]{bounds}"
    if not is_number(value):
        raise SkipRuleSettingsError(field, expected, value)
    if not math.isfinite(value) or not low <= value <= high:
        raise SkipRuleSettingsError(field, expected, value)
    return float(value)


@dataclass(frozen=True)
class SkipRuleSettings:
    """The rule's knobs, at GRESO's published values; every field is checked when the settings are made.

    Example:
        >>> s = SkipRuleSettings()
        >>> round(s.easy_target, 4), round(s.hard_target, 4)
        (0.0833, 0.1667)
        >>> SkipRuleSettings(floor=1.5)
        Traceback (most recent call last):
        ...
        shopsim_metrics.settings.prompt_skip.SkipRuleSettingsError: floor: expected a number in [0, 1]; got 1.5
    """

    target_share: float = 0.25
    """zero-std groups wanted per step, as a share of the step's judged groups"""
    easy_share_of_target: float = 1 / 3
    """the all-pass part of ``target_share`` (the rest is all-fail and other)"""
    floor: float = 0.01
    """the smallest chance to keep a prompt: a prompt is skipped with probability at most ``1 - floor``"""
    step: float = 0.01
    """how far each ``p`` moves per step"""
    p_min: float = 0.05
    p_max: float = 0.95
    p_easy_start: float = 0.5
    p_hard_start: float = 0.5
    seed: int = 0
    """seed of the rule's own random generator"""
    threshold: float = 0.7
    """``predictive``: skip a prompt when its predicted probability of a zero-std group is at least this"""
    forgetting: float = 0.995
    """``predictive``: the weight of a prompt's evidence is multiplied by this per step since it was observed"""
    min_yield: float = 0.11
    """``predictive``: also skip a prompt whose predicted chance of spread per unit of its relative token cost
    (its tokens per visit over the tracked prompts' mean) is below this (0: never for its cost)"""

    def __post_init__(self) -> None:
        for field in ("target_share", "easy_share_of_target", "floor", "step", "p_min", "p_max", "threshold",
                      "forgetting", "min_yield"):
            object.__setattr__(self, field, checked_number(field, getattr(self, field), 0.0, 1.0))
        if self.p_min > self.p_max:
            raise SkipRuleSettingsError("p_min", f"a number <= p_max ({self.p_max:g})", self.p_min)
        for field in ("p_easy_start", "p_hard_start"):
            value = checked_number(field, getattr(self, field), self.p_min, self.p_max, " (between p_min and p_max)")
            object.__setattr__(self, field, value)
        if not is_int(self.seed) or self.seed < 0:
            raise SkipRuleSettingsError("seed", "an integer >= 0", self.seed)

    @property
    def easy_target(self) -> float:
        """The all-pass share of a step's judged groups that ``p_easy`` steers toward."""
        return self.target_share * self.easy_share_of_target

    @property
    def hard_target(self) -> float:
        """The all-fail (and other zero-std) share that ``p_hard`` steers toward."""
        return self.target_share * (1.0 - self.easy_share_of_target)
