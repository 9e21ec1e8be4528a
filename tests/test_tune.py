"""``tune``: more over-sampling for more zero-std groups, predictions equal direct simulation, rates
measured from a run's steps.jsonl, the recommendation rule on both sides, the CLI and its plot."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

from shopsim_metrics.cli import main
from shopsim_metrics.simulator.config import SimConfig
from shopsim_metrics.simulator.loop import Simulator, simulate
from shopsim_metrics.simulator.tuning.tune import (
    TUNING_LIMIT,
    CandidateResult,
    TuneTargets,
    default_candidates,
    measured_rates,
    recommend,
    tune,
)
from shopsim_metrics.sinks import JsonlSink

CANDIDATES = [16, 24, 32, 48, 64]


def test_a_higher_zero_std_rate_gets_more_over_sampling():
    recommended = [tune(zero_std_rate=z, technical_rate=0.02, candidates=CANDIDATES, steps=300).recommended
                   for z in (0.1, 0.35, 0.6)]
    assert recommended == sorted(recommended)
    assert recommended[0] < recommended[-1]


def test_more_over_sampling_lowers_the_zero_advantage_fraction_and_costs_aborted_groups():
    report = tune(zero_std_rate=0.5, technical_rate=0.0, candidates=CANDIDATES, steps=300)
    zero_adv = [c.zero_advantage_fraction for c in report.candidates]
    aborted = [c.aborted_per_step for c in report.candidates]
    assert zero_adv == sorted(zero_adv, reverse=True) and zero_adv[0] > 0.3 and zero_adv[-1] < 0.01
    assert aborted[-1] > aborted[0]
    # zero-std groups alone never open a second wave (design document §5)
    assert all(c.p_second_wave == 0.0 and c.mean_waves == 1.0 for c in report.candidates)


def test_predicted_waves_equal_a_direct_simulation_with_the_same_seed():
    report = tune(zero_std_rate=0.3, technical_rate=0.15, candidates=[16, 32], steps=400, seed=9)
    for size in (16, 32):
        direct = simulate(SimConfig(over_sampling_batch_size=size, zero_std_rate=0.3, technical_rate=0.15, steps=400,
                                    seed=9, max_consecutive_failed_groups=TUNING_LIMIT))
        waves = [r.wave_count for r in direct.records]
        predicted = report.by_size(size)
        assert predicted.mean_waves == pytest.approx(np.mean(waves), abs=1e-12)
        assert predicted.p_second_wave == pytest.approx(np.mean([w >= 2 for w in waves]), abs=1e-12)
        assert predicted.p_third_wave == pytest.approx(np.mean([w >= 3 for w in waves]), abs=1e-12)


def test_predicted_waves_agree_with_an_independent_simulation_within_sampling_error():
    report = tune(zero_std_rate=0.3, technical_rate=0.15, candidates=[16, 24], steps=1500, seed=1)
    for size in (16, 24):
        direct = simulate(SimConfig(over_sampling_batch_size=size, zero_std_rate=0.3, technical_rate=0.15,
                                    steps=1500, seed=77, max_consecutive_failed_groups=TUNING_LIMIT))
        waves = np.array([r.wave_count for r in direct.records])
        standard_error = waves.std() / np.sqrt(len(waves)) * np.sqrt(2)  # two independent estimates
        assert abs(report.by_size(size).mean_waves - waves.mean()) < 4 * standard_error + 1e-9
    # over=16 has no spare slot: the first technical failure opens another wave; 24 has 8 spare slots
    assert report.by_size(16).p_second_wave > report.by_size(24).p_second_wave


def test_parallel_candidates_give_the_same_figures():
    serial = tune(zero_std_rate=0.4, technical_rate=0.05, candidates=[16, 32], steps=100)
    parallel = tune(zero_std_rate=0.4, technical_rate=0.05, candidates=[16, 32], steps=100, jobs=2)
    assert [c.__dict__ for c in serial.candidates] == [c.__dict__ for c in parallel.candidates]


def test_rates_measured_from_a_run_are_the_shares_of_judged_groups(tmp_path):
    config = SimConfig(steps=200, seed=4, zero_std_rate=0.25, technical_rate=0.1, max_consecutive_failed_groups=10**6)
    result = Simulator(config, sinks=[JsonlSink(tmp_path)]).run()
    rates = measured_rates(tmp_path / "steps.jsonl")
    accepted = sum(r.accepted_group_count for r in result.records)
    assert rates.accepted_groups == accepted and rates.steps == 200
    assert rates.zero_std_rate == sum(r.zero_std_group_count for r in result.records) / accepted
    assert rates.zero_std_rate == pytest.approx(0.25, abs=0.03)
    assert rates.technical_rate == pytest.approx(0.1, abs=0.02)
    assert (rates.rollout_batch_size, rates.over_sampling_batch_size) == (16, 32)


def _candidate(size: int, zero_adv: float, p_second: float) -> CandidateResult:
    return CandidateResult(size, 100, 1.0 + p_second, p_second, 0.0, zero_adv, 0.2, 3.0, size, 1.0, 60.0, 0.0)


def test_recommendation_rule_on_both_sides_of_the_targets():
    targets = TuneTargets(max_zero_advantage=0.05, max_second_wave=0.05)
    just_inside = [_candidate(16, 0.051, 0.0), _candidate(24, 0.05, 0.05), _candidate(32, 0.0, 0.0)]
    assert recommend(just_inside, targets)[0] == 24
    just_outside = [_candidate(16, 0.051, 0.0), _candidate(24, 0.05, 0.0501), _candidate(32, 0.0, 0.0)]
    assert recommend(just_outside, targets)[0] == 32
    none_meets = [_candidate(16, 0.5, 0.9), _candidate(24, 0.2, 0.1), _candidate(32, 0.1, 0.3)]
    size, reason = recommend(none_meets, targets)
    assert size == 24 and "the closest misses them by a factor 4.00" in reason  # max(4, 2) = 4, against 6 for 32
    assert not any(c.meets_targets for c in none_meets)


def test_default_candidates_and_bad_candidates():
    assert default_candidates(16) == CANDIDATES
    with pytest.raises(ValueError, match="candidates: every over_sampling_batch_size must be >= rollout_batch_size "
                                         "\\(16\\); got 8"):
        tune(zero_std_rate=0.1, technical_rate=0.0, candidates=[8, 16], steps=10)
    with pytest.raises(ValueError, match="technical_rate must be below 1"):
        tune(zero_std_rate=0.0, technical_rate=1.0, candidates=[16], steps=10)


def test_cli_prints_the_table_and_recommendation_and_writes_a_self_contained_plot(tmp_path, capsys):
    plot = tmp_path / "tune.html"
    code = main(["tune", "--zero-std-rate", "0.5", "--technical-rate", "0", "--candidates", "16,32,48",
                 "--steps", "200", "--jobs", "1", "--plot", str(plot)])
    out = capsys.readouterr().out
    assert code == 0
    lines = out.splitlines()
    assert any(line.split()[:1] == ["48"] for line in lines)
    assert "recommended over_sampling_batch_size: 48" in out
    page = plot.read_text()
    assert "Plotly.newPlot" in page and "recommended 48" in page
    assert re.search(r"<script[^>]*\bsrc=", page) is None  # plotly.js inline: opens with no network


def test_cli_from_a_run_measures_rates_and_prints_json(tmp_path, capsys):
    Simulator(SimConfig(steps=60, seed=1, zero_std_rate=0.4, technical_rate=0.0),
              sinks=[JsonlSink(tmp_path)]).run()
    code = main(["tune", "--from", str(tmp_path), "--candidates", "16,48", "--steps", "100", "--json"])
    report = json.loads(capsys.readouterr().out)
    assert code == 0
    assert report["zero_std_rate"] == pytest.approx(0.4, abs=0.08) and report["technical_rate"] == 0.0
    assert report["source"].startswith("measured from")
    # 48 is the largest given and the cheapest within the targets: the range is widened once above it,
    # and 48 stays the cheapest (more over-sampling only adds aborted tokens), so no edge warning
    assert [c["over_sampling_batch_size"] for c in report["candidates"]] == [16, 48, 72, 96]
    assert report["widened"] == [72, 96] and report["recommended"] == 48
    assert "added beyond the edge" in report["reason"] and "may lie" not in report["reason"]
    code = main(["tune", "--from", str(tmp_path), "--zero-std-rate", "0.5", "--candidates", "16,48", "--steps", "100",
                 "--json", "--no-widen"])
    report = json.loads(capsys.readouterr().out)
    assert code == 0 and report["zero_std_rate"] == 0.5
    assert report["source"].startswith("zero-std rate given, technical rate measured from")
    assert [c["over_sampling_batch_size"] for c in report["candidates"]] == [16, 48] and report["widened"] == []
    assert report["recommended"] == 48 and "the best value may lie above 48" in report["reason"]


def test_cli_needs_rates_or_a_run(tmp_path, capsys):
    assert main(["tune", "--steps", "10"]) == 2
    assert "--zero-std-rate" in capsys.readouterr().err
    assert main(["tune", "--from", str(tmp_path / "missing"), "--steps", "10"]) == 2
    assert f"{tmp_path / 'missing'}: no such file or directory" in capsys.readouterr().err
    assert main(["tune", "--zero-std-rate", "0", "--technical-rate", "1", "--steps", "10"]) == 2
    assert "technical_rate must be below 1" in capsys.readouterr().err
    assert main(["tune", "--zero-std-rate", "0.3", "--candidates", "8,16", "--steps", "10"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("shopsim-metrics tune: error: --candidates:") and err.count("\n") == 1
    assert "rollout_batch_size (16" in err and "got 8" in err
    assert "YAML" not in err and "check-config" not in err
    assert main(["tune", "--zero-std-rate", "0.3", "--rollout-batch-size", "32", "--candidates", "24,32",
                 "--steps", "10"]) == 2
    assert "from --rollout-batch-size" in capsys.readouterr().err


def test_help_states_the_recommendation_rule_of_the_code(capsys):
    with pytest.raises(SystemExit):
        main(["tune", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "the lowest cost (every token generated per step, the tokens of aborted groups included" in text
    assert "smallest candidate whose" not in text


def test_the_progress_bar_grows_with_the_candidates_widening_adds() -> None:
    import io

    from shopsim_metrics.simulator.commands import _advance
    from shopsim_metrics.simulator.progress import Progress

    bar = Progress(5, unit="candidate", desc="simulating candidates", stream=io.StringIO())
    for done in range(1, 8):  # 5 given candidates, then 2 added beyond an edge
        _advance(bar)
        assert bar.done == done and bar.total == max(5, done)
