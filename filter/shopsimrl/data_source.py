"""slime's ``--data-source-path shopsimrl.data_source.PromptSkipDataSource``: prompts skipped before generation.

The class is the core's (:class:`shopsim_metrics.prompts.data_source.PromptSkipDataSource`: the rules, the
waves, the state saved beside slime's checkpoint; docs §3.6 and §3.7), attached to
the process's monitor as slime's hooks create it (:func:`shopsimrl.slime_runtime.get_runtime`, with a
reader of slime's live loop state), so the data source and the hooks share one prompt history.

Example:
    >>> from types import SimpleNamespace
    >>> class Inner:  # stands in for slime's data source
    ...     def get_samples(self, n): return [[SimpleNamespace(prompt="2+2=?", metadata={})] for _ in range(n)]
    ...     def __len__(self): return 1
    >>> ds = PromptSkipDataSource(SimpleNamespace(), inner=Inner())   # shopsim_prompt_skip off: slime's, as it is
    >>> len(ds.get_samples(3)), ds.mode
    (3, 'off')
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from shopsim_metrics.settings.loops import MILES, check_launch
from shopsim_metrics.record.contract import DATA_SOURCE_PATH

from shopsim_metrics.prompts import data_source as core
from shopsim_metrics.prompts.data_source import SkippedPrompt, rule_settings_from_args, skip_mode
from shopsim_metrics.prompts.skip_evidence import SkipHistory

__all__ = ["PromptSkipDataSource", "SkippedPrompt", "skip_mode", "rule_settings_from_args"]


def _slime_runtime(args: Any) -> Any:
    from shopsimrl.slime_runtime import get_runtime

    return get_runtime(args)


class PromptSkipDataSource(core.PromptSkipDataSource):
    """The core's skipping data source, reporting to the process's monitor as slime's hooks create it."""

    def __init__(self, args: Any, *, inner: Any = None, history: SkipHistory | None = None,
                 monitor: Any = None) -> None:
        from shopsimrl.slime_runtime import LOOP

        if LOOP == MILES:  # it wraps slime's data source: refused in one line, before a step runs
            check_launch(LOOP, SimpleNamespace(data_source_path=DATA_SOURCE_PATH))
        super().__init__(args, inner=inner, history=history, monitor=monitor, monitor_of=_slime_runtime)
