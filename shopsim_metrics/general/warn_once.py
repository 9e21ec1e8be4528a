"""One warning per kind of trouble: a failure that repeats every group or every step is logged once.

Example:
    >>> import logging
    >>> warn = WarnOnce(logging.getLogger("doctest"))
    >>> warn("disk", "writing failed (%s)", "full"), warn("disk", "writing failed (%s)", "full")
    (True, False)
"""

from __future__ import annotations

import logging
import threading
from typing import Any


class WarnOnce:
    """Logs the first warning of each ``key``; the later ones are dropped. Safe across threads."""

    def __init__(self, logger: logging.Logger) -> None:
        self.logger = logger
        self._seen: set[str] = set()
        self._lock = threading.Lock()

    def __call__(self, key: str, message: str, *args: Any) -> bool:
        """Log ``message % args`` unless a warning of ``key`` was logged already; returns whether it was logged."""
        with self._lock:
            if key in self._seen:
                return False
            self._seen.add(key)
        self.logger.warning(message, *args)
        return True
