"""The one small interface every sink implements (JSONL, W&B, in-memory for tests).

A sink receives finished step records once per step (never per group) and the rare alert.
Sinks must not raise into training: :class:`SinkSet` isolates each sink, logs one warning per
sink on its first failure, and keeps feeding the others.

Example:
    >>> from shopsim_metrics.record.records import StepRecord
    >>> mem = MemorySink()
    >>> SinkSet([mem]).emit(StepRecord(rollout_id=3))
    >>> [r.rollout_id for r in mem.records]
    [3]
"""

from __future__ import annotations

import logging
from abc import ABC, abstractmethod
from shopsim_metrics.health.alerts import Alert
from shopsim_metrics.record.records import StepRecord
from shopsim_metrics.general.warn_once import WarnOnce

logger = logging.getLogger("shopsim_metrics")


class StepSink(ABC):
    """Receives finished step records and alerts."""

    name: str = "sink"

    @abstractmethod
    def emit(self, record: StepRecord) -> None:
        """Write one finished (or terminated) step."""

    def alert(self, alert: Alert) -> None:
        """Deliver an alert; most sinks ignore it."""

    def prompt_table(self, rows: list[list], rollout_id: int | None) -> None:
        """The prompts table at process exit, when no last step carried it (``contract.PROMPT_TABLE_COLUMNS``); most sinks ignore it."""

    def close(self) -> None:
        """Flush and release resources; called once at the end."""


class MemorySink(StepSink):
    """Keeps records and alerts in lists: for tests, notebooks and the simulator."""

    name = "memory"

    def __init__(self) -> None:
        self.records: list[StepRecord] = []
        self.alerts: list[Alert] = []

    def emit(self, record: StepRecord) -> None:
        self.records.append(record)

    def alert(self, alert: Alert) -> None:
        self.alerts.append(alert)


class SinkSet:
    """Fans records out to several sinks; a failing sink never stops the others or training."""

    def __init__(self, sinks: list[StepSink] | None = None) -> None:
        self.sinks: list[StepSink] = list(sinks or [])
        self._warn_once = WarnOnce(logger)

    def emit(self, record: StepRecord) -> None:
        for sink in self.sinks:
            self._guard(sink, "emit", lambda s=sink: s.emit(record))

    def alert(self, alert: Alert) -> None:
        for sink in self.sinks:
            self._guard(sink, "alert", lambda s=sink: s.alert(alert))

    def prompt_table(self, rows: list[list], rollout_id: int | None) -> None:
        for sink in self.sinks:
            self._guard(sink, "prompt_table", lambda s=sink: s.prompt_table(rows, rollout_id))

    def close(self) -> None:
        for sink in self.sinks:
            self._guard(sink, "close", sink.close)

    def _guard(self, sink: StepSink, what: str, call) -> None:
        try:
            call()
        except Exception as exc:  # noqa: BLE001 - monitoring must never stop training
            self._warn_once(sink.name, "shopsim-metrics: the %s sink failed in %s (%s: %s); training goes on and the "
                            "other sinks keep recording. Further failures of this sink are not repeated.",
                            sink.name, what, type(exc).__name__, exc)
