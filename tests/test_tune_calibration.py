"""``tune --from`` calibrates the cost: fitted response lengths and time per token predict what a direct
simulation at another over_sampling_batch_size generates; the cost columns, the note on where the time
comes from, and the recommendation that weighs tokens."""

from __future__ import annotations

import json

import numpy as np
import pytest

from shopsim_metrics.cli import main
from shopsim_metrics.record.records import DecisionRow, StepRecord
from shopsim_metrics.simulator.config import SimConfig
from shopsim_metrics.simulator.loop import Simulator, simulate
from shopsim_metrics.simulator.tuning.calibration import calibrate, judged_tokens_per_rollout, mean_rollout_seconds
from shopsim_metrics.simulator.token_model import TokenModel
from shopsim_metrics.simulator.tuning.tune import TUNING_LIMIT, CandidateResult, TuneTargets, recommend, tune
from shopsim_metrics.sinks import JsonlSink
from shopsim_metrics.readers.steps import read_steps

# the run being calibrated: lengths and time per token the tuner does not know
TRUE = SimConfig(zero_std_rate=0.3, technical_rate=0.02, over_sampling_batch_size=48, steps=150, seed=1,
                 response_length_median=900.0, seconds_per_token=0.03, max_consecutive_failed_groups=TUNING_LIMIT)
GUESS = TRUE.with_(response_length_median=300.0, seconds_per_token=0.01, seed=0)


def _tokens_per_step(records) -> float:
    return sum(r.generated_token_count for r in records) / len(records)


@pytest.fixture(scope="module")
def run_records(tmp_path_factory):
    out = tmp_path_factory.mktemp("run")
    Simulator(TRUE, sinks=[JsonlSink(out)]).run()
    return out, read_steps(out)


def test_calibrated_tokens_per_step_are_within_5_percent_of_a_direct_simulation(run_records):
    _, records = run_records
    calibration = calibrate(records, GUESS, steps=150)
    # judged groups are a biased sample (long groups get aborted): the fit corrects for it
    model = TokenModel.from_config(TRUE, np.random.default_rng(0))
    mean_rollout_tokens = model.mean_group_tokens() / TRUE.n_samples_per_prompt
    assert calibration.observed_tokens_per_rollout < 0.8 * mean_rollout_tokens
    assert calibration.response_length_median == pytest.approx(TRUE.response_length_median, rel=0.08)
    assert calibration.seconds_per_token == pytest.approx(TRUE.seconds_per_token, rel=0.08)
    assert calibration.time_measured and calibration.timed_steps == TRUE.steps
    report = tune(zero_std_rate=0.3, technical_rate=0.02, candidates=[24, 64], steps=200, base=GUESS,
                  calibration=calibration)
    for size in (24, 64):
        # the tuner's seed (common random numbers): what differs is the fitted model, not the luck of the draw
        direct = simulate(TRUE.with_(over_sampling_batch_size=size, steps=200, seed=0))
        predicted = report.by_size(size)
        assert predicted.generated_tokens_per_step == pytest.approx(_tokens_per_step(direct.records), rel=0.05)
        seconds = sum(o.rollout_time for o in direct.outcomes) / len(direct.outcomes)
        assert predicted.mean_rollout_seconds == pytest.approx(seconds, rel=0.08)
    # without calibration the guess is far off: the test above is not passing by default
    plain = tune(zero_std_rate=0.3, technical_rate=0.02, candidates=[64], steps=200, base=GUESS)
    direct = simulate(TRUE.with_(over_sampling_batch_size=64, steps=200, seed=0))
    assert plain.by_size(64).generated_tokens_per_step < 0.6 * _tokens_per_step(direct.records)


def test_observed_figures_are_ratios_of_sums_over_rows_with_tokens():
    def row(tokens: int, rollouts: int) -> DecisionRow:
        return DecisionRow(order=1, waves_open=1, group_index=0, outcome="trained", reason=None,
                           remaining_before=1, unique_rollouts=rollouts, response_tokens=tokens)

    records = [StepRecord(rollout_id=0, decisions=[row(800, 8), row(0, 8)], rollout_seconds=10.0),
               StepRecord(rollout_id=1, decisions=[row(100, 4)], rollout_seconds=20.0),
               StepRecord(rollout_id=2, decisions=[row(0, 0)], rollout_seconds=None)]
    assert judged_tokens_per_rollout(records) == (900 / 12, 2)
    assert mean_rollout_seconds(records) == (15.0, 2)
    assert judged_tokens_per_rollout(records[2:]) == (None, 0)
    with pytest.raises(ValueError, match="no judged group with response tokens"):
        calibrate(records[2:], GUESS, steps=5)


def test_the_recommendation_takes_the_cheapest_candidate_in_every_generated_token_among_those_meeting_the_targets():
    def candidate(size: int, zero_adv: float, judged: float, aborted: float, seconds: float = 60.0) -> CandidateResult:
        return CandidateResult(size, 10, 1.0, 0.0, 0.0, zero_adv, 0.1, 0.0, size, 1.0, seconds, 0.0,
                               generated_tokens_per_step=judged, aborted_tokens_per_step=aborted,
                               total_tokens_per_step=judged + aborted)

    cheaper_larger = [candidate(16, 0.2, 5000.0, 0.0), candidate(24, 0.01, 8500.0, 500.0),
                      candidate(32, 0.0, 7000.0, 1000.0)]
    size, reason = recommend(cheaper_larger, TuneTargets())
    assert size == 32 and "8,000 tokens per step generated (1,000 of them by aborted groups)" in reason
    # fewer judged tokens do not win when the aborted groups cost more than they save
    aborted_heavy = [candidate(24, 0.01, 8000.0, 1000.0), candidate(32, 0.0, 6000.0, 3001.0)]
    assert recommend(aborted_heavy, TuneTargets())[0] == 24
    ties = [candidate(24, 0.01, 8000.0, 0.0, seconds=70.0), candidate(32, 0.0, 8000.0, 0.0, seconds=50.0),
            candidate(48, 0.0, 8000.0, 0.0, seconds=50.0)]
    assert recommend(ties, TuneTargets())[0] == 32  # equal tokens: fewer seconds, then the smaller


def test_cli_without_a_run_says_the_time_is_a_model(tmp_path, capsys):
    plot = tmp_path / "tune.html"
    code = main(["tune", "--zero-std-rate", "0.3", "--candidates", "16,32", "--steps", "20", "--jobs", "1",
                 "--plot", str(plot)])
    out = capsys.readouterr().out
    assert code == 0
    header = next(line for line in out.splitlines() if "over" in line.split())
    assert {"judged.tok", "aborted.tok", "tokens/step", "sec/step", "tok.waste"} <= set(header.split())
    row = next(line for line in out.splitlines() if line.split()[:1] == ["32"])
    assert len(row.split()) == len(header.split())  # one cell per column
    assert "sec/step is a model, not a measurement" in out
    assert "cost per step: every token generated, and the time" in plot.read_text()


def test_cli_from_a_timed_run_fits_the_time_and_reports_it(run_records, capsys):
    path, _ = run_records
    code = main(["tune", "--from", str(path), "--candidates", "48,64", "--steps", "30", "--json"])
    report = json.loads(capsys.readouterr().out)
    assert code == 0
    assert report["time_measured"] is True
    calibration = report["calibration"]
    assert calibration["timed_steps"] == TRUE.steps and calibration["seconds_per_token"] > 0
    assert all(c["generated_tokens_per_step"] > 0 and 0 <= c["wasted_token_fraction"] < 1
               and c["total_tokens_per_step"] == pytest.approx(c["generated_tokens_per_step"]
                                                               + c["aborted_tokens_per_step"], rel=1e-12)
               for c in report["candidates"])
    code = main(["tune", "--from", str(path), "--candidates", "48", "--steps", "30"])
    out = capsys.readouterr().out
    assert code == 0 and "fitted to the run's rollout_seconds" in out and "not a measurement" not in out


def test_cli_from_a_run_without_tokens_or_time_falls_back_to_the_model(run_records, tmp_path, capsys):
    path, _ = run_records
    lines = []
    for line in (path / "steps.jsonl").read_text().splitlines():
        data = json.loads(line)
        data.pop("rollout_seconds", None)
        for row in data.get("decisions", []):
            row.pop("response_tokens", None)
        lines.append(json.dumps(data))
    (tmp_path / "steps.jsonl").write_text("\n".join(lines) + "\n")
    code = main(["tune", "--from", str(tmp_path), "--candidates", "48", "--steps", "10"])
    captured = capsys.readouterr()
    assert code == 0
    said = [line for line in captured.err.splitlines() if not line.startswith("simulating candidates:")]
    assert len(said) == 1 and "records no response tokens" in said[0]
    assert "sec/step is a model, not a measurement" in captured.out


def test_a_records_file_is_read_in_one_streaming_pass_to_what_its_records_give(run_records, tmp_path):
    from shopsim_metrics.simulator.tuning.calibration import ObservedCost, read_observed_cost

    out, records = run_records
    observed = read_observed_cost(out)
    assert observed == ObservedCost.of_records(records) and observed.tokens_per_rollout and observed.timed_steps
    # a resumed run wrote steps again: the later record wins, its ledger and its time
    lines = (out / "steps.jsonl").read_text().splitlines()
    again = json.loads(lines[3])
    again["decisions"] = again["decisions"][:1]
    again["decisions"][0].update(response_tokens=10**6, unique_rollouts=2)
    again["rollout_seconds"] = 1e6
    resumed = tmp_path / "steps.jsonl"
    resumed.write_text("\n".join([*lines, json.dumps(again)]) + "\n")
    observed = read_observed_cost(resumed)
    assert observed == ObservedCost.of_records(read_steps(resumed)) != ObservedCost.of_records(records)


def test_tune_from_reads_the_records_once_for_the_rates_and_the_cost(run_records, monkeypatch, capsys):
    """One streaming pass gives what the two separate reads give; the command makes only that pass."""
    import shopsim_metrics.readers.steps as steps_reader
    from shopsim_metrics.simulator.tuning.calibration import read_observed_cost
    from shopsim_metrics.simulator.tuning.tune import measured_rates, measured_rates_and_cost

    out, _ = run_records
    assert measured_rates_and_cost(out) == (measured_rates(out), read_observed_cost(out))
    passes = []
    real = steps_reader.read_step_columns

    def counted(*args, **kwargs):
        passes.append(args[0])
        return real(*args, **kwargs)

    monkeypatch.setattr(steps_reader, "read_step_columns", counted)
    assert main(["tune", "--from", str(out), "--candidates", "48", "--steps", "10", "--json"]) == 0
    assert len(passes) == 1
    calibration = json.loads(capsys.readouterr().out)["calibration"]
    assert calibration["timed_steps"] == TRUE.steps and calibration["seconds_per_token"] > 0
