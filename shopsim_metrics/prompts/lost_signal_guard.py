"""The predictive rule's guard: it keeps the signal the skips forgo under a limit, measured on the run by probes.

A skip rule is judged by two figures: the tokens it saves and its **lost signal**: the skipped draws' chances
of spread (the informative groups they would have given) per informative *trained* group (a group trained
with spread; fallback groups are zero-std). One definition everywhere: this guard, the records'
``skip_lost_signal_estimate``, ``replay``, the benchmarks (which know the true chances) and the docs.

For each draw it would skip, the predictive rule predicts the chance ``q`` that its group would have spread;
the skips forgo the sum of those chances if the predictions are right. Two things make them wrong in a run:
zero-std by luck of the draw (a prompt solved 30% of the time fails a whole group of 4 a quarter of the time)
and evidence gone stale (a prompt that has become learnable). The guard measures both on the run itself:

- **probes**: a draw the rule would skip and the guard serves anyway has its verdict read at the prompt's
  next visit: whether it spread. Every draw above the cap is served so (it costs nothing more), and of the
  draws within the cap one in ``probe_every`` is, more while the bound is wide (below). The **calibration**
  ``c`` (true chance of spread over predicted, of the would-be skips) has a posterior
  ``Gamma(PRIOR_SHAPE + spreads, PRIOR_RATE + predicted)`` over the probes seen (spreads counted, predicted
  chances summed, both weighed by :data:`CALIBRATION_MEMORY` per step). Its prior is vague (mean 2, nothing
  trusted): early in a run, in a short run, or where prompts turn learnable, the bound is high and the cap
  small until the probes say otherwise;
- the **lost signal estimate**: the calibration's posterior mean times the predicted chances of the draws
  skipped, over the informative groups trained (both weighed by :data:`RUN_MEMORY` per step);
- what the next step will bring: the would-be skips' predicted chances (a histogram) and the informative
  groups trained per step, weighed by :data:`STEP_MEMORY`.

After each closed step it sets the **cap**: the largest chance of spread a skipped draw may have such that the
skips below it over the next :data:`HORIZON` steps (at the recent steps' rate) keep the lost signal at most
``max_lost_signal`` *at the calibration's upper credible bound* (its :data:`CREDIBLE_LEVEL` quantile): the
budget left is spread over them (the **step budget**), so the cap moves smoothly. The rule skips a draw only if
its own test says so, its ``q`` is below the cap (the draws surest to be zero-std go first) and the step's
skips have not spent the step budget (a burst the recent steps did not show is served).

**Probing more while the bound is wide**: a draw within the cap is a probe once the probe credit reaches 1;
each such draw adds ``1 / k`` to it, with ``k = max(2, probe_every / (1 + width))`` and ``width`` the bound's
distance above the posterior mean over ``max(mean, 1)``: with no probe seen (width 1.3) one draw in 3.5 for
``probe_every`` 8, back to one in 8 as the probes narrow the bound. ``probe_every`` 0: no probe and no
calibration (``c`` is 1: the guard trusts the predictions and caps by them alone).

Deterministic (the probe credit, no draw); its state is a few numbers and one histogram
(:meth:`LostSignalGuard.state_dict`), checked on load (:meth:`LostSignalGuard.load_state_dict`: each value
within what a run can reach), saved with the data source's state, which adds the probes served and not judged
yet (a probe's verdict is its prompt's first visit after it).

Example:
    >>> guard = LostSignalGuard(max_lost_signal=0.1, probe_every=8)
    >>> guard.cap, guard.consider(0.2), round(guard.probe_interval, 1)   # nothing seen: the bound is wide
    (0.0, 'serve', 3.5)
    >>> for _ in range(30):   # 10 would-be skips a step, 10 informative groups trained, 2 probes that stay zero-std
    ...     _ = [guard.consider(0.2) for _ in range(10)]
    ...     guard.close_step(informative=10, probes=[(0.2, False)] * 2)
    >>> round(guard.calibration_bound, 2), guard.cap, round(guard.probe_interval, 1), guard.consider(0.2)
    (0.24, 1.0, 7.1, 'probe')
    >>> guard.close_step(informative=10, probes=[(0.2, True)] * 6)    # then they spread: the cap closes
    >>> round(guard.calibration_bound, 2), guard.cap, guard.consider(0.2)
    (0.99, 0.2, 'serve')
"""

from __future__ import annotations

import bisect
import itertools
import math
from typing import Any, Mapping, Sequence

from shopsim_metrics.record.saved_values import number_column, saved_number
from shopsim_metrics.settings.prompt_skip import SkipRuleSettings

STATE_FORMAT = 2
BINS = 40
"""Bins of the predicted chance of spread in the would-be skips' histogram, each ``1/BINS`` wide."""
STEP_MEMORY = 0.9
"""Weight per step of the histogram and of the informative groups per step (about the last 10 steps)."""
CALIBRATION_MEMORY = 0.98
"""Weight per step of the probes in the calibration (about the last 50 steps)."""
HORIZON = 10
"""Steps over which the budget left is spread when the cap is set (as many as the recent steps' sums hold)."""
RUN_MEMORY = 0.99
"""Weight per step of the forgone signal and the informative groups in the estimate (about the last 100 steps)."""
PRIOR_SHAPE, PRIOR_RATE = 1.0, 0.5
"""The calibration's vague prior, ``Gamma(1, 1/2)``: mean 2 (predictions that forgo twice what they say), as
much weight as half a probe of chance 1; its 90% bound, 4.6, closes the cap until probes are seen."""
CREDIBLE_LEVEL = 0.9
"""The quantile of the calibration's posterior the cap holds the lost signal at."""
MIN_CHANCE = 1e-6
"""The smallest predicted chance of spread the guard counts (a beta-binomial's with a run's evidence is above it)."""
MOST_GROUPS_PER_STEP = 10**6
"""More groups than one step judges: a saved weighed sum above ``MOST_GROUPS_PER_STEP / (1 - memory)`` is refused."""
SKIP, PROBE, SERVE = "skip", "probe", "serve"

_Z = {0.8: 0.8416, 0.9: 1.2816, 0.95: 1.6449}
_NUMBERS = {  # saved number -> the memory it is weighed by (its largest possible value follows)
    "spread_probes": CALIBRATION_MEMORY, "predicted_probes": CALIBRATION_MEMORY, "counted_probes": CALIBRATION_MEMORY,
    "step_informative": STEP_MEMORY, "run_informative": RUN_MEMORY, "run_forgone": RUN_MEMORY,
    "open_step_forgone": 0.0, "probe_credit": 0.0, "cap": 0.0, "step_budget": 0.0}
_HISTOGRAMS = ("chances", "open_step_chances")


def gamma_quantile(shape: float, rate: float, level: float = CREDIBLE_LEVEL) -> float:
    """The ``level`` quantile of ``Gamma(shape, rate)`` (Wilson and Hilferty's cube-root approximation, within
    2% for shape >= 1; the guard's shape is always >= 1).

    Example:
        >>> round(gamma_quantile(1.0, 1.0), 2), round(-math.log(0.1), 2)   # the exponential's 90% quantile
        (2.28, 2.3)
    """
    z = _Z[level]
    return shape / rate * max(1.0 - 1.0 / (9.0 * shape) + z / (3.0 * math.sqrt(shape)), 0.0) ** 3


class LostSignalGuard:
    """Caps the predicted chance of spread a skipped draw may have (see the module docstring)."""

    def __init__(self, max_lost_signal: float = SkipRuleSettings.max_lost_signal,
                 probe_every: int = SkipRuleSettings.probe_every) -> None:
        self.max_lost_signal = max_lost_signal
        self.probe_every = probe_every
        self.spread_probes = 0.0  # probes that spread, weighed by CALIBRATION_MEMORY
        self.predicted_probes = 0.0  # their predicted chances of spread, weighed alike
        self.counted_probes = 0.0  # the probes, weighed alike (spreads and chances are at most this)
        self.step_informative = 0.0  # informative groups trained, weighed by STEP_MEMORY
        self.run_informative = 0.0  # informative groups trained, weighed by RUN_MEMORY
        self.run_forgone = 0.0  # predicted chances of the draws skipped, weighed by RUN_MEMORY
        self.probe_credit = 0.0  # a draw within the cap is a probe once this reaches 1
        self.chances = [0.0] * BINS  # predicted chances of the would-be skips, per bin, weighed by STEP_MEMORY
        self.open_step_chances = [0.0] * BINS  # the draws since the last close: the step not closed yet
        self.open_step_forgone = 0.0
        self.step_budget = 0.0  # predicted chances this step's skips may forgo (the budget left over the horizon)
        self.cap = self._next_cap()

    @classmethod
    def of(cls, settings: SkipRuleSettings) -> "LostSignalGuard":
        """The guard of the rule's settings (``max_lost_signal``, ``probe_every``)."""
        return cls(settings.max_lost_signal, settings.probe_every)

    @property
    def calibration(self) -> float:
        """The posterior mean of true over predicted chances of spread, of the probes (1 without probing)."""
        if not self.probe_every:
            return 1.0
        return (PRIOR_SHAPE + self.spread_probes) / (PRIOR_RATE + self.predicted_probes)

    @property
    def calibration_bound(self) -> float:
        """The calibration's upper credible bound (:data:`CREDIBLE_LEVEL`), which the cap holds to the limit."""
        if not self.probe_every:
            return 1.0
        return gamma_quantile(PRIOR_SHAPE + self.spread_probes, PRIOR_RATE + self.predicted_probes)

    @property
    def lost_signal_estimate(self) -> float | None:
        """The forgone signal over the informative groups trained, both weighed (None: none trained yet)."""
        return self.calibration * self.run_forgone / self.run_informative if self.run_informative else None

    @property
    def probe_interval(self) -> float:
        """Draws within the cap per probe: ``probe_every``, fewer while the bound is wide (module docstring)."""
        mean = self.calibration
        width = (self.calibration_bound - mean) / max(mean, 1.0)
        return max(2.0, self.probe_every / (1.0 + width))

    def consider(self, chance: float) -> str:
        """One draw the rule would skip, with its predicted chance of spread: ``skip``, ``probe`` or ``serve``
        (its bin not below the cap). A probe's or a served draw's verdict is handed back at a :meth:`close_step`."""
        chance = min(max(chance, MIN_CHANCE), 1.0)
        bin_ = min(int(chance * BINS), BINS - 1)
        self.open_step_chances[bin_] += chance
        if bin_ >= round(self.cap * BINS) or self.open_step_forgone + chance > self.step_budget:
            return SERVE  # past the cap (its bins are those below it), or the step's budget spent
        if self.probe_every:
            self.probe_credit += 1.0 / self.probe_interval
            if self.probe_credit >= 1.0:
                self.probe_credit -= 1.0
                return PROBE
        self.open_step_forgone += chance
        return SKIP

    def close_step(self, *, informative: int, probes: Sequence[tuple[float, bool]]) -> None:
        """One closed step: its informative groups trained, and the probes judged since the last call
        (predicted chance of spread, whether it spread); then the cap for the next step."""
        self.spread_probes = self.spread_probes * CALIBRATION_MEMORY + sum(bool(spread) for _, spread in probes)
        self.predicted_probes = self.predicted_probes * CALIBRATION_MEMORY + sum(
            min(max(chance, MIN_CHANCE), 1.0) for chance, _ in probes)
        self.counted_probes = self.counted_probes * CALIBRATION_MEMORY + len(probes)
        self.step_informative = self.step_informative * STEP_MEMORY + informative
        self.chances = [old * STEP_MEMORY + new for old, new in zip(self.chances, self.open_step_chances)]
        self.run_informative = self.run_informative * RUN_MEMORY + informative
        self.run_forgone = self.run_forgone * RUN_MEMORY + self.open_step_forgone
        self.open_step_chances, self.open_step_forgone = [0.0] * BINS, 0.0
        self.cap = self._next_cap()

    def _next_cap(self) -> float:
        """The largest bin edge such that the next :data:`HORIZON` steps' skips below it, at the recent steps'
        rate, keep the lost signal at the calibration's bound within the limit (the budget left spread over them)."""
        if self.max_lost_signal >= 1.0:
            self.step_budget = float(MOST_GROUPS_PER_STEP)  # no limit
            return 1.0
        per_step = 1.0 - STEP_MEMORY  # the step-weighed sums hold about 1 / (1 - STEP_MEMORY) steps
        informative = self.run_informative + HORIZON * self.step_informative * per_step
        allowed_per_step = (self.max_lost_signal * informative / self.calibration_bound - self.run_forgone) / HORIZON
        self.step_budget = max(allowed_per_step, 0.0)
        if allowed_per_step <= 0.0:  # no budget left (or none yet: nothing trained)
            return 0.0
        within = bisect.bisect_right(list(itertools.accumulate(self.chances)), allowed_per_step / per_step)
        return within / BINS

    def record_fields(self, probe_count: int) -> dict[str, Any]:
        """The record's guard fields, with the probes served since the last record (metrics contract).

        Example:
            >>> LostSignalGuard().record_fields(2)
            {'skip_probe_count': 2, 'skip_cap': 0.0, 'skip_lost_signal_estimate': None}
        """
        return {"skip_probe_count": probe_count, "skip_cap": self.cap, "skip_lost_signal_estimate": self.lost_signal_estimate}

    def state_dict(self) -> dict[str, Any]:
        """JSON-able: the numbers and the histograms (the open step's too)."""
        return {"format": STATE_FORMAT, **{name: list(getattr(self, name)) for name in _HISTOGRAMS},
                **{name: getattr(self, name) for name in _NUMBERS}}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore what :meth:`state_dict` saved; ``ValueError`` naming the value for anything a run cannot reach
        (a weighed sum past ``MOST_GROUPS_PER_STEP / (1 - memory)``, spreads or chances beyond the probes
        counted, a cap off its bins); nothing is changed then."""
        what = "lost-signal guard state"
        if state.get("format") != STATE_FORMAT:
            raise ValueError(f"{what}: format: expected {STATE_FORMAT}; got {state.get('format')!r}")
        numbers = {name: saved_number(state.get(name), f"{what}: {name}") for name in _NUMBERS}
        for name, memory in _NUMBERS.items():
            most = MOST_GROUPS_PER_STEP / (1.0 - memory)
            if numbers[name] > most:
                raise ValueError(f"{what}: {name}: {numbers[name]!r} is more than a run reaches (at most {most:g})")
        counted = numbers["counted_probes"] * (1.0 + 1e-9) + 1e-9
        for name in ("spread_probes", "predicted_probes"):
            if numbers[name] > counted:
                raise ValueError(f"{what}: {name}: {numbers[name]!r} is more than the probes counted "
                                 f"({numbers['counted_probes']!r})")
        if numbers["predicted_probes"] < numbers["spread_probes"] * MIN_CHANCE * (1.0 - 1e-9):
            raise ValueError(f"{what}: predicted_probes: {numbers['predicted_probes']!r} is less than the probes that "
                             f"spread ({numbers['spread_probes']!r}) times the least chance counted ({MIN_CHANCE:g})")
        if numbers["probe_credit"] >= 1.0 or numbers["cap"] > 1.0 or numbers["cap"] * BINS != int(numbers["cap"] * BINS):
            raise ValueError(f"{what}: probe_credit {numbers['probe_credit']!r} must be below 1 and cap "
                             f"{numbers['cap']!r} a bin edge from 0 to 1")
        histograms = {}
        for name in _HISTOGRAMS:
            number_column(state.get(name), f"{what}: {name}")
            if len(state[name]) != BINS:
                raise ValueError(f"{what}: {name}: {len(state[name])} bins, expected {BINS}")
            if sum(state[name]) > MOST_GROUPS_PER_STEP / (1.0 - STEP_MEMORY):
                raise ValueError(f"{what}: {name}: sums to more than a run reaches")
            histograms[name] = [float(c) for c in state[name]]
        for name, value in {**numbers, **histograms}.items():
            setattr(self, name, value)
