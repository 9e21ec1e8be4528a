"""The dashboard's prompts page: each prompt's success across steps, from records or a framework's dump.

What is checked: the page embeds, per prompt, exactly its visits (steps, successes, tokens, verdicts) as the
trace holds them, from a slime dump and from this package's records; the per-step dashboard links to it; beyond
the budget the most wasteful prompts keep their visits and every prompt its row, and the page says so; and a
page of 100,000 prompts stays under 20 MB.
"""

from __future__ import annotations

import json
import random

import pytest

from shopsim_metrics.cli import main
from shopsim_metrics.dashboards.prompts_page import decode_visits, page_data, read_page_data, render_prompts_page
from shopsim_metrics.outcomes.groups import WHOLE_RUN, DumpGroup, DumpOptions, trace_from_groups
from shopsim_metrics.outcomes.sources import load_outcomes
from shopsim_metrics.outcomes.trace import Trace, trace_from_records

MAX_PAGE_BYTES = 20_000_000


def assert_page_holds(page: str, trace: Trace) -> None:
    data = read_page_data(page)
    assert data["keys"] == list(trace.prompts) and data["embedded"] == len(trace.prompts)
    for index, visits in enumerate(trace.visits):
        tokens = [v.tokens for v in visits] if trace.tokens_recorded else [None] * len(visits)
        assert decode_visits(data, index) == [(v.step, v.successes, t) for v, t in zip(visits, tokens)]
        assert len(data["verdicts"][index]) == len(visits)
        assert data["zero_std"][index] == sum(v.zero_std for v in visits)
        assert [letter != "S" for letter in data["verdicts"][index]] == [v.zero_std for v in visits]


def test_a_slime_dump_gives_the_prompts_page_and_it_holds_every_visit(tmp_path, capsys):
    torch = pytest.importorskip("torch")
    from test_dumps import slime_sample

    rng = random.Random(3)
    g = 0
    for step in range(5):
        samples = []
        for j in range(3):
            samples += [slime_sample(g, 4 * g + i, f"prompt {(step + j) % 4}", float(rng.random() < 0.5),
                                     length=rng.randint(1, 30)) for i in range(4)]
            g += 1
        torch.save({"rollout_id": step, "samples": samples}, tmp_path / f"rollout_{step}.pt")
    out = tmp_path / "page.html"
    assert main(["dashboard", "html", str(tmp_path), "--whole-run", "--out", str(out)]) == 0
    assert "prompts page written" in capsys.readouterr().out
    trace = load_outcomes(tmp_path, options=DumpOptions(WHOLE_RUN))
    assert_page_holds(out.read_text(), trace)


def test_records_give_the_dashboard_a_linked_prompts_page(tmp_path, capsys):
    from test_replay import _demo_run

    run = _demo_run(tmp_path, steps=6)
    out = tmp_path / "dash.html"
    assert main(["dashboard", "html", str(run), "--out", str(out), "--prompts"]) == 0
    printed = capsys.readouterr().out
    prompts = tmp_path / "dash-prompts.html"
    assert f"prompts page written: {prompts.resolve()}" in printed
    assert 'href="dash-prompts.html"' in out.read_text() and 'href="dash.html"' in prompts.read_text()
    assert_page_holds(prompts.read_text(), trace_from_records(run))
    assert main(["dashboard", "html", str(run), "--out", str(tmp_path / "plain.html")]) == 0  # opt-in
    assert not (tmp_path / "plain-prompts.html").exists()


def _trace(prompts: int, visits: int, seed: int = 0) -> Trace:
    rng = random.Random(seed)
    groups = []
    for p in range(prompts):
        hard = rng.random()
        for v in range(visits):
            successes = min(8, max(0, round(8 * (1 - hard) + rng.randint(-2, 2))))
            groups.append(DumpGroup(step=v * 3 + p % 3, key=f"b2:{p:015x}", rollouts=8, successes=successes,
                                    kind="spread" if 0 < successes < 8 else "zero_std", tokens=rng.randint(500, 9000)))
    return trace_from_groups(groups, origin="synthetic", options=DumpOptions(WHOLE_RUN))


def test_beyond_the_budget_the_most_wasteful_prompts_keep_their_visits_and_every_prompt_its_row():
    trace = _trace(300, 6)
    full = page_data(trace)
    budget = sum(len(s) + len(c) + len(t) + len(v) + 12 for s, c, t, v in
                 zip(full["steps"], full["succ"], full["tok"], full["verdicts"])) // 3
    data = page_data(trace, budget)
    kept = [i for i in range(300) if data["succ"][i] is not None]
    assert 0 < len(kept) < 300 and data["embedded"] == len(kept)
    assert min(data["wasted"][i] for i in kept) >= max(data["wasted"][i] for i in range(300) if i not in kept)
    assert data["keys"] == full["keys"] and data["wasted"] == full["wasted"] and data["last"] == full["last"]
    page = render_prompts_page(trace, budget=budget)
    assert f"The visits of {len(kept)} of 300 prompts are embedded" in page


def test_a_page_of_100000_prompts_stays_under_20_mb():
    page = render_prompts_page(_trace(100_000, 3))
    assert len(page.encode()) < MAX_PAGE_BYTES
    assert read_page_data(page)["embedded"] == 100_000


def test_the_pages_json_is_safe_inside_a_script(tmp_path):
    trace = trace_from_groups([DumpGroup(0, "</script><script>alert(1)</script>", 2, 1, "spread", 3)],
                              origin="x", options=DumpOptions(WHOLE_RUN))
    page = render_prompts_page(trace)
    assert "</script><script>alert" not in page
    assert json.loads(json.dumps(read_page_data(page)["keys"])) == ["</script><script>alert(1)</script>"]
