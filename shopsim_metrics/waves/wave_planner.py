"""The one owner of a step's waves: sizes each wave the data source serves, remembers it, hands it over at the close.

The data source (:class:`~shopsim_metrics.prompts.data_source.PromptSkipDataSource`, with
``shopsim_wave_size: adaptive``) asks :meth:`WavePlanner.plan` for each wave slime asks of it, and serves
what it answers: one call sizes the wave (:func:`~shopsim_metrics.waves.wave_size.adaptive_wave_size`, from
the step's judged groups so far and the recent steps' orders), and records its size and, for the step's
first wave, the predicted probability of another. When the step closes, the accountant takes the step's
waves (:meth:`WavePlanner.close`: their sizes make each row's ``waves_open`` and the record's
``wave_count``) and the planner keeps the step's judged groups in finishing order for the waves to come
(:class:`~shopsim_metrics.waves.wave_size.RecentOrders`, restored on a resume).

A step whose waves nobody planned (slime's own data source, fixed waves) has none recorded: its waves are
counted as slime opens them, ``ceil(submitted / over_sampling_batch_size)``.

Example:
    >>> from shopsim_metrics.loop.loop_state import ManualLoopState
    >>> loop = ManualLoopState(source="manual"); loop.step = 0
    >>> planner = WavePlanner(rollout_batch_size=4, over_sampling_batch_size=8, fill_probability=0.95,
    ...                       loop_state=loop)
    >>> planner.plan(8)  # nothing known of the recent steps yet: what slime asks
    8
    >>> planner.close(0, ["spread"] * 4 + ["zero_std"] * 4)
    StepWaves(sizes=[8], second_wave_probability=None)
    >>> loop.step = 1
    >>> planner.plan(8)  # half the recent groups had spread: 6 fill the batch of 4 with probability 0.95
    6
    >>> planner.close(1, ["spread"] * 6).sizes
    [6]
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from typing import Protocol, Sequence

from shopsim_metrics.loop.loop_state import LoopState
from shopsim_metrics.loop.step_number import StepNumbers
from shopsim_metrics.waves.wave_size import RECENT_WINDOW, RecentOrders, adaptive_wave_size
from shopsim_metrics.general.warn_once import WarnOnce

logger = logging.getLogger("shopsim_metrics")


@dataclass(frozen=True)
class OpenStepCounts:
    """The step being judged, as a wave is sized: its judged groups, those kept (train batch, then surplus) and
    those dropped."""

    judged: int = 0
    kept: int = 0
    dropped: int = 0


class JudgedSoFar(Protocol):
    """Who counts the step's judged groups (:meth:`~shopsim_metrics.step.accounting.StepAccountant.open_counts`)."""

    def open_counts(self, step: int | None) -> OpenStepCounts: ...


@dataclass(frozen=True)
class StepWaves:
    """A closed step's waves: the groups of each (None: not planned) and P(another wave) as the first was sized
    (None: not sized)."""

    sizes: list[int] | None
    second_wave_probability: float | None


class WavePlanner:
    """Sizes and records each wave of the live step (:meth:`plan`); hands a step's waves over at its close."""

    def __init__(self, *, rollout_batch_size: int, over_sampling_batch_size: int, fill_probability: float,
                 loop_state: LoopState, steps: StepNumbers | None = None, cap: int | None = None,
                 window: int = RECENT_WINDOW) -> None:
        self.rollout_batch_size = rollout_batch_size
        self.cap = cap or over_sampling_batch_size
        """Most groups per wave (``shopsim_wave_size_cap``, else ``over_sampling_batch_size``)."""
        self.fill_probability = fill_probability
        self.loop_state = loop_state
        self.steps = steps or StepNumbers(loop_state)
        """Whose live step a wave is planned for (the step numbers' one owner)."""
        self.judged_so_far: JudgedSoFar | None = None
        """The step's judged groups so far (the accountant, once it exists; None: nothing judged is known)."""
        self.recent_orders = RecentOrders(window)
        """The recent steps' judged groups in finishing order (restored on a resume)."""
        self.one_group_at_a_time = False
        """Set by the fully-async rollout: the data source is asked for one group at a time, there are no waves."""
        self._sizes: dict[int, list[int]] = {}  # rollout_id -> the groups of each wave served
        self._predictions: dict[int, float] = {}  # rollout_id -> P(another wave) as its first wave was sized
        self._lock = threading.Lock()
        self._warn_once = WarnOnce(logger)

    def plan(self, asked: int) -> int:
        """The groups of the live step's next wave, which slime asks ``asked`` of; recorded as served.

        Sized to fill the train batch (:func:`~shopsim_metrics.waves.wave_size.adaptive_wave_size`); while no step
        has closed (nothing is known of the recent steps) it is ``asked`` within the same bounds (at most the cap,
        at least what slime needs to leave its inner loop). ``remaining`` is slime's live value, else the served
        groups minus the step's drops. Should sizing fail, the wave is ``asked`` (monitoring never stops
        training). The data source serves exactly the groups it is told (it draws until it has them).
        """
        if self.one_group_at_a_time:
            return asked
        step = self.steps.live()
        try:
            groups, predicted = self._size(step, asked)
        except Exception as exc:  # noqa: BLE001 - monitoring never stops training
            self._warn_once("size_wave", "shopsim-metrics: sizing a wave failed (%s: %s); the data source serves "
                            "what slime asks (over_sampling_batch_size).", type(exc).__name__, exc)
            groups, predicted = asked, None
        if step is not None:
            with self._lock:
                sizes = self._sizes.setdefault(step, [])
                if not sizes and predicted is not None:
                    self._predictions[step] = predicted
                sizes.append(groups)
        return groups

    def _size(self, step: int | None, asked: int) -> tuple[int, float | None]:
        counts = self.judged_so_far.open_counts(step) if self.judged_so_far is not None else OpenStepCounts()
        with self._lock:
            served = sum(self._sizes.get(step, ())) if step is not None else 0
            recent = self.recent_orders.recent()
        try:
            remaining = self.loop_state.remaining_batch_size()
        except Exception:  # noqa: BLE001 - the served groups minus the drops say the same
            remaining = None
        if remaining is None:
            remaining = served - counts.dropped
        target = self.rollout_batch_size
        if recent is None:
            return max(min(asked, self.cap), target - remaining, 1), None
        wave = adaptive_wave_size(target=target, remaining=remaining, kept=counts.kept, judged=counts.judged,
                                  recent=recent, fill_probability=self.fill_probability, cap=self.cap)
        return wave.groups, wave.second_wave_probability if served == 0 and step is not None else None

    def close(self, step: int, kinds: Sequence[str]) -> StepWaves:
        """The closed step ``step``'s waves (forgetting those of any earlier step); its judged groups' kinds, in
        judgement order, join the recent orders the next waves are sized from."""
        with self._lock:
            waves = StepWaves(self._sizes.get(step), self._predictions.get(step))
            for planned in (self._sizes, self._predictions):
                for key in [key for key in planned if key <= step]:
                    del planned[key]
            self.recent_orders.observe(kinds)
        return waves
