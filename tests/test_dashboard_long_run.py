"""The HTML dashboard on a long run: every trace downsampled to at most 5,000 points (spikes kept), the
step picker offers the interesting steps only, and the page stays under 15 MB whatever the run length."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from shopsim_metrics.dashboards.data import load_dashboard_data
from shopsim_metrics.dashboards.downsample import MAX_POINTS, minmax_buckets
from shopsim_metrics.dashboards.html import page_names, render_html
from shopsim_metrics.dashboards.spec import dashboard_spec
from shopsim_metrics.simulator.config import FailureBurst, SimConfig
from shopsim_metrics.simulator.loop import Simulator
from shopsim_metrics.sinks import JsonlSink

STEPS = 20_000  # 4x the points a trace may draw (benchmarks/bench_big_files.py renders 120,000)
PAGE_LIMIT = 15_000_000
SPIKE_STEP = 7_777  # the one step with 9 waves
TERMINATED = (4_000, 19_000)


def _ledger(groups: int, waves: int) -> list[dict]:
    return [{"order": k + 1, "waves_open": 1 + (k * waves) // groups, "group_index": k, "outcome": "trained",
             "reason": None, "remaining_before": max(0, 16 - k), "unique_rollouts": 8, "reward_mean": 0.5,
             "failed_check": None} for k in range(groups)]


def _write_long_run(path: Path) -> None:
    """STEPS records: small ledgers, a multi-wave step every 50, big ledgers (1,024 groups) every 100."""
    with open(path, "w") as fh:
        for step in range(STEPS):
            waves = 9 if step == SPIKE_STEP else (2 if step % 50 == 0 else 1)
            groups = 1024 if step % 100 == 0 else 3
            record = {"rollout_id": step, "wave_count": waves, "submitted_group_count": 32 * waves,
                      "accepted_group_count": 20, "train_group_count": 16, "fallback_group_count": 1,
                      "technical_group_drop_count": 1, "zero_std_group_drop_count": 2, "surplus_group_count": 1,
                      "aborted_group_count": 32 * waves - 20, "success_rate": (step % 997) / 997,
                      "wasted_sample_fraction": 0.2 + 0.7 * (step % 313 == 0), "rollout_batch_size": 16,
                      "terminated": step in TERMINATED, "technical_failure_limit": 8,
                      "decisions": _ledger(groups, waves)}
            fh.write(json.dumps(record, separators=(",", ":")) + "\n")


def test_a_long_run_draws_downsampled_and_the_page_stays_small(tmp_path: Path) -> None:
    path = tmp_path / "steps.jsonl"
    _write_long_run(path)
    data = load_dashboard_data(path)
    assert len(data.rollout_ids) == STEPS
    assert len(data.ledgers) <= 200, "only the ledgers a page can offer are kept in memory"
    page = render_html(data)
    assert len(page.encode()) < PAGE_LIMIT, len(page.encode())
    assert "Downsampled for drawing: 20,000 steps" in page

    figures = {m.group(1): json.loads(m.group(2)) for m in
               re.finditer(r'<script type="application/json" id="plot-([\w-]+)-figure">(.*?)</script>', page, re.S)}
    for panel_id, figure in figures.items():
        for trace in figure["data"]:
            assert len(trace.get("x", [])) <= MAX_POINTS, (panel_id, trace.get("name"), len(trace["x"]))
    waves = next(t for t in figures["waves"]["data"] if t.get("meta") == "wave_count")
    assert max(waves["y"]) == 9, "the min/max buckets keep the spike"
    assert SPIKE_STEP in waves["x"]

    ledger = re.search(r'id="ledger-data-remaining_ledger">(.*?)</script>', page, re.S)
    offered = set(map(int, json.loads(ledger.group(1))))
    assert {SPIKE_STEP, STEPS - 1, *TERMINATED} <= offered, "multi-wave spike, terminated and latest steps offered"
    assert 1 < len(offered) <= 100
    assert any(step % 313 == 0 for step in offered), "a highest-waste step is offered"


def test_minmax_buckets_keep_every_extreme_and_the_order() -> None:
    x = list(range(20_001))
    y = [(k * 7919) % 1000 for k in x]
    y[12_345], y[54] = 5_000, -5
    dx, dy = minmax_buckets(x, y)
    assert len(dx) <= MAX_POINTS and dx == sorted(dx)
    assert max(dy) == 5_000 and min(dy) == -5
    assert all(y[i] == v for i, v in zip(dx, dy))


@pytest.mark.parametrize("knobs", [
    dict(prompt_skip="predictive", wave_size="adaptive", prompt_pool=96, bursts=(FailureBurst(step=5, rate=0.9),)),
    dict(rollout="fully-async"),
])
def test_the_page_read_from_its_own_columns_is_the_page_read_from_every_column(tmp_path: Path, knobs) -> None:
    """A records file is read into the columns the page draws (a long run's memory), and the page is the same."""
    run_dir = tmp_path / "run"
    Simulator(SimConfig(steps=24, seed=11, max_consecutive_failed_groups=1000, **knobs),
              sinks=[JsonlSink(run_dir)]).run()
    every, own = load_dashboard_data(run_dir), load_dashboard_data(run_dir, names=page_names(dashboard_spec()))
    assert set(own.columns) < set(every.columns)  # some columns are not read
    assert render_html(own) == render_html(every)
    assert [k for k, v in every.columns.items() if k not in own.columns and any(x is not None for x in v)]
