"""The step record has one builder: contributors return their fields, the draft builds the frozen record once."""

from __future__ import annotations

import ast
import dataclasses
import logging
from pathlib import Path

import pytest
from hypothesis import given, settings as hsettings, strategies as st

from shopsim_metrics.simulator.config import FailureBurst, SimConfig
from shopsim_metrics.simulator.loop import simulate
from shopsim_metrics.record.owners import CLOSED_STEP, OWNER_OF, PART_FIELDS, SLIME
from shopsim_metrics.step.draft import RecordPart, StepDraft
from shopsim_metrics.record.records import StepRecord

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = (ROOT / "shopsim_metrics", ROOT / "filter")
RECORD_FIELDS = {f.name for f in dataclasses.fields(StepRecord)}

# attribute stores named like a record field, on objects that are not records (read in their modules)
NOT_RECORDS = {
    ("shopsim_metrics/step/accounting.py", "state.rollout_id"),  # the open step (_OpenStep)
    ("shopsim_metrics/step/accounting.py", "counted[-1].rollout_id"),  # a closed step (ClosedStep), renumbered
    ("shopsim_metrics/readers/wandb_offline.py", "run.run_id"),  # a W&B offline run read from disk
    ("shopsim_metrics/simulator/rewards.py", "sample.rollout_id"),  # a simulated sample
    ("shopsim_metrics/simulator/loop.py", "result.alerts"),  # the simulation's result
}
SETATTR_ALLOWED = {  # setattr / object.__setattr__ on objects that are not records
    ("shopsim_metrics/simulator/config.py", "args"),  # slime's args namespace
    ("shopsim_metrics/dashboards/wandb_workspace.py", "panel"),  # a W&B workspace panel
}


def _stores(tree: ast.AST):
    for node in ast.walk(tree):
        targets = (node.targets if isinstance(node, ast.Assign)
                   else [node.target] if isinstance(node, (ast.AugAssign, ast.AnnAssign)) else [])
        for target in targets:
            for sub in ast.walk(target):
                if isinstance(sub, ast.Attribute) and isinstance(sub.ctx, ast.Store):
                    yield sub


def test_no_module_assigns_a_record_field_after_the_build() -> None:
    """An AST scan of both packages: no attribute store, ``setattr`` or ``object.__setattr__`` on a step record.

    ``self`` is left out (a class setting its own attributes; StepRecord has no methods that do, and is frozen).
    """
    found = []
    for package in PACKAGES:
        for path in sorted(package.rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            tree = ast.parse(path.read_text(), filename=rel)
            for store in _stores(tree):
                owner = ast.unparse(store.value)
                if store.attr in RECORD_FIELDS and owner != "self" and (rel, ast.unparse(store)) not in NOT_RECORDS:
                    found.append(f"{rel}:{store.lineno}: {ast.unparse(store)} = ...")
            for node in ast.walk(tree):
                if not isinstance(node, ast.Call) or not node.args:
                    continue
                name = ast.unparse(node.func)
                first = ast.unparse(node.args[0])
                if name in ("setattr", "object.__setattr__") and first != "self" and (rel, first) not in SETATTR_ALLOWED:
                    found.append(f"{rel}:{node.lineno}: {ast.unparse(node)}")
    assert not found, "a step record is built once (step/draft.py) and never edited:\n" + "\n".join(found)


def test_the_scan_sees_an_edit() -> None:
    """The scan above is no empty check: an edit written the old way is found."""
    tree = ast.parse("record.alerts = []\nrecord.filter_seconds += 1.0\n")
    assert [ast.unparse(s) for s in _stores(tree)] == ["record.alerts", "record.filter_seconds"]


# --- the builder --------------------------------------------------------------------------------------------
_VALUES = st.one_of(st.none(), st.integers(-5, 10**6), st.floats(allow_nan=False), st.text(max_size=4))
_NAMES = sorted(PART_FIELDS - {"decisions", "prompt_table"})


@hsettings(max_examples=200, deadline=None)
@given(values=st.dictionaries(st.sampled_from(_NAMES), _VALUES, max_size=20), cuts=st.lists(st.integers(0, 20)),
       rollout_id=st.integers(0, 10**6))
def test_any_split_into_parts_builds_the_record_the_fields_make(values, cuts, rollout_id) -> None:
    items = sorted(values.items(), key=lambda item: OWNER_OF[item[0]])  # a part is one owner's
    owners_end = {i for i in range(1, len(items)) if OWNER_OF[items[i][0]] != OWNER_OF[items[i - 1][0]]}
    bounds = sorted({min(c, len(items)) for c in cuts} | owners_end | {0, len(items)})
    parts = [RecordPart(OWNER_OF[items[a][0]], dict(items[a:b])) for a, b in zip(bounds, bounds[1:])]
    draft = StepDraft(rollout_id, *parts[:1])
    for name in _NAMES:  # the draft's own part, read before the build; defaults for the rest
        assert draft.value(name) == (parts[0] if parts else {}).get(name, getattr(StepRecord(rollout_id=0), name))
    record = draft.finish(*parts[1:])
    assert record == StepRecord(rollout_id=rollout_id, **values) and draft.record is record
    with pytest.raises(RuntimeError, match="already built"):
        draft.finish()
    with pytest.raises(dataclasses.FrozenInstanceError):
        record.reward_mean = 0.5  # type: ignore[misc]


@hsettings(max_examples=100, deadline=None)
@given(name=st.sampled_from(_NAMES), first=_VALUES, second=_VALUES)
def test_a_field_given_by_two_parts_is_refused(name, first, second) -> None:
    with pytest.raises(ValueError, match=f"{name} given by two parts"):
        StepDraft(0, RecordPart(OWNER_OF[name], {name: first})).finish(RecordPart(OWNER_OF[name], {name: second}))


def test_a_part_names_fields_only() -> None:
    with pytest.raises(ValueError, match="rollout_id is not a field"):
        RecordPart(CLOSED_STEP, {"rollout_id": 3})  # the draft's own: the accountant may renumber it until the emit
    with pytest.raises(ValueError, match="reward_avg is not a field"):
        StepDraft(0, RecordPart(CLOSED_STEP, {"reward_avg": 1.0}))
    with pytest.raises(KeyError):
        StepDraft(0).value("reward_avg")
    with pytest.raises(TypeError, match="names its owner"):
        StepDraft(0, {"reward_mean": 1.0})  # a plain mapping says no owner


def test_default_values_are_never_shared() -> None:
    draft = StepDraft(0)
    draft.value("alerts").append({"level": "WARN"})
    assert draft.value("alerts") == [] and draft.finish().alerts == []


def test_the_own_time_grows_until_the_build() -> None:
    draft = StepDraft(0, RecordPart(CLOSED_STEP, {"filter_seconds": 0.25}))
    draft.add_filter_seconds(0.5)
    assert draft.finish(RecordPart(SLIME, {"rollout_seconds": 3.0})).filter_seconds == 0.75
    with pytest.raises(RuntimeError, match="already built"):
        draft.add_filter_seconds(0.1)


# --- simulated runs: every record built once, from disjoint parts, the same for the same run -----------------
WALL_CLOCK = {"run_id", "process_started_at", "filter_seconds", "filter_time_fraction"}


def _masked(records: list[StepRecord]) -> list[dict]:
    out = []
    for record in records:
        data = {k: v for k, v in record.to_dict().items() if k not in WALL_CLOCK}
        data["prompt_table"] = record.prompt_table
        out.append(data)
    return out


RUNS = st.fixed_dictionaries({
    "seed": st.integers(0, 2**16),
    "steps": st.integers(1, 5),
    "prompt_skip": st.sampled_from(["off", "greso", "predictive"]),
    "wave_size": st.sampled_from(["fixed", "adaptive"]),
    "burst": st.one_of(st.none(), st.integers(0, 4)),
})


class _Warnings(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


@hsettings(max_examples=12, deadline=None)
@given(run=RUNS)
def test_a_simulated_run_builds_each_record_once_the_same_way(run) -> None:
    config = SimConfig(steps=run["steps"], seed=run["seed"], prompt_pool=64, prompt_skip=run["prompt_skip"],
                       wave_size=run["wave_size"], technical_rate=0.05,
                       bursts=() if run["burst"] is None else (FailureBurst(step=run["burst"], rate=0.9),))
    warnings, logger = _Warnings(), logging.getLogger("shopsim_metrics")
    logger.addHandler(warnings)
    try:
        first, second = simulate(config), simulate(config)
    finally:
        logger.removeHandler(warnings)
    assert not [m for m in warnings.messages if m.startswith("shopsim-metrics") and "failed (" in m], \
        "every part built, none fell back"
    assert first.records and _masked(first.records) == _masked(second.records)
    for record in first.records:
        assert isinstance(record, StepRecord)
        with pytest.raises(dataclasses.FrozenInstanceError):
            record.alerts = []  # type: ignore[misc]
    assert [r.record_sequence for r in first.records] == list(range(1, len(first.records) + 1))


@pytest.mark.parametrize("seed", [0, 7])
def test_a_fully_async_run_gives_the_same_records_each_time(seed) -> None:
    """The fully-async pool drops its aborted samples: their tokens stay aborted ones, run after run."""
    from shopsim_metrics.simulator.demo import demo_config

    config = demo_config(steps=4, seed=seed, rollout="fully-async")
    runs = [_masked(simulate(config).records) for _ in range(3)]
    assert runs[0] and runs[0] == runs[1] == runs[2]
