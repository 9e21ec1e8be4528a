"""What the skip rule needs to know of past visits, behind one small interface.

The data source that skips prompts (``shopsimrl.data_source.PromptSkipDataSource``) asks a
:class:`SkipHistory` two things:

- ``zero_std_run(key) -> (run, kind)``: the prompt's consecutive visits with the same zero-std
  verdict up to its last visit, and that verdict (``zero_std_all_pass``, ``zero_std_all_fail``,
  ``zero_std_other``); ``(0, None)`` when its last visit spread or was technical, or it was never seen;
- ``last_closed_step()``: the observed all-pass and all-fail (with other) zero-std shares of the
  latest closed step, which the rule adapts its ``p`` values to once;
- ``success_evidence(key) -> (successes, failures) | None``: the prompt's scored rollouts, weighed
  by the forgetting per step since each visit, as of the step being served (the predictive rule's
  evidence, :mod:`shopsim_metrics.prompts.predictive_rule`); None when it was never scored;
- ``visits(key) -> (visits, verdicts)``: how often it was judged and its last verdicts (the guard reads
  a probe's verdict there, :mod:`shopsim_metrics.prompts.lost_signal_guard`).

Keys are prompt keys as the ledger writes them (``shopsim_metrics.judging.prompt_keys.prompt_key``).
There is one implementation of that evidence: the monitor's prompt history
(:class:`~shopsim_metrics.prompts.history.PromptHistory`, kept by its
:class:`~shopsim_metrics.prompts.value.PromptValueTracker`), which the data source reads through
:class:`MonitorSkipHistory` (fed by the filter's judgements as each step closes, restored from the
records or a snapshot on resume). A data source with no monitor history reads an empty one, and a
test feeds a tracker of its own.

Example:
    >>> step_shares(0, {"zero_std_all_fail": 2, "spread": 1}, trained_informative=1)
    StepShares(step=0, easy_share=0.0, hard_share=0.6666666666666666, judged=3, informative=1, trained_informative=1)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Mapping, Protocol

from shopsim_metrics.judging.group_judgement import SPREAD
from shopsim_metrics.judging.prompt_keys import history_key
from shopsim_metrics.prompts.skip_rule import EASY, HARD, OTHER

if TYPE_CHECKING:
    from shopsim_metrics.prompts.value import PromptValueTracker


@dataclass(frozen=True)
class StepShares:
    """What one closed step showed, for the rule's once-per-step adaptation."""

    step: int  # the step's rollout_id: a step is adapted to once, however many waves read it
    easy_share: float | None  # all-pass groups / judged groups (None: no group was judged)
    hard_share: float | None  # all-fail and other zero-std groups / judged groups
    judged: int  # groups judged in the step
    informative: int = 0  # groups judged in the step with spread
    trained_informative: int | None = None
    """Groups trained in the step with spread (None: not known; the guard then counts the judged ``informative``):
    the lost signal is per informative *trained* group, and a step with surplus judges more than it trains."""


def step_shares(step: int, verdicts: Mapping[str, int], trained_informative: int | None = None) -> StepShares:
    """The shares of one step from its verdict counts (all-pass; all-fail with other), over every judged group;
    ``trained_informative``: its groups trained with spread, when known.

    Example:
        >>> step_shares(4, {"zero_std_all_pass": 1, "zero_std_all_fail": 1, "spread": 2})
        StepShares(step=4, easy_share=0.25, hard_share=0.25, judged=4, informative=2, trained_informative=None)
    """
    judged = sum(verdicts.values())
    if not judged:
        return StepShares(step=step, easy_share=None, hard_share=None, judged=0, trained_informative=trained_informative)
    hard = verdicts.get(HARD, 0) + verdicts.get(OTHER, 0)
    return StepShares(step=step, easy_share=verdicts.get(EASY, 0) / judged, hard_share=hard / judged, judged=judged,
                      informative=verdicts.get(SPREAD, 0), trained_informative=trained_informative)


class SkipHistory(Protocol):
    """What :class:`~shopsimrl.data_source.PromptSkipDataSource` reads; the monitor's history may implement it."""

    def zero_std_run(self, key: str) -> tuple[int, str | None]:
        """(consecutive visits with the same zero-std verdict up to the last one, that verdict); (0, None) else."""
        ...

    def last_closed_step(self) -> StepShares | None:
        """The shares of the latest closed step (None before the first one closes)."""
        ...

    def success_evidence(self, key: str) -> tuple[float, float] | None:
        """(successes, failures) of the prompt's scored rollouts, forgetting applied, as of the step being served."""
        ...

    def relative_cost(self, key: str) -> float | None:
        """The prompt's tokens per visit over the tracked prompts' mean (None: no tokens known for it)."""
        ...

    def visits(self, key: str) -> tuple[int, tuple[str, ...]]:
        """The prompt's visits and its last verdicts, oldest first (``(0, ())``: never seen)."""
        ...

    def state_dict(self) -> dict[str, Any]:
        """JSON-able state, saved with the data source (``{}`` for a history restored elsewhere)."""
        ...

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore what :meth:`state_dict` returned."""
        ...


class MonitorSkipHistory:
    """The monitor's prompt history (:class:`~shopsim_metrics.prompts.value.PromptValueTracker`) as a :class:`SkipHistory`.

    ``zero_std_run`` is the tracked prompt's ``zero_std_run`` and last verdict; the shares are those of
    the latest step the tracker observed (its closed record's verdict counts). It holds no state of its
    own: the monitor restores its history from the records on resume, so :meth:`state_dict` is ``{}``.

    Example:
        >>> from shopsim_metrics.prompts.value import PromptValueTracker
        >>> from shopsim_metrics.record.records import DecisionRow, StepRecord
        >>> tracker = PromptValueTracker()
        >>> rows = [DecisionRow(order=i, waves_open=1, group_index=i, outcome="dropped_zero_std",
        ...                     reason="shopsim_zero_std_group", remaining_before=4, unique_rollouts=2,
        ...                     success_count=0, scorable_rollouts=2, prompt_key="b2:00000000000000a") for i in (1, 2)]
        >>> _ = tracker.observe(StepRecord(rollout_id=3, decisions=rows))
        >>> h = MonitorSkipHistory(tracker)
        >>> h.zero_std_run("b2:00000000000000a"), h.zero_std_run("never seen")
        ((2, 'zero_std_all_fail'), (0, None))
        >>> h.last_closed_step()
        StepShares(step=3, easy_share=0.0, hard_share=1.0, judged=2, informative=0, trained_informative=0)
    """

    def __init__(self, tracker: "PromptValueTracker") -> None:
        self.tracker = tracker

    def zero_std_run(self, key: str) -> tuple[int, str | None]:
        """See :meth:`SkipHistory.zero_std_run`; does not count as a visit."""
        stats = self.tracker.history.stats(history_key(key))
        if stats is None or not stats.zero_std_run:
            return 0, None
        return stats.zero_std_run, stats.last_verdict

    def last_closed_step(self) -> StepShares | None:
        last = self.tracker.last_step
        return None if last is None else step_shares(*last, self.tracker.last_step_trained_informative)

    def success_evidence(self, key: str) -> tuple[float, float] | None:
        """See :meth:`SkipHistory.success_evidence` (the step served: the one after the tracker's last)."""
        last = self.tracker.last_step
        return self.tracker.history.evidence(history_key(key), 0 if last is None else last[0] + 1)

    def visits(self, key: str) -> tuple[int, tuple[str, ...]]:
        """The prompt's visits and its last verdicts, oldest first ((0, ()) when never seen)."""
        stats = self.tracker.history.stats(history_key(key))
        return (0, ()) if stats is None else (stats.visits, stats.verdicts)

    def relative_cost(self, key: str) -> float | None:
        """See :meth:`SkipHistory.relative_cost`."""
        return self.tracker.history.relative_cost(history_key(key))

    def state_dict(self) -> dict[str, Any]:
        return {}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Nothing to restore: the monitor restores its history from the records (``shopsim_metrics.run.resume``)."""
