"""shopsim-metrics: records, sinks, alerts, dashboards, simulator and CLI for slime's dynamic sampling."""

__version__ = "0.1.0"
