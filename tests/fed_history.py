"""The monitor's prompt history, fed by hand: for tests of the skip rule and the skipping data source.

There is one implementation of the evidence a skip rule reads: the monitor's
:class:`~shopsim_metrics.prompts.history.PromptHistory`, inside its
:class:`~shopsim_metrics.prompts.value.PromptValueTracker`, read through
:class:`~shopsim_metrics.prompts.skip_evidence.MonitorSkipHistory`. :class:`FedHistory` is that, with the
filter's judgements played by hand: :meth:`FedHistory.observe` is one judged group's visit (recorded at
once, at the step being served, so a test sees it between waves), :meth:`FedHistory.close_step` ends the
step as the tracker does at a step's close (its verdict counts become the last closed step's shares).
"""

from __future__ import annotations

from collections import Counter
from typing import Any, Mapping

from shopsim_metrics.judging.verdicts import VERDICTS
from shopsim_metrics.prompts.history import DEFAULT_FORGETTING, DEFAULT_LIMIT
from shopsim_metrics.judging.prompt_keys import history_key
from shopsim_metrics.prompts.skip_evidence import MonitorSkipHistory, StepShares
from shopsim_metrics.prompts.value import PromptValueTracker


class FedHistory(MonitorSkipHistory):
    """A :class:`MonitorSkipHistory` over its own tracker, fed one visit at a time."""

    def __init__(self, limit: int = DEFAULT_LIMIT, *, forgetting: float = DEFAULT_FORGETTING) -> None:
        super().__init__(PromptValueTracker(limit=limit, forgetting=forgetting))
        self._open: Counter[str] = Counter()  # verdicts of the step not yet closed

    def observe(self, key: str, verdict: str, *, successes: int | None = None, scored: int | None = None,
                tokens: int | None = None) -> None:
        if verdict not in VERDICTS:
            raise ValueError(f"verdict: expected one of {', '.join(VERDICTS)}; got {verdict!r}")
        last = self.tracker.last_step
        self.tracker.history.visit(history_key(key), verdict, tokens, successes=successes, scored=scored,
                                   step=0 if last is None else last[0] + 1)
        self._open[verdict] += 1

    def close_step(self, step: int) -> StepShares:
        self.tracker.last_step, self._open = (step, self._open), Counter()
        shares = self.last_closed_step()
        assert shares is not None
        return shares

    def state_dict(self) -> dict[str, Any]:
        """The tracker's state (in a training process the monitor restores it, not the data source)."""
        return {"tracker": self.tracker.state_dict(), "open": dict(self._open)}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.tracker.load_state_dict(state["tracker"])
        self._open = Counter(state["open"])
