"""Where :mod:`shopsim_metrics.general.plain_values` stood: its names, handed on.

Only the skip rule's modules still import from here (``prompts/data_source.py``, ``prompts/predictive_rule.py``,
rewritten apart); once they import from :mod:`shopsim_metrics.general.plain_values`, this file goes.
"""

from shopsim_metrics.general.plain_values import as_float, is_int, is_number, shown_value

__all__ = ["as_float", "is_int", "is_number", "shown_value"]
