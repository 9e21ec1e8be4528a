"""What skipping prompts before generation did in one step: the fields a user needs to trust it.

The skipping data source (``shopsimrl.data_source.PromptSkipDataSource``) hands the monitor the
prompts it skipped (:class:`SkippedPrompt`, one per skipped draw); when a step's record is emitted,
:class:`SkipTally` gives its skip fields (metrics contract, "Skipping prompts before generation"; the
record is built with them, :mod:`shopsim_metrics.step.draft`):

- ``skipped_prompt_count`` and the ``skipped_prompts`` rows (:data:`SKIPPED_PROMPT_COLUMNS`);
- ``skip_p_easy`` / ``skip_p_hard``: the rule's ``p`` values in force for the step's draws;
- no "tokens saved": a skipped draw is replaced by another draw that is generated, so what skipping
  saves or costs shows only in the step's ``tokens_per_informative_group`` against a run without it;
- ``skipped_then_generated_group_count``: judged groups whose prompt had been skipped since it was
  last generated; ``skipped_then_spread_group_count``: those of them with spread (the signal the
  skips delayed: what skipping cost); ``skipped_then_spread_rate`` = spread / generated;
- the predictive rule's calibration (``shopsim_prompt_skip: predictive``; None with ``greso``): of the
  groups it let through with a prediction and that were judged in this step, not technical
  (``skip_predicted_group_count``), the mean predicted zero-std probability
  (``skip_predicted_zero_std_mean``), the share that were zero-std (``skip_realised_zero_std_rate``)
  and the Brier score, the mean of (predicted − realised)² (``skip_brier_score``). A prediction is
  matched to its group by ``group_index``; one not judged yet (a partial rollout) waits for a later step.
- ``skipped_for_cost_count`` (``predictive``; None with ``greso``): the skipped prompts whose zero-std
  probability was below the threshold, skipped for their token cost (the rule's cost part).
- the lost-signal guard's (``predictive``; :mod:`shopsim_metrics.prompts.lost_signal_guard`):
  ``skip_probe_count`` (draws the rule would skip, served as probes since the last record), ``skip_cap``
  (the largest predicted chance of spread a draw may have to be skipped, for the next draws) and
  ``skip_lost_signal_estimate`` (its estimate of the run's lost signal so far), beside ``skip_max_lost_signal``
  (the limit in force, ``shopsim_prompt_skip_max_lost_signal``: the line the estimate is read against).

Skips and judged groups are put in one order by slime's ``group_index`` (a skipped draw takes a
slot of the running counter, as a served one does), so a prompt skipped and then served later in
the same step counts, and one served before it was skipped does not.

Example:
    >>> from shopsim_metrics.record.records import DecisionRow
    >>> tally = SkipTally()
    >>> row = DecisionRow(order=1, waves_open=1, group_index=5, outcome="trained", reason=None,
    ...                   remaining_before=4, unique_rollouts=2, response_tokens=300, prompt_key="a")
    >>> f = tally.step_fields([row], [SkippedPrompt("a", 2, 0.75, "zero_std_all_fail", 3)], p_easy=0.5, p_hard=0.5)
    >>> f["skipped_prompt_count"], f["skipped_then_spread_group_count"], f["skipped_then_spread_rate"]
    (1, 1, 1.0)
    >>> f["skipped_prompts"][0]["prompt_key"], f["skipped_prompts"][0]["zero_std_run"]
    ('a', 2)
"""

from __future__ import annotations

import math
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Mapping, Protocol, Sequence

from shopsim_metrics.judging.group_judgement import SPREAD, TECHNICAL
from shopsim_metrics.judging.verdicts import ZERO_STD_VERDICTS
from shopsim_metrics.record.contract import SKIPPED_PROMPT_COLUMNS
from shopsim_metrics.record.records import StepRecord
from shopsim_metrics.general.plain_values import is_int

DEFAULT_PENDING_LIMIT = 1_000_000


@dataclass(frozen=True)
class SkippedPrompt:
    """One prompt drawn for a wave and skipped without generating (a row of the ``skipped_prompts`` table)."""

    prompt_key: str
    zero_std_run: int  # its consecutive zero-std visits when it was skipped
    skip_probability: float  # 1 - max(p ** zero_std_run, floor)
    kind: str  # the zero-std verdict of that run: which p applied (zero_std_other uses the hard p)
    group_index: int | None  # slime's running counter of the skipped draw (the slot of the epoch it took)
    for_cost: bool = False  # predictive: skipped for its token cost, its zero-std probability below the threshold


class SkipTally:
    """Gives each emitted record's skip fields; remembers the prompts skipped and not generated since.

    ``limit``: prompts remembered at most as skipped-and-not-yet-generated (oldest forgotten first).
    """

    def __init__(self, limit: int = DEFAULT_PENDING_LIMIT) -> None:
        self.limit = limit
        self._pending: OrderedDict[str, None] = OrderedDict()  # skipped since last generated
        self._predicted: OrderedDict[Any, float] = OrderedDict()  # group_index -> prediction, not judged yet

    def step_fields(self, decisions: Sequence[Any] | None, skipped: Sequence[SkippedPrompt], *, p_easy: float | None,
                    p_hard: float | None, predictions: Sequence[tuple[Any, float]] | None = None,
                    guard: Mapping[str, Any] | None = None, max_lost_signal: float | None = None) -> dict[str, Any]:
        """A step's skip fields from its skipped prompts and its ledger rows (``decisions``).

        ``predictions``: ``(group_index, predicted zero-std probability)`` of the groups the predictive
        rule let through since the last record (None: a rule that does not predict); ``guard``: the
        lost-signal guard's fields (``skip_probe_count``, ``skip_cap``, ``skip_lost_signal_estimate``), given with the
        guard's limit ``max_lost_signal`` (``skip_max_lost_signal``).
        """
        rows = decisions or []
        fields = self._calibrate(predictions, rows) if predictions is not None else {}
        if predictions is not None:
            fields["skipped_for_cost_count"] = sum(1 for skip in skipped if skip.for_cost)
        if guard:
            fields.update(guard, skip_max_lost_signal=max_lost_signal)
        table = [dict(zip(SKIPPED_PROMPT_COLUMNS, (skip.prompt_key, skip.zero_std_run, skip.kind,
                                                   skip.skip_probability, skip.group_index)))
                 for skip in skipped]
        generated, spread = self._walk([(skip.prompt_key, skip.group_index) for skip in skipped], rows)
        fields.update(skipped_prompt_count=len(skipped), skipped_prompts=table, skip_p_easy=p_easy, skip_p_hard=p_hard,
                      skipped_then_generated_group_count=generated, skipped_then_spread_group_count=spread,
                      skipped_then_spread_rate=spread / generated if generated else None)
        return fields

    def _calibrate(self, predictions: Sequence[tuple[Any, float]], rows: Sequence[Any]) -> dict[str, Any]:
        """The calibration fields: each judged, scored group's prediction against its verdict."""
        for group_index, predicted in predictions:
            if group_index is not None:
                self._predicted[group_index] = predicted
        while len(self._predicted) > self.limit:
            self._predicted.popitem(last=False)
        pairs = []
        for row in rows:
            predicted = self._predicted.pop(row.group_index, None)
            verdict = _verdict(row)
            if predicted is not None and verdict != TECHNICAL:
                pairs.append((predicted, 1.0 if verdict in ZERO_STD_VERDICTS else 0.0))
        fields: dict[str, Any] = {"skip_predicted_group_count": len(pairs)}
        if pairs:
            fields.update(skip_predicted_zero_std_mean=sum(p for p, _ in pairs) / len(pairs),
                          skip_realised_zero_std_rate=sum(z for _, z in pairs) / len(pairs),
                          skip_brier_score=sum((p - z) ** 2 for p, z in pairs) / len(pairs))
        return fields

    def state_dict(self) -> dict[str, Any]:
        """The prompts skipped and not generated since, oldest first (a snapshot; the predictions waiting
        for their group are the live data source's and are not saved, as a replay of the records has none)."""
        return {"pending": list(self._pending)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Put back :meth:`state_dict`'s state.

        Example:
            >>> a = SkipTally(); _ = a._walk([("k", 1)], []); b = SkipTally(); b.load_state_dict(a.state_dict())
            >>> b.state_dict()
            {'pending': ['k']}
        """
        pending = state["pending"]
        if not isinstance(pending, list) or not set(map(type, pending)) <= {str, int}:
            raise ValueError("a saved skip tally's pending prompts must be a list of prompt keys")
        self._pending = OrderedDict((key, None) for key in pending[-self.limit:])

    def replay(self, record: StepRecord) -> None:
        """Walk a recorded step again (a resumed run, from the records): the skipped prompts still pending."""
        if record.skipped_prompt_count is None:
            return
        skips = [(row.get("prompt_key"), row.get("group_index")) for row in record.skipped_prompts or []]
        self._walk(skips, record.decisions or [])

    def _walk(self, skips: list[tuple[Any, Any]], rows: Sequence[Any]) -> tuple[int, int]:
        """Skips and judged groups in ``group_index`` order: (groups of prompts skipped since generated, with spread)."""
        events = sorted([(_order(index), 0, key, None) for key, index in skips]
                        + [(_order(row.group_index), 1, row.prompt_key, row) for row in rows], key=lambda e: e[:2])
        generated = spread = 0
        for _, is_group, key, row in events:
            if key is None:
                continue
            if not is_group:
                self._pending[key] = None
                self._pending.move_to_end(key)
                if len(self._pending) > self.limit:
                    self._pending.popitem(last=False)
            elif key in self._pending:
                del self._pending[key]
                generated += 1
                spread += _is_spread(row)
        return generated, spread


def _order(group_index: Any) -> float:
    """A draw's place in slime's running counter (unknown: after every known one)."""
    return group_index if is_int(group_index) else math.inf


def _verdict(row: Any) -> str:
    from shopsim_metrics.prompts.value import row_verdict

    return row_verdict(row)


def _is_spread(row: Any) -> bool:
    return _verdict(row) == SPREAD


@dataclass(frozen=True)
class RuleReport:
    """What a skip policy adds to a step's record (:meth:`~shopsim_metrics.prompts.skip_policy.SkipPolicy.take_report`).

    GRESO's rule: its two ``p`` values; the predictive rule: its predictions of the groups let through and its
    guard's fields (None: the rule has none).
    """

    p_easy: float | None = None
    p_hard: float | None = None
    predictions: list[tuple[Any, float]] | None = None
    guard: dict[str, Any] | None = None


class SkipSource(Protocol):
    """What the monitor asks of a skipping data source for each step's record."""

    def take_skipped(self) -> list[SkippedPrompt]:
        """The prompts skipped since the last call, oldest first."""
        ...

    def take_rule_report(self) -> RuleReport:
        """What its skip policy adds to the record, since the last call."""
        ...


class SourceSkips:
    """A skipping data source's skips since the last record, tallied into each record's skip fields.

    The data source (:class:`~shopsim_metrics.prompts.data_source.PromptSkipDataSource`) hands over its skipped
    prompts (``take_skipped``) and its policy's report (``take_rule_report``: with the predictive rule its
    predictions and guard fields, with GRESO's its two probabilities).
    """

    def __init__(self, source: SkipSource, tally: SkipTally, *, max_lost_signal: float | None = None) -> None:
        self.source = source
        self.tally = tally
        self.max_lost_signal = max_lost_signal  # the guard's limit (shopsim_prompt_skip_max_lost_signal)

    def step_fields(self, decisions: Sequence[Any] | None) -> dict[str, Any]:
        """The skip fields of the step whose ledger rows are ``decisions``."""
        report = self.source.take_rule_report()
        return self.tally.step_fields(decisions, self.source.take_skipped(), p_easy=report.p_easy,
                                      p_hard=report.p_hard, predictions=report.predictions,
                                      guard=report.guard, max_lost_signal=self.max_lost_signal)
