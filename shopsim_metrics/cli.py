"""The shopsim-metrics command: demo, tune, replay, dashboard, inspect, check-config, prompts and preflight.

Each subcommand lives in the module that owns it and adds its subparser with ``register(subparsers)``.

Example:
    >>> parser = build_parser()
    >>> parser.parse_args(["inspect", "run/steps.jsonl"]).command
    'inspect'
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import NoReturn

from shopsim_metrics.settings import check as config_check
from shopsim_metrics.settings import preflight as preflight_command
from shopsim_metrics.prompts import command as prompts_command
from shopsim_metrics.replay import command as replay_command
from shopsim_metrics.dashboards import commands as dashboard_commands
from shopsim_metrics.simulator import commands as simulator_commands


class OneLineParser(argparse.ArgumentParser):
    """An argument parser whose usage errors are one line on stderr (with a pointer to ``--help``), exit 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


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


def _version() -> str:
    """The installed package's version (``unknown`` when it runs from a bare checkout)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("shopsim-metrics")
    except PackageNotFoundError:
        return "unknown"


def _inspect(args: argparse.Namespace) -> int:
    from shopsim_metrics.readers.steps import read_step_columns
    from shopsim_metrics.readers.report import (AGENT_TABLE_LEGEND, AGENT_TABLE_NAMES, STEP_TABLE_LEGEND,
                                                STEP_TABLE_NAMES, format_agent_table, format_cost_headline,
                                                format_step_table, format_wave_calibration)

    if args.json:
        return _inspect_json(args.path)
    names = STEP_TABLE_NAMES
    cost = ("total_token_count", "aborted_token_count")
    agent = tuple(name for name in AGENT_TABLE_NAMES if name not in names) + ("technical_cause_counts",)
    table = read_step_columns(args.path, names=names + ("terminated", "predicted_second_wave_probability") + cost
                              + agent)
    out = sys.stdout
    cols = {name: table.rollout_ids if name == "rollout_id" else table.columns[name] for name in names}
    rows = [{name: col[i] for name, col in cols.items()} for i in range(len(table))]
    notes = ["TERMINATED" if terminated else "" for terminated in table.columns["terminated"]]
    out.write(format_step_table(rows, notes) + "\n")
    out.write(f"{len(table)} steps" + "".join(f"; {note}" for note in table.report.notes()) + "\n")
    out.write(format_cost_headline(*_run_cost(table.columns)) + "\n")
    waves = format_wave_calibration(table.columns["predicted_second_wave_probability"], table.columns["wave_count"])
    if waves is not None:
        out.write(waves + "\n")
    out.write(STEP_TABLE_LEGEND + "\n")
    agent_rows = [{name: table.rollout_ids[i] if name == "rollout_id" else table.columns[name][i]
                   for name in (*AGENT_TABLE_NAMES, "technical_cause_counts")} for i in range(len(table))]
    agent_table = format_agent_table(agent_rows)
    if agent_table is not None:
        out.write("\nAgent episodes and tools\n" + agent_table + "\n" + AGENT_TABLE_LEGEND + "\n")
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


def _message(exc: BaseException) -> str:
    """A one-line description of an error for the terminal."""
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
