"""The shopsim-metrics command: demo, tune, replay, dashboard, inspect, check-config, prompts and preflight.

Each subcommand lives in the module that owns it and adds its subparser with ``register(subparsers)``.

Example:
    >>> parser = build_parser()
    >>> parser.parse_args(["inspect", "run/steps.jsonl"]).command
    'inspect'
"""

from __future__ import annotations

import argparse
import difflib
import json
import os
import re
import sys
from typing import Any, NoReturn, Sequence

from shopsim_metrics.settings import check as config_check
from shopsim_metrics.settings import preflight as preflight_command
from shopsim_metrics.prompts import command as prompts_command
from shopsim_metrics.replay import command as replay_command
from shopsim_metrics.dashboards import commands as dashboard_commands
from shopsim_metrics.simulator import commands as simulator_commands


class OneLineParser(argparse.ArgumentParser):
    """An argument parser whose usage errors are one line on stderr (with a pointer to ``--help``), exit 2.

    A flag is taken only when spelt in full (``allow_abbrev=False``: ``--rollout`` is not
    ``--rollout-batch-size``), and a flag the command does not know gets the nearest it does ("did you mean").
    Every subcommand's parser is one of these (argparse builds subparsers with the parent's class).

    Example:
        >>> import contextlib, io
        >>> err = io.StringIO()
        >>> with contextlib.redirect_stderr(err), contextlib.suppress(SystemExit):
        ...     build_parser().parse_args(["replay", "trace.json", "--sedes", "2"])
        >>> print(err.getvalue().strip())
        shopsim-metrics replay: error: unrecognized arguments: --sedes 2; did you mean --seeds? (see shopsim-metrics replay --help)
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs["allow_abbrev"] = False
        super().__init__(*args, **kwargs)

    def parse_args(self, args: Sequence[str] | None = None,  # type: ignore[override]
                   namespace: argparse.Namespace | None = None) -> argparse.Namespace:
        parsed, extras = self.parse_known_args(args, namespace)
        if extras:
            chosen = chosen_parser(self, parsed)
            chosen.error(f"unrecognized arguments: {' '.join(extras)}{did_you_mean(extras, chosen, self)}")
        return parsed

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {printable(message)} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(prog="shopsim-metrics", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    sub = parser.add_subparsers(dest="command", required=True)
    inspect = sub.add_parser("inspect", help="summarise a steps.jsonl file (or the run directory holding it)")
    inspect.add_argument("path")
    inspect.add_argument("--json", action="store_true",
                         help="print the records as JSON lines (the latest record of each rollout_id, in file order)")
    inspect.set_defaults(func=_inspect)
    simulator_commands.register(sub)
    replay_command.register(sub)
    dashboard_commands.register(sub)
    config_check.register(sub)
    prompts_command.register(sub)
    preflight_command.register(sub)
    for action in sub._choices_actions:  # `shopsim-metrics X --help` opens with what `--help` says of X
        command = sub.choices[action.dest]
        if command.description is None and action.help:
            command.description = action.help[0].upper() + action.help[1:] + "."
    name_subcommands(parser)
    return parser


def name_subcommands(parser: argparse.ArgumentParser) -> None:
    """Every required subcommand is named by its choices in errors, as in the usage line, not by its ``dest``.

    Example:
        >>> import contextlib, io
        >>> err = io.StringIO()
        >>> with contextlib.redirect_stderr(err), contextlib.suppress(SystemExit):
        ...     build_parser().parse_args(["dashboard"])
        >>> err.getvalue().split("error: ")[1].split(" (see")[0]
        'the following arguments are required: {html,wandb,spec}'
    """
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            if action.metavar is None:
                action.metavar = "{" + ",".join(action.choices) + "}"
            for command in action.choices.values():
                name_subcommands(command)


def chosen_parser(parser: argparse.ArgumentParser, parsed: argparse.Namespace) -> argparse.ArgumentParser:
    """The (sub)command's parser that ``parsed`` went down to: the one whose flags a stray argument was meant for."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            name = getattr(parsed, action.dest, None)
            if name in action.choices:
                return chosen_parser(action.choices[name], parsed)
    return parser


def did_you_mean(extras: Sequence[str], parser: argparse.ArgumentParser,
                 root: argparse.ArgumentParser | None = None) -> str:
    """What each stray flag of ``extras`` was likely meant as: a flag of ``parser`` spelt nearly so, the one it
    abbreviates (abbreviations are not accepted), or another command's (of ``root``'s); ``""`` when none.

    Example:
        >>> parser = OneLineParser(prog="x"); _ = parser.add_argument("--rollout-batch-size")
        >>> did_you_mean(["--rollout-batch-sise", "3"], parser)
        '; did you mean --rollout-batch-size?'
        >>> did_you_mean(["--rollout-batch-sise", "3", "--zzz"], parser)
        '; --rollout-batch-sise: did you mean --rollout-batch-size?'
        >>> did_you_mean(["--rollout-batch", "3"], parser)
        '; did you mean --rollout-batch-size?'
    """
    stray = [extra.split("=", 1)[0] for extra in extras if extra.startswith("--")]
    near = {flag: hint for flag in stray if (hint := _meant(flag, parser, root))}
    if not near:
        return ""
    if len(stray) == 1:
        return f"; {near[stray[0]]}"
    return "; " + "; ".join(f"{bad}: {hint}" for bad, hint in near.items())


def _meant(flag: str, parser: argparse.ArgumentParser, root: argparse.ArgumentParser | None) -> str | None:
    """The hint for one stray ``flag`` (see :func:`did_you_mean`)."""
    known = [name for action in parser._actions for name in action.option_strings if name.startswith("--")]
    close = difflib.get_close_matches(flag, known, n=1, cutoff=0.75)
    if close:
        return f"did you mean {close[0]}?"
    owners = [command for command in _commands(root) if command is not parser
              and any(flag in action.option_strings for action in command._actions)]
    if owners:
        return f"{flag} is an option of {', '.join(owner.prog for owner in owners)}, not of {parser.prog}"
    longer = [name for name in known if name.startswith(flag)]
    return f"did you mean {longer[0]}?" if len(longer) == 1 else None


def _commands(parser: argparse.ArgumentParser | None) -> list[argparse.ArgumentParser]:
    """Every (sub)command parser under ``parser``."""
    found = []
    for action in parser._actions if parser is not None else ():
        if isinstance(action, argparse._SubParsersAction):
            for command in action.choices.values():
                found += [command, *_commands(command)]
    return found


def _version() -> str:
    """The installed package's version (``unknown`` when it runs from a bare checkout)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("shopsim-metrics")
    except PackageNotFoundError:
        return "unknown"


def _inspect(args: argparse.Namespace) -> int:
    from shopsim_metrics.readers.steps import read_step_columns
    from shopsim_metrics.readers.report import (NOTE_NAMES, STEP_TABLE_LEGEND, STEP_TABLE_NAMES,
                                                format_cost_headline, format_step_table, format_wave_calibration,
                                                step_note)

    if args.json:
        return _inspect_json(args.path)
    names = STEP_TABLE_NAMES
    cost = ("total_token_count", "aborted_token_count")
    noted = tuple(name for name in NOTE_NAMES if name not in names)
    table = read_step_columns(args.path, names=names + noted + ("predicted_second_wave_probability",) + cost)
    out = sys.stdout
    cols = {name: table.rollout_ids if name == "rollout_id" else table.columns[name] for name in names}
    rows = [{name: col[i] for name, col in cols.items()} for i in range(len(table))]
    notes = [step_note({name: table.columns[name][i] for name in NOTE_NAMES}) for i in range(len(table))]
    out.write(format_step_table(rows, notes) + "\n")
    out.write(f"{len(table)} steps" + "".join(f"; {note}" for note in table.report.notes()) + "\n")
    out.write(format_cost_headline(*_run_cost(table.columns)) + "\n")
    waves = format_wave_calibration(table.columns["predicted_second_wave_probability"], table.columns["wave_count"])
    if waves is not None:
        out.write(waves + "\n")
    out.write(STEP_TABLE_LEGEND + "\n")
    return 0


def _run_cost(columns: dict) -> tuple[int | None, int | None, int, int]:
    """A run's tokens (None: no step counted them), aborted tokens, informative trained groups and steps."""
    counted = [i for i, total in enumerate(columns["total_token_count"]) if total is not None]
    total = sum(columns["total_token_count"][i] for i in counted) if counted else None
    aborted = sum(columns["aborted_token_count"][i] or 0 for i in counted) if counted else None
    informative = sum((columns["train_group_count"][i] or 0) - (columns["fallback_group_count"][i] or 0)
                      for i in counted)
    return total, aborted, informative, len(counted)


def _inspect_json(path: str) -> int:
    """The winning record of each rollout_id as one JSON line, in file order (two streaming passes)."""
    from pathlib import Path

    from shopsim_metrics.readers.steps import ReadReport, Winners, iter_step_dicts, resolve_steps_files

    report = ReadReport(Path(resolve_steps_files(path)[1]))
    winners = Winners()  # the record of each rollout_id the run's lineage holds (the records' own order)
    for index, data in enumerate(iter_step_dicts(path, report)):
        winners.offer(data, index)
    report.take(winners)
    report.check_not_empty()
    report.warn()
    keep = set(winners.index.values())
    for index, data in enumerate(iter_step_dicts(path)):
        if index in keep:
            sys.stdout.write(json.dumps(data, allow_nan=False, default=str) + "\n")
    return 0


_TERMINAL_STYLE = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]")
"""A terminal's style sequence (``ESC [ 1 m``: bold), as a library's message may carry one."""


def printable(text: str) -> str:
    """``text`` on one line with nothing a terminal would act on: style sequences dropped, white space runs
    one space, any other control character shown escaped (a file name may hold one).

    Example:
        >>> printable("Weights only load failed, \\x1b[1mdo those steps\\x1b[0m.\\n  see \\x07x")
        'Weights only load failed, do those steps. see \\\\x07x'
    """
    text = " ".join(_TERMINAL_STYLE.sub("", text).split())
    return "".join(char if char.isprintable() else repr(char)[1:-1] for char in text)


def _message(exc: BaseException) -> str:
    """A one-line description of an error for the terminal (:func:`printable`)."""
    return printable(_described(exc))


def _described(exc: BaseException) -> str:
    """What the error says, by its kind."""
    if isinstance(exc, OSError) and exc.strerror:
        where = f": {exc.filename}" if exc.filename else ""
        hint = ""
        if isinstance(exc, IsADirectoryError):
            hint = " (give a file path, not a directory)"
        elif isinstance(exc, NotADirectoryError):
            hint = " (a parent of that path is a file)"
        return f"{exc.strerror}{where}{hint}"
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text


def main(argv: list[str] | None = None) -> int:
    """Run one subcommand; any failure is one line on stderr and exit code 2 (a closed pipe: quietly).

    Set ``SHOPSIM_METRICS_TRACEBACK=1`` to see the traceback of an unexpected error.
    """
    parser = build_parser()
    args = parser.parse_args(argv)
    name = " ".join(["shopsim-metrics", args.command, *([args.dashboard_command] if args.command == "dashboard" else [])])
    try:
        code = int(args.func(args) or 0)
        sys.stdout.flush()
        return code
    except BrokenPipeError:  # `shopsim-metrics inspect RUN | head`: the reader has gone; stop quietly
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 2
    except KeyboardInterrupt:
        print(f"{name}: interrupted", file=sys.stderr)
        return 2
    except (OSError, ValueError, RecursionError, OverflowError, MemoryError) as exc:
        # ShopsimConfigError, NoStepRecords and JSON errors are ValueErrors
        print(f"{name}: error: {_message(exc)}", file=sys.stderr)
        return 2
    except Exception as exc:  # noqa: BLE001 - a CLI failure is one line; the traceback on request
        if os.environ.get("SHOPSIM_METRICS_TRACEBACK"):
            raise
        print(f"{name}: error: {type(exc).__name__}: {_message(exc)} "
              "(set SHOPSIM_METRICS_TRACEBACK=1 to see the traceback)", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
