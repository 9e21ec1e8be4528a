"""The headline cost, total tokens per informative trained group, as ``inspect`` and the demo print it."""

from __future__ import annotations

import json
from dataclasses import replace

from shopsim_metrics.cli import main
from shopsim_metrics.simulator.config import SimConfig
from shopsim_metrics.simulator.loop import Simulator
from shopsim_metrics.simulator.tally import RunTally, format_headline

CONFIG = SimConfig(steps=6, seed=3, technical_rate=0.05, over_sampling_batch_size=24)


def _write(path, records) -> None:
    path.write_text("".join(json.dumps(r.to_dict()) + "\n" for r in records))


def _headline(capsys, path) -> str:
    assert main(["inspect", str(path)]) == 0
    return next(line for line in capsys.readouterr().out.splitlines()
                if line.startswith("tokens per informative trained group:"))


def test_inspect_prints_every_token_per_informative_group_over_the_run(tmp_path, capsys) -> None:
    records = Simulator(CONFIG, sinks=[]).run().records
    _write(tmp_path / "steps.jsonl", records)
    total = sum(r.total_token_count for r in records)
    aborted = sum(r.aborted_token_count for r in records)
    informative = sum(r.train_group_count - r.fallback_group_count for r in records)
    assert total > sum(r.generated_token_count for r in records)  # aborted groups' tokens are in the total
    line = _headline(capsys, tmp_path / "steps.jsonl")
    assert f"group: {total / informative:,.0f} " in line
    assert f"{total / len(records):,.0f} per step, {aborted / len(records):,.0f} of them aborted" in line


def test_without_the_sample_hook_the_headline_says_so_and_guesses_nothing(tmp_path, capsys) -> None:
    records = Simulator(CONFIG, sinks=[], sample_hook=False).run().records
    assert all(r.total_token_count is None and r.tokens_per_informative_group is None for r in records)
    _write(tmp_path / "steps.jsonl", records)
    assert _headline(capsys, tmp_path / "steps.jsonl").endswith("- (the sample hook was not wired: no total token count)")


def test_the_demo_tally_and_inspect_agree(tmp_path, capsys) -> None:
    tally = RunTally(planned_steps=CONFIG.steps)
    records = Simulator(replace(CONFIG, seed=4), sinks=[], tally=tally).run().records
    _write(tmp_path / "steps.jsonl", records)
    assert _headline(capsys, tmp_path / "steps.jsonl") == format_headline(tally.cost_totals, tally.steps)
