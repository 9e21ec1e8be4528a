"""The skip rules are policies chosen once: the data source names none, and only the chosen one is built."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import shopsim_metrics.prompts.data_source as data_source_module
from shopsim_metrics.judging.prompt_keys import prompt_key
from shopsim_metrics.prompts import lost_signal_guard, predictive_rule, skip_rule
from shopsim_metrics.prompts.greso_policy import GresoPolicy
from shopsim_metrics.prompts.predictive_policy import PredictivePolicy
from shopsim_metrics.prompts.skip_policy import POLICIES, build_skip_policy
from shopsim_metrics.prompts.skip_rule import GresoSkipRule
from shopsim_metrics.settings import PROMPT_SKIP_MODES
from shopsim_metrics.settings.prompt_skip import SkipRuleSettings
from tests.test_data_source import make_args, pool, skip_source

RULE_NAMES = {"GRESO", "PREDICTIVE", "GresoSkipRule", "PredictiveSkipRule", "LostSignalGuard", "GresoPolicy",
              "PredictivePolicy", "SkipDecision", "PROBE", "SKIP"}
RULE_MODULES = {"skip_rule", "predictive_rule", "lost_signal_guard", "greso_policy", "predictive_policy"}


def _code_nodes(tree: ast.AST) -> list[ast.AST]:
    """Every node but the docstrings (a docstring may describe the rules; the code may not name them)."""
    docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                  if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef)) and node.body
                  and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)}
    return [node for node in ast.walk(tree) if id(node) not in docstrings]


def test_the_data_source_names_no_rule_beyond_choosing_the_policy() -> None:
    tree = ast.parse(Path(data_source_module.__file__).read_text())
    named = []
    for node in _code_nodes(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.lower() in POLICIES:
            named.append(repr(node.value))
        elif isinstance(node, ast.Name) and node.id in RULE_NAMES:
            named.append(node.id)
        elif isinstance(node, ast.Attribute) and node.attr in RULE_NAMES | {"rule", "guard", "predictor", "adapt"}:
            named.append(f".{node.attr}")
        elif isinstance(node, ast.ImportFrom) and (node.module or "").rpartition(".")[2] in RULE_MODULES:
            named.append(node.module)
    assert named == [], f"prompts/data_source.py names a rule ({', '.join(named)}): choose it in skip_policy.py"
    assert set(POLICIES) == set(PROMPT_SKIP_MODES) - {"off"}  # every mode that skips has its policy


def test_the_scan_sees_a_rule_named_in_code() -> None:
    tree = ast.parse('"""greso in a docstring is fine."""\nif mode == "greso":\n    rule.adapt(1, 2)\n')
    found = {node.value for node in _code_nodes(tree) if isinstance(node, ast.Constant)}
    assert "greso" in found and not any("docstring" in str(v) for v in found)


@pytest.fixture
def built(monkeypatch) -> list[str]:
    """The rules' classes built during a test, by name."""
    built: list[str] = []
    for module, name in ((skip_rule, "GresoSkipRule"), (predictive_rule, "PredictiveSkipRule"),
                         (lost_signal_guard, "LostSignalGuard")):
        cls = getattr(module, name)
        original = cls.__init__

        def spy(self, *args, __original=original, __name=name, **kwargs):
            built.append(__name)
            __original(self, *args, **kwargs)

        monkeypatch.setattr(cls, "__init__", spy)
    return built


def _serve_save_load(tmp_path, mode: str):
    prompts = pool(8)
    args = make_args(tmp_path, shopsim_prompt_skip=mode, shopsim_prompt_skip_threshold=0.85)
    ds = skip_source(args, prompts)
    for step in range(4):
        for key in [prompt_key([p])[0] for p in prompts[:4]]:
            ds.history.observe(key, "zero_std_all_fail", successes=0, scored=8)
        ds.history.close_step(step)
        ds.get_samples(4)
    twin = skip_source(args, prompts)
    twin.load_state_dict(json.loads(json.dumps(ds.state_dict())))
    return ds, twin


def test_greso_s_rule_is_not_built_when_predictive_is_chosen(tmp_path, built) -> None:
    ds, twin = _serve_save_load(tmp_path, "predictive")
    assert isinstance(ds.policy, PredictivePolicy) and ds.policy.probes  # it decided draws (the guard served them)
    assert "GresoSkipRule" not in built and {"PredictiveSkipRule", "LostSignalGuard"} <= set(built)
    assert "rule" not in ds.state_dict()  # nothing of GRESO's saved


def test_the_predictive_rule_and_its_guard_are_not_built_when_greso_is_chosen(tmp_path, built) -> None:
    ds, _ = _serve_save_load(tmp_path, "greso")
    assert isinstance(ds.policy, GresoPolicy) and set(built) == {"GresoSkipRule"}


def test_off_builds_no_rule(tmp_path, built) -> None:
    ds = skip_source(make_args(tmp_path, shopsim_prompt_skip="off"), pool(4))
    ds.get_samples(2)
    assert ds.policy is None and built == []


def test_a_predictive_state_saved_with_greso_s_numbers_still_loads(tmp_path) -> None:
    """States saved before the policies held GRESO's numbers (``rule``) in every mode: read as before."""
    ds, _ = _serve_save_load(tmp_path, "predictive")
    old = {**json.loads(json.dumps(ds.state_dict())), "rule": GresoSkipRule(SkipRuleSettings()).state_dict()}
    twin = skip_source(make_args(tmp_path, shopsim_prompt_skip="predictive", shopsim_prompt_skip_threshold=0.85),
                       pool(8))
    twin.load_state_dict(json.loads(json.dumps(old)))
    assert twin.state_dict() == {k: v for k, v in old.items() if k != "rule"}


@given(seed=st.integers(0, 2**31), questions=st.lists(st.tuples(st.integers(0, 6), st.sampled_from(
    ["zero_std_all_pass", "zero_std_all_fail", "zero_std_other"])), max_size=20))
@settings(max_examples=50, deadline=None)
def test_greso_s_policy_decides_as_its_rule(seed: int, questions) -> None:
    class History:
        def __init__(self):
            self.answer = (0, None)

        def zero_std_run(self, key):
            return self.answer

    policy = build_skip_policy("greso", SkipRuleSettings(seed=seed), n_samples=None)
    rule, history = GresoSkipRule(SkipRuleSettings(seed=seed)), History()
    for run, kind in questions:
        history.answer = (run, kind if run else None)
        decision, expected = policy.decide("k", None, history), rule.decide(*history.answer)
        assert (decision.skip, decision.probability, decision.zero_std_run, decision.kind) == (
            expected.skip, expected.probability, *history.answer)


def test_an_unknown_mode_is_named() -> None:
    with pytest.raises(ValueError, match="expected off or one of greso, predictive; got 'gerso'"):
        build_skip_policy("gerso", SkipRuleSettings(), n_samples=8)


# --- the protocol between the monitor and the data source ----------------------------------------------------

def _public(protocol: type) -> set[str]:
    return {name for name in vars(protocol) if not name.startswith("_")}


def test_the_monitor_and_the_data_source_implement_the_protocols_they_are_typed_by() -> None:
    from shopsim_metrics.monitor import ShopsimRuntime
    from shopsim_metrics.prompts.data_source import PromptSkipDataSource
    from shopsim_metrics.prompts.skip_monitor import SkipMonitor
    from shopsim_metrics.prompts.skip_record import SkipSource

    assert _public(SkipMonitor) == {"run_id", "waves", "attach_prompt_skip"}
    assert all(hasattr(ShopsimRuntime, name) for name in _public(SkipMonitor))
    assert _public(SkipSource) == {"take_skipped", "take_rule_report"}
    assert all(callable(getattr(PromptSkipDataSource, name)) for name in _public(SkipSource))


def test_the_records_read_the_source_through_its_report_not_its_rule() -> None:
    import shopsim_metrics.prompts.skip_record as skip_record

    tree = ast.parse(Path(skip_record.__file__).read_text())
    rule_attributes = {node.attr for node in ast.walk(tree) if isinstance(node, ast.Attribute)} & {"rule", "predictor"}
    getattrs = [node for node in ast.walk(tree) if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "getattr"]
    assert not rule_attributes and not getattrs, "skip_record.py reaches into the source: read its take_rule_report()"
