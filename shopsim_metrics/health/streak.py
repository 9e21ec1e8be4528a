"""The technical streak: consecutive technical groups in judgement order, across steps.

One :class:`TechnicalStreak` per run is fed by every judgement the filter makes (whether or not
the step accounting is on); the step records, the alerts and the termination at
``shopsim_max_consecutive_failed_groups`` all read it. Any scorable group ends the streak. Beside the
checks that failed, it counts the causes the generate functions left (``judging.failure_cause``) and who failed
each group (``GroupJudgement.failure_kind``: ``environment``, ``model``, ``unmarked``), so an alert can say what
broke and whose failures dominated. A group the model failed counts like any technical group: unscorable, it
cannot train, and a run whose every group is unscorable must still end (docs §3.9.3).

Example:
    >>> streak = TechnicalStreak()
    >>> [streak.observe(check) for check in ("status_failed", None, "reward_missing", "status_failed")]
    [1, 0, 1, 2]
    >>> streak.checks
    {'reward_missing': 1, 'status_failed': 1}
    >>> _ = streak.observe("status_aborted", "ToolTimeout: search_products"); streak.causes
    {'ToolTimeout: search_products': 1}
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING

from shopsim_metrics.record import contract as C
from shopsim_metrics.record.saved_values import saved_count, saved_counts

if TYPE_CHECKING:
    from shopsim_metrics.record.records import StepRecord


class TechnicalStreak:
    """The running count of consecutive technical groups and the checks that failed in it."""

    def __init__(self, limit: int | None = None) -> None:
        self.limit = limit
        """``shopsim_max_consecutive_failed_groups``: the run ends when the streak reaches it, so no saved
        streak is longer (None: not known here)."""
        self.count = 0
        self._checks: Counter[str] = Counter()
        self._causes: Counter[str] = Counter()
        self._kinds: Counter[str] = Counter()

    def observe(self, failed_check: str | None, cause: str | None = None, kind: str | None = None) -> int:
        """Count one judgement (``failed_check`` None: not technical; ``cause``: what its generate function said
        broke; ``kind``: who failed it); returns the streak after it."""
        if failed_check is None:
            if self.count:
                self.count = 0
                self._checks.clear()
                self._causes.clear()
                self._kinds.clear()
        else:
            self.count += 1
            self._checks[failed_check] += 1
            if cause:
                self._causes[cause] += 1
            if kind:
                self._kinds[kind] += 1
        return self.count

    def replay(self, record: StepRecord) -> None:
        """Count a recorded step's judgements again, in judgement order (a resume replaying the records; a
        technical row without its failed check counts as ``unknown``).

        Example:
            >>> from shopsim_metrics.record.records import DecisionRow, StepRecord
            >>> row = DecisionRow(order=1, waves_open=1, group_index=0, outcome="dropped_technical", reason=None,
            ...                   remaining_before=8, unique_rollouts=8, failed_check=None)
            >>> streak = TechnicalStreak(); streak.replay(StepRecord(rollout_id=0, decisions=[row, row]))
            >>> streak.count, streak.checks
            (2, {'unknown': 2})
        """
        for row in sorted(record.decisions, key=lambda row: row.order):
            technical = row.outcome == C.OUTCOME_DROPPED_TECHNICAL
            self.observe((row.failed_check or "unknown") if technical else None, row.technical_cause,
                         row.failure_kind)

    def state_dict(self) -> dict[str, object]:
        """The streak, its checks and its causes (when its groups left any), as a snapshot saves them."""
        state: dict[str, object] = {"count": self.count, "checks": self.checks}
        if self._causes:
            state["causes"] = self.causes
        if self._kinds:
            state["kinds"] = self.kinds
        return state

    def load_state_dict(self, state: dict) -> None:
        """Put back :meth:`state_dict`'s state; ``ValueError`` for one no run could have saved (a count beyond
        :attr:`limit`, checks that do not add up to it).

        Example:
            >>> a = TechnicalStreak(); _ = a.observe("status_failed"); b = TechnicalStreak()
            >>> b.load_state_dict(a.state_dict()); b.count, b.checks
            (1, {'status_failed': 1})
        """
        count = saved_count(state["count"], "the technical streak", most=self.limit)
        checks = saved_counts(state["checks"], "the streak's failed checks")
        causes = saved_counts(state.get("causes", {}), "the streak's causes")  # older snapshots: no causes
        kinds = saved_counts(state.get("kinds", {}), "the streak's failure kinds")  # older snapshots: no kinds
        if sum(checks.values()) != count or sum(causes.values()) > count or sum(kinds.values()) > count:
            raise ValueError(f"the technical streak of {count} holds {sum(checks.values())} failed checks, "
                             f"{sum(causes.values())} causes and {sum(kinds.values())} failure kinds (one check per "
                             "group, a cause and a kind for some)")
        self.count = count
        self._checks = Counter(checks)
        self._causes = Counter(causes)
        self._kinds = Counter(kinds)

    @property
    def checks(self) -> dict[str, int]:
        """The failed checks of the current streak, by name (sorted)."""
        return dict(sorted(self._checks.items()))

    @property
    def kinds(self) -> dict[str, int]:
        """Who failed the current streak's groups (``environment``, ``model``, ``unmarked``), by name (sorted)."""
        return dict(sorted(self._kinds.items()))

    @property
    def causes(self) -> dict[str, int]:
        """The causes left by the current streak's groups, the most frequent first (ties by name)."""
        return dict(sorted(self._causes.items(), key=lambda item: (-item[1], item[0])))
