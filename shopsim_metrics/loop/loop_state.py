"""The loop-state interface: the facts a rollout loop supplies to the accountant at each judgement.

Any loop (slime's real ``generate_rollout_async``, the project's simulator) supplies
the same two facts, read *live* just before the filter judges a group:

- ``rollout_step()``: the rollout step number (slime's ``rollout_id``), or None when unknown;
- ``remaining_batch_size()``: the loop's ``remaining_batch_size`` before this judgement, or None
  when the loop cannot say (then the accountant falls back to a filter-side mirror, which can drift
  when several groups finish in one batch).

Example:
    >>> state = ManualLoopState()
    >>> state.step, state.remaining = 4, 32
    >>> (state.rollout_step(), state.remaining_batch_size(), state.source)
    (4, 32, 'manual')
"""

from __future__ import annotations

from typing import Callable, Protocol, runtime_checkable


@runtime_checkable
class LoopState(Protocol):
    """What a rollout loop tells the accountant (see module docstring)."""

    source: str

    def rollout_step(self) -> int | None: ...

    def remaining_batch_size(self) -> int | None: ...


class ManualLoopState:
    """A loop state whose facts are set by the loop that owns it (test doubles, the simulator)."""

    def __init__(self, source: str = "manual") -> None:
        self.source = source
        self.step: int | None = None
        self.remaining: int | None = None
        self.clock: Callable[[], float] | None = None
        """The loop's own clock in seconds (a simulated loop's); None: the accountant's monotonic clock."""

    def rollout_step(self) -> int | None:
        return self.step

    def remaining_batch_size(self) -> int | None:
        return self.remaining


class NoLoopState:
    """No loop to ask (a notebook, a test without a loop): both facts unknown, so the accountant mirrors ``remaining``.

    Example:
        >>> NoLoopState().remaining_batch_size() is None
        True
    """

    source = "none"

    def rollout_step(self) -> int | None:
        return None

    def remaining_batch_size(self) -> int | None:
        return None
