"""The tools on a big run: a ~1.6 GB, 120,000-step ``steps.jsonl``, and a 100,000-step demo.

1. A records file of the shape the project writes (records of the demo's simulated run, converted
   and serialised as the JSONL sink does, cycled with fresh rollout ids) is generated in a temporary
   directory (never in the repository; about a minute). Then, each in its own subprocess, side by side:
   reading it with ``json.loads`` line by line (the reference), ``inspect``, ``tune --from`` (with a
   tiny simulation, so reading dominates) and ``dashboard html``. Printed: wall time, the ratio to
   the reference, peak memory (RSS) and the size of the page. Targets: ratio <= 2, peak <= 400 MB,
   page < 15 MB.
2. ``demo --steps 100000`` (JSONL and an offline W&B run, as a user runs it) in a subprocess: peak
   memory of the demo process and of its largest child (wandb's service). Target: <= 500 MB.

Run: ``make bench-big`` (many minutes; not part of ``make bench``), or ``python benchmarks/bench_big_files.py
[--steps 120000] [--demo-steps 100000] [--skip-demo] [--skip-reading]``. Prints figures and ratios; exits 1
when a target is missed.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

READ_TARGET = 2.0
MEMORY_TARGET_MB = 400.0
PAGE_TARGET_MB = 15.0
DEMO_TARGET_MB = 500.0

# Runs the command given after it, then prints its wall time and the peak RSS of it and its children.
_MEASURE = """
import json, resource, subprocess, sys, time
started = time.perf_counter()
proc = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
seconds = time.perf_counter() - started
peak_kb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
print(json.dumps({"seconds": seconds, "peak_mb": peak_kb / 1024, "returncode": proc.returncode,
                  "stderr": proc.stderr.decode(errors="replace")[-400:]}))
"""

_REFERENCE = """
import json, sys
with open(sys.argv[1], "rb") as fh:
    for line in fh:
        json.loads(line)
"""


def measure(cmd: list[str]) -> dict:
    """Wall time and peak RSS (MB) of ``cmd`` run in a fresh subprocess."""
    out = subprocess.run([sys.executable, "-c", _MEASURE, *cmd], capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def write_big_file(path: Path, steps: int) -> int:
    """``steps`` records shaped as the JSONL sink writes them; returns the file size in bytes."""
    from shopsim_metrics.record.json_values import json_native
    from shopsim_metrics.simulator.demo import demo_config
    from shopsim_metrics.simulator.loop import Simulator

    import logging

    logging.getLogger("shopsim_metrics").setLevel(logging.ERROR)  # the demo's burst alerts
    result = Simulator(demo_config(steps=400, seed=1), sinks=[]).run()
    tails = []
    for record in result.records:
        line = json.dumps(json_native(record.to_dict()), allow_nan=False, separators=(",", ":"))
        head, tail = line.split(",", 1)
        assert head.startswith('{"rollout_id":'), head
        tails.append(tail)
    with open(path, "w", encoding="utf-8") as fh:
        for step in range(steps):
            fh.write(f'{{"rollout_id":{step},{tails[step % len(tails)]}\n')
    return path.stat().st_size


def bench_reading(steps: int, workdir: Path) -> bool:
    path = workdir / "run" / "steps.jsonl"
    path.parent.mkdir()
    started = time.perf_counter()
    size = write_big_file(path, steps)
    print(f"generated {path}: {steps:,} steps, {size / 1e9:.2f} GB in {time.perf_counter() - started:.0f} s")
    cli = [sys.executable, "-m", "shopsim_metrics.cli"]
    page = workdir / "dashboard.html"
    commands = {
        "json.loads per line (reference)": [sys.executable, "-c", _REFERENCE, str(path)],
        "inspect": [*cli, "inspect", str(path)],
        "tune --from": [*cli, "tune", "--from", str(path), "--candidates", "16", "--steps", "20", "--jobs", "1"],
        "dashboard html": [*cli, "dashboard", "html", "--from", str(path), "--out", str(page)],
    }
    figures = {name: measure(cmd) for name, cmd in commands.items()}
    reference = figures["json.loads per line (reference)"]["seconds"]
    ok = True
    print(f"\n{'command':<34} {'seconds':>8} {'ratio':>6} {'peak MB':>8}  verdict")
    for name, fig in figures.items():
        ratio = fig["seconds"] / reference
        is_reference = name.startswith("json.loads")
        good = fig["returncode"] == 0 and (is_reference or (ratio <= READ_TARGET and fig["peak_mb"] <= MEMORY_TARGET_MB))
        ok &= good
        verdict = "reference" if is_reference else ("ok" if good else f"MISSED (rc={fig['returncode']})")
        print(f"{name:<34} {fig['seconds']:>8.1f} {ratio:>6.2f} {fig['peak_mb']:>8.0f}  {verdict}")
        if fig["returncode"] != 0:
            print("   ", fig["stderr"].strip().splitlines()[-1:])
    page_mb = page.stat().st_size / 1e6 if page.exists() else float("nan")
    ok &= page_mb < PAGE_TARGET_MB
    print(f"dashboard page: {page_mb:.1f} MB (target < {PAGE_TARGET_MB:.0f} MB)")
    print(f"targets: ratio <= {READ_TARGET}, peak <= {MEMORY_TARGET_MB:.0f} MB")
    return ok


def bench_demo(steps: int, workdir: Path) -> bool:
    env = dict(os.environ)
    wandb_dir = workdir / "wandb-home"
    for var in ("WANDB_DIR", "WANDB_DATA_DIR", "WANDB_CACHE_DIR", "WANDB_CONFIG_DIR", "WANDB_ARTIFACT_DIR"):
        env[var] = str(wandb_dir)
    env.update(WANDB_MODE="offline", WANDB_SILENT="true", WANDB_DISABLE_GIT="true")
    env.pop("WANDB_API_KEY", None)
    cmd = [sys.executable, "-m", "shopsim_metrics.cli", "demo", "--steps", str(steps), "--out",
           str(workdir / "demo"), "--no-progress"]
    out = subprocess.run([sys.executable, "-c", _MEASURE, *cmd], capture_output=True, text=True, env=env, check=True)
    fig = json.loads(out.stdout)
    good = fig["returncode"] == 0 and fig["peak_mb"] <= DEMO_TARGET_MB
    print(f"\ndemo --steps {steps:,}: {fig['seconds']:.0f} s, {steps / fig['seconds']:.0f} steps/s, peak "
          f"{fig['peak_mb']:.0f} MB (largest of the demo process and its children; target <= "
          f"{DEMO_TARGET_MB:.0f} MB): {'ok' if good else 'MISSED'}")
    if fig["returncode"] != 0:
        print("   ", fig["stderr"].strip().splitlines()[-1:])
    return good


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)
    parser.add_argument("--steps", type=int, default=120_000, help="steps of the generated file")
    parser.add_argument("--demo-steps", type=int, default=100_000)
    parser.add_argument("--skip-demo", action="store_true")
    parser.add_argument("--skip-reading", action="store_true")
    args = parser.parse_args()
    ok = True
    with tempfile.TemporaryDirectory(prefix="shopsim-bench-") as tmp:
        if not args.skip_reading:
            ok &= bench_reading(args.steps, Path(tmp))
        if not args.skip_demo:
            ok &= bench_demo(args.demo_steps, Path(tmp))
    print("\nall targets met" if ok else "\nsome targets missed")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
