"""Realistic step records for the dashboard tests, built by a tiny stand-in of slime's wave loop.

It follows the filter's rules (technical groups always dropped; zero-std groups dropped while
remaining > rollout_batch_size, else let through as fallback; a new wave when remaining <
rollout_batch_size; surplus
judged after the batch filled; the rest aborted; termination when the technical streak reaches
the limit), so the counts obey the contract's identities. Not the project's simulator: just
enough to give the dashboards multi-wave steps, surplus, fallback and a terminated step.
"""

from __future__ import annotations

import random
from dataclasses import fields
from types import SimpleNamespace

from shopsim_metrics.record import contract
from shopsim_metrics.prompts.value import PromptValueTracker
from shopsim_metrics.record.records import DecisionRow, StepRecord
from shopsim_metrics.step.tool_fields import tool_fields
from shopsim_metrics.step.tool_tally import ToolStat, ToolTally

ROLLOUT_BATCH_SIZE, N, OVER_SAMPLING_BATCH_SIZE, GLOBAL, MAX_CONSECUTIVE_FAILED_GROUPS = 16, 8, 32, 64, 8


def _draft(**values) -> SimpleNamespace:
    """A record's fields in a mutable namespace, filled in stages below (records are frozen: built at the end)."""
    rec = StepRecord(**values)
    return SimpleNamespace(**{f.name: getattr(rec, f.name) for f in fields(StepRecord)})


def make_step(step: int, kinds: list[str], *, rng: random.Random, streak: int = 0, surplus_after_full: int = 2) -> tuple[SimpleNamespace, int]:
    """One step from the completion order of group kinds ("spread", "zero0", "zero1", "tech").

    Returns the record's fields (a namespace) and the technical streak carried into the next step.
    """
    rec = _draft(
        rollout_id=step, rollout_batch_size=ROLLOUT_BATCH_SIZE, n_samples_per_prompt=N, over_sampling_batch_size=OVER_SAMPLING_BATCH_SIZE,
        global_batch_size=GLOBAL, technical_failure_limit=MAX_CONSECUTIVE_FAILED_GROUPS, loop_state_source="test-loop",
    )
    remaining = waves = submitted = train = 0
    max_streak = 0
    rewards_all: list[float] = []
    rewards_train: list[float] = []
    rows: list[DecisionRow] = []
    it = iter(kinds)
    surplus_left = surplus_after_full

    def submit() -> None:
        nonlocal remaining, waves, submitted
        waves += 1
        remaining += OVER_SAMPLING_BATCH_SIZE
        submitted += OVER_SAMPLING_BATCH_SIZE

    submit()
    while True:
        if train >= ROLLOUT_BATCH_SIZE:
            if surplus_left == 0:
                break
            surplus_left -= 1
        if len(rows) >= submitted:
            break
        kind = next(it, "spread")
        order = len(rows) + 1
        before = remaining
        if kind == "tech":
            scorable = rng.randint(0, N - 2)
            rewards = [float(rng.random() < 0.5) for _ in range(scorable)]
            outcome, reason = contract.OUTCOME_DROPPED_TECHNICAL, contract.REASON_TECHNICAL
            streak += 1
        else:
            if kind == "spread":
                k = rng.randint(1, N - 1)
                rewards = [1.0] * k + [0.0] * (N - k)
            else:
                rewards = [1.0 if kind == "zero1" else 0.0] * N
            scorable = N
            streak = 0
            if train >= ROLLOUT_BATCH_SIZE:
                outcome, reason = contract.OUTCOME_SURPLUS, (None if kind == "spread" else contract.REASON_ZERO_STD)
            elif kind == "spread":
                outcome, reason = contract.OUTCOME_TRAINED, None
            elif remaining > ROLLOUT_BATCH_SIZE:
                outcome, reason = contract.OUTCOME_DROPPED_ZERO_STD, contract.REASON_ZERO_STD
            else:
                outcome, reason = contract.OUTCOME_FALLBACK, contract.REASON_ZERO_STD
        max_streak = max(max_streak, streak)
        rows.append(
            DecisionRow(
                order=order, waves_open=waves, group_index=1000 * step + order, outcome=outcome, reason=reason,
                remaining_before=before, unique_rollouts=N if kind != "tech" else max(scorable, 1),
                reward_min=min(rewards) if rewards else None, reward_max=max(rewards) if rewards else None,
                reward_mean=sum(rewards) / len(rewards) if rewards else None,
                success_count=sum(1 for r in rewards if r >= 1.0) if rewards else None,
                failed_check="status_failed" if kind == "tech" else None,
                scorable_rollouts=len(rewards), reward_sum=sum(rewards),
            )
        )
        rewards_all += rewards
        if outcome in (contract.OUTCOME_DROPPED_TECHNICAL, contract.OUTCOME_DROPPED_ZERO_STD):
            remaining -= 1
        if outcome in (contract.OUTCOME_TRAINED, contract.OUTCOME_FALLBACK):
            train += 1
            rewards_train += rewards
        if streak >= MAX_CONSECUTIVE_FAILED_GROUPS:
            rec.terminated = True
            break
        if remaining < ROLLOUT_BATCH_SIZE and train < ROLLOUT_BATCH_SIZE:
            submit()
    count = lambda o: sum(1 for r in rows if r.outcome == o)  # noqa: E731
    rec.decisions = rows
    rec.submitted_group_count, rec.wave_count, rec.accepted_group_count = submitted, waves, len(rows)
    rec.fallback_group_count = count(contract.OUTCOME_FALLBACK)
    rec.train_group_count = count(contract.OUTCOME_TRAINED) + rec.fallback_group_count
    rec.technical_group_drop_count = count(contract.OUTCOME_DROPPED_TECHNICAL)
    rec.zero_std_group_drop_count = count(contract.OUTCOME_DROPPED_ZERO_STD)
    rec.surplus_group_count = count(contract.OUTCOME_SURPLUS)
    rec.zero_std_group_count = sum(1 for r in rows if r.reason == contract.REASON_ZERO_STD)
    zero_successes = [r.success_count for r in rows if r.reason == contract.REASON_ZERO_STD]
    rec.zero_std_all_pass_group_count = sum(1 for c in zero_successes if c == N)
    rec.zero_std_all_fail_group_count = sum(1 for c in zero_successes if c == 0)
    rec.zero_std_other_group_count = rec.zero_std_group_count - sum(1 for c in zero_successes if c in (0, N))
    rec.aborted_group_count = submitted - len(rows)
    acc = len(rows)
    rec.accepted_sample_count = sum(r.unique_rollouts for r in rows)
    rec.train_sample_count = rec.train_group_count * N
    rec.scorable_rollout_count = len(rewards_all)
    rec.technical_group_drop_rate = rec.technical_group_drop_count / acc if acc else None
    rec.zero_std_group_drop_rate = rec.zero_std_group_drop_count / acc if acc else None
    rec.zero_advantage_train_fraction = rec.fallback_group_count / rec.train_group_count if rec.train_group_count else None
    rec.wasted_sample_fraction = 1 - rec.train_sample_count / rec.accepted_sample_count if rec.accepted_sample_count else None
    rec.success_rate = sum(r >= 1.0 for r in rewards_all) / len(rewards_all) if rewards_all else None
    rec.reward_mean = sum(rewards_all) / len(rewards_all) if rewards_all else None
    rec.train_success_rate = sum(r >= 1.0 for r in rewards_train) / len(rewards_train) if rewards_train else None
    rec.train_reward_mean = sum(rewards_train) / len(rewards_train) if rewards_train else None
    rec.consecutive_technical_failures = streak
    rec.max_consecutive_technical_failures = max_streak
    rec.remaining_min = min(r.remaining_before for r in rows) if rows else None
    rec.optimizer_update_count = rec.train_sample_count / GLOBAL
    rec.reconcile_mismatch_count = 0
    return rec, streak


def make_records(steps: int = 12, *, seed: int = 7, burst_step: int = 6, terminate: bool = True,
                 agent: bool = True, tools: bool = True) -> list[StepRecord]:
    """``steps`` records: ordinary steps, a technical burst at ``burst_step`` (3 waves), and a
    terminated last step (8 technical groups in a row) when ``terminate``; of agent episodes (the agent
    fields, technical groups with causes) when ``agent``, else single-turn."""
    rng = random.Random(seed)
    records: list[SimpleNamespace] = []
    streak = 0
    for step in range(steps):
        p_zero = 0.45 - 0.02 * step
        if terminate and step == steps - 1:
            kinds = ["spread"] * 5 + ["tech"] * MAX_CONSECUTIVE_FAILED_GROUPS
        elif step == burst_step:
            # 7 technical, zero-std drops down to rollout_batch_size, then one more technical: wave 2;
            # zero-std drops down to rollout_batch_size again, one technical: wave 3; then the batch fills.
            kinds = ["tech"] * 7 + ["zero0"] * 9 + ["tech"] + ["zero1"] * 31 + ["tech"] + ["spread", "zero0"] * 20
        else:
            kinds = [
                "tech" if (u := rng.random()) < 0.05 else ("zero0" if u < 0.05 + p_zero * 0.7 else "zero1" if u < 0.05 + p_zero else "spread")
                for _ in range(3 * OVER_SAMPLING_BATCH_SIZE)
            ]
        rec, streak = make_step(step, kinds, rng=rng, streak=streak)
        records.append(rec)
    add_prompt_value(records, seed=seed)
    add_cost(records, seed=seed)
    if agent:
        add_agent(records, seed=seed, tools=tools)
    add_alerts(records)
    return [StepRecord(**vars(rec)) for rec in records]


CAUSES = ("ToolTimeout: search_products", "ConnectionError: catalogue service unavailable",
          "ToolError: view_item returned HTTP 500")


def add_agent(records: list[SimpleNamespace], *, seed: int, tools: bool = True) -> None:
    """The agent fields, by the monitor's rules, from drawn episodes: every started rollout an episode of 2-9 turns
    with 30-60% of its tokens tool output and 1-4 s per tool call; each technical group's cause (the burst's
    technical groups mostly the search tool's timeouts)."""
    rng = random.Random(seed + 3)
    for rec in records:
        episodes = rec.started_rollout_count
        turns = [rng.randint(2, 9) for _ in range(episodes)]
        rec.episode_count = episodes
        rec.observation_token_count = round(rec.total_token_count * rng.uniform(0.45, 1.5))
        rec.observation_token_fraction = rec.observation_token_count / (rec.observation_token_count + rec.total_token_count)
        rec.turns_per_episode_mean, rec.turns_per_episode_max = sum(turns) / episodes, max(turns)
        rec.turn_count_source = "metadata"
        rec.environment_seconds = sum((t - 1) * rng.uniform(1.0, 4.0) for t in turns)
        rec.environment_seconds_per_episode = rec.environment_seconds / episodes
        rec.environment_time_fraction = rec.environment_seconds_per_episode / rec.rollout_seconds
        rec.truncated_episode_fraction = sum(t == 9 for t in turns) / episodes
        counts: dict[str, int] = {}
        for row in rec.decisions:
            if row.outcome == contract.OUTCOME_DROPPED_TECHNICAL:
                row.technical_cause = CAUSES[0] if rng.random() < 0.6 else rng.choice(CAUSES)
                counts[row.technical_cause] = counts.get(row.technical_cause, 0) + 1
        rec.technical_cause_counts = counts or None
        if tools:  # the generate function leaves metadata shopsim_tool_calls
            add_tools(rec, turns, rng)


TOOLS = {"search_products": (1.5, 0.04, 0.01), "view_item": (0.6, 0.01, 0.05), "add_to_cart": (0.3, 0.0, 0.02)}
"""The drawn tools: mean seconds per call, the environment's and the model's error rates."""


def add_tools(rec: SimpleNamespace, turns: list[int], rng: random.Random) -> None:
    """The tool fields by the monitor's own rules (``tool_fields``): one call per turn after the first, of a
    drawn tool, with its drawn seconds and failures (the burst's step: the search tool times out often)."""
    burst = bool(rec.technical_cause_counts)
    stats = {name: ToolStat() for name in TOOLS}
    for t in turns:
        for _ in range(t - 1):
            name = rng.choice(list(TOOLS))
            mean, env_rate, model_rate = TOOLS[name]
            env_rate = 0.3 if burst and name == "search_products" else env_rate
            stat, failed = stats[name], rng.random()
            stat.calls += 1
            stat.seconds.append(rng.expovariate(1 / mean))
            stat.errors += failed < env_rate + model_rate
            stat.model_errors += env_rate <= failed < env_rate + model_rate
    ends = dict.fromkeys(contract.EPISODE_END_REASONS, 0) | {"completed": len(turns)}
    fields_ = tool_fields(ToolTally(len(turns), stats, 0, len(turns), ends))
    for key, value in fields_.items():
        setattr(rec, key, value)


def add_alerts(records: list[SimpleNamespace]) -> None:
    """The monitor's alerts, by its rule: a WARN in a step whose streak reached the threshold, the ERROR at the limit."""
    warn_at = MAX_CONSECUTIVE_FAILED_GROUPS // 2
    for rec in records:
        rec.technical_failure_warn_at = warn_at
        step, longest = rec.rollout_id, rec.max_consecutive_technical_failures
        if rec.terminated:
            rec.alerts = [{"level": "ERROR", "title": f"shopsim: technical-failure limit reached at rollout step {step}, "
                           "terminating", "text": f"{longest} consecutive technical groups reached the limit"}]
        elif longest >= warn_at:
            rec.alerts = [{"level": "WARN", "title": f"shopsim: technical failures piling up at rollout step {step}",
                           "text": f"1 streak of consecutive technical groups reached {warn_at}, the longest {longest}"}]


def add_cost(records: list[SimpleNamespace], *, seed: int) -> None:
    """Tokens per outcome from the rows' tokens, aborted groups' partial tokens, and judgement times: 20-40 s
    per wave, 1-3 ms own time."""
    rng = random.Random(seed + 2)
    for rec in records:
        clock, waves, fill, trigger = 0.0, 1, None, None
        for row in rec.decisions:
            if row.waves_open > waves:
                waves, clock = row.waves_open, clock + rng.uniform(20.0, 40.0)
            clock += rng.uniform(0.0, 1.0)
            row.judged_at = clock
            if row.waves_open == 1:
                fill = clock
                if trigger is None and row.outcome.startswith("dropped") and (row.remaining_before or 0) <= ROLLOUT_BATCH_SIZE:
                    trigger = clock
        by_outcome = {o: sum(r.response_tokens for r in rec.decisions if r.outcome == o) for o in contract.OUTCOMES}
        for outcome, tokens in by_outcome.items():
            setattr(rec, f"{outcome}_token_count", tokens)
        rec.train_token_count = by_outcome["trained"] + by_outcome["fallback"]
        generated = rec.generated_token_count
        rec.wasted_token_fraction = 1 - rec.train_token_count / generated if generated else None
        rec.aborted_token_count = sum(rng.randrange(0, 100 * N) for _ in range(rec.aborted_group_count))  # partial
        rec.total_token_count = generated + rec.aborted_token_count
        informative = rec.train_group_count - rec.fallback_group_count
        rec.total_wasted_token_fraction = 1 - rec.train_token_count / rec.total_token_count
        rec.tokens_per_informative_group = rec.total_token_count / informative if informative else None
        # lengths per rollout (the bias of what trains): the aborted rollouts at their partial tokens
        rec.train_response_length_mean = rec.train_token_count / rec.train_sample_count
        rec.accepted_response_length_mean = generated / rec.accepted_sample_count
        rec.aborted_rollout_count = rec.aborted_group_count * N
        rec.aborted_response_length_mean = (rec.aborted_token_count / rec.aborted_rollout_count
                                            if rec.aborted_rollout_count else None)
        rec.started_rollout_count = rec.accepted_sample_count + rec.aborted_rollout_count
        rec.started_response_length_mean = rec.total_token_count / rec.started_rollout_count
        rec.length_bias = rec.train_response_length_mean / rec.started_response_length_mean
        rec.first_wave_fill_seconds = fill
        rec.extra_wave_seconds = clock - (trigger if trigger is not None else clock) if rec.wave_count > 1 else 0.0
        rec.rollout_seconds = clock + rng.uniform(25.0, 35.0)
        rec.filter_seconds = rng.uniform(0.001, 0.003)
        rec.filter_time_fraction = rec.filter_seconds / rec.rollout_seconds


def add_prompt_value(records: list[SimpleNamespace], *, seed: int, prompts: int = 60) -> None:
    """Prompt keys from a pool of ``prompts`` and tokens on every row, then the prompt-value fields."""
    rng = random.Random(seed + 1)
    tracker = PromptValueTracker()
    for rec in records:
        for row in rec.decisions:
            row.prompt_key = f"prompt-{rng.randrange(prompts)}"
            row.response_tokens = 100 * row.unique_rollouts
        rec.generated_token_count = sum(row.response_tokens for row in rec.decisions)
        vars(rec).update(tracker.observe(rec))
