"""The one table printer (:mod:`shopsim_metrics.tables`) and the four commands that print through it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dashboard_records import make_records
from shopsim_metrics.cli import main
from shopsim_metrics.sinks import JsonlSink
from shopsim_metrics.tables import _ESCAPED, MISSING, Column, format_table

GAP = "  "

LINE_BREAKS = "\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029"  # what str.splitlines() splits at
ESCAPED = "".join(map(chr, _ESCAPED))  # every control character: shown escaped (line breaks among them)
cell_text = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters=ESCAPED), max_size=12)


@st.composite
def tables(draw):
    columns = draw(st.lists(st.builds(Column, header=cell_text, align=st.sampled_from([">", "<"])),
                            min_size=1, max_size=6))
    rows = draw(st.lists(st.lists(st.one_of(st.none(), cell_text), min_size=len(columns), max_size=len(columns)),
                         max_size=6))
    return columns, rows


def spans(columns: list[Column], lines: list[str], gap: str = GAP) -> list[tuple[int, int]]:
    """Each column's [start, end) in the lines, measured from the widest text of the column."""
    widths = [max(len(line_cells[i]) for line_cells in lines) for i in range(len(columns))]
    out, start = [], 0
    for width in widths:
        out.append((start, start + width))
        start += width + len(gap)
    return out


@settings(max_examples=300, deadline=None)
@given(tables())
def test_every_line_is_as_wide_as_the_header_and_each_cell_stands_in_its_column(table):
    columns, rows = table
    text = format_table(columns, rows)
    lines = text.split("\n")
    assert len(lines) == 1 + len(rows)  # no cell breaks a line
    assert all(len(line) == len(lines[0]) for line in lines)
    texts = [[c.header for c in columns]] + [[MISSING if v is None else v for v in row] for row in rows]
    for (start, end), i in zip(spans(columns, texts), range(len(columns))):
        for line, cells in zip(lines, texts):
            span = line[start:end]
            cell = cells[i]
            assert (span.endswith(cell) if columns[i].align == ">" else span.startswith(cell)), (span, cell)
            padding = span[:len(span) - len(cell)] if columns[i].align == ">" else span[len(cell):]
            assert padding == " " * len(padding)
            if i + 1 < len(columns):
                assert line[end:end + len(GAP)] == GAP


@given(st.lists(st.text(max_size=8), min_size=1, max_size=4))
def test_a_line_break_in_a_cell_never_breaks_the_table(cells):
    columns = [Column(f"c{i}") for i in range(len(cells))]
    lines = format_table(columns, [cells, [c + LINE_BREAKS for c in cells]]).splitlines()
    assert len(lines) == 3 and len({len(line) for line in lines}) == 1


@given(st.lists(st.text(max_size=8), min_size=1, max_size=4))
def test_no_control_character_reaches_the_terminal(cells):
    text = format_table([Column(f"c{i}") for i in range(len(cells))], [[c + ESCAPED for c in cells]])
    assert not set(text) & set(ESCAPED) - {"\n"}


def test_values_take_their_columns_format_and_missing_ones_print_a_dash():
    columns = [Column("rate", spec=".3f"), Column("tokens", spec=",.0f"), Column("name", align="<")]
    lines = format_table(columns, [[0.5, 12345.4, "a"], [None, "n/a", None]], rule=True).splitlines()
    assert lines[1] == "-" * len(lines[0])
    assert lines[2].split() == ["0.500", "12,345", "a"] and lines[3].split() == ["-", "n/a", "-"]


def test_a_row_with_the_wrong_number_of_values_is_an_error_naming_the_columns():
    with pytest.raises(ValueError, match=r"table row 1: 1 values for 2 columns \(a, b\)"):
        format_table([Column("a"), Column("b")], [[1, 2], [3]])
    with pytest.raises(ValueError, match=re.escape("align must be '>' or '<'; got '^'")):
        Column("a", align="^")  # type: ignore[arg-type]


# -- each command's table comes out of the shared printer: every line as wide as the header, each header
#    right-aligned over its values (numbers) or left-aligned over them (names, notes)


def assert_printed_table(lines: list[str], right: list[str], left: tuple[str, ...] = ()) -> None:
    header, body = lines[0], lines[1:]
    assert body and all(len(line) == len(header) for line in body), "every line as wide as the header"
    words = {m.group(): m.span() for m in re.finditer(r"\S+", header)}
    assert set(right) | set(left) <= set(words)
    for name, (start, end) in words.items():
        for line in body:
            if name in left:
                assert line[start - 1:start] in ("", " ") and (line[start] != " " or not line[start:].strip()), \
                    (name, line)
            else:
                assert line[end - 1] != " " and line[end:end + 1] in ("", " "), (name, line)


def _write_run(tmp_path: Path) -> Path:
    sink = JsonlSink(tmp_path / "run")
    for record in make_records(steps=10):
        sink.emit(record)
    sink.close()
    return tmp_path / "run"


def test_inspect_prints_its_table_through_the_shared_printer(tmp_path, capsys):
    assert main(["inspect", str(_write_run(tmp_path))]) == 0
    lines = capsys.readouterr().out.splitlines()
    table = lines[:lines.index(next(line for line in lines if line.endswith("steps") or " steps;" in line))]
    assert_printed_table(table, right=["step", "waves", "accepted", "tok/inf.grp"], left=("note",))
    assert any(line.rstrip().endswith("TERMINATED") for line in table)


def test_demo_prints_its_table_through_the_shared_printer():
    from shopsim_metrics.simulator.demo import format_steps_table

    records = make_records(steps=10)
    lines = format_steps_table(records, burst_step=6, alert_steps={6: ["WARN alert"]}).splitlines()[:-1]  # legend
    assert_printed_table(lines, right=["step", "streak", "success"], left=("note",))
    assert "failure burst" in lines[1 + 6] and "WARN alert" in lines[1 + 6]


def test_tune_prints_its_table_through_the_shared_printer():
    from shopsim_metrics.simulator.tuning.tune import format_table as tune_table, tune

    report = tune(zero_std_rate=0.3, technical_rate=0.0, candidates=[16, 32], steps=3, widen=False)
    lines = tune_table(report).splitlines()
    assert set(lines[1]) == {"-"} and len(lines[1]) == len(lines[0])
    assert_printed_table([lines[0]] + lines[2:], right=["over", "tokens/step", "P(limit)"], left=("ok",))
    assert sum(line.rstrip().endswith("*") for line in lines) == 1  # the recommendation


def test_prompts_prints_its_table_through_the_shared_printer(tmp_path, capsys):
    records = make_records(steps=8, terminate=False)
    sink = JsonlSink(tmp_path / "run")
    for record in records:
        sink.emit(record)
    sink.close()
    assert main(["prompts", str(tmp_path / "run"), "--top", "5"]) == 0
    lines = capsys.readouterr().out.splitlines()[:6]
    assert_printed_table(lines, right=["visits", "tokens", "wasted_tokens"], left=("prompt_key", "verdicts"))
