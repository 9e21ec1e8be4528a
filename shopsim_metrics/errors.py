"""The exception that ends a run when technical failures pile up, and the errors every command gives for a path
it cannot read (missing, or a FIFO, device or socket) or write.

Example:
    >>> str(missing_path("run/steps.jsonl", "a steps.jsonl or the run directory holding it"))
    'run/steps.jsonl: no such file or directory (expected a steps.jsonl or the run directory holding it)'
    >>> check_input_path("/dev/null", "a steps.jsonl")
    Traceback (most recent call last):
    ...
    ValueError: /dev/null: a character device, not a file (expected a steps.jsonl)

    >>> err = TechnicalFailureLimitExceeded(streak=8, max_consecutive_failed_groups=8, rollout_id=3,
    ...                                     failed_checks={"status_failed": 8})
    >>> "8 consecutive technical groups" in str(err)
    True
"""

from __future__ import annotations

import os
from pathlib import Path

from shopsim_metrics.judging.failure_cause import leading_cause_text


def missing_path(path: str | os.PathLike, expected: str) -> FileNotFoundError:
    """The error every command gives for a path that does not exist: the path, then what was expected."""
    return FileNotFoundError(f"{os.fspath(path)}: no such file or directory (expected {expected})")


def check_input_path(path: str | os.PathLike, expected: str) -> Path:
    """``path`` when it is a regular file or a directory (links followed); else one line, before it is opened:
    :func:`missing_path`, or a ``ValueError`` naming what it is (a FIFO would be waited on forever, a device
    such as ``/dev/zero`` read forever)."""
    from shopsim_metrics.state_file import file_kind

    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        raise missing_path(path, expected) from None
    kind = file_kind(mode)
    if kind is not None and kind != "a directory":
        raise ValueError(f"{os.fspath(path)}: {kind}, not a file (expected {expected})")
    return Path(path)


def regular_files(paths: list[Path]) -> list[Path]:
    """The regular files of ``paths`` (links followed), in order; the others (a FIFO, a device, a socket, a
    directory) are left out unopened, each named in a warning: a FIFO named like an input would be waited on
    forever.

    Example:
        >>> regular_files([Path("/dev/null")])
        []
    """
    import logging

    from shopsim_metrics.state_file import file_kind

    kept = []
    for path in paths:
        try:
            kind = file_kind(os.stat(path).st_mode)
        except OSError as exc:
            kind = f"not readable ({type(exc).__name__})"
        if kind is None:
            kept.append(path)
        else:
            logging.getLogger("shopsim_metrics").warning(
                "shopsim-metrics: skipped %s: %s, not a file (only regular files are read)", path, kind)
    return kept


def check_output_file(path: str | os.PathLike, flag: str, *, make_parents: bool = False) -> None:
    """Raise before any work when ``path`` cannot be written as a file: a directory, a FIFO or device, or under
    a file or an unwritable directory, or (unless the command makes them: ``make_parents``) in a directory that
    does not exist; ``flag`` names the option in the message.

    Example:
        >>> check_output_file(".", "--out")
        Traceback (most recent call last):
        ...
        IsADirectoryError: --out .: is a directory; give the path of a file (in it, say)
    """
    from shopsim_metrics.state_file import file_kind

    out = Path(path)
    if out.is_dir():
        raise IsADirectoryError(f"{flag} {os.fspath(path)}: is a directory; give the path of a file (in it, say)")
    if out.exists():
        kind = file_kind(os.stat(out).st_mode)
        if kind is not None:
            raise ValueError(f"{flag} {os.fspath(path)}: {kind}, not a file")
    for parent in out.absolute().parents:
        if parent.exists():
            if not parent.is_dir():
                raise NotADirectoryError(f"{flag} {os.fspath(path)}: {parent} is a file, not a directory")
            if not make_parents and parent != out.absolute().parent:
                raise FileNotFoundError(f"{flag} {os.fspath(path)}: {out.absolute().parent} does not exist; create it "
                                        "first, or write the file elsewhere")
            if not os.access(parent, os.W_OK):
                raise PermissionError(f"{flag} {os.fspath(path)}: {parent} is not writable")
            return


class TechnicalFailureLimitExceeded(RuntimeError):
    """Raised by the filter when ``shopsim_max_consecutive_failed_groups`` technical groups come in a row.

    The step's record (marked ``terminated``) is written before this leaves the filter. The streak
    counts technical groups in judgement order, across steps, and any scorable group resets it.
    Fix the environment or reward service (the failing checks say what broke), or raise the limit
    in the ``--custom-config-path`` YAML.
    """

    def __init__(
        self, *, streak: int, max_consecutive_failed_groups: int, rollout_id: int | None, failed_checks: dict[str, int],
        causes: dict[str, int] | None = None,
    ) -> None:
        self.streak = streak
        self.max_consecutive_failed_groups = max_consecutive_failed_groups
        self.rollout_id = rollout_id
        self.failed_checks = dict(failed_checks)
        self.causes = dict(causes or {})
        """The causes the streak's generate functions left (``metadata["shopsim_failure_cause"]``), most frequent first."""
        checks = ", ".join(f"{name}={count}" for name, count in sorted(failed_checks.items())) or "none recorded"
        leading = leading_cause_text(self.causes)
        super().__init__(
            f"shopsim: {streak} consecutive technical groups reached shopsim_max_consecutive_failed_groups="
            f"{max_consecutive_failed_groups} at rollout step {rollout_id}{leading}; failing checks in the streak: {checks}. The step's record "
            "was written (terminated=true). Fix the environment / reward service, or raise the limit in the "
            "--custom-config-path YAML."
        )
