"""How many groups a wave needs so that the step's train batch fills with a given probability.

slime asks the data source for a wave whenever ``remaining_batch_size < rollout_batch_size`` between
batches, and adds however many groups it returns. A fixed wave of ``over_sampling_batch_size`` groups
is too small when many groups are dropped (a second wave follows) and too large when few are (the
surplus is generated and aborted). :func:`adaptive_wave_size` sizes each wave from what the step still
needs and what recent steps showed:

- ``need = rollout_batch_size - kept``: groups the train batch still lacks (``kept``: the step's judged
  groups that were not dropped);
- ``in_flight = remaining - kept``: groups served and still generating; each of them, and each new
  one, is kept with the probability that a judged group had spread, ``q`` (technical and zero-std
  groups are the ones dropped; counting zero-std fallback as lost makes the estimate err toward
  larger waves);
- ``q`` is uncertain: a Beta(1 + spread, 1 + judged - spread) over the groups judged in the recent
  steps, so the number kept out of ``N`` groups is beta-binomial;
- the wave is the smallest ``w`` with ``P(kept out of in_flight + w >= need) >= fill_probability``,
  never fewer than slime needs to leave its inner loop (``rollout_batch_size - remaining``, at least 1)
  and never more than ``cap`` (unless that minimum is larger).

Example:
    >>> adaptive_wave_size(target=16, remaining=0, kept=0, spread=180, judged=200, fill_probability=0.95, cap=64)
    21
    >>> adaptive_wave_size(target=16, remaining=0, kept=0, spread=60, judged=200, fill_probability=0.95, cap=64)
    64
    >>> adaptive_wave_size(target=16, remaining=14, kept=12, spread=180, judged=200, fill_probability=0.95, cap=64)
    4
"""

from __future__ import annotations

import math
from collections import deque

from shopsim_metrics.judging.group_judgement import SPREAD
from shopsim_metrics.step import contract as C
from shopsim_metrics.step.records import StepRecord


def kept_at_least(groups: int, need: int, spread: int, judged: int) -> float:
    """P(at least ``need`` of ``groups`` groups are kept), the keep rate Beta(1 + spread, 1 + judged - spread).

    Example:
        >>> round(kept_at_least(10, 5, 50, 100), 3), kept_at_least(3, 0, 0, 0), kept_at_least(3, 4, 9, 9)
        (0.617, 1.0, 0.0)
    """
    if need <= 0:
        return 1.0
    if need > groups:
        return 0.0
    a, b = 1.0 + spread, 1.0 + max(judged - spread, 0)
    log_beta = _log_beta(a, b)
    total = 0.0
    for kept in range(need, groups + 1):
        total += math.exp(_log_choose(groups, kept) + _log_beta(kept + a, groups - kept + b) - log_beta)
    return min(total, 1.0)


def adaptive_wave_size(
    *, target: int, remaining: int, kept: int, spread: int, judged: int, fill_probability: float, cap: int
) -> int:
    """The wave's groups (see the module docstring); ``spread`` / ``judged``: the recent steps' groups."""
    minimum = max(target - remaining, 1)
    in_flight = max(remaining - kept, 0)
    need = target - kept
    for size in range(minimum, max(cap, minimum) + 1):
        if kept_at_least(in_flight + size, need, spread, judged) >= fill_probability:
            return size
    return max(cap, minimum)


def _log_choose(n: int, k: int) -> float:
    return math.lgamma(n + 1) - math.lgamma(k + 1) - math.lgamma(n - k + 1)


def _log_beta(a: float, b: float) -> float:
    return math.lgamma(a) + math.lgamma(b) - math.lgamma(a + b)


RATE_WINDOW = 8
"""Closed steps whose judged groups make the recent informative rate that adaptive waves are sized from."""


class RecentRates:
    """The judged groups, and those with spread, of the last :data:`RATE_WINDOW` closed steps.

    Fed by the accountant as each step closes, or from a step's record on a resume (its ledger rows
    are its judged groups; a row's reason says whether it had spread), so a resumed run sizes its
    first wave as the unbroken run would.

    Example:
        >>> rates = RecentRates(window=2)
        >>> for spread, judged in ((3, 4), (1, 4), (2, 2)): rates.observe(spread, judged)
        >>> rates.spread, rates.judged
        (3, 6)
        >>> other = RecentRates(window=2); other.load_state_dict(rates.state_dict()); other.state_dict()
        {'steps': [[1, 4], [2, 2]]}
    """

    def __init__(self, window: int = RATE_WINDOW) -> None:
        self._steps: deque[tuple[int, int]] = deque(maxlen=window)

    def observe(self, spread: int, judged: int) -> None:
        """One closed step: ``spread`` of its ``judged`` groups had spread."""
        self._steps.append((spread, judged))

    def observe_record(self, record: StepRecord) -> None:
        """One closed step, from its record (a resume replaying the records)."""
        rows = record.decisions or []
        spread = sum(1 for row in rows if C.KIND_OF_REASON.get(row.reason, SPREAD) == SPREAD)
        self.observe(spread, len(rows))

    @property
    def spread(self) -> int:
        return sum(spread for spread, _ in self._steps)

    @property
    def judged(self) -> int:
        return sum(judged for _, judged in self._steps)

    def state_dict(self) -> dict[str, list[list[int]]]:
        return {"steps": [[spread, judged] for spread, judged in self._steps]}

    def load_state_dict(self, state: dict) -> None:
        steps = state["steps"]
        if not isinstance(steps, list) or not all(
                isinstance(s, list) and len(s) == 2 and all(isinstance(v, int) for v in s) for s in steps):
            raise ValueError("saved recent rates must be a list of [spread, judged] pairs")
        self._steps = deque((tuple(s) for s in steps), maxlen=self._steps.maxlen)  # type: ignore[misc]
