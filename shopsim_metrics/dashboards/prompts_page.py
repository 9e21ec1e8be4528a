"""The prompts page of the offline dashboard: each prompt's success across steps, sortable, with a drill-down.

Drawn from a run's per-prompt trace (:class:`~shopsim_metrics.outcomes.trace.Trace`: this package's
records, or slime's and verl's rollout dumps through :mod:`shopsim_metrics.outcomes`), so the page says the
same of a prompt as ``replay`` and ``prompts`` do. One row per prompt: its visits, zero-std visits, last
verdict, tokens and wasted tokens (on zero-std visits), success rate and a sparkline of its success
fraction visit by visit; sortable by each column, filtered by key; a click opens the prompt's visits
(step, successes of n, verdict, tokens) as a chart and a table.

Made for big runs: the page is plain HTML, CSS and a little JavaScript (no plotly), and draws only the
rows on screen (:data:`ROWS_PER_PAGE` at a time), so 100,000 prompts sort and page at once. The data is
columns of compact text: per prompt its summary, and its visits as short strings (steps as base-36
deltas, successes as base-36 digits, tokens as base-36 numbers). The visits of every prompt are
embedded while they fit :data:`VISITS_BUDGET` bytes; beyond it the most wasteful prompts keep theirs
(then the most zero-std visits) and the page says how many did; every prompt keeps its summary row.

Example:
    >>> import tempfile, pathlib
    >>> from shopsim_metrics.outcomes.trace import trace_from_mapping
    >>> out = pathlib.Path(tempfile.mkdtemp()) / "prompts.html"
    >>> page = write_prompts_page(trace_from_mapping({"a": [0.0, 0.5], "b": [1.0]}, 2), out)
    >>> data = read_page_data(page.read_text())
    >>> data["keys"], data["last"], decode_visits(data, 0)
    (['a', 'b'], 'SP', [(None, 0, None), (None, 1, None)])
"""

from __future__ import annotations

import html as _html
import json
import os
import re
from pathlib import Path
from typing import Any

from shopsim_metrics.dashboards.html import page_start, safe_json
from shopsim_metrics.judging.group_judgement import SPREAD, ZERO_STD
from shopsim_metrics.judging.verdicts import verdict_of
from shopsim_metrics.prompts.history import VERDICT_LETTERS
from shopsim_metrics.outcomes.trace import Trace, Visit

ROWS_PER_PAGE = 200
"""Rows the page draws at a time (the rest are a click away): what keeps 100,000 prompts responsive."""

VISITS_BUDGET = 12_000_000
"""Bytes of per-visit text the page may embed (the summary rows come on top): the page stays under 20 MB."""

_DIGITS = "0123456789abcdefghijklmnopqrstuvwxyz"

TEXTS_BUDGET = 4_000_000
"""Characters of prompt text the page may embed in all: each prompt's text is cut to its share (at most
:data:`TEXT_CHARS`), so a dump of 100,000 prompts still makes a page under 20 MB."""

TEXT_CHARS = 160
"""The most of one prompt's text the page shows (its key, on hover, names it whole)."""


def page_texts(trace: Trace, keys: list[str], budget: int = TEXTS_BUDGET) -> list[str] | None:
    """Each prompt's text as the page shows it (None: the source holds none), cut to an equal share of ``budget``.

    Example:
        >>> from shopsim_metrics.outcomes.trace import trace_from_mapping
        >>> import dataclasses
        >>> trace = dataclasses.replace(trace_from_mapping({"a": [0.5], "b": [1.0]}, 2), texts={"a": "x" * 50})
        >>> page_texts(trace, ["a", "b"], budget=40)
        ['xxxxxxxxxxxxxxxxxxx…', '']
    """
    if not trace.texts:
        return None
    share = max(min(TEXT_CHARS, budget // max(len(keys), 1)), 1)
    texts = [trace.texts.get(key, "") for key in keys]
    return [text if len(text) <= share else text[:share - 1] + "…" for text in texts]


def base36(number: int) -> str:
    """A non-negative int in base 36 (the page's compact numbers).

    Example:
        >>> base36(0), base36(35), base36(1296)
        ('0', 'z', '100')
    """
    if number < 36:
        return _DIGITS[number]
    out = []
    while number:
        number, digit = divmod(number, 36)
        out.append(_DIGITS[digit])
    return "".join(reversed(out))


def visit_letter(visit: Visit, n: int) -> str:
    """A visit's verdict letter (S spread, P all-pass, F all-fail, O other zero-std), as the prompts table writes it."""
    return VERDICT_LETTERS[verdict_of(ZERO_STD if visit.zero_std else SPREAD, visit.successes, n)]


def page_data(trace: Trace, budget: int = VISITS_BUDGET) -> dict[str, Any]:
    """The page's data: summary columns for every prompt, visit strings while they fit ``budget`` (module docstring)."""
    n = trace.n_samples
    tokens_known = trace.tokens_recorded
    keys, visits, zero_std, wasted, tokens, successes, last = [], [], [], [], [], [], []
    steps_text, success_text, token_text, letters = [], [], [], []
    wide = n >= len(_DIGITS)  # successes as comma-separated numbers when one digit cannot hold them
    for key, row in zip(trace.prompts, trace.visits):
        keys.append(key)
        visits.append(len(row))
        zero_std.append(sum(v.zero_std for v in row))
        wasted.append(sum(v.tokens or 0 for v in row if v.zero_std) if tokens_known else 0)
        tokens.append(sum(v.tokens or 0 for v in row) if tokens_known else 0)
        successes.append(sum(v.successes for v in row))
        letters.append("".join(visit_letter(v, n) for v in row))
        last.append(letters[-1][-1])
        previous = 0
        deltas = []
        for visit in row:
            step = visit.step if visit.step is not None else previous
            deltas.append(base36(max(step - previous, 0)))
            previous = step
        steps_text.append(",".join(deltas) if row[0].step is not None else "")
        success_text.append((",".join if wide else "".join)(base36(v.successes) for v in row))
        token_text.append(",".join(base36(v.tokens or 0) for v in row) if tokens_known else "")
    sizes = [len(a) + len(b) + len(c) + len(d) + 12 for a, b, c, d in zip(steps_text, success_text, token_text, letters)]
    embedded = [True] * len(keys)
    if sum(sizes) > budget:  # the most wasteful prompts first, as many as fit
        embedded = [False] * len(keys)
        used = 0
        for i in sorted(range(len(keys)), key=lambda i: (-wasted[i], -zero_std[i], -visits[i], i)):
            used += sizes[i]
            if used > budget:
                break
            embedded[i] = True
    return {
        "n": n, "wide": wide, "tokens_known": tokens_known, "keys": keys, "visits": visits, "zero_std": zero_std,
        "wasted": wasted, "tokens": tokens, "successes": successes, "last": "".join(last),
        "steps": [s if e else None for s, e in zip(steps_text, embedded)],
        "succ": [s if e else None for s, e in zip(success_text, embedded)],
        "tok": [s if e else None for s, e in zip(token_text, embedded)],
        "verdicts": [s if e else None for s, e in zip(letters, embedded)],
        "embedded": sum(embedded),
        "texts": page_texts(trace, keys),
        "sort": "wasted" if tokens_known else "zero_std",  # the opening order: wasted tokens need recorded tokens
    }


def decode_visits(data: dict[str, Any], index: int) -> list[tuple[int | None, int, int | None]] | None:
    """Prompt ``index``'s visits ``(step, successes, tokens)`` from the page's data, as its JavaScript reads them
    (None: not embedded; their verdicts are ``data["verdicts"][index]``)."""
    if data["succ"][index] is None:
        return None
    succ = data["succ"][index]
    successes = [int(s, 36) for s in (succ.split(",") if data["wide"] else succ)]
    steps: list[int | None] = [None] * len(successes)
    if data["steps"][index]:
        total = 0
        steps = []
        for delta in data["steps"][index].split(","):
            total += int(delta, 36)
            steps.append(total)
    tokens: list[int | None] = ([int(t, 36) for t in data["tok"][index].split(",")] if data["tokens_known"]
                                else [None] * len(successes))
    return list(zip(steps, successes, tokens))


def read_page_data(page: str) -> dict[str, Any]:
    """The data a prompts page embeds (what its JavaScript reads)."""
    match = re.search(r'<script type="application/json" id="prompts-data">(.*?)</script>', page, re.S)
    if match is None:
        raise ValueError("not a prompts page: no prompts-data")
    return json.loads(match.group(1))


def render_prompts_page(trace: Trace, *, title: str = "Prompts", budget: int = VISITS_BUDGET,
                        back_link: str | None = None) -> str:
    """The page as a string (see the module docstring)."""
    data = page_data(trace, budget)
    payload = safe_json(data)
    zero_share = sum(data["zero_std"]) / max(sum(data["visits"]), 1)
    facts = [("source", trace.origin), ("prompts", f"{len(data['keys']):,}"), ("visits", f"{sum(data['visits']):,}"),
             ("n", str(trace.n_samples)), ("zero-std visits", f"{zero_share:.2f}"),
             ("tokens", "recorded" if data["tokens_known"] else "not recorded")]
    notes = list(trace.notes)
    if data["embedded"] < len(data["keys"]):
        notes.append(f"The visits of {data['embedded']:,} of {len(data['keys']):,} prompts are embedded (the most "
                     "wasteful first, to keep the page small); every prompt keeps its row. `shopsim-metrics prompts` "
                     "lists the rest.")
    cells = "".join(f"<div><span>{_esc(k)}</span><b>{_esc(v)}</b></div>" for k, v in facts)
    link = f'<p><a href="{_esc(back_link)}">&larr; the per-step dashboard</a></p>' if back_link else ""
    return _PAGE.format(start=page_start(_esc(title), _CSS), title=_esc(title), link=link, summary=cells,
                        n=trace.n_samples, text_note=_TEXT_NOTE if data["texts"] else "",
                        notes="".join(f'<p class="note">{_esc(note)}</p>' for note in notes),
                        payload=payload, script=_SCRIPT.replace("@ROWS@", str(ROWS_PER_PAGE)))


def write_prompts_page(trace: Trace, out_path: str | os.PathLike, **options: Any) -> Path:
    """Write :func:`render_prompts_page` to ``out_path``."""
    out = Path(out_path)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(render_prompts_page(trace, **options), encoding="utf-8")
    return out


def _esc(text: Any) -> str:
    return _html.escape(str(text), quote=True)


_TEXT_NOTE = "The prompt column shows each prompt's text as the source holds it (its key on hover). "
"""Said on the page when the source holds the prompts' texts (a dump)."""

_CSS = """
body { font-family: -apple-system, "Segoe UI", Roboto, sans-serif; margin: 0 24px 40px; color: #222; }
h1 { font-size: 22px; margin: 18px 0 6px; }
.summary { display: flex; flex-wrap: wrap; gap: 18px; font-size: 13px; margin-bottom: 8px; }
.summary div { display: flex; flex-direction: column; } .summary span { color: #777; }
.note { font-size: 12px; color: #8a5a00; margin: 2px 0 6px; }
.controls { font-size: 13px; margin: 10px 0; display: flex; gap: 12px; align-items: center; }
table { border-collapse: collapse; font-size: 12px; } th, td { padding: 3px 8px; text-align: right; }
th { cursor: pointer; border-bottom: 1px solid #bbb; user-select: none; } th.sorted { color: #1f77b4; }
td.key { text-align: left; font-family: monospace; max-width: 340px; overflow: hidden; text-overflow: ellipsis;
         white-space: nowrap; }
tbody tr:hover { background: #f3f7fb; cursor: pointer; } tbody tr.open { background: #e4eef8; }
.v-S { color: #2ca02c; } .v-P { color: #1f77b4; } .v-F { color: #d62728; } .v-O { color: #9467bd; }
#detail { border: 1px solid #e3e3e3; border-radius: 6px; padding: 8px 12px; margin: 12px 0; }
#detail h3 { font-size: 14px; margin: 4px 0; font-family: monospace; word-break: break-all; }
"""

_PAGE = """{start}</head>
<body>
<h1>{title}</h1>
{link}<div class="summary">{summary}</div>
{notes}
<p class="note">Each row is a prompt; its visits are the groups of it the run judged (technical groups left out).
{text_note}Verdicts: <b class="v-S">S</b> spread, <b class="v-P">P</b> all-pass, <b class="v-F">F</b> all-fail,
<b class="v-O">O</b> other zero-std. Wasted tokens: the tokens of its zero-std visits. Click a column to sort,
a row to see its visits.</p>
<div id="detail" hidden></div>
<div class="controls"><label>key or prompt contains <input id="filter" size="24"></label>
<button id="prev">&larr; previous</button><span id="position"></span><button id="next">next &rarr;</button></div>
<table id="prompts"><thead><tr>
<th data-sort="key">prompt</th><th data-sort="visits">visits</th><th data-sort="zero_std">zero-std visits</th>
<th data-sort="last">last verdict</th><th data-sort="wasted">wasted tokens</th><th data-sort="tokens">tokens</th>
<th data-sort="rate">success rate</th>
<th title="each visit's successes, from 0 (bottom line) to {n} of {n} (top line), oldest first">success by visit
(0 to {n}/{n})</th></tr></thead><tbody></tbody></table>
<script type="application/json" id="prompts-data">{payload}</script>
<script>{script}</script>
</body>
</html>
"""

_SCRIPT = r"""
(function () {
  var D = JSON.parse(document.getElementById("prompts-data").textContent);
  var count = D.keys.length, ROWS = @ROWS@, LAST_RANK = {F: 0, P: 1, O: 2, S: 3};
  var order = [], shown = [], sortKey = D.sort, descending = true, offset = 0, opened = -1;
  function label(i) { return D.texts && D.texts[i] ? D.texts[i] : D.keys[i]; }
  function rate(i) { return D.successes[i] / (D.visits[i] * D.n); }
  function value(i, key) {
    if (key === "key") return label(i);
    if (key === "last") return LAST_RANK[D.last[i]];
    if (key === "rate") return rate(i);
    return D[key][i];
  }
  function visitsOf(i) {
    if (D.succ[i] === null) return null;
    var succ = D.wide ? D.succ[i].split(",") : D.succ[i].split("");
    var steps = D.steps[i] ? D.steps[i].split(",") : null, toks = D.tokens_known ? D.tok[i].split(",") : null;
    var out = [], step = 0;
    for (var j = 0; j < succ.length; j++) {
      if (steps) step += parseInt(steps[j], 36);
      var k = parseInt(succ[j], 36);
      out.push({step: steps ? step : null, successes: k, tokens: toks ? parseInt(toks[j], 36) : null,
                verdict: D.verdicts[i][j]});
    }
    return out;
  }
  function sparkline(i) {
    var visits = visitsOf(i);
    if (!visits) return "";
    var w = Math.min(160, 8 + 4 * visits.length), h = 18, pts = [];
    visits.forEach(function (v, j) {
      var x = visits.length > 1 ? 2 + j * (w - 4) / (visits.length - 1) : w / 2;
      pts.push(x.toFixed(1) + "," + (h - 2 - (h - 4) * v.successes / D.n).toFixed(1));
    });
    return '<svg width="' + w + '" height="' + h + '"><line x1="0" y1="2" x2="' + w + '" y2="2" stroke="#ddd"/>' +
      '<line x1="0" y1="' + (h - 2) + '" x2="' + w + '" y2="' + (h - 2) + '" stroke="#ddd"/>' +
      '<polyline fill="none" stroke="#1f77b4" points="' + pts.join(" ") + '"/></svg>';
  }
  function esc(text) {
    return String(text).replace(/[&<>"']/g, function (c) {
      return {"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;"}[c];
    });
  }
  function resort() {
    var filter = document.getElementById("filter").value;
    order = [];
    for (var i = 0; i < count; i++) {
      if (!filter || D.keys[i].indexOf(filter) >= 0 || (D.texts && D.texts[i].indexOf(filter) >= 0)) order.push(i);
    }
    order.sort(function (a, b) {
      var x = value(a, sortKey), y = value(b, sortKey);
      var c = x < y ? -1 : x > y ? 1 : a - b;
      return descending && x !== y ? -c : c;
    });
    document.querySelectorAll("th[data-sort]").forEach(function (th) {
      th.classList.toggle("sorted", th.dataset.sort === sortKey);
    });
    offset = 0;
    draw();
  }
  function draw() {
    var rows = [];
    shown = order.slice(offset, offset + ROWS);
    shown.forEach(function (i) {
      rows.push('<tr data-index="' + i + '"' + (i === opened ? ' class="open"' : "") + '><td class="key" title="' +
        esc(D.keys[i]) + '">' + esc(label(i)) + "</td><td>" + D.visits[i] + "</td><td>" + D.zero_std[i] +
        '</td><td class="v-' + D.last[i] + '">' + D.last[i] + "</td><td>" +
        (D.tokens_known ? D.wasted[i].toLocaleString() : "") + "</td><td>" +
        (D.tokens_known ? D.tokens[i].toLocaleString() : "") + "</td><td>" + rate(i).toFixed(2) + "</td><td>" +
        sparkline(i) + "</td></tr>");
    });
    document.querySelector("#prompts tbody").innerHTML = rows.join("");
    document.getElementById("position").textContent = order.length ? (offset + 1) + "-" +
      Math.min(offset + ROWS, order.length) + " of " + order.length.toLocaleString() : "no prompt";
  }
  function detail(i) {
    opened = i;
    var box = document.getElementById("detail"), visits = visitsOf(i);
    box.hidden = false;
    var head = "<h3>" + esc(D.keys[i]) + "</h3>" + (D.texts && D.texts[i] ? "<p>" + esc(D.texts[i]) + "</p>" : "");
    if (!visits) {
      box.innerHTML = head + '<p class="note">This prompt\'s visits are not embedded (the page keeps the most ' +
        "wasteful prompts' visits); `shopsim-metrics prompts` lists them.</p>";
      draw();
      return;
    }
    var z = D.zero_std[i];
    var w = 640, h = 160, pad = 30, last = visits[visits.length - 1], first = visits[0];
    var x0 = first.step === null ? 0 : first.step, x1 = last.step === null ? visits.length - 1 : last.step;
    var span = Math.max(x1 - x0, 1), marks = [], table = [];
    visits.forEach(function (v, j) {
      var l = v.verdict, x = v.step === null ? j : v.step;
      var cx = pad + (w - 2 * pad) * (x - x0) / span, cy = h - pad - (h - 2 * pad) * v.successes / D.n;
      marks.push('<circle class="visit v-' + l + '" cx="' + cx.toFixed(1) + '" cy="' + cy.toFixed(1) +
        '" r="4" fill="currentColor"><title>' + (v.step === null ? "visit " + (j + 1) : "step " + v.step) + ": " +
        v.successes + "/" + D.n + " " + l + (v.tokens === null ? "" : ", " + v.tokens + " tokens") +
        "</title></circle>");
      table.push("<tr><td>" + (j + 1) + "</td><td>" + (v.step === null ? "" : v.step) + "</td><td>" + v.successes +
        "/" + D.n + '</td><td class="v-' + l + '">' + l + "</td><td>" + (v.tokens === null ? "" : v.tokens) +
        "</td></tr>");
    });
    box.innerHTML = head + "<p>" + visits.length + " visits, " + z + " zero-std" + (D.tokens_known ? ", " +
      D.wasted[i].toLocaleString() + " wasted tokens" : "") + '</p><svg width="' + w + '" height="' + h + '">' +
      '<line x1="' + pad + '" y1="' + (h - pad) + '" x2="' + (w - pad) + '" y2="' + (h - pad) + '" stroke="#999"/>' +
      '<text x="' + pad + '" y="' + (h - 8) + '" font-size="11">' + (first.step === null ? "visit 1" : "step " + x0) +
      '</text><text x="' + (w - pad) + '" y="' + (h - 8) + '" font-size="11" text-anchor="end">' +
      (last.step === null ? "visit " + visits.length : "step " + x1) + '</text><text x="4" y="' + (pad + 4) +
      '" font-size="11">' + D.n + "/" + D.n + "</text>" + marks.join("") + "</svg>" +
      "<table><thead><tr><th>visit</th><th>step</th><th>successes</th><th>verdict</th><th>tokens</th></tr></thead>" +
      "<tbody>" + table.join("") + "</tbody></table>";
    draw();
  }
  document.querySelectorAll("th[data-sort]").forEach(function (th) {
    th.addEventListener("click", function () {
      descending = th.dataset.sort === sortKey ? !descending : th.dataset.sort !== "key" && th.dataset.sort !== "last";
      sortKey = th.dataset.sort;
      resort();
    });
  });
  document.querySelector("#prompts tbody").addEventListener("click", function (event) {
    var row = event.target.closest("tr");
    if (row) detail(parseInt(row.dataset.index, 10));
  });
  document.getElementById("filter").addEventListener("input", resort);
  document.getElementById("prev").addEventListener("click", function () { offset = Math.max(0, offset - ROWS); draw(); });
  document.getElementById("next").addEventListener("click", function () {
    if (offset + ROWS < order.length) { offset += ROWS; draw(); }
  });
  resort();
})();
"""
