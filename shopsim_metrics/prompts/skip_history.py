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
  evidence, :mod:`shopsim_metrics.prompts.predictive_rule`); None when it was never scored.

Keys are prompt keys as the ledger writes them (``shopsim_metrics.prompts.keys.prompt_key``).
In a training process the data source reads the monitor's own prompt history through
:class:`MonitorSkipHistory` (fed by the filter's judgements as each step closes, restored from the
records on resume). :class:`InMemorySkipHistory` is fed verdicts directly (``observe``,
``close_step``) and keeps, like the monitor's history, a run that a spread or technical visit resets
and a change of zero-std verdict restarts at 1.

Example:
    >>> h = InMemorySkipHistory()
    >>> h.observe("a", "zero_std_all_fail"); h.observe("a", "zero_std_all_fail"); h.observe("b", "spread")
    >>> h.zero_std_run("a"), h.zero_std_run("b"), h.zero_std_run("never seen")
    ((2, 'zero_std_all_fail'), (0, None), (0, None))
    >>> h.close_step(0)
    StepShares(step=0, easy_share=0.0, hard_share=0.6666666666666666, judged=3)
"""

from __future__ import annotations

from collections import Counter, OrderedDict
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any, Mapping, Protocol

from shopsim_metrics.prompts.history import DEFAULT_FORGETTING, PromptHistory
from shopsim_metrics.prompts.keys import history_key
from shopsim_metrics.judging.verdicts import VERDICTS
from shopsim_metrics.prompts.skip_rule import EASY, HARD, OTHER, ZERO_STD_KINDS

if TYPE_CHECKING:
    from shopsim_metrics.prompts.value import PromptValueTracker

"""A visit's verdict, as in the monitor's prompt history."""
DEFAULT_LIMIT = 1_000_000
STATE_FORMAT = 1


@dataclass(frozen=True)
class StepShares:
    """What one closed step showed, for the rule's once-per-step adaptation."""

    step: int  # the step's rollout_id: a step is adapted to once, however many waves read it
    easy_share: float | None  # all-pass groups / judged groups (None: no group was judged)
    hard_share: float | None  # all-fail and other zero-std groups / judged groups
    judged: int  # groups judged in the step


def step_shares(step: int, verdicts: Mapping[str, int]) -> StepShares:
    """The shares of one step from its verdict counts (all-pass; all-fail with other), over every judged group.

    Example:
        >>> step_shares(4, {"zero_std_all_pass": 1, "zero_std_all_fail": 1, "spread": 2})
        StepShares(step=4, easy_share=0.25, hard_share=0.25, judged=4)
    """
    judged = sum(verdicts.values())
    if not judged:
        return StepShares(step=step, easy_share=None, hard_share=None, judged=0)
    hard = verdicts.get(HARD, 0) + verdicts.get(OTHER, 0)
    return StepShares(step=step, easy_share=verdicts.get(EASY, 0) / judged, hard_share=hard / judged, judged=judged)


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

    def state_dict(self) -> dict[str, Any]:
        """JSON-able state, saved with the data source (``{}`` for a history restored elsewhere)."""
        ...

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore what :meth:`state_dict` returned."""
        ...


class InMemorySkipHistory:
    """A bounded in-memory :class:`SkipHistory`, fed verdicts one visit at a time.

    Only prompts whose last visit was zero-std are held (the others have a run of 0), at most
    ``limit`` of them, the least recently seen evicted first.
    """

    def __init__(self, limit: int = DEFAULT_LIMIT, *, forgetting: float = DEFAULT_FORGETTING) -> None:
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise ValueError(f"InMemorySkipHistory limit: expected an integer >= 1; got {limit!r}")
        self.limit = limit
        self.forgetting = forgetting
        self._evidence = PromptHistory(limit, forgetting=forgetting)  # success counts, for the predictive rule
        self._runs: OrderedDict[str, tuple[int, str]] = OrderedDict()
        self._open: Counter[str] = Counter()  # verdicts of the step not yet closed
        self._closed: StepShares | None = None

    def __len__(self) -> int:
        return len(self._runs)

    def observe(self, key: str, verdict: str, *, successes: int | None = None, scored: int | None = None) -> None:
        """Record one visit (one judged group) of a prompt in the open step (``successes`` of ``scored`` rollouts)."""
        if verdict not in VERDICTS:
            raise ValueError(f"verdict: expected one of {', '.join(VERDICTS)}; got {verdict!r}")
        self._open[verdict] += 1
        self._evidence.visit(key, verdict, successes=successes, scored=scored, step=self._serving_step())
        if verdict not in ZERO_STD_KINDS:
            self._runs.pop(key, None)
            return
        run, kind = self._runs.pop(key, (0, None))
        self._runs[key] = (run + 1 if kind == verdict else 1, verdict)
        if len(self._runs) > self.limit:
            self._runs.popitem(last=False)

    def close_step(self, step: int) -> StepShares:
        """End the open step (``step``: its rollout_id): its shares become :meth:`last_closed_step`."""
        self._closed = step_shares(step, self._open)
        self._open.clear()
        return self._closed

    def zero_std_run(self, key: str) -> tuple[int, str | None]:
        """See :meth:`SkipHistory.zero_std_run`; does not count as a visit."""
        return self._runs.get(key, (0, None))

    def last_closed_step(self) -> StepShares | None:
        return self._closed

    def success_evidence(self, key: str) -> tuple[float, float] | None:
        """See :meth:`SkipHistory.success_evidence` (the step served: the one after the last closed)."""
        return self._evidence.evidence(key, self._serving_step())

    def _serving_step(self) -> int:
        return 0 if self._closed is None else self._closed.step + 1

    def state_dict(self) -> dict[str, Any]:
        """The held runs (least recently seen first), the open step's verdict counts, the last closed step, the evidence."""
        return {
            "format": STATE_FORMAT,
            "runs": [[key, run, kind] for key, (run, kind) in self._runs.items()],
            "open": dict(self._open),
            "closed": asdict(self._closed) if self._closed is not None else None,
            "evidence": [[key, *evidence] for key, evidence in self._evidence.evidence_items()],
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        missing = [k for k in ("format", "runs", "open", "closed") if k not in state]
        if missing:
            raise ValueError(f"skip history state: missing {', '.join(missing)}; expected the dict that "
                             f"InMemorySkipHistory.state_dict() returns; got keys {sorted(state)}")
        if state["format"] != STATE_FORMAT:
            raise ValueError(f"skip history state: format: expected {STATE_FORMAT}; got {state['format']!r}")
        runs: OrderedDict[str, tuple[int, str]] = OrderedDict()
        for key, run, kind in state["runs"]:
            runs[key] = (int(run), kind)
        while len(runs) > self.limit:
            runs.popitem(last=False)
        self._runs = runs
        self._open = Counter(state["open"])
        self._closed = StepShares(**state["closed"]) if state["closed"] is not None else None
        self._evidence = PromptHistory(self.limit, forgetting=self.forgetting)
        for key, successes, failures, seen_step in state.get("evidence", []):
            self._evidence.restore_evidence(key, float(successes), float(failures), int(seen_step))


class MonitorSkipHistory:
    """The monitor's prompt history (:class:`~shopsim_metrics.prompts.value.PromptValueTracker`) as a :class:`SkipHistory`.

    ``zero_std_run`` is the tracked prompt's ``zero_std_run`` and last verdict; the shares are those of
    the latest step the tracker observed (its closed record's verdict counts). It holds no state of its
    own: the monitor restores its history from the records on resume, so :meth:`state_dict` is ``{}``.

    Example:
        >>> from shopsim_metrics.prompts.value import PromptValueTracker
        >>> from shopsim_metrics.step.records import DecisionRow, StepRecord
        >>> tracker = PromptValueTracker()
        >>> rows = [DecisionRow(order=i, waves_open=1, group_index=i, outcome="dropped_zero_std",
        ...                     reason="shopsim_zero_std_group", remaining_before=4, unique_rollouts=2,
        ...                     success_count=0, scorable_rollouts=2, prompt_key="b2:00000000000000a") for i in (1, 2)]
        >>> _ = tracker.observe(StepRecord(rollout_id=3, decisions=rows))
        >>> h = MonitorSkipHistory(tracker)
        >>> h.zero_std_run("b2:00000000000000a"), h.zero_std_run("never seen")
        ((2, 'zero_std_all_fail'), (0, None))
        >>> h.last_closed_step()
        StepShares(step=3, easy_share=0.0, hard_share=1.0, judged=2)
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
        return None if last is None else step_shares(*last)

    def success_evidence(self, key: str) -> tuple[float, float] | None:
        """See :meth:`SkipHistory.success_evidence` (the step served: the one after the tracker's last)."""
        last = self.tracker.last_step
        return self.tracker.history.evidence(history_key(key), 0 if last is None else last[0] + 1)

    def state_dict(self) -> dict[str, Any]:
        return {}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Nothing to restore: the monitor restores its history from the records (``shopsim_metrics.resume``)."""
