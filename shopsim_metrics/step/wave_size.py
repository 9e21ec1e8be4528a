"""How many groups a wave needs so that slime fills the step's train batch without asking for another.

slime asks the data source for a wave whenever ``remaining_batch_size < rollout_batch_size`` between
batches, and adds however many groups it returns. A fixed wave of ``over_sampling_batch_size`` groups
is too small when many groups are dropped (a second wave follows) and too large when few are (the
surplus is generated and aborted). :func:`adaptive_wave_size` sizes each wave by slime's own loop
(design document §3) played forward from where the step stands:

- ``need = rollout_batch_size - kept`` groups the train batch still lacks (``kept``: the step's judged
  groups not dropped), and ``margin = remaining + wave - rollout_batch_size`` drops it can still take
  before ``remaining`` falls below ``rollout_batch_size``;
- the groups generating (those in flight and the wave's) finish one by one; each has spread (kept), is
  zero-std (dropped while margin is left, else let in as ``fallback``: ``keep_when_insufficient``) or
  is a technical failure (always dropped; with no margin left slime asks for another wave), at the
  rates of the recent steps' judged groups (:class:`RecentRates`), taken as independent of the
  finishing order (where short rollouts are more often zero-std, the margin goes sooner than that and
  another wave comes more often than the model says: docs §3.7);
- the wave is the smallest with ``P(no other wave) >= fill_probability``
  (:func:`second_wave_probability`), never fewer groups than slime needs to leave its inner loop
  (``rollout_batch_size - remaining``, at least 1) and never more than ``cap`` (unless that minimum is
  larger).

Example (90% or 30% of the groups with spread, 2% technical):
    >>> adaptive_wave_size(target=16, remaining=0, kept=0, rates=(0.9, 0.02), fill_probability=0.95, cap=64)
    19
    >>> adaptive_wave_size(target=16, remaining=0, kept=0, rates=(0.3, 0.02), fill_probability=0.95, cap=64)
    51
    >>> adaptive_wave_size(target=16, remaining=14, kept=12, rates=(0.9, 0.02), fill_probability=0.95, cap=64)
    3
"""

from __future__ import annotations

from collections import deque
from typing import Sequence

from shopsim_metrics.judging.group_judgement import SPREAD, TECHNICAL
from shopsim_metrics.step import contract as C
from shopsim_metrics.step.records import StepRecord


def second_wave_probability(margin: int, need: int, spread_rate: float, technical_rate: float) -> float:
    """P(slime asks for another wave before ``need`` more groups are kept, with ``margin`` drops to spare).

    ``need + margin`` groups are generating; each, as it finishes, has spread with probability
    ``spread_rate`` (kept), is a technical failure with ``technical_rate`` (dropped) and is otherwise
    zero-std (dropped while margin is left, else kept as fallback). With no margin left a technical
    failure means another wave. The kinds are taken as independent of the finishing order.

    Example:
        >>> round(second_wave_probability(0, 16, 0.5, 0.02), 3), round(second_wave_probability(8, 16, 0.5, 0.02), 3)
        (0.276, 0.148)
        >>> second_wave_probability(8, 16, 0.5, 0.0), second_wave_probability(8, 0, 0.5, 0.02)
        (0.0, 0.0)
    """
    # by margin, from 0 up: row[r] = P(another wave | r groups still needed)
    row = [1.0 - (1.0 - technical_rate) ** r for r in range(need + 1)]
    for _ in range(margin):
        shorter = [0.0]
        for r in range(1, need + 1):
            shorter.append(spread_rate * shorter[r - 1] + (1.0 - spread_rate) * row[r])
        row = shorter
    return row[need]


def adaptive_wave_size(*, target: int, remaining: int, kept: int, rates: tuple[float, float], fill_probability: float,
                       cap: int) -> int:
    """The wave's groups (see the module docstring); ``rates``: the recent ``(spread, technical)`` rates
    (:meth:`RecentRates.rates`)."""
    minimum = max(target - remaining, 1)
    spread_rate, technical_rate = rates
    for size in range(minimum, max(cap, minimum) + 1):
        if second_wave_probability(remaining + size - target, target - kept, spread_rate,
                                   technical_rate) <= 1.0 - fill_probability:
            return size
    return max(cap, minimum)


RATE_WINDOW = 8
"""Closed steps whose judged groups make the recent rates that adaptive waves are sized from."""


class RecentRates:
    """The judged groups, those with spread and the technical ones, of the last :data:`RATE_WINDOW` closed steps.

    Fed by the accountant as each step closes, or from a step's record on a resume (its ledger rows
    are its judged groups; a row's reason says its kind), so a resumed run sizes its first wave as the
    unbroken run would. A snapshot saved before technical groups were counted (``[spread, judged]``
    pairs) loads with none.

    Example:
        >>> from shopsim_metrics.judging.group_judgement import ZERO_STD
        >>> rates = RecentRates(window=2)
        >>> rates.observe([SPREAD, SPREAD, SPREAD, ZERO_STD])
        >>> rates.observe([SPREAD, TECHNICAL, ZERO_STD, ZERO_STD])
        >>> rates.observe([SPREAD, SPREAD])
        >>> rates.state_dict()
        {'steps': [[1, 1, 4], [2, 0, 2]]}
        >>> rates.rates()  # (3 + 1) / (6 + 3), (1 + 1) / (6 + 3)
        (0.4444444444444444, 0.2222222222222222)
        >>> other = RecentRates(window=2); other.load_state_dict({"steps": [[3, 4]]}); other.state_dict()
        {'steps': [[3, 0, 4]]}
    """

    def __init__(self, window: int = RATE_WINDOW) -> None:
        self._steps: deque[tuple[int, int, int]] = deque(maxlen=window)

    def observe(self, kinds: Sequence[str]) -> None:
        """One closed step: the kinds of its judged groups (``SPREAD``, ``ZERO_STD``, ``TECHNICAL``)."""
        self._steps.append((kinds.count(SPREAD), kinds.count(TECHNICAL), len(kinds)))

    def observe_record(self, record: StepRecord) -> None:
        """One closed step, from its record (a resume replaying the records)."""
        self.observe([C.KIND_OF_REASON.get(row.reason, SPREAD) for row in record.decisions or []])

    def rates(self) -> tuple[float, float] | None:
        """``(spread, technical)`` rates: each kind's share of the judged groups with one group of each kind
        added (no kind is ever certain or impossible); None before any judged group."""
        spread, technical, judged = (sum(step[k] for step in self._steps) for k in range(3))
        return None if not judged else ((spread + 1) / (judged + 3), (technical + 1) / (judged + 3))

    def state_dict(self) -> dict[str, list[list[int]]]:
        return {"steps": [list(step) for step in self._steps]}

    def load_state_dict(self, state: dict) -> None:
        steps = state["steps"]
        if not isinstance(steps, list) or not all(
                isinstance(s, list) and len(s) in (2, 3) and all(isinstance(v, int) and v >= 0 for v in s)
                for s in steps):
            raise ValueError("saved recent rates must be a list of [spread, technical, judged] triples")
        self._steps = deque(((s[0], 0, s[1]) if len(s) == 2 else (s[0], s[1], s[2]) for s in steps),
                            maxlen=self._steps.maxlen)
