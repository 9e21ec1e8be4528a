"""The technical streak: consecutive technical groups in judgement order, across steps.

One :class:`TechnicalStreak` per run is fed by every judgement the filter makes (whether or not
the step accounting is on); the step records, the alerts and the termination at
``shopsim_max_consecutive_failed_groups`` all read it. Any scorable group ends the streak.

Example:
    >>> streak = TechnicalStreak()
    >>> [streak.observe(check) for check in ("status_failed", None, "reward_missing", "status_failed")]
    [1, 0, 1, 2]
    >>> streak.checks
    {'reward_missing': 1, 'status_failed': 1}
"""

from __future__ import annotations

from collections import Counter


class TechnicalStreak:
    """The running count of consecutive technical groups and the checks that failed in it."""

    def __init__(self) -> None:
        self.count = 0
        self._checks: Counter[str] = Counter()

    def observe(self, failed_check: str | None) -> int:
        """Count one judgement (``failed_check`` None: not technical); returns the streak after it."""
        if failed_check is None:
            if self.count:
                self.count = 0
                self._checks.clear()
        else:
            self.count += 1
            self._checks[failed_check] += 1
        return self.count

    @property
    def checks(self) -> dict[str, int]:
        """The failed checks of the current streak, by name (sorted)."""
        return dict(sorted(self._checks.items()))
