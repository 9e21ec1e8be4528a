"""The one declarative dashboard spec: which panels exist and which contract keys each one draws.

Both renderers (the offline plotly HTML and the W&B workspace / report) read this spec, so the
dashboards can never disagree about what a panel shows. Keys are *names* from
:mod:`shopsim_metrics.record.contract`: per-step panels use names of ``contract.WANDB_SCALAR_NAMES``
(the W&B key is ``contract.wandb_key(name)``), ledger panels use ``contract.LEDGER_COLUMNS``.

Example:
    >>> spec = dashboard_spec()
    >>> spec.panel("waves").series[0].key
    'wave_count'
    >>> DashboardSpec.from_dict(spec.to_dict()) == spec
    True
    >>> "train_group_count" in spec.panel("outcomes").keys()
    True
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from shopsim_metrics.record import contract

PanelKind = Literal["stacked_bar", "line", "ledger_remaining"]
PanelSource = Literal["steps", "ledger"]
SeriesStyle = Literal["bar", "line", "threshold"]

PANELS_JSON_NAME = "panels.json"

BREAKDOWN_FIELDS = ("technical_cause_counts",)
"""Record fields a panel may break its series down by: a ``{label: count}`` mapping per step."""

# One colour per outcome, shared by the stacked bars and the ledger scatter.
OUTCOME_COLORS: dict[str, str] = {
    contract.OUTCOME_TRAINED: "#2ca02c",
    contract.OUTCOME_FALLBACK: "#bcbd22",
    contract.OUTCOME_DROPPED_TECHNICAL: "#d62728",
    contract.OUTCOME_DROPPED_ZERO_STD: "#ff7f0e",
    contract.OUTCOME_SURPLUS: "#1f77b4",
    contract.ABORTED: "#7f7f7f",
}


@dataclass(frozen=True)
class Series:
    """One drawn quantity of a panel.

    ``key`` is a contract name; when ``minus`` is set the series is derived as ``key - minus``
    (e.g. ``trained = train_group_count - fallback_group_count``, since the contract logs the
    train batch and its fallback part, not ``trained`` on its own).
    """

    key: str
    label: str
    style: SeriesStyle = "line"
    minus: str | None = None
    color: str | None = None

    def keys(self) -> tuple[str, ...]:
        return (self.key,) if self.minus is None else (self.key, self.minus)


@dataclass(frozen=True)
class Panel:
    """One panel: what it shows, from which record, and why a person looks at it."""

    id: str  # stable id: the HTML div is ``panel-<id>``, the W&B panel id derives from it
    title: str
    description: str  # one or two sentences: what to read off the panel
    kind: PanelKind
    source: PanelSource  # "steps": per-step fields; "ledger": the per-group decision ledger
    section: str
    series: tuple[Series, ...]
    y_title: str = ""
    # Ledger panels: columns used besides the series (x axis, colour, markers, hover).
    x_key: str | None = None
    color_key: str | None = None
    size_key: str | None = None  # ledger panels: marker size follows this column (e.g. response_tokens)
    marker_key: str | None = None
    hover_keys: tuple[str, ...] = ()
    step_choice: str | None = None  # which step a ledger panel shows by default
    # Per-step keys that summarise a ledger panel over steps (drawn where the ledger is absent, e.g. W&B).
    step_summary: tuple[str, ...] = ()
    # StepRecord knobs drawn as reference lines (e.g. rollout_batch_size).
    knob_lines: tuple[str, ...] = ()
    # Ledger panels: the record key whose W&B table (key_prefix + name) carries the ledger.
    wandb_table: str | None = None
    # A record field holding a {label: count} mapping per step (e.g. technical_cause_counts): the HTML stacks one
    # bar per label under the series; W&B draws the series only (labels are free text, never W&B keys).
    breakdown_key: str | None = None

    def keys(self) -> tuple[str, ...]:
        """Every contract name the panel references, in first-use order."""
        out: list[str] = []
        for s in self.series:
            out.extend(s.keys())
        for k in (self.x_key, self.color_key, self.size_key, self.marker_key, *self.hover_keys):
            if k is not None:
                out.append(k)
        return tuple(dict.fromkeys(out))

    def step_keys(self) -> tuple[str, ...]:
        """Per-step names (``contract.WANDB_SCALAR_NAMES``) the panel uses."""
        own = self.keys() if self.source == "steps" else ()
        return tuple(dict.fromkeys((*own, *self.step_summary)))

    def ledger_keys(self) -> tuple[str, ...]:
        """Ledger column names (``contract.LEDGER_COLUMNS``) the panel uses."""
        return self.keys() if self.source == "ledger" else ()


@dataclass(frozen=True)
class DashboardSpec:
    """The whole dashboard: sections in order, and the panels inside them."""

    title: str
    x_key: str  # the W&B step key every per-step panel is drawn against
    key_prefix: str  # W&B key = key_prefix + name
    sections: tuple[str, ...]
    panels: tuple[Panel, ...] = field(default_factory=tuple)

    def step_names(self) -> tuple[str, ...]:
        """Every per-step name the panels read: their series, step summaries and reference lines."""
        return tuple(dict.fromkeys(k for p in self.panels for k in (*p.step_keys(), *p.knob_lines)))

    def panel(self, panel_id: str) -> Panel:
        for p in self.panels:
            if p.id == panel_id:
                return p
        raise KeyError(f"no panel {panel_id!r} in the dashboard spec; known ids: {[p.id for p in self.panels]}")

    def panels_in(self, section: str) -> tuple[Panel, ...]:
        return tuple(p for p in self.panels if p.section == section)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        for p in data["panels"]:
            p["step_keys"] = list(self.panel(p["id"]).step_keys())
            p["ledger_keys"] = list(self.panel(p["id"]).ledger_keys())
        return data

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=False) + "\n"

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "DashboardSpec":
        panels = []
        for p in data["panels"]:
            p = {k: v for k, v in p.items() if k not in ("step_keys", "ledger_keys")}
            series = tuple(Series(**s) for s in p.pop("series"))
            tuples = {k: tuple(p[k]) for k in ("hover_keys", "step_summary", "knob_lines") if k in p}
            panels.append(Panel(**{**p, **tuples}, series=series))
        return cls(
            title=data["title"],
            x_key=data["x_key"],
            key_prefix=data["key_prefix"],
            sections=tuple(data["sections"]),
            panels=tuple(panels),
        )


def unknown_keys(spec: DashboardSpec) -> list[str]:
    """Every ``panel:key`` of the spec that the contract does not define (empty when all is well); a
    ``breakdown_key`` must be one of :data:`BREAKDOWN_FIELDS`."""
    bad = []
    for p in spec.panels:
        if p.breakdown_key is not None and p.breakdown_key not in BREAKDOWN_FIELDS:
            bad.append(f"{p.id}:{p.breakdown_key}")
        for k in p.step_keys():
            if k not in contract.WANDB_SCALAR_NAMES:
                bad.append(f"{p.id}:{k}")
        for k in p.ledger_keys():
            if k not in contract.LEDGER_COLUMNS:
                bad.append(f"{p.id}:{k}")
    return bad


def dashboard_spec() -> DashboardSpec:
    """Build the project's dashboard spec (pure: same result on every call)."""
    o = OUTCOME_COLORS
    waves, signal, health = "Wave dynamics", "Learning signal", "Health and waste"
    prompt_value = "Prompt value"
    cost = "Cost"
    agent = "Agent episodes"
    skipping = "Skipping"
    panels = (
        Panel(
            id="outcomes",
            title="Outcome of every judged group per step",
            description=(
                "Stacked: trained + fallback = train_group_count (the groups entering the trainer); + technical "
                "drop + zero-std drop + surplus = accepted_group_count (every group judged by the filter, drops "
                "included); aborted groups (still generating when the batch filled) on top make the submitted total."
            ),
            kind="stacked_bar",
            source="steps",
            section=waves,
            y_title="groups",
            series=(
                Series("train_group_count", "trained (train_group_count - fallback)", "bar", minus="fallback_group_count",
                       color=o["trained"]),
                Series("fallback_group_count", "fallback (zero-std let through)", "bar", color=o["fallback"]),
                Series("technical_group_drop_count", "technical drop", "bar", color=o["dropped_technical"]),
                Series("zero_std_group_drop_count", "zero-std drop", "bar", color=o["dropped_zero_std"]),
                Series("surplus_group_count", "surplus", "bar", color=o["surplus"]),
                Series("aborted_group_count", "aborted (never judged)", "bar", color=o["aborted"]),
            ),
        ),
        Panel(
            id="zero_std_causes",
            title="Zero-std groups: too easy or too hard",
            description=(
                "Stacked: every judged zero-std group (dropped, fallback or surplus) by why it had no spread: all "
                "rollouts succeeded (too easy), none did (too hard), or neither; the stack is zero_std_group_count, "
                "of which zero_std_group_drop_count were dropped."
            ),
            kind="stacked_bar",
            source="steps",
            section=waves,
            y_title="zero-std groups",
            series=(
                Series("zero_std_all_pass_group_count", "all pass (too easy)", "bar", color="#98df8a"),
                Series("zero_std_all_fail_group_count", "all fail (too hard)", "bar", color="#ff9896"),
                Series("zero_std_other_group_count", "other (same partial reward)", "bar", color="#c5b0d5"),
            ),
        ),
        Panel(
            id="waves",
            title="Over-sampling waves per step",
            description=(
                "1 = the first wave was enough; 2 or more = drops pushed remaining below rollout_batch_size. "
                "With adaptive waves, the line is the predicted P(another wave) as each step's first wave was "
                "sized: over many steps its mean should match the share of steps with 2 or more (inspect "
                "prints both)."
            ),
            kind="line",
            source="steps",
            section=waves,
            y_title="waves / probability",
            series=(Series("wave_count", "waves submitted", "bar", color="#9467bd"),
                    Series("predicted_second_wave_probability", "predicted P(another wave) (adaptive)",
                           color="#17becf")),
        ),
        Panel(
            id="remaining_ledger",
            title="remaining through one step (decision ledger)",
            description=(
                "remaining_batch_size before each judgement, in judgement order, coloured by outcome and sized "
                "by the group's response tokens; dotted lines mark where a new wave was open. At or below "
                "rollout_batch_size, zero-std groups take the fallback instead of being dropped."
            ),
            kind="ledger_remaining",
            source="ledger",
            section=waves,
            y_title="remaining before the judgement",
            series=(Series("remaining_before", "remaining before", "line"),),
            x_key="order",
            color_key="outcome",
            size_key="response_tokens",
            marker_key="waves_open",
            hover_keys=("group_index", "reason", "failed_check", "unique_rollouts", "reward_mean",
                        "response_tokens", "judged_at"),
            step_choice="latest_multi_wave",
            step_summary=("remaining_min", "wave_count"),
            knob_lines=("rollout_batch_size",),
            wandb_table="decisions",
        ),
        Panel(
            id="success_rate",
            title="Success rate: all completed generations vs the train batch",
            description="The train batch is biased towards groups with spread; the all-generations rate is not.",
            kind="line",
            source="steps",
            section=signal,
            y_title="success rate",
            series=(
                Series("success_rate", "all completed generations", color="#1f77b4"),
                Series("train_success_rate", "train batch", color="#ff7f0e"),
            ),
        ),
        Panel(
            id="reward_mean",
            title="Reward mean: all completed generations vs the train batch",
            description="Same contrast as the success rate, for the (possibly non-binary) reward.",
            kind="line",
            source="steps",
            section=signal,
            y_title="reward",
            series=(
                Series("reward_mean", "all completed generations", color="#1f77b4"),
                Series("train_reward_mean", "train batch", color="#ff7f0e"),
            ),
        ),
        Panel(
            id="length_bias",
            title="Length bias of the train batch",
            description=(
                "Mean response length of the train batch / mean over every rollout the step started (judged ones, "
                "and those slime aborted when the batch filled, at their partial length). Below 1: the batch "
                "trains on shorter answers than the step generated (slime aborts the slow, long ones; dropping "
                "zero-std groups shifts it again). The aborted lengths are lower bounds, so a value below 1 is "
                "certain. The lengths themselves are train_response_length_mean, accepted_response_length_mean, "
                "started_response_length_mean and aborted_response_length_mean. Empty without the sample hook wired."
            ),
            kind="line",
            source="steps",
            section=signal,
            y_title="train / started mean length",
            series=(Series("length_bias", "length bias (train / every rollout started)", color="#000000"),),
        ),
        Panel(
            id="zero_advantage",
            title="Zero-advantage fraction of the train batch",
            description="fallback groups / train groups: the share of the batch that carries no GRPO gradient.",
            kind="line",
            source="steps",
            section=signal,
            y_title="fraction",
            series=(Series("zero_advantage_train_fraction", "zero-advantage fraction", color=o["fallback"]),),
        ),
        Panel(
            id="technical_streak",
            title="Technical-failure streak against the limit",
            description=("A streak that reaches the warning threshold raises the step's WARN; the run terminates "
                         "when it reaches the limit."),
            kind="line",
            source="steps",
            section=health,
            y_title="consecutive technical groups",
            series=(
                Series("max_consecutive_technical_failures", "longest streak in the step", color="#d62728"),
                Series("consecutive_technical_failures", "streak at step end", color="#ff9896"),
                Series("technical_failure_warn_at", "warning threshold", "threshold", color="#ff7f0e"),
                Series("technical_failure_limit", "limit", "threshold", color="#000000"),
            ),
        ),
        Panel(
            id="alerts",
            title="Alerts raised per step",
            description=("The alerts of each step as the records carry them (a WARN when a technical streak reached "
                         "the warning threshold, the ERROR at the limit): how many, and the highest level (1 INFO, "
                         "2 WARN, 3 ERROR; 0 none). Their titles and texts are in the records' alerts and W&B's "
                         "alert list."),
            kind="line",
            source="steps",
            section=health,
            y_title="alerts / level",
            series=(
                Series("alert_count", "alerts raised", "bar", color="#e377c2"),
                Series("alert_level", "highest level (1 INFO, 2 WARN, 3 ERROR)", color="#d62728"),
            ),
        ),
        Panel(
            id="drop_rates",
            title="Drop rates (shared denominator: accepted groups)",
            description="technical drops / accepted and zero-std drops / accepted; each counts only its own drops.",
            kind="line",
            source="steps",
            section=health,
            y_title="rate",
            series=(
                Series("technical_group_drop_rate", "technical drop rate", color=o["dropped_technical"]),
                Series("zero_std_group_drop_rate", "zero-std drop rate", color=o["dropped_zero_std"]),
            ),
        ),
        Panel(
            id="wasted_samples",
            title="Wasted samples",
            description="Samples of accepted groups that do not enter the trainer / samples of accepted groups.",
            kind="line",
            source="steps",
            section=health,
            y_title="fraction",
            series=(Series("wasted_sample_fraction", "wasted sample fraction", color="#8c564b"),),
        ),
        # --- slime's fully-async path: groups in flight across steps (docs §3.8) ---
        Panel(
            id="policy_version_lag",
            title="Policy-version lag of the train batch (fully-async)",
            description=("Weight updates between the newest policy the step saw and the one each trained group was "
                         "generated with: the batch's mean, its token-weighted mean and its largest. A pool deeper "
                         "than the batch carries groups across steps, and long generations are the stalest; the "
                         "advisory 'policy lag high' is raised at a median of 4 over 4 steps."),
            kind="line",
            source="steps",
            section=health,
            y_title="weight updates",
            series=(
                Series("policy_version_lag_mean", "mean", color="#1f77b4"),
                Series("policy_version_lag_token_mean", "token-weighted mean", color="#9467bd"),
                Series("policy_version_lag_max", "largest", color="#d62728"),
            ),
        ),
        Panel(
            id="carried_groups",
            title="Carried groups of the train batch (fully-async)",
            description=("Trained groups drawn in an earlier step: slime's worker keeps its pool generating across "
                         "the step boundary, and the step takes what finished first. Against the train batch."),
            kind="line",
            source="steps",
            section=health,
            y_title="groups",
            series=(
                Series("carried_group_count", "carried groups", "bar", color="#17becf"),
                Series("train_group_count", "train batch", color="#7f7f7f"),
            ),
        ),
        # --- prompt value over time ---
        Panel(
            id="zero_std_persistence",
            title="Zero-std persistence",
            description=(
                "P(zero-std now | zero-std at the prompt's previous visit). Rising towards 1: zero-std is a "
                "property of the prompt, and skipping such prompts before rollout would pay."
            ),
            kind="line",
            source="steps",
            section=prompt_value,
            y_title="probability",
            series=(Series("zero_std_persistence", "zero-std persistence", color="#e377c2"),),
        ),
        Panel(
            id="skippable_groups",
            title="Skippable groups: zero-std again vs spread after all",
            description=(
                "Revisits whose previous visit was zero-std (a skip-on-last-verdict rule would not have generated "
                "them), split into those zero-std again (saved) and those with spread after all (signal lost), "
                "against all accepted groups (judged by the filter)."
            ),
            kind="line",
            source="steps",
            section=prompt_value,
            y_title="groups",
            series=(
                Series("repeat_zero_std_group_count", "skippable, zero-std again", "bar", color=o["dropped_zero_std"]),
                Series("skippable_spread_group_count", "skippable, spread after all", "bar", color=o["trained"]),
                Series("accepted_group_count", "accepted groups", color="#7f7f7f"),
            ),
        ),
        Panel(
            id="skippable_tokens",
            title="Share of generated tokens a skip rule would have saved",
            description=(
                "Tokens of skippable groups that were zero-std again / all generated tokens, next to the share "
                "of tokens that did not train at all."
            ),
            kind="line",
            source="steps",
            section=prompt_value,
            y_title="fraction of generated tokens",
            series=(
                Series("skippable_token_fraction", "skippable, zero-std again", color="#e377c2"),
                Series("wasted_token_fraction", "not trained (all waste)", color="#8c564b"),
            ),
        ),
        Panel(
            id="tracked_prompts",
            title="Prompts tracked and revisited",
            description=(
                "Distinct prompts in the history (flattens after the first epoch, stops at the history limit) "
                "and the groups per step that revisited a known prompt."
            ),
            kind="line",
            source="steps",
            section=prompt_value,
            y_title="prompts / groups",
            series=(
                Series("tracked_prompt_count", "tracked prompts", color="#17becf"),
                Series("revisit_group_count", "revisiting groups", color="#9467bd"),
            ),
        ),
        *cost_panels(cost),
        *agent_panels(agent),
        *skipping_panels(skipping, o),
    )
    return DashboardSpec(
        title="shopsim dynamic sampling",
        x_key=contract.WANDB_STEP_KEY,
        key_prefix=contract.WANDB_PREFIX,
        sections=(waves, signal, health, prompt_value, cost, agent, skipping),
        panels=panels,
    )


def agent_panels(section: str) -> tuple[Panel, ...]:
    """The "Agent episodes" section: what multi-turn episodes hold and where their time goes (docs
    "Monitoring an agent run"): the environment's tokens beside the generated ones, turns, environment time,
    truncation, and the technical failures by the cause the generate function left.

    A single-turn run logs none of the agent keys: its panels stay empty, with a note.
    """
    return (
        Panel(
            id="agent_tokens",
            title="Response tokens: generated by the model and appended by the environment",
            description=(
                "Stacked: the tokens the model generated (total_token_count: every token figure of an agent run "
                "counts these only) and the observations the episodes appended with loss_mask 0 "
                "(observation_token_count: tool output, the environment's replies); together every token of the "
                "responses slime holds (response_length), aborted episodes included."
            ),
            kind="stacked_bar",
            source="steps",
            section=section,
            y_title="tokens",
            series=(
                Series("total_token_count", "generated (loss_mask 1)", "bar", color="#1f77b4"),
                Series("observation_token_count", "observation (loss_mask 0)", "bar", color="#aec7e8"),
            ),
        ),
        Panel(
            id="agent_turns",
            title="Turns per episode",
            description=(
                "The mean and the longest episode's turns in the step, from the generate function's "
                "metadata round_number or else the runs of generated tokens in loss_mask (the record's "
                "turn_count_source says which). Turns rising: episodes take longer and hold more tool output."
            ),
            kind="line",
            source="steps",
            section=section,
            y_title="turns",
            series=(
                Series("turns_per_episode_mean", "mean", color="#2ca02c"),
                Series("turns_per_episode_max", "longest episode", color="#98df8a"),
            ),
        ),
        Panel(
            id="agent_environment_time",
            title="Environment time per episode against the step's rollout time",
            description=(
                "environment_seconds_per_episode: the mean episode's seconds outside generation (tool calls, the "
                "environment; slime's non_generation_time), beside slime's rollout time of the step: the gap "
                "is generation, and waiting on the slowest episodes."
            ),
            kind="line",
            source="steps",
            section=section,
            y_title="seconds",
            series=(
                Series("environment_seconds_per_episode", "environment seconds per episode", "bar", color="#8c564b"),
                Series("rollout_seconds", "rollout time (slime)", color="#000000"),
            ),
        ),
        Panel(
            id="agent_environment_load",
            title="Environment seconds summed over the step's episodes",
            description=(
                "environment_seconds: every episode's non_generation_time added up (episode-seconds, aborted "
                "episodes included): the load the step put on the tools and environments."
            ),
            kind="line",
            source="steps",
            section=section,
            y_title="episode-seconds",
            series=(Series("environment_seconds", "environment seconds (sum)", "bar", color="#c49c94"),),
        ),
        Panel(
            id="agent_shares",
            title="Shares: tool output, environment time, truncated episodes",
            description=(
                "observation_token_fraction: the environment's share of the response tokens; "
                "environment_time_fraction: the mean episode's environment seconds / the rollout time; "
                "truncated_episode_fraction: episodes that stopped truncated (out of turns or length)."
            ),
            kind="line",
            source="steps",
            section=section,
            y_title="fraction",
            series=(
                Series("observation_token_fraction", "observation share of the tokens", color="#aec7e8"),
                Series("environment_time_fraction", "environment share of the rollout time", color="#8c564b"),
                Series("truncated_episode_fraction", "truncated episodes", color="#ff7f0e"),
            ),
        ),
        Panel(
            id="agent_technical_causes",
            title="Technical failures by cause",
            description=(
                "Stacked: the step's technical groups by the cause their generate function left (metadata "
                "shopsim_failure_cause, e.g. \"ToolTimeout: search_products\"; technical_cause_counts: the 5 "
                "most frequent per step, the rest as \"(other causes)\"); the line is every technical group, "
                "with a cause or not. The streak alert names the leading cause."
            ),
            kind="stacked_bar",
            source="steps",
            section=section,
            y_title="technical groups",
            series=(Series("technical_group_drop_count", "technical groups (every cause)",
                           color=OUTCOME_COLORS[contract.OUTCOME_DROPPED_TECHNICAL]),),
            breakdown_key="technical_cause_counts",
        ),
    )


def skipping_panels(section: str, o: dict[str, str]) -> tuple[Panel, ...]:
    """The "Skipping" section (``shopsim_prompt_skip`` on): what was skipped, the p values, the signal delayed.

    What skipping saves or costs is not estimated here: a skipped draw is replaced by one that is
    generated, and the figure is the Cost section's tokens per informative trained group.

    A run that does not skip logs none of these keys: its panels stay empty.
    """
    return (
        Panel(
            id="skipped_prompts",
            title="Prompts skipped before generation",
            description=(
                "Prompts the data source drew and skipped (each replaced by a further draw), against the groups "
                "judged in the step, and (predictive) those skipped for their token cost. Zero through the first "
                "epoch: no prompt has a zero-std run yet."
            ),
            kind="line",
            source="steps",
            section=section,
            y_title="prompts / groups",
            series=(
                Series("skipped_prompt_count", "skipped prompts", "bar", color=o["dropped_zero_std"]),
                Series("skipped_for_cost_count", "of them, for their cost", color="#9467bd"),
                Series("accepted_group_count", "judged groups", color="#7f7f7f"),
            ),
        ),
        Panel(
            id="skip_p",
            title="The rule at work: GRESO's p values, or the predictive rule's calibration",
            description=(
                "greso: a prompt with k zero-std visits in a row is skipped with probability 1 - max(p^k, floor); "
                "each p falls (more skipping) while its kind's zero-std share is at or above its target, rises "
                "otherwise. predictive: of the groups it let through with a prediction, the mean predicted "
                "P(zero-std) against the share that were zero-std (they should track each other; realised above "
                "predicted: it underrates zero-std) and the Brier score (0 is perfect). The share of judged "
                "groups dropped as zero-std is drawn beside them."
            ),
            kind="line",
            source="steps",
            section=section,
            y_title="p / probability / share",
            series=(
                Series("skip_p_easy", "p, all-pass prompts (greso)", color=o["trained"]),
                Series("skip_p_hard", "p, all-fail prompts (greso)", color=o["dropped_technical"]),
                Series("skip_predicted_zero_std_mean", "predicted P(zero-std) (predictive)", color="#1f77b4"),
                Series("skip_realised_zero_std_rate", "realised zero-std share (predictive)", color="#ff7f0e"),
                Series("skip_brier_score", "Brier score (predictive)", color="#bcbd22"),
                Series("zero_std_group_drop_rate", "zero-std drop rate", color="#7f7f7f"),
            ),
        ),
        Panel(
            id="skip_guard",
            title="Estimated lost signal against its limit, and the cap on a skipped draw's chance of spread",
            description=(
                "predictive: the guard's estimate of the signal the skips forgo (calibrated chances of spread of the "
                "draws skipped, per informative group; the run so far), the limit it is kept under "
                "(shopsim_prompt_skip_max_lost_signal, dashed) and the cap it sets: the largest predicted chance of "
                "spread a draw may have to be skipped (1: the rule's own test decides; lower: only the surest "
                "skips; 0: none). The estimate above the line for 3 steps in a row raises an advisory with what to "
                "change. A cap that sits low says the run's prompts are less predictable than the rule assumes. "
                "The probes the estimate is calibrated on are the next panel."
            ),
            kind="line",
            source="steps",
            section=section,
            y_title="lost signal / chance of spread",
            series=(
                Series("skip_lost_signal_estimate", "estimated lost signal", color="#d62728"),
                Series("skip_max_lost_signal", "limit (shopsim_prompt_skip_max_lost_signal)", "threshold",
                       color="#000000"),
                Series("skip_cap", "cap on a skipped draw's chance of spread", color="#1f77b4"),
            ),
        ),
        Panel(
            id="skip_probes",
            title="Probes served per step, beside the draws skipped",
            description=(
                "predictive: every shopsim_prompt_skip_probe_every-th draw the rule would skip is served anyway as "
                "a probe; its verdict (spread or not) calibrates the estimate of the panel before. Few probes: the "
                "estimate rests on little evidence (raise them with a lower shopsim_prompt_skip_probe_every)."
            ),
            kind="line",
            source="steps",
            section=section,
            y_title="draws per step",
            series=(
                Series("skip_probe_count", "probes served", "bar", color="#7f7f7f"),
                Series("skipped_prompt_count", "draws skipped", color=o["dropped_zero_std"]),
            ),
        ),
        Panel(
            id="skip_cost",
            title="Skipped prompts generated again: spread after all",
            description=(
                "Groups whose prompt had been skipped since it was last generated, and those of them with spread: "
                "the signal skipping delayed. A rising share says prompts change while skipped."
            ),
            kind="line",
            source="steps",
            section=section,
            y_title="groups",
            series=(
                Series("skipped_then_generated_group_count", "skipped, then generated", "bar",
                       color=o["dropped_zero_std"]),
                Series("skipped_then_spread_group_count", "of those, spread", "bar", color=o["trained"]),
                Series("zero_std_group_count", "zero-std groups judged", color="#7f7f7f"),
            ),
        ),
    )


def cost_panels(section: str) -> tuple[Panel, ...]:
    """The "Cost" section: the headline cost, tokens by outcome, waste, seconds per wave, own time share."""
    o = OUTCOME_COLORS
    return (
        Panel(
            id="cost_per_signal",
            title="Total tokens per informative trained group",
            description=(
                "Every response token generated in the step (aborted groups included: slime's sample hook) / the "
                "trained groups whose rewards are not all equal: what one unit of learning signal cost. The "
                "figure to compare runs, wave sizes and skip rules by. Empty without the sample hook wired."
            ),
            kind="line",
            source="steps",
            section=section,
            y_title="tokens per informative group",
            series=(Series("tokens_per_informative_group", "total tokens / informative trained group",
                           color="#000000"),),
        ),
        Panel(
            id="cost_tokens",
            title="Response tokens per step, by outcome",
            description=(
                "Stacked: tokens of trained + fallback + technical drop + zero-std drop + surplus groups = "
                "generated_token_count, + the aborted groups' tokens (never judged; from slime's sample hook) = "
                "total_token_count."
            ),
            kind="stacked_bar",
            source="steps",
            section=section,
            y_title="tokens",
            series=(
                Series("trained_token_count", "trained", "bar", color=o["trained"]),
                Series("fallback_token_count", "fallback (zero advantage)", "bar", color=o["fallback"]),
                Series("dropped_technical_token_count", "technical drop", "bar", color=o["dropped_technical"]),
                Series("dropped_zero_std_token_count", "zero-std drop", "bar", color=o["dropped_zero_std"]),
                Series("surplus_token_count", "surplus", "bar", color=o["surplus"]),
                Series("aborted_token_count", "aborted (never judged)", "bar", color="#c7c7c7"),
            ),
        ),
        Panel(
            id="cost_waste",
            title="Wasted tokens next to wasted samples",
            description=(
                "1 - train tokens / generated tokens, beside the sample-based fraction and 1 - train tokens / "
                "total tokens (aborted generation included). Tokens above samples: the groups that did not train "
                "ran longer than those that did."
            ),
            kind="line",
            source="steps",
            section=section,
            y_title="fraction",
            series=(
                Series("wasted_token_fraction", "wasted token fraction", color="#e377c2"),
                Series("wasted_sample_fraction", "wasted sample fraction", color="#8c564b"),
                Series("total_wasted_token_fraction", "wasted of all tokens (aborted included)", color="#000000"),
            ),
        ),
        Panel(
            id="cost_seconds",
            title="Seconds per step: first wave and extra waves",
            description=(
                "slime's rollout time, the seconds wave 1 took to fill the batch (or to its last judgement) and "
                "the seconds added by extra waves (0 with one wave): their share is what a second wave cost."
            ),
            kind="line",
            source="steps",
            section=section,
            y_title="seconds",
            series=(
                Series("first_wave_fill_seconds", "first-wave fill", "bar", color="#17becf"),
                Series("extra_wave_seconds", "extra waves", "bar", color="#9467bd"),
                Series("rollout_seconds", "rollout time (slime)", color="#000000"),
            ),
        ),
        Panel(
            id="cost_own_time",
            title="The project's own time against the rollout time",
            description=(
                "filter_seconds / rollout_seconds: time inside the four hooks as a share of slime's rollout "
                "time (the design's \"the filter adds no rollout time\", measured; expect well below 0.001)."
            ),
            kind="line",
            source="steps",
            section=section,
            y_title="ratio",
            series=(Series("filter_time_fraction", "filter_seconds / rollout_seconds", color="#7f7f7f"),),
        ),
    )


def write_panels_json(path: str | os.PathLike, spec: DashboardSpec | None = None) -> Path:
    """Write the spec as JSON (the committed ``dashboards/panels.json``) and return its path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text((spec or dashboard_spec()).to_json(), encoding="utf-8")
    return path


def load_panels_json(path: str | os.PathLike) -> DashboardSpec:
    """Read a spec written by :func:`write_panels_json`."""
    return DashboardSpec.from_dict(json.loads(Path(path).read_text(encoding="utf-8")))
