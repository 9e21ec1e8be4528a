"""The predictive rule as a skip policy, with its lost-signal guard and the guard's probe bookkeeping.

Each draw is put to :class:`~shopsim_metrics.prompts.predictive_rule.PredictiveSkipRule` (its forgetting success
evidence and relative token cost, read from the history); a skip passes the guard
(:class:`~shopsim_metrics.prompts.lost_signal_guard.LostSignalGuard`), which may serve it as a probe (or because it
is past the cap), and such a draw's verdict, read at the prompt's next visit, goes to the guard at the next closed
step with the step's informative trained groups. The prediction of every prompt let through (with evidence) is
reported for the calibration fields (:meth:`PredictivePolicy.take_report`).

State: the guard's numbers and the probes served but not judged yet, under ``guard``; a guard state that holds
what no run reaches is left aside with one warning (the guard starts afresh). The rule itself is stateless.

Example:
    >>> from shopsim_metrics.settings.prompt_skip import SkipRuleSettings
    >>> policy = PredictivePolicy(SkipRuleSettings(), n_samples=8)
    >>> sorted(policy.state_dict()["guard"])[:3], policy.take_report().predictions
    (['cap', 'chances', 'counted_probes'], [])
    >>> PredictivePolicy(SkipRuleSettings(), n_samples=None)
    Traceback (most recent call last):
    ...
    ValueError: shopsim_prompt_skip: predictive needs slime's n_samples_per_prompt (an integer >= 1); got None
"""

from __future__ import annotations

import logging
import threading
from typing import Any, Mapping

from shopsim_metrics.judging.group_judgement import SPREAD
from shopsim_metrics.general.plain_values import is_int, is_number
from shopsim_metrics.judging.verdicts import ZERO_STD_ALL_FAIL, ZERO_STD_ALL_PASS, ZERO_STD_VERDICTS
from shopsim_metrics.prompts.lost_signal_guard import PROBE, SKIP, LostSignalGuard
from shopsim_metrics.prompts.predictive_rule import PredictiveSkipRule
from shopsim_metrics.prompts.skip_evidence import SkipHistory, StepShares
from shopsim_metrics.prompts.skip_policy import PolicyDecision
from shopsim_metrics.prompts.skip_record import RuleReport
from shopsim_metrics.settings.prompt_skip import SkipRuleSettings

logger = logging.getLogger("shopsim_metrics")


class PredictivePolicy:
    """The predictive rule under its lost-signal guard (``shopsim_prompt_skip: predictive``)."""

    def __init__(self, settings: SkipRuleSettings, *, n_samples: Any) -> None:
        self.settings = settings
        self.rule = PredictiveSkipRule(settings, n_samples=_group_size(n_samples))
        self.guard = LostSignalGuard.of(settings)
        """Keeps the skips' lost signal under ``shopsim_prompt_skip_max_lost_signal``, on probes."""
        self.probes: dict[str, tuple[int, float]] = {}
        """Probes served and not judged yet: key -> (its visits when probed, predicted chance of spread)."""
        self._predictions: list[tuple[Any, float]] = []  # (group_index, predicted zero-std) of the groups let through
        self._probe_count = 0  # probes served since the last report
        self._lock = threading.Lock()  # the monitor takes the report from another thread than the one serving

    def decide(self, key: str, group_index: Any, history: SkipHistory) -> PolicyDecision:
        run, kind = history.zero_std_run(key)
        evidence = history.success_evidence(key)
        decision = self.rule.decide(evidence, history.relative_cost(key))
        skip = decision.skip and self._guard_skips(key, 1.0 - decision.probability, history)
        if evidence is not None and kind is None:  # the side the evidence leans to
            kind = ZERO_STD_ALL_PASS if evidence[0] > evidence[1] else ZERO_STD_ALL_FAIL
        if not skip and evidence is not None:
            with self._lock:
                self._predictions.append((group_index, decision.probability))
        return PolicyDecision(skip=skip, probability=decision.probability, zero_std_run=run, kind=kind,
                              for_cost=decision.for_cost and skip)

    def _guard_skips(self, key: str, chance: float, history: SkipHistory) -> bool:
        """The guard's word on a draw the rule skips: skipped, or served (a probe, or past its cap)."""
        action = self.guard.consider(chance)
        if action == SKIP:
            return True
        self.probes[key] = (history.visits(key)[0], chance)  # a probe or a draw past the cap: its verdict is read
        if action == PROBE:
            with self._lock:
                self._probe_count += 1
        return False

    def close_step(self, closed: StepShares, history: SkipHistory) -> None:
        """The probes judged since, and the step's informative trained groups, to the guard."""
        judged = []
        for key, (visits_then, chance) in list(self.probes.items()):
            visits, verdicts = history.visits(key)
            if visits > visits_then:  # the probe's visit is the first since
                del self.probes[key]
                since = visits - visits_then
                verdict = verdicts[-since] if since <= len(verdicts) else None
                if verdict == SPREAD or verdict in ZERO_STD_VERDICTS:
                    judged.append((chance, verdict == SPREAD))
        informative = closed.informative if closed.trained_informative is None else closed.trained_informative
        self.guard.close_step(informative=informative, probes=judged)

    def take_predictions(self) -> list[tuple[Any, float]]:
        """``(group_index, predicted zero-std probability)`` of the groups let through since the last call."""
        with self._lock:
            predictions, self._predictions = self._predictions, []
        return predictions

    def take_guard_fields(self) -> dict[str, Any]:
        """The guard's record fields: the probes served since the last call, its cap and estimate."""
        with self._lock:
            probes, self._probe_count = self._probe_count, 0
        return self.guard.record_fields(probes)

    def take_report(self) -> RuleReport:
        return RuleReport(predictions=self.take_predictions(), guard=self.take_guard_fields())

    def state_dict(self) -> dict[str, Any]:
        return {"guard": {**self.guard.state_dict(),  # and the probes served but not judged yet
                          "pending_probes": [[key, visits, chance] for key, (visits, chance) in self.probes.items()]}}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """The guard's saved state, checked (:meth:`LostSignalGuard.load_state_dict`); one that holds what no run
        reaches (a spread of 1e308, predicted chances of 1e-300 for a probe that spread) is left aside with one
        warning, and the guard starts afresh: it skips nothing until its probes bound the calibration again. A state
        without a guard (saved by another mode or an older version) warns alike. A ``rule`` key (GRESO's numbers,
        which states saved before the policies held for every mode) is not read."""
        if "guard" not in state:
            logger.warning("shopsim-metrics: the prompt-skip state holds no lost-signal guard (saved by a version "
                           "without it, or with another shopsim_prompt_skip): the guard starts afresh")
            return
        saved = state["guard"]
        try:
            if not isinstance(saved, dict):
                raise ValueError(f"lost-signal guard state: expected an object; got {type(saved).__name__}")
            probes = _pending_probes(saved.get("pending_probes", []))
            self.guard.load_state_dict(saved)
        except ValueError as exc:
            logger.warning("shopsim-metrics: the prompt-skip state's lost-signal guard was left aside (%s); the guard "
                           "starts afresh and skips only as its new probes allow", str(exc)[:200])
            self.guard = LostSignalGuard.of(self.settings)
            self.probes = {}
            return
        self.probes = probes


def _pending_probes(rows: Any) -> dict[str, tuple[int, float]]:
    """The probes served and not judged yet, as :meth:`PredictivePolicy.state_dict` saved them.

    Example:
        >>> _pending_probes([["b2:00000000000000a", 3, 0.25]])
        {'b2:00000000000000a': (3, 0.25)}
        >>> _pending_probes([["k", -1, 0.25]])
        Traceback (most recent call last):
        ...
        ValueError: pending_probes: expected [key, visits >= 0, chance in [0, 1]] rows; got ['k', -1, 0.25]
    """
    probes = {}
    for row in rows if isinstance(rows, list) else [rows]:
        if not (isinstance(row, list) and len(row) == 3 and isinstance(row[0], str) and is_int(row[1]) and row[1] >= 0
                and is_number(row[2]) and 0.0 <= row[2] <= 1.0):
            raise ValueError(f"pending_probes: expected [key, visits >= 0, chance in [0, 1]] rows; got {row!r}")
        probes[row[0]] = (row[1], float(row[2]))
    return probes


def _group_size(n: Any) -> int:
    """slime's ``n_samples_per_prompt``: the group size the predictive rule predicts for."""
    if not is_int(n) or n < 1:
        raise ValueError(f"shopsim_prompt_skip: predictive needs slime's n_samples_per_prompt (an integer >= 1); "
                         f"got {n!r}")
    return n
