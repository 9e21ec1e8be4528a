"""The house's import structure: dependencies point one way, and the core's top level stays small.

Read from the source with ``ast`` (every ``import`` and ``from ... import``, those under ``TYPE_CHECKING``
included: a reader follows them too).
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CORE = ROOT / "shopsim_metrics"
TOP_LEVEL_ALLOWED_EXTRA = {"__init__", "__main__", "cli"}
TOP_LEVEL_MOST = 6


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports() -> dict[str, set[str]]:
    """Each core module -> the core modules it imports (a name imported from a package counts as its module
    when the package holds one of that name)."""
    modules = {_module_name(p): p for p in CORE.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        found: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.Import):
                found |= {a.name for a in node.names if a.name in modules}
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                if node.module in modules:
                    found.add(node.module)
                found |= {f"{node.module}.{a.name}" for a in node.names if f"{node.module}.{a.name}" in modules}
        graph[name] = found - {name}
    return graph


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle, or None (depth-first search with colours)."""
    colour: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        colour[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if colour.get(nxt) == 1:
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in colour:
                found = visit(nxt)
                if found:
                    return found
        stack.pop()
        colour[node] = 2
        return None

    for node in sorted(graph):
        if node not in colour:
            found = visit(node)
            if found:
                return found
    return None


def test_no_module_of_the_core_imports_itself_round_a_circle() -> None:
    assert _cycle(_imports()) is None, " -> ".join(_cycle(_imports()) or [])


def test_the_cycle_finder_finds_a_circle() -> None:
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None


def test_the_cores_top_level_keeps_at_most_six_modules_besides_its_entry_points() -> None:
    top = {p.stem for p in CORE.glob("*.py")} - TOP_LEVEL_ALLOWED_EXTRA
    assert len(top) <= TOP_LEVEL_MOST, sorted(top)


ABOVE_THE_STEP = ("monitor", "run", "prompts", "settings", "hooks")


def test_the_lower_rooms_never_import_the_hub_or_a_run_s_life() -> None:
    """judging, the record, the loop, waves, health, fully-async, step and settings sit below the monitor and the
    run's life; the record's contract imports only judging; the rooms below the step never import it."""
    graph = _imports()
    below = {"shopsim_metrics.judging": ("monitor", "run", "prompts", "step", "settings", "record"),
             "shopsim_metrics.record": ("monitor", "run", "prompts", "step", "settings", "hooks", "loop", "waves",
                                        "health", "fully_async", "sinks", "readers"),
             "shopsim_metrics.loop": (*ABOVE_THE_STEP, "step", "record", "waves", "health"),
             "shopsim_metrics.waves": (*ABOVE_THE_STEP, "step", "health"),
             "shopsim_metrics.health": (*ABOVE_THE_STEP, "step", "waves"),
             "shopsim_metrics.fully_async": (*ABOVE_THE_STEP, "step"),
             "shopsim_metrics.step": ABOVE_THE_STEP,
             "shopsim_metrics.settings": ("monitor", "run", "hooks"),
             "shopsim_metrics.outcomes": ("monitor", "run", "hooks", "prompts", "replay", "simulator", "dashboards")}
    found = []
    for module, imported in graph.items():
        for room, forbidden in below.items():
            if module.startswith(room + ".") or module == room:
                found += [f"{module} -> {m}" for m in imported
                          if any(m == f"shopsim_metrics.{f}" or m.startswith(f"shopsim_metrics.{f}.") for f in forbidden)]
    assert not found, found


def test_the_general_helpers_import_no_other_room() -> None:
    """``general/`` (plain values, warn once) is the ground floor every room may stand on: it stands on nothing."""
    graph = _imports()
    general = {m: imported for m, imported in graph.items() if m.startswith("shopsim_metrics.general")}
    assert general, "shopsim_metrics/general/ holds the general helpers"
    found = [f"{m} -> {i}" for m, imported in general.items() for i in imported if not i.startswith("shopsim_metrics.general")]
    assert not found, found


SIMULATOR_USES = ("tuning", "skipping", "demo", "commands")
"""What the simulator's loop is used by, never the other way round: ``tune``, the skip measurements, ``demo``, the CLI."""


def test_the_simulators_loop_stands_apart_from_tune_demo_and_the_skip_measurements() -> None:
    graph = _imports()
    uses = tuple(f"shopsim_metrics.simulator.{name}" for name in SIMULATOR_USES)
    loop = {m: imported for m, imported in graph.items()
            if m.startswith("shopsim_metrics.simulator.") and not m.startswith(uses)}
    assert "shopsim_metrics.simulator.loop" in loop
    found = [f"{m} -> {i}" for m, imported in loop.items() for i in imported if i.startswith(uses)]
    assert not found, found
