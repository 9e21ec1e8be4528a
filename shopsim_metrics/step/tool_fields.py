"""The record's tool fields: one part, given by its one owner (``tools``), made from the step's tool tally.

- ``episode_end_counts``: why the step's episodes ended (every key of
  :data:`~shopsim_metrics.record.contract.EPISODE_END_REASONS`), in every step of an agent run;
- in a run whose episodes only count their calls (slime's retool: ``tool_call_count``):
  ``tool_calls_per_episode_mean`` alone;
- in a run whose generate function leaves ``metadata["shopsim_tool_calls"]`` (from the first step some episode
  left a list on): ``tool_stats`` (per tool: ``calls``, ``errors`` (ok false), ``model_errors`` (of those, kind
  ``"model"``), ``seconds`` (the sum), ``seconds_p50`` / ``seconds_p90`` (nearest rank) and ``seconds_max``), the
  :data:`~shopsim_metrics.record.contract.TOOL_STATS_LIMIT` most-called tools whose names are safe W&B keys
  (:func:`safe_tool_name`), every other under :data:`~shopsim_metrics.record.contract.OTHER_TOOLS`;
  ``tool_calls_per_episode_mean`` (counted calls included), ``tool_error_fraction``, ``model_error_fraction``, ``tool_seconds_p90`` (over
  every readable call, None when there is none) and ``tool_call_unreadable_count`` (entries ignored).

Example:
    >>> from shopsim_metrics.step.tool_tally import ToolStat, ToolTally
    >>> tally = ToolTally(2, {"search": ToolStat(3, 1, 0, [1.0, 2.0, 4.0]), "view item": ToolStat(1, 1, 1, [0.5])},
    ...                   0, 2, dict.fromkeys(C.EPISODE_END_REASONS, 0) | {"completed": 2})
    >>> f = tool_fields(tally)
    >>> f["tool_stats"]["search"]
    {'calls': 3, 'errors': 1, 'model_errors': 0, 'seconds': 7.0, 'seconds_p50': 2.0, 'seconds_p90': 4.0, 'seconds_max': 4.0}
    >>> sorted(f["tool_stats"]), f["tool_calls_per_episode_mean"], f["model_error_fraction"]
    (['(other tools)', 'search'], 2.0, 0.25)
"""

from __future__ import annotations

import math
import re
from typing import Any

from shopsim_metrics.record import contract as C
from shopsim_metrics.step.tool_tally import ToolStat, ToolTally

_SAFE = re.compile(r"[A-Za-z0-9_.\-]{1,64}")


def safe_tool_name(name: str) -> bool:
    """A tool name that is a safe W&B key segment: letters, digits, ``_``, ``.``, ``-``, at most 64.

    Example:
        >>> safe_tool_name("search_products"), safe_tool_name("view item"), safe_tool_name("a/b")
        (True, False, False)
    """
    return _SAFE.fullmatch(name) is not None


def tool_fields(tally: ToolTally | None) -> dict[str, Any]:
    """The tool part of a step's record (see the module docstring); empty without a tally (not an agent run)."""
    if tally is None:
        return {}
    fields: dict[str, Any] = {"episode_end_counts": dict(tally.ends)}
    if not tally.run_reported:
        if tally.counted:  # only counted (retool): calls per episode, nothing per tool
            fields["tool_calls_per_episode_mean"] = tally.counted / tally.episodes
        return fields
    calls = sum(stat.calls for stat in tally.tools.values())
    errors = sum(stat.errors for stat in tally.tools.values())
    model = sum(stat.model_errors for stat in tally.tools.values())
    fields.update(
        tool_calls_per_episode_mean=(calls + tally.counted) / tally.episodes if tally.episodes else None,
        tool_error_fraction=errors / calls if calls else None,
        model_error_fraction=model / calls if calls else None,
        tool_seconds_p90=_rank(sorted(seconds for stat in tally.tools.values() for seconds in stat.seconds), 0.9),
        tool_call_unreadable_count=tally.unreadable,
        tool_stats=top_tools(tally.tools),
    )
    return fields


def top_tools(tools: dict[str, ToolStat]) -> dict[str, dict[str, Any]]:
    """The :data:`~shopsim_metrics.record.contract.TOOL_STATS_LIMIT` most-called tools with safe names (ties by
    name), each with its figures; every other tool summed under ``(other tools)`` (its percentiles over all of
    their calls).

    Example:
        >>> tools = {f"t{i:02d}": ToolStat(i + 1, 0, 0, [1.0] * (i + 1)) for i in range(22)}
        >>> stats = top_tools(tools); len(stats), stats["(other tools)"]["calls"], "t00" in stats
        (21, 3, False)
    """
    ranked = sorted(((name, stat) for name, stat in tools.items() if safe_tool_name(name)),
                    key=lambda item: (-item[1].calls, item[0]))
    kept = ranked[:C.TOOL_STATS_LIMIT]
    names = {name for name, _ in kept}
    rest = [stat for name, stat in tools.items() if name not in names]
    out = {name: stat_figures(stat) for name, stat in kept}
    if rest:
        merged = ToolStat(sum(s.calls for s in rest), sum(s.errors for s in rest), sum(s.model_errors for s in rest),
                          [seconds for s in rest for seconds in s.seconds])
        out[C.OTHER_TOOLS] = stat_figures(merged)
    return out


def stat_figures(stat: ToolStat) -> dict[str, Any]:
    """One tool's figures (:data:`~shopsim_metrics.record.contract.TOOL_STAT_FIELDS`): percentiles by nearest rank.

    Example:
        >>> stat_figures(ToolStat(4, 2, 1, [0.1, 0.2, 0.3, 10.0]))["seconds_p90"]
        10.0
    """
    ordered = sorted(stat.seconds)
    return dict(zip(C.TOOL_STAT_FIELDS, (stat.calls, stat.errors, stat.model_errors, math.fsum(ordered),
                                         _rank(ordered, 0.5), _rank(ordered, 0.9),
                                         ordered[-1] if ordered else None)))


def _rank(ordered: list[float], q: float) -> float | None:
    return ordered[max(math.ceil(q * len(ordered)) - 1, 0)] if ordered else None
