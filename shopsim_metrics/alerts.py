"""Alerts on consecutive technical failures: WARN once per streak at a fraction of the limit,
ERROR just before termination at the limit. Sinks deliver the :class:`Alert` values decided here.

Example:
    >>> policy = StreakAlertPolicy(max_consecutive_failed_groups=8)
    >>> [policy.observe(streak=s, rollout_id=0, failed_checks={"status_failed": s}) is not None
    ...  for s in (1, 3, 4, 5, 8)]
    [False, False, True, False, True]
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class Alert:
    """An alert raised by the monitor (for example a technical-failure streak)."""

    title: str
    text: str
    level: str  # "INFO", "WARN" or "ERROR" (W&B's AlertLevel names)
    rollout_id: int | None = None


class StreakAlertPolicy:
    """Decides when a technical-failure streak deserves an alert (pure; no I/O)."""

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
        self._warned_this_streak = False

    def observe(self, *, streak: int, rollout_id: int | None, failed_checks: dict[str, int]) -> Alert | None:
        """Call after every judgement with the current streak; returns the alert to send, if any."""
        if streak == 0:
            self._warned_this_streak = False
            return None
        if not self.enabled:
            return None
        checks = ", ".join(f"{k}={v}" for k, v in sorted(failed_checks.items())) or "none recorded"
        if streak >= self.max_consecutive_failed_groups:
            return Alert(
                title="shopsim: technical-failure limit reached, terminating",
                text=(f"{streak} consecutive technical groups reached the limit {self.max_consecutive_failed_groups} at rollout step "
                      f"{rollout_id}; failing checks: {checks}. The run is being terminated."),
                level=self.error_level,
                rollout_id=rollout_id,
            )
        if streak >= self.warn_at and not self._warned_this_streak and self.warn_at < self.max_consecutive_failed_groups:
            self._warned_this_streak = True
            return Alert(
                title="shopsim: technical failures piling up",
                text=(f"{streak} consecutive technical groups (limit {self.max_consecutive_failed_groups}) at rollout step {rollout_id}; "
                      f"failing checks: {checks}. The run terminates at {self.max_consecutive_failed_groups}."),
                level=self.warn_level,
                rollout_id=rollout_id,
            )
        return None
