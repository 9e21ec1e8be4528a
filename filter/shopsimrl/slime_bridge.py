"""Everything the project takes from slime, read without requiring slime.

- :data:`DynamicFilterOutput`: slime's own class when slime is importable (and the hooks are not loaded by
  miles), else a structurally identical dataclass (``keep: bool``, ``reason: str | None``,
  ``keep_when_insufficient: bool``).
- :class:`SlimeLoopState`: the live facts of slime's rollout loop, read from modules slime has
  *already* imported (nothing is imported, and slime's ``GenerateState`` is never created: creating
  it loads a tokenizer). Outside a running slime loop both facts are None.

Example:
    >>> out = DynamicFilterOutput(keep=False, reason="r", keep_when_insufficient=True)
    >>> (out.keep, out.reason, out.keep_when_insufficient)
    (False, 'r', True)
    >>> SlimeLoopState().remaining_batch_size() is None   # no slime loop in this process
    True
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

from shopsim_metrics.settings.loops import MILES
from shopsimrl import LOOP

try:  # slime's module holds only dataclasses and helpers: cheap to import
    if LOOP == MILES:  # never import slime into miles' process
        raise ImportError("the hooks are loaded by miles")
    from slime.rollout.filter_hub.base_types import DynamicFilterOutput  # type: ignore[import-not-found]
except ImportError:  # slime is not installed: a structurally identical stand-in

    @dataclass
    class DynamicFilterOutput:  # type: ignore[no-redef]
        """Stand-in for ``slime.rollout.filter_hub.base_types.DynamicFilterOutput``."""

        keep: bool
        reason: str | None = None
        # let a rejected group through when dropping it would open another over-sampling wave
        keep_when_insufficient: bool = False


_ROLLOUT_MODULE = "slime.rollout.sglang_rollout"
_HOOKS_MODULE = "slime.rollout.sample_hooks"


class SlimeLoopState:
    """Reads slime's live loop state: ``GenerateState.remaining_batch_size`` and the rollout step."""

    source = "slime"

    def rollout_step(self) -> int | None:
        hooks = sys.modules.get(_HOOKS_MODULE)
        step = getattr(hooks, "_current_rollout_id", None) if hooks is not None else None
        return step if isinstance(step, int) else None

    def live_id_expected(self) -> bool:
        """Whether slime's rollout runs in this process, so its live rollout id should be readable."""
        return _ROLLOUT_MODULE in sys.modules

    def remaining_batch_size(self) -> int | None:
        rollout = sys.modules.get(_ROLLOUT_MODULE)
        state_cls = getattr(rollout, "GenerateState", None) if rollout is not None else None
        if state_cls is None:
            return None
        instances = getattr(state_cls, "_instances", None)  # slime's SingletonMeta registry
        state = instances.get(state_cls) if isinstance(instances, dict) else None
        remaining = getattr(state, "remaining_batch_size", None)
        return remaining if isinstance(remaining, int) else None
