"""The figures the benchmarks measured, in one file the README and the docs quote: ``benchmarks/results.json``.

Each benchmark writes its own entry (``{figure name: value}``) when it runs whole, replacing its previous
entry and leaving the others; a test checks that every figure the README and the docs quote equals the
file's. Values are rounded as they are quoted (ratios to 2 decimals, lost signals to 3).

Example:
    >>> import tempfile, pathlib
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "results.json"
    >>> update("bench_x", {"predictive_adaptive_saving": 1.6012}, path=path)
    >>> update("bench_y", {"lost_signal": 0.0881}, path=path)
    >>> read(path)["bench_x"]
    {'predictive_adaptive_saving': 1.6012}
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Mapping

RESULTS = Path(__file__).resolve().parent / "results.json"


def read(path: Path = RESULTS) -> dict[str, dict[str, Any]]:
    """Every benchmark's figures (an empty mapping when none has written yet)."""
    return json.loads(path.read_text()) if path.exists() else {}


def update(bench: str, figures: Mapping[str, Any], *, path: Path = RESULTS) -> None:
    """Replace ``bench``'s entry with ``figures`` (written whole to a temporary file, then renamed)."""
    results = read(path)
    results[bench] = dict(figures)
    part = path.with_suffix(".json.part")
    part.write_text(json.dumps(results, indent=2, sort_keys=True) + "\n")
    os.replace(part, path)
