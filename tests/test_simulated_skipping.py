"""Skipping in the simulator: the real data source, loaded by dotted path, on a pool with temporal consistency."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings as hsettings, strategies as st

from shopsim_metrics.run.identity import WRITER_FIELDS
from shopsim_metrics.cli import main
from shopsim_metrics.simulator.config import SimConfig
from shopsim_metrics.simulator.epochs import EpochPromptSource
from shopsim_metrics.simulator.loop import simulate
from shopsim_metrics.simulator.skipping.skip_saving import compare_skipping

ROOT = Path(__file__).resolve().parents[1]
POLARISED = SimConfig(steps=40, prompt_pool=64, skill_start=0.0, skill_end=0.0, difficulty_spread=8.0,
                      partial_credit_rate=0.0, technical_rate=0.0)


def test_the_core_simulator_does_not_load_the_adapter_by_import_or_by_name() -> None:
    """A whole simulated run with every hook, skipping and adaptive waves, and a replay: shopsimrl never loaded."""
    code = ("import sys\n"
            "from shopsim_metrics.simulator.config import SimConfig\n"
            "from shopsim_metrics.simulator.loop import simulate\n"
            "from shopsim_metrics.replay.measure import ReplayKnobs, replay_setting\n"
            "from shopsim_metrics.outcomes.trace import trace_from_mapping\n"
            "records = simulate(SimConfig(steps=4, prompt_pool=32, prompt_skip='predictive', "
            "wave_size='adaptive')).records\n"
            "trace = trace_from_mapping({str(i): [0.0, 0.5] for i in range(24)}, 8)\n"
            "replay_setting(trace, ReplayKnobs(4, 8, 6), 'greso', 'adaptive', seeds=(0,))\n"
            "assert len(records) == 4 and records[-1].skipped_prompt_count is not None\n"
            "print('shopsimrl' in {m.split('.')[0] for m in sys.modules})")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "False", out.stderr


def test_the_simulator_skips_through_the_real_data_source() -> None:
    from shopsim_metrics.prompts.data_source import PromptSkipDataSource
    from shopsimrl.data_source import PromptSkipDataSource as Wired

    source = EpochPromptSource(replace(POLARISED, prompt_skip="greso"), np.random.default_rng(0))
    assert type(source.data_source) is PromptSkipDataSource and Wired.__mro__[1] is PromptSkipDataSource
    assert Wired.__dict__.keys() <= {"__init__", "__doc__", "__module__", "__qualname__"}  # it only finds slime's monitor
    records = simulate(replace(POLARISED, prompt_skip="greso")).records
    assert all(r.skipped_prompt_count is not None for r in records) and sum(r.skipped_prompt_count for r in records)
    assert records[0].skipped_prompt_count == 0  # nothing known before the first visits
    off = simulate(POLARISED).records
    assert all(r.skipped_prompt_count is None for r in off)


def test_off_runs_are_unchanged_by_the_skip_settings() -> None:
    """``prompt_skip`` off and no drift: the same records as a config that never heard of them."""
    def simulated(config: SimConfig) -> list[dict]:  # the project's own wall time aside, a run is deterministic
        return [{k: v for k, v in r.to_dict().items() if k not in ("filter_seconds", "filter_time_fraction", *WRITER_FIELDS)}
                for r in simulate(config).records]

    plain = SimConfig(steps=6, prompt_pool=40)
    assert simulated(plain) == simulated(replace(plain, prompt_skip="off", difficulty_drift=0.0))


def test_the_comparison_counts_aborted_generation_and_pools_the_seeds() -> None:
    """On a static polarised pool skipping pays even counting what it aborts; the figure is pooled over seeds."""
    saving = compare_skipping(POLARISED, "greso", seeds=(0, 1))
    assert saving.seeds == (0, 1) and saving.mode == "greso"
    assert saving.skipping.aborted_tokens > saving.off.aborted_tokens  # a richer batch fills early: surplus aborted
    assert saving.token_ratio == pytest.approx(saving.off.tokens_per_informative_group
                                               / saving.skipping.tokens_per_informative_group)
    assert saving.token_ratio > 1.5
    assert saving.skipping.informative_share >= saving.off.informative_share
    one, other = (compare_skipping(POLARISED, "greso", seeds=(seed,)) for seed in (0, 1))
    assert saving.skipping.total_tokens == one.skipping.total_tokens + other.skipping.total_tokens
    assert saving.skipping.informative_groups == one.skipping.informative_groups + other.skipping.informative_groups


@hsettings(max_examples=15, deadline=None)
@given(drift=st.one_of(st.just(0.0), st.floats(0.01, 1.0)), steps=st.integers(0, 6), seed=st.integers(0, 50))
def test_drift_moves_difficulties_by_the_steps_taken(drift: float, steps: int, seed: int) -> None:
    source = EpochPromptSource(SimConfig(prompt_pool=8, difficulty_drift=drift), np.random.default_rng(seed))
    start = source.difficulty.copy()
    source.submit(range(4), step=steps)
    moved = np.abs(source.difficulty - start)
    assert (moved == 0).all() if drift == 0 or steps == 0 else moved.max() > 0


def test_a_skip_setting_without_a_pool_is_refused() -> None:
    with pytest.raises(ValueError, match="prompt_skip needs a prompt_pool"):
        SimConfig(prompt_skip="greso")
    with pytest.raises(ValueError, match="prompt_skip must be one of off, greso, predictive; got 'on'"):
        SimConfig(prompt_pool=4, prompt_skip="on")


def test_demo_and_tune_run_with_prompt_skip(tmp_path, capsys, monkeypatch) -> None:
    monkeypatch.setenv("WANDB_MODE", "disabled")
    assert main(["demo", "--out", str(tmp_path / "d"), "--steps", "12", "--no-progress", "--prompt-skip", "greso"]) == 0
    out = capsys.readouterr().out
    assert "skipping: " in out and "tokens saved" not in out
    assert "prompt skipping (greso) on the same pool, the same seeds (seeds 0, 1, 2;" in out
    assert "tokens per informative trained group: " in out
    table = {line.split()[0]: line.split() for line in out.splitlines() if line.startswith(("  off ", "  greso "))}
    assert set(table) == {"off", "greso"} and table["off"][-1] == "0" and int(table["greso"][-1]) > 0
    lines = [json.loads(x) for x in (tmp_path / "d" / "run" / "steps.jsonl").read_text().splitlines()]
    assert sum(x["skipped_prompt_count"] for x in lines) > 0
    assert main(["tune", "--zero-std-rate", "0.7", "--steps", "60", "--jobs", "1", "--json",
                 "--prompt-skip", "greso"]) == 0
    report = json.loads(capsys.readouterr().out)["prompt_skip"]
    assert report["mode"] == "greso" and report["seeds"] == [0, 1, 2] and report["skipping"]["skipped_prompts"] > 0
    assert report["token_ratio"] == pytest.approx(report["off"]["tokens_per_informative_group"]
                                                  / report["skipping"]["tokens_per_informative_group"])
    assert report["skipping"]["total_tokens"] >= report["skipping"]["aborted_tokens"] > 0
    assert report["pool"].startswith("assumed") and report["run_zero_std_persistence"] is None


def test_tune_says_its_skipping_pool_is_assumed_and_weighs_the_runs_own_persistence(tmp_path, capsys,
                                                                                      monkeypatch) -> None:
    """tune's model draws zero-std independently (skipping cannot save there): the comparison runs an assumed
    pool and says so; with --from, the run's measured persistence decides by the advisory's rule."""
    monkeypatch.setenv("WANDB_MODE", "disabled")
    tune = ["tune", "--steps", "40", "--jobs", "1", "--candidates", "16,32", "--no-widen", "--prompt-skip", "greso"]
    assert main([*tune, "--zero-std-rate", "0.4"]) == 0
    out = capsys.readouterr().out
    assert "on an assumed pool of 256 simulated prompts whose zero-std follows the prompt, not the independent draws" in out
    assert "on the same pool" not in out and "`tune --from RUN --prompt-skip MODE`" in out
    assert main(["demo", "--out", str(tmp_path / "d"), "--steps", "12", "--no-progress"]) == 0
    capsys.readouterr()
    lines = [json.loads(x) for x in (tmp_path / "d" / "run" / "steps.jsonl").read_text().splitlines()]
    persistence = (sum(x["repeat_zero_std_group_count"] for x in lines) / sum(x["skippable_group_count"] for x in lines))
    share = sum(x["zero_std_group_count"] for x in lines) / sum(x["accepted_group_count"] for x in lines)
    assert main([*tune, "--from", str(tmp_path / "d" / "run")]) == 0
    out = capsys.readouterr().out
    verdicts = [line for line in out.splitlines() if line.startswith("verdict: ")]
    assert len(verdicts) == 1 and out.splitlines()[-1] == verdicts[0]  # one verdict, the last line
    assert f"its zero-std persistence {persistence:.2f} at a zero-std share of {share:.2f}" in verdicts[0]
    pays = persistence >= (1 + share) / 2
    assert verdicts[0].startswith("verdict: skipping pays" if pays else "verdict: skipping does not pay")
    assert "fewer with skipping on that pool (whether your run is such a pool: the verdict below)" in out or (
        "more with skipping on that pool" in out or "no fewer with skipping on that pool" in out)
