"""Readers of what a run wrote: its step records (``steps.jsonl``, a run directory) and a W&B offline run.

Writers are in :mod:`shopsim_metrics.sinks`; the readers follow the rules of the records file (§1.4).
"""

from shopsim_metrics.readers.steps import read_steps

__all__ = ["read_steps"]
