"""State files beside slime's checkpoint: written durably, read defensively.

- :func:`write_json` writes a temporary file beside the target, ``fsync``s it, replaces the target
  with it (``os.replace``: a reader sees the old file or the new one, never a half) and ``fsync``s
  the directory, so a crash leaves the previous state or the new one; the temporary files a killed writer
  left in that directory (older than an hour) go with the next write.
- :func:`read_json_object` reads a state file back; anything but a regular file holding one JSON
  object (0 bytes, truncated, ``[]``, ``null``, binary, a directory, a FIFO, a device) is a
  :class:`DamagedStateFile`: one line naming the file, what is wrong and what to do. A FIFO or a
  device is never opened, so nothing is read forever.

Example:
    >>> import tempfile, pathlib
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "state.json"
    >>> write_json(path, {"format": 1}); read_json_object(path, what="a state", remedy="delete it")
    {'format': 1}
    >>> _ = path.write_text("[]")
    >>> read_json_object(path, what="a state", remedy="delete it")
    Traceback (most recent call last):
    ...
    shopsim_metrics.state_file.DamagedStateFile: ...state.json: damaged a state (a JSON list, not an object); delete it
"""

from __future__ import annotations

import json
import os
import re
import secrets
import stat
import time
from pathlib import Path
from typing import Any


LEFTOVER_SECONDS = 3600
"""A temporary file of :func:`write_json` this old is a leftover of a killed process (a write takes seconds): the
next write in its directory removes it."""

_TEMPORARY = re.compile(r"^\..+\.\d+\.[0-9a-f]{16}\.tmp$")  # .{name}.{pid}.{random}.tmp (_create_temporary)


class DamagedStateFile(ValueError):
    """A state file that cannot be read back; the message is one line naming it and what to do."""


def write_json(path: str | os.PathLike, data: Any) -> None:
    """Write ``data`` as JSON to ``path`` durably: temporary file, ``fsync``, replace, directory ``fsync``.

    The temporary file is created afresh under an unpredictable name (``O_EXCL``, never through a
    link), so nothing planted beside ``path`` is followed or overwritten; the replace then puts a
    regular file at ``path`` (a link planted at ``path`` itself is replaced, never written through).
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary, fd = _create_temporary(path)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(data, handle, allow_nan=False, separators=(",", ":"))
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, path)
    except BaseException:
        try:
            os.unlink(temporary)
        except OSError:
            pass
        raise
    _remove_leftovers(path.parent)
    try:
        directory = os.open(path.parent, os.O_RDONLY)
    except OSError:
        return  # a directory that cannot be opened for fsync (some file systems): the replace stands
    try:
        os.fsync(directory)
    except OSError:
        pass
    finally:
        os.close(directory)


def _create_temporary(path: Path) -> tuple[Path, int]:
    """A new file beside ``path`` under a name no one can guess (``.{name}.{pid}.{random}.tmp``), and its fd.

    Created with ``O_EXCL | O_NOFOLLOW``: a file or link already at the name is never opened.
    """
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    while True:
        temporary = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(8)}.tmp")
        try:
            return temporary, os.open(temporary, flags, 0o644)
        except FileExistsError:
            continue  # 64 random bits taken already: draw again


def _remove_leftovers(directory: Path) -> None:
    """Remove the temporary files of writes killed part-way (``kill -9``, a lost node) in ``directory``: names of
    :func:`_create_temporary`'s pattern older than :data:`LEFTOVER_SECONDS` (a write under way is younger). Never
    raises: what cannot be listed or removed stays."""
    try:
        names = [name for name in os.listdir(directory) if _TEMPORARY.match(name)]
    except OSError:
        return
    now = time.time()
    for name in names:
        try:
            if now - os.lstat(directory / name).st_mtime > LEFTOVER_SECONDS:
                os.unlink(directory / name)
        except OSError:
            continue


def file_kind(mode: int) -> str | None:
    """What a non-regular file is (``a directory``, ``a FIFO`` ...), or None for a regular file.

    >>> file_kind(stat.S_IFDIR), file_kind(stat.S_IFREG)
    ('a directory', None)
    """
    if stat.S_ISREG(mode):
        return None
    for test, name in ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO (named pipe)"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return "not a regular file"


def read_json_object(path: str | os.PathLike, *, what: str, remedy: str) -> dict[str, Any]:
    """The JSON object in ``path``; raises :class:`DamagedStateFile` (one line) when it is anything else.

    ``what`` names the contents (``"prompt-skip state"``), ``remedy`` what the reader can do about it.
    A missing file is :class:`FileNotFoundError` (the caller decides what absence means).
    """
    path = Path(path)

    def damaged(why: str) -> DamagedStateFile:
        return DamagedStateFile(f"{path}: damaged {what} ({why}); {remedy}")

    try:
        kind = file_kind(os.stat(path).st_mode)
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise damaged(f"cannot be read: {exc.strerror or exc}") from None
    if kind is not None:
        raise damaged(f"{kind}, not a file")
    try:
        with open(path, "rb") as handle:
            raw = handle.read()
    except OSError as exc:
        raise damaged(f"cannot be read: {exc.strerror or exc}") from None
    if not raw.strip():
        raise damaged("empty: 0 bytes" if not raw else "blank")
    try:
        data = json.loads(raw)
    except RecursionError:
        raise damaged("JSON nested too deeply") from None
    except UnicodeDecodeError:
        raise damaged("binary, not JSON text") from None
    except ValueError as exc:
        raise damaged(f"not JSON, truncated or corrupt: {str(exc)[:80]}") from None
    if not isinstance(data, dict):
        kind = {list: "list", str: "string", type(None): "null", bool: "boolean"}.get(type(data), "number")
        raise damaged(f"a JSON {kind}, not an object")
    return data
