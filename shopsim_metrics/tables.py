"""The one printer of the terminal tables (``inspect``, ``demo``, ``tune``, ``prompts``).

A table is its columns (a header, an alignment, a format) and its rows (one value per column).
Every column is as wide as its widest cell, header included; every line of the table has the
same width, so each header stands over its values. A missing value (``None``) prints as ``-``.

Example:
    >>> columns = [Column("step"), Column("rate", spec=".3f"), Column("note", align="<")]
    >>> for line in format_table(columns, [[3, 0.5, "burst"], [12, None, "two waves"]]).splitlines():
    ...     print(repr(line))
    'step   rate  note     '
    '   3  0.500  burst    '
    '  12      -  two waves'
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Literal, Sequence

MISSING = "-"
"""The text of a missing value (``None``)."""


@dataclass(frozen=True)
class Column:
    """One column: its header, ``align`` ``">"`` (right: numbers) or ``"<"`` (left: names, notes), and
    ``spec``, the format spec of its values (``".3f"``, ``",.0f"``; ``""``: ``str``). A value the spec
    does not fit (text in a number column, as a damaged file may hold) prints as ``str(value)``.

    Example:
        >>> Column("tokens", spec=",.0f").cell(12345.6), Column("tokens", spec=",.0f").cell("n/a")
        ('12,346', 'n/a')
    """

    header: str
    align: Literal[">", "<"] = ">"
    spec: str = ""

    def __post_init__(self) -> None:
        if self.align not in (">", "<"):
            raise ValueError(f"Column {self.header!r}: align must be '>' or '<'; got {self.align!r}")

    def cell(self, value: Any) -> str:
        """The text of one value in this column, on one line and inert on a terminal (a line break shows as
        ``\\n``, an escape character as ``\\x1b``: :func:`_one_line`)."""
        if value is None:
            return MISSING
        try:
            text = format(value, self.spec)
        except (TypeError, ValueError):
            text = str(value)
        return _one_line(text)


def _one_line(text: str) -> str:
    r"""``text`` without line breaks or control characters: each shown escaped, so a cell never breaks the table's
    lines nor sends a terminal a command (a prompt key is data anyone may write: ``\x1b[2J`` would clear the screen,
    ``\x1b]0;...\x07`` retitle the window, U+202E reverse the text shown after it).

    Example:
        >>> _one_line("a\nb\r"), _one_line("red\x1b[31m\u202e")
        ('a\\nb\\r', 'red\\x1b[31m\\u202e')
    """
    return text.translate(_ESCAPED)


_ESCAPED = {code: repr(chr(code))[1:-1] if code < 0x100 else f"\\u{code:04x}"
            for code in (*range(0x20), *range(0x7F, 0xA0), 0x85, 0x2028, 0x2029, *range(0x202A, 0x202F),
                         *range(0x2066, 0x206A))}
"""Every C0 and C1 control character, the line and paragraph separators and the bidirectional overrides."""


def format_table(columns: Sequence[Column], rows: Iterable[Sequence[Any]], *, gap: str = "  ",
                 rule: bool = False) -> str:
    """The table's text: the header line, a line of ``-`` under it when ``rule``, then one line per row.

    ``gap`` separates two columns. A row with another number of values than ``columns`` is an error.

    Example:
        >>> format_table([Column("over"), Column("ok", align="<")], [[16, "no"], [32, "yes*"]], rule=True).splitlines()
        ['over  ok  ', '----------', '  16  no  ', '  32  yes*']
    """
    cells = [[column.header for column in columns]]
    for number, row in enumerate(rows):
        values = list(row)
        if len(values) != len(columns):
            raise ValueError(f"table row {number}: {len(values)} values for {len(columns)} columns "
                             f"({', '.join(c.header for c in columns)})")
        cells.append([column.cell(value) for column, value in zip(columns, values)])
    cells[0] = [_one_line(header) for header in cells[0]]
    widths = [max(len(line[i]) for line in cells) for i in range(len(columns))]
    lines = [gap.join(_align(text, column.align, width) for text, column, width in zip(line, columns, widths))
             for line in cells]
    if rule:
        lines.insert(1, "-" * len(lines[0]))
    return "\n".join(lines)


def _align(text: str, align: str, width: int) -> str:
    return text.rjust(width) if align == ">" else text.ljust(width)
