"""The monitor's surface: its parts are built once into a frozen bundle, each hook calls one public runtime method
(inside ``own_time``) and reaches into no part, and nothing outside ``monitor.py`` reads a private member of a
runtime (read from the source with ``ast``)."""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path
from types import SimpleNamespace

import pytest

from shopsim_metrics.monitor import ShopsimRuntime, configure, reset_runtime
from shopsim_metrics.runtime_parts import RuntimeParts, build_runtime
from shopsim_metrics.settings import ShopsimSettings

ROOT = Path(__file__).resolve().parents[1]
HOOKS = ROOT / "shopsim_metrics" / "hooks.py"
SOURCES = sorted([*(ROOT / "shopsim_metrics").rglob("*.py"), *(ROOT / "filter").rglob("*.py"),
                  *(ROOT / "benchmarks").glob("*.py"), *(ROOT / "tests").glob("*.py")])
RUNTIME_NAMES = {"runtime", "monitor", "rt", "resumed"}
"""What the house calls a :class:`ShopsimRuntime` it holds (a local name, or an attribute of that name)."""


def test_the_parts_are_built_once_and_frozen() -> None:
    parts = build_runtime(ShopsimSettings.from_args(SimpleNamespace(rollout_batch_size=4, n_samples_per_prompt=2)))
    with pytest.raises(dataclasses.FrozenInstanceError):
        parts.accountant = None  # type: ignore[misc]
    assert parts.prompts is parts.accountant.prompts and parts.waves is parts.accountant.waves
    runtime = configure(SimpleNamespace(rollout_batch_size=4, n_samples_per_prompt=2), sinks=[])
    try:
        assert isinstance(runtime.parts, RuntimeParts) and runtime.settings is runtime.parts.settings
        assert runtime.waves is runtime.parts.waves and runtime.loop_state is runtime.parts.loop_state
    finally:
        reset_runtime()


def _runtime_calls(function: ast.FunctionDef) -> tuple[set[str], list[str]]:
    """The methods ``function`` calls on ``runtime``, and every deeper reach (``runtime.a.b``, ``runtime._x``)."""
    called, reached = set(), []
    for node in ast.walk(function):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "runtime":
            called.add(node.attr)
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Attribute) \
                and isinstance(node.value.value, ast.Name) and node.value.value.id == "runtime":
            reached.append(f"runtime.{node.value.attr}.{node.attr}")
    reached += [f"runtime.{name}" for name in called if name.startswith("_")]
    return called, reached


def test_each_hook_calls_one_public_runtime_method_and_reaches_into_no_part() -> None:
    tree = ast.parse(HOOKS.read_text())
    hooks = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Hooks")
    expected = {"filter": "filter_group", "filter_deciding_fallback": "filter_group_outcome", "all_samples": "close_step",
                "log": "emit_step", "sample": "record_sample"}
    found = {}
    for method in (n for n in hooks.body if isinstance(n, ast.FunctionDef) and n.name in expected):
        called, reached = _runtime_calls(method)
        assert reached == [], f"Hooks.{method.name} reaches inside the runtime: {reached}"
        found[method.name] = called - {"own_time"}
    assert found == {name: {method} for name, method in expected.items()}
    for method in expected.values():
        assert callable(getattr(ShopsimRuntime, method)) and not method.startswith("_")


def private_reads_of_a_runtime(source: str) -> list[int]:
    """The lines of ``source`` that read (or set) a private member of a runtime: ``runtime._x``, ``self.monitor._x``."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not (isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__")):
            continue
        holder = node.value
        name = holder.id if isinstance(holder, ast.Name) else holder.attr if isinstance(holder, ast.Attribute) else None
        if name in RUNTIME_NAMES:
            found.append(node.lineno)
    return found


def test_the_scan_finds_a_private_member_read_through_a_runtime() -> None:
    source = "runtime._warn_once('x')\nself.monitor._hook_started.value = 1\nrt.parts\nthing._other\nrt.__class__\n"
    assert private_reads_of_a_runtime(source) == [1, 2]


def test_nothing_outside_the_monitor_reads_a_private_member_of_a_runtime() -> None:
    allowed = {ROOT / "shopsim_metrics" / "monitor.py", Path(__file__).resolve()}
    found = [f"{path.relative_to(ROOT)}:{line}" for path in SOURCES if path not in allowed
             for line in private_reads_of_a_runtime(path.read_text())]
    assert found == [], found
