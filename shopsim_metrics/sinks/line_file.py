"""An append-only file of whole lines, with one live writer: the mechanics under ``steps.jsonl``.

:class:`LineFile` opens its file lazily on the first write and keeps it open:

- **Never through a symlink, never into a non-file.** The file is opened with ``O_NOFOLLOW``; a
  symlink, a directory or a FIFO planted at the path is refused with one warning, and the lines go
  to a sibling file instead (``steps.<host>-<pid>.jsonl`` beside ``steps.jsonl``).
- **One live writer.** An exclusive advisory lock (``fcntl.flock``) is held on the open file for the
  writer's lifetime. A second process finding the file locked warns once and writes its own sibling
  file; the two never interleave. The operating system releases the lock when its holder dies (even
  by ``kill -9``), so a restarted run writes the main file again.
- **Whole lines only.** A write that fails part-way (disk full, file-size limit, I/O error) is cut
  back (``ftruncate``) to the last complete line at once, or before the next write when even that
  fails, so nothing is ever appended to a partial line. A torn last line left by a writer that died
  mid-write is repaired when the file is opened: completed with a newline when it is a whole JSON
  object, else cut off (one warning).
- **Never into a lost file.** Before each write the open file is checked to still be the one at its
  path; a file deleted, renamed away or replaced (by a symlink, say) while written is left, with one
  warning, and the path is opened afresh under the rules above.

Example:
    >>> import tempfile, pathlib
    >>> d = pathlib.Path(tempfile.mkdtemp())
    >>> first, second = LineFile(d / "steps.jsonl"), LineFile(d / "steps.jsonl")
    >>> first.write_lines([b'{"a":1}\\n']), first.path.name
    ((1, None), 'steps.jsonl')
    >>> second.write_lines([b'{"b":2}\\n'])[0], second.path.name.startswith("steps.")
    (1, True)
    >>> first.close(); second.close()
"""

from __future__ import annotations

import errno
import json
import logging
import os
import re
import secrets
import socket
import stat
from collections.abc import Callable, Sequence
from pathlib import Path

try:
    import fcntl
except ImportError:  # not a POSIX system: files are written without the one-live-writer lock
    fcntl = None  # type: ignore[assignment]

logger = logging.getLogger("shopsim_metrics")

_TAIL_CHUNK = 1 << 16


def sibling_path(path: Path, *, unguessable: bool = False) -> Path:
    """The file a second writer uses beside ``path``: ``steps.jsonl`` -> ``steps.<host>-<pid>.jsonl``.

    ``unguessable`` adds random hex, for when something was planted at the predictable name too.

    >>> sibling_path(Path("run/steps.jsonl")).name == f"steps.{_host()}-{os.getpid()}.jsonl"
    True
    >>> sibling_path(Path("run/steps.jsonl"), unguessable=True).name.startswith(f"steps.{_host()}-{os.getpid()}-")
    True
    """
    random = f"-{secrets.token_hex(8)}" if unguessable else ""
    return path.with_name(f"{path.stem}.{_host()}-{os.getpid()}{random}{path.suffix}")


def _host() -> str:
    return re.sub(r"[^A-Za-z0-9-]", "_", socket.gethostname() or "host")


class LineFile:
    """Appends whole lines to ``path`` (or, when that is refused, to its sibling); see the module doc.

    ``write`` is the system call used for writing (``os.write``); tests pass a failing one to act out
    a full disk.
    """

    def __init__(self, path: str | os.PathLike, *, fsync: bool = True,
                 write: Callable[[int, bytes], int] = os.write) -> None:
        self.main_path = Path(path)
        self.path = self.main_path  # the file actually written, known once opened
        self.fsync = fsync
        self._write = write
        self._fd: int | None = None
        self._pid = 0
        self._good_size = 0  # bytes up to the last complete line we know of
        self._torn = False  # a failed write left bytes after _good_size that are not yet cut back

    def write_lines(self, lines: Sequence[bytes]) -> tuple[int, Exception | None]:
        """Append ``lines`` (each ending in ``\\n``) in order: how many made it, and the error if not all.

        Lines reported written are complete on disk (and fsync'ed when ``fsync``); nothing of a line
        that was not reported stays in the file.
        """
        try:
            fd = self._open()
            self._cut_back(fd)
        except Exception as exc:  # noqa: BLE001 - reported to the caller, which holds the lines back
            return 0, exc
        start, written, error = self._good_size, 0, None
        for line in lines:
            try:
                self._write_all(fd, line)
            except Exception as exc:  # noqa: BLE001 - a disk error, or a write seam that raised
                error = exc
                self._torn = True
                break
            self._good_size += len(line)
            written += 1
        if written and self.fsync:
            try:
                os.fsync(fd)
            except OSError as exc:  # what the disk did not confirm is cut back and written again
                error, written, self._good_size, self._torn = exc, 0, start, True
        try:
            self._cut_back(fd)
        except OSError:
            pass  # retried before the next write
        return written, error

    def close(self) -> None:
        """Release the file and its lock (a later write opens it again)."""
        if self._fd is not None and self._pid == os.getpid():
            try:
                os.close(self._fd)
            except OSError:
                pass
        self._fd = None

    def __del__(self) -> None:  # like a file object: a forgotten writer releases its file and lock
        self.close()

    # --- internals -----------------------------------------------------------------------------
    def _write_all(self, fd: int, data: bytes) -> None:
        view = memoryview(data)
        while view:
            count = self._write(fd, view)
            if count <= 0:
                raise OSError(errno.EIO, "write made no progress")
            view = view[count:]

    def _cut_back(self, fd: int) -> None:
        if self._torn:
            os.ftruncate(fd, self._good_size)
            self._torn = False

    def _open(self) -> int:
        if self._fd is not None and self._pid != os.getpid():  # a forked child: the lock is the parent's
            self._fd = None
            self.path = self.main_path
        if self._fd is not None and not self._still_at_path(self._fd):
            logger.warning("shopsim-metrics: %s was removed or replaced while this process wrote it; the "
                           "next records go to a file opened afresh at that path.", self.path)
            self.close()
            self.path = self.main_path
        if self._fd is None:
            fd = self._open_owned()
            try:
                self._good_size = self._repair_tail(fd)
            except OSError:
                os.close(fd)  # opened again, and repaired again, at the next write
                raise
            self._fd, self._pid, self._torn = fd, os.getpid(), False
        return self._fd

    def _still_at_path(self, fd: int) -> bool:
        """Whether the open file is still the one at ``path`` (not deleted, renamed away or replaced)."""
        try:
            here, ours = os.stat(self.path, follow_symlinks=False), os.fstat(fd)
        except OSError:
            return False
        return (here.st_dev, here.st_ino) == (ours.st_dev, ours.st_ino)

    def _open_owned(self) -> int:
        self.main_path.parent.mkdir(parents=True, exist_ok=True)
        fd, refusal = _open_locked(self.main_path)
        if fd is not None:
            self.path = self.main_path
            return fd
        sibling = sibling_path(self.main_path)
        fd, sibling_refusal = _open_locked(sibling)
        if fd is None:  # the predictable sibling is planted too: a name no one can guess, created afresh
            sibling = sibling_path(self.main_path, unguessable=True)
            fd, unguessable_refusal = _open_locked(sibling, new=True)
            if fd is None:
                raise OSError(errno.EEXIST, f"cannot write {self.main_path} ({refusal}) nor {sibling} "
                                            f"({unguessable_refusal})")
        if self.path != sibling:  # once per writer, not once per reopening
            logger.warning(
                "shopsim-metrics: %s %s; this process writes its step records to %s instead. Readers "
                "given the run directory read both files.", self.main_path, refusal, sibling)
        self.path = sibling
        return fd

    def _repair_tail(self, fd: int) -> int:
        """Make the file end with a complete line; returns its size."""
        size = os.fstat(fd).st_size
        if size == 0 or os.pread(fd, 1, size - 1) == b"\n":
            return size
        start = _last_line_start(fd, size)
        tail = os.pread(fd, size - start, start)
        if _is_json_object(tail):
            self._write_all(fd, b"\n")
            return size + 1
        os.ftruncate(fd, start)
        logger.warning("shopsim-metrics: cut a torn last line (%d bytes) off %s, left by a writer that "
                       "stopped mid-write; every complete line is kept.", size - start, self.path)
        return start


def _open_locked(path: Path, *, new: bool = False) -> tuple[int | None, str]:
    """Open ``path`` for appending with an exclusive lock: (fd, "") or (None, why it was refused).

    ``new``: the file must not exist yet (``O_EXCL``).
    """
    flags = os.O_RDWR | os.O_APPEND | os.O_CREAT | getattr(os, "O_CLOEXEC", 0)
    flags |= getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | (os.O_EXCL if new else 0)
    try:
        fd = os.open(path, flags, 0o644)
    except OSError as exc:
        if exc.errno == errno.EEXIST:
            return None, "exists already"
        if exc.errno == errno.ELOOP:
            return None, "is a symbolic link, which is never followed"
        if exc.errno in (errno.EISDIR, errno.ENXIO):
            return None, "is not a regular file"
        raise
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            return None, "is not a regular file"
        os.set_blocking(fd, True)
        if fcntl is None:
            raise OSError(errno.ENOSYS, "no fcntl.flock on this system")
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None, "is held by another live writer (another process on the same run directory)"
    except OSError as exc:
        if exc.errno not in (errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS):
            os.close(fd)
            raise
        logger.warning("shopsim-metrics: %s cannot be locked on this file system (%s); it is written "
                       "without the one-live-writer guarantee.", path, exc)
    return fd, ""


def _last_line_start(fd: int, size: int) -> int:
    """Offset just after the last newline before ``size`` (0 when there is none)."""
    end = size
    while end > 0:
        begin = max(0, end - _TAIL_CHUNK)
        newline = os.pread(fd, end - begin, begin).rfind(b"\n")
        if newline >= 0:
            return begin + newline + 1
        end = begin
    return 0


def _is_json_object(data: bytes) -> bool:
    try:
        return isinstance(json.loads(data), dict)
    except ValueError:
        return False
