"""The one owner of a rollout step's number, whoever asks: the filter, the sample hook, the wave planner, the
accountant and slime's log function.

A step is numbered by the best fact at hand, in this order:

1. slime's live rollout id, read from the loop state (``slime.rollout.sample_hooks._current_rollout_id``);
2. else the ``rollout_id`` slime last handed the sample hook (:meth:`StepNumbers.heard`);
3. else counted on by the accountant (:meth:`StepNumbers.open`): ``start_rollout_id`` for a process's first
   step, then one past the last step numbered. slime's log function then says which step finished
   (:meth:`StepNumbers.renumber`): when the count is behind it, the counted step takes slime's number and
   counting goes on from it (a log function lagging behind the rollout changes nothing).

Example:
    >>> from shopsim_metrics.loop.loop_state import ManualLoopState
    >>> loop = ManualLoopState(); steps = StepNumbers(loop, first=3)
    >>> steps.of_judgement(), steps.open(None)   # nothing known: counted from start_rollout_id
    (None, (3, True))
    >>> steps.renumber(7), steps.current(), steps.open(None)
    (True, 7, (8, True))
    >>> loop.step = 12; steps.of_judgement(), steps.open(steps.of_judgement())   # slime's live id
    (12, (12, False))
"""

from __future__ import annotations

import logging
from typing import Any

from shopsim_metrics.loop.loop_state import LoopState, NoLoopState
from shopsim_metrics.general.warn_once import WarnOnce
from shopsim_metrics.general.plain_values import is_int

logger = logging.getLogger("shopsim_metrics")


class StepNumbers:
    """The step numbers of one process (see the module docstring). The accountant calls :meth:`open` and
    :meth:`renumber` under its lock; the other calls read or set one value each."""

    def __init__(self, loop_state: LoopState | None = None, *, first: int = 0) -> None:
        self.loop_state: LoopState = loop_state or NoLoopState()
        self.first = first
        """The step a process numbers first when nothing says: slime's ``start_rollout_id``."""
        self._heard: int | None = None  # the rollout_id slime last handed the sample hook
        self._last: int | None = None  # the last step opened (or renumbered)
        self._warn_once = WarnOnce(logger)

    def live(self) -> int | None:
        """slime's live rollout id, as the loop state reads it (None: unknown)."""
        try:
            step: Any = self.loop_state.rollout_step()
        except Exception:  # noqa: BLE001 - unknown
            return None
        return step if is_int(step) else None

    def heard(self, rollout_id: Any) -> int | None:
        """The step of a sample the sample hook received with ``rollout_id``: that id (remembered for the
        judgements to come), else the live one (None: the next step taken gets it)."""
        if is_int(rollout_id):
            self._heard = rollout_id
            return rollout_id
        return self.live()

    def of_judgement(self) -> int | None:
        """The step of a judgement: the live id, else the one the sample hook last received, else None (counted).

        Inside a running slime rollout whose live id cannot be read, that is one warning.
        """
        step = self.live()
        if step is not None:
            return step
        expected = getattr(self.loop_state, "live_id_expected", None)
        if callable(expected) and expected():
            self._warn_once("live_rollout_id", "shopsim-metrics: slime's live rollout id (slime.rollout.sample_hooks."
                            "_current_rollout_id) cannot be read in this slime version; each step is numbered by the "
                            "rollout_id slime's sample hook or log function receives, else counted on from "
                            "start_rollout_id (%d).", self.first)
        return self._heard

    def open(self, step: int | None) -> tuple[int, bool]:
        """The number of a step opening with ``step`` known (or None), and whether it was counted."""
        counted = step is None
        if step is None:
            step = self.first if self._last is None else self._last + 1
        self._last = step
        return step, counted

    def renumber(self, rollout_id: int) -> bool:
        """slime's log function says ``rollout_id`` finished: whether the count was behind it (then it is the
        count now, and the latest counted step takes it)."""
        if self._last is not None and rollout_id <= self._last:
            return False
        self._last = rollout_id
        return True

    def current(self) -> int | None:
        """The step judged last (opened or renumbered), else the live one: the step an alert names."""
        return self._last if self._last is not None else self.live()
