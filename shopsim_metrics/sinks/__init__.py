"""Sinks: where finished step records go (JSONL always, W&B when available)."""

from shopsim_metrics.sinks.base import MemorySink, SinkSet, StepSink
from shopsim_metrics.sinks.jsonl import JsonlSink, read_steps, steps_files

__all__ = ["JsonlSink", "MemorySink", "SinkSet", "StepSink", "read_steps", "steps_files"]
