"""Alerts on consecutive technical failures: WARN once per streak at a fraction of the limit,
ERROR just before termination at the limit. Sinks deliver the :class:`Alert` values decided here.

Example:
    >>> policy, streak = StreakAlertPolicy(max_consecutive_failed_groups=8), TechnicalStreak()
    >>> [(streak.observe("status_failed"), policy.alert_for(streak, rollout_id=0) is not None)[1]
    ...  for _ in range(8)]
    [False, False, False, True, False, False, False, True]
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from shopsim_metrics.step.streak import TechnicalStreak


@dataclass(frozen=True)
class Alert:
    """An alert raised by the monitor (for example a technical-failure streak)."""

    title: str
    text: str
    level: str  # "INFO", "WARN" or "ERROR" (W&B's AlertLevel names)
    rollout_id: int | None = None


class StreakAlertPolicy:
    """Decides which alert, if any, the technical streak deserves after a judgement.

    Stateless: it reads the run's one :class:`~shopsim_metrics.step.streak.TechnicalStreak`. The streak
    grows by one per technical group, so "the streak has just reached ``warn_at``" happens once per
    streak: that is the WARN; every judgement at or past the limit gives the ERROR.
    """

    def __init__(
        self,
        *,
        max_consecutive_failed_groups: int,
        warn_fraction: float = 0.5,
        warn_level: str = "WARN",
        error_level: str = "ERROR",
        enabled: bool = True,
    ) -> None:
        self.max_consecutive_failed_groups = max_consecutive_failed_groups
        self.warn_at = max(1, math.ceil(max_consecutive_failed_groups * warn_fraction))
        self.warn_level = warn_level
        self.error_level = error_level
        self.enabled = enabled

    def alert_for(self, streak: TechnicalStreak, rollout_id: int | None) -> Alert | None:
        """The alert to send after a judgement that left ``streak`` as it is, if any."""
        limit = self.max_consecutive_failed_groups
        if not self.enabled or streak.count == 0:
            return None
        if streak.count >= limit:
            return Alert(
                title="shopsim: technical-failure limit reached, terminating",
                text=(f"{streak.count} consecutive technical groups reached the limit {limit} at rollout step "
                      f"{rollout_id}; failing checks: {_checks_text(streak)}. The run is being terminated."),
                level=self.error_level,
                rollout_id=rollout_id,
            )
        if streak.count == self.warn_at:
            return Alert(
                title="shopsim: technical failures piling up",
                text=(f"{streak.count} consecutive technical groups (limit {limit}) at rollout step {rollout_id}; "
                      f"failing checks: {_checks_text(streak)}. The run terminates at {limit}."),
                level=self.warn_level,
                rollout_id=rollout_id,
            )
        return None


def _checks_text(streak: TechnicalStreak) -> str:
    """The streak's failed checks for an alert's text, e.g. ``reward_missing=1, status_failed=2``."""
    return ", ".join(f"{k}={v}" for k, v in streak.checks.items()) or "none recorded"
