"""``shopsim-metrics dashboard``: write the offline HTML, the W&B workspace/report, or the spec.

- ``dashboard html --from <steps.jsonl | run dir | W&B run dir> --out dashboard.html`` (the source may
  also be given without ``--from``)
- ``dashboard wandb --entity E --project P`` saves the workspace and the report to W&B;
  with ``--dry-run --out DIR`` it writes their JSON instead (no network, no API key; without
  ``--out``, into ``dashboards/``, where the repository keeps its templates); with ``--from RUN``
  each section also says which of its panels are off in that run (a run's templates need ``--out``:
  they never replace the generic ones in ``dashboards/``).
- ``dashboard spec --out dashboards/panels.json`` writes the panel spec.

Example:
    >>> import argparse
    >>> parser = argparse.ArgumentParser(prog="shopsim-metrics")
    >>> register(parser.add_subparsers(dest="command"))
    >>> args = parser.parse_args(["dashboard", "wandb", "--dry-run", "--out", "tpl"])
    >>> args.dry_run, args.func is run_wandb
    (True, True)
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any


def register(subparsers: Any) -> None:
    """Add the ``dashboard`` subcommand (with ``html``, ``wandb`` and ``spec``) to the CLI."""
    dash = subparsers.add_parser("dashboard", help="render the dashboards: offline HTML, W&B workspace and report")
    sub = dash.add_subparsers(dest="dashboard_command", required=True)

    html = sub.add_parser("html", help="write a self-contained HTML dashboard (plotly.js inline, no network)")
    html.add_argument("source_arg", nargs="?", metavar="SOURCE", help="same as --from")
    html.add_argument("--from", dest="source", default=None,
                      help="steps.jsonl, the run directory holding it, or a W&B offline run directory; or slime's / "
                           "verl's rollout dumps (with --whole-run or --kept-only): the prompts page only")
    html.add_argument("--out", default="dashboard.html", help="the HTML file to write (default: dashboard.html)")
    html.add_argument("--title", default=None, help="page title (default: the spec's title)")
    html.add_argument("--ledger-step", type=int, default=None,
                      help="step the ledger panel opens on (default: the latest multi-wave step)")
    html.add_argument("--prompts", action="store_true",
                      help="also write the prompts page (each prompt's success across steps, sortable, with a "
                           "drill-down) beside --out as <name>-prompts.html, linked from the dashboard")
    from shopsim_metrics.outcomes.sources import add_dump_arguments

    add_dump_arguments(html)
    html.set_defaults(func=run_html)

    wb = sub.add_parser("wandb", help="save the W&B workspace and report template (or write their JSON)")
    wb.add_argument("--entity", default=None, help="W&B entity (user or team); required unless --dry-run")
    wb.add_argument("--project", default=None, help="W&B project; required unless --dry-run")
    wb.add_argument("--dry-run", action="store_true", help="write the JSON only: no network, no API key")
    wb.add_argument("--out", default=None,
                    help=f"directory for the dry-run JSON (default: {TEMPLATES_DIR}, the generic templates; "
                         "required with --from)")
    wb.add_argument("--from", dest="source", default=None,
                    help="a run (steps.jsonl, its run directory, or a W&B offline run directory): each section "
                         "names its panels that are off in that run")
    wb.set_defaults(func=run_wandb)

    spec = sub.add_parser("spec", help="write the declarative panel spec as JSON")
    spec.add_argument("--out", default="dashboards/panels.json", help="file to write (default: dashboards/panels.json)")
    spec.set_defaults(func=run_spec)


def run_html(args: argparse.Namespace) -> int:
    from shopsim_metrics.dashboards.html import write_html_dashboard

    if (args.source is None) == (args.source_arg is None):
        print("shopsim-metrics dashboard html: error: give the source once, as --from SOURCE or as SOURCE "
              "(a steps.jsonl, its run directory, or a W&B offline run directory)", file=sys.stderr)
        return 2
    source = args.source or args.source_arg
    from shopsim_metrics.dashboards.prompts_page import write_prompts_page
    from shopsim_metrics.outcomes.sources import DUMP_KINDS, dump_options, load_outcomes, refuse_dump_options, source_kind
    from shopsim_metrics.outcomes.trace import trace_from_records

    options = dump_options(args)
    if source_kind(source) in DUMP_KINDS:  # a dump has per-prompt outcomes, not the per-step records
        path = write_prompts_page(load_outcomes(source, options=options), args.out,
                                  title=args.title or "Prompts across steps")
        print(f"prompts page written (a dump holds no per-step records: no per-step dashboard): {path.resolve()}")
        print(f"open it in a browser: file://{path.resolve()}")
        return 0
    refuse_dump_options(source, options)
    trace = trace_from_records(source) if args.prompts else None
    prompts = prompts_page_path(args.out) if trace is not None else None
    path = write_html_dashboard(source, args.out, title=args.title, ledger_step=args.ledger_step,
                                prompts_page=prompts.name if prompts else None)
    print(f"dashboard written: {path.resolve()}")
    if trace is not None and prompts is not None:
        write_prompts_page(trace, prompts, title="Prompts across steps", back_link=path.name)
        print(f"prompts page written: {prompts.resolve()}")
    print(f"open it in a browser: file://{path.resolve()}")
    return 0


def prompts_page_path(out: str) -> Path:
    """Where ``dashboard html --prompts`` writes the prompts page: beside ``out``, ``<name>-prompts.html``.

    Example:
        >>> prompts_page_path("out/dashboard.html").as_posix()
        'out/dashboard-prompts.html'
    """
    path = Path(out)
    return path.with_name(f"{path.stem}-prompts{path.suffix or '.html'}")


TEMPLATES_DIR = "dashboards"
"""Where ``dashboard wandb --dry-run`` writes without ``--out``: the repository's generic templates."""

SAVE_TIMEOUT_SECONDS = 120
"""How long ``dashboard wandb`` waits for W&B to save the workspace and report before it gives up."""


def run_wandb(args: argparse.Namespace) -> int:
    from shopsim_metrics.dashboards import wandb_workspace as wbw
    from shopsim_metrics.dashboards.data import load_dashboard_data

    if args.dry_run and args.source and args.out is None:
        print(f"shopsim-metrics dashboard wandb: error: --dry-run --from writes that run's templates: give --out DIR "
              f"(without --out they would replace the generic templates in {TEMPLATES_DIR}/)", file=sys.stderr)
        return 2
    data = load_dashboard_data(args.source) if args.source else None
    if args.dry_run:
        entity = args.entity or wbw.TEMPLATE_ENTITY
        project = args.project or wbw.TEMPLATE_PROJECT
        ws_path, rep_path = wbw.write_wandb_templates(args.out or TEMPLATES_DIR, entity=entity, project=project,
                                                      data=data)
        print(f"workspace JSON: {ws_path}")
        print(f"report JSON:    {rep_path}")
        return 0
    missing = [flag for flag, value in (("--entity", args.entity), ("--project", args.project)) if not value]
    if missing:
        print(
            f"shopsim-metrics dashboard wandb: error: {' and '.join(missing)} required to save to W&B "
            "(or pass --dry-run to write the JSON only)",
            file=sys.stderr,
        )
        return 2
    from shopsim_metrics.sinks.deadline import DeadlinePassed, call_within

    try:  # on a daemon thread: the threads W&B starts are daemons too, so the command exits after an error
        ws_url, report_url = call_within(SAVE_TIMEOUT_SECONDS, lambda: wbw.save_to_wandb(args.entity, args.project, data=data),
                                         name="shopsim-wandb-save")
    except DeadlinePassed:
        print(f"shopsim-metrics dashboard wandb: error: W&B did not answer within {SAVE_TIMEOUT_SECONDS} s (is the "
              "host reachable?); pass --dry-run --out DIR to write the workspace and report JSON without network",
              file=sys.stderr)
        return 2
    except Exception as exc:  # noqa: BLE001 - wandb's own errors (UsageError, CommError, ...) become one line
        if type(exc).__module__.split(".")[0] not in ("wandb", "wandb_workspaces", "requests"):
            raise
        print(
            f"shopsim-metrics dashboard wandb: error: W&B refused to save the workspace ({type(exc).__name__}: "
            f"{' '.join(str(exc).split())[:200]}). Log in with `wandb login` (or set WANDB_API_KEY), "
            "or pass --dry-run --out DIR to write the workspace and report JSON without network or API key",
            file=sys.stderr,
        )
        return 2
    print(f"workspace saved: {ws_url}")
    print(f"report saved:    {report_url}")
    return 0


def run_spec(args: argparse.Namespace) -> int:
    from shopsim_metrics.dashboards.spec import write_panels_json

    path = write_panels_json(Path(args.out))
    print(f"panel spec written: {path}")
    return 0
