"""Everything the project takes from miles (radixark/miles, slime's production fork), read without requiring miles.

- :func:`miles_filter_output`: miles' own ``DynamicFilterOutput`` (``keep``, ``reason``; no
  ``keep_when_insufficient``), imported when the hooks are loaded in miles.
- :class:`MilesLoopState`: the live facts of miles' rollout loop, read from modules miles has *already*
  imported. miles' old rollout (``miles.rollout.sglang_rollout``, ``MILES_USE_LEGACY_ROLLOUT_V1=1``) keeps
  ``remaining_batch_size`` in its ``GenerateState`` singleton, read live while that loop runs (it is at least 1
  before any judgement; a reset one, 0, is a finished loop's); its class-based rollout (``InferenceRolloutFn``,
  the default) keeps none, so the accountant mirrors it (exact there: that loop opens a wave while its pending
  groups are fewer than the groups the batch still needs, which is ``submitted - dropped < rollout_batch_size``,
  slime's rule). miles keeps no live rollout id anywhere: each step is counted from ``start_rollout_id`` and
  renumbered by the ``rollout_id`` miles' log function receives.

Example:
    >>> state = MilesLoopState()
    >>> state.remaining_batch_size() is None, state.rollout_step() is None, state.live_id_expected()
    (True, True, False)
"""

from __future__ import annotations

import sys

from shopsim_metrics.general.plain_values import is_int

_OLD_ROLLOUT_MODULE = "miles.rollout.sglang_rollout"


def miles_filter_output() -> type:
    """miles' ``DynamicFilterOutput`` (importing it loads a module of dataclasses only)."""
    from miles.rollout.filter_hub.base_types import DynamicFilterOutput  # type: ignore[import-not-found]

    return DynamicFilterOutput


class MilesLoopState:
    """Reads miles' live loop state: the old rollout's ``GenerateState.remaining_batch_size``; no rollout id."""

    source = "miles"

    def rollout_step(self) -> int | None:
        return None  # miles keeps the rollout id in the rollout function's locals only

    def live_id_expected(self) -> bool:
        return False

    def remaining_batch_size(self) -> int | None:
        rollout = sys.modules.get(_OLD_ROLLOUT_MODULE)
        state_cls = getattr(rollout, "GenerateState", None) if rollout is not None else None
        if state_cls is None:
            return None
        instances = getattr(state_cls, "_instances", None)  # miles' SingletonMeta registry
        state = instances.get(state_cls) if isinstance(instances, dict) else None
        remaining = getattr(state, "remaining_batch_size", None)
        # >= 1 while the old loop judges a group (the group itself is counted); 0 is a reset, finished loop's
        return remaining if is_int(remaining) and remaining > 0 else None
