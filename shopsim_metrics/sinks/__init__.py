"""Sinks: where finished step records go (JSONL always, W&B when available)."""

from shopsim_metrics.sinks.base import MemorySink, SinkSet, StepSink
from shopsim_metrics.sinks.jsonl import JsonlSink, steps_files
from shopsim_metrics.sinks.steps_reader import read_steps

__all__ = ["JsonlSink", "MemorySink", "SinkSet", "StepSink", "read_steps", "steps_files"]
