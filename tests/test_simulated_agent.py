"""Simulated agent episodes: the episodes' rules (hypothesis), the samples the simulator hands slime's sample hook
against what it drew, the time episodes take, and a one-turn episode without tools that is a single-turn rollout."""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from shopsim_metrics.cli import main
from shopsim_metrics.hooks import Hooks
from shopsim_metrics.simulator.config import AgentModel, FailureBurst, SimConfig
from shopsim_metrics.simulator.simulated_episodes import (FAILURE_CAUSE_KEY, ROUND_NUMBER_KEY, EpisodeModel, EpisodePlan,
                                                GeneratedEpisodes)
from shopsim_metrics.simulator.loop import make_group_source, simulate, token_rng, tuning_run
from shopsim_metrics.simulator.samples import SimSample
from shopsim_metrics.simulator.token_model import TokenModel
from shopsim_metrics.simulator.tuning.tune import TUNING_LIMIT, tune, wave_price
from shopsim_metrics.record import contract
from shopsimrl import slime_runtime

SPT = 0.02


@pytest.fixture(autouse=True)
def _reset_runtime():
    yield
    slime_runtime.reset_runtime()


def runs_of_ones(mask: list[int]) -> int:
    return sum(1 for i, bit in enumerate(mask) if bit == 1 and (i == 0 or mask[i - 1] != 1))


plans = st.integers(1, 6).flatmap(lambda turns: st.builds(
    EpisodePlan,
    turn_tokens=st.tuples(*[st.integers(1, 40)] * turns),
    observation_tokens=st.tuples(*[st.integers(1, 30)] * turns),
    tool_seconds=st.tuples(*[st.one_of(st.just(0.0), st.floats(0.001, 5.0))] * turns),
    truncated=st.booleans()))


# --- one episode ------------------------------------------------------------------------------------------
@settings(max_examples=150, deadline=None)
@given(plan=plans, cuts=st.lists(st.floats(0.0, 1.2), min_size=2, max_size=6))
def test_an_aborted_episode_holds_a_prefix_of_the_whole_that_grows_with_time(plan, cuts):
    whole = plan.finished()
    total = plan.seconds(SPT)
    held = [plan.at(cut * total, SPT) for cut in sorted(cuts)]
    for earlier, later in zip(held, held[1:]):
        assert earlier.generated <= later.generated and earlier.observation <= later.observation
        assert earlier.environment_seconds <= later.environment_seconds + 1e-12
    for episode in held:
        mask = episode.loss_mask()
        assert mask == whole.loss_mask()[:len(mask)]  # what it had appended, in order
        assert episode.environment_seconds <= whole.environment_seconds + 1e-9
        assert episode == whole or episode.status == "aborted"
    assert plan.at(total, SPT) == whole and plan.at(0.0, SPT).generated == 0


@settings(max_examples=150, deadline=None)
@given(plan=plans, turn=st.integers(1, 6), round_number=st.booleans())
def test_an_episodes_sample_holds_its_turns_tokens_and_tool_time(plan, turn, round_number):
    turn = min(turn, len(plan.turn_tokens))
    for episode in (plan.finished(), plan.failed(turn, "ToolTimeout: search_products")):
        sample = episode.write(SimSample(), round_number=round_number)
        assert len(sample.loss_mask) == sample.response_length == episode.generated + episode.observation
        assert sum(sample.loss_mask) == episode.generated
        assert runs_of_ones(sample.loss_mask) == episode.turns
        assert sample.metadata.get(ROUND_NUMBER_KEY) == (episode.turns if round_number else None)
        assert sample.non_generation_time == pytest.approx(sum(plan.tool_seconds[:episode.turns])
                                                            if episode.status == "aborted" or plan.truncated
                                                            else sum(plan.tool_seconds[:episode.turns - 1]))
    failed = plan.failed(turn, "ToolTimeout: search_products")
    assert (failed.turns, len(failed.observation_tokens), failed.status) == (turn, turn - 1, "aborted")
    assert failed.write(SimSample()).metadata[FAILURE_CAUSE_KEY] == "ToolTimeout: search_products"


@settings(max_examples=60, deadline=None)
@given(lengths=st.lists(st.lists(st.integers(1, 3000), min_size=1, max_size=4), min_size=1, max_size=4),
       turns_mean=st.floats(1.0, 12.0), max_turns=st.integers(1, 12), seed=st.integers(0, 2**32 - 1))
def test_the_drawn_episodes_split_each_rollouts_tokens_over_at_most_max_turns(lengths, turns_mean, max_turns, seed):
    model = EpisodeModel(AgentModel(turns_mean=turns_mean, max_turns=max_turns), seconds_per_token=SPT,
                         rng=np.random.default_rng(seed))
    drawn = model.plans(lengths)
    assert [len(group) for group in drawn] == [len(group) for group in lengths]
    for group, group_lengths in zip(drawn, lengths):
        for plan, length in zip(group, group_lengths):
            assert sum(plan.turn_tokens) == length and min(plan.turn_tokens) >= 1
            assert 1 <= len(plan.turn_tokens) <= max_turns
            assert len(plan.tool_seconds) == len(plan.observation_tokens) == len(plan.turn_tokens)
            assert not plan.truncated or len(plan.turn_tokens) == max_turns
            assert plan.finished().status == ("truncated" if plan.truncated else "completed")


# --- the simulated loop -----------------------------------------------------------------------------------
AGENT = SimConfig(steps=6, seed=5, agent=AgentModel(turns_mean=4.0, max_turns=6), technical_rate=0.1,
                  bursts=(FailureBurst(step=3, rate=0.6, cause="ToolTimeout: search_products"),),
                  max_technical_streak=5)


def seen_by_the_sample_hook(monkeypatch) -> list[dict]:
    """Every sample the sample hook sees, copied as it was (the simulator reuses its sample objects)."""
    seen: list[dict] = []
    original = Hooks.sample

    def sample(self, args, sample, *, rollout_id=None, evaluation=False):
        mask = sample.loss_mask
        seen.append({"step": rollout_id, "group": sample.group_index, "status": sample.status,
                     "mask": list(mask), "length": sample.response_length,
                     "environment": sample.non_generation_time, "metadata": dict(sample.metadata)})
        return original(self, args, sample, rollout_id=rollout_id, evaluation=evaluation)

    monkeypatch.setattr(Hooks, "sample", sample)
    return seen


def test_the_samples_the_hook_sees_hold_what_the_simulator_drew(monkeypatch):
    seen = seen_by_the_sample_hook(monkeypatch)
    result = simulate(AGENT)
    assert len(result.outcomes) == AGENT.steps
    for outcome in result.outcomes:
        tally: GeneratedEpisodes = outcome.episodes
        samples = [s for s in seen if s["step"] == outcome.rollout_id]
        assert tally.episodes == len(samples) > 0
        assert tally.observation_tokens == sum(s["mask"].count(0) for s in samples) > 0
        assert tally.generated_tokens == sum(s["mask"].count(1) for s in samples)
        assert all(len(s["mask"]) == s["length"] for s in samples)
        turns = [s["metadata"][ROUND_NUMBER_KEY] for s in samples]
        assert turns == [runs_of_ones(s["mask"]) for s in samples]
        assert (tally.turns, tally.turns_max) == (sum(turns), max(turns))
        assert tally.environment_seconds == pytest.approx(sum(s["environment"] for s in samples))
        assert tally.truncated == sum(s["status"] == "truncated" for s in samples)
        causes = {s["group"]: s["metadata"][FAILURE_CAUSE_KEY] for s in samples if FAILURE_CAUSE_KEY in s["metadata"]}
        assert causes == tally.causes
        technical = {gid for gid, reason in outcome.dropped.items() if reason and "technical" in reason}
        assert set(causes) == technical  # one environment failure per technical group, none elsewhere
        aborted = [s for s in samples if s["group"] in set(outcome.aborted_ids)]
        assert tally.aborted_environment_seconds == pytest.approx(
            sum(s["environment"] for s in aborted if s["status"] == "aborted"))
        assert outcome.aborted_tokens == sum(s["mask"].count(1) for s in aborted)
    burst = result.outcomes[3].episodes.causes
    assert burst and set(burst.values()) == {"ToolTimeout: search_products"}
    assert len({c for o in result.outcomes for c in o.episodes.causes.values()}) > 1  # drawn causes outside it


def expected_cause_counts(causes: dict[int, str]) -> dict[str, int] | None:
    """The record's technical_cause_counts of a step whose technical groups had these causes."""
    counts = Counter(causes.values()).most_common()
    if not counts:
        return None
    kept = dict(counts[:contract.TECHNICAL_CAUSE_LIMIT])
    rest = sum(n for _, n in counts[contract.TECHNICAL_CAUSE_LIMIT:])
    return {**kept, contract.OTHER_CAUSES: rest} if rest else kept


@settings(max_examples=8, deadline=None)
@given(seed=st.integers(0, 10_000), turns_mean=st.floats(1.0, 8.0), max_turns=st.integers(2, 10),
       tool_seconds=st.floats(0.1, 10.0), technical_rate=st.sampled_from([0.0, 0.1, 0.4]),
       round_number=st.booleans())
# one turn per episode: no tool call, no environment time reported (null fields) in any step
@example(seed=0, turns_mean=1.0, max_turns=2, tool_seconds=1.0, technical_rate=0.0, round_number=True)
# and no turn structure but the failed tool calls of step 0: steps 1 and 2 keep the agent fields, environment null
@example(seed=6, turns_mean=1.0, max_turns=2, tool_seconds=1.0, technical_rate=0.1, round_number=False)
def test_a_simulated_agent_runs_records_hold_what_the_simulator_generated(seed, turns_mean, max_turns, tool_seconds,
                                                                          technical_rate, round_number):
    agent = AgentModel(turns_mean=turns_mean, max_turns=max_turns, tool_seconds_median=tool_seconds,
                       round_number=round_number)
    result = simulate(SimConfig(steps=3, seed=seed, agent=agent, technical_rate=technical_rate, max_technical_streak=4))
    agent_run = False  # once a step's episodes show a turn structure, every later step has the agent fields
    for record, outcome in zip(result.records, result.outcomes):
        tally: GeneratedEpisodes = outcome.episodes
        agent_run = agent_run or bool(round_number or tally.observation_tokens or tally.environment_seconds)
        if not agent_run:  # no turn structure has shown yet
            assert all(getattr(record, name) is None for name in (*contract.AGENT_FIELDS, "turn_count_source"))
            assert record.total_token_count == tally.generated_tokens and record.technical_cause_counts is None
            continue
        assert record.episode_count == tally.episodes
        assert record.observation_token_count == tally.observation_tokens  # the loss_mask 0 tokens it appended
        assert record.total_token_count == tally.generated_tokens  # every token figure counts generated tokens
        assert record.aborted_token_count == outcome.aborted_tokens
        assert record.observation_token_fraction == pytest.approx(
            tally.observation_tokens / (tally.observation_tokens + tally.generated_tokens))
        assert record.turns_per_episode_mean == pytest.approx(tally.turns / tally.episodes)  # the turns it drew
        assert record.turns_per_episode_max == tally.turns_max
        assert record.turn_count_source == ("metadata" if round_number else
                                            "loss_mask" if tally.observation_tokens else None)
        if tally.environment_seconds:  # the latencies it drew
            assert record.environment_seconds == pytest.approx(tally.environment_seconds)
            assert record.environment_seconds_per_episode == pytest.approx(tally.environment_seconds / tally.episodes)
            assert record.environment_time_fraction == pytest.approx(
                tally.environment_seconds / tally.episodes / outcome.rollout_time)
        else:  # every episode answered in one turn, no tool call: their non_generation_time 0 reports nothing
            assert (record.environment_seconds, record.environment_seconds_per_episode,
                    record.environment_time_fraction) == (None, None, None)
        assert record.truncated_episode_fraction == pytest.approx(tally.truncated / tally.episodes)
        assert record.technical_cause_counts == expected_cause_counts(tally.causes)  # the failures it injected
        for row in record.decisions:
            assert row.technical_cause == tally.causes.get(row.group_index)


@settings(max_examples=100, deadline=None)
@given(plan=plans, call=st.integers(0, 5), into=st.floats(0.01, 0.99))
def test_an_episode_aborted_mid_tool_call_wasted_the_calls_seconds_so_far(plan, call, into):
    call = min(call, plan.calls - 1)
    if call < 0 or plan.tool_seconds[call] == 0:
        return
    started = sum(plan.turn_tokens[:call + 1]) * SPT + sum(plan.tool_seconds[:call])
    episode = plan.at(started + into * plan.tool_seconds[call], SPT)
    assert episode.status == "aborted" and episode.turns == call + 1
    assert len(episode.observation_tokens) == call  # that call's output never came
    assert episode.environment_seconds == pytest.approx(sum(plan.tool_seconds[:call]) + into * plan.tool_seconds[call])


def test_a_run_aborts_episodes_with_tool_time_spent_and_truncates_some(monkeypatch):
    seen = seen_by_the_sample_hook(monkeypatch)
    result = simulate(AGENT)
    assert sum(o.episodes.aborted_environment_seconds for o in result.outcomes) > 0
    assert any(s["status"] == "truncated" and s["mask"][-1] == 0 for s in seen)  # out of turns after a tool call


def test_an_episodes_group_takes_its_generation_and_its_tool_calls():
    single = SimConfig(seed=2)
    agent = single.with_(agent=AgentModel())
    gids = range(0, 32)
    ticks = []
    for config in (single, agent):
        source = make_group_source(config, np.random.default_rng(0), TokenModel.from_config(config, token_rng(2)))
        source.submit(gids, step=0)
        ticks.append(source.generation_ticks(gids))
        if config.agent is not None:
            plans = [source._plans[gid] for gid in gids]
            expected = [max(1, math.ceil(max(p.seconds(config.seconds_per_token) for p in group) - 1e-9))
                        for group in plans]
            assert ticks[-1] == expected
    assert all(a >= s for s, a in zip(*ticks)) and sum(ticks[1]) > sum(ticks[0])


def test_a_one_turn_episode_without_tools_is_a_single_turn_rollout():
    """Same seed, same knobs: the agent model with one turn, no tool call and no round_number gives the
    single-turn run's records (its samples carry a loss_mask of ones: every token generated)."""
    single = SimConfig(steps=5, seed=9, technical_rate=0.0)
    one_turn = single.with_(agent=AgentModel(turns_mean=1.0, round_number=False))
    volatile = {"filter_seconds", "filter_time_fraction", "run_id", "process_started_at"}

    def records(config):
        return [{k: v for k, v in r.to_dict().items() if k not in volatile} for r in simulate(config).records]

    assert records(one_turn) == records(single)


def test_agent_episodes_need_token_timing_and_the_synchronous_loop():
    with pytest.raises(ValueError, match="seconds_per_token"):
        SimConfig(agent=AgentModel(), seconds_per_token=None)
    with pytest.raises(ValueError, match="rollout sync"):
        SimConfig(agent=AgentModel(), rollout="fully-async")
    with pytest.raises(ValueError, match="failure_causes"):
        AgentModel(failure_causes=(("", 1.0),))


# --- tune --agent -----------------------------------------------------------------------------------------
def test_tune_prices_a_step_in_generation_and_in_environment_time_as_the_simulation_spent_them():
    base = SimConfig(agent=AgentModel(turns_mean=3.0))
    report = tune(zero_std_rate=0.3, technical_rate=0.05, candidates=[16, 32], steps=40, seed=4, base=base, widen=False)
    for candidate in report.candidates:
        run = tuning_run(report.base.with_(over_sampling_batch_size=candidate.over_sampling_batch_size,
                                           max_consecutive_failed_groups=TUNING_LIMIT))
        tallies = [o.episodes for o in run.outcomes]
        steps = len(tallies)
        assert candidate.generation_seconds_per_step == pytest.approx(
            sum(t.generated_tokens for t in tallies) * base.seconds_per_token / steps)
        assert candidate.environment_seconds_per_step == pytest.approx(sum(t.environment_seconds for t in tallies) / steps)
        assert candidate.aborted_environment_seconds_per_step == pytest.approx(
            sum(t.aborted_environment_seconds for t in tallies) / steps)
        assert 0 < candidate.aborted_environment_seconds_per_step < candidate.environment_seconds_per_step
    price = wave_price(report)
    assert f"one wave of {report.recommended} groups" in price and "s in the environment" in price
    single = tune(zero_std_rate=0.3, technical_rate=0.05, candidates=[16], steps=5, widen=False)
    assert single.candidates[0].environment_seconds_per_step is None and wave_price(single) is None


def test_tune_and_demo_take_the_agent_knobs_and_refuse_them_alone(capsys, tmp_path):
    assert main(["tune", "--agent", "--turns-mean", "3", "--tool-seconds", "1.5", "--zero-std-rate", "0.3",
                 "--candidates", "16", "--steps", "20", "--no-widen", "--jobs", "1"]) == 0
    out = capsys.readouterr().out
    header = next(line for line in out.splitlines() if line.split()[:1] == ["over"])
    assert header.split()[-4:] == ["gen.s/step", "env.s/step", "env.s.aborted", "ok"]
    assert "one wave of 16 groups (128 agent episodes) costs" in out
    assert main(["tune", "--max-turns", "4", "--zero-std-rate", "0.3", "--steps", "5"]) == 2
    assert capsys.readouterr().err.strip() == "shopsim-metrics tune: error: --max-turns needs --agent"
    assert main(["tune", "--agent", "--from", str(tmp_path), "--steps", "5"]) == 2
    assert "give one of them" in capsys.readouterr().err
    assert main(["demo", "--agent", "--rollout", "fully-async", "--out", str(tmp_path / "d"), "--no-progress"]) == 2
    assert "synchronous loop only" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["tune", "--agent", "--turns-mean", "0.5", "--zero-std-rate", "0.3"])
    assert "--turns-mean: must be a number from 1 to 1000" in capsys.readouterr().err
