"""The exception that ends a run when technical failures pile up, and the one error for a missing path.

Example:
    >>> str(missing_path("run/steps.jsonl", "a steps.jsonl or the run directory holding it"))
    'run/steps.jsonl: no such file or directory (expected a steps.jsonl or the run directory holding it)'

    >>> err = TechnicalFailureLimitExceeded(streak=8, max_consecutive_failed_groups=8, rollout_id=3,
    ...                                     failed_checks={"status_failed": 8})
    >>> "8 consecutive technical groups" in str(err)
    True
"""

from __future__ import annotations

import os

from shopsim_metrics.judging.failure_cause import leading_cause_text


def missing_path(path: str | os.PathLike, expected: str) -> FileNotFoundError:
    """The error every command gives for a path that does not exist: the path, then what was expected."""
    return FileNotFoundError(f"{os.fspath(path)}: no such file or directory (expected {expected})")


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
