"""Per-step monitoring cost: filter for every judged group + all-samples hook + log function, W&B offline.

A lean stand-in for slime's loop judges groups in completion order (drop rule, waves, surplus) and
calls the three real hooks; only the hook calls are timed. wandb's own entry points (``Run.log``,
``wandb.Table``, ``Run.alert``) are wrapped here to measure the time spent inside them, and the JSONL sink's
write (with fsync) is timed too, so the project's own work is ``hooks − wandb`` (and, for the CPU
part, ``− JSONL I/O``). Groups: 60 % spread, 30 % zero-std, 10 % technical (never 8 in a row); each group
has its own chat prompt of about 1.6 KB (hashed for its prompt key at the step's close) and response
lengths of 300-2,100 tokens.

Targets (project's own work): < 2 ms per step at the defaults (16 kept of 32 x 8), < 100 ms at scale
(1024 kept, n 16, over_sampling_batch_size 2048), growing linearly with the groups judged.

Run: ``python benchmarks/bench_monitoring_step.py`` (W&B offline in a temp dir; no network).
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace


from shopsim_metrics.step import contract
from shopsim_metrics.step.loop_state import ManualLoopState
from shopsim_metrics.simulator.samples import SimSample
from shopsim_metrics.sinks.jsonl import JsonlSink
from shopsim_metrics.sinks.wandb_sink import WandbSink
from shopsimrl import slime_runtime


class Timer:
    """Accumulates seconds per label; wraps wandb's own calls and the JSONL write."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}

    def __call__(self, label, call):
        t0 = time.perf_counter()
        try:
            return call()
        finally:
            self.seconds[label] = self.seconds.get(label, 0.0) + time.perf_counter() - t0

    def total(self, *labels: str) -> float:
        return sum(self.seconds.get(label, 0.0) for label in labels)


class TimedJsonl(JsonlSink):
    """The JSONL sink with its fsync timed apart: serialising and writing are the project's work, the
    fsync wait is the disk's (the same durability: the line is flushed, then fsync'ed)."""

    def __init__(self, run_dir, timer: Timer) -> None:
        super().__init__(run_dir, fsync=False)
        self.timer = timer

    def emit(self, record) -> None:
        self.timer("jsonl", lambda: JsonlSink.emit(self, record))

        def sync() -> None:
            with open(self.path, "rb") as fh:
                os.fsync(fh.fileno())

        self.timer("fsync", sync)


def time_wandb_calls(timer: Timer) -> None:
    """Count the seconds spent inside wandb's ``Run.log``, ``Run.alert`` and ``wandb.Table(...)`` (benchmark only).

    The methods are wrapped in place, so ``wandb.Table`` stays the class wandb's own type checks expect.
    """
    import wandb
    from wandb.sdk.wandb_run import Run

    for label, owner, name in (("log", Run, "log"), ("alert", Run, "alert"), ("table", wandb.Table, "__init__")):
        original = getattr(owner, name)

        def timed(*args, _original=original, _label=label, **kwargs):
            return timer(_label, lambda: _original(*args, **kwargs))

        setattr(owner, name, timed)


SYSTEM_PROMPT = "You are a shopping agent: search the catalogue, compare offers and answer with one product. " * 8


def chat_prompt(gid: int) -> list[dict[str, str]]:
    """A chat prompt of about 1.6 KB, its own for each group (the prompt key hashes all of it)."""
    request = f"Request {gid}: running shoes under ${50 + gid % 100}, size {6 + gid % 8}, good arch support. " * 8
    return [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": request}]


def make_group(gid: int, n: int) -> list[SimSample]:
    kind = gid % 10
    if kind < 6:
        rewards = [float(i % 2) for i in range(n)]  # spread
    else:
        rewards = [float(kind % 2)] * n  # zero-std (all 0 or all 1)
    prompt = chat_prompt(gid)
    group = [SimSample(index=gid * n + i, group_index=gid, rollout_id=gid * n + i, reward=r, status="completed",
                       prompt=prompt, label=f"sku-{gid}", response_length=300 + 37 * ((gid + i) % 50))
             for i, r in enumerate(rewards)]
    if kind == 9 and gid % 20 == 9:  # 1 group in 20 technical, never a streak
        group[0].status = "failed"
    return group


def run_config(label: str, *, rollout_batch_size: int, n: int, over_sampling_batch_size: int, gbs: int, steps: int,
               wandb_dir: Path, timer: Timer) -> dict:
    args = SimpleNamespace(rollout_batch_size=rollout_batch_size, n_samples_per_prompt=n,
                           over_sampling_batch_size=over_sampling_batch_size,
                           global_batch_size=gbs, reward_key=None, shopsim_max_consecutive_failed_groups=8,
                           shopsim_wandb_table_every=10)
    timer.seconds.clear()
    run_dir = Path(tempfile.mkdtemp(prefix=f"bench-{label}-"))
    wandb_sink = WandbSink(mode="standalone", project="shopsim-bench", table_every=10, run_dir=wandb_dir)
    state = ManualLoopState(source="bench")
    slime_runtime.configure(args, sinks=[TimedJsonl(run_dir, timer), wandb_sink], loop_state=state)
    filt, all_hook, log_fn = (slime_runtime.fully_scored_group_filter, slime_runtime.record_all_samples,
                              slime_runtime.log_rollout_step)
    pool = [make_group(g, n) for g in range(3 * over_sampling_batch_size)]
    per_step, judged_counts = [], []
    # step 0 warms up (wandb.init, define_metric, the first table) and is not timed
    for rid in range(steps + 1):
        wandb_before = timer.total("log", "table", "alert")
        fsync_before = timer.total("fsync")
        hooks = 0.0
        state.step = rid
        remaining, data, judged, drops, next_gid, wave = 0, [], [], {}, 0, []
        while len(data) < rollout_batch_size:
            while remaining < rollout_batch_size:  # a new wave, as slime's loop opens one
                remaining += over_sampling_batch_size
                wave.extend(range(next_gid, next_gid + over_sampling_batch_size))
                next_gid += over_sampling_batch_size
            group = pool[wave.pop(0) % len(pool)]
            state.remaining = remaining
            t0 = time.perf_counter()
            out = filt(args, group)
            hooks += time.perf_counter() - t0
            judged.append(group)
            if not out.keep and not (out.keep_when_insufficient and remaining <= rollout_batch_size):
                key = contract.slime_drop_metric(out.reason)
                drops[key] = drops.get(key, 0) + 1
                remaining -= 1
            elif len(data) < rollout_batch_size:
                data.append(group)
        state.remaining = None
        train = [s for g in data for s in g]
        t0 = time.perf_counter()
        all_hook(args, judged, None)
        log_fn(rid, args, train, drops, 1.0)
        hooks += time.perf_counter() - t0
        fsync_before = timer.total("fsync") - fsync_before
        if rid == 0:
            timer.seconds.clear()
            continue
        per_step.append((hooks, timer.total("log", "table", "alert") - wandb_before, fsync_before))
        judged_counts.append(len(judged))
    slime_runtime.reset_runtime()
    fsync_s = timer.total("fsync")
    wandb_s = timer.total("log", "table", "alert")
    hooks_s = sum(h for h, _, _ in per_step)
    own_steps = sorted(h - w - f for h, w, f in per_step)
    worst, median = own_steps[-1], own_steps[len(own_steps) // 2]
    return {
        "label": label, "steps": steps, "groups_judged": sum(judged_counts) / steps,
        "hooks_ms": hooks_s / steps * 1e3, "wandb_ms": wandb_s / steps * 1e3, "fsync_ms": fsync_s / steps * 1e3,
        "jsonl_ms": timer.total("jsonl") / steps * 1e3,
        "own_ms": (hooks_s - wandb_s - fsync_s) / steps * 1e3,
        "worst_own_ms": worst * 1e3, "median_own_ms": median * 1e3, "table_ms": timer.total("table") / steps * 1e3,
    }


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="bench-wandb-") as tmp:
        for var in ("WANDB_DIR", "WANDB_DATA_DIR", "WANDB_CACHE_DIR", "WANDB_CONFIG_DIR"):
            os.environ.setdefault(var, tmp)
        os.environ.setdefault("WANDB_MODE", "offline")
        os.environ.setdefault("WANDB_SILENT", "true")
        configs = [
            dict(label="defaults", rollout_batch_size=16, n=8, over_sampling_batch_size=32, gbs=64, steps=50,
                 target_ms=2.0),
            dict(label="middle", rollout_batch_size=256, n=16, over_sampling_batch_size=512, gbs=1024, steps=20,
                 target_ms=None),
            dict(label="scale", rollout_batch_size=1024, n=16, over_sampling_batch_size=2048, gbs=4096, steps=20,
                 target_ms=100.0),
        ]
        timer = Timer()
        time_wandb_calls(timer)
        results = []
        for cfg in configs:
            target_ms = cfg.pop("target_ms")
            res = run_config(**cfg, wandb_dir=Path(tmp), timer=timer)
            res["target_ms"] = target_ms
            results.append(res)
    print("per rollout step, mean over the timed steps (W&B offline; the first step warms up and is not timed)")
    print("hooks = filter x groups + all-samples hook + log function; own = hooks - wandb calls - fsync wait")
    print(f"{'config':9} {'groups':>6} {'hooks':>9} {'wandb':>9} {'(table)':>9} {'fsync':>9} {'(jsonl)':>9} "
          f"{'own':>9} {'median':>9} {'worst':>9} {'own/group':>10}  target")
    ok = True
    for r in results:
        per_group = r["own_ms"] * 1e3 / r["groups_judged"]
        verdict = ""
        if r["target_ms"] is not None:
            passed = r["own_ms"] < r["target_ms"]
            ok &= passed
            verdict = f"own < {r['target_ms']:g} ms: {'ok' if passed else 'MISSED'}"
        print(f"{r['label']:9} {r['groups_judged']:6.0f} {r['hooks_ms']:7.2f}ms {r['wandb_ms']:7.2f}ms "
              f"{r['table_ms']:7.2f}ms {r['fsync_ms']:7.2f}ms {r['jsonl_ms']:7.2f}ms {r['own_ms']:7.2f}ms "
              f"{r['median_own_ms']:7.2f}ms {r['worst_own_ms']:7.2f}ms {per_group:7.1f}us  {verdict}")
    base = results[0]["own_ms"] / results[0]["groups_judged"]
    for r in results[1:]:
        ratio = r["own_ms"] / r["groups_judged"] / base
        print(f"own cost per judged group, {r['label']} / defaults: {ratio:.2f} "
              "(1.0 = linear; these groups hold 16 samples, the defaults' 8)")
    print("own/median/worst: the project's work per step (mean, median, slowest step); wandb-core runs in its own")
    print("process and competes for the CPU, so single steps are noisy")
    print("(table) is part of wandb; (jsonl) = serialising + writing steps.jsonl, part of own; fsync is the disk's")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
