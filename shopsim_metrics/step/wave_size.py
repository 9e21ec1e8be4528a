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
  is a technical failure (always dropped; with no margin left slime asks for another wave);
- which kind finishes when is taken from each of the recent steps in turn (:class:`RecentSteps`): its
  judged groups with spread and zero-std in the order they finished, from the place the step has
  reached, and a technical failure before any group at the recent technical rate; past the end of a
  recent step's order, the kinds are drawn independently at the recent rates
  (:func:`second_wave_probability`). Replaying the orders keeps what finishes first: where short
  rollouts are more often zero-std, the margin goes early (docs §3.7);
- the wave is the smallest whose ``P(no other wave)``, averaged over the recent steps, is at least
  ``fill_probability``, never fewer groups than slime needs to leave its inner loop
  (``rollout_batch_size - remaining``, at least 1) and never more than ``cap`` (unless that minimum is
  larger).

Example (recent steps whose groups had spread 9 times in 10, or 3 times in 10 with the zero-std
groups finishing first; 2% technical):
    >>> fast = RecentSteps(orders=("sssszsssss" * 3,), spread_rate=0.9, technical_rate=0.02)
    >>> adaptive_wave_size(target=16, remaining=0, kept=0, judged=0, recent=fast, fill_probability=0.95, cap=64).groups
    19
    >>> slow = RecentSteps(orders=("zzzzzzzsss" * 5,), spread_rate=0.3, technical_rate=0.02)
    >>> wave = adaptive_wave_size(target=16, remaining=0, kept=0, judged=0, recent=slow, fill_probability=0.95, cap=64)
    >>> wave.groups, wave.second_wave_probability <= 0.05
    (53, True)
    >>> adaptive_wave_size(target=16, remaining=14, kept=12, judged=12, recent=fast, fill_probability=0.95,
    ...                    cap=64).groups
    3
"""

from __future__ import annotations

import bisect
import functools
from collections import deque
from dataclasses import dataclass
from typing import Callable, NamedTuple, Sequence

from shopsim_metrics.judging.group_judgement import SPREAD, TECHNICAL, ZERO_STD
from shopsim_metrics.step import contract as C
from shopsim_metrics.step.records import StepRecord

NEGLIGIBLE = 1e-12
"""A chance of further technical failures below which the replay counts them as another wave (its result is
then an upper bound, by at most this per group replayed)."""

LETTER_OF_KIND = {SPREAD: "s", ZERO_STD: "z", TECHNICAL: "t"}
"""One letter per judged group's kind in a recorded finishing order (the snapshot keeps orders as strings)."""


def _iid_table(margin: int, need: int, spread_rate: float, technical_rate: float) -> list[list[float]]:
    """``table[m][r]``: P(another wave) with ``m`` drops to spare and ``r`` groups still needed, the kinds drawn
    independently (:func:`second_wave_probability`), for every ``m <= margin`` and ``r <= need``."""
    row = [1.0 - (1.0 - technical_rate) ** r for r in range(need + 1)]  # no margin: any technical failure
    table = [row]
    for _ in range(margin):
        row = [0.0] * (need + 1)
        for r in range(1, need + 1):
            row[r] = spread_rate * row[r - 1] + (1.0 - spread_rate) * table[-1][r]
        table.append(row)
    return table


def second_wave_probability(margin: int, need: int, spread_rate: float, technical_rate: float) -> float:
    """P(slime asks for another wave before ``need`` more groups are kept, with ``margin`` drops to spare).

    ``need + margin`` groups are generating; each, as it finishes, has spread with probability
    ``spread_rate`` (kept), is a technical failure with ``technical_rate`` (dropped) and is otherwise
    zero-std (dropped while margin is left, else kept as fallback). With no margin left a technical
    failure means another wave. Here the kinds are independent of the finishing order.

    Example:
        >>> round(second_wave_probability(0, 16, 0.5, 0.02), 3), round(second_wave_probability(8, 16, 0.5, 0.02), 3)
        (0.276, 0.148)
        >>> second_wave_probability(8, 16, 0.5, 0.0), second_wave_probability(8, 0, 0.5, 0.02)
        (0.0, 0.0)
    """
    return _iid_table(margin, need, spread_rate, technical_rate)[margin][need]


def replayed_second_wave_probability(order: str, margin: int, need: int, spread_rate: float,
                                     technical_rate: float) -> float:
    """:func:`second_wave_probability` with the groups that finish first having spread or being zero-std as in
    ``order`` (letters of :data:`LETTER_OF_KIND`; its technical ones are left out), a technical failure
    coming before any of them with probability ``technical_rate``; past the order's end, as there.

    A zero-std group first spends the margin, then is let in: with no technical failure there is never
    another wave; an order whose zero-std groups come first makes one likelier than the same kinds
    spread evenly.

    Example:
        >>> late, early = "s" * 8 + "z" * 8, "z" * 8 + "s" * 8
        >>> round(replayed_second_wave_probability(late, 4, 12, 0.5, 0.02), 3)
        0.078
        >>> round(replayed_second_wave_probability(early, 4, 12, 0.5, 0.02), 3)
        0.215
        >>> replayed_second_wave_probability("", 8, 16, 0.5, 0.02) == second_wave_probability(8, 16, 0.5, 0.02)
        True
    """
    return _replayed(order, margin, need, technical_rate, lambda: _iid_table(margin, need, spread_rate,
                                                                              technical_rate))


def _replayed(order: str, margin: int, need: int, technical_rate: float,
              tail: Callable[[], list[list[float]]]) -> float:
    """:func:`replayed_second_wave_probability`, past the order's end from ``tail()`` (:func:`_iid_table`, built
    only when an order ends before the batch is full)."""
    if need <= 0:
        return 0.0
    t = technical_rate
    # live[n]: P(n technical failures so far and the batch not yet full), after the order's first groups, of
    # which `zero` zero-std and `spread` with spread. Zero-std groups are dropped while margin is left, so
    # the drops are min(margin, n + zero) (never more, or another wave would have come) and the groups kept
    # spread + max(0, n + zero - margin)
    live, zero, spread, another = [1.0], 0, 0, 0.0
    for letter in order.replace(LETTER_OF_KIND[TECHNICAL], ""):
        spare = margin - zero  # technical failures the margin still takes before this group finishes
        arrived, running = [], 0.0  # before this group, any number of technical failures, each with probability t
        for n in range(max(spare + 1, 0)):
            if n < len(live):
                running = running * t + live[n]
            elif running < NEGLIGIBLE:  # so many more failures: counted as another wave (an upper bound)
                another += running
                break
            else:
                running *= t
            arrived.append(running * (1.0 - t))
        else:
            another += running * t  # one failure more than the margin takes
        for n in range(max(spare + 1, 0), len(live)):  # no margin left: a technical failure is another wave
            arrived.append(live[n] * (1.0 - t))
            another += live[n] * t
        spread, zero = spread + (letter == "s"), zero + (letter != "s")
        live = arrived[:0 if spread >= need else need - spread + margin - zero]  # from there on the batch is full
        if not live:
            return another
    table = tail()
    for n, p in enumerate(live):
        drops = min(margin, n + zero)
        another += p * table[margin - drops][need - spread - (n + zero - drops)]
    return another


@dataclass(frozen=True)
class RecentSteps:
    """The recent closed steps' judged groups: each step's kinds in finishing order (None: a step saved with
    counts only) and the ``(spread, technical)`` rates over them all (:meth:`RecentOrders.recent`)."""

    orders: tuple[str | None, ...]
    spread_rate: float
    technical_rate: float

    def second_wave_probability(self, margin: int, need: int, judged: int = 0) -> float:
        """P(another wave), averaged over the recent steps, each replayed from its ``judged``-th group on
        (``judged``: the groups the step has judged so far)."""
        tail = functools.cache(lambda: _iid_table(margin, need, self.spread_rate, self.technical_rate))
        return sum(tail()[margin][need] if order is None else _replayed(order[judged:], margin, need,
                                                                        self.technical_rate, tail)
                   for order in self.orders) / len(self.orders)


class WaveSize(NamedTuple):
    """A sized wave: its groups, and the probability of another wave with them."""

    groups: int
    second_wave_probability: float


def adaptive_wave_size(*, target: int, remaining: int, kept: int, judged: int, recent: RecentSteps,
                       fill_probability: float, cap: int) -> WaveSize:
    """The wave's groups (see the module docstring) and its P(another wave); ``judged``: the step's groups judged so
    far (``kept`` of them not dropped); ``recent``: :meth:`RecentOrders.recent`."""
    minimum = max(target - remaining, 1)
    sizes = range(minimum, max(cap, minimum) + 1)
    another = functools.cache(lambda size: recent.second_wave_probability(remaining + size - target, target - kept,
                                                                          judged))
    size = sizes[min(bisect.bisect_left(sizes, True, key=lambda size: another(size) <= 1.0 - fill_probability),
                     len(sizes) - 1)]
    return WaveSize(size, another(size))


RECENT_WINDOW = 8
"""Closed steps whose judged groups adaptive waves are sized from."""


class RecentOrders:
    """The judged groups of the last :data:`RECENT_WINDOW` closed steps, each step's in finishing order.

    Fed by the accountant as each step closes, or from a step's record on a resume (its ledger rows
    are its judged groups in judgement order; a row's reason says its kind), so a resumed run sizes its
    first wave as the unbroken run would. A snapshot saved before the orders were kept (``steps``:
    ``[spread, technical, judged]`` triples or ``[spread, judged]`` pairs) loads as steps of unknown
    order, sized from their counts alone, and saves them as triples until they leave the window.

    Example:
        >>> orders = RecentOrders(window=2)
        >>> orders.observe([SPREAD, SPREAD, SPREAD, ZERO_STD])
        >>> orders.observe([ZERO_STD, TECHNICAL, SPREAD, ZERO_STD])
        >>> orders.observe([SPREAD, SPREAD])
        >>> orders.state_dict()
        {'orders': ['ztsz', 'ss']}
        >>> orders.recent()  # (3 + 1) / (6 + 3), (1 + 1) / (6 + 3)
        RecentSteps(orders=('ztsz', 'ss'), spread_rate=0.4444444444444444, technical_rate=0.2222222222222222)
        >>> other = RecentOrders(window=2); other.load_state_dict({"steps": [[3, 4]]}); other.recent()
        RecentSteps(orders=(None,), spread_rate=0.5714285714285714, technical_rate=0.14285714285714285)
        >>> other.observe([SPREAD, ZERO_STD]); other.state_dict()
        {'orders': [[3, 0, 4], 'sz']}
    """

    def __init__(self, window: int = RECENT_WINDOW) -> None:
        # per step: its order, or [spread, technical, judged] for a step saved with counts only
        self._steps: deque[str | list[int]] = deque(maxlen=window)

    def observe(self, kinds: Sequence[str]) -> None:
        """One closed step: its judged groups' kinds (``SPREAD``, ``ZERO_STD``, ``TECHNICAL``) in judgement order."""
        self._steps.append("".join(LETTER_OF_KIND[kind] for kind in kinds))

    def observe_record(self, record: StepRecord) -> None:
        """One closed step, from its record (a resume replaying the records)."""
        self.observe([C.KIND_OF_REASON.get(row.reason, SPREAD) for row in record.decisions or []])

    def recent(self) -> RecentSteps | None:
        """The recent steps' orders and rates: each kind's share of the judged groups with one group of each
        kind added (no kind is ever certain or impossible); None before any judged group."""
        counts = [_counts(step) for step in self._steps]
        spread, technical, judged = (sum(c[k] for c in counts) for k in range(3))
        if not judged:
            return None
        return RecentSteps(orders=tuple(step if isinstance(step, str) else None
                                        for step, c in zip(self._steps, counts) if c[2]),
                           spread_rate=(spread + 1) / (judged + 3), technical_rate=(technical + 1) / (judged + 3))

    def state_dict(self) -> dict[str, list]:
        """``{"orders": [...]}``: each step's order, or ``[spread, technical, judged]`` for a step of unknown order."""
        return {"orders": list(self._steps)}

    def load_state_dict(self, state: dict) -> None:
        saved = state["orders"] if "orders" in state else state["steps"]  # "steps": counts only, of an older snapshot
        if not isinstance(saved, list) or not all(_is_order(step) or _are_counts(step) for step in saved):
            raise ValueError("saved recent orders must be a list of strings of the letters s, z and t, or of "
                             "[spread, technical, judged] triples")
        self._steps = deque((step if isinstance(step, str) else [step[0], 0, step[1]] if len(step) == 2 else list(step)
                             for step in saved), maxlen=self._steps.maxlen)


def _counts(step: str | list[int]) -> tuple[int, int, int]:
    """A recent step's ``(spread, technical, judged)``."""
    if isinstance(step, str):
        return step.count(LETTER_OF_KIND[SPREAD]), step.count(LETTER_OF_KIND[TECHNICAL]), len(step)
    return step[0], step[1], step[2]


def _is_order(step: object) -> bool:
    return isinstance(step, str) and set(step) <= set(LETTER_OF_KIND.values())


def _are_counts(step: object) -> bool:
    """``[spread, technical, judged]``, or ``[spread, judged]`` (saved before technical groups were counted)."""
    return isinstance(step, list) and len(step) in (2, 3) and all(isinstance(v, int) and v >= 0 for v in step)
