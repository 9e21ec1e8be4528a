"""What the skipping data source asks of the monitor, typed: the other half of the protocol between them.

The data source (:class:`~shopsim_metrics.prompts.data_source.PromptSkipDataSource`) attaches itself to the monitor
(:meth:`SkipMonitor.attach_prompt_skip`, handing over a :class:`~shopsim_metrics.prompts.skip_record.SkipSource`: what
it reports for each step) and gets the prompt history to learn from; with ``shopsim_wave_size: adaptive`` it asks the
monitor's wave planner how many groups each wave serves (:meth:`WavePlanning.plan`). The monitor
(:class:`~shopsim_metrics.monitor.ShopsimRuntime`) implements it; a test may pass any object that does.

Example:
    >>> from shopsim_metrics.prompts.skip_record import RuleReport
    >>> class Monitor:
    ...     run_id, waves = "run-1", None
    ...     def attach_prompt_skip(self, source): self.source = source; return None
    >>> class Source:
    ...     def take_skipped(self): return []
    ...     def take_rule_report(self): return RuleReport()
    >>> monitor: SkipMonitor = Monitor()
    >>> monitor.attach_prompt_skip(Source()) is None
    True
"""

from __future__ import annotations

from typing import Protocol

from shopsim_metrics.prompts.skip_evidence import SkipHistory
from shopsim_metrics.prompts.skip_record import SkipSource

__all__ = ["SkipMonitor", "WavePlanning"]


class WavePlanning(Protocol):
    """The monitor's wave planner, as the data source asks it (:class:`~shopsim_metrics.waves.wave_planner.WavePlanner`)."""

    def plan(self, asked: int) -> int:
        """The groups of the live step's next wave, which slime asks ``asked`` of; recorded as served."""
        ...


class SkipMonitor(Protocol):
    """What the data source asks of the process's monitor."""

    @property
    def run_id(self) -> str:
        """The run's identity (a state saved by another run is refused)."""
        ...

    @property
    def waves(self) -> WavePlanning | None:
        """The wave planner (None: the monitor plans no wave)."""
        ...

    def attach_prompt_skip(self, source: SkipSource) -> SkipHistory | None:
        """Register the skipping source (its skips go in the records); the prompt history (None: none kept)."""
        ...
