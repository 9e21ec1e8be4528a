"""A JSON object read one item at a time: memory holds one item, whatever the file's size.

``json.loads`` of a 200 MB trace holds the text and every parsed value at once (gigabytes, and
nothing printed meanwhile). :func:`iter_object_items` reads the file in chunks and hands over each
``(key, value)`` of the top-level object as soon as it is parsed (each value by ``json``'s own
decoder), saying how many bytes it has read (a progress bar from the first byte). Anything but one
JSON object is :class:`NotJsonObject`, one line saying what and where.

Example:
    >>> import io
    >>> list(iter_object_items(io.BytesIO(b' {"a": [0.5, 1], "b": []} '), chunk=4))
    [('a', [0.5, 1]), ('b', [])]
    >>> list(iter_object_items(io.BytesIO(b'{"a": [0.5,, 1]}')))
    Traceback (most recent call last):
    ...
    shopsim_metrics.outcomes.json_items.NotJsonObject: not JSON (Expecting value at character 11)
"""

from __future__ import annotations

import codecs
import json
import re
from typing import Any, BinaryIO, Callable, Iterable, Iterator

CHUNK_BYTES = 1 << 20
"""Bytes read at a time."""

MAX_ITEM_CHARS = 64 * 1024 * 1024
"""A longer item is not a trace's (a prompt's visits): refused, never held whole."""

_SPACE = re.compile(r"[ \t\n\r]*")
_KINDS = {"[": "a list", '"': "a string", "t": "a boolean", "f": "a boolean", "n": "null"}
_LAST_TOKEN = 10  # an error this close to the end of what is read may be a value cut by the chunk ("Infin")


class NotJsonObject(ValueError):
    """The file is not one JSON object (or an item is longer than :data:`MAX_ITEM_CHARS`)."""


def json_lines(lines: Iterable[str], where: str, *, error: type[ValueError] = ValueError,
               context: str = "") -> Iterator[tuple[int, Any]]:
    """Each non-blank line of a JSON-lines file as ``(its number from 1, its value)``; ``error`` (one line naming
    ``where``, the line and ``context``) for a line that is not JSON.

    Example:
        >>> list(json_lines(['{"a": 1}', "", "[2]"], "f.jsonl"))
        [(1, {'a': 1}), (3, [2])]
        >>> list(json_lines(["{"], "f.jsonl", context="not a row"))
        Traceback (most recent call last):
        ...
        ValueError: f.jsonl:1: not JSON (Expecting property name enclosed in double quotes): not a row
    """
    for number, text in enumerate(lines, start=1):
        if not text.strip():
            continue
        try:
            yield number, json.loads(text)
        except json.JSONDecodeError as exc:
            raise error(f"{where}:{number}: not JSON ({exc.msg})" + (f": {context}" if context else "")) from None


def iter_object_items(handle: BinaryIO, *, on_read: Callable[[int], None] | None = None,
                      chunk: int = CHUNK_BYTES) -> Iterator[tuple[str, Any]]:
    """Each ``(key, value)`` of the JSON object in ``handle`` (binary, UTF-8), in file order; ``on_read(n)`` after
    each ``n`` bytes read. Raises :class:`NotJsonObject` (or ``UnicodeDecodeError``) for anything else."""
    reader = _Reader(handle, on_read, chunk)
    reader.space()
    first = reader.peek()
    if first != "{":
        kind = "nothing" if first == "" else _KINDS.get(first, "a number")
        raise NotJsonObject(f"expected a JSON object; got {kind}")
    reader.pos += 1
    reader.space()
    if reader.peek() == "}":
        reader.pos += 1
    else:
        while True:
            key = reader.value()
            if not isinstance(key, str):
                raise reader.error("Expecting property name enclosed in double quotes")
            reader.expect(":")
            yield key, reader.value()
            reader.space()
            if reader.peek() == ",":
                reader.pos += 1
                reader.space()
                continue
            reader.expect("}")
            break
    reader.space()
    if reader.peek() != "":
        raise reader.error("Extra data")


class _Reader:
    """The text read so far (from the last item on) and where the parse stands in it."""

    def __init__(self, handle: BinaryIO, on_read: Callable[[int], None] | None, chunk: int) -> None:
        self.handle, self.on_read, self.chunk = handle, on_read, chunk
        self.decoder = codecs.getincrementaldecoder("utf-8")()
        self.scan = json.JSONDecoder().raw_decode
        self.text, self.pos, self.before, self.ended = "", 0, 0, False  # before: characters dropped from the text

    def more(self) -> bool:
        """Read another chunk (dropping what is parsed); False at the end of the file."""
        if self.ended:
            return False
        data = self.handle.read(self.chunk)
        if self.on_read is not None and data:
            self.on_read(len(data))
        self.before += self.pos
        self.text = self.text[self.pos:] + self.decoder.decode(data, final=not data)
        self.pos = 0
        self.ended = not data
        return bool(data)

    def peek(self) -> str:
        """The next character ('' at the end of the file)."""
        while self.pos >= len(self.text) and self.more():
            pass
        return self.text[self.pos:self.pos + 1]

    def space(self) -> None:
        while True:
            self.pos = _SPACE.match(self.text, self.pos).end()  # type: ignore[union-attr]
            if self.pos < len(self.text) or not self.more():
                return

    def expect(self, char: str) -> None:
        self.space()
        if self.peek() != char:
            raise self.error(f"Expecting {char!r} delimiter" if char != ":" else "Expecting ':' delimiter")
        self.pos += 1
        self.space()

    def value(self) -> Any:
        """One JSON value from here (read further while it may be cut off by the chunk)."""
        while True:
            try:
                data, end = self.scan(self.text, self.pos)
                if end < len(self.text) or self.ended:
                    self.pos = end
                    return data
            except json.JSONDecodeError as exc:  # cut off by the chunk, or wrong
                cut = exc.pos >= len(self.text) - _LAST_TOKEN or exc.msg.startswith("Unterminated string")
                if self.ended or not cut:
                    raise NotJsonObject(f"not JSON ({exc.msg} at character {self.before + exc.pos})") from None
            if len(self.text) - self.pos > MAX_ITEM_CHARS:
                raise NotJsonObject(f"an item longer than {MAX_ITEM_CHARS:,} characters at character "
                                    f"{self.before + self.pos}: not a trace's")
            self.more()

    def error(self, message: str) -> NotJsonObject:
        return NotJsonObject(f"not JSON ({message} at character {self.before + self.pos})")
