"""``shopsim-metrics replay TRACE``: what skipping and adaptive waves would have saved on this run.

TRACE is a JSON object ``{prompt_key: [success fraction per visit]}`` (with ``--n-samples-per-prompt``)
or a run directory / ``steps.jsonl`` of the project's records (best: a run without skipping). Every
rule (off, greso, predictive, and the oracle reference) is replayed with fixed and adaptive waves through
the simulator's slime loop (:mod:`shopsim_metrics.replay.measure`), and the figures pooled over the
seeds are printed as a table, or written as a list of rows with ``--json OUT``.

Example:
    >>> import contextlib, io, json, pathlib, tempfile
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "trace.json"
    >>> _ = path.write_text(json.dumps({str(i): [float(i % 2), 0.5, 0.25] * 3 for i in range(16)}))
    >>> parser = argparse.ArgumentParser(); register(parser.add_subparsers())
    >>> args = parser.parse_args(["replay", str(path), "--n-samples-per-prompt", "4", "--rollout-batch-size", "2",
    ...                           "--over-sampling-batch-size", "4", "--seeds", "1", "--no-progress"])
    >>> out = io.StringIO()
    >>> with contextlib.redirect_stdout(out):
    ...     _ = args.func(args)
    >>> print(out.getvalue().splitlines()[0])
    replay of ... 16 prompts, 144 visits (n = 4; zero-std 0.33); tokens: the token model (the trace records none), lengths by-outcome: ...
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
from pathlib import Path
from typing import Any

from shopsim_metrics.outcomes.groups import KEPT_ONLY, RECORD_EVERY_GROUP
from shopsim_metrics.outcomes.sources import SOURCE_HELP, add_dump_arguments, dump_options, load_outcomes
from shopsim_metrics.errors import check_output_file
from shopsim_metrics.replay.measure import (
    ORACLE, REPLAY_SETTINGS, REPLAY_SKIPS, ReplayKnobs, ReplayRow, default_steps, replay_rows,
)
from shopsim_metrics.replay.source import BY_OUTCOME, INDEPENDENT, LENGTH_MODES
from shopsim_metrics.outcomes.trace import Trace, TraceError
from shopsim_metrics.settings import WAVE_SIZE_MODES
from shopsim_metrics.settings.flags import add_setting_flags, given_settings
from shopsim_metrics.simulator.commands import (
    MAX_COUNT, MAX_STEPS, _positive_int, _probability, _step_count,
)
from shopsim_metrics.simulator.progress import Progress
from shopsim_metrics.tables import Column, format_table

LENGTH_TEXT = {BY_OUTCOME: "each group's from its own visit's outcome (more failures, longer answers), never from "
                           "the prompt's other visits",
               INDEPENDENT: "every group's from one distribution, whatever its outcome"}
"""What the output says of each length mode of the token model."""

PROGRESS_BYTES = 1 << 20
"""A trace file at least this large is read under a progress bar."""

JSON_DEFAULT_KNOBS = (16, 32)
"""``rollout_batch_size`` and ``over_sampling_batch_size`` of a JSON trace's replay unless given."""

_COLUMNS = (Column("skip", align="<"), Column("waves", align="<"), Column("tokens/inf.grp", spec=",.0f"),
            Column("vs off", spec=".2f"), Column("lost sig.", spec=".3f"), Column("P(2nd)", spec=".3f"),
            Column("aborted/step", spec=",.0f"), Column("skipped/step", spec=".1f"))

LEGEND = """\
skip, waves      the rule (off, greso, predictive; oracle: skips exactly the recorded zero-std visits, knowing the
                 future: a bound, not a rule) and the wave size (fixed: over_sampling_batch_size; adaptive: sized
                 to fill the batch)
tokens/inf.grp   every token generated, aborted generation included, per trained group with spread
vs off           off with fixed waves' tokens/inf.grp over this row's: 1.50 = a third fewer tokens per unit of signal
lost sig.        skipped draws whose recorded visit had spread, per informative trained group: signal forgone for
                 each unit trained (0.15 = 15 groups with spread not trained for every 100 trained)
P(2nd)           the share of steps that opened a second wave
aborted/step     tokens of the groups aborted when the batch filled, per step
skipped/step     draws skipped without generating, per step"""
"""What every column of the table means (printed under it)."""

MAX_LOST_SIGNAL = 0.15
"""``--best-within-lost-signal``'s default: the most signal a rule may forgo to be the best row (the benchmarks'
limit; not the guard's limit ``shopsim_prompt_skip_max_lost_signal``, whose flag is ``--prompt-skip-max-lost-signal``)."""

BEST_FLAG = "--best-within-lost-signal"
OLD_BEST_FLAG = "--max-lost-signal"
"""The best row's limit's former flag: it read as the guard's setting of the same name; accepted with a warning."""

PROGRESS_LINES = 50
"""Lines the progress prints into a log (not a terminal) over a replay: one every 2% of its steps."""

FEW_VISITS = 3.0
"""Prompts visited fewer times than this on average: too few for a prompt's history to matter (a warning)."""


def register(subparsers: Any) -> None:
    """Add ``replay`` to the CLI's subparsers."""
    replay = subparsers.add_parser(
        "replay", help="what skipping prompts and adaptive waves would have saved on a run's recorded outcomes",
        description="Replay recorded per-prompt outcomes through the simulated slime loop with every skip rule "
                    "(off, greso, predictive, and the oracle that skips exactly the recorded zero-std visits) and "
                    "fixed and adaptive waves; print total tokens per informative trained group (aborted "
                    "generation included) against off, the signal lost (skipped draws whose recorded visit was "
                    "informative, per informative trained group), P(second wave) and aborted tokens per step, "
                    "pooled over seeds. A draw gets its prompt's visit nearest in training time (steps, not epochs).")
    replay.add_argument("trace", help=SOURCE_HELP + " (best: a run without skipping)")
    replay.add_argument("--n-samples-per-prompt", type=_positive_int, metavar="N",
                        help="a JSON trace's group size: each fraction is successes out of N (required for JSON)")
    replay.add_argument("--rollout-batch-size", type=_positive_int,
                        help="default: the run's own, or 16 for a JSON trace")
    replay.add_argument("--over-sampling-batch-size", type=_positive_int,
                        help="fixed waves' size and adaptive waves' cap (default: the run's own, or 32 for a JSON "
                             "trace)")
    replay.add_argument("--steps", type=_step_count,
                        help="steps to replay (default: the run's own; for a JSON trace, as many as draw each "
                             "prompt about as often as it was visited without skipping)")
    replay.add_argument("--seeds", type=_positive_int, default=3, help="seeds to pool over (default: 3)")
    replay.add_argument("--prompt-skip", nargs="+", choices=REPLAY_SKIPS, default=list(REPLAY_SKIPS),
                        help="the rules to replay (default: all; off with fixed waves always runs: the baseline)")
    replay.add_argument("--wave-size", nargs="+", choices=WAVE_SIZE_MODES, default=list(WAVE_SIZE_MODES),
                        help="the wave sizes to replay (default: both)")
    add_setting_flags(replay, REPLAY_SETTINGS)
    replay.add_argument(BEST_FLAG, type=_probability, default=None, metavar="LOST_SIGNAL", dest="best_within",
                        help=f"the best row is the largest saving at most this lost signal (default {MAX_LOST_SIGNAL}, "
                             "the benchmarks' limit; the guard's own limit, the setting "
                             "shopsim_prompt_skip_max_lost_signal, is --prompt-skip-max-lost-signal)")
    replay.add_argument(OLD_BEST_FLAG, type=_probability, default=None, dest="old_best_within",
                        help=argparse.SUPPRESS)
    replay.add_argument("--lengths", choices=LENGTH_MODES, default=BY_OUTCOME,
                        help="without recorded tokens, the token model's lengths: by-outcome (default: a group's "
                             "from its own visit's outcome, longer when it fails more) or independent (one "
                             "distribution for every group); neither reads a prompt's other visits")
    add_dump_arguments(replay)
    replay.add_argument("--json", metavar="OUT", help="also write the rows as a JSON list to OUT")
    replay.add_argument("--no-progress", action="store_true", help="no progress bar")
    replay.set_defaults(func=_replay)


def knobs_for(trace: Trace, args: argparse.Namespace) -> ReplayKnobs:
    """The replay's knobs: the flags, else the recorded run's, else :data:`JSON_DEFAULT_KNOBS`; one line (a
    :class:`TraceError`) for knobs slime refuses or a replay cannot run: a wave of more than
    :data:`~shopsim_metrics.simulator.commands.MAX_COUNT` samples, more than
    :data:`~shopsim_metrics.simulator.commands.MAX_STEPS` steps (a record at rollout_id 10^12)."""
    run = trace.run
    rollout_batch_size = args.rollout_batch_size or (run and run.rollout_batch_size) or JSON_DEFAULT_KNOBS[0]
    over = (args.over_sampling_batch_size or (run and run.over_sampling_batch_size)
            or max(JSON_DEFAULT_KNOBS[1], rollout_batch_size))
    if over < rollout_batch_size:
        raise TraceError(f"--over-sampling-batch-size ({over}) must be at least --rollout-batch-size "
                         f"({rollout_batch_size}), as slime requires")
    if trace.n_samples * over > MAX_COUNT:
        raise TraceError(f"n_samples_per_prompt {trace.n_samples:,} x over_sampling_batch_size {over:,} = "
                         f"{trace.n_samples * over:,} samples per wave: a replay simulates at most {MAX_COUNT:,} "
                         "samples per wave")
    steps = args.steps or default_steps(trace, over)
    if steps > MAX_STEPS:
        reach = f"the records reach rollout_id {run.steps - 1:,}" if run is not None else "the trace's visits ask for"
        raise TraceError(f"{reach}: {steps:,} steps, more than the {MAX_STEPS:,} a replay runs; replay fewer with "
                         "--steps N")
    return ReplayKnobs(rollout_batch_size=rollout_batch_size, over_sampling_batch_size=over, steps=steps,
                       settings=given_settings(args, REPLAY_SETTINGS), lengths=args.lengths)


def wave_origin(trace: Trace, args: argparse.Namespace) -> str:
    """Where the replay's ``over_sampling_batch_size`` comes from, as printed beside it.

    Example:
        >>> from shopsim_metrics.outcomes.trace import trace_from_mapping
        >>> wave_origin(trace_from_mapping({"a": [0.5]}, 2), argparse.Namespace(over_sampling_batch_size=None))
        "a JSON trace's default: pass the run's --over-sampling-batch-size"
    """
    if args.over_sampling_batch_size:
        return "--over-sampling-batch-size"
    run = trace.run
    if run is None:
        return "a JSON trace's default: pass the run's --over-sampling-batch-size"
    if run.over_sampling_batch_size is None:
        unknown = run.wave_origin if run.wave_origin.startswith("unknown") else (
            "the run's is not recorded: pass its --over-sampling-batch-size")
        return f"assumed; {unknown}"
    return run.wave_origin


def check_rules(trace: Trace, knobs: ReplayKnobs, skips: list[str]) -> None:
    """Raise, before any replay work, the error a rule would raise at its first replayed step: the predictive
    rule's at the trace's group size (a threshold not above the chance of a zero-std group of ``n``; ``n`` 1)."""
    if "predictive" not in skips:
        return
    from shopsim_metrics.prompts.predictive_rule import PredictiveSkipRule
    from shopsim_metrics.settings import ShopsimSettings

    settings = ShopsimSettings.from_args(knobs.config(trace, "predictive", "fixed").to_args()).prompt_skip_rule
    try:
        PredictiveSkipRule(settings, n_samples=trace.n_samples)
    except ValueError as exc:
        raise TraceError(f"{trace.origin}: groups of {trace.n_samples}: the predictive rule cannot run: {exc} (here: "
                         "--prompt-skip-threshold; or replay the other rules: --prompt-skip off greso oracle)") from None


def format_rows(rows: list[ReplayRow], best_within: float = MAX_LOST_SIGNAL, *,
                kept_only_share: float | None = None) -> str:
    """The table, its legend, then the best rule within ``best_within`` (lost signal) beside the oracle; for a kept-only dump
    (``kept_only_share``: its zero-std share), the bias instead of a best row (:func:`kept_only_line`)."""
    table = format_table(_COLUMNS, [[r.prompt_skip, r.wave_size, r.tokens_per_informative_group, r.ratio_vs_off,
                                     r.lost_signal_per_informative, r.p_second_wave, r.aborted_tokens_per_step,
                                     r.skipped_per_step] for r in rows], rule=True)
    verdict = best_line(rows, best_within) if kept_only_share is None else kept_only_line(kept_only_share)
    return "\n".join([table, LEGEND, verdict])


def kept_only_line(zero_std_share: float) -> str:
    """What a replay of a kept-only dump says in place of a best row: the bias, and how to judge skipping.

    Example:
        >>> print(kept_only_line(0.0))
        no best row (--kept-only): the dump holds only the groups the dynamic filter kept, so the trace's zero-std share is 0.00 where the run's was higher and its extra waves are missing; every row's saving is understated and its lost signal overstated, by an amount the dump cannot tell; to judge skipping, record every group with the project's hooks (--rollout-all-samples-process-path shopsimrl.slime_runtime.record_all_samples, docs §1.1) and replay the run directory
    """
    return (f"no best row (--kept-only): the dump holds only the groups the dynamic filter kept, so the trace's "
            f"zero-std share is {zero_std_share:.2f} where the run's was higher and its extra waves are missing; "
            "every row's saving is understated and its lost signal overstated, by an amount the dump cannot tell; "
            f"to judge skipping, {RECORD_EVERY_GROUP}")


def best_line(rows: list[ReplayRow], best_within: float) -> str:
    """The largest saving of a rule (not the oracle, not off with fixed waves) at a lost signal of at most
    ``best_within``; or that none saves within it, and what the rows beyond it would cost.

    Example:
        >>> row = lambda skip, wave, ratio, lost: ReplayRow(skip, wave, 1.0, ratio, lost, 0.0, 0.0, 0.0, 1, 1, [0], "x")
        >>> print(best_line([row("off", "fixed", 1.0, 0.0), row("greso", "adaptive", 1.6, 0.22),
        ...                  row("predictive", "adaptive", 1.4, 0.08), row("oracle", "adaptive", 2.3, 0.0)], 0.15))
        best within a lost signal of 0.15 (--best-within-lost-signal): predictive with adaptive waves, 1.40x fewer tokens per informative trained group than off with fixed waves, at a lost signal of 0.080 (the oracle: 2.30x; beyond the limit: greso/adaptive 1.60x at 0.220)
        >>> print(best_line([row("off", "fixed", 1.0, 0.0), row("greso", "fixed", 0.9, 0.3)], 0.15))
        nothing saves tokens within a lost signal of 0.15 (--best-within-lost-signal): keep skipping off and fixed waves (beyond the limit: greso/fixed 0.90x at 0.300)
    """
    candidates = [r for r in rows if r.prompt_skip != ORACLE and r.ratio_vs_off is not None
                  and (r.prompt_skip, r.wave_size) != ("off", "fixed")]
    within = [r for r in candidates if r.lost_signal_per_informative <= best_within]
    beyond = [r for r in candidates if r.lost_signal_per_informative > best_within]
    oracle = [r.ratio_vs_off for r in rows if r.prompt_skip == ORACLE and r.ratio_vs_off is not None]
    limit = f"within a lost signal of {best_within:g} ({BEST_FLAG})"
    extra = ([f"the oracle: {max(oracle):.2f}x"] if oracle else []) + (
        ["beyond the limit: " + ", ".join(f"{r.prompt_skip}/{r.wave_size} {r.ratio_vs_off:.2f}x at "
                                          f"{r.lost_signal_per_informative:.3f}"
                                          for r in sorted(beyond, key=lambda r: -(r.ratio_vs_off or 0.0))[:2])]
        if beyond else [])
    tail = f" ({'; '.join(extra)})" if extra else ""
    best = max(within, key=lambda r: r.ratio_vs_off or 0.0, default=None)
    if best is None or round(best.ratio_vs_off or 0.0, 2) <= 1.0:  # "1.00x fewer" saves nothing
        return f"nothing saves tokens {limit}: keep skipping off and fixed waves{tail}"
    return (f"best {limit}: {best.prompt_skip} with {best.wave_size} waves, {best.ratio_vs_off:.2f}x fewer tokens "
            f"per informative trained group than off with fixed waves, at a lost signal of "
            f"{best.lost_signal_per_informative:.3f}{tail}")


def few_visits_warning(trace: Trace) -> str | None:
    """A warning when prompts were visited too few times for their history to matter (None otherwise).

    Example:
        >>> from shopsim_metrics.outcomes.trace import trace_from_mapping
        >>> print(few_visits_warning(trace_from_mapping({"a": [0.0, 0.0], "b": [0.5]}, 2)))
        warning: prompts were visited 1.5 times each on average (1 of 2 only once): a rule skips a prompt on what its earlier visits showed, so at most 33% of the draws had a past to judge by, and one zero-std visit is weak evidence; the savings above come mostly from the waves, and a run of more epochs may skip more (or forgo more signal)
        >>> few_visits_warning(trace_from_mapping({"a": [0.0] * 3}, 2)) is None
        True
    """
    mean = trace.visit_count / len(trace.prompts)
    if mean >= FEW_VISITS:
        return None
    once = sum(1 for visits in trace.visits if len(visits) == 1)
    return (f"warning: prompts were visited {mean:.1f} times each on average ({once} of {len(trace.prompts)} only "
            f"once): a rule skips a prompt on what its earlier visits showed, so at most {1 - 1 / mean:.0%} of the "
            "draws had a past to judge by, and one zero-std visit is weak evidence; the savings above come mostly "
            "from the waves, and a run of more epochs may skip more (or forgo more signal)")


def describe(trace: Trace, knobs: ReplayKnobs, seeds: tuple[int, ...], origin: str = "") -> str:
    """What is replayed, at which knobs (``origin``: where the wave size comes from, :func:`wave_origin`), and
    where the tokens come from."""
    tokens = ("the recorded response tokens" if trace.tokens_recorded
              else f"the token model (the trace records none), lengths {knobs.lengths}: {LENGTH_TEXT[knobs.lengths]}")
    return (f"replay of {trace.origin}: {len(trace.prompts)} prompts, {trace.visit_count} visits "
            f"(n = {trace.n_samples}; zero-std {trace.zero_std_share:.2f}); tokens: {tokens}\n"
            + "".join(f"note: {note}\n" for note in trace.notes) +
            f"rollout_batch_size {knobs.rollout_batch_size}, over_sampling_batch_size "
            f"{knobs.over_sampling_batch_size}" + (f" ({origin})" if origin else "") +
            f", {knobs.steps} steps, seeds {', '.join(map(str, seeds))}; each draw "
            f"gets its prompt's visit nearest in training time; figures pooled over the seeds")


def best_within_lost_signal(args: argparse.Namespace) -> float:
    """The best row's limit: ``--best-within-lost-signal``, or the former ``--max-lost-signal`` with a warning (it
    read as the guard's setting); both given is an error.

    Example:
        >>> best_within_lost_signal(argparse.Namespace(best_within=None, old_best_within=None))
        0.15
    """
    if args.old_best_within is None:
        return MAX_LOST_SIGNAL if args.best_within is None else args.best_within
    if args.best_within is not None:
        raise TraceError(f"{OLD_BEST_FLAG} and {BEST_FLAG} both given: {OLD_BEST_FLAG} is the former name of "
                         f"{BEST_FLAG}; pass only {BEST_FLAG}")
    print(f"warning: {OLD_BEST_FLAG} is deprecated, read as {BEST_FLAG} {args.old_best_within:g} (the best row's "
          f"limit, default {MAX_LOST_SIGNAL}); the guard's limit, the setting shopsim_prompt_skip_max_lost_signal, "
          "is --prompt-skip-max-lost-signal", file=sys.stderr)
    return float(args.old_best_within)


def _read_with_progress(args: argparse.Namespace) -> Trace:
    """The trace, with a bar over the bytes of a JSON trace from its first byte (a big one takes minutes)."""
    size = os.path.getsize(args.trace) if os.path.isfile(args.trace) else 0
    if args.no_progress or size < PROGRESS_BYTES:
        return load_outcomes(args.trace, n_samples=args.n_samples_per_prompt, options=dump_options(args))
    with Progress(size, unit="byte", desc=f"reading {args.trace}") as bar:
        return load_outcomes(args.trace, n_samples=args.n_samples_per_prompt, options=dump_options(args),
                             on_read=bar.update)


def _replay(args: argparse.Namespace) -> int:
    if args.json:
        check_output_file(args.json, "--json")  # before the replay, not after it
    best_within = best_within_lost_signal(args)
    trace = _read_with_progress(args)
    if trace.run is None and args.n_samples_per_prompt is None:
        raise TraceError("a JSON trace needs --n-samples-per-prompt N")
    knobs = knobs_for(trace, args)
    seeds = tuple(range(args.seeds))
    skips, waves = list(dict.fromkeys(args.prompt_skip)), list(dict.fromkeys(args.wave_size))
    check_rules(trace, knobs, skips)
    print(describe(trace, knobs, seeds, wave_origin(trace, args)), flush=True)
    settings = 1 + sum(1 for s in skips for w in waves if (s, w) != ("off", "fixed"))
    with (contextlib.nullcontext() if args.no_progress else
          Progress(settings * len(seeds) * knobs.steps, unit="step", desc="replayed steps",
                   parts=PROGRESS_LINES)) as bar:
        rows = replay_rows(trace, knobs, seeds=seeds, skips=skips, waves=waves,
                           progress=(lambda setting: bar.update(setting=setting)) if bar is not None else None)
    kept_only = trace.zero_std_share if args.dump_holds == KEPT_ONLY else None
    print(format_rows(rows, best_within, kept_only_share=kept_only))
    for line in (few_visits_warning(trace), *(("the figures above are biased (--kept-only): see the note at the "
                                              "top",) if kept_only is not None else ())):
        if line:
            print(line)
    if args.json:
        Path(args.json).write_text(json.dumps([row.to_dict() for row in rows], indent=1) + "\n")
        print(f"rows written to {args.json}", file=sys.stderr)
    return 0
