"""Prompt value over time: per-step fields from each judged group's prompt and its previous visit.

A prompt that was zero-std at one visit is likely to be zero-std at its next one (GRESO, arXiv
2506.02177). For every closed step, :class:`PromptValueTracker` keys each ledger row by its prompt
(:mod:`shopsim_metrics.judging.prompt_keys`), looks up the prompt's previous verdict in the bounded
:class:`~shopsim_metrics.prompts.history.PromptHistory`, records the visit, and fills the step's
fields (metrics contract, "Prompt value over time"):

- ``revisit_group_count``: groups whose prompt the history already held;
- ``skippable_group_count``: revisits whose previous visit was zero-std (a skip-on-last-verdict
  rule would not have generated them);
- ``repeat_zero_std_group_count``: skippable groups that are zero-std again;
- ``skippable_spread_group_count``: skippable groups that had spread after all;
- ``zero_std_persistence``: repeat / skippable (None when nothing was skippable);
- ``skippable_token_fraction``: tokens of the repeat groups / ``generated_token_count`` (None
  when the records carry no token counts);
- ``tracked_prompt_count``: prompts in the history at step end.

Groups are visited in judgement order, so a prompt judged twice in one step is a revisit the second
time. The tracker only measures: it never changes what the filter decides, nor edits a record: it
returns the step's fields (:meth:`PromptValueTracker.step_fields`), which the step's record is built
with (:mod:`shopsim_metrics.step.draft`). The same tracker replays a run's records
(``shopsim-metrics prompts``), so the live fields and the replay agree.

Example:
    >>> from shopsim_metrics.record.records import DecisionRow, StepRecord
    >>> def row(order, key, reason):
    ...     return DecisionRow(order=order, waves_open=1, group_index=order, outcome="dropped_zero_std",
    ...                        reason=reason, remaining_before=32, unique_rollouts=8, success_count=0,
    ...                        scorable_rollouts=8, prompt_key=key)
    >>> z = "shopsim_zero_std_group"
    >>> tracker = PromptValueTracker()
    >>> _ = tracker.observe(StepRecord(rollout_id=0, decisions=[row(1, "a", z), row(2, "b", z)]))
    >>> f = tracker.observe(StepRecord(rollout_id=1, decisions=[row(1, "a", z), row(2, "b", None)]))
    >>> (f["revisit_group_count"], f["skippable_group_count"], f["repeat_zero_std_group_count"],
    ...  f["skippable_spread_group_count"], f["zero_std_persistence"], f["tracked_prompt_count"])
    (2, 2, 1, 1, 0.5, 2)
"""

from __future__ import annotations

import logging
from collections import Counter
from typing import Any, Sequence

from shopsim_metrics.record import contract as C
from shopsim_metrics.judging.group_judgement import SPREAD
from shopsim_metrics.judging.verdicts import ZERO_STD_VERDICTS, verdict_of
from shopsim_metrics.prompts.history import (
    DEFAULT_FORGETTING, DEFAULT_LIMIT, VERDICT_LETTERS, PromptHistory, PromptStats,
)
from shopsim_metrics.judging.prompt_keys import KEY_NONE, combine_sources, history_key, prompt_key
from shopsim_metrics.record.records import DecisionRow, StepRecord
from shopsim_metrics.record.saved_values import saved_count, saved_counts
from shopsim_metrics.general.warn_once import WarnOnce

logger = logging.getLogger("shopsim_metrics")

PROMPT_TABLE_ROWS = 50
"""The prompts table lists this many prompts: the ones that wasted the most generation."""


def row_verdict(row: DecisionRow) -> str:
    """A ledger row's verdict (``spread``, ``zero_std_all_pass`` ... ``technical``), from its reason."""
    return verdict_of(C.KIND_OF_REASON.get(row.reason, SPREAD), row.success_count, row.scorable_rollouts)


def table_row(stats: PromptStats, tokens_known: bool) -> list[Any]:
    """One row of the prompts table, in :data:`PROMPT_TABLE_COLUMNS` order (tokens None when unknown)."""
    return [stats.key, stats.visits, stats.verdict_letters, stats.zero_std_run, stats.zero_std_visits,
            stats.tokens if tokens_known else None, stats.wasted_tokens if tokens_known else None]


class PromptValueTracker:
    """Keys the groups of each closed step by prompt, keeps their history, fills the step's fields.

    ``metadata_key``: the ``shopsim_prompt_key`` setting; ``limit``: ``shopsim_prompt_history_limit``;
    ``table_every``: attach the prompts table to every N-th step (``shopsim_prompts_table_every``,
    0: never on schedule).
    """

    def __init__(self, *, metadata_key: str | None = None, limit: int = DEFAULT_LIMIT, table_every: int = 0,
                 forgetting: float = DEFAULT_FORGETTING) -> None:
        self.metadata_key = metadata_key
        self.history = PromptHistory(limit, forgetting=forgetting)
        self.table_every = table_every
        self.tokens_known = False  # some visit carried a token count
        self.last_step: tuple[int, Counter[str]] | None = None
        """(rollout_id, verdict counts of its judged groups) of the latest observed step: what a skip rule adapts to."""
        self.last_step_trained_informative: int | None = None
        """Groups of the latest observed step trained with spread (the ledger's ``trained`` rows): what the guard's
        lost signal is per (None: not known, e.g. restored from a snapshot that did not save it)."""
        self._warn_once = WarnOnce(logger)

    def keys(self, groups: Sequence[Any]) -> list[tuple[str | None, str]] | None:
        """Each group's prompt key and where it came from (``prompt_keys.KEY_SOURCES``); None (warned once) should
        keying fail: then the step is not tracked. Never raises."""
        try:
            return [prompt_key(group, self.metadata_key) for group in groups]
        except Exception as exc:  # noqa: BLE001 - prompt tracking must never cost a step its record
            self._warn(exc)
            return None

    def step_fields(self, rollout_id: int, decisions: Sequence[DecisionRow], *, generated_token_count: int | None,
                    sources: set[str]) -> dict[str, Any]:
        """:meth:`observe` a closed step whose rows carry the :meth:`keys` of its groups (``sources``: theirs);
        its prompt-value fields, and the prompts table on the steps it is due. Never raises."""
        fields: dict[str, Any] = {}
        try:
            fields["prompt_key_source"] = combine_sources(sources)
            fields.update(self.observe_rows(rollout_id, decisions, generated_token_count))
            if self.table_every and rollout_id % self.table_every == 0:
                fields["prompt_table"] = self.table()
        except Exception as exc:  # noqa: BLE001 - prompt tracking must never cost a step its record
            self._warn(exc)
        return fields

    def _warn(self, exc: Exception) -> None:
        self._warn_once("prompt_tracking", "shopsim-metrics: prompt tracking failed (%s: %s); the step records stay "
                        "complete but their prompt-value fields are null.", type(exc).__name__, exc)

    def observe(self, record: StepRecord) -> dict[str, Any]:
        """Visit a recorded step's prompts (a replay, a resume): the prompt-value fields it would be given.

        ``prompt_key_source`` is among them only when the record has none.
        """
        fields = self.observe_rows(record.rollout_id, record.decisions, getattr(record, "generated_token_count", None))
        if record.prompt_key_source is None:
            fields["prompt_key_source"] = combine_sources(
                {KEY_NONE} if not record.decisions else {_source_of(r.prompt_key) for r in record.decisions})
        return fields

    def replay(self, record: StepRecord) -> None:
        """Visit a recorded step's prompts for the history alone (a resume replaying the records)."""
        self.observe(record)

    def observe_rows(self, rollout_id: int, decisions: Sequence[DecisionRow],
                     generated_token_count: int | None) -> dict[str, Any]:
        """Visit every ledger row's prompt (by ``prompt_key``) in judgement order; the step's prompt-value fields."""
        history = self.history
        revisits = skippable = repeat = skippable_spread = 0
        repeat_tokens = 0
        tokens_complete = True
        verdicts: Counter[str] = Counter()
        trained_informative = 0
        for row in sorted(decisions, key=lambda r: r.order):
            trained_informative += row.outcome == C.OUTCOME_TRAINED
            tokens = getattr(row, "response_tokens", None)
            if tokens is None:
                tokens_complete = False
            verdict = row_verdict(row)
            verdicts[verdict] += 1
            if row.prompt_key is None:
                continue
            previous = history.visit(history_key(row.prompt_key), verdict, tokens, successes=row.success_count,
                                     scored=row.scorable_rollouts, step=rollout_id)
            if previous is None:
                continue
            revisits += 1
            if previous not in ZERO_STD_VERDICTS:
                continue
            skippable += 1
            if verdict in ZERO_STD_VERDICTS:
                repeat += 1
                repeat_tokens += tokens or 0
            elif verdict == SPREAD:
                skippable_spread += 1
        if tokens_complete and decisions:
            self.tokens_known = True
        self.last_step = (rollout_id, verdicts)
        self.last_step_trained_informative = trained_informative
        generated = generated_token_count
        return {
            "revisit_group_count": revisits,
            "skippable_group_count": skippable,
            "repeat_zero_std_group_count": repeat,
            "skippable_spread_group_count": skippable_spread,
            "zero_std_persistence": repeat / skippable if skippable else None,
            "skippable_token_fraction": repeat_tokens / generated if tokens_complete and generated else None,
            "tracked_prompt_count": len(history),
            "prompt_history_limit": history.limit,
        }

    def state_dict(self) -> dict[str, Any]:
        """What a resumed run needs of this tracker (a snapshot, :mod:`shopsim_metrics.run.snapshot`)."""
        last = None if self.last_step is None else [self.last_step[0], dict(self.last_step[1])]
        return {"history": self.history.state_columns(), "tokens_known": self.tokens_known, "last_step": last,
                "last_step_trained_informative": self.last_step_trained_informative}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Put back :meth:`state_dict`'s state (raises ``ValueError``/``KeyError``/``TypeError`` for another shape).

        Example:
            >>> a = PromptValueTracker(); a.history.visit("k", SPREAD, 5); a.tokens_known = True
            >>> b = PromptValueTracker(); b.load_state_dict(a.state_dict())
            >>> b.tokens_known, b.history.stats("k").tokens
            (True, 5)
        """
        last = state["last_step"]
        last_step = None
        if last is not None:
            if not isinstance(last, list) or len(last) != 2:
                raise ValueError("a saved last step must be [rollout_id, {verdict: groups}]")
            verdicts = saved_counts(last[1], "the last step's verdicts")
            if not set(verdicts) <= set(VERDICT_LETTERS):
                raise ValueError(f"the last step's verdicts: {sorted(set(verdicts) - set(VERDICT_LETTERS))[:3]} "
                                 f"are not verdicts ({', '.join(VERDICT_LETTERS)})")
            last_step = (saved_count(last[0], "the last step"), Counter(verdicts))
        trained = state.get("last_step_trained_informative")  # absent from the snapshots of earlier versions
        if trained is not None:
            trained = saved_count(trained, "the last step's informative trained groups")
        self.history.load_state_columns(state["history"])
        self.tokens_known = bool(state["tokens_known"])
        self.last_step = last_step
        self.last_step_trained_informative = trained if last_step is not None else None

    def table(self, count: int = PROMPT_TABLE_ROWS) -> list[list[Any]]:
        """The prompts table: the ``count`` prompts that wasted the most generation."""
        return [table_row(stats, self.tokens_known) for stats in self.history.most_wasted(count)]


def _source_of(key: str | None) -> str:
    if key is None:
        return KEY_NONE
    return "prompt_hash" if isinstance(history_key(key), int) else "metadata"
