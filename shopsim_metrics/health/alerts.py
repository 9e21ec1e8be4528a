"""Alerts on consecutive technical failures: one WARN per rollout step, one ERROR at the limit.

A burst of technical failures is one event. Every streak that reaches the warning threshold
(``ceil(warn_fraction × limit)``) in a rollout step is noted; the step's single WARN says how many
streaks crossed it and the longest one, and is taken when the step is emitted (the filter itself
does no I/O for it). The ERROR is sent at once, just before termination, and replaces the step's
WARN (its text counts the streaks that crossed the threshold earlier in the step). Titles name the
rollout step, so two alerts never share a title and W&B shows them apart.

Example:
    >>> policy, streak = StreakAlertPolicy(max_consecutive_failed_groups=8), TechnicalStreak()
    >>> for check in ["status_failed"] * 5 + [None] + ["reward_missing"] * 4:
    ...     _ = streak.observe(check)
    ...     assert policy.after_judgement(streak, rollout_id=3) is None
    >>> (warn,) = policy.take_warnings(up_to=3)
    >>> warn.title
    'shopsim: technical failures piling up at rollout step 3'
    >>> warn.text.split(";")[0]
    'at rollout step 3, 2 streaks of consecutive technical groups reached 4 (limit 8), the longest 5'
    >>> policy.take_warnings(up_to=3)
    []
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass, field

from shopsim_metrics.judging.failure_cause import leading_cause_text
from shopsim_metrics.record import contract
from shopsim_metrics.health.streak import TechnicalStreak


@dataclass(frozen=True)
class Alert:
    """An alert raised by the monitor (for example a technical-failure streak)."""

    title: str
    text: str
    level: str  # "INFO", "WARN" or "ERROR" (W&B's AlertLevel names)
    rollout_id: int | None = None


@dataclass
class _Burst:
    """The streaks of one rollout step that reached the warning threshold."""

    crossings: int = 0  # streaks that reached warn_at in the step
    longest: int = 0  # the longest streak value reached in the step after a crossing
    checks: dict[str, int] = field(default_factory=dict)  # the failed checks of that longest streak
    causes: dict[str, int] = field(default_factory=dict)  # the causes its groups left, most frequent first
    kinds: dict[str, int] = field(default_factory=dict)  # who failed its groups (environment, model, unmarked)


class StreakAlertPolicy:
    """Decides the alerts the run's one :class:`~shopsim_metrics.health.streak.TechnicalStreak` deserves.

    :meth:`after_judgement` is called after every judgement that left a streak: it notes the step's
    crossings and returns the ERROR at the limit; :meth:`take_warnings` hands over the one WARN of
    each finished step. Thread-safe: the filter notes, the log function takes.
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
        self._bursts: dict[int | None, _Burst] = {}  # by rollout step, oldest first
        self._crossed_in: int | None = None  # the step in which the latest streak to reach warn_at did so
        self._lock = threading.Lock()

    def after_judgement(self, streak: TechnicalStreak, rollout_id: int | None) -> Alert | None:
        """Note the streak after a judgement of step ``rollout_id``; the ERROR when it reached the limit."""
        count, limit = streak.count, self.max_consecutive_failed_groups
        if not self.enabled or count == 0:
            return None
        with self._lock:
            burst = self._bursts.get(rollout_id)
            if count == self.warn_at and count < limit:  # once per streak: it grows by one per technical group
                burst = self._bursts.setdefault(rollout_id, _Burst())
                burst.crossings += 1
                self._crossed_in = rollout_id
            if burst is not None and count > burst.longest:
                burst.longest, burst.checks, burst.causes, burst.kinds = (count, streak.checks, streak.causes,
                                                                          streak.kinds)
            if count < limit:
                return None
            self._bursts.pop(rollout_id, None)  # the ERROR is the step's one alert
            earlier = burst.crossings - (self._crossed_in == rollout_id) if burst is not None else 0
        return Alert(
            title=f"shopsim: technical-failure limit reached at rollout step {rollout_id}, terminating",
            text=(f"{count} consecutive technical groups reached the limit {limit} at rollout step {rollout_id}"
                  f"{leading_cause_text(streak.causes, streak.kinds)}; failing checks: {_checks_text(streak.checks)}"
                  + (f"; {earlier} earlier streak(s) in this step reached {self.warn_at}" if earlier > 0 else "")
                  + ". The run is being terminated."),
            level=self.error_level,
            rollout_id=rollout_id,
        )

    def take_warnings(self, up_to: int | None = None) -> list[Alert]:
        """The WARN of every noted step up to ``up_to`` (every step when None), oldest first, once each."""
        with self._lock:
            ready = [step for step in self._bursts if up_to is None or step is None or step <= up_to]
            bursts = [(step, self._bursts.pop(step)) for step in ready]
        return [self._warning(step, burst) for step, burst in bursts]

    def _warning(self, rollout_id: int | None, burst: _Burst) -> Alert:
        limit = self.max_consecutive_failed_groups
        streaks = "1 streak" if burst.crossings == 1 else f"{burst.crossings} streaks"
        return Alert(
            title=f"shopsim: technical failures piling up at rollout step {rollout_id}",
            text=(f"at rollout step {rollout_id}, {streaks} of consecutive technical groups reached {self.warn_at} "
                  f"(limit {limit}), the longest {burst.longest}{leading_cause_text(burst.causes, burst.kinds)}; failing checks of "
                  "the longest: "
                  f"{_checks_text(burst.checks)}. The run terminates at {limit} in a row."),
            level=self.warn_level,
            rollout_id=rollout_id,
        )


def _checks_text(checks: dict[str, int]) -> str:
    """Failed checks for an alert's text, e.g. ``reward_missing=1, status_failed=2``."""
    return ", ".join(f"{k}={v}" for k, v in checks.items()) or "none recorded"


def alert_scalars(alerts: list[dict[str, str]] | None, *, alerts_on: bool) -> dict[str, int]:
    """The step's ``alert_count`` and ``alert_level`` (the code of its highest alert, 0 without one) from
    the record's ``alerts``; empty when the alerts are off (``alerts_on`` False) and none was raised.

    Example:
        >>> alert_scalars([{"level": "WARN", "title": "t", "text": "x"}], alerts_on=True)
        {'alert_count': 1, 'alert_level': 2}
        >>> alert_scalars([], alerts_on=True), alert_scalars([], alerts_on=False)
        ({'alert_count': 0, 'alert_level': 0}, {})
    """
    alerts = [a for a in alerts or () if isinstance(a, dict)]
    if not alerts and not alerts_on:
        return {}
    warn = contract.ALERT_LEVEL_CODES["WARN"]
    level = max((contract.ALERT_LEVEL_CODES.get(str(a.get("level")), warn) for a in alerts), default=0)
    return dict(zip(contract.ALERT_FIELDS, (len(alerts), level)))
