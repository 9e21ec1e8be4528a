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
  larger). Sizes are tried from the smallest up, the step doubling, then halved back: a sizing never
  looks far past the size it finds, and its work and memory follow the batch and the recent orders,
  whatever the cap (:data:`TABLE_CELLS`).

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
import math
from collections import deque
from dataclasses import dataclass
from typing import Iterator, NamedTuple, Sequence

from shopsim_metrics.judging.group_judgement import SPREAD, TECHNICAL, ZERO_STD
from shopsim_metrics.record import contract as C
from shopsim_metrics.record.records import StepRecord
from shopsim_metrics.record.saved_values import is_count

NEGLIGIBLE = 1e-12
"""Chances of technical failure counts summed no further once what is left of them is below this: the replay
counts them as another wave (its result is then an upper bound, by at most a few times this)."""

LETTER_OF_KIND = {SPREAD: "s", ZERO_STD: "z", TECHNICAL: "t"}
"""One letter per judged group's kind in a recorded finishing order (the snapshot keeps orders as strings)."""


TABLE_CELLS = 1 << 20
"""Most (margin, need) cells one sizing tabulates (:class:`_IidTail`, about 30 MB); beyond them each probability is
summed in closed form, so a sizing's memory never grows with the cap or the margins it passes over."""


class _IidTail:
    """P(another wave) with the kinds drawn independently (:func:`second_wave_probability`): ``another(m, r)`` with
    ``m`` drops to spare and ``r <= need`` groups still needed. Rows of margins are built as they are first asked
    for, so one sizing (every size tried, every recent step) builds them once; a margin whose rows would pass
    :data:`TABLE_CELLS` is summed in closed form instead (:func:`_another_closed_form`)."""

    def __init__(self, need: int, spread_rate: float, technical_rate: float) -> None:
        self.spread_rate, self.technical_rate = spread_rate, technical_rate
        self.rows = [[1.0 - (1.0 - technical_rate) ** r for r in range(need + 1)]]  # no margin: any technical failure
        self.most_margin = TABLE_CELLS // (need + 1) - 1  # the last margin tabulated

    def another(self, margin: int, need: int) -> float:
        if margin > self.most_margin:
            return _another_closed_form(margin, need, self.spread_rate, self.technical_rate)
        rows, spread = self.rows, self.spread_rate
        while len(rows) <= margin:
            previous, row = rows[-1], [0.0] * len(rows[-1])
            for r in range(1, len(row)):
                row[r] = spread * row[r - 1] + (1.0 - spread) * previous[r]
            rows.append(row)
        return rows[margin][need]


def _another_closed_form(margin: int, need: int, spread_rate: float, technical_rate: float) -> float:
    """:class:`_IidTail`'s recurrence summed in closed form, in O(``need``) whatever the margin: the ``margin``-th
    drop comes after ``k < need`` groups with spread (negative binomial), and then, with no margin left and
    ``need - k`` groups to go, any technical failure means another wave.

    >>> round(_another_closed_form(8, 16, 0.5, 0.02), 3), _another_closed_form(10**9, 256, 0.5, 0.02)
    (0.148, 0.0)
    """
    s, t = spread_rate, technical_rate
    if need <= 0:
        return 0.0
    if margin == 0 or s <= 0.0:
        return 1.0 - (1.0 - t) ** need
    if s >= 1.0:
        return 0.0
    log_term, log_s, total = margin * math.log1p(-s), math.log(s), 0.0  # log P(k = 0) = log (1 - s)^margin
    for k in range(need):
        if log_term > -745.0:  # below, exp() is 0.0
            total += math.exp(log_term) * (1.0 - (1.0 - t) ** (need - k))
        log_term += log_s + math.log((margin + k) / (k + 1))
    return total


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
    return _IidTail(need, spread_rate, technical_rate).another(margin, need)


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
    return _replayed(order, margin, need, technical_rate, _IidTail(need, spread_rate, technical_rate))


def _replayed(order: str, margin: int, need: int, technical_rate: float, tail: _IidTail) -> float:
    """:func:`replayed_second_wave_probability`, past the order's end from ``tail``.

    With ``N_i`` the technical failures before the order's ``i``-th group (each group is preceded by a
    failure with probability t, again and again: negative binomial) and ``z_i`` its zero-std groups
    before it, the margin left before group ``i`` is ``margin - z_i``, and slime's rule gives three
    ways to fill the batch without another wave, which exclude one another:

    - the ``need``-th group with spread is the order's ``i``-th, and ``N_i <= margin - z_i`` (every
      drop so far within the margin);
    - the first zero-std group let in as fallback is the order's ``i``-th, before the batch is full:
      exactly ``N_i = margin - z_i`` (the margin spent just then), and no failure before any of the
      groups still needed after it (each is kept: ``1 - t`` each, in the order or past its end);
    - the order ends first with ``n <= margin - z`` failures (still no fallback), and from there the
      kinds are drawn independently (``tail``).

    So one pass over the order with one negative-binomial term per zero-std group: linear in the
    order's length. Sums of failure counts stop where less than :data:`NEGLIGIBLE` is left of them
    (the rest counts as another wave: an upper bound).
    """
    if need <= 0:
        return 0.0
    t = technical_rate
    filled, groups, spread, zero = 0.0, 0, 0, 0  # filled: P(the batch filled without another wave) so far
    for letter in order:
        if letter == LETTER_OF_KIND[TECHNICAL]:
            continue
        groups += 1
        if letter == LETTER_OF_KIND[SPREAD]:
            spread += 1
            if spread == need:
                filled += sum(p for _, p in _failure_counts(groups, t, margin - zero))
                return max(0.0, 1.0 - filled)
        else:
            if zero <= margin:
                filled += _failures(margin - zero, groups, t) * (1.0 - t) ** (need - spread - 1)
            zero += 1
    counts = list(_failure_counts(groups, t, margin - zero))
    rest = 1.0 - filled - sum(p for _, p in counts)  # another wave before the order ended
    return max(0.0, rest + sum(p * tail.another(margin - zero - n, need - spread) for n, p in counts))


def _failures(n: int, groups: int, t: float) -> float:
    """P(exactly ``n`` technical failures before ``groups`` groups finish), a failure coming before each
    group with probability ``t``, again and again (negative binomial).

    >>> round(_failures(1, 2, 0.5), 4), _failures(0, 0, 0.3), _failures(2, 5, 0.0)
    (0.25, 1.0, 0.0)
    """
    if n < 0:
        return 0.0
    if groups == 0 or t == 0.0:
        return 1.0 if n == 0 else 0.0
    if t >= 1.0:
        return 0.0
    return math.exp(math.lgamma(n + groups) - math.lgamma(n + 1) - math.lgamma(groups) + n * math.log(t)
                    + groups * math.log1p(-t))


def _failure_counts(groups: int, t: float, most: int) -> Iterator[tuple[int, float]]:
    """``(n, P(n failures before groups groups finish))`` for the counts ``n <= most``: from the likeliest outwards,
    each side stopped where what it leaves is below :data:`NEGLIGIBLE` (the terms fall geometrically, ever faster).

    >>> counts = list(_failure_counts(2000, 0.02, 10_000))  # mean 41
    >>> round(sum(p for _, p in counts), 10), len(counts) < 150
    (1.0, True)
    """
    if most < 0 or (t >= 1.0 and groups > 0):
        return
    if groups == 0 or t == 0.0:
        yield 0, 1.0
        return
    top = min(most, int((groups - 1) * t / (1.0 - t)))  # the likeliest count (the mode), or the largest allowed
    yield top, _failures(top, groups, t)
    for step in (-1, 1):
        n, p = top, _failures(top, groups, t)
        while 0 < n if step < 0 else n < most:
            ratio = n / (t * (n + groups - 1)) if step < 0 else t * (n + groups) / (n + 1)  # to the next count
            if ratio < 1.0 and p * ratio / (1.0 - ratio) < NEGLIGIBLE:
                break
            n, p = n + step, p * ratio
            yield n, p


@dataclass(frozen=True)
class RecentSteps:
    """The recent closed steps' judged groups: each step's kinds in finishing order (None: a step saved with
    counts only) and the ``(spread, technical)`` rates over them all (:meth:`RecentOrders.recent`)."""

    orders: tuple[str | None, ...]
    spread_rate: float
    technical_rate: float

    def second_wave_probability(self, margin: int, need: int, judged: int = 0, tail: _IidTail | None = None) -> float:
        """P(another wave), averaged over the recent steps, each replayed from its ``judged``-th group on
        (``judged``: the groups the step has judged so far); ``tail``: one shared by the sizes tried."""
        tail = tail or _IidTail(need, self.spread_rate, self.technical_rate)
        return sum(tail.another(margin, need) if order is None else _replayed(order[judged:], margin, need,
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
    largest = max(cap, minimum)
    tail = _IidTail(target - kept, recent.spread_rate, recent.technical_rate)
    another = functools.cache(lambda size: recent.second_wave_probability(remaining + size - target, target - kept,
                                                                          judged, tail))
    fills = lambda size: another(size) <= 1.0 - fill_probability  # noqa: E731 - more groups never fill less often
    low, high = minimum, minimum  # sizes tried from the smallest up, doubling the step: never far past the answer
    while not fills(high) and high < largest:
        low, high = high + 1, min(largest, minimum + 2 * (high - minimum) + 1)
    sizes = range(low, high + 1)
    size = sizes[min(bisect.bisect_left(sizes, True, key=fills), len(sizes) - 1)]
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

    def replay(self, record: StepRecord) -> None:
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
    return (isinstance(step, list) and len(step) in (2, 3) and all(map(is_count, step))
            and step[0] + (step[1] if len(step) == 3 else 0) <= step[-1])  # spread and technical among the judged
