"""Sinks: where finished step records go (JSONL always, W&B when available)."""

from shopsim_metrics.sinks.base import MemorySink, SinkSet, StepSink
from shopsim_metrics.sinks.jsonl import JsonlSink, steps_files

__all__ = ["JsonlSink", "MemorySink", "SinkSet", "StepSink", "steps_files"]
