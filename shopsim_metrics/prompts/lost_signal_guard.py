"""The predictive rule's guard: it keeps the signal the skips forgo under a limit, measured on the run by probes.

A skip rule is judged by two figures: the tokens it saves and the informative groups it forgoes for each one
trained (the *lost signal*). For each draw it would skip, the predictive rule predicts the chance ``p`` that
its group would have spread; what it forgoes is the sum of those chances, if the predictions are right. Two
things make them wrong in a run: zero-std by luck of the draw (a prompt solved 30% of the time fails a whole
group of 4 a quarter of the time) and evidence gone stale (a prompt that has become learnable). The guard
measures both on the run itself:

- **probes**: of the draws the rule skips, every ``probe_every``-th is served anyway, and its verdict says
  whether it spread. The **calibration** ``c`` is the probes' spreads over their predicted chances, weighed by
  :data:`CALIBRATION_MEMORY` per step, from one imagined probe that was right (``c`` starts at 1);
- the forgone signal so far, ``c ×`` the predicted chances of the draws skipped, against the informative
  groups judged (both weighed by :data:`RUN_MEMORY` per step): the **lost signal estimate**;
- what the next step will bring: the would-be skips' predicted chances (a histogram) and the informative
  groups judged per step, weighed by :data:`STEP_MEMORY`.

After each closed step it sets the **cap**: the largest chance of spread a skipped draw may have such that
the skips below it over the next :data:`HORIZON` steps (at the recent steps' rate) keep the estimate at most
``max_lost_signal``: the budget left is spread over them, so the cap moves smoothly and the waves sized from
recent steps stay true. The rule skips a draw
only if its own test says so (threshold or cost) and its ``p`` is at most the cap: the draws surest to be
zero-std go first, as many as the limit allows. Where prompts stay zero-std the probes stay zero-std, ``c``
falls below 1 and the cap lets every skip through; where zero-std is luck, or prompts become learnable, the
probes spread and the cap closes.

Deterministic (a probe is every ``probe_every``-th skip; no draw); its state is a few numbers and one
histogram (:meth:`LostSignalGuard.state_dict`), saved with the data source's state, which adds the probes
served and not judged yet (at most one per prompt: a probe's verdict is its prompt's first visit after it, so
a probe aborted and dropped by slime waits for the prompt's next visit).

Example:
    >>> guard = LostSignalGuard(max_lost_signal=0.1, probe_every=4)
    >>> [guard.consider(0.2) for _ in range(8)]       # every 4th skip is served as a probe
    ['skip', 'skip', 'skip', 'probe', 'skip', 'skip', 'skip', 'probe']
    >>> guard.close_step(informative=10, probes=[(0.2, True), (0.2, True)])   # both probes spread
    >>> round(guard.calibration, 2), round(guard.lost_signal_estimate, 2)   # 6 x 0.2 x 2.16 / 10
    (2.16, 0.26)
    >>> guard.cap, guard.consider(0.2)                 # past the limit: nothing more is skipped
    (0.0, 'serve')
    >>> for _ in range(60):                            # steps with informative groups and no skip
    ...     guard.close_step(informative=10, probes=[])
    >>> guard.cap, guard.consider(0.2)
    (1.0, 'skip')
"""

from __future__ import annotations

import bisect
import itertools
from typing import Any, Mapping, Sequence

from shopsim_metrics.record.saved_values import number_column, saved_count, saved_number
from shopsim_metrics.settings.prompt_skip import SkipRuleSettings

STATE_FORMAT = 1
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
SKIP, PROBE, SERVE = "skip", "probe", "serve"

_NUMBERS = ("cap", "spread_probes", "predicted_probes", "step_informative", "run_informative", "run_forgone",
            "open_step_forgone")
_HISTOGRAMS = ("chances", "open_step_chances")


class LostSignalGuard:
    """Caps the predicted chance of spread a skipped draw may have (see the module docstring)."""

    def __init__(self, max_lost_signal: float = SkipRuleSettings.max_lost_signal,
                 probe_every: int = SkipRuleSettings.probe_every) -> None:
        self.max_lost_signal = max_lost_signal
        self.probe_every = probe_every
        self.cap = 1.0
        self.spread_probes = 1.0  # weighed spreads of the probes (one imagined probe that was right)
        self.predicted_probes = 1.0  # weighed predicted chances of the probes
        self.step_informative = 0.0  # informative groups judged, weighed by STEP_MEMORY
        self.run_informative = 0.0  # informative groups judged, weighed by RUN_MEMORY
        self.run_forgone = 0.0  # predicted chances of the draws skipped, weighed by RUN_MEMORY
        self.skips = 0  # draws within the cap, probes included: every probe_every-th is a probe
        self.chances = [0.0] * BINS  # predicted chances of the would-be skips, per bin, weighed by STEP_MEMORY
        self.open_step_chances = [0.0] * BINS  # the draws since the last close: the step not closed yet
        self.open_step_forgone = 0.0

    @classmethod
    def of(cls, settings: SkipRuleSettings) -> "LostSignalGuard":
        """The guard of the rule's settings (``max_lost_signal``, ``probe_every``)."""
        return cls(settings.max_lost_signal, settings.probe_every)

    @property
    def calibration(self) -> float:
        """Realised spreads over predicted chances, of the probes (1: the predictions are right)."""
        return self.spread_probes / self.predicted_probes

    @property
    def lost_signal_estimate(self) -> float | None:
        """The forgone signal over the informative groups judged, both weighed (None: nothing judged yet)."""
        return self.calibration * self.run_forgone / self.run_informative if self.run_informative else None

    def consider(self, chance: float) -> str:
        """One draw the rule would skip, with its predicted chance of spread: ``skip``, ``probe`` or ``serve``."""
        self.open_step_chances[min(int(chance * BINS), BINS - 1)] += chance
        if chance > self.cap:
            return SERVE
        self.skips += 1
        if self.probe_every and self.skips % self.probe_every == 0:
            return PROBE
        self.open_step_forgone += chance
        return SKIP

    def close_step(self, *, informative: int, probes: Sequence[tuple[float, bool]]) -> None:
        """One closed step: its informative groups judged, and the probes judged since the last call
        (predicted chance of spread, whether it spread); then the cap for the next step."""
        self.spread_probes = self.spread_probes * CALIBRATION_MEMORY + sum(spread for _, spread in probes)
        self.predicted_probes = self.predicted_probes * CALIBRATION_MEMORY + sum(chance for chance, _ in probes)
        self.step_informative = self.step_informative * STEP_MEMORY + informative
        self.chances = [old * STEP_MEMORY + new for old, new in zip(self.chances, self.open_step_chances)]
        self.run_informative = self.run_informative * RUN_MEMORY + informative
        self.run_forgone = self.run_forgone * RUN_MEMORY + self.open_step_forgone
        self.open_step_chances, self.open_step_forgone = [0.0] * BINS, 0.0
        self.cap = self._next_cap()

    def _next_cap(self) -> float:
        """The largest bin edge such that the next :data:`HORIZON` steps' skips below it, at the recent steps'
        rate, keep the estimate within the limit (the budget left spread over them, so the cap moves smoothly)."""
        if self.max_lost_signal >= 1.0:
            return 1.0
        per_step = 1.0 - STEP_MEMORY  # the step-weighed sums hold about 1 / (1 - STEP_MEMORY) steps
        informative = self.run_informative + HORIZON * self.step_informative * per_step
        allowed_per_step = (self.max_lost_signal * informative / self.calibration - self.run_forgone) / HORIZON
        within = bisect.bisect_right(list(itertools.accumulate(self.chances)), allowed_per_step / per_step)
        return within / BINS

    def record_fields(self, probe_count: int) -> dict[str, Any]:
        """The record's guard fields, with the probes served since the last record (metrics contract).

        Example:
            >>> LostSignalGuard().record_fields(2)
            {'skip_probe_count': 2, 'skip_cap': 1.0, 'skip_lost_signal_estimate': None}
        """
        return {"skip_probe_count": probe_count, "skip_cap": self.cap, "skip_lost_signal_estimate": self.lost_signal_estimate}

    def state_dict(self) -> dict[str, Any]:
        """JSON-able: the numbers, the skips counted and the histograms (the open step's too)."""
        return {"format": STATE_FORMAT, "skips": self.skips, **{name: list(getattr(self, name)) for name in _HISTOGRAMS},
                **{name: getattr(self, name) for name in _NUMBERS}}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore what :meth:`state_dict` saved; ``ValueError`` for anything else."""
        if state.get("format") != STATE_FORMAT:
            raise ValueError(f"lost-signal guard state: format: expected {STATE_FORMAT}; got {state.get('format')!r}")
        what = "lost-signal guard state"
        numbers = {name: saved_number(state.get(name), f"{what}: {name}") for name in _NUMBERS}
        for name in _HISTOGRAMS:
            number_column(state.get(name), f"{what}: {name}")
            if len(state[name]) != BINS:
                raise ValueError(f"{what}: {name}: {len(state[name])} bins, expected {BINS}")
        skips = saved_count(state.get("skips"), f"{what}: skips")
        if numbers["predicted_probes"] == 0:
            raise ValueError(f"{what}: predicted_probes: 0 (it starts at 1 and never reaches 0)")
        for name, value in numbers.items():
            setattr(self, name, value)
        for name in _HISTOGRAMS:
            setattr(self, name, [float(c) for c in state[name]])
        self.skips = skips
