"""Run the benchmarks of ``make bench``: the single-process ones side by side on the CPUs, then the rest one by one.

Each benchmark measures its targets as ratios side by side within its own run (pairs in alternated order,
or a share of a simulated time with a wide margin), so two of them sharing the machine change no verdict;
the benchmarks that already spread their runs over every CPU (``--serial``) run alone. Every benchmark
runs; the output of each is printed whole, in the order given, with its wall time; the exit status is 1 if
any missed its target.

Run: ``python benchmarks/run.py --parallel import filter --serial prompt_skip`` (names: ``bench_<name>.py``).

Example:
    >>> plan(["--parallel", "a", "b", "--serial", "c"])
    (['a', 'b'], ['c'])
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

HERE = Path(__file__).resolve().parent


def plan(argv: list[str]) -> tuple[list[str], list[str]]:
    """The benchmarks to run side by side, and those to run alone, from the command line."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)
    parser.add_argument("--parallel", nargs="*", default=[], help="single-process benchmarks, run side by side")
    parser.add_argument("--serial", nargs="*", default=[], help="benchmarks that use every CPU, run alone")
    args = parser.parse_args(argv)
    return args.parallel, args.serial


def run_captured(name: str) -> tuple[str, int, str, float]:
    """One benchmark, its output captured: (name, exit status, output, wall seconds)."""
    started = time.perf_counter()
    done = subprocess.run([sys.executable, str(HERE / f"bench_{name}.py")], capture_output=True, text=True)
    return name, done.returncode, done.stdout + done.stderr, time.perf_counter() - started


def main(argv: list[str] | None = None) -> int:
    parallel, serial = plan(sys.argv[1:] if argv is None else argv)
    started, failed = time.perf_counter(), []
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as lanes:
        for name, status, output, seconds in lanes.map(run_captured, parallel):
            print(f"== benchmarks/bench_{name}.py ({seconds:.0f} s, beside another)\n{output}", end="", flush=True)
            failed += [name] if status else []
    for name in serial:
        print(f"== benchmarks/bench_{name}.py", flush=True)
        bench_started = time.perf_counter()
        status = subprocess.run([sys.executable, str(HERE / f"bench_{name}.py")]).returncode
        print(f"({time.perf_counter() - bench_started:.0f} s)", flush=True)
        failed += [name] if status else []
    print(f"bench: {time.perf_counter() - started:.0f} s; "
          + ("every target met" if not failed else f"some target MISSED: {', '.join(failed)}"))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
