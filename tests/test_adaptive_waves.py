"""Waves sized to fill the batch (shopsim_wave_size: adaptive): the data source sizes each wave, slime's
identities still hold, and the sizes keep to their bounds."""

from __future__ import annotations

import itertools
import math
from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from shopsim_metrics.judging.group_judgement import SPREAD, TECHNICAL, ZERO_STD
from shopsim_metrics.simulator.config import SimConfig
from shopsim_metrics.simulator.data_sources import CountingDataSource
from shopsim_metrics.simulator.loop import Simulator, simulate
from shopsim_metrics.waves.wave_size import (RECENT_WINDOW, RecentOrders, RecentSteps, adaptive_wave_size,
                                            replayed_second_wave_probability, second_wave_probability)
from shopsimrl.data_source import PromptSkipDataSource
from shopsimrl.slime_runtime import reset_runtime

TOKENS = dict(seconds_per_token=0.01, response_length_median=150.0)


@pytest.fixture(autouse=True)
def _fresh_runtime():
    yield
    reset_runtime()


class _Recorded:
    """Wraps the data source the simulated loop asks: each call's (asked, served, remaining before it)."""

    def __init__(self, source, state):
        self.source, self.state, self.calls = source, state, []

    def get_samples(self, n):
        remaining = self.state.remaining
        served = self.source.get_samples(n)
        self.calls.append((self.state.step, n, len(served), remaining))
        return served


def _run_recorded(config):
    """Simulate ``config`` with its real group source, whose data source's calls are recorded."""
    from shopsim_metrics.simulator.loop import make_group_source, rng_streams, token_rng
    from shopsim_metrics.simulator.token_model import TokenModel
    from shopsim_metrics.loop import loop_state

    _, reward_rng, _ = rng_streams(config.seed)
    source = make_group_source(config, reward_rng, TokenModel.from_config(config, token_rng(config.seed)))
    states = []
    real_init = loop_state.ManualLoopState.__init__

    def remembering_init(self, *args, **kwargs):  # the loop's state, which the recorder reads
        real_init(self, *args, **kwargs)
        states.append(self)

    loop_state.ManualLoopState.__init__ = remembering_init
    try:
        recorder = _Recorded(source.data_source, None)
        source.data_source = recorder
        simulator = Simulator(config, sinks=[], source=source)
        recorder.state = _LateState(states)
        result = simulator.run()
    finally:
        loop_state.ManualLoopState.__init__ = real_init
    per_step = [[(asked, served, remaining) for step, asked, served, remaining in recorder.calls if step == o.rollout_id]
                for o in result.outcomes]
    return result, per_step


class _LateState:
    """The simulator's loop state, found once the run has made it."""

    def __init__(self, states):
        self.states = states

    def __getattr__(self, name):
        return getattr(self.states[-1], name)


@settings(max_examples=8, deadline=None)
@given(seed=st.integers(0, 10_000), zero_std=st.floats(0.0, 0.7), technical=st.floats(0.0, 0.15),
       cap=st.sampled_from([None, 20, 64]))
def test_identities_hold_and_each_wave_keeps_to_its_bounds(seed, zero_std, technical, cap):
    config = SimConfig(steps=6, seed=seed, zero_std_rate=zero_std, technical_rate=technical, wave_size="adaptive",
                       wave_size_cap=cap, max_technical_streak=5, over_sampling_batch_size=24, **TOKENS)
    result, per_step = _run_recorded(config)
    cap_in_force = cap or config.over_sampling_batch_size
    for record, outcome, calls in zip(result.records, result.outcomes, per_step):
        assert record.train_group_count == config.rollout_batch_size
        assert record.wave_count == outcome.waves == len(calls)
        assert record.submitted_group_count == outcome.submitted == sum(served for _, served, _ in calls)
        assert record.aborted_group_count == record.submitted_group_count - record.accepted_group_count
        for asked, served, remaining in calls:
            assert asked == config.over_sampling_batch_size  # slime asks for over_sampling_batch_size
            minimum = max(config.rollout_batch_size - remaining, 1)
            assert minimum <= served <= max(cap_in_force, minimum)
        waves_open = [row.waves_open for row in record.decisions]
        assert waves_open == sorted(waves_open) and waves_open[-1] <= record.wave_count


def test_adaptive_waves_cut_the_aborted_generation_at_a_high_informative_rate():
    fixed = simulate(SimConfig(steps=30, seed=2, zero_std_rate=0.15, over_sampling_batch_size=48, **TOKENS))
    adaptive = simulate(SimConfig(steps=30, seed=2, zero_std_rate=0.15, over_sampling_batch_size=48,
                                  wave_size="adaptive", **TOKENS))
    aborted = [sum(r.aborted_token_count for r in run.records) for run in (fixed, adaptive)]
    assert aborted[1] < 0.5 * aborted[0]
    second = [np.mean([o.waves > 1 for o in run.outcomes]) for run in (fixed, adaptive)]
    assert second[1] <= 0.1


def test_the_first_step_is_served_as_asked_and_the_fixed_mode_never_asks_the_monitor():
    args = SimpleNamespace(shopsim_wave_size="fixed", rollout_batch_size=4, n_samples_per_prompt=1)
    source = PromptSkipDataSource(args, inner=CountingDataSource(), monitor=object())  # object(): never asked
    assert len(source.get_samples(9)) == 9
    adaptive = SimConfig(steps=1, seed=0, zero_std_rate=0.0, wave_size="adaptive", over_sampling_batch_size=40)
    (outcome,) = simulate(adaptive).outcomes
    assert outcome.submitted == 40  # nothing known of the rates before the first step closes


def test_a_bad_wave_setting_is_named():
    from shopsim_metrics.settings import ShopsimConfigError

    with pytest.raises(ShopsimConfigError, match="shopsim_wave_size: expected one of fixed, adaptive; got 'big'"):
        PromptSkipDataSource(SimpleNamespace(shopsim_wave_size="big"), inner=CountingDataSource())


def _slime_second_wave_probability(margin, need, spread_rate, technical_rate):
    """Every finishing order of the ``need + margin`` groups generating, weighed and run through slime's drop
    rule as the design document writes it (§3): the probability that ``remaining`` falls below the target."""
    target = 100  # any target: only remaining - target matters
    zero_std_rate = 1.0 - spread_rate - technical_rate
    total = 0.0
    for kinds in itertools.product("SZT", repeat=need + margin):
        weight = math.prod({"S": spread_rate, "Z": zero_std_rate, "T": technical_rate}[k] for k in kinds)
        remaining, data = target + margin, target - need
        for kind in kinds:
            if data == target:
                break
            if kind == "T" or (kind == "Z" and remaining > target):  # keep_when_insufficient: Z kept at remaining <= target
                remaining -= 1
                if remaining < target:
                    total += weight
                    break
            else:
                data += 1
    return total


@settings(max_examples=150, deadline=None)
@given(margin=st.integers(0, 4), need=st.integers(0, 4), spread=st.floats(0, 1), technical_share=st.floats(0, 1))
def test_the_second_wave_probability_is_slimes_drop_rule_over_every_finishing_order(margin, need, spread,
                                                                                    technical_share):
    technical = (1.0 - spread) * technical_share
    assert second_wave_probability(margin, need, spread, technical) == pytest.approx(
        _slime_second_wave_probability(margin, need, spread, technical), abs=1e-12)


@settings(max_examples=200, deadline=None)
@given(margin=st.integers(0, 40), need=st.integers(0, 40), spread=st.floats(0, 1), technical_share=st.floats(0, 1),
       more=st.floats(0, 1))
def test_more_margin_or_fewer_technical_failures_never_make_another_wave_likelier(margin, need, spread,
                                                                                  technical_share, more):
    technical = (1.0 - spread) * technical_share
    p = second_wave_probability(margin, need, spread, technical)
    assert 0.0 <= p <= 1.0 + 1e-12
    assert second_wave_probability(margin + 1, need, spread, technical) <= p + 1e-12
    worse = technical + (1.0 - spread - technical) * more  # zero-std groups turned technical
    assert second_wave_probability(margin, need, spread, worse) >= p - 1e-12
    if technical == 0.0:
        assert p == 0.0  # zero-std groups alone never open a wave: fallback takes them


def _slime_replayed_probability(order, margin, need, spread_rate, technical_rate):
    """Every sequence of finishing groups, weighed and run through slime's drop rule (design document §3): a
    group is technical with ``technical_rate``, else the next of ``order`` (its technical ones left out);
    past the order, spread / technical / zero-std at the rates. P(``remaining`` falls below the target)."""
    order = order.replace("t", "")

    def another(position, margin_left, needed):
        if needed == 0:
            return 0.0
        if position < len(order):
            nexts = [("T", technical_rate), (order[position].upper(), 1.0 - technical_rate)]
        else:
            nexts = [("S", spread_rate), ("T", technical_rate), ("Z", 1.0 - spread_rate - technical_rate)]
        total = 0.0
        for kind, weight in nexts:
            step = position + (kind != "T" and position < len(order))
            if kind == "T" or (kind == "Z" and margin_left > 0):  # dropped (zero-std only while margin is left)
                total += weight * (1.0 if margin_left == 0 else another(step, margin_left - 1, needed))
            else:
                total += weight * another(step, margin_left, needed - 1)
        return total

    return another(0, margin, need)


@settings(max_examples=150, deadline=None)
@given(order=st.text("szt", max_size=8), margin=st.integers(0, 3), need=st.integers(0, 4), spread=st.floats(0, 1),
       technical_share=st.floats(0, 1))
def test_the_replayed_probability_is_slimes_drop_rule_over_every_sequence(order, margin, need, spread,
                                                                         technical_share):
    technical = (1.0 - spread) * technical_share
    assert replayed_second_wave_probability(order, margin, need, spread, technical) == pytest.approx(
        _slime_replayed_probability(order, margin, need, spread, technical), abs=1e-10)


@settings(max_examples=200, deadline=None)
@given(order=st.text("sz", max_size=60), margin=st.integers(0, 40), need=st.integers(0, 40), spread=st.floats(0, 1),
       technical_share=st.floats(0, 0.3))
def test_more_margin_never_makes_another_wave_likelier_in_a_replayed_order(order, margin, need, spread,
                                                                          technical_share):
    technical = (1.0 - spread) * technical_share
    p = replayed_second_wave_probability(order, margin, need, spread, technical)
    assert -1e-12 <= p <= 1.0 + 1e-12
    assert replayed_second_wave_probability(order, margin + 1, need, spread, technical) <= p + 1e-9
    if technical == 0.0:
        assert p == 0.0


def _forward_replayed_probability(order, margin, need, spread_rate, technical_rate):
    """slime's drop rule played forward group by group over every (drops, kept) state, nothing left out: before
    each group of ``order`` (its technical ones left out) any number of technical failures (probability t each),
    then the group; past the order, the independent kinds (:func:`second_wave_probability`, checked above)."""
    t, states, another = technical_rate, {(0, 0): 1.0}, 0.0
    if need <= 0:
        return 0.0
    for letter in order.replace("t", ""):
        arrived = {}
        for (drops, kept), p in states.items():
            for failures in range(margin - drops + 1):  # each within the margin, then the group finishes
                weight = p * t ** failures * (1.0 - t)
                d = drops + failures
                if letter == "z" and d < margin:
                    key = (d + 1, kept)
                else:
                    key = (d, kept + 1)  # spread, or zero-std let in as fallback
                if key[1] < need:
                    arrived[key] = arrived.get(key, 0.0) + weight
            another += p * t ** (margin - drops + 1)  # one failure more than the margin takes
        states = arrived
    return another + sum(p * second_wave_probability(margin - drops, need - kept, spread_rate, technical_rate)
                         for (drops, kept), p in states.items())


@settings(max_examples=60, deadline=None)
@given(order=st.text("szt", max_size=80), margin=st.integers(0, 20), need=st.integers(0, 40), spread=st.floats(0.01, 1),
       technical_share=st.floats(0, 0.6))
def test_the_replayed_probability_is_the_drop_rule_played_forward_over_long_orders(order, margin, need, spread,
                                                                                  technical_share):
    technical = (1.0 - spread) * technical_share
    expected = _forward_replayed_probability(order, margin, need, spread, technical)
    got = replayed_second_wave_probability(order, margin, need, spread, technical)
    assert expected - 1e-13 <= got <= expected + 1e-10  # never below: what is left out counts as another wave


def test_zero_std_groups_finishing_first_make_another_wave_likelier_than_the_same_kinds_spread_evenly():
    early, even, late = "z" * 8 + "s" * 8, "zs" * 8, "s" * 8 + "z" * 8
    p = [replayed_second_wave_probability(order, 4, 12, 0.5, 0.02) for order in (early, even, late)]
    assert p[0] > p[1] > p[2]


orders = st.one_of(st.none(), st.text("szt", max_size=70))


@settings(max_examples=300, deadline=None)
@given(target=st.integers(1, 40), remaining=st.integers(0, 60), kept_share=st.floats(0, 1), judged=st.integers(0, 30),
       recent_orders=st.lists(orders, min_size=1, max_size=4), spread=st.floats(0.01, 1),
       technical_share=st.floats(0, 1), p=st.floats(0.05, 0.999), cap=st.integers(1, 80))
def test_the_size_is_the_smallest_that_fills_within_its_bounds(target, remaining, kept_share, judged, recent_orders,
                                                               spread, technical_share, p, cap):
    kept = min(int(kept_share * min(target, remaining)), target - 1)
    recent = RecentSteps(orders=tuple(recent_orders), spread_rate=spread,
                         technical_rate=(1.0 - spread) * technical_share)
    size, probability = adaptive_wave_size(target=target, remaining=remaining, kept=kept, judged=judged,
                                           recent=recent, fill_probability=p, cap=cap)
    minimum = max(target - remaining, 1)
    assert minimum <= size <= max(cap, minimum)

    def another_wave(wave):
        return recent.second_wave_probability(remaining + wave - target, target - kept, judged)

    assert probability == another_wave(size)
    assert another_wave(size) <= 1.0 - p or size == max(cap, minimum)
    if size > minimum:  # one group fewer would not have been enough
        assert another_wave(size - 1) > 1.0 - p


def test_the_recent_steps_are_averaged_each_from_the_place_the_step_has_reached():
    recent = RecentSteps(orders=("zzss", None, "sszz"), spread_rate=0.5, technical_rate=0.1)
    expected = (replayed_second_wave_probability("ss", 1, 2, 0.5, 0.1) + second_wave_probability(1, 2, 0.5, 0.1)
                + replayed_second_wave_probability("zz", 1, 2, 0.5, 0.1)) / 3
    assert recent.second_wave_probability(1, 2, judged=2) == pytest.approx(expected)


def _finishing_steps(rng, steps, wave, target, zero_std_rates, technical_rate):
    """Steps of slime's loop with one wave of ``wave`` groups, their zero-std rate changing every 8 steps through
    ``zero_std_rates``, where zero-std groups finish three times as fast as those with spread and a
    technical failure may come at any place: each step's judged kinds in finishing order (as the
    accountant records them), and whether it needed another wave."""
    out = []
    for i in range(steps):
        zero_std_rate = zero_std_rates[i // 8 % len(zero_std_rates)]
        kinds = rng.choice(["s", "z"], size=wave, p=[1 - zero_std_rate, zero_std_rate])
        finishing = kinds[np.argsort(rng.exponential(np.where(kinds == "z", 1.0 / 3.0, 1.0)))]
        finishing = np.where(rng.random(wave) < technical_rate, "t", finishing)
        margin, kept, order, another = wave - target, 0, "", False
        for kind in finishing:
            order += kind
            if kind == "t" or (kind == "z" and margin > 0):
                margin -= 1
                if margin < 0:
                    another = True
                    break
            else:
                kept += 1
                if kept == target:
                    break
        out.append((order, another))
    return out


def test_replaying_the_recent_orders_predicts_another_wave_where_zero_std_groups_finish_first():
    """The kinds depend on the finishing order and on the step here: the replay of the recent steps (as recorded:
    judged groups only) predicts how often another wave comes; kinds drawn independently at the recent
    rates predict too few."""
    rng = np.random.default_rng(7)
    target, wave, technical = 16, 34, 0.04
    history = _finishing_steps(rng, 4000, wave, target, (0.1, 0.6), technical)
    realised = np.mean([another for _, another in history])
    replayed, independent = [], []
    for i in range(RECENT_WINDOW, len(history), 5):
        recorded = RecentOrders()
        for order, _ in history[i - RECENT_WINDOW:i]:
            recorded.observe([{"s": SPREAD, "z": ZERO_STD, "t": TECHNICAL}[k] for k in order])
        recent = recorded.recent()
        replayed.append(recent.second_wave_probability(wave - target, target))
        independent.append(second_wave_probability(wave - target, target, recent.spread_rate, recent.technical_rate))
    standard_error = math.sqrt(realised * (1 - realised) / len(history))
    assert realised - 2 * standard_error <= np.mean(replayed) <= realised + 3 * standard_error
    assert np.mean(independent) < realised - 3 * standard_error


@settings(max_examples=100, deadline=None)
@given(steps=st.lists(st.text("szt", max_size=30), max_size=12), window=st.integers(1, 8))
def test_the_recent_steps_are_the_windows_orders_and_survive_a_snapshot(steps, window):
    recorded = RecentOrders(window=window)
    for order in steps:
        recorded.observe([{"s": SPREAD, "z": ZERO_STD, "t": TECHNICAL}[k] for k in order])
    kept = steps[-window:]
    judged = sum(map(len, kept))
    recent = recorded.recent()
    if not judged:
        assert recent is None
    else:
        spread, technical = sum(o.count("s") for o in kept), sum(o.count("t") for o in kept)
        assert (recent.spread_rate, recent.technical_rate) == pytest.approx(
            ((spread + 1) / (judged + 3), (technical + 1) / (judged + 3)))
        assert recent.orders == tuple(o for o in kept if o)
    reloaded = RecentOrders(window=window)
    reloaded.load_state_dict(recorded.state_dict())
    assert reloaded.recent() == recent


def test_a_snapshot_saved_with_counts_loads_as_steps_of_unknown_order_and_keeps_them_beside_new_orders():
    orders = RecentOrders(window=3)
    orders.load_state_dict({"steps": [[3, 1, 6], [2, 4]]})
    recent = orders.recent()
    assert recent.orders == (None, None)
    assert (recent.spread_rate, recent.technical_rate) == pytest.approx((6 / 13, 2 / 13))
    assert recent.second_wave_probability(4, 8) == pytest.approx(second_wave_probability(4, 8, 6 / 13, 2 / 13))
    orders.observe([ZERO_STD, SPREAD])
    reloaded = RecentOrders(window=3)
    reloaded.load_state_dict(orders.state_dict())
    assert reloaded.recent() == orders.recent() and reloaded.recent().orders == (None, None, "zs")


def test_a_saved_recent_step_that_is_not_an_order_or_counts_is_refused():
    for bad in ({"steps": [[1, -1, 3]]}, {"steps": [[1, 2, 3, 4]]}, {"orders": ["ssx"]}, {"orders": "sz"},
                {"orders": [["sz"]]}):
        with pytest.raises(ValueError, match="letters s, z and t, or of \\[spread, technical, judged\\] triples"):
            RecentOrders().load_state_dict(bad)


def test_each_step_records_the_chance_of_another_wave_its_first_wave_was_sized_with(tmp_path, capsys):
    """The recorded prediction is the replay of the recent steps' records at the first wave's size (a step with
    one wave: its submitted groups), within what the setting allows; null with fixed waves."""
    import json
    from dataclasses import replace

    from shopsim_metrics.cli import main

    config = SimConfig(steps=40, seed=3, zero_std_rate=0.4, technical_rate=0.05, wave_size="adaptive",
                       over_sampling_batch_size=64, **TOKENS)
    records = simulate(config).records
    assert records[0].predicted_second_wave_probability is None  # nothing known before a step closes
    target = config.rollout_batch_size
    for i, record in enumerate(records[1:], start=1):
        assert 0.0 <= record.predicted_second_wave_probability <= 1.0 - config.wave_fill_probability + 1e-12
        if record.wave_count == 1:
            recent = RecentOrders()
            for earlier in records[max(i - RECENT_WINDOW, 0):i]:
                recent.replay(earlier)
            assert record.predicted_second_wave_probability == pytest.approx(
                recent.recent().second_wave_probability(record.submitted_group_count - target, target))
    assert all(r.predicted_second_wave_probability is None
               for r in simulate(replace(config, wave_size="fixed")).records)
    (tmp_path / "steps.jsonl").write_text("".join(json.dumps(r.to_dict()) + "\n" for r in records))
    assert main(["inspect", str(tmp_path / "steps.jsonl")]) == 0
    sized = records[1:]
    more = sum(r.wave_count > 1 for r in sized)
    mean = sum(r.predicted_second_wave_probability for r in sized) / len(sized)
    assert (f"adaptive waves: P(another wave) predicted {mean:.3f}, realised {more / len(sized):.3f} "
            f"({more} of {len(sized)} steps sized)") in capsys.readouterr().out


def test_a_wave_that_cannot_be_sized_is_what_slime_asks_and_the_step_is_recorded(monkeypatch, caplog):
    import shopsim_metrics.waves.wave_planner as wave_planner

    def broken(**_):
        raise ZeroDivisionError("a broken estimate")

    monkeypatch.setattr(wave_planner, "adaptive_wave_size", broken)
    config = SimConfig(steps=4, seed=1, wave_size="adaptive", over_sampling_batch_size=40, **TOKENS)
    with caplog.at_level("WARNING", logger="shopsim_metrics"):
        records = simulate(config).records
    assert len(records) == 4 and all(r.train_group_count == config.rollout_batch_size for r in records)
    assert all(r.submitted_group_count == 40 * r.wave_count for r in records)
    assert sum("sizing a wave failed (ZeroDivisionError: a broken estimate)" in m for m in caplog.messages) == 1


# --- the work of one sizing is bounded by what it can need, whatever the cap ----------------------
_SIZING = """
import resource, sys
resource.setrlimit(resource.RLIMIT_AS, ({limit}, {limit}))
from shopsim_metrics.waves.wave_size import RecentSteps, adaptive_wave_size
orders = {orders!r}
recent = RecentSteps(orders=tuple(orders), spread_rate={spread}, technical_rate=0.02)
for cap in {caps!r}:
    print(adaptive_wave_size(target=256, remaining=0, kept=0, judged=0, recent=recent, fill_probability=0.95,
                             cap=cap).groups)
"""


def _sizes_in_a_child(orders, spread, caps):
    import subprocess
    import sys

    code = _SIZING.format(limit=1024**3, orders=orders, spread=spread, caps=caps)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-1500:]
    return [int(line) for line in proc.stdout.split()]


def test_a_huge_cap_sizes_the_wave_as_a_cap_it_does_not_reach_in_bounded_memory():
    """A batch of 256 whose recent steps had spread about half the time: the wave it needs is a few hundred
    groups, so a cap of 10^6 or 10^12 sizes it as a cap of 4,096 does, in a child limited to 1 GB (before, the
    first size tried was half the cap: 76 s and 4.9 GB at 10^6, MemoryError beyond)."""
    orders = ["sz" * 150 + "ssztz" * 20] * RECENT_WINDOW
    small, huge, huger = _sizes_in_a_child(orders, 0.5, [4096, 10**6, 10**12])
    assert 256 < small < 4096 and small == huge == huger


def test_a_wave_that_needs_the_cap_is_sized_in_bounded_memory():
    """Recent steps almost all zero-std: the sizing wants more groups than any cap; it reaches the cap without
    building the margins it passes over."""
    orders = ["z" * 400 + "s"] * RECENT_WINDOW
    (size,) = _sizes_in_a_child(orders, 1e-5, [10**6])
    assert size == 10**6


@settings(max_examples=200, deadline=None)
@given(margin=st.integers(0, 400), need=st.integers(0, 40), spread=st.floats(0, 1), technical=st.floats(0, 1))
def test_the_closed_form_beyond_the_table_is_the_tables_recurrence(margin, need, spread, technical):
    from shopsim_metrics.waves.wave_size import _IidTail, _another_closed_form

    table = _IidTail(need, spread, technical).another(margin, need)
    assert _another_closed_form(margin, need, spread, technical) == pytest.approx(table, abs=1e-12)


def test_check_config_refuses_a_cap_past_what_slime_could_ever_submit(tmp_path, capsys):
    from shopsim_metrics.cli import main

    config = tmp_path / "shopsim.yaml"
    config.write_text("shopsim_wave_size: adaptive\nshopsim_wave_size_cap: 1000000000000\n")
    assert main(["check-config", str(config)]) == 2
    out = capsys.readouterr()
    assert "shopsim_wave_size_cap" in out.out + out.err and "1,000,000" in out.out + out.err
