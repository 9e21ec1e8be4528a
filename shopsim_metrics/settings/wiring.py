"""How slime's launch wired the hooks, read from its ``args``: the warnings a miswired run deserves.

- :func:`no_judgement_warning`: a step ended without one judged group; names the likely cause from
  ``--dynamic-sampling-filter-path`` and ``--rollout-function-path`` (given once, by the log function).

Example:
    >>> from types import SimpleNamespace
    >>> "fully_async_rollout" in no_judgement_warning(
    ...     SimpleNamespace(dynamic_sampling_filter_path=FILTER_PATH,
    ...                     rollout_function_path="slime.rollout.fully_async_rollout.generate_rollout_fully_async"), 3)
    True
"""

from __future__ import annotations

from typing import Any

from shopsim_metrics.record.contract import ASYNC_ROLLOUT_PATH, FILTER_PATH, SLIME_ASYNC_ROLLOUT_PATH

DEFAULT_ROLLOUT_FUNCTION = "slime.rollout.sglang_rollout.generate_rollout"
"""The only rollout function of slime that calls the dynamic-sampling filter and the all-samples hook."""



def no_judgement_warning(args: Any, rollout_id: int) -> str:
    """The warning for a step that ended with no judged group, naming the likely cause."""
    filter_path = getattr(args, "dynamic_sampling_filter_path", None)
    rollout_function = getattr(args, "rollout_function_path", None)
    if rollout_function == SLIME_ASYNC_ROLLOUT_PATH:
        cause = (f"the rollout function {rollout_function} does not call the filter nor the all-samples hook; "
                 f"set --rollout-function-path {ASYNC_ROLLOUT_PATH} to judge every group on that path "
                 "(docs §3.8)")
    elif not filter_path:
        cause = f"--dynamic-sampling-filter-path is not set (set it to {FILTER_PATH})"
    elif filter_path != FILTER_PATH:
        cause = f"--dynamic-sampling-filter-path is {filter_path}, not {FILTER_PATH}"
    elif rollout_function and rollout_function != DEFAULT_ROLLOUT_FUNCTION:
        cause = (f"the rollout function {rollout_function} does not call the filter (only slime's default "
                 f"{DEFAULT_ROLLOUT_FUNCTION} does; the asynchronous slime.rollout.fully_async_rollout calls "
                 "neither the filter nor the all-samples hook)")
    else:
        cause = ("the filter path is not set to " + FILTER_PATH + ", or an asynchronous rollout function "
                 "(slime.rollout.fully_async_rollout) is in use: only slime's default rollout function calls "
                 "the filter")
    return (f"shopsim-metrics: rollout step {rollout_id} ended with no group judged by the filter, so no "
            f"step record is written. Likely cause: {cause}. This warning is given once.")
