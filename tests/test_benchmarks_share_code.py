"""The benchmarks share code through plain sibling modules (``benchmarks/worlds.py``, ``results_file.py``), never by
editing ``sys.path`` nor by importing another benchmark's script: ``python benchmarks/bench_x.py`` puts the folder
first on the import path by Python's own rule."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BENCHMARKS = sorted((ROOT / "benchmarks").glob("*.py"))


def edits_or_imports_a_script(source: str) -> list[str]:
    """What in ``source`` touches ``sys.path`` or imports a ``bench_*`` script."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute) and node.attr == "path" and isinstance(node.value, ast.Name) \
                and node.value.id == "sys":
            found.append(f"sys.path at line {node.lineno}")
        names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
            [node.module or ""] if isinstance(node, ast.ImportFrom) else []
        found += [f"import {n} at line {node.lineno}" for n in names if n.split(".")[0].startswith("bench_")]
    return found


def test_the_check_finds_both_habits() -> None:
    source = "import sys\nsys.path.insert(0, 'x')\nfrom bench_prompt_skip import pools\nimport bench_real_trace\n"
    assert sorted(edits_or_imports_a_script(source)) == ["import bench_prompt_skip at line 3",
                                                         "import bench_real_trace at line 4", "sys.path at line 2"]


def test_no_benchmark_edits_the_import_path_or_imports_another_benchmark() -> None:
    found = {p.name: f for p in BENCHMARKS if (f := edits_or_imports_a_script(p.read_text()))}
    assert found == {}, found


def test_a_benchmark_finds_its_shared_worlds_when_run_as_a_script() -> None:
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "bench_skip_worlds.py"), "--help"],
                          capture_output=True, text=True, cwd="/")
    assert done.returncode == 0, done.stderr
    assert "--max-lost-signal" in done.stdout
