"""The offline HTML dashboard in a real headless browser (Debian's chromium, via the DevTools protocol).

Checked from the page itself: no console error or uncaught exception while it loads, every panel of
the spec drawn by plotly (an SVG with its traces), the ledger step picker redraws the panel. A
full-page screenshot is kept under ``test-artifacts/`` (gitignored). Skipped, with the reason, when
chromium or ``websocket-client`` is missing (``make browser`` installs chromium).
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from dashboard_records import make_records
from shopsim_metrics.record import contract
from shopsim_metrics.dashboards.data import load_dashboard_data
from shopsim_metrics.dashboards.html import unshown_series, write_html_dashboard
from shopsim_metrics.dashboards.spec import dashboard_spec

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parents[1]
ARTIFACTS = ROOT / "test-artifacts"
CHROMIUM = os.environ.get("CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
FLAGS = (
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--disable-dev-shm-usage", "--hide-scrollbars", "--window-size=1400,1000", "--remote-debugging-port=0",
)
SPEC = dashboard_spec()


def _skip_reason() -> str | None:
    if not (Path(CHROMIUM).is_file() and os.access(CHROMIUM, os.X_OK)):
        return f"chromium not found at {CHROMIUM}: install it with `make browser` (apt-get install chromium)"
    try:
        import websocket  # noqa: F401
    except ImportError:
        return "websocket-client is not installed: pip install -e '.[dev]'"
    return None


class DevTools:
    """A minimal DevTools-protocol client for one page target: commands, and the events seen so far."""

    def __init__(self, ws_url: str) -> None:
        import websocket

        self.ws = websocket.create_connection(ws_url, timeout=30, suppress_origin=True)
        self.events: list[dict[str, Any]] = []
        self._id = 0

    def send(self, method: str, **params: Any) -> dict[str, Any]:
        self._id += 1
        self.ws.send(json.dumps({"id": self._id, "method": method, "params": params}))
        while True:
            msg = json.loads(self.ws.recv())
            if msg.get("id") == self._id:
                if "error" in msg:
                    raise RuntimeError(f"DevTools {method} failed: {msg['error']}")
                return msg.get("result", {})
            if "method" in msg:
                self.events.append(msg)

    def wait_for(self, method: str, timeout: float = 30.0) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for event in self.events:
                if event["method"] == method:
                    return event
            self.ws.settimeout(max(0.1, deadline - time.monotonic()))
            msg = json.loads(self.ws.recv())
            if "method" in msg:
                self.events.append(msg)
        raise TimeoutError(f"no {method} within {timeout}s")

    def evaluate(self, expression: str) -> Any:
        result = self.send("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in result:
            raise RuntimeError(f"page script failed: {result['exceptionDetails']}")
        return result["result"].get("value")

    def errors(self) -> list[str]:
        """Console errors, uncaught exceptions and error log entries seen so far."""
        out = []
        for e in self.events:
            p = e.get("params", {})
            if e["method"] == "Runtime.exceptionThrown":
                out.append(f"exception: {p['exceptionDetails'].get('exception', {}).get('description') or p['exceptionDetails'].get('text')}")
            elif e["method"] == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
                out.append("console.error: " + " ".join(str(a.get("value", a.get("description"))) for a in p.get("args", [])))
            elif e["method"] == "Log.entryAdded" and p.get("entry", {}).get("level") == "error":
                out.append(f"log: {p['entry'].get('text')} {p['entry'].get('url', '')}")
        return out

    def close(self) -> None:
        self.ws.close()


@pytest.fixture
def browser():
    reason = _skip_reason()
    if reason:
        pytest.skip(reason)
    profile = tempfile.mkdtemp(prefix="shopsim-chromium-")
    proc = subprocess.Popen([CHROMIUM, *FLAGS, f"--user-data-dir={profile}", "about:blank"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        port_file = Path(profile) / "DevToolsActivePort"
        deadline = time.monotonic() + 30
        while not (port_file.exists() and port_file.read_text().strip()):
            if proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"chromium did not start (exit code {proc.poll()}): no DevToolsActivePort in {profile}")
            time.sleep(0.1)
        port = int(port_file.read_text().split()[0])
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=10) as resp:
            pages = [t for t in json.load(resp) if t["type"] == "page"]
        tools = DevTools(pages[0]["webSocketDebuggerUrl"])
        yield tools
        tools.close()
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
        shutil.rmtree(profile, ignore_errors=True)


def _open(tools: DevTools, path: Path) -> None:
    for domain in ("Runtime", "Log", "Page"):
        tools.send(f"{domain}.enable")
    tools.send("Page.navigate", url=path.resolve().as_uri())
    tools.wait_for("Page.loadEventFired")
    # the page unpacks plotly.js, then draws (PAGE_DRAWN); give late work (fonts, resize) a moment
    tools.evaluate("(window.PAGE_DRAWN || Promise.resolve()).then(() => "
                   "new Promise(r => requestAnimationFrame(() => setTimeout(r, 300))))")


_PANELS_STATE_JS = """
Array.from(document.querySelectorAll("section.panel")).map(s => {
  const plot = s.querySelector(".js-plotly-plot");
  return {
    id: s.dataset.panelId,
    drawn: !!plot && !!plot._fullLayout && plot.querySelectorAll("svg.main-svg").length > 0,
    traces: plot && plot._fullData ? plot._fullData.length : 0,
    points: plot ? plot.querySelectorAll("g.trace path.point, g.trace path.js-line, g.trace .point path").length : 0,
    width: plot ? plot.getBoundingClientRect().width : 0,
    height: plot ? plot.getBoundingClientRect().height : 0,
    ledgerStep: s.dataset.ledgerStep || null,
    off: s.dataset.off === "true",
  };
})
"""


def has_points(panel: Any, state: dict[str, Any]) -> bool:
    """A drawn panel has points, unless the page says it is off and it is one of the fully-async panels or of the
    skipping data source's (the records here are of the synchronous path, without skipping)."""
    fully_async_only = set(panel.keys()) <= {*contract.FULLY_ASYNC_FIELDS, "train_group_count"}
    skipping_only = set(panel.keys()) <= {*contract.PROMPT_SKIP_FIELDS, "accepted_group_count"}
    return state["points"] > 0 or (state["off"] and (fully_async_only or skipping_only))


def _screenshot(tools: DevTools, name: str) -> Path:
    height = int(tools.evaluate("document.documentElement.scrollHeight"))
    tools.send("Emulation.setDeviceMetricsOverride", width=1400, height=height, deviceScaleFactor=1, mobile=False)
    tools.evaluate("new Promise(r => setTimeout(r, 300))")  # let the responsive plots relayout
    shot = tools.send("Page.captureScreenshot", format="png", captureBeyondViewport=True)
    ARTIFACTS.mkdir(exist_ok=True)
    path = ARTIFACTS / name
    path.write_bytes(base64.b64decode(shot["data"]))
    return path


def test_dashboard_loads_without_errors_and_draws_every_panel(browser: DevTools, tmp_path: Path) -> None:
    records = make_records()
    page = write_html_dashboard(records, tmp_path / "dashboard.html", title="browser check")
    _open(browser, page)

    assert browser.evaluate("document.title") == "browser check"
    assert browser.evaluate("typeof Plotly") == "object", "plotly.js (inline) did not load"
    state = {p["id"]: p for p in browser.evaluate(_PANELS_STATE_JS)}
    assert set(state) == {p.id for p in SPEC.panels}, "a panel of the spec is missing from the page"
    data = load_dashboard_data(records)
    for panel in SPEC.panels:
        s = state[panel.id]
        assert s["drawn"], f"panel {panel.id} not drawn"
        shown = len(panel.series) - len(unshown_series(panel, data))  # a series no step carries is left out
        assert s["traces"] >= shown, f"panel {panel.id}: {s['traces']} traces"
        assert s["width"] > 300 and s["height"] > 200, (panel.id, s)
        assert has_points(panel, s), (panel.id, s)
    # the stacked outcome bars: one bar per step and outcome series
    bars = browser.evaluate('document.querySelectorAll("#plot-outcomes g.trace.bars g.point path").length')
    assert bars >= len(records) * 4

    # the ledger picker redraws the panel for another step
    multi = [r.rollout_id for r in records if r.wave_count >= 2]
    assert state["remaining_ledger"]["ledgerStep"] == str(multi[-1])
    other = next(r for r in records if r.wave_count == 1 and not r.terminated)
    redrawn = browser.evaluate(f"""(() => {{
      const sel = document.getElementById("pick-remaining_ledger");
      sel.value = "{other.rollout_id}";
      sel.dispatchEvent(new Event("change"));
      const plot = document.getElementById("plot-remaining_ledger");
      const path = plot._fullData.find(t => t.name === "remaining");
      return {{step: plot.closest("section").dataset.ledgerStep, title: plot._fullLayout.title.text,
               y: Array.from(path.y)}};
    }})()""")
    assert redrawn == {"step": str(other.rollout_id), "title": f"step {other.rollout_id}",
                       "y": [d.remaining_before for d in other.decisions]}

    shot = _screenshot(browser, "dashboard.png")
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 50_000
    assert browser.errors() == [], browser.errors()


def test_dashboard_without_ledger_loads_cleanly(browser: DevTools, tmp_path: Path) -> None:
    """A source without ledger rows (e.g. no judged group yet): the ledger panel draws its per-step summary."""
    from shopsim_metrics.dashboards.data import DashboardData, load_dashboard_data

    data = load_dashboard_data(make_records())
    no_ledger = DashboardData(steps=data.steps, ledgers=None, source="history only", ledger_note="ledger elsewhere")
    page = write_html_dashboard(no_ledger, tmp_path / "no_ledger.html")
    _open(browser, page)
    state = {p["id"]: p for p in browser.evaluate(_PANELS_STATE_JS)}
    assert set(state) == {p.id for p in SPEC.panels} and all(s["drawn"] for s in state.values())
    assert browser.evaluate('document.querySelector("#panel-remaining_ledger").dataset.ledger') == "absent"
    _screenshot(browser, "dashboard_no_ledger.png")
    assert browser.errors() == [], browser.errors()


def test_the_error_check_sees_console_errors_and_exceptions(browser: DevTools, tmp_path: Path) -> None:
    """Control: the clean-page assertions above would catch a broken page."""
    page = tmp_path / "broken.html"
    page.write_text('<!DOCTYPE html><html><body><script>console.error("boom");</script>'
                    '<script>undefinedFunction();</script></body></html>')
    _open(browser, page)
    errors = browser.errors()
    assert any("console.error: boom" in e for e in errors), errors
    assert any("undefinedFunction" in e for e in errors), errors


HOSTILE = [
    "<!--<script>",
    "</script><script>window.__injected = 'group_index'</script>",
    '<img src=x onerror="window.__injected = \'img\'">',
    "\u2028\u2029 line separators ]]> & &amp; </title>",
]


def _hostile_run(tmp_path: Path) -> Path:
    """A steps.jsonl whose strings try to break out of the page: ledger fields, step fields, the path."""
    records = make_records()
    run = tmp_path / '<img src=x onerror="window.__injected=\'path\'">' / "run"
    run.mkdir(parents=True)
    lines = []
    for rec in records:
        data = rec.to_dict()
        data["loop_state_source"] = HOSTILE[1]
        for k, row in enumerate(data["decisions"]):
            row["group_index"] = HOSTILE[k % len(HOSTILE)]
            row["failed_check"] = HOSTILE[(k + 1) % len(HOSTILE)]
            row["reason"] = HOSTILE[(k + 2) % len(HOSTILE)]
        lines.append(json.dumps(data))
    lines.insert(2, json.dumps(HOSTILE))  # a foreign line: skipped and counted
    (run / "steps.jsonl").write_text("\n".join(lines) + "\n")
    return run


def test_hostile_titles_values_and_paths_draw_every_panel_and_run_no_script(browser: DevTools, tmp_path: Path) -> None:
    run = _hostile_run(tmp_path)
    title = "</title><script>window.__injected = 'title'</script><!--"
    page = write_html_dashboard(run, tmp_path / "hostile.html", title=title)
    text = page.read_text()
    assert "<!--<script>" not in text and "</script><script>window.__injected" not in text
    _open(browser, page)

    assert browser.evaluate("typeof window.__injected") == "undefined", browser.evaluate("window.__injected")
    assert browser.evaluate("document.title") == title
    state = {p["id"]: p for p in browser.evaluate(_PANELS_STATE_JS)}
    assert set(state) == {p.id for p in SPEC.panels}
    for panel in SPEC.panels:
        assert state[panel.id]["drawn"] and has_points(panel, state[panel.id]), (panel.id, state[panel.id])
    # the hostile values arrive as text: in the ledger's hover labels, verbatim
    hover = browser.evaluate("""(() => {
      const plot = document.getElementById("plot-remaining_ledger");
      return plot._fullData.filter(t => t.text).map(t => t.text).flat().join("\\n");
    })()""")
    assert "group_index: &lt;!--&lt;script&gt;" in hover
    # the picker still redraws, and nothing ran on the way
    browser.evaluate("""(() => {
      const sel = document.getElementById("pick-remaining_ledger");
      sel.value = sel.options[0].value; sel.dispatchEvent(new Event("change"));
    })()""")
    assert browser.evaluate("typeof window.__injected") == "undefined"
    summary = browser.evaluate('document.querySelector(".summary").textContent')
    assert "onerror" in summary  # the path, shown as text
    notes = browser.evaluate('Array.from(document.querySelectorAll("p.note")).map(p => p.textContent).join(" ")')
    assert "skipped 1 bad line" in notes
    _screenshot(browser, "dashboard_hostile.png")
    assert browser.errors() == [], browser.errors()


def test_alerts_are_on_the_timeline_and_the_streak_panel_draws_threshold_and_limit(browser: DevTools,
                                                                                  tmp_path: Path) -> None:
    """The records' alerts: listed under the header, a WARN mark on every per-step chart at its step; the streak
    chart's two reference lines (warning threshold, limit) are drawn at their values."""
    records = make_records()
    run = tmp_path / "run"
    run.mkdir()
    (run / "steps.jsonl").write_text("".join(json.dumps(r.to_dict()) + "\n" for r in records))
    page = write_html_dashboard(run, tmp_path / "alerts.html")  # through the records file, as a user would
    _open(browser, page)
    listed = browser.evaluate("""Array.from(document.querySelectorAll("#alerts li")).map(li =>
      ({step: li.dataset.step, level: li.dataset.level, text: li.textContent}))""")
    expected = [(r.rollout_id, a["level"]) for r in records for a in r.alerts]
    assert [(int(a["step"]), a["level"]) for a in listed] == expected and len(expected) == 2
    assert "piling up at rollout step 6" in listed[0]["text"]
    warn_step = expected[0][0]
    marks = browser.evaluate("""(() => {
      const out = {};
      for (const div of document.querySelectorAll("section[data-panel-kind='line'] .js-plotly-plot,"
                                                   + "section[data-panel-kind='stacked_bar'] .js-plotly-plot")) {
        out[div.id] = (div._fullLayout.annotations || []).filter(a => a.text === "WARN").map(a => a.x);
      }
      return out;
    })()""")
    assert marks and all(xs == [warn_step] for xs in marks.values()), marks
    streak = browser.evaluate("""(() => {
      const plot = document.getElementById("plot-technical_streak");
      return plot._fullData.map(t => ({name: t.name, dash: t.line && t.line.dash, y: Array.from(t.y || [])}));
    })()""")
    lines = {t["name"]: t for t in streak}
    assert set(lines["warning threshold"]["y"]) == {4} and set(lines["limit"]["y"]) == {8}
    assert lines["warning threshold"]["dash"] == "dash" == lines["limit"]["dash"]
    _screenshot(browser, "dashboard_alerts.png")
    assert browser.errors() == [], browser.errors()


def test_panels_of_features_the_run_does_not_use_say_off_and_the_header_shows_the_knobs(browser: DevTools,
                                                                                       tmp_path: Path) -> None:
    """A run without prompt skipping, on the synchronous path: the Skipping panels and the fully-async panels
    say "Off in this run" (visible), the others draw; the header names the knobs and the modes."""
    from shopsim_metrics.record.records import FULLY_ASYNC, PROMPT_SKIP, step_fields

    records = make_records()
    spec = dashboard_spec()
    optional = set(step_fields(PROMPT_SKIP)) | set(step_fields(FULLY_ASYNC))
    expected_off = {p.id for p in spec.panels if p.source == "steps" and any(s.key in optional for s in p.series)}
    assert expected_off  # the spec has such panels
    page = write_html_dashboard(load_dashboard_data(records), tmp_path / "off.html")
    _open(browser, page)
    state = browser.evaluate("""Array.from(document.querySelectorAll("section.panel")).map(s => ({
      id: s.dataset.panelId, off: s.dataset.off === "true",
      note: (s.querySelector("p.note.off") || {}).innerText || "",
      visible: !!s.querySelector("p.note.off") && s.querySelector("p.note.off").getBoundingClientRect().height > 0}))""")
    off = {p["id"] for p in state if p["off"]}
    assert expected_off <= off and "waves" not in off, (expected_off, off)
    assert all(p["visible"] and p["note"].startswith("Off in this run") for p in state if p["off"])
    assert any("prompt skipping is off" in p["note"] for p in state)
    header = browser.evaluate("document.querySelector('.summary').innerText")
    r = records[-1]
    assert f"rollout_batch_size {r.rollout_batch_size}" in header and f"over_sampling_batch_size {r.over_sampling_batch_size}" in header
    assert "prompt skip" in header and "off" in header and "synchronous" in header
    assert browser.errors() == [], browser.errors()


def test_a_run_that_skips_draws_its_skipping_panels_and_names_its_rule(browser: DevTools, tmp_path: Path) -> None:
    from dataclasses import replace

    skipping = [replace(rec, skipped_prompt_count=2, skipped_then_generated_group_count=1,
                        skipped_then_spread_group_count=0, skip_p_easy=0.5, skip_p_hard=0.5) for rec in make_records()]
    page = write_html_dashboard(load_dashboard_data(skipping), tmp_path / "on.html")
    _open(browser, page)
    off = browser.evaluate("""Array.from(document.querySelectorAll("section.panel"))
      .filter(s => s.dataset.off === "true").map(s => s.dataset.panelId)""")
    assert "skipped_prompts" not in off and "skip_p" not in off, off
    assert "greso" in browser.evaluate("document.querySelector('.summary').innerText")
    assert browser.errors() == [], browser.errors()


def test_the_prompts_page_sorts_pages_and_opens_a_prompts_visits(browser: DevTools, tmp_path: Path) -> None:
    from test_prompts_page import _trace

    from shopsim_metrics.dashboards.prompts_page import ROWS_PER_PAGE, write_prompts_page

    trace = _trace(1000, 5)
    page = write_prompts_page(trace, tmp_path / "prompts.html", title="prompts check")
    _open(browser, page)
    assert browser.evaluate("document.title") == "prompts check"
    rows = 'document.querySelectorAll("#prompts tbody tr")'
    assert browser.evaluate(f"{rows}.length") == ROWS_PER_PAGE
    wasted = browser.evaluate(f"Array.from({rows}).map(r => parseInt(r.cells[4].textContent.replace(/,/g, '')))")
    assert wasted == sorted(wasted, reverse=True) and wasted[0] > 0  # most wasteful first
    browser.evaluate('document.querySelector("th[data-sort=key]").click()')
    keys = browser.evaluate(f"Array.from({rows}).map(r => r.cells[0].textContent)")
    assert keys == sorted(trace.prompts)[:ROWS_PER_PAGE]
    browser.evaluate('document.getElementById("next").click()')
    assert browser.evaluate(f"{rows}[0].cells[0].textContent") == sorted(trace.prompts)[ROWS_PER_PAGE]
    browser.evaluate(f"{rows}[0].click()")
    assert browser.evaluate('document.querySelectorAll("#detail circle.visit").length') == 5
    assert browser.evaluate('document.querySelector("#detail h3").textContent') == sorted(trace.prompts)[ROWS_PER_PAGE]
    browser.evaluate('const f = document.getElementById("filter"); f.value = "' + trace.prompts[7][-4:] +
                     '"; f.dispatchEvent(new Event("input"))')
    assert trace.prompts[7] in browser.evaluate(f"Array.from({rows}).map(r => r.cells[0].textContent)")
    assert browser.errors() == []
    _screenshot(browser, "prompts_page.png")



_LAYOUT_JS = """
(() => {
  const rows = {};
  for (const s of document.querySelectorAll("section.panel")) {
    const r = s.getBoundingClientRect();
    (rows[Math.round(r.top)] = rows[Math.round(r.top)] || []).push(r.width);
  }
  const grid = document.querySelector(".grid").getBoundingClientRect().width;
  const titles = Array.from(document.querySelectorAll("section.panel")).map(s => {
    const plot = s.querySelector(".js-plotly-plot");
    const title = plot.querySelector(".g-ytitle text");
    const ticks = Array.from(plot.querySelectorAll(".yaxislayer-above .ytick text")).map(t => t.getBoundingClientRect());
    if (!title || !ticks.length) return null;
    const t = title.getBoundingClientRect(), p = plot.getBoundingClientRect();
    return {id: s.dataset.panelId, inside: t.left >= p.left - 0.5 && t.top >= p.top - 0.5 && t.bottom <= p.bottom + 0.5,
            clear: t.right <= Math.min(...ticks.map(r => r.left)) + 0.5};
  }).filter(x => x);
  return {rows: Object.values(rows).map(ws => ws.reduce((a, b) => a + b, 0) / grid), titles: titles};
})()
"""


def test_every_row_is_full_and_every_axis_title_is_whole(browser: DevTools, tmp_path: Path) -> None:
    """At the width of a laptop screen: no row half empty, no y-axis title cut at the edge or under its ticks."""
    from shopsim_metrics.simulator.demo import demo_config
    from shopsim_metrics.simulator.loop import simulate

    page = write_html_dashboard(simulate(demo_config(steps=40)).records, tmp_path / "demo.html")
    _open(browser, page)
    browser.send("Emulation.setDeviceMetricsOverride", width=1400, height=1000, deviceScaleFactor=1, mobile=False)
    browser.evaluate("new Promise(r => setTimeout(r, 500))")  # the responsive plots relayout
    layout = browser.evaluate(_LAYOUT_JS)
    assert all(share > 0.95 for share in layout["rows"]), layout["rows"]
    assert len(layout["titles"]) >= len(SPEC.panels) - 2
    assert all(t["inside"] and t["clear"] for t in layout["titles"]), [t for t in layout["titles"]
                                                                      if not (t["inside"] and t["clear"])]
    assert browser.errors() == [], browser.errors()
