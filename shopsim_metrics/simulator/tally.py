"""What the summary of a long simulated run needs, kept in constant memory while the records stream by.

A :class:`RunTally` is a sink: it counts the steps, remembers the first and last few records (for the
demo's table), the multi-wave and terminated steps (the first few of each, and how many), the longest
technical streak and the alerts (at most :data:`MAX_ALERTS`). A 100,000-step demo keeps kilobytes.

Example:
    >>> from shopsim_metrics.record.records import StepRecord
    >>> tally = RunTally(edge_rows=2)
    >>> for step in range(10):
    ...     tally.emit(StepRecord(rollout_id=step, wave_count=2 if step == 7 else 1))
    >>> tally.steps, [r.rollout_id for r in tally.table_records()], tally.multi_wave
    (10, [0, 1, 8, 9], [(7, 2)])
"""

from __future__ import annotations

from collections import Counter, deque

from shopsim_metrics.record import contract
from shopsim_metrics.record.records import StepRecord
from shopsim_metrics.health.alerts import Alert
from shopsim_metrics.sinks.base import StepSink

MAX_LISTED = 50
"""Multi-wave and terminated steps listed by name; beyond that they are counted."""

MAX_ALERTS = 1000
"""Alerts kept for the summary; beyond that they are counted."""


SKIP_SUMS = ("skipped_prompt_count", "skipped_then_generated_group_count", "skipped_then_spread_group_count")
"""The fields a run that skips sums over its steps (the demo's skipping line)."""

COST_SUMS = ("total_token_count", "aborted_token_count", "generated_token_count", "train_token_count")
"""The token fields every run sums over its steps (the demo's cost lines)."""


def format_skipping(totals: Counter) -> str | None:
    """One line on what skipping did over a run (None: the run did not skip).

    A skipped prompt is replaced by another draw that is generated: what skipping saves or costs is
    the run's tokens per informative trained group against a run without it, not this line.

    Example:
        >>> format_skipping(Counter(skipped_prompt_count=10, skipped_then_generated_group_count=4,
        ...                         skipped_then_spread_group_count=1))
        'skipping: 10 prompts skipped before generation (each replaced by a draw that was generated); skipped prompts generated again: 4, 1 with spread (25.0%)'
        >>> format_skipping(Counter()) is None
        True
    """
    if not totals:
        return None
    again, spread = totals["skipped_then_generated_group_count"], totals["skipped_then_spread_group_count"]
    rate = f"{spread / again:.1%}" if again else "-"
    return (f"skipping: {totals['skipped_prompt_count']} prompts skipped before generation (each replaced by a draw "
            f"that was generated); skipped prompts generated again: {again}, {spread} with spread ({rate})")


MAX_CAUSES = 20
"""Distinct technical causes a tally keeps over a run; the causes past them are summed as ``contract.OTHER_CAUSES``."""


def format_agent(totals: Counter, causes: Counter, tools: dict[str, Counter] | None = None) -> str | None:
    """What the agent episodes of a run were (:attr:`RunTally.agent_totals`), their tools (:attr:`RunTally.tool_totals`:
    the most called first) and the technical failures by cause (None: no agent step and no cause).

    Example:
        >>> print(format_agent(Counter(steps=2, episodes=10, turns=55.0, turns_max=9, observation=600,
        ...                            generated=1400, environment=40.0, truncated=1.0, rollout_seconds=50.0),
        ...                    Counter({"ToolTimeout: search_products": 3})))
        agent episodes: 5.5 turns per episode (longest 9); 30.0% of the response tokens were tool output (every token figure above counts generated tokens only); 4.0 s in the environment per episode (16.0% of the rollout time); 10.0% truncated
        technical failures by cause: ToolTimeout: search_products 3
        >>> print(format_agent(Counter(), Counter(), {"view_item": Counter(calls=200, errors=20, model_errors=16,
        ...                                                                seconds=240.0)}))
        tools: view_item 200 calls, 1.20 s per call, 10.0% failed (8.0% the model's)
    """
    lines = []
    episodes = totals["episodes"]
    if episodes:
        tokens = totals["observation"] + totals["generated"]
        per_episode = totals["environment"] / episodes
        rollout = totals["rollout_seconds"] / totals["steps"] if totals["steps"] else 0.0
        share = f" ({per_episode / rollout:.1%} of the rollout time)" if rollout else ""
        lines.append(f"agent episodes: {totals['turns'] / episodes:.1f} turns per episode (longest "
                     f"{totals['turns_max']}); {totals['observation'] / tokens if tokens else 0.0:.1%} of the response "
                     "tokens were tool output (every token figure above counts generated tokens only); "
                     f"{per_episode:.1f} s in the environment per episode{share}; "
                     f"{totals['truncated'] / episodes:.1%} truncated")
    if tools:
        ranked = sorted(tools.items(), key=lambda item: (-item[1]["calls"], item[0]))
        lines.append("tools: " + "; ".join(
            f"{name} {t['calls']:,} calls, {t['seconds'] / t['calls']:.2f} s per call, {t['errors'] / t['calls']:.1%} "
            f"failed ({t['model_errors'] / t['calls']:.1%} the model's)" for name, t in ranked if t["calls"]))
    if causes:
        lines.append("technical failures by cause: " + ", ".join(f"{cause} {n}" for cause, n in causes.most_common()))
    return "\n".join(lines) or None


def format_headline(totals: Counter, steps: int) -> str:
    """The run's headline cost from :attr:`RunTally.cost_totals` (:func:`~shopsim_metrics.readers.report.format_cost_headline`).

    Example:
        >>> print(format_headline(Counter(total_token_count=900, informative_groups=3, total_steps=1), 1))
        tokens per informative trained group: 300 (every token generated, aborted groups included: 900 per step, 0 of them aborted)
    """
    from shopsim_metrics.readers.report import format_cost_headline

    total = totals["total_token_count"] if totals["total_steps"] else None
    return format_cost_headline(total, totals["aborted_token_count"], totals["informative_groups"], steps)


class RunTally(StepSink):
    """A constant-memory summary of a run's records and alerts (see the module docstring)."""

    name = "tally"

    def __init__(self, *, edge_rows: int = 20, planned_steps: int | None = None) -> None:
        self.edge_rows = edge_rows
        self.planned_steps = planned_steps
        self._quarters = [[0, 0] for _ in range(4)]  # per quarter of planned_steps: [skippable, repeat zero-std]
        self.steps = 0
        self.first: list[StepRecord] = []
        self.last: deque[StepRecord] = deque(maxlen=edge_rows)
        self.multi_wave: list[tuple[int, int]] = []  # (rollout_id, wave_count), the first MAX_LISTED
        self.multi_wave_count = 0
        self.terminated: list[int] = []
        self.worst_streak: tuple[int, int] | None = None  # (streak, rollout_id)
        self.technical_failure_limit: int | None = None
        self.alerts: list[Alert] = []
        self.alert_count = 0
        self.marked: dict[int, StepRecord] = {}  # records asked for by rollout_id (e.g. the burst step)
        self.skip_totals: Counter[str] = Counter()  # sums of the skip fields (runs that skip prompts)
        self.cost_totals: Counter[str] = Counter()  # sums of the token fields and of the informative trained groups
        self.wanted: set[int] = set()
        self.staleness: Counter[str] = Counter()  # fully-async steps: carried and trained groups, the largest lag
        self.agent_totals: Counter[str] = Counter()  # agent steps: episodes, turns, tokens, environment seconds
        self.causes: Counter[str] = Counter()  # technical groups by cause (at most MAX_CAUSES causes)
        self.tool_totals: dict[str, Counter] = {}  # tool -> calls, errors, model_errors, seconds (the records' tools)

    def emit(self, record: StepRecord) -> None:
        if self.planned_steps:
            quarter = self._quarters[min(3, self.steps * 4 // self.planned_steps)]
            quarter[0] += record.skippable_group_count or 0
            quarter[1] += record.repeat_zero_std_group_count or 0
        self.steps += 1
        for name in COST_SUMS:
            self.cost_totals[name] += getattr(record, name) or 0
        self.cost_totals["informative_groups"] += record.train_group_count - record.fallback_group_count
        self.cost_totals["total_steps"] += record.total_token_count is not None
        if record.episode_count:  # a step with agent episodes
            self._add_agent(record)
        for cause, count in (record.technical_cause_counts or {}).items():
            known = cause in self.causes or len(self.causes) < MAX_CAUSES - 1
            self.causes[cause if known else contract.OTHER_CAUSES] += count
        if record.skipped_prompt_count is not None:
            for name in SKIP_SUMS:
                self.skip_totals[name] += getattr(record, name) or 0
        if len(self.first) < self.edge_rows:
            self.first.append(record)
        else:
            self.last.append(record)
        if record.rollout_id in self.wanted:
            self.marked[record.rollout_id] = record
        if record.carried_group_count is not None:  # the fully-async path: its staleness
            self.staleness["steps"] += 1
            self.staleness["carried"] += record.carried_group_count
            self.staleness["trained"] += record.train_group_count
            if record.policy_version_lag_max is not None:
                self.staleness["lag_max"] = max(self.staleness["lag_max"], record.policy_version_lag_max)
        if (record.wave_count or 0) > 1:  # None on the fully-async path: no waves
            self.multi_wave_count += 1
            if len(self.multi_wave) < MAX_LISTED:
                self.multi_wave.append((record.rollout_id, record.wave_count))
        if record.terminated and len(self.terminated) < MAX_LISTED:
            self.terminated.append(record.rollout_id)
        streak = record.max_consecutive_technical_failures
        if self.worst_streak is None or streak > self.worst_streak[0]:
            self.worst_streak = (streak, record.rollout_id)
        if self.technical_failure_limit is None:
            self.technical_failure_limit = record.technical_failure_limit

    def _add_agent(self, record: StepRecord) -> None:
        totals, episodes = self.agent_totals, record.episode_count or 0
        totals["steps"] += 1
        totals["episodes"] += episodes
        totals["turns"] += (record.turns_per_episode_mean or 0.0) * episodes
        totals["turns_max"] = max(totals["turns_max"], record.turns_per_episode_max or 0)
        totals["observation"] += record.observation_token_count or 0
        totals["generated"] += record.total_token_count or 0
        totals["environment"] += record.environment_seconds or 0.0
        totals["truncated"] += (record.truncated_episode_fraction or 0.0) * episodes
        totals["rollout_seconds"] += record.rollout_seconds or 0.0
        for name, figures in (record.tool_stats or {}).items():
            tool = self.tool_totals.get(name)
            if tool is None:
                if len(self.tool_totals) >= contract.TOOL_STATS_LIMIT:
                    name = contract.OTHER_TOOLS
                tool = self.tool_totals.setdefault(name, Counter())
            for figure in ("calls", "errors", "model_errors", "seconds"):
                tool[figure] += figures.get(figure) or 0

    def alert(self, alert: Alert) -> None:
        self.alert_count += 1
        if len(self.alerts) < MAX_ALERTS:
            self.alerts.append(alert)

    def persistence_by_quarter(self) -> list[float | None]:
        """``zero_std_persistence`` over each quarter of the planned steps (repeat / skippable summed; None:
        no skippable group); empty without ``planned_steps`` or with fewer than 4 steps."""
        if not self.planned_steps or self.steps < 4:
            return []
        return [repeat / skippable if skippable else None for skippable, repeat in self._quarters]

    def table_records(self) -> list[StepRecord]:
        """The records the summary table shows: the first and last ``edge_rows`` and the marked ones."""
        shown = {r.rollout_id: r for r in (*self.first, *self.marked.values(), *self.last)}
        return [shown[k] for k in sorted(shown)]
