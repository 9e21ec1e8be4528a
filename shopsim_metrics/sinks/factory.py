"""Builds the sinks a runtime writes to, from its settings.

The JSONL sink is always on and always first (it survives when W&B does not); the W&B sink is
added by :func:`build_sinks` when :func:`~shopsim_metrics.sinks.wandb_sink.wandb_role` says W&B is
used at all (``shopsim_wandb`` not ``off``, and inside slime only with ``--use-wandb``).

Example:
    >>> from types import SimpleNamespace
    >>> from shopsim_metrics.settings import ShopsimSettings, fresh_run_dir
    >>> s = ShopsimSettings.from_args(SimpleNamespace(use_wandb=False, shopsim_run_dir="run"))
    >>> [sink.name for sink in build_sinks(s)]
    ['jsonl', 'announce']
"""

from __future__ import annotations

import logging
import socket

from shopsim_metrics.record.records import StepRecord
from shopsim_metrics.settings import ShopsimSettings, fresh_run_dir
from shopsim_metrics.sinks.base import StepSink
from shopsim_metrics.sinks.jsonl import JsonlSink
from shopsim_metrics.sinks.wandb_sink import WandbSink, wandb_role

logger = logging.getLogger("shopsim_metrics")

SUMMARY_RUN_DIR = "shopsim/run_dir"
SUMMARY_HOST = "shopsim/host"
"""Keys of the W&B run summary that say where the step records land (the actor may run on any node)."""


def run_location(run_dir: str) -> dict[str, str]:
    """Where this process writes its records: ``{SUMMARY_RUN_DIR: run_dir, SUMMARY_HOST: hostname}``."""
    return {SUMMARY_RUN_DIR: run_dir, SUMMARY_HOST: socket.gethostname()}


class RunLocationAnnouncement(StepSink):
    """Logs, once, after the first record was handed to the JSONL sink: the file, the run dir and the host.

    Under Ray the hooks run in an actor on whatever node Ray chose; this line says where to look.
    """

    name = "announce"

    def __init__(self, jsonl: JsonlSink, location: dict[str, str]) -> None:
        self.jsonl = jsonl
        self.location = location
        self.announced = False

    def emit(self, record: StepRecord) -> None:
        if not self.announced:
            self.announced = True
            logger.info("shopsim-metrics: step records go to %s (run dir %s) on host %s",
                        getattr(self.jsonl, "path", self.location[SUMMARY_RUN_DIR]),
                        self.location[SUMMARY_RUN_DIR], self.location[SUMMARY_HOST])


def build_sinks(settings: ShopsimSettings, run_dir: str | None = None) -> list[StepSink]:
    """The default sinks for a runtime writing its records to ``run_dir`` (the monitor's), else to the settings'
    directory, else to a new one (:func:`~shopsim_metrics.settings.fresh_run_dir`): JSONL always, the run-location
    line, then W&B as the settings say.

    The W&B run's summary gets the run dir and host (:func:`run_location`).
    """
    run_dir = run_dir or settings.run_dir or fresh_run_dir()
    location = run_location(run_dir)
    jsonl = JsonlSink(run_dir)
    sinks: list[StepSink] = [jsonl, RunLocationAnnouncement(jsonl, location)]
    if wandb_role(settings.wandb, inside_slime=settings.inside_slime, use_wandb=settings.use_wandb) is not None:
        sinks.append(WandbSink.from_settings(settings, run_dir=run_dir, summary=location))
    return sinks
