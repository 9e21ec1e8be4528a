"""W&B renderer: a saved workspace and a report template built from the dashboard spec.

Built with ``wandb-workspaces`` (imported lazily: ``pip install 'shopsim-metrics[workspaces]'``).
Every per-step panel becomes a line plot of ``rollout/shopsim/<name>`` against ``rollout/step``;
the outcome panel is a stacked-area plot. Two things W&B line plots cannot do are spelled out
instead of faked:

- no arithmetic between keys: the stack shows the train batch (trained + fallback) as one layer,
  and a companion panel shows the fallback groups inside it;
- no per-group scatter: the ledger panel draws its per-step summary (``remaining_min``,
  ``wave_count``), the latest logged ledger table (``rollout/shopsim/decisions``) and a note
  pointing at ``steps.jsonl`` and the offline HTML;
- no free-text keys: a panel broken down by a record's mapping (the technical failures by cause) draws its
  total, beside a note on where the breakdown is (``steps.jsonl``, the decisions table, the alert, the HTML);
- no marks across every chart: the alerts of each step are a panel of their own
  (``rollout/shopsim/alert_count`` and ``alert_level``), and the streak panel draws the warning
  threshold and the limit as the two logged metrics ``technical_failure_warn_at`` and
  ``technical_failure_limit``.

Built from a run (``data``: its :class:`~shopsim_metrics.dashboards.data.DashboardData`), every section
whose panels have nothing to draw in that run opens with a note "Off in this run: ...", the reasons
the HTML page gives (:func:`~shopsim_metrics.dashboards.data.off_reason`).

``dry_run`` output (:func:`write_wandb_templates`) is the JSON W&B stores for the view, made with
no network and no API key; :func:`load_workspace_json` / :func:`load_report_json` read it back
through the library's own model classes.

Example:
    >>> ws = build_workspace("my-team", "shopsim")
    >>> sorted(workspace_panel_titles(workspace_json(ws)))[:1]
    ['Alerts raised per step']
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator

from shopsim_metrics.record import contract
from shopsim_metrics.dashboards.data import DashboardData, off_reason
from shopsim_metrics.dashboards.spec import DashboardSpec, Panel, dashboard_spec

if TYPE_CHECKING:
    import wandb_workspaces.reports.v2 as wr
    import wandb_workspaces.workspaces as ws

WORKSPACE_JSON_NAME = "wandb_workspace.json"
REPORT_JSON_NAME = "wandb_report.json"
TEMPLATE_ENTITY = "<entity>"
TEMPLATE_PROJECT = "<project>"
FALLBACK_SUFFIX = "fallback"
LEDGER_NOTE_SUFFIX = "note"
OFF_NOTE_ID = "off-in-this-run"

_INSTALL_HINT = (
    "the W&B dashboards need the optional package wandb-workspaces: "
    "pip install 'shopsim-metrics[workspaces]' (or pip install wandb-workspaces)"
)


def _import_wandb_workspaces() -> tuple[Any, Any]:
    try:
        import wandb_workspaces.reports.v2 as wr
        import wandb_workspaces.workspaces as ws
    except ImportError as exc:
        raise ImportError(f"{_INSTALL_HINT} ({exc})") from exc
    return ws, wr


def panel_uid(panel_id: str, suffix: str = "") -> str:
    """A stable 11-character id for the W&B panel of a spec panel (W&B ids are short base-36 names).

    Stable ids keep the committed templates diff-able and let a test find every spec panel.

    Example:
        >>> panel_uid("waves") == panel_uid("waves") != panel_uid("waves", "note")
        True
    """
    digest = hashlib.sha1(f"shopsim:{panel_id}:{suffix}".encode()).hexdigest()
    n = int(digest, 16)
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"
    out = []
    for _ in range(11):
        n, r = divmod(n, 36)
        out.append(digits[r])
    return "".join(out)


def wandb_panels(panel: Panel, spec: DashboardSpec, wr: Any) -> list[Any]:
    """The W&B panels that draw one spec panel (the first one carries the spec panel's title)."""
    x = spec.x_key
    if panel.source == "ledger":
        plot = wr.LinePlot(
            title=panel.title,
            x=x,
            y=[contract.wandb_key(k) for k in panel.step_summary],
            title_x="step",
            title_y="groups / waves",
        )
        keys = ", ".join(f"`{k}`" for k in panel.ledger_keys())
        table_key = contract.wandb_key(panel.wandb_table) if panel.wandb_table else None
        table_text = (
            f"The panel beside shows the latest ledger table `{table_key}` (the W&B sink logs it for multi-wave "
            "and terminated steps, and every N-th step). " if table_key else ""
        )
        note = wr.MarkdownPanel(
            markdown=(
                f"**{panel.title}**\n\n{panel.description}\n\n"
                f"The complete per-group decision ledger ({keys}) is in `{contract.STEPS_FILE_NAME}` in the run "
                f"directory. {table_text}The line plot shows its per-step summary "
                f"({', '.join(f'`{k}`' for k in panel.step_summary)}). To see `remaining` through one step, "
                "render the offline dashboard:\n\n"
                f"`shopsim-metrics dashboard html --from <run dir> --out dashboard.html`"
            )
        )
        plot._id, note._id = panel_uid(panel.id), panel_uid(panel.id, LEDGER_NOTE_SUFFIX)
        if table_key:
            table = wr.WeavePanelSummaryTable(table_name=table_key)
            table._id = panel_uid(panel.id, "table")
            return [plot, table, note]
        return [plot, note]
    derived = [s for s in panel.series if s.minus is not None]
    removed = {s.minus for s in derived}  # contained in the base key's layer: stacking it would count it twice
    keys = [s.key for s in panel.series if s.key not in removed or panel.kind != "stacked_bar"]
    plot = wr.LinePlot(
        title=panel.title,
        x=x,
        y=[contract.wandb_key(k) for k in dict.fromkeys(keys)],
        title_x="step",
        title_y=panel.y_title,
        plot_type="stacked-area" if panel.kind == "stacked_bar" else "line",
    )
    plot._id = panel_uid(panel.id)
    out = [plot]
    if panel.breakdown_key is not None:
        note = wr.MarkdownPanel(markdown=breakdown_note(panel))
        note._id = panel_uid(panel.id, LEDGER_NOTE_SUFFIX)
        out.append(note)
    if panel.kind == "stacked_bar" and derived:
        parts = [k for s in derived for k in s.keys()]
        companion = wr.LinePlot(
            title=f"{panel.title}: fallback groups inside the train batch",
            x=x,
            y=[contract.wandb_key(k) for k in dict.fromkeys(parts)],
            title_x="step",
            title_y=panel.y_title,
        )
        companion._id = panel_uid(panel.id, FALLBACK_SUFFIX)
        out.append(companion)
    return out


def breakdown_note(panel: Panel) -> str:
    """What a W&B view says beside a panel broken down by a record's mapping: the split is not a W&B key.

    Example:
        >>> breakdown_note(dashboard_spec().panel("agent_technical_causes")).splitlines()[0]
        '**Technical failures by cause**'
    """
    return (
        f"**{panel.title}**\n\n{panel.description}\n\n"
        f"W&B draws the total (`{contract.wandb_key(panel.series[0].key)}`): causes are free text, so they are never "
        f"W&B keys. Per step they are `{panel.breakdown_key}` in `{contract.STEPS_FILE_NAME}`; per group, the column "
        "`technical_cause` of the decisions table (`rollout/shopsim/decisions`); the streak alert names the leading "
        "one. The offline dashboard draws them stacked:\n\n"
        "`shopsim-metrics dashboard html --from <run dir> --out dashboard.html`"
    )


def off_note(section: str, spec: DashboardSpec, data: DashboardData | None) -> str | None:
    """The markdown naming the panels of ``section`` that have nothing to draw in the run of ``data``, and
    why (None: every panel has data, or no run was given).

    Example:
        >>> data = DashboardData(steps=[{"rollout_id": 0, "wave_count": 1, "skipped_prompt_count": None}])
        >>> print(off_note("Skipping", dashboard_spec(), data).splitlines()[0])
        **Off in this run** (source: step records):
    """
    if data is None:
        return None
    off = [(panel, off_reason(panel, data)) for panel in spec.panels_in(section)]
    lines = [f"- {panel.title}: {reason}" for panel, reason in off if reason is not None]
    if not lines:
        return None
    return f"**Off in this run** (source: {data.source or 'step records'}):\n\n" + "\n".join(lines)


def _section_panels(section: str, spec: DashboardSpec, data: DashboardData | None, wr: Any) -> list[Any]:
    """The W&B panels of one section: the note of what is off in the run first, when there is one."""
    panels = [p for panel in spec.panels_in(section) for p in wandb_panels(panel, spec, wr)]
    note = off_note(section, spec, data)
    if note is None:
        return panels
    markdown = wr.MarkdownPanel(markdown=note)
    markdown._id = panel_uid(OFF_NOTE_ID, section)
    return [markdown, *panels]


def build_workspace(
    entity: str = TEMPLATE_ENTITY,
    project: str = TEMPLATE_PROJECT,
    *,
    name: str | None = None,
    spec: DashboardSpec | None = None,
    data: DashboardData | None = None,
) -> "ws.Workspace":
    """A W&B workspace with one section per spec section, x axis ``rollout/step``, no auto panels;
    ``data`` (a run's): each section says which of its panels are off in that run."""
    ws, wr = _import_wandb_workspaces()
    spec = spec or dashboard_spec()
    sections = [
        ws.Section(
            name=section,
            panels=_section_panels(section, spec, data, wr),
            is_open=True,
            layout_settings=ws.SectionLayoutSettings(columns=3, rows=2),
            panel_settings=ws.SectionPanelSettings(x_axis=spec.x_key),
        )
        for section in spec.sections
    ]
    return ws.Workspace(
        entity=entity,
        project=project,
        name=name or spec.title,
        sections=sections,
        settings=ws.WorkspaceSettings(x_axis=spec.x_key, smoothing_type="none", smoothing_weight=0),
    )


def build_report(
    entity: str = TEMPLATE_ENTITY,
    project: str = TEMPLATE_PROJECT,
    *,
    title: str | None = None,
    spec: DashboardSpec | None = None,
    bind_runset: bool = False,
    data: DashboardData | None = None,
) -> "wr.Report":
    """A W&B report: per section a heading, what to read off each panel, and a panel grid.

    ``bind_runset=False`` (the template / dry-run form) leaves the run set's project empty, so the
    report shows the runs of the project it is saved in; ``True`` binds it to ``entity/project``,
    which makes the library look the project up on W&B (network and API key needed). ``data`` (a run's):
    each section says which of its panels are off in that run.
    """
    _, wr = _import_wandb_workspaces()
    spec = spec or dashboard_spec()
    blocks: list[Any] = [
        wr.P(
            text=(
                "Dynamic sampling in slime, step by step: what happened to every judged group, how many "
                f"over-sampling waves each step needed, and what reached the trainer. All keys are "
                f"{spec.key_prefix}<name> against {spec.x_key}; see docs/reference/records.md §3.3."
            )
        ),
        wr.TableOfContents(),
    ]
    for i, section in enumerate(spec.sections):
        panels = _section_panels(section, spec, data, wr)
        for n, p in enumerate(panels):
            p.layout = wr.Layout(x=12 * (n % 2), y=8 * (n // 2), w=12, h=8)
        runset = wr.Runset(entity=entity, project=project) if bind_runset else wr.Runset()
        runset._id = panel_uid(f"runset-{i}")
        blocks += [
            wr.H2(text=section),
            wr.UnorderedList(items=[f"{p.title}: {p.description}" for p in spec.panels_in(section)]),
            wr.PanelGrid(runsets=[runset], panels=panels),
        ]
    return wr.Report(
        entity=entity,
        project=project,
        title=title or f"{spec.title}: wave dynamics report",
        description="Template made by shopsim-metrics from its dashboard spec (dashboards/panels.json).",
        blocks=blocks,
        width="fluid",
    )


# --- JSON (dry run) -----------------------------------------------------------------------------


def workspace_json(workspace: "ws.Workspace") -> dict[str, Any]:
    """The view JSON W&B stores for the workspace (``View`` model, by alias, without nulls)."""
    return workspace._to_model().model_dump(mode="json", by_alias=True, exclude_none=True)


def report_json(report: "wr.Report") -> dict[str, Any]:
    """The report's ``ReportViewspec`` JSON (by alias, without nulls)."""
    return report._to_model().model_dump(mode="json", by_alias=True, exclude_none=True)


def load_workspace_json(data: dict[str, Any] | str) -> "ws.Workspace":
    """Read a workspace JSON back through the library's ``View`` model into a ``Workspace``."""
    _import_wandb_workspaces()
    from wandb_workspaces.workspaces import Workspace, internal

    view = internal.View.model_validate_json(data) if isinstance(data, str) else internal.View.model_validate(data)
    return Workspace._from_model(view)


def load_report_json(data: dict[str, Any] | str) -> "wr.Report":
    """Read a report JSON back through the library's ``ReportViewspec`` model into a ``Report``."""
    _import_wandb_workspaces()
    from wandb_workspaces.reports.v2 import Layout, Report, internal

    model = (
        internal.ReportViewspec.model_validate_json(data)
        if isinstance(data, str)
        else internal.ReportViewspec.model_validate(data)
    )
    report = Report._from_model(model)
    # Report._from_model (0.4.13) drops the width, and the layout of weave (table) panels: restore both.
    report.width = model.spec.width
    raw = model.model_dump(mode="json", by_alias=True, exclude_none=True)
    layouts = {p["__id__"]: p["layout"] for p in iter_report_panels(raw) if "__id__" in p and "layout" in p}
    for block in report.blocks:
        for panel in getattr(block, "panels", None) or ():
            layout = layouts.get(getattr(panel, "_id", None))
            if layout is not None:
                object.__setattr__(panel, "layout", Layout(**layout))
    return report


def write_wandb_templates(
    out_dir: str | os.PathLike,
    *,
    entity: str = TEMPLATE_ENTITY,
    project: str = TEMPLATE_PROJECT,
    spec: DashboardSpec | None = None,
    data: DashboardData | None = None,
) -> tuple[Path, Path]:
    """Dry run: write ``wandb_workspace.json`` and ``wandb_report.json`` (no network, no API key)."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    ws_path, rep_path = out / WORKSPACE_JSON_NAME, out / REPORT_JSON_NAME
    ws_path.write_text(_dumps(workspace_json(build_workspace(entity, project, spec=spec, data=data))), encoding="utf-8")
    rep_path.write_text(_dumps(report_json(build_report(entity, project, spec=spec, data=data))), encoding="utf-8")
    return ws_path, rep_path


def save_to_wandb(entity: str, project: str, *, spec: DashboardSpec | None = None,
                  data: DashboardData | None = None) -> tuple[str, str]:
    """Save the workspace and the report to ``entity/project`` on W&B; return their URLs.

    Needs network and a W&B API key (``wandb login`` or ``WANDB_API_KEY``).
    """
    workspace = build_workspace(entity, project, spec=spec, data=data).save()
    report = build_report(entity, project, spec=spec, bind_runset=True, data=data).save()
    return workspace.url, report.url


def _dumps(data: dict[str, Any]) -> str:
    return json.dumps(data, indent=1, sort_keys=False) + "\n"


# --- reading panels back (tests, and checking a template by eye) --------------------------------


def iter_workspace_panels(data: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Every panel dict of a workspace JSON, section by section."""
    for section in data["spec"]["section"]["panelBankConfig"]["sections"]:
        yield from section["panels"]


def iter_report_panels(data: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Every panel dict of the panel grids of a report JSON."""
    for block in data["spec"]["blocks"]:
        if block.get("type") == "panel-grid":
            yield from block["metadata"]["panelBankSectionConfig"]["panels"]


def workspace_panel_titles(data: dict[str, Any]) -> list[str]:
    return [p["config"].get("chartTitle", "") for p in iter_workspace_panels(data) if "chartTitle" in p.get("config", {})]
