"""Dashboards: one declarative panel spec over the contract's keys, and two renderers.

- :mod:`.spec` - the panels (what each shows, which contract keys it uses); ``dashboards/panels.json``.
- :mod:`.html` - an offline, self-contained plotly HTML page from ``steps.jsonl`` or a W&B offline run.
- :mod:`.wandb_workspace` - a W&B workspace and report template (``wandb-workspaces``), dry-run to JSON.
- :mod:`.commands` - the ``shopsim-metrics dashboard`` subcommand.

The renderers are imported on first use, so importing this package stays cheap.

Example:
    >>> from shopsim_metrics.dashboards import dashboard_spec
    >>> [p.id for p in dashboard_spec().panels][:2]
    ['outcomes', 'zero_std_causes']
"""

from __future__ import annotations

from typing import Any

from shopsim_metrics.dashboards.spec import DashboardSpec, Panel, Series, dashboard_spec, write_panels_json

__all__ = [
    "DashboardSpec",
    "Panel",
    "Series",
    "dashboard_spec",
    "write_panels_json",
    "write_html_dashboard",
    "build_workspace",
    "build_report",
    "write_wandb_templates",
]

_LAZY = {
    "write_html_dashboard": "shopsim_metrics.dashboards.html",
    "build_workspace": "shopsim_metrics.dashboards.wandb_workspace",
    "build_report": "shopsim_metrics.dashboards.wandb_workspace",
    "write_wandb_templates": "shopsim_metrics.dashboards.wandb_workspace",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'shopsim_metrics.dashboards' has no attribute {name!r}")
