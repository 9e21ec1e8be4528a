"""``shopsim-metrics preflight -- <train.py arguments>``: check a slime launch before any GPU starts.

slime loads the hook paths lazily, at the first rollout, after the engines started and the weights
were synced; it applies the ``--custom-config-path`` YAML unchecked. So a typo in a hook path, a
package missing from the image or slime's W&B incompatibility would cost a GPU start. This takes
the arguments ``train.py`` takes and checks, without starting anything:

- each hook path imports (as slime's ``load_function`` loads it: ``import_module`` of the part
  before the last dot, then the attribute) and names a callable that accepts slime's call; the
  all-samples hook and the log function are set when the project's filter is (without the log
  function no record is ever written); ``--data-source-path`` names a class built as ``cls(args)``;
- ``--custom-config-path`` exists and passes ``check-config``;
- slime's own constraints on the knobs the project relies on;
- ``--use-wandb`` without ``--disable-wandb-random-suffix`` when wandb lacks ``wandb.util.generate_id``;
- where the records will go: an unwritable place is a problem; a relative one, or none because
  ``--save`` is absent, is a warning (the hooks run in a Ray actor on whatever node Ray picks);
- the loop the launch is for (``--loop``, else the one installed: :func:`~shopsim_metrics.settings.loops.detect_loop`):
  for miles (slime's production fork, docs/miles.md), instead of slime's flag and fully-async checks, what the hooks
  cannot honour in miles (:func:`~shopsim_metrics.settings.loops.unsupported`), ``--rollout-sample-hook-path``
  (miles has no such flag) and the token counter (:func:`check_miles_launch`).

Exit 0 with a short summary when sound (warnings included); one line per problem and exit 2
otherwise. Every line starts ``shopsim-metrics preflight:``; never a traceback.

Example:
    >>> report = preflight(["--rollout-batch-size", "16", "--over-sampling-batch-size", "8"])
    >>> report.problems
    ['--over-sampling-batch-size: 8 is smaller than --rollout-batch-size 16 (slime requires over_sampling_batch_size >= rollout_batch_size)']
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import os
import sys
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any


from shopsim_metrics.settings import DEFAULT_RUN_DIR, SAVE_SUBDIR, validate_settings
from shopsim_metrics.settings.check import check_file, read_config
from shopsim_metrics.settings.slime_flags import SLIME_FLAGS, closest_slime_flag, is_slime_flag, slime_parser_flags
from shopsim_metrics.record.contract import (ASYNC_ROLLOUT_PATH, DATA_SOURCE_PATH, MILES_GENERATE_PATH, SAMPLE_HOOK_PATH,
                                             SLIME_ASYNC_ROLLOUT_PATH)
from shopsim_metrics.settings.loops import (LOOPS, MILES, LoopUnknown, detect_loop, miles_settings_unsupported,
                                            unsupported)

PROJECT_FILTER_MODULE = "shopsimrl."
"""Hook paths of this project start here (its filter needs its all-samples hook and log function)."""

HOOK_CALLS: dict[str, tuple[str, ...]] = {
    "--dynamic-sampling-filter-path": ("args", "samples"),
    "--rollout-all-samples-process-path": ("args", "all_groups", "data_source"),
    "--custom-rollout-log-function-path": ("rollout_id", "args", "samples", "rollout_extra_metrics", "rollout_time"),
}
"""The positional arguments slime calls each hook with."""

SAMPLE_HOOK_CALL = ("args", "sample")
"""How slime calls each ``--rollout-sample-hook-path`` hook (``rollout_id`` and ``evaluation`` by keyword, if taken)."""


@dataclass
class PreflightReport:
    """What a preflight found: problems (exit 2), warnings and the summary of what was checked."""

    problems: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    checked: list[str] = field(default_factory=list)


def launch_parser() -> argparse.ArgumentParser:
    """The ``train.py`` flags the project relies on; every other flag is let through unread."""
    parser = argparse.ArgumentParser(prog="train.py", add_help=False, allow_abbrev=False)
    for flag in HOOK_CALLS:
        parser.add_argument(flag, default=None)
    parser.add_argument("--data-source-path", default=None)
    parser.add_argument("--rollout-function-path", default=None)
    parser.add_argument("--rollout-sample-hook-path", default=None)
    parser.add_argument("--custom-generate-function-path", default=None)
    parser.add_argument("--fully-async", action="store_true")  # miles' own fully-async rollout
    parser.add_argument("--rollout-submission-granularity", default=None)  # miles
    parser.add_argument("--custom-config-path", default=None)
    for flag in ("--rollout-batch-size", "--n-samples-per-prompt", "--over-sampling-batch-size",
                 "--global-batch-size", "--num-steps-per-rollout"):
        parser.add_argument(flag, default=None)
    parser.add_argument("--save", default=None)
    parser.add_argument("--use-wandb", action="store_true")
    parser.add_argument("--disable-wandb-random-suffix", action="store_true")
    return parser


def preflight(argv: list[str], *, environ: dict[str, str] | None = None, loop: str | None = None) -> PreflightReport:
    """Check a ``train.py`` command line (see the module docstring) for ``loop`` (None: the one installed);
    never raises for what it is given."""
    env = os.environ if environ is None else environ
    report = PreflightReport()
    if not argv:  # nothing to check: the one error, and no warning about defaults nobody chose
        report.problems.append("no train.py arguments given: pass the launch's arguments after `--` "
                               "(shopsim-metrics preflight -- --rollout-batch-size 16 ...)")
        return report
    if loop is None:
        try:
            loop = detect_loop()
        except LoopUnknown as exc:
            report.problems.append(f"{str(exc).removeprefix('shopsim-metrics: ')} (or say which with --loop)")
            return report
    launch, _ = launch_parser().parse_known_args(argv)
    launch.sample_hook_paths = _every_value(argv, "--rollout-sample-hook-path")  # slime's flag may be repeated
    _check_hooks(launch, report)
    settings = _check_config(launch, report)
    _check_knobs(launch, report)
    if loop != MILES:  # slime's W&B incompatibility
        _check_wandb(launch, report)
    _check_run_dir(launch, settings, env, report)
    if loop == MILES:
        check_miles_launch(argv, launch, settings, report)
        return report
    check_fully_async(argv, launch, report)
    check_launch_shape(argv, launch, settings, report)
    return report


def check_miles_launch(argv: list[str], launch: argparse.Namespace, settings: dict[str, Any],
                       report: PreflightReport) -> None:
    """A miles launch (docs/miles.md): what the hooks cannot honour in miles, one problem each; the slime-only
    ``--rollout-sample-hook-path`` (miles' parser stops the launch at it); the token counter and what it wraps.

    Example:
        >>> r = PreflightReport()
        >>> check_miles_launch(["--fully-async"], launch_parser().parse_known_args(["--fully-async"])[0], {}, r)
        >>> r.problems[0].startswith("miles' --fully-async: not supported by shopsim-metrics")
        True
    """
    report.checked.append("loop: miles (its DynamicFilterOutput has no keep_when_insufficient: the filter decides "
                          "the fallback; no live rollout id: steps are counted and renumbered by the log function)")
    report.problems += unsupported(MILES, launch) + miles_settings_unsupported(settings)
    if launch.rollout_sample_hook_path:
        report.problems.append(f"--rollout-sample-hook-path: miles has no such flag (its parser stops the launch); "
                               f"count every token with --custom-generate-function-path {MILES_GENERATE_PATH}")
    filter_path = getattr(launch, _dest("--dynamic-sampling-filter-path")) or ""
    generate = launch.custom_generate_function_path
    if filter_path.startswith(PROJECT_FILTER_MODULE) and generate != MILES_GENERATE_PATH:
        wrap = f" and put {generate} in shopsim_generate_function_path" if generate else ""
        report.warnings.append(f"--custom-generate-function-path: not {MILES_GENERATE_PATH}: total_token_count, "
                               "aborted_token_count and tokens_per_informative_group stay null (miles has no sample "
                               f"hook; set it{wrap})")
    inner = settings.get("shopsim_generate_function_path")
    if generate == MILES_GENERATE_PATH and inner:
        try:
            load_function(inner)
        except Exception as exc:  # noqa: BLE001 - whatever the import raises is the user's problem to see
            report.problems.append(f"shopsim_generate_function_path: {inner} does not load ({type(exc).__name__}: "
                                   f"{exc})")
        else:
            report.checked.append(f"--custom-generate-function-path {MILES_GENERATE_PATH} wrapping {inner}")


def _check_hooks(launch: argparse.Namespace, report: PreflightReport) -> None:
    paths = {flag: getattr(launch, _dest(flag)) for flag in HOOK_CALLS}
    for flag, path in paths.items():
        if path:
            problem = _check_callable(path, HOOK_CALLS[flag])
            if problem:
                report.problems.append(f"{flag}: {problem}")
            else:
                report.checked.append(f"{flag} {path}")
    filter_path = paths["--dynamic-sampling-filter-path"]
    if filter_path and filter_path.startswith(PROJECT_FILTER_MODULE) and launch.rollout_function_path != ASYNC_ROLLOUT_PATH:
        for flag, lost in (("--custom-rollout-log-function-path", "no step record is ever written"),
                           ("--rollout-all-samples-process-path",
                            "success_rate and reward_mean cover only what the filter judged")):
            if not paths[flag]:
                report.problems.append(f"{flag}: not set, but the filter is {filter_path}: without it {lost} "
                                       f"(set it to {filter_path.rpartition('.')[0]}.{_PROJECT_HOOK_NAMES[flag]})")
    for path in sample_hook_paths(launch):  # slime loads each at every generate call: a typo fails then
        problem = _check_callable(path, SAMPLE_HOOK_CALL)
        if problem:
            report.problems.append(f"--rollout-sample-hook-path: {problem}")
        else:
            report.checked.append(f"--rollout-sample-hook-path {path}")
    if launch.data_source_path:
        problem = _check_class(launch.data_source_path)
        if problem:
            report.problems.append(f"--data-source-path: {problem}")
        else:
            report.checked.append(f"--data-source-path {launch.data_source_path}")


_PROJECT_HOOK_NAMES = {"--custom-rollout-log-function-path": "log_rollout_step",
                       "--rollout-all-samples-process-path": "record_all_samples"}


def load_function(path: str) -> Any:
    """What slime's ``load_function`` returns for ``path`` (the module imported, the attribute read).

    Example:
        >>> load_function("os.path.join") is os.path.join
        True
    """
    module_name, _, name = path.rpartition(".")
    if not module_name:
        raise ValueError(f"{path!r} is not a dotted path module.function")
    return getattr(importlib.import_module(module_name), name)


def _check_callable(path: str, call: tuple[str, ...]) -> str | None:
    try:
        fn = load_function(path)
    except Exception as exc:  # noqa: BLE001 - whatever the import raises is the user's problem to see
        return f"{path} does not load ({type(exc).__name__}: {exc})"
    if not callable(fn):
        return f"{path} is a {type(fn).__name__}, not a function"
    try:
        inspect.signature(fn).bind(*call)
    except TypeError as exc:
        return f"{path} cannot be called as slime calls it, fn({', '.join(call)}) ({exc})"
    except ValueError:  # no signature to read (a builtin): slime will find out
        pass
    return None


def _check_class(path: str) -> str | None:
    try:
        cls = load_function(path)
    except Exception as exc:  # noqa: BLE001
        return f"{path} does not load ({type(exc).__name__}: {exc})"
    if not inspect.isclass(cls):
        return f"{path} is a {type(cls).__name__}, not a class (slime builds it as cls(args))"
    try:
        inspect.signature(cls).bind(SimpleNamespace())
    except TypeError as exc:
        return f"{path} cannot be built as slime builds it, cls(args) ({exc})"
    except ValueError:
        pass
    return None


def _check_config(launch: argparse.Namespace, report: PreflightReport) -> dict[str, Any]:
    """Check the YAML; returns its ``shopsim_*`` settings as the settings table reads them (a bad value,
    already reported, at its default; empty when the file is absent or unreadable)."""
    path = launch.custom_config_path
    if not path:
        return {}
    if not os.path.lexists(path):
        report.problems.append(f"--custom-config-path: {path}: no such file")
        return {}
    problems = check_file(path)  # a directory, FIFO or device is named as such, never read
    report.problems += [f"--custom-config-path: {path}: {line}" for line in problems]
    if not problems:
        report.checked.append(f"--custom-config-path {path}")
    try:
        loaded = read_config(path)  # within the same bounds as check_file
    except Exception:  # noqa: BLE001 - already reported by check_file
        return {}
    return validate_settings(loaded)[0] if isinstance(loaded, dict) else {}


def _check_knobs(launch: argparse.Namespace, report: PreflightReport) -> None:
    knobs: dict[str, int | None] = {}
    for flag in ("--rollout-batch-size", "--n-samples-per-prompt", "--over-sampling-batch-size",
                 "--global-batch-size", "--num-steps-per-rollout"):
        raw = getattr(launch, _dest(flag))
        if raw is None:
            knobs[flag] = None
            continue
        try:
            knobs[flag] = int(raw)
        except ValueError:
            knobs[flag] = None
            report.problems.append(f"{flag}: {raw!r} is not an integer")
            continue
        if knobs[flag] < 1:
            report.problems.append(f"{flag}: {raw} must be >= 1")
            knobs[flag] = None
    rollout, n, over = knobs["--rollout-batch-size"], knobs["--n-samples-per-prompt"], knobs["--over-sampling-batch-size"]
    gbs, steps = knobs["--global-batch-size"], knobs["--num-steps-per-rollout"]
    if rollout is not None and over is not None and over < rollout:
        report.problems.append(f"--over-sampling-batch-size: {over} is smaller than --rollout-batch-size {rollout} "
                               "(slime requires over_sampling_batch_size >= rollout_batch_size)")
    if rollout is not None and n is not None:
        samples = rollout * n
        if steps is not None and gbs is not None and gbs != samples // steps:
            report.problems.append(f"--global-batch-size: {gbs} is not rollout_batch_size {rollout} x n_samples_per_prompt "
                                   f"{n} // num_steps_per_rollout {steps} = {samples // steps} (slime asserts they agree)")
        elif gbs is not None and samples % gbs:
            report.problems.append(f"--global-batch-size: {gbs} does not divide the {samples} samples of a rollout step "
                                   f"(rollout_batch_size {rollout} x n_samples_per_prompt {n}): the train batch would "
                                   "not split into whole optimizer updates")
    if rollout is not None:
        report.checked.append(f"knobs: rollout_batch_size {rollout}, over_sampling_batch_size {over or rollout}, "
                              f"n_samples_per_prompt {n}, global_batch_size {gbs}")


def _check_wandb(launch: argparse.Namespace, report: PreflightReport) -> None:
    if not launch.use_wandb:
        return
    try:
        import wandb
    except Exception as exc:  # noqa: BLE001
        report.problems.append(f"--use-wandb: wandb does not import ({type(exc).__name__}: {exc}); "
                               "pip install wandb in the training image, or drop --use-wandb")
        return
    has_generate_id = callable(getattr(getattr(wandb, "util", None), "generate_id", None))
    if not has_generate_id and not launch.disable_wandb_random_suffix:
        report.problems.append(f"--use-wandb: wandb {getattr(wandb, '__version__', '?')} has no wandb.util.generate_id, "
                               "which slime calls to suffix the run name: add --disable-wandb-random-suffix")
    else:
        report.checked.append(f"--use-wandb (wandb {getattr(wandb, '__version__', '?')})")


def _check_run_dir(launch: argparse.Namespace, settings: dict[str, Any], env: Any, report: PreflightReport) -> None:
    configured = settings.get("shopsim_run_dir") or env.get("SHOPSIM_RUN_DIR")
    if configured:
        where, source = str(configured), "shopsim_run_dir" if settings.get("shopsim_run_dir") else "SHOPSIM_RUN_DIR"
    elif launch.save:
        where, source = os.path.join(launch.save, SAVE_SUBDIR), "--save"
    else:
        report.warnings.append(f"records: neither shopsim_run_dir nor --save is set, so the records go to "
                               f"a new {DEFAULT_RUN_DIR}/run-<time>-<pid>-<random>/ per run in the working directory of slime's rollout actor, on whatever node "
                               "Ray places it; set shopsim_run_dir to shared storage on a multi-node run")
        return
    if not os.path.isabs(os.path.expanduser(where)):
        report.warnings.append(f"records: {source} gives a relative path ({where}): it resolves against the rollout "
                               "actor's working directory on whatever node Ray places it; use an absolute path on "
                               "shared storage for a multi-node run")
    problem = _unwritable(os.path.abspath(os.path.expanduser(where)))
    if problem:
        report.problems.append(f"{source}: the records directory {where} {problem}")
    else:
        report.checked.append(f"records: {os.path.abspath(os.path.expanduser(where))}")


def _unwritable(path: str) -> str | None:
    """Why the records could not be written under ``path`` (its nearest existing ancestor decides), or None."""
    probe = path
    while not os.path.exists(probe):
        parent = os.path.dirname(probe)
        if parent == probe:
            break
        probe = parent
    if not os.path.isdir(probe):
        return f"cannot be created: {probe} is a file"
    if not os.access(probe, os.W_OK | os.X_OK):
        return f"is not writable ({probe} does not allow this user to write)"
    return None


# --- slime's fully-async launch (train_async.py, a fully-async rollout function) ------------------

ROLLOUT_CALL = ("args", "rollout_id", "data_buffer")
"""How slime calls ``--rollout-function-path`` (``evaluation`` by keyword)."""


def check_fully_async(argv: list[str], launch: argparse.Namespace, report: PreflightReport) -> None:
    """Recognise a fully-async launch and say which of the project's hooks slime calls on it.

    ``train_async.py`` anywhere in the command, or a fully-async ``--rollout-function-path``:

    - the project's function: the log function must be set (else no record); the sample hook is
      advised (else the token fields are null); the filter and all-samples hook are not called;
    - slime's own fully-async function: nothing is judged, so zero-std and technical groups train;
      a problem when the project's hooks are set (the user meant to filter), else a warning;
    - ``train_async.py`` with slime's default rollout function: every hook applies as with ``train.py``.

    Example:
        >>> report = PreflightReport()
        >>> check_fully_async(["train_async.py", "--colocate"], launch_parser().parse_known_args([])[0], report)
        >>> print(*report.problems)
        train_async.py: --colocate is not supported by slime's train_async.py (it asserts not args.colocate)
    """
    rollout = launch.rollout_function_path
    is_train_async = any(os.path.basename(part) == "train_async.py" for part in argv)
    if is_train_async and "--colocate" in argv:
        report.problems.append("train_async.py: --colocate is not supported by slime's train_async.py "
                               "(it asserts not args.colocate)")
    if rollout and rollout not in (ASYNC_ROLLOUT_PATH, SLIME_ASYNC_ROLLOUT_PATH):
        problem = _check_callable(rollout, ROLLOUT_CALL)
        if problem:
            report.problems.append(f"--rollout-function-path: {problem}")
        else:
            report.checked.append(f"--rollout-function-path {rollout} (the project's hooks apply only where it calls them)")
    if rollout == ASYNC_ROLLOUT_PATH:
        _check_project_async(launch, report)
    elif rollout == SLIME_ASYNC_ROLLOUT_PATH:
        project = [flag for flag in (*HOOK_CALLS, "--rollout-sample-hook-path")
                   if any(path.startswith(PROJECT_FILTER_MODULE) for path in _paths(launch, flag))]
        line = (f"--rollout-function-path: {SLIME_ASYNC_ROLLOUT_PATH} calls neither the filter nor the all-samples "
                "hook: nothing is filtered (zero-std and technical groups train) and no group is judged; "
                f"use {ASYNC_ROLLOUT_PATH} (docs §3.8)")
        (report.problems if project else report.warnings).append(line)
    elif is_train_async and not rollout:
        report.checked.append("train_async.py with slime's default rollout function: every hook applies as with "
                              "train.py (generation runs one step ahead of training)")


def _check_project_async(launch: argparse.Namespace, report: PreflightReport) -> None:
    problem = _check_callable(ASYNC_ROLLOUT_PATH, ROLLOUT_CALL)
    if problem:
        report.problems.append(f"--rollout-function-path: {problem}")
        return
    applies = ["--custom-rollout-log-function-path", "--rollout-sample-hook-path", "--custom-config-path",
               "--data-source-path"]
    report.checked.append(f"fully-async launch: {ASYNC_ROLLOUT_PATH} judges every finished group; applies: "
                          f"{', '.join(applies)}; not called: --dynamic-sampling-filter-path, "
                          "--rollout-all-samples-process-path")
    if not launch.custom_rollout_log_function_path:
        report.problems.append(f"--custom-rollout-log-function-path: not set, but the rollout function is "
                               f"{ASYNC_ROLLOUT_PATH}: without it no step record is ever written (set it to "
                               f"{PROJECT_FILTER_MODULE}slime_runtime.{_PROJECT_HOOK_NAMES['--custom-rollout-log-function-path']})")
    # a missing sample hook is warned about for every launch (the token fields stay null), this one included
    for flag in ("--dynamic-sampling-filter-path", "--rollout-all-samples-process-path"):
        if getattr(launch, _dest(flag)):
            report.warnings.append(f"{flag}: not called on the fully-async path ({ASYNC_ROLLOUT_PATH} judges and "
                                   "closes each step itself); harmless, but it does nothing")


def _dest(flag: str) -> str:
    return flag.lstrip("-").replace("-", "_")


def sample_hook_paths(launch: argparse.Namespace) -> list[str]:
    """Every ``--rollout-sample-hook-path`` of the launch (slime appends each one given)."""
    found = getattr(launch, "sample_hook_paths", None)
    return list(found) if found is not None else _paths(launch, "--rollout-sample-hook-path")


def _every_value(argv: list[str], flag: str) -> list[str]:
    """Each value ``flag`` is given in ``argv`` (``--flag V`` or ``--flag=V``), in order.

    Example:
        >>> _every_value(["--x", "a", "--y", "b", "--x=c"], "--x")
        ['a', 'c']
    """
    found = []
    for position, token in enumerate(argv):
        if token == flag and position + 1 < len(argv):
            found.append(argv[position + 1])
        elif token.startswith(flag + "="):
            found.append(token[len(flag) + 1:])
    return found


def _paths(launch: argparse.Namespace, flag: str) -> list[str]:
    """The hook paths ``flag`` gives (one, or each of a repeated flag's)."""
    value = getattr(launch, _dest(flag), None)
    return [value] if isinstance(value, str) else list(value or [])


def run(args: argparse.Namespace) -> int:
    """Print the report; 2 on a problem, else 0."""
    argv = list(args.train_args)
    if argv and argv[0] == "--":
        argv = argv[1:]
    try:
        report = preflight(argv, loop=args.loop)
    except Exception as exc:  # noqa: BLE001 - never a traceback
        print(f"shopsim-metrics preflight: error: the check itself failed ({type(exc).__name__}: {exc})", file=sys.stderr)
        return 2
    for line in report.warnings:
        print(f"shopsim-metrics preflight: warning: {line}", file=sys.stderr)
    for line in report.problems:
        print(f"shopsim-metrics preflight: error: {line}", file=sys.stderr)
    if report.problems:
        return 2
    print(f"shopsim-metrics preflight: OK ({len(report.checked)} checks): " + "; ".join(report.checked))
    return 0


def register(subparsers: Any) -> None:
    """Add the ``preflight`` subcommand."""
    parser = subparsers.add_parser(
        "preflight", help="check a slime launch (the train.py arguments after --) before any GPU starts",
        description="Check a slime launch before any GPU starts: give the arguments of train.py (or train_async.py) "
                    "after --. Checks that every hook path loads and accepts slime's call, the settings file "
                    "(as check-config), slime's knob constraints, every flag against slime's parser, where the "
                    "records go, and which hooks apply on a fully-async launch. Exit 0 when sound (warnings on "
                    "stderr), 2 with one line per problem.")
    parser.add_argument("--loop", choices=LOOPS[:2], default=None,
                        help="the framework the launch is for: slime or miles (slime's production fork); default: "
                             "the one installed here (slime's checks when neither is)")
    parser.add_argument("train_args", nargs=argparse.REMAINDER, metavar="-- TRAIN_PY_ARGS",
                        help="the arguments you pass to slime's (or miles') train.py")
    parser.set_defaults(func=run)


def check_launch_shape(argv: list[str], launch: argparse.Namespace, settings: dict[str, Any],
                       report: PreflightReport) -> None:
    """Mistakes of the command line itself: flags slime does not know (slime's parser
    would stop the launch, after the image and the job started), a relative ``--custom-config-path``,
    skip or wave settings without the data source that applies them, and the sample hook missing.

    Example:
        >>> r = PreflightReport(); check_launch_shape(["--over-sampling-batch-szie", "32"],
        ...     launch_parser().parse_known_args([])[0], {}, r); r.problems
        ["--over-sampling-batch-szie: not a flag slime knows; did you mean '--over-sampling-batch-size'?"]
    """
    live = slime_parser_flags()
    known = live or SLIME_FLAGS
    report.checked.append("every flag against " + ("slime's own parser" if live else "the slime flags kept in the project"))
    for token in argv:
        flag = token.split("=", 1)[0]
        if flag.startswith("--") and len(flag) > 2 and not is_slime_flag(flag, known):
            near = closest_slime_flag(flag, known)
            hint = f"; did you mean {near!r}?" if near else ""
            report.problems.append(f"{flag}: not a flag slime knows{hint}")
    config = launch.custom_config_path
    if config and not os.path.isabs(config):
        report.problems.append(f"--custom-config-path: {config} is relative: slime reads it in its Ray actors, "
                               "whose working directory is not the launch's; give an absolute path")
    skip = settings.get("shopsim_prompt_skip")
    wants = [f"shopsim_prompt_skip: {skip}"] if skip not in (None, False, "off") else []
    if settings.get("shopsim_wave_size") == "adaptive":
        wants.append("shopsim_wave_size: adaptive")
    if wants and launch.data_source_path != DATA_SOURCE_PATH:
        report.problems.append(f"{' and '.join(wants)} {'act' if len(wants) > 1 else 'acts'} only through "
                               f"--data-source-path {DATA_SOURCE_PATH} "
                               f"(it is {launch.data_source_path or 'not set'}): without it nothing is skipped "
                               "and the waves stay fixed")
    filter_path = getattr(launch, _dest("--dynamic-sampling-filter-path"))
    uses_project = (filter_path or "").startswith(PROJECT_FILTER_MODULE) or launch.rollout_function_path == ASYNC_ROLLOUT_PATH
    if uses_project and SAMPLE_HOOK_PATH not in sample_hook_paths(launch):
        report.warnings.append(f"--rollout-sample-hook-path: not {SAMPLE_HOOK_PATH}: total_token_count, "
                               "aborted_token_count and tokens_per_informative_group stay null (aborted "
                               "generation is not counted)")
