"""The ``shopsim-metrics`` command: ``demo``, ``tune``, ``dashboard``, ``inspect`` and ``check-config``.

Each subcommand lives in the module that owns it and adds its subparser with ``register(subparsers)``.

Example:
    >>> parser = build_parser()
    >>> parser.parse_args(["inspect", "run/steps.jsonl"]).command
    'inspect'
"""

from __future__ import annotations

import argparse
import json
import sys

from shopsim_metrics import config_check
from shopsim_metrics.dashboards import commands as dashboard_commands
from shopsim_metrics.simulator import commands as simulator_commands


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="shopsim-metrics", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    inspect = sub.add_parser("inspect", help="summarise a steps.jsonl file (or the run directory holding it)")
    inspect.add_argument("path")
    inspect.add_argument("--json", action="store_true", help="print the records as JSON lines")
    inspect.set_defaults(func=_inspect)
    simulator_commands.register(sub)
    dashboard_commands.register(sub)
    config_check.register(sub)
    return parser


def _inspect(args: argparse.Namespace) -> int:
    from shopsim_metrics.sinks.jsonl import read_steps

    records = read_steps(args.path)
    if args.json:
        for record in records:
            print(json.dumps(record.to_dict()))
        return 0
    print(f"{'step':>5} {'waves':>5} {'accepted':>8} {'train':>5} {'fallback':>8} {'tech':>5} {'zero':>5} "
          f"{'surplus':>7} {'aborted':>7} {'success':>8} {'streak':>6}")
    for r in records:
        rate = "-" if r.success_rate is None else f"{r.success_rate:.3f}"
        flag = " TERMINATED" if r.terminated else ""
        print(f"{r.rollout_id:>5} {r.wave_count:>5} {r.accepted_group_count:>8} {r.train_group_count:>5} "
              f"{r.fallback_group_count:>8} {r.technical_group_drop_count:>5} {r.zero_std_group_drop_count:>5} "
              f"{r.surplus_group_count:>7} {r.aborted_group_count:>7} {rate:>8} "
              f"{r.max_consecutive_technical_failures:>6}{flag}")
    return 0


def main(argv: list[str] | None = None) -> int:
    """Run one subcommand; a bad input (missing file, bad value) is one line on stderr and exit code 2."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except (FileNotFoundError, NotADirectoryError, ValueError) as exc:  # ShopsimConfigError is a ValueError
        print(f"shopsim-metrics {args.command}: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
