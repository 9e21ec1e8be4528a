"""``shopsim-metrics demo``: a simulated slime run through the real hooks, W&B offline, JSONL, dashboard.

A few dozen rollout steps at slime's defaults (16 groups kept of 32 submitted, 8 siblings) with a
policy that learns, prompts of mixed difficulty, partial-credit rewards, a background rate of
technical failures, and one **burst**: during step ``3 * steps // 8`` the environment fails 90% of
groups. The burst drops enough groups to open extra over-sampling waves and builds a streak of
technical failures that raises the WARN alert (at half the limit of 8); the simulated service
recovers after at most 6 failures in a row, so the run is not terminated.

The prompts come from a finite pool of :data:`DEMO_PROMPT_POOL` prompts revisited epoch after epoch
(:mod:`shopsim_metrics.simulator.epochs`): as the policy learns, easy prompts saturate to all-pass and
hard ones stay all-fail, so ``zero_std_persistence`` rises over the run once learning slows (the
summary prints it per quarter; early steps, when nearly everything fails, are persistent too).

With ``agent`` (``demo --agent``) every rollout is an agent episode (:mod:`shopsim_metrics.simulator.simulated_episodes`:
turns, tool calls and their output, tool seconds) and every technical failure an environment failure with its
cause; during the burst the search tool times out (:data:`DEMO_BURST_CAUSE`), so the WARN names that cause.

Records go where the runtime sends them in slime: ``build_sinks`` from the settings, i.e.
``<out>/run/steps.jsonl`` and a standalone W&B run, offline (``WANDB_MODE=offline`` is set for the
demo unless you set ``WANDB_MODE`` yourself; ``wandb sync <run dir>`` uploads it later). The HTML
dashboard is written to ``<out>/dashboard.html``, and the prompt pool, as a launch's ``--prompt-data``,
to ``<out>/prompts.jsonl``.

Example:
    >>> cfg = demo_config(steps=40, seed=0)
    >>> (cfg.bursts[0].step, cfg.max_technical_streak, cfg.max_consecutive_failed_groups)
    (15, 6, 8)
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, TextIO

from shopsim_metrics.record import contract
from shopsim_metrics.record.records import StepRecord
from shopsim_metrics.simulator.progress import Progress
from shopsim_metrics.simulator.config import AgentModel, FailureBurst, SimConfig
from shopsim_metrics.simulator.loop import SimulationResult, Simulator, StepOutcome
from shopsim_metrics.simulator.skipping.skip_saving import SkipComparison
from shopsim_metrics.simulator.tally import RunTally, format_agent, format_headline, format_skipping

logger = logging.getLogger("shopsim_metrics")

BURST_RATE = 0.9
"""Share of groups that fail technically during the demo's burst step."""

SERVICE_RECOVERS_AFTER = 6
"""The demo's environment recovers after at most this many technical groups in a row (limit 8: no termination)."""

WANDB_PROJECT = "shopsim-metrics-demo"


@dataclass
class DemoResult:
    """What the demo produced: the paths, and the simulated run itself."""

    out_dir: Path
    run_dir: Path  # holds steps.jsonl
    steps_path: Path
    wandb_run_dir: Path | None  # the offline W&B run (None when W&B was unavailable)
    dashboard_path: Path | None  # None when the dashboard could not be written
    burst_step: int
    result: SimulationResult  # records are not kept in it (constant memory): they are in the sinks
    tally: RunTally  # the summary of the records, in constant memory
    skip_comparison: SkipComparison | None = None  # with prompt skipping: the same pool without and with it


DEMO_PROMPT_POOL = 192
"""Prompts in the demo's data set: six steps of 32 groups make one epoch."""

DEMO_ASYNC_POOL = 48
"""Groups in flight in the fully-async demo (``sglang_server_concurrency`` × engines): three steps' worth."""

DEMO_ASYNC_ABORT_RATE = 0.02
"""Share of the fully-async demo's generations aborted part-way (and put back): what weight updates cut short."""

DEMO_BURST_CAUSE = "ToolTimeout: search_products"
"""The environment failure of the agent demo's burst: the search tool times out."""


def demo_config(*, steps: int = 40, seed: int = 0, prompt_skip: str = "off", wave_size: str = "fixed",
                rollout: str = "sync", agent: AgentModel | None = None) -> SimConfig:
    """The demo's simulated run: slime's defaults, one burst of technical failures, and a policy that
    starts weak on hard prompts (many all-fail groups: zero-std drops and fallback early) and learns.

    ``rollout="fully-async"``: slime's fully-async pool instead (:data:`DEMO_ASYNC_POOL` groups in flight,
    fresh prompts rather than the pool of :data:`DEMO_PROMPT_POOL`, :data:`DEMO_ASYNC_ABORT_RATE` of the
    generations aborted and put back); neither prompt skipping nor adaptive waves apply there. ``agent``: the
    rollouts are agent episodes, the burst's failures the search tool's timeouts (:data:`DEMO_BURST_CAUSE`).

    Example:
        >>> cfg = demo_config(rollout="fully-async")
        >>> (cfg.rollout, cfg.max_concurrent_groups, cfg.prompt_pool)
        ('fully-async', 48, None)
    """
    burst_step = (3 * steps) // 8
    fully_async = rollout == "fully-async"
    if fully_async and (prompt_skip != "off" or wave_size != "fixed"):
        raise ValueError("the fully-async demo neither skips prompts nor sizes waves (it has none): "
                         "leave --prompt-skip off and --wave-size fixed")
    return SimConfig(
        steps=steps,
        seed=seed,
        skill_start=-3.5,
        skill_end=2.0,
        learning_steps=12.0,
        prompt_pool=None if fully_async else DEMO_PROMPT_POOL,
        difficulty_spread=3.0,
        partial_credit_rate=0.0,
        technical_rate=0.02,
        bursts=(FailureBurst(step=burst_step, rate=BURST_RATE, cause=DEMO_BURST_CAUSE if agent else None),),
        max_technical_streak=SERVICE_RECOVERS_AFTER,
        max_consecutive_failed_groups=8,
        prompt_skip=prompt_skip,
        wave_size=wave_size,
        rollout=rollout,
        max_concurrent_groups=DEMO_ASYNC_POOL if fully_async else 48,
        async_abort_rate=DEMO_ASYNC_ABORT_RATE if fully_async else 0.0,
        agent=agent,
    )


PROMPT_DATA_FILE = "prompts.jsonl"
"""The demo's prompt pool as slime's ``--prompt-data`` (``--input-key prompt --label-key label``), in ``<out>``."""

DEMO_MARKER = ".shopsim-demo"
"""The file the demo leaves in ``<out>/run``: only step records beside it are the demo's to replace. Its second
line is the JSON of the demo's settings, which the next demo names when it replaces them."""

DERIVED_FILES = ("dashboard-prompts.html", "skip.jsonl", "tune.html")
"""What the README's commands derive from the demo's run into ``<out>``: a demo that replaces the run removes
them with it (they would describe the previous run beside the new dashboard)."""


class DemoOutInUse(ValueError):
    """``demo --out`` points at step records the demo did not write (it refuses, it never deletes them)."""


def run_demo(
    out_dir: str | os.PathLike = "demo_out",
    *,
    steps: int = 40,
    seed: int = 0,
    progress: bool = True,
    stream: TextIO | None = None,
    prompt_skip: str = "off",
    wave_size: str = "fixed",
    rollout: str = "sync",
    agent: AgentModel | None = None,
) -> DemoResult:
    """Run the demo into ``out_dir`` and print the summary to ``stream`` (default stdout).

    With ``prompt_skip`` on, the same pool is also run without and with skipping at seeds ``seed``,
    ``seed + 1``, ``seed + 2`` (no sinks), and the summary prints the two side by side.
    """
    stream = stream or sys.stdout
    out = Path(out_dir)
    run_dir = out / "run"
    steps_path = run_dir / contract.STEPS_FILE_NAME
    from shopsim_metrics.sinks.jsonl import steps_files

    old_paths = steps_files(run_dir) if run_dir.is_dir() else []
    if old_paths and not (run_dir / DEMO_MARKER).is_file():
        raise DemoOutInUse(f"{run_dir} holds step records the demo did not write ({old_paths[0].name}); "
                           "the demo never deletes them: choose another --out")
    settings = {"steps": steps, "seed": seed, "prompt_skip": prompt_skip, "wave_size": wave_size,
                "rollout": rollout, "agent": agent is not None}
    if old_paths:
        replace_previous_demo(out, old_paths, stream)
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / DEMO_MARKER).write_text("step records written by `shopsim-metrics demo`: the next demo into "
                                       "this directory replaces them\n" + json.dumps(settings) + "\n",
                                       encoding="utf-8")
    config = demo_config(steps=steps, seed=seed, prompt_skip=prompt_skip, wave_size=wave_size, rollout=rollout,
                         agent=agent)

    from shopsim_metrics.settings import ShopsimSettings
    from shopsim_metrics.sinks.factory import build_sinks

    extra = {"shopsim_run_dir": str(run_dir), "shopsim_wandb": "standalone",
             "shopsim_wandb_project": WANDB_PROJECT}
    with _demo_environment(stream) as notes, _progress_logging(progress):
        sinks = build_sinks(ShopsimSettings.from_args(config.to_args(**extra)))
        wandb_sink = next((s for s in sinks if s.name == "wandb"), None)
        found: dict[str, Path] = {}
        bar = _progress_bar(steps, progress)

        def on_step(outcome: StepOutcome) -> None:
            if "wandb" not in found and wandb_sink is not None:
                run = wandb_sink.run  # resolved by the first record already
                if run is not None:
                    found["wandb"] = Path(run.dir).parent
            if bar is not None:  # the fully-async pool has no waves: nothing to show for them
                waves = {} if outcome.waves is None else {"waves": outcome.waves}
                bar.update(**waves, accepted=len(outcome.judged_ids))

        try:
            tally = RunTally(planned_steps=steps)
            tally.wanted.add(config.bursts[0].step)
            result = Simulator(config, sinks=sinks, extra_args=extra, keep_records=False,
                               tally=tally).run(progress=on_step)
        finally:
            if bar is not None:
                bar.close()
    dashboard = _write_dashboard(run_dir, out / "dashboard.html", stream)
    if config.prompt_pool:  # the pool as a launch's --prompt-data: `prompts --prompt-data` maps keys to its lines
        from shopsim_metrics.simulator.epochs import write_prompt_data

        write_prompt_data(out / PROMPT_DATA_FILE, config.prompt_pool)
    comparison = None
    if prompt_skip != "off":
        from shopsim_metrics.simulator.skipping.skip_saving import compare_skipping

        comparison = compare_skipping(config, prompt_skip, seeds=(seed, seed + 1, seed + 2))
    demo = DemoResult(out_dir=out, run_dir=run_dir, steps_path=steps_path, wandb_run_dir=found.get("wandb"),
                      dashboard_path=dashboard, burst_step=config.bursts[0].step, result=result, tally=tally,
                      skip_comparison=comparison)
    print_summary(demo, stream, notes=notes)
    return demo


def replace_previous_demo(out: Path, old_paths: list[Path], stream: TextIO) -> None:
    """Remove a previous demo's run from ``out`` and say so: its step records, its W&B offline runs under
    ``<out>/run/wandb`` (else they pile up, one per demo) and the files derived from it (:data:`DERIVED_FILES`),
    naming the settings it ran with; another ``--out`` keeps both."""
    import shutil

    run_dir = out / "run"
    before = _previous_settings(run_dir / DEMO_MARKER)
    wandb_runs = sorted(run_dir.glob("wandb/offline-run-*")) if (run_dir / "wandb").is_dir() else []
    derived = [out / name for name in DERIVED_FILES if (out / name).is_file()]
    for path in old_paths + derived:
        path.unlink()  # a fresh record: the previous demo's steps would mix with these
    for path in wandb_runs:
        shutil.rmtree(path, ignore_errors=True)
    removed = [p.name for p in old_paths] + ([f"{len(wandb_runs)} W&B offline run(s)"] if wandb_runs else [])
    removed += [p.name for p in derived]
    print(f"replacing the previous demo in {out}{f' ({before})' if before else ''}: removed {', '.join(removed)}; "
          "give another --out to keep both", file=stream)


def _previous_settings(marker: Path) -> str:
    """The settings a previous demo recorded in its marker, as ``key value`` text ("" when it recorded none).

    Example:
        >>> import tempfile
        >>> marker = Path(tempfile.mkdtemp()) / DEMO_MARKER
        >>> _ = marker.write_text('written by the demo\\n{"steps": 40, "prompt_skip": "off"}\\n')
        >>> _previous_settings(marker)
        'steps 40, prompt_skip off'
    """
    try:
        lines = marker.read_text(encoding="utf-8").splitlines()
        settings = json.loads(lines[1]) if len(lines) > 1 else {}
    except (OSError, ValueError):
        return ""
    if not isinstance(settings, dict):
        return ""
    return ", ".join(f"{key} {value}" for key, value in settings.items())


@contextlib.contextmanager
def _demo_environment(stream: TextIO) -> Iterator[list[str]]:
    """Offline and quiet W&B for the demo, unless the user chose otherwise; restored afterwards."""
    notes: list[str] = []
    chosen = {"WANDB_MODE": "offline", "WANDB_SILENT": "true"}
    saved = {key: os.environ.get(key) for key in chosen}
    for key, value in chosen.items():
        if saved[key] is None:
            os.environ[key] = value
            notes.append(f"{key}={value}")
    try:
        yield notes
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)


class _TqdmHandler(logging.Handler):
    def emit(self, record: logging.LogRecord) -> None:
        from tqdm import tqdm

        tqdm.write(self.format(record), file=sys.stderr)


@contextlib.contextmanager
def _progress_logging(enabled: bool) -> Iterator[None]:
    """The project's warnings (alerts) printed above the progress bar instead of through it."""
    if not enabled:
        yield
        return
    handler = _TqdmHandler(logging.WARNING)
    handler.setFormatter(logging.Formatter("%(levelname)s %(message)s"))
    propagate = logger.propagate
    logger.addHandler(handler)
    logger.propagate = False
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.propagate = propagate


def _progress_bar(total: int, enabled: bool) -> Progress | None:
    return Progress(total, unit="step", desc="simulated rollout steps") if enabled else None


def _write_dashboard(source: Path, out_path: Path, stream: TextIO) -> Path | None:
    try:
        from shopsim_metrics.dashboards.html import write_html_dashboard
    except ImportError as exc:
        print(f"dashboard skipped: the HTML renderer is not available ({exc})", file=stream)
        return None
    try:
        return write_html_dashboard(source, out_path, title="shopsim-metrics demo: simulated slime run")
    except Exception as exc:  # noqa: BLE001 - the run's records are written; say what failed and go on
        print(f"dashboard skipped: rendering failed ({type(exc).__name__}: {exc}); render it later with "
              f"`shopsim-metrics dashboard html {source}`", file=stream)
        return None


def _note(record: StepRecord, burst_step: int, alert_steps: dict[int, list[str]]) -> str:
    notes = []
    if record.rollout_id == burst_step:
        notes.append("failure burst")
    if (record.wave_count or 0) > 1:
        notes.append(f"{record.wave_count} waves")
    if record.carried_group_count:
        notes.append(f"{record.carried_group_count} carried")
    notes.extend(alert_steps.get(record.rollout_id, []))
    if record.terminated:
        notes.append("TERMINATED")
    return ", ".join(notes)


def format_steps_table(records: list[StepRecord], *, burst_step: int = -1, alert_steps: dict | None = None) -> str:
    """One line per step in the columns of ``inspect`` (:mod:`shopsim_metrics.readers.report`), with notes.

    Example:
        >>> rec = StepRecord(rollout_id=0, wave_count=2, accepted_group_count=40, train_group_count=16)
        >>> "2 waves" in format_steps_table([rec])
        True
    """
    from shopsim_metrics.readers.report import STEP_TABLE_LEGEND, STEP_TABLE_NAMES, format_step_table

    alert_steps = alert_steps or {}
    rows = [{name: getattr(r, name) for name in STEP_TABLE_NAMES} for r in records]
    lines = [format_step_table(rows, [_note(r, burst_step, alert_steps) for r in records])]
    lines.append(STEP_TABLE_LEGEND)
    return "\n".join(lines)


def format_cost(records: list[StepRecord]) -> str:
    """What dynamic sampling cost over the run: tokens, waste, wave time and the project's own time.

    ``filter_seconds / rollout_seconds`` is the project's overhead against slime's own rollout time
    (measured wall-clock in the hooks against simulated generation seconds in the demo). The demo's
    rollout and wave seconds come from the simulator's clock: they are labelled simulated.

    Example:
        >>> rec = StepRecord(rollout_id=0, generated_token_count=1000, train_token_count=800,
        ...                  rollout_seconds=40.0, filter_seconds=0.004, first_wave_fill_seconds=30.0,
        ...                  extra_wave_seconds=0.0)
        >>> print(format_cost([rec]))
        tokens per step: 1,000 generated, 800 trained on; wasted tokens 20.0% (samples: -)
        simulated seconds per step: 40.0 rollout, 30.0 first-wave fill, 0.0 in extra waves (0.0% of the rollout time)
        own time (measured): filter_seconds / simulated rollout_seconds = 0.0100% (4.0 ms per step)
    """
    steps = [r for r in records if not r.terminated] or list(records)
    if not steps:
        return "cost: no step recorded"
    n = len(steps)
    generated = sum(r.generated_token_count for r in steps)
    train = sum(r.train_token_count for r in steps)
    samples = sum(r.accepted_sample_count for r in steps)
    wasted_samples = f"{1 - sum(r.train_sample_count for r in steps) / samples:.1%}" if samples else "-"
    timed = [r for r in steps if r.rollout_seconds]
    rollout = sum(r.rollout_seconds for r in timed)
    own = sum(r.filter_seconds for r in timed)
    fill = sum(r.first_wave_fill_seconds or 0.0 for r in steps)
    extra = sum(r.extra_wave_seconds or 0.0 for r in steps)
    lines = [
        f"tokens per step: {generated / n:,.0f} generated, {train / n:,.0f} trained on; wasted tokens "
        f"{(1 - train / generated) if generated else 0.0:.1%} (samples: {wasted_samples})",
        f"simulated seconds per step: {rollout / max(len(timed), 1):.1f} rollout"
        + ("" if all(r.first_wave_fill_seconds is None for r in steps)  # the fully-async path has no waves
           else f", {fill / n:.1f} first-wave fill, {extra / n:.1f} in extra waves"
           + (f" ({sum(r.extra_wave_seconds or 0.0 for r in timed) / rollout:.1%} of the rollout time)" if rollout else "")),
        "own time (measured): filter_seconds / simulated rollout_seconds = "
        + (f"{own / rollout:.4%} ({own / len(timed) * 1000:.1f} ms per step)" if rollout else "- (no rollout time)"),
    ]
    return "\n".join(lines)


def print_summary(demo: DemoResult, stream: TextIO, *, notes: list[str] | None = None) -> None:
    """The table of steps, the wave / alert / termination highlights, and where everything is."""
    result, tally = demo.result, demo.tally
    records = tally.table_records()
    grouped: dict[tuple, int] = {}
    for alert in tally.alerts:
        key = (alert.rollout_id, alert.level, alert.title)
        grouped[key] = grouped.get(key, 0) + 1
    alert_steps: dict[int, list[str]] = {}
    for (step, level, _), count in grouped.items():
        alert_steps.setdefault(step, []).append(f"{level} alert" + (f" x{count}" if count > 1 else ""))
    print("", file=stream)
    print(format_steps_table(records, burst_step=demo.burst_step, alert_steps=alert_steps), file=stream)
    if len(records) < tally.steps:
        print(f"({len(records)} of {tally.steps} steps shown: the first, the burst and the last; every step: "
              f"shopsim-metrics inspect {demo.run_dir})", file=stream)
    print("", file=stream)
    listed = ", ".join(f"{step} ({waves} waves)" for step, waves in tally.multi_wave)
    if tally.multi_wave_count > len(tally.multi_wave):
        listed += f" and {tally.multi_wave_count - len(tally.multi_wave)} more"
    if result.config.rollout == "fully-async":
        stale = tally.staleness
        print(f"steps: {tally.steps} simulated in {result.wall_seconds:.1f} s of wall-clock time;  slime's fully-async "
              f"pool: {result.config.max_concurrent_groups} groups in flight, no waves", file=stream)
        if stale["trained"]:
            print(f"staleness: {stale['carried'] / stale['trained']:.0%} of the trained groups were carried from an "
                  f"earlier step; largest policy-version lag {stale['lag_max']}", file=stream)
    else:
        print(f"steps: {tally.steps} simulated in {result.wall_seconds:.1f} s of wall-clock time;  steps with more than "
              "one wave: " + (listed or "none"), file=stream)
    if tally.worst_streak is not None:
        streak, step = tally.worst_streak
        print(f"longest technical-failure streak: {streak} at step {step} (limit {tally.technical_failure_limit})",
              file=stream)
    persistence = tally.persistence_by_quarter()
    if any(p is not None for p in persistence):  # none: no prompt came back (the fully-async demo's fresh prompts)
        print("zero-std persistence, P(zero-std now | zero-std at the prompt's last visit), per quarter of the "
              "run: " + " -> ".join("-" if p is None else f"{p:.2f}" for p in persistence), file=stream)
    for (step, level, title), count in grouped.items():
        times = f" ({count} streaks)" if count > 1 else ""
        print(f"alert [{level}] step {step}: {title}{times}", file=stream)
    if tally.alert_count > len(tally.alerts):
        print(f"({tally.alert_count - len(tally.alerts)} more alerts not listed)", file=stream)
    if result.termination is not None:
        print(f"TERMINATED: {result.termination}", file=stream)
    else:
        print("not terminated: the streak stayed below the limit", file=stream)
    print(format_cost(records), file=stream)
    print(format_headline(tally.cost_totals, tally.steps), file=stream)
    agent = format_agent(tally.agent_totals, tally.causes, tally.tool_totals)
    if agent is not None:
        print(agent, file=stream)
    skipping = format_skipping(tally.skip_totals)
    if skipping is not None:
        print(skipping, file=stream)
    if demo.skip_comparison is not None:
        from shopsim_metrics.simulator.skipping.skip_saving import format_saving

        config = demo.result.config
        print(format_saving(demo.skip_comparison, config.over_sampling_batch_size,
                            wave_size=config.wave_size), file=stream)
    print("", file=stream)
    print(f"JSONL record:   {demo.steps_path}", file=stream)
    if demo.wandb_run_dir is not None:
        print(f"W&B run:        {demo.wandb_run_dir}  (offline)", file=stream)
        print(f"upload it with: wandb sync {demo.wandb_run_dir}", file=stream)
    else:
        print("W&B run:        none (W&B was unavailable; the JSONL record is complete)", file=stream)
    if demo.dashboard_path is not None:
        print(f"dashboard:      {demo.dashboard_path}", file=stream)
    if notes:
        print(f"(set for the demo: {', '.join(notes)})", file=stream)
