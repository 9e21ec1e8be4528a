"""PromptSkipDataSource without slime: a fake of slime's data source with its running counters, epochs,
buffer and checkpoint file, wrapped in ``off`` and ``greso`` mode; and, when ``SLIME_SRC`` points to a
slime checkout that imports, ``off`` mode against slime's own class."""

from __future__ import annotations

import copy
import dataclasses
import importlib
import json
import logging
import os
import random
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from hypothesis import given, settings as hsettings, strategies as st

from shopsim_metrics.judging.prompt_keys import prompt_key
from fed_history import FedHistory
from shopsim_metrics.simulator.samples import SimSample
from shopsimrl.data_source import PromptSkipDataSource, rule_settings_from_args, skip_mode

ROOT = Path(__file__).resolve().parents[1]
N_SAMPLES = 2
CERTAIN = dict(  # a prompt with a zero-std run is skipped with probability 1, and p never moves
    shopsim_prompt_skip_floor=0.0, shopsim_prompt_skip_p_min=0.0, shopsim_prompt_skip_p_easy_start=0.0,
    shopsim_prompt_skip_p_hard_start=0.0, shopsim_prompt_skip_step=0.0)


class FakeSlimeDataSource:
    """Behaves as slime's ``RolloutDataSourceWithBuffer`` does: epochs over a fixed list of prompt samples
    (shuffled per epoch with ``rollout_seed + epoch`` when ``rollout_shuffle``), ``n_samples_per_prompt``
    deep copies per group, running ``group_index``/``index`` counters, a buffer served first, and a
    checkpoint of the counters under ``<save>/rollout/``."""

    def __init__(self, args, prompts: list[SimSample]) -> None:
        self.args = args
        self.prompts = prompts
        self.order = list(range(len(prompts)))
        self.epoch_id = self.sample_offset = self.sample_group_index = self.sample_index = 0
        self.buffer: list[list[SimSample]] = []
        self._shuffle()

    def _shuffle(self) -> None:
        self.order = list(range(len(self.prompts)))
        if self.args.rollout_shuffle:
            random.Random(self.args.rollout_seed + self.epoch_id).shuffle(self.order)

    def get_samples(self, num_samples: int) -> list[list[SimSample]]:
        groups = self.buffer[:num_samples]
        del self.buffer[:num_samples]
        wanted = num_samples - len(groups)
        if wanted == 0:
            return groups
        if self.sample_offset + wanted <= len(self.prompts):
            picked = self.order[self.sample_offset:self.sample_offset + wanted]
            self.sample_offset += wanted
        else:  # the epoch ends inside this call
            picked = self.order[self.sample_offset:]
            rest = wanted - len(picked)
            self.epoch_id += 1
            self._shuffle()
            picked += self.order[:rest]
            self.sample_offset = rest
        for i in picked:
            group = []
            for _ in range(self.args.n_samples_per_prompt):
                sample = copy.deepcopy(self.prompts[i])
                sample.group_index, sample.index = self.sample_group_index, self.sample_index
                self.sample_index += 1
                group.append(sample)
            self.sample_group_index += 1
            groups.append(group)
        return groups

    def add_samples(self, samples: list[list[SimSample]]) -> None:
        for group in samples:
            assert len(group) == self.args.n_samples_per_prompt
            self.buffer.append(group)

    def get_buffer_length(self) -> int:
        return len(self.buffer)

    def counters(self) -> dict:
        return {"sample_offset": self.sample_offset, "epoch_id": self.epoch_id,
                "sample_group_index": self.sample_group_index, "sample_index": self.sample_index}

    def save(self, rollout_id: int) -> None:
        if not self.args.rollout_global_dataset:
            return
        path = os.path.join(self.args.save, f"rollout/global_dataset_state_dict_{rollout_id}.json")
        os.makedirs(os.path.dirname(path), exist_ok=True)
        Path(path).write_text(json.dumps(self.counters()))

    def load(self, rollout_id=None) -> None:
        if not self.args.rollout_global_dataset or self.args.load is None:
            return
        path = os.path.join(self.args.load, f"rollout/global_dataset_state_dict_{rollout_id}.json")
        if not os.path.exists(path):
            return
        for name, value in json.loads(Path(path).read_text()).items():
            setattr(self, name, value)
        self._shuffle()

    def __len__(self) -> int:
        return len(self.prompts)


def pool(size: int, with_uid: bool = False) -> list[SimSample]:
    """``size`` distinct chat prompts (with a ``uid`` metadata column when asked)."""
    return [SimSample(prompt=[{"role": "user", "content": f"buy item {i}"}], label=str(i),
                      metadata={"uid": f"item-{i}"} if with_uid else {}) for i in range(size)]


def make_args(tmp_path: Path, **overrides) -> SimpleNamespace:
    base = dict(n_samples_per_prompt=N_SAMPLES, rollout_shuffle=True, rollout_seed=42, rollout_global_dataset=True,
                save=str(tmp_path / "ckpt"), load=None, shopsim_prompt_skip="greso")
    base.update(overrides)
    return SimpleNamespace(**base)


def skip_source(args, prompts, **kwargs) -> PromptSkipDataSource:
    kwargs.setdefault("history", FedHistory())  # the monitor's history fed by hand; wired to the monitor: test_prompt_skip_wiring
    return PromptSkipDataSource(args, inner=FakeSlimeDataSource(args, prompts), **kwargs)


def item(group: list[SimSample]) -> int:
    """Which prompt of the pool a group is (its label)."""
    return int(group[0].label)


def verdict(prompt: int, group_index: int) -> str:
    """A fixed verdict per draw: prompts 0, 4, 8 ... all-fail, 1, 5 ... all-pass, 2 ... mostly spread."""
    side = prompt % 4
    if side == 0:
        return "zero_std_all_fail"
    if side == 1:
        return "zero_std_all_pass"
    if side == 2:
        return "spread" if group_index % 3 else "zero_std_other"
    return "spread" if group_index % 2 else "technical"


def judge(ds: PromptSkipDataSource, groups: list[list[SimSample]]) -> None:
    """What the monitor will do: one visit per judged group, keyed as the monitor keys it."""
    for group in groups:
        ds.history.observe(prompt_key(group, ds.metadata_key)[0], verdict(item(group), group[0].group_index))


def run_step(ds: PromptSkipDataSource, step: int, waves: int, size: int) -> dict:
    """One rollout step of ``waves`` waves of ``size`` groups, judged and closed; what it served and skipped."""
    served = []
    for _ in range(waves):
        groups = ds.get_samples(size)
        assert len(groups) == size
        served += [(item(g), g[0].group_index, [s.index for s in g]) for g in groups]
        judge(ds, groups)
    ds.history.close_step(step)
    return {"served": served, "skipped": ds.take_skipped(), "p": (ds.policy.rule.p_easy, ds.policy.rule.p_hard)}


# --- settings --------------------------------------------------------------------------------------

def test_the_mode_is_off_by_default_and_for_yamls_false(tmp_path) -> None:
    assert skip_mode(SimpleNamespace()) == "off"
    assert skip_mode(SimpleNamespace(shopsim_prompt_skip=None)) == "off"
    assert skip_mode(SimpleNamespace(shopsim_prompt_skip=False)) == "off"
    assert skip_mode(SimpleNamespace(shopsim_prompt_skip=" GRESO ")) == "greso"
    with pytest.raises(ValueError, match=r"shopsim_prompt_skip: expected one of off, greso, predictive; got 'gerso'$"):
        skip_mode(SimpleNamespace(shopsim_prompt_skip="gerso"))
    with pytest.raises(ValueError, match=r"got True \(YAML reads unquoted on/yes/true as a boolean: write greso\)"):
        PromptSkipDataSource(make_args(tmp_path, shopsim_prompt_skip=True), inner=FakeSlimeDataSource(
            make_args(tmp_path), pool(2)))


def test_rule_settings_come_from_args_by_field_name() -> None:
    args = SimpleNamespace(rollout_seed=7, shopsim_prompt_skip_target_share=0.4, shopsim_prompt_skip_p_max=0.9,
                           shopsim_prompt_skip_floor=None)
    s = rule_settings_from_args(args)
    assert (s.target_share, s.p_max, s.floor, s.seed) == (0.4, 0.9, 0.01, 7)
    assert rule_settings_from_args(SimpleNamespace(rollout_seed=7, shopsim_prompt_skip_seed=3)).seed == 3
    assert rule_settings_from_args(SimpleNamespace()).seed == 0
    with pytest.raises(ValueError, match=r"^shopsim_prompt_skip_p_min: expected a number <= p_max \(0.9\); got 0.92$"):
        rule_settings_from_args(SimpleNamespace(shopsim_prompt_skip_p_min=0.92, shopsim_prompt_skip_p_max=0.9))


# --- off: slime's data source as it is -------------------------------------------------------------

@hsettings(max_examples=60, deadline=None)
@given(size=st.integers(1, 12), shuffle=st.booleans(),
       calls=st.lists(st.tuples(st.integers(1, 12), st.integers(0, 3)), min_size=1, max_size=12))
def test_off_serves_exactly_what_slimes_data_source_serves(tmp_path_factory, size, shuffle, calls) -> None:
    tmp_path = tmp_path_factory.mktemp("off")
    prompts = pool(size)
    bare_args = make_args(tmp_path / "bare", rollout_shuffle=shuffle)
    wrapped_args = make_args(tmp_path / "wrapped", rollout_shuffle=shuffle, shopsim_prompt_skip="off")
    bare = FakeSlimeDataSource(bare_args, prompts)
    wrapped = PromptSkipDataSource(wrapped_args, inner=FakeSlimeDataSource(wrapped_args, prompts),
                                   history=FedHistory())
    # the history says every prompt is zero-std: off must not care
    for group in FakeSlimeDataSource(bare_args, prompts).get_samples(size):
        for _ in range(3):
            wrapped.history.observe(prompt_key(group)[0], "zero_std_all_fail")
    for step, (wanted, put_back) in enumerate(calls):
        expected, got = bare.get_samples(wanted), wrapped.get_samples(wanted)
        assert [[(s.label, s.group_index, s.index) for s in g] for g in got] == \
               [[(s.label, s.group_index, s.index) for s in g] for g in expected]
        bare.add_samples(expected[:put_back])
        wrapped.add_samples(got[:put_back])
        bare.save(step)
        wrapped.save(step)
        assert wrapped.inner.counters() == bare.counters() and len(wrapped) == len(bare) == size
        assert wrapped.get_buffer_length() == bare.get_buffer_length()  # slime's other methods reach it
    assert wrapped.take_skipped() == []
    bare_files = sorted(p.relative_to(bare_args.save) for p in Path(bare_args.save).rglob("*") if p.is_file())
    wrapped_files = sorted(p.relative_to(wrapped_args.save) for p in Path(wrapped_args.save).rglob("*") if p.is_file())
    assert wrapped_files == bare_files  # nothing of its own saved
    for name in bare_files:
        assert (Path(wrapped_args.save) / name).read_bytes() == (Path(bare_args.save) / name).read_bytes()


# --- greso ---------------------------------------------------------------------------------------

@hsettings(max_examples=80, deadline=None)
@given(size=st.integers(1, 40), zero_std=st.floats(0.0, 1.0), wanted=st.lists(st.integers(1, 50), min_size=1,
                                                                             max_size=8), seed=st.integers(0, 99))
def test_greso_always_serves_the_number_asked_and_every_draw_is_served_or_skipped(
        tmp_path_factory, size, zero_std, wanted, seed) -> None:
    args = make_args(tmp_path_factory.mktemp("greso"), shopsim_prompt_skip_seed=seed)
    ds = skip_source(args, pool(size))
    for i in range(round(zero_std * size)):  # these prompts have a zero-std run of 1 to 3
        key = prompt_key([pool(size)[i]])[0]
        for _ in range(1 + i % 3):
            ds.history.observe(key, "zero_std_all_pass" if i % 2 else "zero_std_all_fail")
    for n in wanted:
        start = ds.inner.sample_group_index
        groups = ds.get_samples(n)
        skipped = ds.take_skipped()
        assert len(groups) == n
        served_indices = [g[0].group_index for g in groups]
        assert served_indices == sorted(served_indices)
        assert sorted(served_indices + [s.group_index for s in skipped]) == list(range(start, ds.inner.sample_group_index))
        assert all(s.zero_std_run >= 1 and 0 < s.skip_probability <= 0.99 for s in skipped)


def test_a_prompt_certain_to_be_skipped_is_never_served(tmp_path) -> None:
    ds = skip_source(make_args(tmp_path, **CERTAIN), pool(20))
    seen = ds.get_samples(20)  # the first epoch: nothing known, nothing skipped
    assert ds.take_skipped() == []
    hard = {item(g) for g in seen if item(g) % 4 == 0}
    for group in seen:
        if item(group) in hard:
            ds.history.observe(prompt_key(group)[0], "zero_std_all_fail")
    served = [item(g) for _ in range(10) for g in ds.get_samples(4)]
    assert len(served) == 40 and not hard & set(served)
    assert set(served) == set(range(20)) - hard  # every other prompt still comes round
    skipped = ds.take_skipped()
    assert {s.prompt_key for s in skipped} == {prompt_key(g)[0] for g in seen if item(g) in hard}
    assert all((s.zero_std_run, s.kind, s.skip_probability) == (1, "zero_std_all_fail", 1.0) for s in skipped)


def test_the_search_stops_skipping_after_two_epochs_or_max_rounds(tmp_path) -> None:
    prompts = pool(10)
    ds = skip_source(make_args(tmp_path, **CERTAIN), prompts)
    for sample in prompts:  # every prompt certain to be skipped
        ds.history.observe(prompt_key([sample])[0], "zero_std_all_pass")
    groups = ds.get_samples(8)
    # rounds of 8 draws until 2 x 10 were drawn (24), then 8 served without asking
    assert len(groups) == 8 and len(ds.take_skipped()) == 24 and ds.inner.sample_group_index == 32

    class TwoRounds(PromptSkipDataSource):
        max_rounds = 2

    args = make_args(tmp_path, **CERTAIN)
    few = TwoRounds(args, inner=FakeSlimeDataSource(args, prompts), history=ds.history)
    assert len(few.get_samples(8)) == 8 and len(few.take_skipped()) == 16 and few.inner.sample_group_index == 24


def test_groups_from_slimes_buffer_are_never_skipped(tmp_path) -> None:
    prompts = pool(6)
    ds = skip_source(make_args(tmp_path, **CERTAIN), prompts)
    first = ds.get_samples(3)
    for group in first:
        ds.history.observe(prompt_key(group)[0], "zero_std_all_fail")
    ds.add_samples(first[:2])  # aborted in a partial rollout, put back
    again = ds.get_samples(3)
    assert again[:2] == first[:2]  # served first, though certain to be skipped if drawn afresh
    assert item(again[2]) not in {item(g) for g in first}
    assert all(s.group_index >= 3 for s in ds.take_skipped())


def test_the_rule_adapts_once_per_closed_step_at_the_next_wave(tmp_path) -> None:
    ds = skip_source(make_args(tmp_path, shopsim_prompt_skip_step=0.1), pool(8))
    ds.get_samples(4)
    ds.get_samples(4)
    assert (ds.policy.rule.p_easy, ds.policy.rule.p_hard) == (0.5, 0.5)  # nothing closed yet
    for i, v in enumerate(["zero_std_all_pass"] * 4 + ["spread"] * 4):  # easy share 0.5 >= 1/12, hard 0 < 1/6
        ds.history.observe(f"k{i}", v)
    ds.history.close_step(0)
    assert (ds.policy.rule.p_easy, ds.policy.rule.p_hard) == (0.5, 0.5)  # applied at the next wave, not before
    for _ in range(3):  # three waves of step 1: one adaptation
        ds.get_samples(2)
    assert (ds.policy.rule.p_easy, ds.policy.rule.p_hard) == (pytest.approx(0.4), pytest.approx(0.6))
    assert ds.adapted_step == 0
    ds.history.close_step(1)  # no judged group: neither p moves, but the step counts as adapted to
    ds.get_samples(1)
    assert (ds.policy.rule.p_easy, ds.policy.rule.p_hard) == (pytest.approx(0.4), pytest.approx(0.6)) and ds.adapted_step == 1


def test_the_key_is_the_monitors_metadata_key_when_set(tmp_path) -> None:
    prompts = pool(4, with_uid=True)
    ds = skip_source(make_args(tmp_path, shopsim_prompt_key="uid", **CERTAIN), prompts)
    ds.history.observe("item-2", "zero_std_all_pass")
    served = [item(g) for _ in range(4) for g in ds.get_samples(3)]
    assert 2 not in served and len(served) == 12
    rows = ds.take_skipped()
    assert {r.prompt_key for r in rows} == {"item-2"}
    assert json.loads(json.dumps([dataclasses.asdict(r) for r in rows]))[0] == {
        "prompt_key": "item-2", "zero_std_run": 1, "skip_probability": 1.0, "kind": "zero_std_all_pass",
        "group_index": rows[0].group_index, "for_cost": False}  # GRESO's rule never skips for cost
    assert ds.take_skipped() == []  # handed over once


def test_a_spread_pool_is_served_in_slimes_order(tmp_path) -> None:
    prompts = pool(7)
    args = make_args(tmp_path, **CERTAIN)
    ds, bare = skip_source(args, prompts), FakeSlimeDataSource(args, prompts)
    for step in range(6):
        got = ds.get_samples(5)
        assert [[(s.label, s.group_index, s.index) for s in g] for g in got] == \
               [[(s.label, s.group_index, s.index) for s in g] for g in bare.get_samples(5)]
        for group in got:
            ds.history.observe(prompt_key(group)[0], "spread")
        ds.history.close_step(step)
    assert ds.take_skipped() == []


# --- checkpoints ---------------------------------------------------------------------------------

def test_a_resumed_run_skips_as_the_unbroken_one(tmp_path) -> None:
    prompts = pool(24)
    unbroken = skip_source(make_args(tmp_path), prompts)
    steps = []
    for step in range(8):
        steps.append(run_step(unbroken, step, waves=2, size=6))
        unbroken.save(step)
    assert sum(len(s["skipped"]) for s in steps[4:]) > 0  # the check below has skips to reproduce
    state = json.loads((tmp_path / "ckpt" / "rollout" / "shopsim_prompt_skip_state_3.json").read_text())
    assert set(state) == {"format", "mode", "adapted_step", "rule", "history", "run_id"}

    resumed = skip_source(make_args(tmp_path, load=str(tmp_path / "ckpt"), save=str(tmp_path / "ckpt2")), prompts)
    resumed.load(3)
    assert [run_step(resumed, step, waves=2, size=6) for step in range(4, 8)] == steps[4:]

    # without the project's state file (slime's alone) the run does not skip as the unbroken one
    os.remove(tmp_path / "ckpt" / "rollout" / "shopsim_prompt_skip_state_3.json")
    afresh = skip_source(make_args(tmp_path, load=str(tmp_path / "ckpt"), save=str(tmp_path / "ckpt3")), prompts)
    afresh.load(3)
    assert [run_step(afresh, step, waves=2, size=6) for step in range(4, 8)] != steps[4:]


def test_a_restored_source_does_not_adapt_twice_to_the_same_step(tmp_path) -> None:
    ds = skip_source(make_args(tmp_path, shopsim_prompt_skip_step=0.1), pool(4))
    ds.history.observe("k", "zero_std_all_fail")
    ds.history.close_step(0)
    ds.get_samples(2)  # adapts to step 0
    restored = skip_source(make_args(tmp_path, shopsim_prompt_skip_step=0.1), pool(4))
    restored.load_state_dict(json.loads(json.dumps(ds.state_dict())))
    restored.get_samples(2)  # step 0 is still the last closed one: no second move
    assert (restored.policy.rule.p_easy, restored.policy.rule.p_hard) == (ds.policy.rule.p_easy, ds.policy.rule.p_hard) == (
        pytest.approx(0.6), pytest.approx(0.4))


def test_a_missing_state_file_warns_and_a_broken_one_is_named(tmp_path, caplog) -> None:
    args = make_args(tmp_path, load=str(tmp_path / "ckpt"))
    ds = skip_source(args, pool(4))
    with caplog.at_level(logging.WARNING, logger="shopsim_metrics"):
        ds.load(5)
    assert "shopsim_prompt_skip_state_5.json does not exist: prompt skipping starts afresh" in caplog.text
    ds.load(None)  # slime's load() without a rollout id: nothing to read
    ds.load(-1)  # a fresh run's load(start_rollout_id - 1): nothing to read, no error
    path = tmp_path / "ckpt" / "rollout" / "shopsim_prompt_skip_state_5.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"format": 1, "rule": {}}))
    with pytest.raises(ValueError, match=r"shopsim_prompt_skip_state_5.json: not a prompt-skip state this version "
                                         r"can read .*; move the file away"):
        ds.load(5)


def test_nothing_is_saved_without_a_global_dataset_or_a_save_dir(tmp_path) -> None:
    for overrides in ({"rollout_global_dataset": False}, {"save": None}):
        args = make_args(tmp_path, **overrides)
        ds = PromptSkipDataSource(args, inner=SimpleNamespace(save=lambda rollout_id: None),
                                  history=FedHistory())
        ds.save(3)
    assert not (tmp_path / "ckpt").exists()


# --- loading as slime loads it ---------------------------------------------------------------------

def test_the_module_imports_without_slime_and_loads_by_dotted_path() -> None:
    code = ("import sys, shopsimrl.data_source; "
            "print(sorted({m.split('.')[0] for m in sys.modules} & {'slime', 'torch', 'ray', 'wandb'}))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"
    module_name, _, name = "shopsimrl.data_source.PromptSkipDataSource".rpartition(".")
    assert getattr(importlib.import_module(module_name), name) is PromptSkipDataSource


@pytest.mark.skipif(importlib.util.find_spec("slime") is not None, reason="slime is importable here")
def test_constructing_without_slime_names_what_is_missing(tmp_path) -> None:
    with pytest.raises(ImportError, match=r"wraps slime.rollout.data_source.RolloutDataSourceWithBuffer, which could "
                                          r"not be imported .*pass the data source to wrap as inner="):
        PromptSkipDataSource(make_args(tmp_path))


# --- against slime's own data source ---------------------------------------------------------------

SLIME_SRC = os.environ.get("SLIME_SRC")


def _slime_data_source():
    if not SLIME_SRC:
        pytest.skip("set SLIME_SRC to a slime checkout to compare with slime's own data source")
    sys.path.insert(0, SLIME_SRC)
    try:
        return importlib.import_module("slime.rollout.data_source")
    except ImportError as exc:
        pytest.skip(f"slime does not import here ({exc}); install the slime-checks extra")


@pytest.fixture
def slime_args(tmp_path, monkeypatch):
    """slime's data source module, and a builder of its args over a dataset of 7 plain-text prompts."""
    slime_ds = _slime_data_source()
    monkeypatch.setattr(slime_ds, "load_tokenizer", lambda *a, **k: None)  # no model checkpoint: plain text prompts
    monkeypatch.setattr(slime_ds, "load_processor", lambda *a, **k: None)
    data = tmp_path / "prompts.jsonl"
    data.write_text("".join(json.dumps({"text": f"buy item {i}", "label": str(i)}) + "\n" for i in range(7)))

    def args(name: str, **overrides) -> SimpleNamespace:
        base = dict(rollout_global_dataset=True, prompt_data=str(data), hf_checkpoint=None, dump_details=None,
                    rollout_max_prompt_len=None, input_key="text", multimodal_keys=None, label_key="label",
                    metadata_key="metadata", tool_key=None, apply_chat_template=False,
                    apply_chat_template_kwargs={}, rollout_seed=42, rollout_shuffle=True, n_samples_per_prompt=2,
                    buffer_filter_path=None, save=str(tmp_path / name), load=str(tmp_path / name))
        base.update(overrides)
        return SimpleNamespace(**base)

    return slime_ds, args


@pytest.mark.slime
def test_off_serves_what_slimes_own_data_source_serves(tmp_path, slime_args) -> None:
    slime_ds, args = slime_args
    bare = slime_ds.RolloutDataSourceWithBuffer(args("bare"))
    wrapped = PromptSkipDataSource(args("wrapped", shopsim_prompt_skip="off"))
    assert type(wrapped.inner) is slime_ds.RolloutDataSourceWithBuffer and len(wrapped) == len(bare) == 7
    for step, wanted in enumerate([3, 5, 4, 6, 1]):
        expected, got = bare.get_samples(wanted), wrapped.get_samples(wanted)
        assert [[(s.prompt, s.label, s.group_index, s.index) for s in g] for g in got] == \
               [[(s.prompt, s.label, s.group_index, s.index) for s in g] for g in expected]
        bare.add_samples(expected[:1])
        wrapped.add_samples(got[:1])
        bare.save(step)
        wrapped.save(step)
    files = sorted(p.name for p in (tmp_path / "wrapped" / "rollout").iterdir())
    assert files == sorted(p.name for p in (tmp_path / "bare" / "rollout").iterdir())
    restored = PromptSkipDataSource(args("wrapped", shopsim_prompt_skip="off"))
    restored.load(4)
    fresh_bare = slime_ds.RolloutDataSourceWithBuffer(args("bare"))
    fresh_bare.load(4)
    assert [g[0].group_index for g in restored.get_samples(4)] == [g[0].group_index for g in fresh_bare.get_samples(4)]


@pytest.mark.slime
def test_greso_on_slimes_own_data_source(tmp_path, slime_args) -> None:
    slime_ds, args = slime_args
    ds = PromptSkipDataSource(args("greso", shopsim_prompt_skip="greso", **CERTAIN), history=FedHistory())
    first = ds.get_samples(7)  # one epoch: every prompt once, nothing known yet
    hard = {g[0].label for g in first[:3]}
    for group in first:
        ds.history.observe(prompt_key(group)[0], "zero_std_all_fail" if group[0].label in hard else "spread")
    ds.add_samples(first[:1])  # a hard prompt back in slime's buffer: served, not skipped
    again = ds.get_samples(5)
    assert len(again) == 5 and again[0] is first[0]
    assert not hard & {g[0].label for g in again[1:]}
    skipped = {s.prompt_key for s in ds.take_skipped()}
    assert skipped and skipped <= {prompt_key(g)[0] for g in first[:3]}
    ds.save(0)
    assert sorted(p.name for p in (tmp_path / "greso" / "rollout").iterdir()) == [
        "global_dataset_state_dict_0.pt", "shopsim_prompt_skip_state_0.json"]


@pytest.mark.parametrize("damage, why", [
    (b"", "empty: 0 bytes"), (b'{"format": 1, "rule"', "not JSON, truncated or corrupt"), (b"[]", "a JSON list"),
    (b"null", "a JSON null"), (b"\xff\xfe\x00binary", "binary, not JSON text"), ("dir", "a directory, not a file"),
    ("fifo", "a FIFO (named pipe), not a file"), (b'{"format": 1, "rule": 3, "history": {}, "adapted_step": 0}',
                                                  "not a prompt-skip state this version can read"),
])
def test_a_damaged_state_file_is_one_line_naming_it_and_what_to_do(tmp_path, damage, why) -> None:
    from shopsim_metrics.state_file import DamagedStateFile

    args = make_args(tmp_path, load=str(tmp_path / "ckpt"))
    ds = skip_source(args, pool(4))
    path = tmp_path / "ckpt" / "rollout" / "shopsim_prompt_skip_state_5.json"
    path.parent.mkdir(parents=True)
    if damage == "dir":
        path.mkdir()
    elif damage == "fifo":
        os.mkfifo(path)
    else:
        path.write_bytes(damage)
    with pytest.raises(DamagedStateFile) as caught:
        ds.load(5)  # never blocks on a FIFO
    message = str(caught.value)
    assert message.startswith(f"{path}: ") and why in message and "\n" not in message
    assert "move the file away" in message and "--load another checkpoint" in message


def test_the_state_is_saved_with_fsync_then_replace(tmp_path, monkeypatch) -> None:
    import shopsim_metrics.state_file as state_file

    args = make_args(tmp_path, load=str(tmp_path / "ckpt"))
    ds = skip_source(args, pool(4))
    calls: list[str] = []
    real_fsync, real_replace = os.fsync, os.replace
    monkeypatch.setattr(state_file.os, "fsync", lambda fd: (calls.append("fsync"), real_fsync(fd))[1])
    monkeypatch.setattr(state_file.os, "replace", lambda a, b: (calls.append("replace"), real_replace(a, b))[1])
    ds.save(5)
    assert calls[:2] == ["fsync", "replace"]
    path = tmp_path / "ckpt" / "rollout" / "shopsim_prompt_skip_state_5.json"
    assert json.loads(path.read_text())["format"] == 1
    assert [p.name for p in path.parent.iterdir() if p.name.endswith(".tmp")] == []
    ds.load(5)
