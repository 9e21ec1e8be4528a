"""Which reader a path needs, and the options every command that reads a run's outcomes shares.

``replay``, ``prompts`` and ``dashboard html`` take any of: a JSON trace, a run directory or
``steps.jsonl`` of this package's records, slime's rollout dumps (``.pt``: a file, a directory, a
``--dump-details`` directory or a glob) and verl's (``{step}.jsonl``: a directory, a file or a glob).
:func:`source_kind` tells them apart by what is there; :func:`load_outcomes` reads any into a trace.

Example:
    >>> import argparse
    >>> parser = argparse.ArgumentParser(); add_dump_arguments(parser)
    >>> dump_options(parser.parse_args(["--kept-only", "--reward-key", "acc"]))
    DumpOptions(holds='kept-only', prompt_key=None, reward_key='acc', success_threshold=1.0, success_key='shopsim_success')
    >>> source_kind("run/steps.jsonl"), source_kind("dump/rollout_*.pt"), source_kind("out/12.jsonl")
    ('records', 'slime', 'verl')
"""

from __future__ import annotations

import argparse
import glob
import os
from pathlib import Path
from typing import Any, Callable

from shopsim_metrics.outcomes.groups import KEPT_ONLY, WHOLE_RUN, DumpError, DumpOptions
from shopsim_metrics.outcomes.verl import STEP_FILE
from shopsim_metrics.outcomes.trace import Trace, TraceError, load_trace

SLIME, VERL, RECORDS, JSON_TRACE = "slime", "verl", "records", "json"
DUMP_KINDS = (SLIME, VERL)

SOURCE_HELP = ("a run's outcomes: a run directory or steps.jsonl of shopsim-metrics records; slime's rollout dumps "
               "(--save-debug-rollout-data .pt files: one, a directory, a --dump-details directory or a quoted glob); "
               "verl's trainer.rollout_data_dir ({step}.jsonl files); or a JSON trace {prompt_key: [success "
               "fraction per visit]}")


def source_kind(path: str | os.PathLike) -> str:
    """``slime``, ``verl``, ``records`` or ``json``: what ``path`` holds, by its name and what is in it."""
    text = os.fspath(path)
    target = Path(text)
    if target.is_dir():
        if (target / "steps.jsonl").exists():
            return RECORDS
        if any(target.glob("*.pt")) or any((target / "rollout_data").glob("*.pt")):
            return SLIME
        if any(STEP_FILE.match(f.name) for f in target.iterdir()):
            return VERL
        return RECORDS
    matched = [Path(p).name for p in glob.glob(text)] if glob.has_magic(text) and not target.exists() else []
    names = matched or [target.name]
    if names and all(name.endswith(".pt") for name in names):
        return SLIME
    if names and all(STEP_FILE.match(name) for name in names):
        return VERL
    return RECORDS if target.name.endswith(".jsonl") else JSON_TRACE


def load_outcomes(path: str | os.PathLike, *, n_samples: int | None = None,
                  options: DumpOptions | None = None, on_read: Callable[[int], None] | None = None) -> Trace:
    """The trace of any source (module docstring); ``options`` read a dump (and only a dump); ``on_read(n)``
    after each ``n`` bytes of a JSON trace read (:func:`~shopsim_metrics.outcomes.trace.load_trace`)."""
    options = options or DumpOptions(None)
    kind = source_kind(path)
    check_not_above_dumps(path, kind)
    if kind in DUMP_KINDS and n_samples is not None:
        raise DumpError(f"{os.fspath(path)}: --n-samples-per-prompt is a JSON trace's group size; {kind}'s dump "
                        "has its own (its groups' size): leave the flag out")
    if kind == SLIME:
        from shopsim_metrics.outcomes.slime import read_slime_dump

        return read_slime_dump(path, options)
    if kind == VERL:
        from shopsim_metrics.outcomes.verl import read_verl_dump

        return read_verl_dump(path, options)
    refuse_dump_options(path, options)
    trace = load_trace(path, n_samples, on_read)
    if trace.run is not None and n_samples is not None and n_samples != trace.n_samples:
        raise TraceError(f"{os.fspath(path)}: --n-samples-per-prompt {n_samples} is a JSON trace's group size; the "
                         f"records say their own ({trace.n_samples}): leave the flag out")
    return trace


def dumps_below(path: str | os.PathLike) -> list[str]:
    """The directories right below ``path`` that hold a dump (slime's or verl's), named with their kind.

    Example:
        >>> import tempfile, pathlib
        >>> top = pathlib.Path(tempfile.mkdtemp()); (top / "run1").mkdir(); _ = (top / "run1" / "3.jsonl").write_text("")
        >>> [name.replace(str(top), "TOP") for name in dumps_below(top)]
        ["TOP/run1 (verl's)"]
    """
    try:
        subs = sorted(sub for sub in Path(path).iterdir() if sub.is_dir())
    except OSError:
        return []
    return [f"{sub} ({kind}'s)" for sub in subs if (kind := source_kind(sub)) in DUMP_KINDS]


def check_not_above_dumps(path: str | os.PathLike, kind: str) -> None:
    """A directory without records whose subdirectories hold dumps (the parent of a run's dump directories):
    one line naming them, not "this is this package's records" or a missing steps.jsonl."""
    target = Path(path)
    if kind != RECORDS or not target.is_dir() or any(target.glob("steps*.jsonl")):
        return
    below = dumps_below(target)
    if below:
        raise DumpError(f"{os.fspath(path)}: no dump and no records here (no .pt, {{step}}.jsonl or steps.jsonl "
                        f"file), but the directories below it hold dumps: {', '.join(below[:3])}"
                        f"{' ...' if len(below) > 3 else ''}; give one of them")


def refuse_dump_options(path: str | os.PathLike, options: DumpOptions) -> None:
    """A dump's ``--whole-run`` / ``--kept-only`` given for a source that is not a dump: one line, not ignored."""
    if options.holds is not None:
        what = "this package's records" if source_kind(path) == RECORDS else "a JSON trace"
        raise DumpError(f"{os.fspath(path)}: --{options.holds} is for a framework's dump (slime's or verl's); this "
                        f"is {what}, which holds every group")


def add_dump_arguments(parser: Any) -> None:
    """The options of reading a framework's dump (what it holds; the filter's keys, rewards and success)."""
    holds = parser.add_mutually_exclusive_group()
    holds.add_argument("--whole-run", dest="dump_holds", action="store_const", const=WHOLE_RUN,
                       help="a framework's dump of a run WITHOUT a dynamic filter: it holds every group trained "
                            "(slime's and verl's dumps do not say; one of these two is required for them)")
    holds.add_argument("--kept-only", dest="dump_holds", action="store_const", const=KEPT_ONLY,
                       help="a framework's dump of a run WITH a dynamic filter: only the kept groups (the figures "
                            "are biased, and the output says how)")
    parser.add_argument("--prompt-key", metavar="KEY",
                        help="a dump's metadata key (verl: column) naming the prompt across steps (default: the "
                             "prompt's hash, as shopsim_prompt_key unset)")
    parser.add_argument("--reward-key", metavar="KEY",
                        help="a dump's key of a dict reward (slime's --reward-key; verl: the column, default score)")
    parser.add_argument("--success-threshold", type=_finite, default=1.0,
                        help="a dump's rollout succeeds when its reward >= this (default 1.0, as "
                             "shopsim_success_threshold), unless its metadata flag says")
    parser.add_argument("--success-key", default="shopsim_success", metavar="KEY",
                        help="the metadata flag that decides success when present (default shopsim_success)")


def dump_options(args: argparse.Namespace) -> DumpOptions:
    """The :class:`DumpOptions` of :func:`add_dump_arguments`' flags."""
    return DumpOptions(holds=args.dump_holds, prompt_key=args.prompt_key, reward_key=args.reward_key,
                       success_threshold=args.success_threshold, success_key=args.success_key)


def _finite(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if value != value or value in (float("inf"), float("-inf")):
        raise argparse.ArgumentTypeError(f"expected a finite number; got {text!r}")
    return value
