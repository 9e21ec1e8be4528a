"""Builds the sinks a runtime writes to, from its settings.

The JSONL sink is always on and always first (it survives when W&B does not); the W&B sink is
added by :func:`build_sinks` according to ``shopsim_wandb``:

- ``off``: no W&B sink;
- ``auto`` inside slime: only when slime runs with ``--use-wandb`` (the sink joins slime's run);
- ``auto`` outside slime, ``join``, ``standalone``: a :class:`WandbSink` (it resolves the run lazily).

Example:
    >>> from types import SimpleNamespace
    >>> from shopsim_metrics.settings import ShopsimSettings
    >>> s = ShopsimSettings.from_args(SimpleNamespace(use_wandb=False, shopsim_run_dir="/tmp/x"))
    >>> [sink.name for sink in build_sinks(s)]
    ['jsonl']
"""

from __future__ import annotations

from shopsim_metrics.settings import ShopsimSettings
from shopsim_metrics.sinks.base import StepSink
from shopsim_metrics.sinks.jsonl import JsonlSink
from shopsim_metrics.sinks.wandb_sink import WandbSink


def resolve_run_dir(settings: ShopsimSettings) -> str:
    """The absolute run directory, resolved when the settings were read (``settings.resolve_run_dir``)."""
    return settings.run_dir


def wants_wandb(settings: ShopsimSettings) -> bool:
    """Whether the settings ask for a W&B sink at all (see the module docstring)."""
    if settings.wandb == "off":
        return False
    if settings.wandb == "auto" and settings.inside_slime:
        return bool(settings.use_wandb)
    return True


def build_sinks(settings: ShopsimSettings) -> list[StepSink]:
    """The default sinks for a runtime: JSONL always, then W&B as the settings say."""
    run_dir = resolve_run_dir(settings)
    sinks: list[StepSink] = [JsonlSink(run_dir)]
    if wants_wandb(settings):
        sinks.append(WandbSink.from_settings(settings, run_dir=run_dir))
    return sinks
