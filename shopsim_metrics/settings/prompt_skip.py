"""The knobs of the skip rules (GRESO's, :mod:`shopsim_metrics.prompts.skip_rule`, and the predictive one,
:mod:`shopsim_metrics.prompts.predictive_rule`), checked when they are made.

Each field is the setting ``shopsim_prompt_skip_<field>``, declared here and only here: its default, parser,
allowed text and docs line are the field's (:func:`rule_knob`, :func:`~shopsim_metrics.settings.setting_field.setting`);
:class:`~shopsim_metrics.settings.ShopsimSettings` holds one :class:`SkipRuleSettings` and the settings table,
check-config, the docs table and the replay flags read these fields.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from typing import Any

from shopsim_metrics.general.plain_values import is_int, is_number
from shopsim_metrics.settings.setting_field import SETTING, integer, number, optional, setting

UNIT_INTERVAL = "a number in [0, 1]"
"""What a knob declared with :func:`rule_knob` allows (unless its ``allowed`` says more)."""


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


def rule_knob(default: float, doc: str, *, allowed: str = UNIT_INTERVAL, greso: bool = True) -> Any:
    """A :class:`SkipRuleSettings` field in [0, 1] that is the setting ``shopsim_prompt_skip_<field>``
    (``greso``: ``default`` is GRESO's published value, said in the docs line).

    Example:
        >>> rule_knob(0.25, "a share").metadata[SETTING]["doc"]
        'a share (GRESO: `0.25`)'
    """
    return setting(default, number(0.0, 1.0), allowed, f"{doc} (GRESO: `{default:g}`)" if greso else doc)


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

    target_share: float = rule_knob(
        0.25, "zero-std share of a step's judged groups the two `p` values steer toward")
    easy_share_of_target: float = rule_knob(
        1 / 3, "the all-pass part of the target share (the rest is all-fail and other zero-std)")
    floor: float = rule_knob(0.01, "smallest chance to keep a prompt: skipped with probability at most `1 - floor`")
    step: float = rule_knob(0.01, "how far each `p` moves per step toward its target share")
    p_min: float = rule_knob(0.05, "lowest value of either `p` (most skipping)")
    p_max: float = rule_knob(0.95, "highest value of either `p` (least skipping)")
    p_easy_start: float = rule_knob(0.5, "`p` of all-pass prompts at the start of the run",
                                    allowed="a number in [p_min, p_max]")
    p_hard_start: float = rule_knob(0.5, "`p` of all-fail (and other zero-std) prompts at the start",
                                    allowed="a number in [p_min, p_max]")
    seed: int = setting(0, optional(integer(0)), "null or an integer >= 0",
                        "seed of the rule's random draws; `null` = slime's `--rollout-seed`", key_default=None)
    threshold: float = rule_knob(
        0.7, "`predictive`: a drawn prompt is skipped when its predicted probability of a zero-std group of the "
             "run's `n_samples_per_prompt` is at least this: one threshold at every n, above the chance of a zero-std "
             "group with nothing known (0.55 at n = 4, 0.39 at 8, 0.28 at 16; a lower one is refused); what luck of "
             "the draw adds at small n, the guard measures and caps (`shopsim_prompt_skip_max_lost_signal`)",
        greso=False)
    forgetting: float = rule_knob(
        0.995, "`predictive`: a prompt's success evidence is weighed by this per step since it was observed "
               "(`1` = never forgotten)", greso=False)
    min_yield: float = rule_knob(
        0.11, "`predictive`: a drawn prompt is also skipped when its predicted chance of spread is below this times "
              "its relative token cost (its tokens per visit over the tracked prompts' mean): the costly prompts "
              "that teach least go first (`0` = the threshold alone)", greso=False)
    max_lost_signal: float = rule_knob(
        0.1, "`predictive`: the guard keeps the signal the skips forgo (informative groups forgone per informative "
             "group trained, over the run, at an upper credible bound of what its probes measured) under this, skipping only the draws surest to be "
             "zero-std when it would be more (`1` = no limit) (§3.6)", greso=False)
    probe_every: int = setting(
        8, integer(0), "an integer >= 0",
        "`predictive`: one in N of the draws the rule skips is served anyway (more while the guard's bound is "
        "wide), a probe whose verdict checks the rule's predictions (`0` = no probe: the guard trusts the predictions)")

    def __post_init__(self) -> None:
        for field in _UNIT_KNOBS:
            object.__setattr__(self, field, checked_number(field, getattr(self, field), 0.0, 1.0))
        if self.p_min > self.p_max:
            raise SkipRuleSettingsError("p_min", f"a number <= p_max ({self.p_max:g})", self.p_min)
        for field in ("p_easy_start", "p_hard_start"):
            value = checked_number(field, getattr(self, field), self.p_min, self.p_max, " (between p_min and p_max)")
            object.__setattr__(self, field, value)
        for field in ("seed", "probe_every"):
            if not is_int(getattr(self, field)) or getattr(self, field) < 0:
                raise SkipRuleSettingsError(field, "an integer >= 0", getattr(self, field))

    @property
    def easy_target(self) -> float:
        """The all-pass share of a step's judged groups that ``p_easy`` steers toward."""
        return self.target_share * self.easy_share_of_target

    @property
    def hard_target(self) -> float:
        """The all-fail (and other zero-std) share that ``p_hard`` steers toward."""
        return self.target_share * (1.0 - self.easy_share_of_target)


_UNIT_KNOBS = tuple(f.name for f in fields(SkipRuleSettings) if f.metadata[SETTING]["allowed"] == UNIT_INTERVAL)
"""The knobs checked alone, as a number in [0, 1] (the starts are checked against ``p_min`` and ``p_max``)."""
