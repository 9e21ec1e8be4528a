"""Rates of a run measured step by step: a burst of technical failures is seen, and weighed, as a burst.

A run's technical rate pooled over all its judged groups mixes two things: the steady background
(a few groups a step the environment cannot score) and the rare burst (a reward service down for a
step). Pooled, one burst of 85 technical groups in a 40-step demo reads as a rate of 0.086 on every
step, and ``tune`` then sizes every step's over-sampling for an outage that happened once.

The rule (:func:`estimate_rates`):

- **Per-step rates.** Each step's technical drops and judged groups are kept apart.
- **A burst step** has more technical drops than the background explains: more than
  ``expected + 4·sqrt(expected) + 3`` where ``expected = accepted × background`` (4 Poisson standard
  deviations and 3 groups of slack, so the ordinary scatter of a steady rate never counts as a burst).
  The background starts as the pooled rate and is re-estimated without the burst steps until no
  step changes side (sigma clipping).
- **Weighed as what it is** (``burst_rule="schedule"``, the default): the simulation runs the
  background rate on every step, and the burst steps as bursts, at the frequency the run had them
  (1 burst step in 40 becomes 50 in 2,000 simulated steps, evenly spaced) and at their own measured
  rate. The zero-std rate is measured over the steps without a burst (the simulator's zero-std share
  of the healthy groups is then the same inside and outside a burst). So a burst costs the waves it
  costs, in the share of steps it happens, and no more. ``burst_rule="pooled"`` keeps the old figure:
  every step at the pooled rates.
- **Dominance.** For each count (technical drops, zero-std groups), the fewest steps that hold half
  of it; when those are at most 5% of the steps (at least one) and the count is at least 5, the
  estimate says so (:attr:`Dominance.text`), whatever the rule.

Why this rule: over-sampling can only buy back what happens often. A burst is an outage: the alerts
and the termination limit are its answer, and its few extra waves are paid in the steps it happens.
Sizing every step for it costs tokens on all the other steps (in the demo, 358k instead of 280k per step).

Example:
    >>> accepted = [64] * 40
    >>> technical = [1 if s % 4 == 0 else 0 for s in range(40)]
    >>> technical[15], accepted[15] = 85, 160
    >>> est = estimate_rates(list(range(40)), accepted, technical, [20] * 40)
    >>> [b.rollout_id for b in est.bursts], round(est.technical_background, 4), round(est.technical_pooled, 4)
    ([15], 0.004, 0.0358)
    >>> est.technical_dominance.text
    'technical drops: 85 of 95 in 1 step (step 15)'
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Sequence
from shopsim_metrics.general.plain_values import is_number

BURST_RULES = ("schedule", "pooled")
"""How ``tune --from`` weighs a burst: as bursts at their frequency (default), or pooled into every step."""

BURST_SIGMAS = 4.0
"""A burst step's technical drops exceed the background's expectation by this many Poisson deviations ..."""
BURST_SLACK = 3.0
"""... plus this many groups."""

DOMINANT_SHARE_OF_STEPS = 0.05
"""A count is dominated when the fewest steps holding half of it are at most this share of the steps (at least one)."""
DOMINANCE_MIN_COUNT = 5
"""Below this count nothing is said to dominate (a handful of groups is noise)."""


@dataclass(frozen=True)
class BurstStep:
    """One step whose technical drops the background does not explain."""

    rollout_id: int
    technical: int
    accepted: int

    @property
    def rate(self) -> float:
        return self.technical / self.accepted if self.accepted else 0.0


@dataclass(frozen=True)
class Dominance:
    """The fewest steps that hold half of a count (``steps``: ``(rollout_id, count)``, largest first)."""

    name: str
    total: int
    steps: tuple[tuple[int, int], ...]
    run_steps: int

    @property
    def dominated(self) -> bool:
        few = max(1, math.floor(DOMINANT_SHARE_OF_STEPS * self.run_steps))
        return self.total >= DOMINANCE_MIN_COUNT and 0 < len(self.steps) <= few

    @property
    def text(self) -> str:
        """One line for the user, empty when the count is not dominated."""
        if not self.dominated:
            return ""
        held = sum(count for _, count in self.steps)
        where = ", ".join(f"{rid}" for rid, _ in self.steps[:5]) + (" ..." if len(self.steps) > 5 else "")
        noun = "step" if len(self.steps) == 1 else "steps"
        return f"{self.name}: {held} of {self.total} in {len(self.steps)} {noun} ({noun} {where})"


@dataclass(frozen=True)
class RateEstimate:
    """A run's rates, step by step (see the module docstring)."""

    steps: int
    accepted: int
    technical_pooled: float
    zero_std_pooled: float
    technical_background: float  # over the steps without a burst
    zero_std_background: float  # over the steps without a burst
    bursts: tuple[BurstStep, ...] = ()
    technical_dominance: Dominance | None = None
    zero_std_dominance: Dominance | None = None

    @property
    def burst_rate(self) -> float:
        """The technical rate inside the burst steps (their drops over their judged groups)."""
        accepted = sum(b.accepted for b in self.bursts)
        return sum(b.technical for b in self.bursts) / accepted if accepted else 0.0

    def rates(self, rule: str) -> tuple[float, float]:
        """``(zero_std_rate, technical_rate)`` to simulate under ``rule`` (:data:`BURST_RULES`)."""
        if rule == "pooled" or not self.bursts:
            return self.zero_std_pooled, self.technical_pooled
        return self.zero_std_background, self.technical_background

    def scheduled_bursts(self, simulated_steps: int) -> list[tuple[int, float]]:
        """``(step, rate)`` of the bursts to simulate: the run's frequency, evenly spaced, at the burst rate.

        Example:
            >>> est = RateEstimate(40, 2000, 0.05, 0.3, 0.01, 0.3, bursts=(BurstStep(15, 85, 160),))
            >>> sched = est.scheduled_bursts(2000)
            >>> len(sched), sched[:2], round(sched[0][1], 3)
            (50, [(20, 0.53125), (60, 0.53125)], 0.531)
        """
        if not self.bursts or simulated_steps < 1 or not self.steps:
            return []
        count = max(1, round(simulated_steps * len(self.bursts) / self.steps))
        spacing = simulated_steps / count
        return [(min(simulated_steps - 1, int((k + 0.5) * spacing)), self.burst_rate) for k in range(count)]

    def lines(self, rule: str) -> list[str]:
        """What the user is told: the bursts and how they were weighed, and any count few steps dominate."""
        out = []
        if self.bursts and rule in BURST_RULES:  # a technical rate given on the command line: no burst line
            shown = ", ".join(f"step {b.rollout_id} ({b.technical} of {b.accepted})" for b in self.bursts[:5])
            more = f" and {len(self.bursts) - 5} more" if len(self.bursts) > 5 else ""
            noun = "burst step" if len(self.bursts) == 1 else "burst steps"
            how = (f"simulated as bursts at that frequency (rate {self.burst_rate:.2f} in them), the other steps at the "
                   f"background technical rate {self.technical_background:.4f}"
                   if rule == "schedule" else "pooled into every step (--burst-rule pooled)")
            out.append(f"technical failures: {len(self.bursts)} {noun} in {self.steps} ({shown}{more}); {how}; "
                       f"pooled over every step the rate would be {self.technical_pooled:.4f}")
            if rule == "schedule":
                out.append("P(2nd), P(3rd) and zero-adv are over the simulated steps without a burst (no size avoids "
                           "a burst's waves); the token and time columns count every step")
        for dominance in (self.technical_dominance, self.zero_std_dominance):
            if dominance is not None and dominance.dominated:
                out.append(f"note: one step or a few dominate a rate: {dominance.text}")
        return out


def estimate_rates(rollout_ids: Sequence[int], accepted: Sequence[Any], technical: Sequence[Any],
                   zero_std: Sequence[Any]) -> RateEstimate:
    """The :class:`RateEstimate` of per-step counts (None counts as 0). ValueError without a judged group."""
    acc = [_count(v) for v in accepted]
    tech = [_count(v) for v in technical]
    zero = [_count(v) for v in zero_std]
    total = sum(acc)
    if not total:
        raise ValueError("no judged group: cannot measure rates")
    pooled_tech, pooled_zero = sum(tech) / total, sum(zero) / total
    burst = [False] * len(acc)
    background = pooled_tech
    for _ in range(20):  # the flags settle in a few rounds
        flagged = [a > 0 and t > _burst_threshold(a, background) for a, t in zip(acc, tech)]
        if flagged == burst:
            break
        calm = sum(a for a, f in zip(acc, flagged) if not f)
        burst = flagged
        background = sum(t for t, f in zip(tech, flagged) if not f) / calm if calm else pooled_tech
    calm_accepted = sum(a for a, f in zip(acc, burst) if not f)
    if not calm_accepted:  # every step a burst: nothing to separate
        burst = [False] * len(acc)
        calm_accepted, background = total, pooled_tech
    zero_background = sum(z for z, f in zip(zero, burst) if not f) / calm_accepted
    bursts = tuple(BurstStep(int(rid), t, a) for rid, a, t, f in zip(rollout_ids, acc, tech, burst) if f)
    return RateEstimate(
        steps=len(acc), accepted=total, technical_pooled=pooled_tech, zero_std_pooled=pooled_zero,
        technical_background=background, zero_std_background=zero_background, bursts=bursts,
        technical_dominance=dominance("technical drops", rollout_ids, tech),
        zero_std_dominance=dominance("zero-std groups", rollout_ids, zero),
    )


def dominance(name: str, rollout_ids: Sequence[int], counts: Sequence[int]) -> Dominance:
    """The fewest steps holding at least half of ``counts``' total.

    Example:
        >>> dominance("x", [0, 1, 2, 3], [1, 1, 1, 7]).steps
        ((3, 7),)
    """
    total = sum(counts)
    ranked = sorted(zip(rollout_ids, counts), key=lambda rc: (-rc[1], rc[0]))
    held, chosen = 0, []
    for rid, count in ranked:
        if total == 0 or 2 * held >= total:
            break
        chosen.append((int(rid), count))
        held += count
    return Dominance(name=name, total=total, steps=tuple(chosen), run_steps=len(counts))


def _burst_threshold(accepted: int, background: float) -> float:
    expected = accepted * background
    return expected + BURST_SIGMAS * math.sqrt(expected) + BURST_SLACK


def _count(value: Any) -> int:
    return int(value) if is_number(value) and value > 0 else 0
