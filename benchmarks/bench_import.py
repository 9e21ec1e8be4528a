"""Importing the hooks slime loads against importing numpy, side by side in fresh interpreters.

slime imports ``shopsimrl.slime_runtime`` by dotted path in every rollout process; that process has
imported numpy (and torch) already. What the hooks add at start-up is their own import: this benchmark
times ``import shopsimrl.slime_runtime`` and ``import numpy``, each in a fresh interpreter (the time of
the import statement alone, measured inside it), in pairs whose order alternates, so both see the same
machine load; the verdict is the median over the pairs of ``hooks / numpy``. The hooks' import must
load none of wandb, torch, slime, plotly, numpy (a test checks that, without a clock).

Target: <= 2.0. Measured about 1.1-1.3 on a 2-core machine (both about 0.1 s): the project's modules
are many small ones with dataclasses; a hook that pulled in numpy or wandb at import would add their
whole import time and miss it.

Run: ``make bench``, or ``python benchmarks/bench_import.py``. ``BENCH_ROUNDS`` sets the pairs (default 15).
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys

TARGET_RATIO = 2.0  # hooks' import / numpy's import, median over pairs
_TIMED = "import time; t = time.perf_counter(); import {module}; print(time.perf_counter() - t)"


def import_seconds(module: str) -> float:
    """Seconds ``import module`` takes in a fresh interpreter (the interpreter's own start-up left out)."""
    out = subprocess.run([sys.executable, "-c", _TIMED.format(module=module)], capture_output=True, text=True,
                         check=True)
    return float(out.stdout)


def main() -> int:
    rounds = int(os.environ.get("BENCH_ROUNDS", "15"))
    import_seconds("shopsimrl.slime_runtime"), import_seconds("numpy")  # warm the file cache
    hooks, numpy = [], []
    for r in range(rounds):
        if r % 2:
            numpy.append(import_seconds("numpy"))
            hooks.append(import_seconds("shopsimrl.slime_runtime"))
        else:
            hooks.append(import_seconds("shopsimrl.slime_runtime"))
            numpy.append(import_seconds("numpy"))
    ratio = statistics.median(h / n for h, n in zip(hooks, numpy))
    ok = ratio <= TARGET_RATIO
    print(f"{rounds} pairs of fresh interpreters, order alternated; medians")
    print(f"  import shopsimrl.slime_runtime: {statistics.median(hooks) * 1e3:6.1f} ms")
    print(f"  import numpy:                   {statistics.median(numpy) * 1e3:6.1f} ms")
    print(f"  ratio hooks / numpy: {ratio:.2f}   target <= {TARGET_RATIO:.2f}   {'ok' if ok else 'MISSED'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
