"""``shopsim-metrics replay``: recorded outcomes replayed through the simulated slime loop, every rule and wave size.

What is checked: every judged group of a replay holds exactly its prompt's recorded visit nearest in training
time (successes and zero-std), whatever the rule (skipping never fast-forwards a prompt's history); the oracle
trains no zero-std group it could skip and loses no signal; the lost signal is the skipped draws whose recorded
visit was informative; figures pool over seeds as sums; a run's own records replay at its own knobs with its
recorded tokens; and every bad input is one line, exit 2.
"""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
from hypothesis import given, settings, strategies as st

from shopsim_metrics.cli import main
from shopsim_metrics.replay.measure import (
    ORACLE, ReplayKnobs, default_steps, oracle_kind, replay_setting,
)
from shopsim_metrics.replay.source import BY_OUTCOME, INDEPENDENT, LENGTH_MODES, TraceGroupSource
from shopsim_metrics.outcomes.trace import Trace, TraceError, Visit, load_trace, trace_from_mapping
from shopsim_metrics.simulator.config import SimConfig
from shopsim_metrics.simulator.loop import Simulator, rng_streams, token_rng
from shopsim_metrics.simulator.skipping.skip_measure import data_source_skipping_by
from shopsim_metrics.simulator.skipping.skip_saving import alerts_silenced
from shopsim_metrics.simulator.token_model import TokenModel
from shopsim_metrics.sinks.base import MemorySink
from shopsim_metrics.sinks.jsonl import JsonlSink

N = 4


def _records(trace: Trace, knobs: ReplayKnobs, skip: str, wave: str, seed: int = 0):
    """The records of one replay run, with the source it drew from."""
    run = replace(knobs.config(trace, skip, wave), seed=seed)
    _, reward_rng, _ = rng_streams(seed)
    source = TraceGroupSource(run, reward_rng, trace, TokenModel.from_config(run, token_rng(seed)),
                              lengths=knobs.lengths)
    if skip == ORACLE:
        source.data_source = data_source_skipping_by(source.data_source, oracle_kind(trace, run.steps))
    memory = MemorySink()
    with alerts_silenced():
        Simulator(run, sinks=[memory], source=source).run()
    return memory.records, source


def _keys(trace: Trace) -> dict[str, int]:
    from shopsim_metrics.judging.prompt_keys import prompt_key
    from shopsim_metrics.simulator.samples import SimSample

    return {prompt_key([SimSample(prompt=f"trace prompt {k}", label=f"answer {i}", metadata={"pool_id": i})])[0]: i
            for i, k in enumerate(trace.prompts)}


fractions = st.lists(st.sampled_from([k / N for k in range(N + 1)]), min_size=1, max_size=6)
traces = st.dictionaries(st.text("abcdefgh", min_size=1, max_size=4), fractions, min_size=6, max_size=14)


@settings(max_examples=12, deadline=None)
@given(data=traces, skip=st.sampled_from(["off", "greso", "predictive", ORACLE]),
       wave=st.sampled_from(["fixed", "adaptive"]), seed=st.integers(0, 3))
def test_every_judged_group_holds_its_visit_nearest_in_training_time(data, skip, wave, seed):
    trace = trace_from_mapping(data, N)
    knobs = ReplayKnobs(rollout_batch_size=2, over_sampling_batch_size=4, steps=10,
                        settings={"prompt_skip_threshold": 0.6})  # predictive skips readily: its draws walk the epochs faster
    records, _ = _records(trace, knobs, skip, wave, seed)
    keys = _keys(trace)
    judged = 0
    for record in records:
        for row in record.decisions:
            visit = trace.visit_at(keys[row.prompt_key], record.rollout_id, knobs.steps)
            assert row.success_count == visit.successes
            assert (row.reward_min == row.reward_max) == visit.zero_std
            judged += 1
        for row in record.skipped_prompts or []:
            assert skip != "off"
            if skip == ORACLE:  # it skips exactly the draws whose recorded visit was zero-std
                assert trace.visit_at(keys[row["prompt_key"]], record.rollout_id, knobs.steps).zero_std
    assert judged >= 2 * knobs.steps


def test_the_oracle_trains_no_zero_std_group_and_loses_nothing():
    data = {f"p{i}": [0.0, 0.5, 1.0, 0.25] * 3 if i % 2 else [0.5, 0.0, 0.75, 1.0] * 3 for i in range(40)}
    trace = trace_from_mapping(data, N)
    knobs = ReplayKnobs(rollout_batch_size=4, over_sampling_batch_size=8, steps=30)
    records, _ = _records(trace, knobs, ORACLE, "adaptive")
    assert sum(r.zero_std_group_count for r in records) == 0
    assert sum(r.skipped_prompt_count or 0 for r in records) > 0
    measure = replay_setting(trace, knobs, ORACLE, "adaptive", seeds=(0,))
    assert measure.lost_signal == 0.0 and measure.informative_groups == 4 * 30


def test_lost_signal_counts_the_skipped_draws_whose_visit_was_informative():
    data = {f"p{i}": ([0.0] * 4 + [0.5] * 4) if i % 3 else [1.0] * 8 for i in range(30)}  # zero-std, then learnable
    trace = trace_from_mapping(data, N)
    knobs = ReplayKnobs(rollout_batch_size=4, over_sampling_batch_size=8, steps=24)
    records, _ = _records(trace, knobs, "greso", "fixed", seed=1)
    keys = _keys(trace)
    informative_skips = sum(not trace.visit_at(keys[row["prompt_key"]], r.rollout_id, knobs.steps).zero_std
                            for r in records for row in r.skipped_prompts or [])
    trained = sum(r.train_group_count - r.fallback_group_count for r in records)
    measure = replay_setting(trace, knobs, "greso", "fixed", seeds=(1,))
    assert informative_skips > 0  # prompts skipped as all-fail after they had become learnable
    assert measure.forgone_informative == informative_skips
    assert measure.lost_signal == pytest.approx(informative_skips / trained)


def test_figures_pool_over_seeds_as_sums():
    trace = trace_from_mapping({f"p{i}": [0.0, 0.5, 1.0] * 4 for i in range(24)}, N)
    knobs = ReplayKnobs(rollout_batch_size=4, over_sampling_batch_size=8, steps=12)
    both = replay_setting(trace, knobs, "greso", "adaptive", seeds=(0, 1))
    one, two = (replay_setting(trace, knobs, "greso", "adaptive", seeds=(s,)) for s in (0, 1))
    assert both.total_tokens == one.total_tokens + two.total_tokens
    assert both.informative_groups == one.informative_groups + two.informative_groups
    assert both.forgone_informative == one.forgone_informative + two.forgone_informative
    assert one.total_tokens != two.total_tokens  # the seed shuffles the epochs and draws the finishing order


@settings(max_examples=40, deadline=None)
@given(times=st.lists(st.floats(0.0, 0.999), min_size=1, max_size=8, unique=True),
       step=st.integers(0, 60), steps=st.integers(1, 60))
def test_visit_at_is_the_visit_nearest_in_training_time(times, step, steps):
    times = sorted(times)
    trace = Trace(prompts=("a",), visits=(tuple(Visit(successes=i % (N + 1), zero_std=False, time=t)
                                                for i, t in enumerate(times)),), n_samples=N, origin="t")
    now = (min(step, steps - 1) + 0.5) / steps
    chosen = trace.visit_at(0, min(step, steps - 1), steps)
    assert abs(chosen.time - now) == min(abs(t - now) for t in times)


def test_default_steps_draw_each_prompt_about_as_often_as_it_was_visited():
    trace = trace_from_mapping({f"p{i}": [0.5] * 20 for i in range(40)}, N)
    steps = default_steps(trace, over_sampling_batch_size=8)
    records, _ = _records(trace, ReplayKnobs(4, 8, steps), "off", "fixed")
    submitted = sum(r.submitted_group_count for r in records)
    assert steps == 100 and submitted == trace.visit_count  # no technical failures, no second wave


def _demo_run(tmp_path, steps: int = 12):
    config = SimConfig(steps=steps, prompt_pool=48, technical_rate=0.0, seed=2)
    sink = JsonlSink(str(tmp_path / "run"), fsync=False)
    with alerts_silenced():
        Simulator(config, sinks=[sink], keep_records=False).run()
    sink.close()
    return tmp_path / "run"


def test_a_run_of_the_projects_records_replays_at_its_own_knobs_with_its_tokens(tmp_path, capsys):
    run = _demo_run(tmp_path)
    trace = load_trace(run)
    assert trace.run is not None and trace.run.steps == 12 and trace.n_samples == 8 and trace.tokens_recorded
    rows = [json.loads(line) for line in (run / "steps.jsonl").read_text().splitlines()]
    scored = sum(1 for r in rows for d in r["decisions"] if d["prompt_key"] and d["scorable_rollouts"] == 8)
    assert trace.visit_count == scored
    out = tmp_path / "rows.json"
    code = main(["replay", str(run), "--seeds", "2", "--no-progress", "--prompt-skip", "off", "predictive",
                 "--json", str(out)])
    printed = capsys.readouterr().out
    assert code == 0
    assert "rollout_batch_size 16, over_sampling_batch_size 32 (the run's own), 12 steps" in printed
    assert "tokens: the recorded response tokens" in printed
    written = json.loads(out.read_text())
    assert [(r["prompt_skip"], r["wave_size"]) for r in written] == [
        ("off", "fixed"), ("off", "adaptive"), ("predictive", "fixed"), ("predictive", "adaptive")]
    for row in written:
        assert {"prompt_skip", "wave_size", "tokens_per_informative_group", "ratio_vs_off",
                "lost_signal_per_informative", "p_second_wave", "aborted_tokens_per_step", "seeds"} <= set(row)
        assert row["seeds"] == [0, 1] and row["steps"] == 24
    assert written[0]["ratio_vs_off"] == 1.0 and written[0]["lost_signal_per_informative"] == 0.0


def test_recorded_tokens_are_what_a_replayed_group_generates(tmp_path):
    trace = load_trace(_demo_run(tmp_path, steps=4))
    knobs = ReplayKnobs(16, 32, trace.run.steps)
    records, _ = _records(trace, knobs, "off", "adaptive")
    keys = _keys(trace)
    for record in records:
        for row in record.decisions:
            visit = trace.visit_at(keys[row.prompt_key], record.rollout_id, knobs.steps)
            assert row.response_tokens == visit.tokens


@pytest.mark.parametrize("content, args, message", [
    ("{not json", ["--n-samples-per-prompt", "8"], "not JSON"),
    ('{"a": [0.5, 1.5]}', ["--n-samples-per-prompt", "8"], "prompt 'a', visit 2: 1.5 is outside [0, 1]"),
    ('{"a": [0.3]}', ["--n-samples-per-prompt", "8"], "0.3 is not a number of successes out of 8 (k/8)"),
    ('{}', ["--n-samples-per-prompt", "8"], "the trace holds no visit"),
    ('{"a": []}', ["--n-samples-per-prompt", "8"], "the trace holds no visit"),
    ('[0.5]', ["--n-samples-per-prompt", "8"], "expected a JSON object"),
    ('{"a": ["half"]}', ["--n-samples-per-prompt", "8"], "expected a success fraction"),
    ('{"a": [0.5]}', [], "needs --n-samples-per-prompt"),
])
def test_a_bad_trace_is_one_line_exit_2(tmp_path, capsys, content, args, message):
    path = tmp_path / "trace.json"
    path.write_text(content)
    assert main(["replay", str(path), "--no-progress", *args]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1 and err.startswith("shopsim-metrics replay: error:")


def test_a_run_without_per_prompt_outcomes_is_one_line_exit_2(tmp_path, capsys):
    run = tmp_path / "run"
    run.mkdir()
    record = {"rollout_id": 0, "n_samples_per_prompt": 8, "rollout_batch_size": 4, "decisions": []}
    (run / "steps.jsonl").write_text(json.dumps(record) + "\n")
    assert main(["replay", str(run), "--no-progress"]) == 2
    err = capsys.readouterr().err.strip()
    assert "no per-prompt outcomes in the records" in err and len(err.splitlines()) == 1


def test_a_missing_trace_is_one_line_exit_2(tmp_path, capsys):
    assert main(["replay", str(tmp_path / "nowhere.json"), "--n-samples-per-prompt", "8"]) == 2
    assert "no such file or directory" in capsys.readouterr().err


def test_the_trace_error_is_a_value_error():
    with pytest.raises(TraceError, match="expected an integer >= 1"):
        trace_from_mapping({"a": [0.5]}, 0)


@pytest.mark.parametrize("visits", [1, 2])
def test_a_short_run_where_prompts_are_seen_once_or_twice_costs_no_more_with_skipping(visits):
    """Prompts of fixed success rates (polarised, as a real pool's), each visited once or twice: with one visit
    nothing can be skipped; with two, what is skipped never costs more tokens per informative group."""
    import numpy as np

    rng = np.random.default_rng(5)
    data = {f"p{i}": [rng.binomial(N, p) / N for _ in range(visits)] for i, p in enumerate(rng.beta(0.4, 0.4, 320))}
    trace = trace_from_mapping(data, N)
    knobs = ReplayKnobs(16, 32, default_steps(trace, 32))
    for wave in ("fixed", "adaptive"):
        off = replay_setting(trace, knobs, "off", wave, seeds=(0, 1, 2))
        predictive = replay_setting(trace, knobs, "predictive", wave, seeds=(0, 1, 2))
        assert off.tokens_per_informative_group / predictive.tokens_per_informative_group >= 1.0
        assert (predictive.skipped_prompts == 0) == (visits == 1)


def test_the_shared_trace_reads_as_its_readme_describes_it():
    from pathlib import Path

    trace = load_trace(Path(__file__).resolve().parents[1] / "benchmarks" / "data" /
                       "one_shot_rlvr_dsr_sub_acc.dev.json", 8)
    assert len(trace.prompts) == 605 and {len(v) for v in trace.visits} <= set(range(44, 58))
    assert round(trace.zero_std_share, 2) == 0.49
    pairs = [(a.zero_std, b.zero_std) for visits in trace.visits for a, b in zip(visits, visits[1:])]
    after_zero = [b for a, b in pairs if a]
    after_spread = [b for a, b in pairs if not a]
    assert round(sum(after_zero) / len(after_zero), 2) == 0.77 and round(sum(after_spread) / len(after_spread), 2) == 0.22


@settings(max_examples=10, deadline=None)
@given(seed=st.integers(0, 50), lengths=st.sampled_from(LENGTH_MODES),
       skip=st.sampled_from(["off", "greso", "predictive"]),
       past=st.lists(st.sampled_from([k / N for k in range(N + 1)]), min_size=36, max_size=36),
       future=st.lists(st.sampled_from([k / N for k in range(N + 1)]), min_size=36, max_size=36),
       other=st.lists(st.sampled_from([k / N for k in range(N + 1)]), min_size=36, max_size=36))
def test_a_replay_never_reads_a_prompts_later_visits(seed, lengths, skip, past, future, other):
    """Two traces that differ only in visits after the middle of the run replay the first half alike, tokens
    included: no length (nor a cost a rule reads from the lengths) depends on what a prompt did later."""
    visits = 6  # per prompt: visits 0-2 recorded alike, 3-5 differ
    def trace_of(later):
        return trace_from_mapping({f"p{i}": past[3 * i:3 * i + 3] + later[3 * i:3 * i + 3] for i in range(12)}, N)
    knobs = ReplayKnobs(rollout_batch_size=2, over_sampling_batch_size=4, steps=12, lengths=lengths,
                        settings={"prompt_skip_threshold": 0.6})
    first, second = (_records(trace_of(later), knobs, skip, "adaptive", seed)[0] for later in (future, other))
    alike = [s for s in range(knobs.steps) if (s + 0.5) / knobs.steps < 3 / visits]  # nearest visit among 0-2
    assert alike == list(range(6))
    for step in alike:
        assert _replayed(first[step]) == _replayed(second[step])


def _replayed(record) -> tuple:
    """What a replayed step did: its tokens, its skips and every judged group (clocks and run ids left out)."""
    return (record.total_token_count, record.aborted_token_count, record.skipped_prompt_count,
            [(r.order, r.prompt_key, r.outcome, r.success_count, r.response_tokens) for r in record.decisions])


def test_lengths_by_outcome_follow_the_groups_own_visit_and_independent_ones_nothing():
    trace = trace_from_mapping({"fails": [0.0], "solves": [1.0]}, N)
    medians = {}
    for mode in LENGTH_MODES:
        config = SimConfig(prompt_pool=2, n_samples_per_prompt=N, steps=1, technical_rate=0.0,
                           response_length_sigma=0.0)
        source = TraceGroupSource(config, rng_streams(0)[1], trace, TokenModel.from_config(config, token_rng(0)),
                                  lengths=mode)
        source.submit(range(2), step=0)
        medians[mode] = {trace.prompts[source.prompt_id(g)]: source.aborted_lengths(g, 1.0)[0] for g in range(2)}
    assert medians[BY_OUTCOME]["fails"] > 700 > medians[BY_OUTCOME]["solves"]
    assert medians[INDEPENDENT]["fails"] == medians[INDEPENDENT]["solves"] == 700


def test_the_best_row_respects_its_lost_signal_limit_and_the_table_has_a_legend_and_a_few_visits_warning(tmp_path, capsys):
    path = tmp_path / "trace.json"
    path.write_text(json.dumps({f"p{i}": [0.0, 0.0] if i % 2 else [0.25] for i in range(40)}))  # 1.5 visits each
    out = tmp_path / "rows.json"
    base = ["replay", str(path), "--n-samples-per-prompt", str(N), "--rollout-batch-size", "4",
            "--over-sampling-batch-size", "8", "--seeds", "1", "--no-progress", "--json", str(out)]
    assert main(base) == 0
    printed = capsys.readouterr().out
    for column in ("skip, waves", "tokens/inf.grp", "vs off", "lost sig.", "P(2nd)", "aborted/step", "skipped/step"):
        assert column in printed.split("-" * 20)[-1], column  # the legend under the table names every column
    assert "warning: prompts were visited 1.5 times each on average (20 of 40 only once)" in printed
    rows = json.loads(out.read_text())
    assert all(row["lengths"] == "by-outcome" for row in rows)
    losses = sorted(r["lost_signal_per_informative"] for r in rows if r["prompt_skip"] in ("greso", "predictive"))
    limit = (losses[0] + losses[-1]) / 2 if losses[-1] > losses[0] else losses[0]
    assert main(base + ["--best-within-lost-signal", f"{limit:.6f}"]) == 0
    best = next(line for line in capsys.readouterr().out.splitlines() if line.startswith(("best", "nothing")))
    assert f"within a lost signal of {float(f'{limit:.6f}'):g} (--best-within-lost-signal)" in best
    allowed = [r for r in rows if r["prompt_skip"] != ORACLE and (r["prompt_skip"], r["wave_size"]) != ("off", "fixed")
               and r["lost_signal_per_informative"] <= float(f"{limit:.6f}")]
    top = max(allowed, key=lambda r: r["ratio_vs_off"])
    if top["ratio_vs_off"] > 1.0:
        assert best.startswith("best within") and f"{top['prompt_skip']} with {top['wave_size']} waves" in best
    else:
        assert best.startswith("nothing saves tokens")


def test_replay_prints_which_length_model_it_used(tmp_path, capsys):
    path = tmp_path / "trace.json"
    path.write_text(json.dumps({f"p{i}": [0.0, 0.5, 1.0] for i in range(16)}))
    for mode in LENGTH_MODES:
        assert main(["replay", str(path), "--n-samples-per-prompt", str(N), "--seeds", "1", "--no-progress",
                     "--prompt-skip", "off", "--wave-size", "fixed", "--lengths", mode]) == 0
        assert f"lengths {mode}: " in capsys.readouterr().out

