"""The tokens of aborted groups: the partial-token rule, the loop's count against a direct token-by-token
count, and ``tune``'s predicted cost and recommendation against direct simulations that count every
generated token (with and without ``--from``)."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import shopsim_metrics.simulator.loop as loop_module
from shopsim_metrics.simulator.config import SimConfig
from shopsim_metrics.simulator.loop import Simulator
from shopsim_metrics.simulator.tuning.calibration import calibrate
from shopsim_metrics.simulator.latency import LatencyCompletions, LatencyModel, ScriptedCompletions
from shopsim_metrics.simulator.token_model import TokenModel, tokens_generated_by
from shopsim_metrics.simulator.tuning.tune import TUNING_LIMIT, TuneTargets, tune
from shopsim_metrics.sinks import JsonlSink
from shopsim_metrics.readers.steps import read_steps

lengths_strategy = st.lists(st.integers(min_value=1, max_value=8192), min_size=1, max_size=16)
shares = st.floats(min_value=0.0, max_value=1.0, allow_nan=False)


@given(lengths_strategy, shares, shares)
def test_partial_tokens_grow_with_time_from_nothing_to_the_whole_group(lengths, a, b):
    low, high = sorted((a, b))
    assert tokens_generated_by(lengths, 0.0) == 0
    assert tokens_generated_by(lengths, 1.0) == sum(lengths)
    assert 0 <= tokens_generated_by(lengths, low) <= tokens_generated_by(lengths, high) <= sum(lengths)
    # no rollout is counted beyond its own length, and none beyond the pace of the longest
    assert tokens_generated_by(lengths, high) <= len(lengths) * math.floor(high * max(lengths)) + 1e-9


def test_progress_is_the_elapsed_share_of_running_groups_and_zero_for_queued_ones():
    model = LatencyModel(median=10.0, sigma=0.0, tick=1.0, rng=None)
    done = LatencyCompletions(model, concurrency=2)
    done.begin_step()
    done.submit(range(4), ticks=[2, 8, 4, 4])
    assert done.next_batch() == [0]  # tick 2: group 2 starts in the freed slot, group 3 waits
    assert done.progress() == {1: 2 / 8, 2: 0.0, 3: 0.0}
    assert done.next_batch() == [2]  # tick 6: group 3 starts
    assert done.progress() == {1: 6 / 8, 3: 0.0}
    assert sorted(done.abort()) == [1, 3] and done.progress() == {}
    scripted = ScriptedCompletions(lambda pending: pending[:1])
    scripted.begin_step()
    scripted.submit(range(3))
    scripted.next_batch()
    assert scripted.progress() == {1: 0.0, 2: 0.0}  # explicit orders have no generation times


class RecordingCompletions(LatencyCompletions):
    """The latency-driven order, remembering the tick at which each group of the step started."""

    last: "RecordingCompletions | None" = None

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        RecordingCompletions.last = self

    def begin_step(self) -> None:
        super().begin_step()
        self.started: dict[int, int] = {}

    def _start(self) -> None:
        super()._start()
        for _, gid in self._running:
            self.started.setdefault(gid, self._now)


class RecordingTokens(TokenModel):
    """The token model, remembering every group's drawn lengths (groups are drawn in id order)."""

    last: "RecordingTokens | None" = None

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.drawn: list[list[int]] = []
        RecordingTokens.last = self

    def lengths(self, hardness):
        drawn = super().lengths(hardness)
        self.drawn.extend(drawn)
        return drawn


def direct_costs(config: SimConfig, monkeypatch) -> dict:
    """Simulate ``config`` and count, token by token, what every group generated: a judged group its whole
    lengths; an aborted one, per rollout, what ``seconds_per_token`` lets it decode between its start and
    the abort, capped at its length (a queued one nothing). Per-step means, and what the loop counted."""
    monkeypatch.setattr(loop_module, "LatencyCompletions", RecordingCompletions)
    monkeypatch.setattr(loop_module, "TokenModel", RecordingTokens)
    sums = {"judged": 0, "aborted": 0, "loop_aborted": 0, "steps": 0}

    def count(outcome) -> None:
        completions, tokens = RecordingCompletions.last, RecordingTokens.last
        end = completions.elapsed
        sums["judged"] += sum(sum(tokens.drawn[gid]) for gid in outcome.judged_ids)
        for gid in outcome.aborted_ids:
            if gid in completions.started:
                decoded = math.floor((end - completions.started[gid] * config.latency_tick) / config.seconds_per_token)
                sums["aborted"] += sum(min(length, decoded) for length in tokens.drawn[gid])
        sums["loop_aborted"] += outcome.aborted_tokens
        sums["steps"] += 1

    result = Simulator(config, sinks=[], extra_args={"shopsim_prompt_history_limit": 0}).run(progress=count)
    records = result.records
    train = sum(r.train_group_count for r in records)
    n = sums["steps"]
    return {
        "judged": sums["judged"] / n, "aborted": sums["aborted"] / n, "loop_aborted": sums["loop_aborted"] / n,
        "total": (sums["judged"] + sums["aborted"]) / n,
        "recorded_judged": sum(r.generated_token_count for r in records) / n,
        "zero_adv": sum(r.fallback_group_count for r in records) / train,
        "p_second": sum(r.wave_count >= 2 for r in records) / n,
    }


def test_the_loop_counts_the_aborted_tokens_a_direct_token_count_finds(monkeypatch):
    # a fine tick: the loop's share of whole ticks and the direct count's seconds agree to the rounding
    config = SimConfig(zero_std_rate=0.4, technical_rate=0.02, over_sampling_batch_size=64, steps=150, seed=3,
                       latency_tick=0.05, max_consecutive_failed_groups=TUNING_LIMIT)
    direct = direct_costs(config, monkeypatch)
    assert direct["recorded_judged"] == pytest.approx(direct["judged"], rel=1e-12)
    assert direct["aborted"] > 0.5 * direct["judged"]  # at 4x over-sampling the aborts cost a lot
    assert 0.99 * direct["aborted"] <= direct["loop_aborted"] <= direct["aborted"]


def test_nothing_is_aborted_without_over_sampling_and_explicit_orders_count_no_aborted_tokens(monkeypatch):
    config = SimConfig(zero_std_rate=0.0, technical_rate=0.0, over_sampling_batch_size=16, steps=20, seed=2)
    assert direct_costs(config, monkeypatch)["loop_aborted"] == 0
    from shopsim_metrics.simulator.rewards import FactoryGroupSource
    from shopsim_metrics.simulator.samples import SimSample

    def make(gid: int) -> list:
        return [SimSample(index=gid * 8 + i, rollout_id=gid * 8 + i, group_index=gid, reward=float(i % 2),
                          response_length=100) for i in range(8)]

    result = Simulator(SimConfig(steps=3, technical_rate=0.0), sinks=[], source=FactoryGroupSource(make),
                       completions=ScriptedCompletions(lambda pending: pending[:1])).run()
    assert all(o.aborted_ids and o.aborted_tokens == 0 for o in result.outcomes)


def check_against_direct(report, truth: SimConfig, monkeypatch, *, seed: int) -> dict:
    """Each candidate's predicted cost within 10% of a direct simulation of ``truth`` at that size, and the
    recommendation's true cost within 5% of the cheapest candidate that truly meets the targets."""
    targets = report.targets
    direct = {c.over_sampling_batch_size: direct_costs(truth.with_(over_sampling_batch_size=c.over_sampling_batch_size,
                                                                   seed=seed), monkeypatch)
              for c in report.candidates}
    for c in report.candidates:
        assert c.total_tokens_per_step == pytest.approx(direct[c.over_sampling_batch_size]["total"], rel=0.10)
    meeting = [size for size, d in direct.items()
               if d["zero_adv"] <= targets.max_zero_advantage and d["p_second"] <= targets.max_second_wave]
    assert report.recommended in meeting  # it truly meets the targets, and costs no more than the cheapest that does
    cheapest = min(direct[size]["total"] for size in meeting)
    assert direct[report.recommended]["total"] <= 1.05 * cheapest
    return direct


def judged_only_pick(report, targets: TuneTargets) -> int:
    """What the old rule recommended: the fewest judged tokens among the candidates within the targets."""
    return min((c for c in report.candidates if c.meets_targets),
               key=lambda c: c.generated_tokens_per_step).over_sampling_batch_size


def test_without_a_run_the_recommendation_costs_what_the_cheapest_candidate_within_the_targets_costs(monkeypatch):
    truth = SimConfig(zero_std_rate=0.4, technical_rate=0.02, steps=600, max_consecutive_failed_groups=TUNING_LIMIT)
    report = tune(zero_std_rate=0.4, technical_rate=0.02, steps=600, seed=0)
    direct = check_against_direct(report, truth, monkeypatch, seed=101)  # an independent draw
    assert report.recommended == 32 and report.widened == []  # inside the range: nothing to widen
    # the judged tokens alone favour the most over-sampling, whose true cost is far higher
    old = judged_only_pick(report, report.targets)
    assert old == 64 and direct[old]["total"] > 1.4 * direct[report.recommended]["total"]


def test_from_a_run_the_calibrated_cost_predicts_every_generated_token(tmp_path, monkeypatch):
    # the run being tuned: lengths and time per token the tuner does not know, at over-sampling 32
    truth = SimConfig(zero_std_rate=0.4, technical_rate=0.03, over_sampling_batch_size=32, steps=200, seed=1,
                      response_length_median=900.0, seconds_per_token=0.03, max_consecutive_failed_groups=TUNING_LIMIT)
    Simulator(truth, sinks=[JsonlSink(tmp_path)]).run()
    guess = truth.with_(response_length_median=300.0, seconds_per_token=0.01, seed=0)
    calibration = calibrate(read_steps(tmp_path), guess, steps=200)
    report = tune(zero_std_rate=0.4, technical_rate=0.03, steps=600, seed=0, base=guess, calibration=calibration)
    direct = check_against_direct(report, truth.with_(steps=600), monkeypatch, seed=101)
    old = judged_only_pick(report, report.targets)
    assert old != report.recommended and direct[old]["total"] > 1.05 * direct[report.recommended]["total"]


def test_the_plot_titles_every_axis_labels_the_second_axes_and_wraps_a_long_title():
    import re

    from shopsim_metrics.simulator.tuning.tune import tune_figure

    report = tune(zero_std_rate=0.4, technical_rate=0.02, candidates=[16, 32], steps=20, widen=False,
                  source="measured from /a/very/long/path/" + "run-directory/" * 12 + " (40 steps, 1187 judged groups)")
    figure = tune_figure(report)
    layout = figure.layout
    axes = [name for name in layout.to_plotly_json() if re.fullmatch(r"[xy]axis\d*", name)]
    assert len(axes) == 4 + 6  # four x axes; four y axes and two second y axes
    assert all(layout[name].title.text for name in axes)
    second = [layout[name] for name in axes if layout[name].overlaying]
    assert len(second) == 2 and all(axis.showticklabels and axis.tickmode == "auto" for axis in second)
    lines = layout.title.text.split("<br>")
    assert len(lines) >= 3 and "recommended 32" in lines[0]
    assert all(len(re.sub(r"<[^>]+>", "", line)) <= 150 for line in lines)  # no line runs off a 1,400 px page
    assert layout.margin.t >= 80 + 20 * (len(lines) - 1) and layout.height == 900
    names = {trace.name for trace in figure.data}
    assert {"judged groups' tokens", "aborted groups' tokens (simulated)", "seconds per step (right axis)"} <= names


@given(zero_std=st.floats(0.0, 0.8), technical=st.floats(0.0, 0.2), over=st.sampled_from([16, 24, 48]),
       seed=st.integers(0, 10_000))
@settings(max_examples=12, deadline=None)
def test_a_tuning_run_leaves_the_sample_hook_unwired_and_tune_figures_nothing_from_it(zero_std, technical, over,
                                                                                       seed):
    from shopsim_metrics.simulator.loop import TUNING_ARGS, tuning_run
    from shopsim_metrics.simulator.tuning.tune import summarize

    config = SimConfig(steps=12, seed=seed, zero_std_rate=zero_std, technical_rate=technical,
                       over_sampling_batch_size=over, max_consecutive_failed_groups=10_000)
    tuned = tuning_run(config)
    wired = Simulator(config, sinks=[], extra_args=TUNING_ARGS).run()
    assert all(r.total_token_count is None for r in tuned.records)  # the sample hook was not called
    assert all(r.total_token_count >= r.generated_token_count for r in wired.records)
    figures = [summarize(over, result, reference_seconds=1.0, max_consecutive_failed_groups=10_000)
               for result in (tuned, wired)]
    assert figures[0] == figures[1]
    assert [r.decisions for r in tuned.records] == [r.decisions for r in wired.records]
