"""An agent's tools seen per tool: the tool-call contract (metadata shopsim_tool_calls, bad entries counted, never
raised), the per-step tool fields and why episodes ended, the ledger's per-group counts, the model's mistakes apart
from the environment's (shopsim_failure_kind) in the streak's alerts and its termination, W&B keys, inspect, preflight
and the simulator (docs §3.9.3)."""

from __future__ import annotations

import json
import math
from collections import Counter
from types import SimpleNamespace

import pytest
from hypothesis import given, settings, strategies as st

from conftest import fifo_batches, group_of, run_scripted_step
from shopsim_metrics.errors import TechnicalFailureLimitExceeded
from shopsim_metrics.judging.episodes import read_episode
from shopsim_metrics.judging.group_judgement import judge_group, unmarked_kind
from shopsim_metrics.judging.tool_calls import MAX_CALLS, MAX_SECONDS, read_tool_calls
from shopsim_metrics.record import contract
from shopsim_metrics.record.records import StepRecord
from shopsim_metrics.simulator.samples import SimSample
from shopsim_metrics.step.generated_tokens import GeneratedTokens
from shopsim_metrics.step.tool_fields import top_tools, tool_fields
from shopsim_metrics.step.tool_tally import ToolStat

KEY = contract.TOOL_CALLS_KEY


def call(name="search_products", seconds=0.5, ok=True, **extra):
    return {"name": name, "seconds": seconds, "ok": ok, **extra}


# --- the contract: one episode's list ------------------------------------------------------------------------
class RaisingStr(str):
    def strip(self, *args):  # noqa: D401 - a hostile subclass
        raise RuntimeError("strip")

    def __str__(self):
        raise RuntimeError("str")


class RaisingDict(dict):
    def get(self, *args):
        raise RuntimeError("get")

    def __getitem__(self, key):
        raise RuntimeError("getitem")


class RaisingList(list):
    def __len__(self):
        raise RuntimeError("len")


BAD_ENTRIES = [
    "junk", None, 3, [], {}, {"name": "x"}, call(name=""), call(name="   "), call(name=7), call(seconds=-1.0),
    call(seconds=float("nan")), call(seconds=float("inf")), call(seconds=MAX_SECONDS * 2), call(seconds=10 ** 400),
    call(seconds=True), call(seconds="0.5"), call(ok=1), call(ok="yes"), call(ok=None), call(ok=False, kind="user"),
    call(ok=False, kind=3),
]


@pytest.mark.parametrize("bad", BAD_ENTRIES, ids=repr)
def test_a_bad_entry_is_ignored_and_counted_never_raised(bad):
    read = read_tool_calls({KEY: [call(), bad, call(name="view_item", ok=False, kind="model")]})
    assert read.unreadable == 1
    assert [(c.name, c.error) for c in read.calls] == [("search_products", None), ("view_item", "model")]


def test_hostile_values_read_as_unknown_never_raise():
    read = read_tool_calls({KEY: [call(name=RaisingStr("search")), RaisingDict(name="x"), call(seconds=10 ** 400)]})
    assert read.calls == () or all(type(c.name) is str for c in read.calls)
    assert len(read.calls) + read.unreadable == 3
    assert read_tool_calls({KEY: RaisingList([call()])}) [:2] == ((), 1)
    assert read_tool_calls({KEY: "not a list"}).unreadable == 1
    assert read_tool_calls(RaisingDict()) is None


def test_a_list_past_the_cap_counts_the_rest_unread():
    read = read_tool_calls({KEY: [call()] * (MAX_CALLS + 5)})
    assert (len(read.calls), read.unreadable) == (MAX_CALLS, 5)


json_values = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
                           lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner,
                                                                                         max_size=4), max_leaves=10)


@settings(max_examples=200, deadline=None)
@given(st.lists(json_values | st.fixed_dictionaries(
    {"name": st.text(max_size=80), "seconds": st.floats() | st.integers(-5, 10 ** 30), "ok": st.booleans()},
    optional={"kind": st.sampled_from(["model", "environment", "other"]), "error": json_values}), max_size=30))
def test_every_entry_is_read_or_counted_and_a_read_one_is_in_range(entries):
    read = read_tool_calls({KEY: entries})
    assert len(read.calls) + read.unreadable == len(entries)
    for c in read.calls:
        assert type(c.name) is str and 0 < len(c.name) <= 64 and c.name == c.name.strip()
        assert 0.0 <= c.seconds <= MAX_SECONDS and c.error in (None, "environment", "model")


def test_an_episode_with_tool_calls_is_an_agent_episode_and_an_empty_list_is_not():
    assert read_episode(SimSample(response_length=5, metadata={KEY: [call()]})).multi_turn
    assert not read_episode(SimSample(response_length=5, metadata={KEY: []})).multi_turn
    assert not read_episode(SimSample(response_length=5)).multi_turn


# --- the per-step fields ------------------------------------------------------------------------------------
@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(st.tuples(st.sampled_from(["search", "view", "cart", "bad name", "a/b"]),
                                   st.floats(0, 100, allow_nan=False), st.sampled_from([None, "environment", "model"])),
                         max_size=8), min_size=1, max_size=12))
def test_the_step_holds_every_call_of_every_episode_it_started(episodes):
    tokens = GeneratedTokens()
    samples = []
    for i, calls in enumerate(episodes):
        entries = [call(n, s, e is None, **({"kind": e} if e else {})) for n, s, e in calls]
        sample = SimSample(index=i, rollout_id=i, response_length=3, loss_mask=[1, 0, 1], metadata={KEY: entries},
                           status="aborted" if i % 3 == 2 else "completed")
        tokens.observe(sample, step=0)
        samples.append(sample)
    live = tokens.take(0, [samples[:2]])
    fields = tool_fields(live.tools)
    flat = [c for calls in episodes for c in calls]
    stats = fields["tool_stats"]
    assert sum(s["calls"] for s in stats.values()) == len(flat)
    assert sum(s["errors"] for s in stats.values()) == sum(e is not None for _, _, e in flat)
    assert sum(s["model_errors"] for s in stats.values()) == sum(e == "model" for _, _, e in flat)
    assert math.fsum(s["seconds"] for s in stats.values()) == pytest.approx(math.fsum(s for _, s, _ in flat))
    assert set(stats) <= {"search", "view", "cart", contract.OTHER_TOOLS}  # unsafe names fold into the rest
    assert fields["tool_calls_per_episode_mean"] == len(flat) / len(episodes)
    ends = fields["episode_end_counts"]
    assert sum(ends.values()) == len(episodes) and list(ends) == list(contract.EPISODE_END_REASONS)
    assert ends["slime_abort"] == sum(1 for i in range(2, len(episodes)) if i % 3 == 2)  # none was judged


def test_retools_call_count_is_read_as_calls_per_episode_alone():
    tokens = GeneratedTokens()
    for i, count in enumerate((2, 0, 10 ** 400)):
        sample = SimSample(index=i, rollout_id=i, response_length=3, loss_mask=[1, 0, 1])
        sample.tool_call_count = count
        tokens.observe(sample, step=0)
    fields = tool_fields(tokens.take(0, []).tools)
    assert fields["tool_calls_per_episode_mean"] == 2 / 3
    assert "tool_stats" not in fields and "tool_error_fraction" not in fields


def test_twenty_tools_and_the_rest():
    tools = {f"tool_{i:02d}": ToolStat(100 - i, 1, 0, [1.0] * (100 - i)) for i in range(25)}
    stats = top_tools(tools)
    assert list(stats)[:20] == [f"tool_{i:02d}" for i in range(20)]
    assert stats[contract.OTHER_TOOLS]["calls"] == sum(100 - i for i in range(20, 25))
    assert stats[contract.OTHER_TOOLS]["seconds_max"] == 1.0


# --- through the hooks ------------------------------------------------------------------------------------
def agent_group(gid, rewards, calls_of, **kw):
    group = group_of(gid, rewards, **kw)
    for i, sample in enumerate(group):
        sample.response_length, sample.loss_mask, sample.non_generation_time = 5, [1, 1, 0, 0, 1], 1.0
        sample.metadata = {**(sample.metadata or {}), KEY: calls_of(gid, i), "round_number": 2}
    return group


def shop_calls(gid, i):
    return [call("search_products", 0.4), call("view_item", 0.1, ok=i != 1, **({"kind": "model"} if i == 1 else {})),
            call("checkout", 2.0, ok=i != 2, **({"error": "HTTP 500"} if i == 2 else {}))]


def test_an_agent_step_records_its_tools_and_each_group_its_calls(wired):
    loop, memory, run = wired(rollout_batch_size=2, over_sampling_batch_size=2)
    run_scripted_step(loop, 0, lambda gid: agent_group(gid, [1.0, 0.0] * 4, shop_calls), fifo_batches(1))
    record = memory.records[-1]
    episodes = record.episode_count
    groups = len(record.decisions)
    assert record.tool_stats["search_products"] == {"calls": episodes, "errors": 0, "model_errors": 0,
                                                    "seconds": pytest.approx(0.4 * episodes), "seconds_p50": 0.4,
                                                    "seconds_p90": 0.4, "seconds_max": 0.4}
    assert (record.tool_stats["view_item"]["errors"], record.tool_stats["view_item"]["model_errors"]) == (groups, groups)
    assert (record.tool_stats["checkout"]["errors"], record.tool_stats["checkout"]["model_errors"]) == (groups, 0)
    assert record.tool_calls_per_episode_mean == 3.0
    assert record.tool_error_fraction == pytest.approx(2 * groups / (3 * episodes))
    assert record.model_error_fraction == pytest.approx(groups / (3 * episodes))
    assert record.tool_call_unreadable_count == 0
    assert record.episode_end_counts["completed"] == sum(row.unique_rollouts for row in record.decisions)
    for row in record.decisions:
        assert (row.tool_call_count, row.tool_error_count, row.model_error_count) == (24, 2, 1)
    line = json.loads((run / contract.STEPS_FILE_NAME).read_text().splitlines()[-1])
    assert StepRecord.from_dict(line).to_dict() == line and line["tool_stats"] == record.tool_stats
    from shopsim_metrics.sinks.wandb_sink import record_scalars
    scalars = record_scalars(record)
    assert scalars[contract.tool_key("view_item", "model_error_rate")] == pytest.approx(1 / 8)
    assert scalars[contract.episode_end_key("completed")] == record.episode_end_counts["completed"]
    assert scalars[contract.wandb_key("tool_calls_per_episode_mean")] == 3.0


def test_a_single_turn_records_gains_no_field(wired):
    from conftest import spread
    loop, memory, run = wired(rollout_batch_size=2, over_sampling_batch_size=2)
    run_scripted_step(loop, 0, spread, fifo_batches(1))
    line = json.loads((run / contract.STEPS_FILE_NAME).read_text().splitlines()[-1])
    new = {*contract.TOOL_FIELDS, "tool_stats", "episode_end_counts", "model_failure_group_count"}
    assert new.isdisjoint(line)
    assert all({"failure_kind", "tool_call_count"}.isdisjoint(row) for row in line["decisions"])


# --- the model's mistakes apart from the environment's ------------------------------------------------------
def failed_group(gid, kind=None, cause=None):
    group = group_of(gid, [1.0, 0.0] * 4)
    group[2].status = "aborted"
    group[2].metadata = {k: v for k, v in ((contract.FAILURE_KIND_KEY, kind), (contract.FAILURE_CAUSE_KEY, cause))
                         if v is not None}
    for sample in group:
        sample.response_length, sample.loss_mask = 5, [1, 1, 0, 0, 1]
    return group


@pytest.mark.parametrize("kind, cause, expected", [
    ("model", None, "model"), ("model", "ParseError: no tool call", "model"), (None, "ToolTimeout: x", "environment"),
    ("environment", None, "environment"), (None, None, None), ("odd", None, None)])
def test_who_failed_a_technical_group(kind, cause, expected):
    judgement = judge_group(failed_group(0, kind, cause))
    assert (judgement.kind, judgement.failed_check, judgement.failure_kind) == ("technical", "status_aborted", expected)
    assert unmarked_kind(judgement) == (expected or "unmarked")  # in an agent run, nobody said: unmarked


def test_a_single_turn_streak_says_nothing_of_kinds(wired):
    from conftest import technical
    loop, memory, _ = wired(rollout_batch_size=2, over_sampling_batch_size=16, shopsim_max_consecutive_failed_groups=8)
    with pytest.raises(TechnicalFailureLimitExceeded) as raised:
        run_scripted_step(loop, 0, technical, fifo_batches(1))
    assert raised.value.kinds == {} and "tau-bench" not in str(raised.value) and "dominated" not in str(raised.value)
    assert all(row.failure_kind is None for row in memory.records[-1].decisions)


def test_a_scored_model_mistake_is_not_technical_but_counted_as_a_model_failure():
    group = group_of(0, [1.0, 0.0] * 4)
    group[1].metadata = {contract.FAILURE_KIND_KEY: "model"}
    assert judge_group(group).kind == "spread"
    tokens = GeneratedTokens()
    for sample in group:
        sample.response_length, sample.loss_mask = 3, [1, 0, 1]
        tokens.observe(sample, step=0)
    assert tokens.take(0, [group]).tools.ends["model_failure"] == 1


def test_model_failures_count_toward_the_streak_and_the_termination_says_they_dominated(wired):
    loop, memory, _ = wired(rollout_batch_size=2, over_sampling_batch_size=16, shopsim_max_consecutive_failed_groups=8)
    with pytest.raises(TechnicalFailureLimitExceeded) as raised:
        run_scripted_step(loop, 0, lambda gid: failed_group(gid, "model" if gid != 3 else None,
                                                            None if gid != 3 else "ToolTimeout: x"), fifo_batches(1))
    assert "the model's mistakes dominated (7 of 8" in str(raised.value)
    assert raised.value.kinds == {"environment": 1, "model": 7}
    (error,) = [a for a in memory.alerts if a.level == "ERROR"]
    assert "the model's mistakes dominated (7 of 8" in error.text
    record = memory.records[-1]
    assert record.model_failure_group_count == 7 and record.episode_end_counts["model_failure"] == 7
    assert [row.failure_kind for row in record.decisions][:4] == ["model", "model", "model", "environment"]


def test_a_streak_with_no_cause_says_so_and_points_to_the_tau_bench_change(wired):
    loop, memory, _ = wired(rollout_batch_size=2, over_sampling_batch_size=16, shopsim_max_consecutive_failed_groups=8)
    with pytest.raises(TechnicalFailureLimitExceeded) as raised:
        run_scripted_step(loop, 0, lambda gid: failed_group(gid), fifo_batches(1))
    text = str(raised.value)
    assert "no cause and no kind was left for 8 of 8" in text and "examples/tau-bench" in text
    assert "docs §3.9.4" in text
    assert memory.records[-1].episode_end_counts["unmarked_failure"] == 8


def test_a_resumed_streak_keeps_its_kinds():
    from shopsim_metrics.health.streak import TechnicalStreak
    streak = TechnicalStreak(limit=8)
    for kind in ("model", "model", "unmarked"):
        streak.observe("status_aborted", None, kind)
    again = TechnicalStreak(limit=8)
    again.load_state_dict(json.loads(json.dumps(streak.state_dict())))
    assert again.kinds == {"model": 2, "unmarked": 1}
    with pytest.raises(ValueError, match="failure kinds"):
        again.load_state_dict({"count": 1, "checks": {"status_aborted": 1}, "kinds": {"model": 2}})


# --- inspect, preflight --------------------------------------------------------------------------------------
def test_inspect_prints_the_agent_columns(wired, capsys):
    from shopsim_metrics.cli import main
    loop, memory, run = wired(rollout_batch_size=2, over_sampling_batch_size=2)
    run_scripted_step(loop, 0, lambda gid: agent_group(gid, [1.0, 0.0] * 4, shop_calls), fifo_batches(1))
    assert main(["inspect", str(run)]) == 0
    out = capsys.readouterr().out
    assert "Agent episodes and tools" in out and "calls/ep" in out and "model.err" in out
    row = out.split("Agent episodes and tools\n")[1].splitlines()[1].split()
    assert row[:2] == ["0", str(memory.records[-1].episode_count)] and row[6] == "3.0"


def test_inspect_of_a_single_turn_run_prints_no_agent_table(wired, capsys):
    from conftest import spread
    from shopsim_metrics.cli import main
    loop, _, run = wired(rollout_batch_size=2, over_sampling_batch_size=2)
    run_scripted_step(loop, 0, spread, fifo_batches(1))
    assert main(["inspect", str(run)]) == 0
    assert "Agent episodes" not in capsys.readouterr().out


@pytest.mark.parametrize("path, warned", [("generate_with_tau.generate", True), ("examples.generate_with_retool.generate", True),
                                          ("generate_with_search.generate", True), ("generate_shop_agent.generate", False)])
def test_preflight_warns_for_slimes_examples_that_leave_no_cause(path, warned):
    from shopsim_metrics.settings.preflight import preflight
    report = preflight(["--custom-generate-function-path", path])
    hits = [w for w in report.warnings if w.startswith("--custom-generate-function-path")]
    assert bool(hits) == warned
    if path.startswith("generate_with_tau"):
        assert "two-line change" in hits[0] and "docs §3.9.4" in hits[0]


# --- the simulator ----------------------------------------------------------------------------------------------
def test_simulated_tools_are_what_the_simulator_generated():
    from shopsim_metrics.simulator.config import AgentModel, SimConfig
    from shopsim_metrics.simulator.loop import simulate
    result = simulate(SimConfig(steps=4, seed=3, agent=AgentModel()))
    assert result.records
    for record, outcome in zip(result.records, result.outcomes):
        made = outcome.episodes.tools
        stats = record.tool_stats
        assert {n: (s["calls"], s["errors"], s["model_errors"]) for n, s in stats.items()} == {
            n: (t[0], t[1], t[2]) for n, t in made.items()}
        for name, tool in made.items():
            assert stats[name]["seconds"] == pytest.approx(tool[3])
    seconds = Counter()
    for record in result.records:
        for name, s in record.tool_stats.items():
            seconds[name] += s["seconds"] / s["calls"]
    assert seconds["search_products"] > seconds["view_item"]  # the search is the slow tool


def test_the_burst_is_one_tool_timing_out():
    from shopsim_metrics.simulator.config import AgentModel, FailureBurst, SimConfig
    from shopsim_metrics.simulator.loop import simulate
    burst = FailureBurst(step=1, rate=0.9, cause="ToolTimeout: search_products")
    result = simulate(SimConfig(steps=3, seed=1, agent=AgentModel(), bursts=(burst,)))
    step = next(r for r in result.records if r.rollout_id == 1)
    search = step.tool_stats["search_products"]
    assert search["errors"] - search["model_errors"] >= step.technical_group_drop_count
    assert step.episode_end_counts["environment_failure"] >= step.technical_group_drop_count


def test_tune_prices_a_waves_environment_time_per_tool():
    from shopsim_metrics.simulator.config import AgentModel, SimConfig
    from shopsim_metrics.simulator.tuning.tune import tune, wave_price
    report = tune(zero_std_rate=0.3, technical_rate=0.0, candidates=[16], steps=3, widen=False,
                  base=SimConfig(agent=AgentModel()))
    tools = report.by_size(16).tool_seconds_per_step
    assert set(tools) == {t.name for t in AgentModel().tools}
    line = wave_price(report).splitlines()[1]
    assert line.startswith("its environment time by tool: ") and "search_products" in line
    shares = [float(part.rsplit("(", 1)[1].rstrip("%),")) for part in line.split(": ", 1)[1].split(", ")]
    assert sum(shares) == pytest.approx(100, abs=len(shares))


def test_an_odd_hook_sample_with_tools_never_raises():
    from shopsim_metrics.settings.preflight import load_function
    from shopsimrl.slime_runtime import configure, reset_runtime
    hook = load_function(contract.SAMPLE_HOOK_PATH)
    args = SimpleNamespace(rollout_batch_size=1, n_samples_per_prompt=1)
    configure(args, sinks=[])
    try:
        for metadata in ({KEY: [call(name=RaisingStr("x"))]}, {KEY: RaisingList([1])}, RaisingDict(),
                         {KEY: [call(seconds=10 ** 400)], contract.FAILURE_KIND_KEY: RaisingStr("model")}):
            assert hook(args, SimSample(response_length=2, loss_mask=[1, 0], metadata=metadata), rollout_id=0) is None
    finally:
        reset_runtime()


class RaisingEq(str):
    def __eq__(self, other):
        raise RuntimeError("eq")

    __hash__ = str.__hash__


def test_a_status_whose_comparison_raises_is_read_as_its_plain_text():
    episode = read_episode(SimSample(response_length=3, loss_mask=[1, 0, 1], status=RaisingEq("aborted"),
                                     metadata={contract.FAILURE_KIND_KEY: RaisingEq("model")}))
    assert episode.failed and not episode.truncated and episode.failure_kind == "model"
