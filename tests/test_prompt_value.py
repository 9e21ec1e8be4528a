"""Prompt keys, the bounded per-prompt history, and the per-step prompt-value fields."""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings as hsettings, strategies as st

from shopsim_metrics.run.identity import WRITER_FIELDS
from shopsim_metrics.record import contract
from shopsim_metrics.judging.verdicts import VERDICTS
from shopsim_metrics.prompts.history import PromptHistory
from shopsim_metrics.judging.prompt_keys import hash_prompt, history_key, key_text, prompt_key
from shopsim_metrics.prompts.value import PromptValueTracker
from shopsim_metrics.record.records import DecisionRow, StepRecord
from shopsim_metrics.simulator.samples import SimSample
from shopsim_metrics.settings import ShopsimConfigError, ShopsimSettings
from conftest import make_args


# --- prompt keys ------------------------------------------------------------------------------------

def test_chat_prompt_key_ignores_dict_key_order_but_not_message_order_or_label() -> None:
    a = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "buy socks"}]
    same = [{"content": "be brief", "role": "system"}, {"content": "buy socks", "role": "user"}]
    swapped = list(reversed(a))
    assert hash_prompt(a, "x") == hash_prompt(same, "x")
    assert hash_prompt(a, "x") != hash_prompt(swapped, "x")
    assert hash_prompt(a, "x") != hash_prompt(a, "y")
    assert hash_prompt("buy socks", None) != hash_prompt(["buy socks"], None)


def test_metadata_key_wins_when_present_and_falls_back_to_the_hash() -> None:
    with_key = [SimSample(prompt="p", metadata={"uid": "item-7"})]
    without = [SimSample(prompt="p", metadata={})]
    assert prompt_key(with_key, "uid") == ("item-7", "metadata")
    assert prompt_key(without, "uid") == (hash_prompt("p", None), "prompt_hash")
    assert prompt_key(with_key, None) == (hash_prompt("p", None), "prompt_hash")
    assert prompt_key([SimSample(metadata={"uid": {"b": 1, "a": [2]}})], "uid") == ('{"a":[2],"b":1}', "metadata")


def test_group_index_is_never_the_key() -> None:
    first = [SimSample(group_index=3, index=24, prompt="same")]
    later = [SimSample(group_index=1003, index=8024, prompt="same")]
    assert prompt_key(first) == prompt_key(later)


def test_fanned_out_groups_read_the_first_segment_and_empty_groups_have_no_key() -> None:
    segments = [[SimSample(prompt="q", label="a"), SimSample(prompt="q", label="a")], [SimSample(prompt="q", label="a")]]
    assert prompt_key(segments) == (hash_prompt("q", "a"), "prompt_hash")
    assert prompt_key([]) == (None, "none")
    assert prompt_key([[]]) == (None, "none")


class _Odd:
    def __repr__(self) -> str:
        raise RuntimeError("no repr")


@pytest.mark.parametrize("prompt", [
    object(), {1: "a", "b": 2}, np.arange(3), b"\x00\xff", float("nan"), {"s": {3, 1}}, _Odd(), "\ud800",
])
def test_odd_prompts_never_raise_and_give_a_hash_key(prompt) -> None:
    key, source = prompt_key([SimSample(prompt=prompt)], "uid")
    assert source == "prompt_hash" and key.startswith("b2:") and len(key) == 18


def test_circular_prompt_and_odd_samples_never_raise() -> None:
    loop: list = []
    loop.append(loop)
    assert prompt_key([SimSample(prompt=loop)])[1] == "prompt_hash"
    assert prompt_key([object()])[1] == "prompt_hash"  # no prompt attribute at all
    assert prompt_key(None)[1] == "none"  # type: ignore[arg-type]
    unhashable_metadata = SimSample(prompt="p", metadata={"k": 1})
    assert prompt_key([unhashable_metadata], ["k"])[1] == "prompt_hash"  # type: ignore[arg-type]


def test_history_key_round_trips_the_ledger_text() -> None:
    key = hash_prompt("p", "l")
    assert isinstance(history_key(key), int) and key_text(history_key(key)) == key
    assert history_key("item-7") == "item-7" and history_key("b2:not-hex-digits") == "b2:not-hex-digits"


# --- settings ------------------------------------------------------------------------------------------

def test_prompt_settings_defaults_and_errors() -> None:
    s = ShopsimSettings.from_args(make_args())
    assert (s.prompt_key, s.prompt_history_limit, s.prompts_table_every) == (None, 1_000_000, 50)
    for key, bad in (("shopsim_prompt_key", 3), ("shopsim_prompt_history_limit", -1),
                     ("shopsim_prompt_history_limit", True), ("shopsim_prompts_table_every", -1)):
        with pytest.raises(ShopsimConfigError, match=key):
            ShopsimSettings.from_args(make_args(**{key: bad}))


# --- the history ------------------------------------------------------------------------------------

def test_least_recently_seen_prompt_is_evicted_first() -> None:
    h = PromptHistory(limit=3)
    for key in "abc":
        h.visit(key, "spread")
    h.visit("a", "spread")  # a is now the most recent: b is the oldest
    h.visit("d", "spread")
    assert [s.key for s in h] == ["c", "a", "d"] and h.evicted == 1
    assert h.visit("b", "spread") is None  # b was forgotten: a new prompt again


def test_run_of_equal_zero_std_verdicts_and_verdict_history() -> None:
    h = PromptHistory()
    for verdict in ("spread", "zero_std_all_fail", "zero_std_all_fail", "zero_std_all_pass", "zero_std_all_pass",
                    "zero_std_all_pass"):
        h.visit("k", verdict, 10)
    s = h.stats("k")
    assert (s.visits, s.zero_std_run, s.zero_std_visits, s.tokens, s.wasted_tokens) == (6, 3, 5, 60, 50)
    assert s.verdict_letters == "SFFPPP"
    h.visit("k", "technical", 10)
    assert h.stats("k").zero_std_run == 0
    for _ in range(10):
        h.visit("k", "zero_std_other")
    s = h.stats("k")
    assert len(s.verdicts) == 8 and s.verdict_letters == "O" * 8 and s.zero_std_run == 10 and s.visits == 17


def test_most_wasted_ranks_by_zero_std_tokens_then_zero_std_visits() -> None:
    h = PromptHistory()
    h.visit("spread-heavy", "spread", 10_000)
    h.visit("wasteful", "zero_std_all_pass", 500)
    h.visit("often", "zero_std_all_fail", 100)
    h.visit("often", "zero_std_all_fail", 100)
    h.visit("rare", "zero_std_all_fail", 200)
    assert [s.key for s in h.most_wasted(3)] == ["wasteful", "often", "rare"]


# --- per-step fields: a direct computation from the ledger ------------------------------------------------

def _verdict(reason: str | None, success: int | None, scorable: int) -> str:
    if reason == contract.REASON_TECHNICAL:
        return "technical"
    if reason is None:
        return "spread"
    if not success:
        return "zero_std_all_fail"
    return "zero_std_all_pass" if success == scorable else "zero_std_other"


def reference_fields(records: list[StepRecord], limit: int) -> list[dict]:
    """Every prompt-value field, straight from the ledger rows, with a plain list as the recency order."""
    last: "OrderedDict[str, str]" = OrderedDict()
    out = []
    for rec in records:
        revisit = skippable = repeat = spread = repeat_tokens = 0
        for row in sorted(rec.decisions, key=lambda r: r.order):
            if row.prompt_key is None:
                continue
            verdict = _verdict(row.reason, row.success_count, row.scorable_rollouts)
            previous = last.pop(row.prompt_key, None)
            last[row.prompt_key] = verdict
            if previous is None and len(last) > limit:
                last.popitem(last=False)
            if previous is None:
                continue
            revisit += 1
            if previous.startswith("zero_std"):
                skippable += 1
                repeat += verdict.startswith("zero_std")
                repeat_tokens += row.response_tokens if verdict.startswith("zero_std") else 0
                spread += verdict == "spread"
        generated = sum(r.response_tokens for r in rec.decisions)
        out.append(dict(revisit_group_count=revisit, skippable_group_count=skippable,
                        repeat_zero_std_group_count=repeat, skippable_spread_group_count=spread,
                        zero_std_persistence=repeat / skippable if skippable else None,
                        skippable_token_fraction=repeat_tokens / generated if generated else None,
                        tracked_prompt_count=len(last)))
    return out


_KINDS = st.sampled_from([(None, 3), (contract.REASON_ZERO_STD, 0), (contract.REASON_ZERO_STD, 8),
                          (contract.REASON_ZERO_STD, 5), (contract.REASON_TECHNICAL, None)])


@st.composite
def ledgers(draw) -> list[StepRecord]:
    records = []
    for step in range(draw(st.integers(1, 6))):
        rows = []
        for order in range(1, draw(st.integers(0, 12)) + 1):
            reason, success = draw(_KINDS)
            row = DecisionRow(order=order, waves_open=1, group_index=order, outcome="trained", reason=reason,
                              remaining_before=32, unique_rollouts=8, success_count=success, scorable_rollouts=8,
                              prompt_key=draw(st.one_of(st.none(), st.sampled_from("abcdefg"))))
            row.response_tokens = draw(st.integers(0, 5000))  # the cost fields' per-row tokens
            rows.append(row)
        shuffled = draw(st.permutations(rows))  # the tracker follows `order`, not list position
        records.append(StepRecord(rollout_id=step, decisions=list(shuffled),
                                  generated_token_count=sum(r.response_tokens for r in rows)))
    return records


@hsettings(max_examples=200, deadline=None)
@given(records=ledgers(), limit=st.integers(1, 8))
def test_every_field_equals_a_direct_computation_from_the_ledger(records: list[StepRecord], limit: int) -> None:
    tracker = PromptValueTracker(limit=limit)
    observed = [replace(rec, **tracker.observe(rec)) for rec in records]
    for rec, expected in zip(observed, reference_fields(records, limit)):
        got = {name: getattr(rec, name) for name in expected}
        assert got == pytest.approx(expected), rec.rollout_id


def test_without_token_counts_the_token_fraction_is_null_and_the_rest_works() -> None:
    z = contract.REASON_ZERO_STD
    rows = [DecisionRow(order=1, waves_open=1, group_index=1, outcome="fallback", reason=z, remaining_before=16,
                        unique_rollouts=8, success_count=0, scorable_rollouts=8, prompt_key="a")]
    tracker = PromptValueTracker()
    # a record without the cost fields: no step or row token counts
    first, second = (StepRecord(rollout_id=i, decisions=[*rows], generated_token_count=None) for i in (0, 1))
    for row in rows:
        row.response_tokens = None
    _ = tracker.observe(first)
    second = replace(second, **tracker.observe(second))
    assert second.skippable_token_fraction is None
    assert (second.repeat_zero_std_group_count, second.zero_std_persistence) == (1, 1.0)
    assert tracker.table()[0][5:] == [None, None]  # tokens unknown: null in the prompts table


def test_annotate_keys_rows_from_groups_and_never_raises() -> None:
    rows = [DecisionRow(order=i, waves_open=1, group_index=i, outcome="trained", reason=None, remaining_before=16,
                        unique_rollouts=1) for i in (1, 2)]
    groups = [[SimSample(prompt="p", metadata={"uid": 4})], [SimSample(prompt="p")]]
    tracker = PromptValueTracker(metadata_key="uid")
    keyed = tracker.keys(groups)
    assert [key for key, _ in keyed] == ["4", hash_prompt("p", None)]
    for row, (key, _) in zip(rows, keyed):
        row.prompt_key = key  # the accountant builds its rows with these keys
    rec = StepRecord(rollout_id=0, decisions=rows)
    rec = replace(rec, **tracker.step_fields(0, rows, generated_token_count=None, sources={s for _, s in keyed}))
    assert rec.prompt_key_source == "mixed" and rec.tracked_prompt_count == 2
    broken = [DecisionRow(order=o, waves_open=1, group_index=1, outcome="x", reason=None, remaining_before=1,
                          unique_rollouts=1) for o in (1, None)]  # type: ignore[arg-type]
    fields = PromptValueTracker().step_fields(1, broken, generated_token_count=None, sources={"prompt_hash"})
    assert "revisit_group_count" not in fields  # sorting fails: swallowed, the fields stay null


def test_prompts_table_is_attached_every_n_steps() -> None:
    tracker = PromptValueTracker(table_every=2)
    tables = []
    for step in range(5):
        fields = tracker.step_fields(step, [], generated_token_count=None, sources=set())
        tables.append(fields.get("prompt_table") is not None)
    assert tables == [True, False, True, False, True]


# --- a simulated run over a known prompt pool -------------------------------------------------------------

@hsettings(max_examples=10, deadline=None)
@given(seed=st.integers(0, 10_000), pool=st.integers(8, 60), limit=st.sampled_from([4, 20, 1_000_000]))
def test_simulated_epochs_every_field_equals_the_ledger_computation(seed: int, pool: int, limit: int) -> None:
    from shopsim_metrics.simulator.config import SimConfig
    from shopsim_metrics.simulator.epochs import pool_prompt
    from shopsim_metrics.simulator.loop import simulate

    config = SimConfig(steps=8, seed=seed, prompt_pool=pool, rollout_batch_size=8, over_sampling_batch_size=16,
                       global_batch_size=32, skill_start=-1.0, skill_end=3.0, learning_steps=4.0,
                       partial_credit_rate=0.0, technical_rate=0.05, max_technical_streak=3)
    records = simulate(config, extra_args={"shopsim_prompt_history_limit": limit}).records
    pool_keys = {hash_prompt(pool_prompt(i), f"answer {i}") for i in range(pool)}
    keys = [row.prompt_key for rec in records for row in rec.decisions]
    assert set(keys) <= pool_keys and len(keys) > pool  # every group is a pool prompt; epochs revisit them
    assert {rec.prompt_key_source for rec in records} == {"prompt_hash"}
    for rec, expected in zip(records, reference_fields(records, limit)):
        got = {name: getattr(rec, name) for name in expected}
        assert got == pytest.approx(expected), rec.rollout_id
        assert rec.tracked_prompt_count <= min(pool, limit)
    if limit >= pool:  # the history remembers the whole pool: later epochs are revisits
        assert sum(rec.revisit_group_count for rec in records) > 0


def test_demo_run_revisits_its_pool_and_persistence_rises_once_learning_slows() -> None:
    from conftest import persistence_by_quarter

    from shopsim_metrics.simulator.demo import DEMO_PROMPT_POOL, demo_config
    from shopsim_metrics.simulator.loop import simulate

    records = simulate(demo_config(steps=40, seed=0)).records
    assert records[-1].tracked_prompt_count == DEMO_PROMPT_POOL
    assert records[0].revisit_group_count == 0 and records[-1].revisit_group_count == records[-1].accepted_group_count
    quarters = persistence_by_quarter(records)
    assert quarters[1] < quarters[2] < quarters[3]  # the burst sits in the second quarter; then saturation


_any_text = st.one_of(st.text(max_size=30), st.text(alphabet=st.characters(min_codepoint=0, max_codepoint=0x3F), max_size=8),
                      st.sampled_from(["\ud800", "lone \udfff end", "\U0001F600 \u2028 \x7f \x00"]))
_prompts = st.one_of(_any_text, st.lists(st.dictionaries(_any_text, _any_text, max_size=3), max_size=3),
                     st.lists(st.dictionaries(_any_text, st.one_of(_any_text, st.integers(), st.floats(), st.none()),
                                              max_size=2), max_size=2))


@hsettings(max_examples=500, deadline=None)
@given(prompt=_prompts, label=st.one_of(st.none(), _any_text, st.integers(), st.floats()))
def test_the_canonical_bytes_are_the_standard_encoders_whatever_the_text(prompt, label) -> None:
    """Prompt keys stay stable from one version to the next: the fast encoder writes the very same bytes
    (control characters, quotes, non-BMP characters, lone surrogates, key order)."""
    import json

    from shopsim_metrics.judging.prompt_keys import canonical_bytes

    standard = json.dumps([prompt, label], sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    assert canonical_bytes(prompt, label) == standard.encode("utf-8", "surrogatepass")


def test_a_known_prompt_keeps_its_key() -> None:
    """The key of a fixed prompt, as every earlier version of the project computed it."""
    import hashlib

    chat = [{"role": "user", "content": "Find running shoes under 50 \u20ac\n\"fast\""}]
    text = '[[{"content":"Find running shoes under 50 \u20ac\\n\\"fast\\"","role":"user"}],"sku-1"]'
    assert hash_prompt(chat, "sku-1") == "b2:" + hashlib.blake2b(text.encode(), digest_size=8).hexdigest()[:15]


def test_a_history_limit_of_zero_turns_prompt_tracking_off() -> None:
    from shopsim_metrics.simulator.config import SimConfig
    from shopsim_metrics.simulator.loop import simulate

    config = SimConfig(steps=4, seed=3, prompt_pool=20)
    tracked = simulate(config).records
    off = simulate(config, extra_args={"shopsim_prompt_history_limit": 0}).records
    assert all(r.tracked_prompt_count for r in tracked) and all(row.prompt_key for row in tracked[-1].decisions)
    for record in off:
        assert (record.tracked_prompt_count, record.revisit_group_count, record.prompt_key_source) == (None, None, None)
        assert all(row.prompt_key is None for row in record.decisions)
    # everything else is the same run
    def strip(record):
        data = {k: v for k, v in record.to_dict().items() if k not in _PROMPT_FIELDS and k not in WRITER_FIELDS}
        data["decisions"] = [{k: v for k, v in row.items() if k != "prompt_key"} for row in data["decisions"]]
        return data

    assert [strip(r) for r in off] == [strip(r) for r in tracked]


_PROMPT_FIELDS = ("prompt_key_source", "prompt_history_limit", "revisit_group_count",
                  "repeat_zero_std_group_count", "zero_std_persistence", "skippable_group_count",
                  "skippable_spread_group_count", "skippable_token_fraction", "tracked_prompt_count", "prompt_history_partial",
                  "filter_seconds", "filter_time_fraction")


@hsettings(max_examples=300, deadline=None)
@given(visits=st.lists(st.tuples(st.sampled_from("abc"), st.sampled_from(VERDICTS),
                                 st.one_of(st.none(), st.integers(-5, 10**6), st.just(1 << 41))), max_size=40))
def test_the_history_equals_a_plain_count_of_the_visits(visits) -> None:
    """Every field of every prompt, after any visits: the plain count."""
    h = PromptHistory()
    plain: dict[str, dict] = {}
    for key, verdict, tokens in visits:
        spent = tokens if tokens and tokens > 0 else 0
        before = plain.get(key)
        assert h.visit(key, verdict, tokens) == (before["verdicts"][-1] if before else None)
        p = plain.setdefault(key, {"visits": 0, "zero_std_run": 0, "zero_std_visits": 0, "tokens": 0, "wasted": 0,
                                   "verdicts": []})
        zero = verdict.startswith("zero_std")
        same = bool(p["verdicts"]) and p["verdicts"][-1] == verdict
        p["zero_std_run"] = (p["zero_std_run"] if same else 0) + 1 if zero else 0
        p["visits"] += 1
        p["zero_std_visits"] += zero
        p["tokens"] += spent
        p["wasted"] += spent if zero else 0
        p["verdicts"].append(verdict)
    for key, p in plain.items():
        s = h.stats(key)
        assert (s.visits, s.zero_std_run, s.zero_std_visits, s.tokens, s.wasted_tokens) == (
            p["visits"], p["zero_std_run"], p["zero_std_visits"], p["tokens"], p["wasted"])
        assert s.verdicts == tuple(p["verdicts"][-8:])
