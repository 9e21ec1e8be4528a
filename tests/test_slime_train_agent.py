"""slime's own ``train.py --debug-rollout-only`` with multi-turn agent episodes: every token counted as generated or observed.

Two custom generate functions, loaded with ``--custom-generate-function-path`` as a user would:

- slime's ``examples/retool/generate_with_retool.py``, unchanged (from the slime checkout, its Python tool
  sandbox running locally), against the fake engine in retool's dialect: some turns call the code
  interpreter, some are invalid actions (retool answers with a fixed observation), the last gives the
  final answer;
- the project's ``examples/shop_agent`` (search, view, add to cart, check out; slow tools, one slower;
  injected ``ToolTimeout`` failures; the engine's model sometimes names an item id the shop does not have: a
  model error), against the engine in the shop's dialect; and once more with every search failing, until the
  technical-failure limit ends the run. Every step's ``tool_stats`` are what was injected (the calls read back
  from the samples' trainable turns, independently of the example's own ``metadata["shopsim_tool_calls"]``).

Checked against three views independent of the project's records: the engine's log of every request
(the tokens it returned, the partial ones of an aborted request, each request's input length; its
episodes and their rollout steps), the harness's own rollout sample hook (``sample_log.py``: what each
generate call returned, as slime handed it to its hooks) and slime's perf lines (its drop counters).

Skipped unless ``SLIME_SRC`` and ``MEGATRON_SRC`` are set (see ``test_slime_train.py``).
"""

from __future__ import annotations

import doctest
import math
import sys
from collections import Counter

import pytest

import harness  # tests/slime_train, put on the path by conftest.py (not a package: never collected)

SLIME_SRC, MEGATRON_SRC = harness.SLIME_SRC, harness.MEGATRON_SRC
pytestmark = harness.pytest_marks(timeout=900)

N_SAMPLES = 4
ROLLOUT_BATCH = 2
# waves of 8 groups for a batch of 2: most of a wave is not needed, so slime's abort at the end of every step
# finds episodes mid-turn (their partial output is what retool throws away) or in a tool
OVER_SAMPLING = 8
STEPS = 4
SIZES = dict(rollout_batch_size=ROLLOUT_BATCH, over_sampling_batch_size=OVER_SAMPLING, n_samples_per_prompt=N_SAMPLES)
ENGINE = ("--base-delay", "0.1", "--delay-step", "0.03")  # each turn: 0.1 s + 0.03 s per prompt rank
# retool runs its sandbox's subprocess inside slime's event loop, which then answers nothing: turns long
# against it, so the requests in flight at slime's abort are part-way through whatever the machine's load
RETOOL_ENGINE = ("--base-delay", "0.5", "--delay-step", "0.05")
CAUSE = "ToolTimeout: search_products"
SHOP = ("--custom-generate-function-path", "generate_shop_agent.generate",
        "--custom-rm-path", "generate_shop_agent.reward")
SLOW_TOOL, SLOW_SECONDS = "checkout", 0.2
SHOP_SETTINGS = {"shop_agent_failure_rate": 0.1, "shop_agent_tool_seconds": 0.05,
                 "shop_agent_slow_tool": SLOW_TOOL, "shop_agent_slow_seconds": SLOW_SECONDS,
                 "shopsim_max_consecutive_failed_groups": 50}  # the injected failures are not an outage here
OUTAGE_SETTINGS = {"shop_agent_failure_rate": 1.0, "shopsim_max_consecutive_failed_groups": 3}


@pytest.fixture(scope="module")
def retool(tmp_path_factory):
    work = tmp_path_factory.mktemp("slime_train_retool")
    with harness.engine_and_ray(work, server_args=("--agent", "retool", *RETOOL_ENGINE), python_path=(harness.RETOOL,)) as rig:
        yield rig.train("retool", STEPS, log_samples=True, **SIZES, extra_args=(
            *harness.AGENT_FLAGS, "--custom-generate-function-path", "generate_with_retool.generate"))


@pytest.fixture(scope="module")
def shop(tmp_path_factory):
    """The shop run, and the outage run (every search fails) against the same engine and Ray head."""
    work = tmp_path_factory.mktemp("slime_train_shop")
    with harness.engine_and_ray(work, server_args=("--agent", "shop", *ENGINE), python_path=(harness.SHOP_AGENT,)) as rig:
        runs = {"shop": rig.train("shop", STEPS, log_samples=True, settings=SHOP_SETTINGS, **SIZES,
                                  extra_args=(*harness.AGENT_FLAGS, *SHOP))}
        runs["outage"] = rig.train("outage", 1, log_samples=True, settings=OUTAGE_SETTINGS, **SIZES,
                                   extra_args=(*harness.AGENT_FLAGS, *SHOP))
        yield runs


# --- what the engine and the samples say, per step ---------------------------------------------------
def runs_of_ones(mask: list[int]) -> int:
    """Maximal runs of 1s in a loss mask: the model's turns a sample holds."""
    return sum(1 for i, bit in enumerate(mask) if bit and (i == 0 or not mask[i - 1]))


def samples_by_step(run, steps: int) -> list[list[dict]]:
    lines = run.sample_log()
    return [[line for line in lines if line["rollout_id"] == step] for step in range(steps)]


def generated(line: dict) -> int:
    return sum(line["loss_mask"])


def observed(line: dict) -> int:
    return len(line["loss_mask"]) - sum(line["loss_mask"])


def episode_outputs(turns: list[dict], *, aborted_turn_kept: bool) -> tuple[int, ...]:
    """The tokens an episode's sample holds of the model's: every turn's answer, and the partial answer of a
    turn slime aborted only when the generate function keeps it."""
    return tuple(token for turn in turns if aborted_turn_kept or turn["finish"] != "abort"
                 for token in turn["output_ids"])


def sample_outputs(line: dict) -> tuple[int, ...]:
    return tuple(token for token, bit in zip(line["response_ids"], line["loss_mask"]) if bit)


def check_episodes_are_samples(run, steps: int, *, aborted_turn_kept: bool, turns_of) -> list[dict]:
    """Each step's engine episodes are the samples slime's hooks saw, one for one (matched by prompt and the
    model's tokens), with ``turns_of(sample)`` turns; returns, per step, the engine's figures."""
    by_step = run.server_log_by_step()
    assert len(by_step) == steps, f"the engine's log splits into {len(by_step)} steps"
    figures = []
    for step, (lines, samples) in enumerate(zip(by_step, samples_by_step(run, steps))):
        episodes = harness.engine_episodes(lines)
        kept = [t for turns in episodes for t in turns if aborted_turn_kept or t["finish"] != "abort"]
        calls = [len([t for t in turns if aborted_turn_kept or t["finish"] != "abort"]) for turns in episodes]
        engine_side = Counter((turns[0]["key"], episode_outputs(turns, aborted_turn_kept=aborted_turn_kept), n,
                               harness.observation_tokens(turns)) for turns, n in zip(episodes, calls))
        sample_side = Counter((line["prompt_key"], sample_outputs(line), turns_of(line), observed(line))
                              for line in samples)
        assert engine_side == sample_side, f"step {step}: engine episodes and samples differ"
        # an episode whose sample holds no token never started (aborted while queued in the engine)
        started = [n for turns, n in zip(episodes, calls) if episode_outputs(turns, aborted_turn_kept=aborted_turn_kept)]
        figures.append({
            "engine_tokens": sum(line["tokens"] for line in lines),
            "discarded_partial_tokens": sum(line["tokens"] for line in lines) - sum(t["tokens"] for t in kept),
            "observation_tokens": sum(harness.observation_tokens(turns) for turns in episodes),
            "episodes": len(started), "turns_mean": sum(started) / len(started), "turns_max": max(started),
            "environment_seconds": sum(line["non_generation_time"] for line in samples),
            "turn_count_source": "loss_mask" if any(observed(line) for line in samples) else None,
            "truncated_episodes": sum(line["status"] == "truncated" for line in samples),
        })
    return figures


# --- slime's retool, unchanged ----------------------------------------------------------------------
def test_retool_episodes_are_what_the_engine_answered(retool):
    records = harness.finished_records(retool, STEPS)
    figures = check_episodes_are_samples(retool, STEPS, aborted_turn_kept=False,
                                         turns_of=lambda line: runs_of_ones(line["loss_mask"]))
    lines = retool.server_log()
    assert max(line["turn"] for line in lines) >= 2, "no episode went past two turns"
    assert any(line["finish"] == "abort" and line["tokens"] > 0 for line in lines), "no turn aborted part-way"
    print("retool per step:", figures)
    for record, figure in zip(records, figures):
        # the records count what the samples hold: what the engine returned less the partial turns retool threw away
        assert record["total_token_count"] == figure["engine_tokens"] - figure["discarded_partial_tokens"]
        assert record["observation_token_count"] == figure["observation_tokens"]
        assert record["episode_count"] == figure["episodes"]
        assert record["turns_per_episode_max"] == figure["turns_max"]
        assert record["turns_per_episode_mean"] == pytest.approx(figure["turns_mean"])
        assert record["truncated_episode_fraction"] == figure["truncated_episodes"] / figure["episodes"]
        assert record["turn_count_source"] == figure["turn_count_source"] == "loss_mask"  # retool leaves no round_number
    words = build_tokenizer_vocabulary()
    for record, lines in zip(records, samples_by_step(retool, STEPS)):
        # retool leaves no tool-call list and no failure kind: no tool's figures, its calls counted alone
        # (tool_call_count: the turns whose code ran, read back here from the samples' tokens); its episodes end
        # completed, truncated or by slime's abort (an aborted one is never judged)
        assert record.get("tool_stats") is None and record.get("tool_error_fraction") is None
        interpreted = sum(retool_calls(line, words) for line in lines if line["status"] != "aborted")
        assert record["tool_calls_per_episode_mean"] == pytest.approx(interpreted / record["episode_count"])
        ends = record["episode_end_counts"]
        assert sum(ends.values()) == record["episode_count"]
        assert ends["environment_failure"] == ends["model_failure"] == ends["unmarked_failure"] == 0
    assert sum(f["discarded_partial_tokens"] for f in figures) > 0, "no partial turn was thrown away"


def build_tokenizer_vocabulary() -> list[str]:
    """The engine's words by token id (the harness's word-level tokenizer)."""
    import build_tokenizer

    return build_tokenizer.vocabulary(harness.DATASET)


def turns_of_words(line: dict, words: list[str]) -> list[tuple[int, list[str]]]:
    """A sample's response as runs of equal loss-mask bits, each ``(bit, its words)``."""
    runs: list[tuple[int, list[str]]] = []
    for token, bit in zip(line["response_ids"], line["loss_mask"]):
        if not runs or runs[-1][0] != bit:
            runs.append((bit, []))
        runs[-1][1].append(words[token])
    return runs


def retool_calls(line: dict, words: list[str]) -> int:
    """The code-interpreter calls of a retool episode: its turns holding code that an observation followed."""
    import agent_dialects

    runs = turns_of_words(line, words)
    return sum(1 for i, (bit, text) in enumerate(runs)
               if bit and i + 1 < len(runs) and set(text) & set(agent_dialects.RETOOL_CODE))


# --- the project's shop example ---------------------------------------------------------------------
def test_the_shop_examples_docstrings_run(monkeypatch):
    """The example imports slime: its docstring examples run here, where slime is importable."""
    monkeypatch.setattr(sys, "path", [str(harness.SHOP_AGENT), SLIME_SRC, MEGATRON_SRC, *sys.path])
    import generate_shop_agent
    import shop_tools

    for module in (generate_shop_agent, shop_tools):
        failed, attempted = doctest.testmod(module)
        assert attempted and not failed, module.__name__


def test_shop_episodes_are_what_the_engine_answered(shop):
    run = shop["shop"]
    records = harness.finished_records(run, STEPS)
    figures = check_episodes_are_samples(run, STEPS, aborted_turn_kept=True,
                                         turns_of=lambda line: line["round_number"])
    print("shop per step:", figures)
    assert any(line["finish"] == "abort" and line["tokens"] > 0 for line in run.server_log()), "no turn aborted part-way"
    for record, figure in zip(records, figures):
        # the shop example keeps an aborted turn's partial output: every token the engine returned counts
        assert record["total_token_count"] == figure["engine_tokens"]
        assert record["observation_token_count"] == figure["observation_tokens"]
        assert record["episode_count"] == figure["episodes"]
        assert record["turns_per_episode_max"] == figure["turns_max"]
        assert record["turns_per_episode_mean"] == pytest.approx(figure["turns_mean"])
        assert record["truncated_episode_fraction"] == figure["truncated_episodes"] / figure["episodes"]
        assert record["turn_count_source"] == "metadata"
        assert record["environment_seconds"] == pytest.approx(figure["environment_seconds"])


def test_shop_technical_drops_are_the_injected_failures(shop):
    run = shop["shop"]
    records = harness.finished_records(run, STEPS)
    perf = run.perf_lines()
    samples = run.sample_log()
    failed_groups = {line["group_index"] for line in samples if line.get("shopsim_failure_cause")}
    assert {line["shopsim_failure_cause"] for line in samples if "shopsim_failure_cause" in line} == {CAUSE}
    slime_aborted = {line["group_index"] for line in samples
                     if line["status"] == "aborted" and "shopsim_failure_cause" not in line}
    assert slime_aborted, "slime aborted no episode at the end of a step: the scenario did not happen"
    judged_failures = 0
    for record in records:
        technical = [row for row in record["decisions"] if row["outcome"] == "dropped_technical"]
        injected = [row for row in record["decisions"] if row["group_index"] in failed_groups]
        assert sorted(row["group_index"] for row in technical) == sorted(row["group_index"] for row in injected)
        assert all(row["technical_cause"] == CAUSE for row in technical)
        assert all(row.get("technical_cause") is None for row in record["decisions"] if row["outcome"] != "dropped_technical")
        assert record["technical_group_drop_count"] == len(injected)
        assert record.get("technical_cause_counts") == ({CAUSE: len(injected)} if injected else None)
        counters = perf[record["rollout_id"]]
        assert counters.get("rollout/dynamic_filter/drop_shopsim_unscored_technical_group", 0) == len(injected)
        judged_failures += len(injected)
        # slime's own aborts are never judged, so never technical
        judged = {row["group_index"] for row in record["decisions"]}
        assert not (slime_aborted - failed_groups) & judged
    assert judged_failures > 0, "no injected failure was judged: the scenario did not happen"


def test_shop_outage_alert_names_the_cause(shop):
    from shopsim_metrics.readers import read_steps

    run = shop["outage"]
    assert run.returncode != 0, "the run did not end at the technical-failure limit"
    assert "TechnicalFailureLimitExceeded" in run.output
    (record,) = [r.to_dict() for r in read_steps(run.records_at_end / "steps.jsonl")]
    assert record["terminated"] == 1
    assert record["technical_cause_counts"] == {CAUSE: 3}
    errors = [alert for alert in record["alerts"] if alert["level"] == "ERROR"]
    assert len(errors) == 1 and CAUSE in errors[0]["text"], record["alerts"]


# --- the shop's tools, per tool, against what was injected --------------------------------------------
def injected_calls(line: dict, words: list[str]) -> list[tuple[str, str | None]]:
    """The tool calls a sample's episode made, read back from its tokens (not from the example's metadata):
    each trainable turn's call that an observation followed, and the last turn's call when the environment
    failed it; each with who failed it (``"environment"``: the injected failure; ``"model"``: an unknown item or
    tool, :func:`shop_tools.model_mistake`; None: ok)."""
    import shop_tools

    runs = turns_of_words(line, words)
    turns = [(i, text) for i, (bit, text) in enumerate(runs) if bit]
    out = []
    for position, (i, text) in enumerate(turns):
        call = shop_tools.parse_tool_call(" ".join(text))
        if call is None:
            continue
        observed = i + 1 < len(runs)
        failed = position == len(turns) - 1 and not observed and "shopsim_failure_cause" in line
        if observed or failed:
            out.append((call[0], "environment" if failed else ("model" if shop_tools.model_mistake(*call) else None)))
    return out


def test_shop_tool_stats_are_what_was_injected(shop, monkeypatch):
    monkeypatch.setattr(sys, "path", [str(harness.SHOP_AGENT), *sys.path])
    run = shop["shop"]
    records = harness.finished_records(run, STEPS)
    words = build_tokenizer_vocabulary()
    totals: Counter = Counter()
    for record, lines in zip(records, samples_by_step(run, STEPS)):
        expected: dict[str, Counter] = {}
        for line in lines:
            for name, error in injected_calls(line, words):
                tool = expected.setdefault(name, Counter())
                tool["calls"] += 1
                tool["errors"] += error is not None
                tool["model_errors"] += error == "model"
        stats = record["tool_stats"]
        assert {name: (s["calls"], s["errors"], s["model_errors"]) for name, s in stats.items()} == {
            name: (c["calls"], c["errors"], c["model_errors"]) for name, c in expected.items()}, record["rollout_id"]
        calls = sum(c["calls"] for c in expected.values())
        assert record["tool_calls_per_episode_mean"] == pytest.approx(calls / record["episode_count"])
        assert record["model_error_fraction"] == pytest.approx(
            sum(c["model_errors"] for c in expected.values()) / calls)
        # seconds: every call's, as slime's samples carry them (non_generation_time), within 1%; the slow tool slow
        assert math.fsum(s["seconds"] for s in stats.values()) == pytest.approx(
            math.fsum(line["non_generation_time"] for line in lines), rel=0.01)
        if SLOW_TOOL in stats:
            assert stats[SLOW_TOOL]["seconds_p50"] >= SLOW_SECONDS > stats["search_products"]["seconds_max"]
        ends = record["episode_end_counts"]
        assert ends["environment_failure"] == sum("shopsim_failure_cause" in line for line in lines)
        assert ends["model_failure"] == ends["unmarked_failure"] == 0  # the model's mistakes did not end an episode
        assert sum(ends.values()) == record["episode_count"]
        # per group in the ledger: the calls of its samples
        for row in record["decisions"]:
            group = [line for line in lines if line["group_index"] == row["group_index"]]
            made = [call for line in group for call in injected_calls(line, words)]
            assert (row["tool_call_count"], row["tool_error_count"], row["model_error_count"]) == (
                len(made), sum(e is not None for _, e in made), sum(e == "model" for _, e in made))
        for c in expected.values():
            totals.update(c)
    print("shop tools over the run:", dict(totals))
    assert totals["model_errors"] > 0 and totals["errors"] > totals["model_errors"], "the scenario did not happen"
