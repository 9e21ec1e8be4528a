"""Progress of a long wait, with its total: a bar on a terminal, plain lines in a log (never ``\\r``).

On a terminal it is tqdm's bar. Written to a file or a pipe (CI logs, ``2> log``), a bar's carriage
returns would garble the log, so it prints a plain line at the start, at each ``1/parts`` of the total
(quarters by default; a long wait asks for more), at the first update :data:`LINE_SECONDS` after the last
line (a part of a replay of millions of steps takes hours: the log still shows it moving) and at the end
instead, with the figures ``update`` was last given.

Example:
    >>> import io
    >>> log = io.StringIO()
    >>> with Progress(4, unit="step", desc="simulated rollout steps", stream=log) as progress:
    ...     for _ in range(4):
    ...         progress.update()
    >>> print(log.getvalue(), end="")
    simulated rollout steps: 0/4 steps
    simulated rollout steps: 1/4 steps
    simulated rollout steps: 2/4 steps
    simulated rollout steps: 3/4 steps
    simulated rollout steps: 4/4 steps (done)
    >>> "\\r" in log.getvalue()
    False
"""

from __future__ import annotations

import math
import sys
import time
from typing import Any, Callable, TextIO

LINE_SECONDS = 60.0
"""In a log, a line at the first update this long after the last one, whatever the share done."""


class Progress:
    """``update()`` once per unit done; ``grow()`` when the total turns out larger; a context manager."""

    def __init__(self, total: int, *, unit: str, desc: str, stream: TextIO | None = None, parts: int = 4,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.total, self.unit, self.desc, self.parts = total, unit, desc, max(1, parts)
        self.postfix: dict[str, Any] = {}
        self.stream = stream or sys.stderr
        self.done = 0
        self.clock = clock  # when the log's last line was printed (a seam for tests)
        self._last_line = clock()
        self._bar: Any = None
        if _is_terminal(self.stream):
            from tqdm import tqdm

            self._bar = tqdm(total=total, unit=unit, desc=desc, file=self.stream, dynamic_ncols=True)
        else:
            self._line()

    def update(self, count: int = 1, **postfix: Any) -> None:
        """``count`` more units done (``postfix``: figures the bar shows beside it)."""
        before = self.done
        self.done += count
        if self._bar is not None:
            if postfix:
                self._bar.set_postfix(refresh=False, **postfix)
            self._bar.update(count)
            return
        self.postfix = postfix
        part = max(1, math.ceil(self.total / self.parts))
        if self.done < self.total and (self.done // part > before // part
                                       or self.clock() - self._last_line >= LINE_SECONDS):
            self._line()

    def grow(self, total: int) -> None:
        """The wait has a larger total than announced (tune widening its candidates)."""
        self.total = max(total, self.done)
        if self._bar is not None:
            self._bar.total = self.total
            self._bar.refresh()

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
        else:
            self.postfix = {}
            self._line(" (done)")

    def __enter__(self) -> "Progress":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def _line(self, suffix: str = "") -> None:
        self._last_line = self.clock()
        figures = "".join(f", {name} {value}" for name, value in self.postfix.items())
        print(f"{self.desc}: {self.done}/{self.total} {self.unit}s{figures}{suffix}", file=self.stream, flush=True)


def _is_terminal(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False
