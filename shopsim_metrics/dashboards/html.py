"""Offline renderer: one self-contained plotly HTML page with every panel of the dashboard spec.

plotly.js is inlined (no CDN, no network), so the file opens anywhere, also by e-mail; it is embedded
gzip-compressed (1.5 MB instead of 4.8) and unpacked by the browser's own ``DecompressionStream``
before the plots draw (:func:`plotly_js_packed`). Each panel is a ``<section id="panel-<id>"
data-panel-id="<id>">`` holding a plot div ``plot-<id>``, two to a row, and a panel that would stand
alone in its row takes the whole row (:func:`full_width_panels`); the ledger panel has a step picker
(default: the latest multi-wave step). Figures are plain plotly JSON
built here (plotly's objects validate every element: seconds on a 100k-step run), drawn with the
``plotly_white`` template that the page embeds once.

Example:
    >>> import tempfile, pathlib
    >>> from shopsim_metrics.record.records import StepRecord
    >>> out = pathlib.Path(tempfile.mkdtemp()) / "dash.html"
    >>> path = write_html_dashboard([StepRecord(rollout_id=0, wave_count=1)], out)
    >>> 'data-panel-id="outcomes"' in path.read_text()
    True
"""

from __future__ import annotations

import base64
import functools
import gzip
import html as _html
import json
import os
from pathlib import Path
from typing import Any

from shopsim_metrics.record import contract
from shopsim_metrics.dashboards.data import (
    ALERT_SOURCE_NAMES, LEDGER_KINDS, DashboardData, breakdown_values, ledger_kinds, ledger_score, load_dashboard_data,
    off_reason, series_values,
)
from shopsim_metrics.dashboards.downsample import MAX_POINTS, mean_buckets, minmax_buckets
from shopsim_metrics.dashboards.spec import OUTCOME_COLORS, DashboardSpec, Panel, Series, dashboard_spec
from shopsim_metrics.general.plain_values import is_number

MAX_PICKABLE_LEDGER_STEPS = 100
"""The ledger step picker offers at most this many steps: the chosen one, then multi-wave, terminated,
highest-waste and latest steps in turn, then the most recent others."""

LEDGER_PAYLOAD_BUDGET = 6_000_000
"""Bytes of ledger figures the picker may embed: with plotly.js (~2 MB, compressed) the page stays under 15 MB."""

MAX_TERMINATION_LINES = 20
"""Terminated steps marked by a vertical line; beyond that, by markers on the axis (one trace)."""

_PLOT_CONFIG = {"displaylogo": False, "responsive": True}

TEMPLATE = "plotly_white"
"""The look of every figure: plotly's template of that name, embedded once in the page (see :func:`template_json`)."""


def write_html_dashboard(
    source: Any,
    out_path: str | os.PathLike,
    *,
    title: str | None = None,
    ledger_step: int | None = None,
    spec: DashboardSpec | None = None,
    prompts_page: str | None = None,
) -> Path:
    """Render every panel of ``spec`` from ``source`` into one self-contained HTML file.

    ``source``: step records, a ``steps.jsonl``, a run directory or a W&B offline run directory.
    ``ledger_step``: the step the ledger panel opens on (default: the latest multi-wave step).
    ``prompts_page``: the prompts page beside it (:mod:`~shopsim_metrics.dashboards.prompts_page`), linked from the header.
    """
    spec = spec or dashboard_spec()
    data = source if isinstance(source, DashboardData) else load_dashboard_data(
        source, ledger_step=ledger_step, names=page_names(spec))
    page = render_html(data, title=title, ledger_step=ledger_step, spec=spec, prompts_page=prompts_page)
    out = Path(out_path)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(page, encoding="utf-8")
    return out


PAGE_NAMES = (*ALERT_SOURCE_NAMES, "wave_count", "terminated", "wasted_sample_fraction", "rollout_batch_size",
              "n_samples_per_prompt", "over_sampling_batch_size", "skipped_prompt_count", "skip_p_easy",
              "loop_state_source", "episode_count", "turn_count_source")
"""The per-step names the page reads besides its panels': the alerts and their numbers, the header's run modes
and the ledger step picker."""


def page_names(spec: DashboardSpec) -> tuple[str, ...]:
    """Every per-step name the page of ``spec`` reads (a records file is read into these columns only).

    Example:
        >>> names = page_names(dashboard_spec())
        >>> "wave_count" in names and "alerts" in names and "decisions" not in names
        True
    """
    breakdowns = (p.breakdown_key for p in spec.panels if p.breakdown_key is not None)
    return tuple(dict.fromkeys((*spec.step_names(), *breakdowns, *PAGE_NAMES)))


def render_html(
    data: DashboardData,
    *,
    title: str | None = None,
    ledger_step: int | None = None,
    spec: DashboardSpec | None = None,
    prompts_page: str | None = None,
) -> str:
    """The page as a string (see :func:`write_html_dashboard`)."""
    spec = spec or dashboard_spec()
    title = title or spec.title
    if ledger_step is not None and data.ledgers is not None and not data.ledgers.get(ledger_step):
        raise ValueError(
            f"ledger_step={ledger_step} has no ledger rows; steps with a ledger: {data.ledger_steps()[-20:]} (last 20)"
        )
    sections = []
    for section in spec.sections:
        in_section = spec.panels_in(section)
        wide = full_width_panels(in_section)
        panels = "\n".join(_panel_html(p, data, ledger_step, wide=p.id in wide) for p in in_section)
        sections.append(f'<h2 class="section">{_esc(section)}</h2>\n<div class="grid">\n{panels}\n</div>')
    return _PAGE.format(
        start=page_start(_esc(title), _CSS),
        title=_esc(title),
        plotlyjs=plotly_js_packed(),
        template=template_json(),
        summary=_summary_html(data) + (f'<p class="prompts-link"><a href="{_esc(prompts_page)}">Prompts: each '
                                       "prompt's success across steps</a></p>" if prompts_page else ""),
        sections="\n".join(sections),
        panel_count=len(spec.panels),
    )


@functools.lru_cache(maxsize=1)
def plotly_js_packed() -> str:
    """plotly.js gzip-compressed (fixed header: the same bytes every time), as base64: what the page embeds.

    Example:
        >>> from plotly.offline import get_plotlyjs
        >>> gzip.decompress(base64.b64decode(plotly_js_packed())).decode() == get_plotlyjs()
        True
    """
    from plotly.offline import get_plotlyjs

    return base64.b64encode(gzip.compress(get_plotlyjs().encode("utf-8"), compresslevel=9, mtime=0)).decode("ascii")


def full_width_panels(panels: list[Panel]) -> set[str]:
    """The ids of the panels that take a whole row of the two-column grid: the ledger's, and any panel that
    would stand alone in its row (the last of an odd run between two full-width ones), so no row is half empty.

    Example:
        >>> def p(i, source="steps"):
        ...     return Panel(id=i, title=i, description="", kind="line", source=source, section="s", series=())
        >>> sorted(full_width_panels([p("a"), p("b"), p("c"), p("ledger", "ledger"), p("d")]))
        ['c', 'd', 'ledger']
    """
    wide = {p.id for p in panels if p.source == "ledger"}
    column = 0
    for i, panel in enumerate(panels):
        if panel.id in wide:
            column = 0
        elif column == 0 and (i + 1 == len(panels) or panels[i + 1].id in wide):
            wide.add(panel.id)
        else:
            column = 1 - column
    return wide


# --- panels -------------------------------------------------------------------------------------


def _panel_html(panel: Panel, data: DashboardData, ledger_step: int | None, *, wide: bool = False) -> str:
    extra_attrs = ""
    picker = ""
    note = ""
    if panel.kind == "ledger_remaining":
        fig, picker, step, present = _ledger_panel(panel, data, ledger_step)
        extra_attrs = f' data-ledger="{"present" if present else "absent"}" data-ledger-step="{"" if step is None else step}"'
        off = off_reason(panel, data)
        if off is not None:
            extra_attrs += ' data-off="true"'
            note = f'<p class="note off">Off in this run: {_esc(off)}</p>'
        elif data.ledger_note or not present:
            note = f'<p class="note">{_esc(data.ledger_note or "This source has no decision ledger.")}</p>'
    else:
        fig = step_figure_dict(panel, data)
        off = off_reason(panel, data)
        if off is not None:
            extra_attrs = ' data-off="true"'
            note = f'<p class="note off">Off in this run: {_esc(off)}</p>'
        elif len(data.rollout_ids) > MAX_POINTS:
            note = f'<p class="note">{_esc(downsample_note(panel, len(data.rollout_ids)))}</p>'
    div = plot_div(fig, f"plot-{panel.id}")
    keys = " ".join(panel.keys())
    return (
        f'<section class="panel{" wide" if wide else ""}" id="panel-{_esc(panel.id)}" '
        f'data-panel-id="{_esc(panel.id)}" data-panel-kind="{_esc(panel.kind)}" '
        f'data-keys="{_esc(keys)}"{extra_attrs}>\n<h3>{_esc(panel.title)}</h3>\n'
        f'<p class="desc">{_esc(panel.description)}</p>\n{note}{picker}{div}\n</section>'
    )


def step_figure_dict(panel: Panel, data: DashboardData) -> dict[str, Any]:
    """A per-step panel as plain plotly JSON (no template): bars (stacked for ``stacked_bar``; then one per label of
    its ``breakdown_key``), lines, threshold lines, and the terminated steps.

    Past :data:`~shopsim_metrics.dashboards.downsample.MAX_POINTS` steps the series are downsampled for
    drawing: stacked bars by bucket means (the stack still adds up), lines by min/max buckets. Built
    without plotly's objects, whose per-element validation costs seconds on a 100k-step run. A series no
    step carries (adaptive waves' prediction on a run with fixed waves) is left out, not listed in the legend
    with nothing drawn, unless no series has data (the panel then says it is off).
    """
    x = data.step_ids()
    breakdown = breakdown_values(panel, data)  # one bar (line panels: line) per label, after the series
    style = "line" if panel.kind == "line" else "bar"
    series = [*panel.series, *(Series(panel.breakdown_key or "", label, style) for label, _ in breakdown)]
    values = [*(series_values(s, data) for s in panel.series), *(counts for _, counts in breakdown)]
    if panel.kind == "stacked_bar":
        bucket_x, bucketed = mean_buckets(x, values)
        drawn = [(bucket_x, v) for v in bucketed]
    else:
        drawn = [minmax_buckets(x, v) for v in values]
    traces: list[dict[str, Any]] = []
    unshown = unshown_series(panel, data)
    for s, (sx, sy) in zip(series, drawn):
        if s.key in unshown:
            continue
        trace: dict[str, Any] = {"x": sx, "y": sy, "name": s.label, "meta": s.key}
        if s.style == "bar":
            trace.update(type="bar", marker={"color": s.color})
        elif s.style == "threshold":
            trace.update(type="scatter", mode="lines", line={"color": s.color, "dash": "dash"})
        else:
            trace.update(type="scatter", mode="lines+markers" if len(sx) <= 500 else "lines", line={"color": s.color})
        if s.axis == "y2":
            trace["yaxis"] = "y2"
        traces.append(trace)
    layout = _layout(x_title=f"step ({contract.WANDB_STEP_KEY})", y_title=panel.y_title)
    if panel.kind == "stacked_bar":
        layout["barmode"] = "stack"
    if any(s.axis == "y2" for s in panel.series):
        layout["yaxis2"] = {"title": {"text": " / ".join(s.label for s in panel.series if s.axis == "y2")},
                            "overlaying": "y", "side": "right", "automargin": True, "rangemode": "tozero"}
    if panel.log_y:
        layout["yaxis"]["type"] = "log"
    if panel.breakdown_figure == "error_rate":  # per tool, the model's bar on the environment's: grouped by tool
        layout["barmode"] = "group"
        _stack_pairs(traces[len(panel.series):len(series)])
    terminated = _terminated_steps(data)
    if len(terminated) <= MAX_TERMINATION_LINES:
        layout["shapes"] = [{"type": "line", "xref": "x", "yref": "y domain", "x0": step, "x1": step, "y0": 0, "y1": 1,
                             "line": {"color": "#d62728", "dash": "dot", "width": 1}} for step in terminated]
        layout["annotations"] = [{"x": step, "y": 1, "yref": "paper", "yanchor": "bottom", "text": "terminated",
                                  "showarrow": False, "font": {"color": "#d62728"}} for step in terminated]
    else:
        marks = terminated[:: max(1, len(terminated) // MAX_POINTS + 1)]
        traces.append({"type": "scatter", "x": marks, "y": [0] * len(marks), "mode": "markers",
                       "name": f"terminated ({len(terminated)} steps)",
                       "marker": {"color": "#d62728", "symbol": "x", "size": 7}})
    warned = step_marks(data)
    if warned and len(warned) <= MAX_TERMINATION_LINES:
        layout.setdefault("shapes", []).extend(
            {"type": "line", "xref": "x", "yref": "y domain", "x0": step, "x1": step, "y0": 0, "y1": 1,
             "line": {"color": ALERT_COLOR, "dash": "dot", "width": 1}} for step, _ in warned)
        layout.setdefault("annotations", []).extend(  # above the plot area: never on a bar or a line
            {"x": step, "y": 1, "yref": "paper", "yanchor": "bottom", "text": level, "showarrow": False,
             "font": {"color": ALERT_COLOR}} for step, level in warned)
    elif warned:
        marks = [step for step, _ in warned][:: max(1, len(warned) // MAX_POINTS + 1)]
        traces.append({"type": "scatter", "x": marks, "y": [0] * len(marks), "mode": "markers",
                       "name": f"alerts ({len(warned)} steps)",
                       "marker": {"color": ALERT_COLOR, "symbol": "triangle-up", "size": 7}})
    return {"data": traces, "layout": layout}


def _stack_pairs(traces: list[dict[str, Any]]) -> None:
    """Error-rate bars come in pairs per tool (environment, model): each pair one group, the model's on top.

    Example:
        >>> pair = [{"x": [0], "y": [0.1], "name": "search: environment"}, {"x": [0], "y": [0.2], "name": "search: model"}]
        >>> _stack_pairs(pair); pair[1]["base"], pair[0]["offsetgroup"]
        ([0.1], 'search')
    """
    for environment, model in zip(traces[::2], traces[1::2]):
        group = str(environment["name"]).rsplit(": ", 1)[0]
        environment["offsetgroup"] = model["offsetgroup"] = group
        model["base"] = [value or 0 for value in environment["y"]]


ALERT_COLOR = "#e377c2"
"""The colour of a step's WARN mark on the per-step charts (terminated steps are marked in red)."""


def step_marks(data: DashboardData) -> list[tuple[int, str]]:
    """``(step, level)`` of every step with an alert other than an ERROR (an ERROR's step is marked terminated):
    one mark per step, its highest level (a step may raise the streak WARN and advisories together).

    Example:
        >>> info, warn = {"level": "INFO", "title": "a", "text": ""}, {"level": "WARN", "title": "b", "text": ""}
        >>> steps = [{"rollout_id": 3, "alerts": [info, warn]}, {"rollout_id": 4, "alerts": [info]}]
        >>> step_marks(DashboardData(steps=steps))
        [(3, 'WARN'), (4, 'INFO')]
    """
    marks: dict[int, str] = {}
    rank = contract.ALERT_LEVEL_CODES
    for step, level, _, _ in step_alerts(data):
        if level != "ERROR" and (step not in marks or rank.get(level, 2) > rank.get(marks[step], 2)):
            marks[step] = level
    return list(marks.items())


def step_alerts(data: DashboardData) -> list[tuple[int, str, str, str]]:
    """``(step, level, title, text)`` of every alert the records carry (their ``alerts`` field), in step order.

    Example:
        >>> from shopsim_metrics.dashboards.data import DashboardData
        >>> data = DashboardData(steps=[{"rollout_id": 3, "alerts": [{"level": "WARN", "title": "t", "text": "x"}]},
        ...                             {"rollout_id": 4, "alerts": []}])
        >>> step_alerts(data)
        [(3, 'WARN', 't', 'x')]
    """
    out = []
    for step, alerts in zip(data.rollout_ids, data.column("alerts")):
        if not isinstance(alerts, list):
            continue
        for alert in alerts:
            if isinstance(alert, dict):
                out.append((step, str(alert.get("level") or "?"), str(alert.get("title") or ""),
                            str(alert.get("text") or "")))
    return out


def unshown_series(panel: Panel, data: DashboardData) -> set[str]:
    """The keys of ``panel``'s series that no step carries, beside one that has data (thresholds aside): left out
    of the chart and its legend. None when no series has data (the panel then says it is off).

    Example:
        >>> from shopsim_metrics.dashboards.spec import dashboard_spec
        >>> waves = dashboard_spec().panel("waves")
        >>> unshown_series(waves, DashboardData(steps=[{"rollout_id": 0, "wave_count": 2}]))
        {'predicted_second_wave_probability'}
    """
    drawn = [s for s in panel.series if s.style != "threshold"]
    empty = {s.key for s in drawn if all(v is None for v in series_values(s, data))}
    return empty if len(empty) < len(drawn) else set()


def downsample_note(panel: Panel, steps: int) -> str:
    """What the page says about a downsampled panel."""
    if panel.kind == "stacked_bar":
        how = f"each bar is the mean of a bucket of about {steps / MAX_POINTS:.0f} steps"
    else:
        how = (f"each line keeps the minimum and maximum of every bucket of about {2 * steps / MAX_POINTS:.0f} "
               "steps, so spikes stay visible")
    return f"Downsampled for drawing: {steps:,} steps, at most {MAX_POINTS:,} points per trace; {how}."


def ledger_figure_dict(
    panel: Panel, rows: list[dict[str, Any]], *, step: int, rollout_batch_size: int | None
) -> dict[str, Any]:
    """``remaining_before`` by judgement order for one step, coloured by outcome, waves marked, as plain
    plotly JSON (no template): cheap enough to build for every step the picker offers."""
    xk, yk, ck, mk = panel.x_key or "order", panel.series[0].key, panel.color_key or "outcome", panel.marker_key
    sizes = marker_sizes([r.get(panel.size_key) for r in rows]) if panel.size_key else [9] * len(rows)
    size_of = {id(r): size for r, size in zip(rows, sizes)}
    traces: list[dict[str, Any]] = [{
        "type": "scatter", "x": [r.get(xk) for r in rows], "y": [r.get(yk) for r in rows], "mode": "lines",
        "line": {"color": "#c7c7c7", "shape": "hv"}, "name": "remaining", "hoverinfo": "skip",
    }]
    hover_keys = [k for k in (xk, yk, mk, *panel.hover_keys) if k]
    for outcome in contract.OUTCOMES:
        part = [r for r in rows if r.get(ck) == outcome]
        if not part:
            continue
        traces.append({
            "type": "scatter", "x": [r.get(xk) for r in part], "y": [r.get(yk) for r in part], "mode": "markers",
            "name": outcome,
            "marker": {"color": OUTCOME_COLORS[outcome], "size": [size_of[id(r)] for r in part],
                       "line": {"width": 0.5, "color": "#333"}},
            "text": ["<br>".join(f"{_esc(k)}: {_esc(r.get(k))}" for k in hover_keys) for r in part],
            "hovertemplate": "%{text}<extra>" + outcome + "</extra>",
        })
    shapes: list[dict[str, Any]] = []
    annotations: list[dict[str, Any]] = []
    if mk:
        previous = None
        for r in rows:
            x = r.get(xk)
            if previous is not None and r.get(mk) != previous and isinstance(x, (int, float)):
                shapes.append({"type": "line", "xref": "x", "yref": "y domain", "x0": x - 0.5, "x1": x - 0.5,
                               "y0": 0, "y1": 1, "line": {"color": "#9467bd", "dash": "dot"}})
                annotations.append({"x": x - 0.5, "y": 1, "yref": "paper", "text": f"{_esc(r.get(mk))} waves open",
                                    "showarrow": False, "xanchor": "left", "font": {"color": "#9467bd"}})
            previous = r.get(mk)
    if rollout_batch_size is not None:
        shapes.append({"type": "line", "xref": "x domain", "yref": "y", "x0": 0, "x1": 1,
                       "y0": rollout_batch_size, "y1": rollout_batch_size,
                       "line": {"color": "#000", "dash": "dash", "width": 1}})
        annotations.append({"x": 0, "xref": "paper", "y": rollout_batch_size, "showarrow": False, "yshift": 8,
                            "text": f"rollout_batch_size {rollout_batch_size}", "xanchor": "left"})
    layout = {
        "height": 360, "margin": {"l": 55, "r": 15, "t": 35, "b": 45}, "legend": {"orientation": "h", "y": -0.22},
        "xaxis": {"title": {"text": "judgement order in the step"}, "automargin": True},
        "yaxis": {"title": {"text": panel.y_title}, "automargin": True},
        "title": {"text": f"step {step}"}, "hovermode": "closest", "shapes": shapes, "annotations": annotations,
    }
    return {"data": traces, "layout": layout}


def marker_sizes(values: list[Any], *, smallest: float = 6.0, largest: float = 20.0) -> list[float]:
    """Marker sizes proportional to the square root of each value (area ~ tokens), within the step.

    Example:
        >>> marker_sizes([0, 100, 400, None])
        [6.0, 13.0, 20.0, 6.0]
    """
    numbers = [max(_num(v) or 0.0, 0.0) for v in values]
    top = max(numbers, default=0.0) ** 0.5
    if not top:
        return [9.0] * len(values)
    return [smallest + (largest - smallest) * (n ** 0.5) / top for n in numbers]


def _ledger_panel(
    panel: Panel, data: DashboardData, ledger_step: int | None
) -> tuple[dict[str, Any], str, int | None, bool]:
    """The ledger figure (plain JSON), its step picker (HTML) and the chosen step; a per-step summary
    without a ledger."""
    step = ledger_step if ledger_step is not None else data.default_ledger_step()
    if data.ledgers is None or step is None:
        summary = Panel(
            id=panel.id, title=panel.title, description=panel.description, kind="line", source="steps",
            section=panel.section, y_title="groups / waves",
            series=tuple(Series(k, k, "bar" if k == "wave_count" else "line") for k in panel.step_summary),
        )
        fig = step_figure_dict(summary, data)
        if data.ledgers is not None:  # a ledger-capable source with no judged group yet
            fig["layout"].setdefault("annotations", []).append(
                {"text": "no judged group yet", "x": 0.5, "y": 0.5, "xref": "paper", "yref": "paper", "showarrow": False})
        return fig, "", None, False
    knob = panel.knob_lines[0] if panel.knob_lines else None

    def batch_size(at: int) -> Any:
        return _num(data.values_at(at).get(knob)) if knob else None

    fig = ledger_figure_dict(panel, data.ledgers[step], step=step, rollout_batch_size=batch_size(step))
    figures: dict[str, str] = {}
    size = 0
    for s in pick_ledger_steps(data, step):
        if len(figures) >= MAX_PICKABLE_LEDGER_STEPS:
            break
        # no template: the picker lends the drawn plot's
        text = safe_json(ledger_figure_dict(panel, data.ledgers[s], step=s, rollout_batch_size=batch_size(s)))
        if figures and size + len(text) > LEDGER_PAYLOAD_BUDGET:
            continue  # too big for the page; a smaller step may still fit
        figures[str(s)] = text
        size += len(text)
    if len(figures) <= 1:
        return fig, "", step, True
    choices = sorted(map(int, figures))
    options = "".join(
        f'<option value="{s}"{" selected" if s == step else ""}>{_esc(_option_text(s, data))}</option>'
        for s in choices
    )
    payload = "{" + ",".join(f"{safe_json(k)}:{v}" for k, v in figures.items()) + "}"
    note = ""
    if len(choices) < len(data.rollout_ids):
        note = (f'<p class="note">The step picker offers {len(choices)} of {len(data.rollout_ids):,} steps: '
                "multi-wave, terminated, highest waste and the latest (any other step: "
                "<code>dashboard html --ledger-step N</code>).</p>\n")
    picker = (
        f'{note}<label class="picker">step: <select id="pick-{panel.id}" data-plot="plot-{panel.id}">{options}</select></label>\n'
        f'<script type="application/json" id="ledger-data-{panel.id}">{payload}</script>\n'
        f"<script>{_PICKER_JS.replace('@ID@', panel.id)}</script>\n"
    )
    return fig, picker, step, True


def pick_ledger_steps(data: DashboardData, chosen: int) -> list[int]:
    """Steps with a ledger, most worth offering first: ``chosen``, then the kinds of
    :data:`~shopsim_metrics.dashboards.data.LEDGER_KINDS` in turn (each best first), then the rest, latest first.
    """
    index = {rid: i for i, rid in enumerate(data.rollout_ids)}
    cols = {n: data.columns.get(n) for n in ("wave_count", "terminated", "wasted_sample_fraction")}

    def values(step: int) -> dict[str, Any]:
        i = index.get(step)
        return {n: (c[i] if c is not None and i is not None else None) for n, c in cols.items()}

    by_kind: dict[str, list[tuple[tuple[float, int], int]]] = {kind: [] for kind in LEDGER_KINDS}
    for step in data.ledger_steps():
        v = values(step)
        for kind in (*ledger_kinds(v), "latest"):
            by_kind[kind].append((ledger_score(kind, step, v), step))
    queues = [[step for _, step in sorted(entries)] for entries in by_kind.values()]  # best last: pop()
    order = [chosen]
    seen = {chosen}
    while any(queues):
        for queue in queues:
            while queue:
                step = queue.pop()
                if step not in seen:
                    seen.add(step)
                    order.append(step)
                    break
    return order


def _option_text(step: int, data: DashboardData) -> str:
    values = data.values_at(step)
    parts = [] if values.get("wave_count") is None else [_waves_text(values["wave_count"])]  # none: fully-async
    if values.get("terminated") is True:
        parts.append("terminated")
    waste = values.get("wasted_sample_fraction")
    if is_number(waste):
        parts.append(f"waste {waste:.2f}")
    return f"step {step} ({', '.join(parts)})" if parts else f"step {step}"


def safe_json(value: Any) -> str:
    """JSON that is safe inside an HTML ``<script>``: ``<``, ``>``, ``&``, U+2028 and U+2029 are escaped.

    Example:
        >>> print(safe_json({"group_index": "<!--<script>&"}))
        {"group_index":"\\u003c!--\\u003cscript\\u003e\\u0026"}
        >>> safe_json({"y": [1.5, float("nan"), None]})  # NaN is not JSON: drawn as a gap
        '{"y":[1.5,null,null]}'
    """
    try:
        text = json.dumps(value, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError):  # NaN, numpy or date values: plotly's encoder writes NaN as null
        from plotly.io.json import to_json_plotly

        text = to_json_plotly(value)
    return (text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
            .replace("\u2028", "\\u2028").replace("\u2029", "\\u2029"))


def plot_div(figure: dict[str, Any], div_id: str) -> str:
    """A plain plotly JSON figure as a ``<div>`` drawn by ``Plotly.newPlot`` with the page's template (see
    :func:`template_json`), its JSON embedded safely (see :func:`safe_json`)."""
    payload = safe_json({"data": figure.get("data", []), "layout": figure.get("layout", {}), "config": _PLOT_CONFIG})
    figure_id = f"{div_id}-figure"
    return (
        f'<div id="{_esc(div_id)}" class="plotly-graph-div" style="height:360px; width:100%;"></div>\n'
        f'<script type="application/json" id="{_esc(figure_id)}">{payload}</script>\n'
        f"<script>DRAWS.push(PLOTLY_READY.then(function () {{"
        f" var f = JSON.parse(document.getElementById({safe_json(figure_id)}).textContent);"
        f" f.layout.template = PAGE_TEMPLATE; return Plotly.newPlot({safe_json(div_id)}, f.data, f.layout, f.config);"
        f" }}));</script>"
    )


def template_json(name: str = TEMPLATE) -> str:
    """Plotly's template ``name`` (layout and per-trace-type defaults) as safe JSON: the page embeds it once
    and every figure draws with it, instead of carrying a copy each.

    Example:
        >>> json.loads(template_json())["layout"]["plot_bgcolor"]
        'white'
    """
    import plotly.io as pio

    return safe_json(pio.templates[name].to_plotly_json())


# --- page ---------------------------------------------------------------------------------------


def run_modes(data: DashboardData) -> list[tuple[str, str]]:
    """The run's knobs and modes as the header shows them, read from its latest record.

    Example:
        >>> run_modes(DashboardData(steps=[{"rollout_id": 0, "rollout_batch_size": 16, "n_samples_per_prompt": 8,
        ...     "over_sampling_batch_size": 32, "skipped_prompt_count": 2, "skip_p_easy": None,
        ...     "loop_state_source": "slime"}]))
        [('knobs', 'rollout_batch_size 16, n_samples_per_prompt 8, over_sampling_batch_size 32'), ('prompt skip', 'predictive'), ('rollout', 'synchronous'), ('episodes', 'single-turn')]
    """
    def latest(name: str) -> Any:
        return next((v for v in reversed(data.column(name)) if v is not None), None)

    knobs = ", ".join(f"{k} {latest(k)}" for k in ("rollout_batch_size", "n_samples_per_prompt",
                                                   "over_sampling_batch_size") if latest(k) is not None)
    skip = ("off" if latest("skipped_prompt_count") is None
            else "greso" if latest("skip_p_easy") is not None else "predictive")
    rollout = "fully-async" if "fully_async" in data.column("loop_state_source") else "synchronous"
    turns = latest("turn_count_source")
    episodes = "single-turn" if latest("episode_count") is None else "agent" + (f" (turns from {turns})" if turns else "")
    return [("knobs", knobs or "unknown"), ("prompt skip", skip), ("rollout", rollout), ("episodes", episodes)]


def _summary_html(data: DashboardData) -> str:
    ids = data.step_ids()
    waves = [w for w in data.column("wave_count") if is_number(w)]
    multi = sum(1 for w in waves if w >= 2)
    terminated = _terminated_steps(data)
    shown = ", ".join(map(str, terminated[-10:])) + (f" and {len(terminated) - 10} earlier" if len(terminated) > 10 else "")
    items = [
        ("source", data.source),
        ("steps", f"{len(ids)}" + (f" ({min(ids)} to {max(ids)})" if ids else "")),
        ("multi-wave steps", f"{multi}" + (f" (max {max(waves)} waves)" if waves else "")),
        ("terminated", shown if terminated else "no"),
        ("ledger", "present" if data.ledgers is not None else "absent (only in steps.jsonl)"),
        *run_modes(data),
    ]
    if len(ids) > MAX_POINTS:
        items.append(("drawing", f"downsampled to at most {MAX_POINTS:,} points per trace"))
    alerts = step_alerts(data)
    levels = {level: sum(1 for a in alerts if a[1] == level) for level in dict.fromkeys(a[1] for a in alerts)}
    items.append(("alerts", ", ".join(f"{n} {level}" for level, n in levels.items()) if alerts else "none"))
    cells = "".join(f"<div><span>{_esc(k)}</span><b>{_esc(v)}</b></div>" for k, v in items)
    notes = "".join(f'<p class="note">{_esc(note)}</p>' for note in data.notes)
    return f'<div class="summary">{cells}</div>{notes}{_alerts_html(alerts)}'


MAX_LISTED_ALERTS = 20
"""The header lists the latest alerts, at most this many (every alert stays in the records)."""


def _alerts_html(alerts: list[tuple[int, str, str, str]]) -> str:
    """The list of the run's alerts under the header (the latest :data:`MAX_LISTED_ALERTS`)."""
    if not alerts:
        return ""
    shown = alerts[-MAX_LISTED_ALERTS:]
    more = (f'<p class="note">the latest {len(shown)} of {len(alerts)} alerts; every one is in the records '
            "(field <code>alerts</code>)</p>") if len(shown) < len(alerts) else ""
    items = "".join(
        f'<li data-step="{step}" data-level="{_esc(level)}"><b>step {step} [{_esc(level)}]</b> {_esc(title)}: '
        f"{_esc(text)}</li>" for step, level, title, text in shown)
    return f'<div id="alerts" class="alerts"><h2 class="section">Alerts</h2>{more}<ul>{items}</ul></div>'


def _waves_text(count: int) -> str:
    return f"{count} wave{'' if count == 1 else 's'}"


def _terminated_steps(data: DashboardData) -> list[int]:
    return [rid for rid, flag in zip(data.rollout_ids, data.column("terminated")) if flag is True or flag == 1]


def _layout(*, x_title: str, y_title: str) -> dict[str, Any]:
    """The layout every per-step panel shares (plain plotly JSON; the template comes from the page)."""
    return {
        "height": 360, "margin": {"l": 55, "r": 15, "t": 30, "b": 45}, "legend": {"orientation": "h", "y": -0.22},
        "xaxis": {"title": {"text": x_title}, "automargin": True},  # the margins grow to fit the titles and ticks
        "yaxis": {"title": {"text": y_title}, "automargin": True}, "hovermode": "closest",
    }


def _num(v: Any) -> float | None:
    if v is None or isinstance(v, bool):
        return None if v is None else float(v)
    return v


def _esc(text: Any) -> str:
    return _html.escape(str(text), quote=True)


_PICKER_JS = """
(function () {
  var select = document.getElementById("pick-@ID@");
  var figures = JSON.parse(document.getElementById("ledger-data-@ID@").textContent);
  select.addEventListener("change", function () {
    var fig = figures[select.value];
    var div = document.getElementById(select.dataset.plot);
    var layout = Object.assign({}, fig.layout, {template: div.layout.template});
    Plotly.react(div, fig.data, layout);
    div.closest("section").dataset.ledgerStep = select.value;
  });
})();
"""

_CSS = """
body { font-family: -apple-system, "Segoe UI", Roboto, sans-serif; margin: 0 24px 40px; color: #222; }
h1 { font-size: 22px; margin: 18px 0 6px; }
h2.section { font-size: 17px; margin: 26px 0 8px; border-bottom: 1px solid #ddd; padding-bottom: 4px; }
.summary { display: flex; flex-wrap: wrap; gap: 18px; font-size: 13px; }
.summary div { display: flex; flex-direction: column; } .summary span { color: #777; }
.grid { display: grid; grid-template-columns: repeat(2, minmax(0, 1fr)); gap: 18px; }
@media (max-width: 1100px) { .grid { grid-template-columns: minmax(0, 1fr); } }
.panel { border: 1px solid #e3e3e3; border-radius: 6px; padding: 8px 10px; }
.panel.wide { grid-column: 1 / -1; }
.panel h3 { font-size: 15px; margin: 4px 0; } .desc, .note { font-size: 12px; color: #555; margin: 2px 0 6px; }
.note { color: #8a5a00; } .picker { font-size: 13px; }
.alerts ul { font-size: 13px; margin: 4px 0; padding-left: 18px; } .alerts li[data-level="ERROR"] b { color: #d62728; }
.alerts li b { color: #a0307c; }
"""

def page_start(title: str, css: str) -> str:
    """How every page of the dashboard opens: doctype, charset, ``title`` (escaped already) and ``css``, head left open."""
    return f'<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n<title>{title}</title>\n<style>{css}</style>\n'


_PAGE = """{start}<script type="application/octet-stream" id="plotly-js-gzip">{plotlyjs}</script>
<script>
var DRAWS = [];
var PLOTLY_READY = (async function () {{  // plotly.js, inline and gzip-compressed: unpacked by the browser
  var packed = atob(document.getElementById("plotly-js-gzip").textContent);
  var bytes = Uint8Array.from(packed, function (c) {{ return c.charCodeAt(0); }});
  var stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"));
  (0, eval)(await new Response(stream).text());
}})();
PLOTLY_READY.catch(function (error) {{
  var note = document.getElementById("no-plotly");
  note.hidden = false;
  note.textContent += " (" + error + ")";
}});
</script>
<script type="application/json" id="plotly-template">{template}</script>
<script>var PAGE_TEMPLATE = JSON.parse(document.getElementById("plotly-template").textContent);</script>
</head>
<body data-panel-count="{panel_count}">
<h1>{title}</h1>
<p class="note" id="no-plotly" hidden>This browser cannot unpack the page's plotly.js (it needs DecompressionStream:
Chrome or Edge 80, Firefox 113, Safari 16.4 or later), so no chart is drawn.</p>
{summary}
{sections}
<script>var PAGE_DRAWN = Promise.all(DRAWS);</script>
</body>
</html>
"""
