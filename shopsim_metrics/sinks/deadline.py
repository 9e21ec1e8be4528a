"""A call bounded in time: run it on a daemon thread and stop waiting for it after a deadline.

The W&B sink starts its own run with this (``wandb.init`` against an unreachable host can block for
minutes, and the sink is called on slime's rollout thread). A call that finishes after its deadline is
handed to ``on_late`` on its own thread (the sink finishes the run it no longer wants), never to the
caller.

Example:
    >>> call_within(60.0, lambda: 42)   # returns as soon as the call does
    42
    >>> import threading
    >>> never = threading.Event()
    >>> try:
    ...     call_within(0.05, never.wait)
    ... except DeadlinePassed as exc:
    ...     print(exc)
    did not return within 0.05 s
    >>> never.set()
"""

from __future__ import annotations

import logging
import threading
from typing import Callable, TypeVar

T = TypeVar("T")
logger = logging.getLogger(__name__)


class DeadlinePassed(TimeoutError):
    """The call did not return within its deadline (it goes on, unwatched, on its own thread)."""


def call_within(seconds: float, call: Callable[[], T], *, on_late: Callable[[T], None] | None = None,
                name: str = "shopsim-bounded-call") -> T:
    """``call()``'s result, or its exception re-raised, if it returns within ``seconds``; else
    :class:`DeadlinePassed`, and ``on_late(result)`` once the call does return (its errors logged)."""
    lock = threading.Lock()
    outcome: dict[str, object] = {}
    done = threading.Event()

    def run() -> None:
        try:
            result: object = call()
        except BaseException as exc:  # noqa: BLE001 - handed to the caller, or dropped if it gave up
            with lock:
                outcome["error"] = exc
                done.set()
            return
        with lock:
            late = outcome.get("gave_up", False)
            outcome["result"] = result
            done.set()
        if late and on_late is not None:
            try:
                on_late(result)  # type: ignore[arg-type]
            except Exception as exc:  # noqa: BLE001 - nobody is waiting for it any more
                logger.info("shopsim-metrics: cleaning up a late %s failed (%s)", name, exc)

    threading.Thread(target=run, name=name, daemon=True).start()
    done.wait(seconds)
    with lock:
        if not done.is_set():
            outcome["gave_up"] = True
            raise DeadlinePassed(f"did not return within {seconds:g} s")
    if "error" in outcome:
        raise outcome["error"]  # type: ignore[misc]
    return outcome["result"]  # type: ignore[return-value]
