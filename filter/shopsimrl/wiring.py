"""How slime's launch wired the hooks, read from its ``args``: the warnings a miswired run deserves.

- :func:`missing_knobs_warning`: slime's knobs the accounting needs that ``args`` lacks, and what is
  lost without each (given once when the runtime is created).
- :func:`no_judgement_warning`: a step ended without one judged group; names the likely cause from
  ``--dynamic-sampling-filter-path`` and ``--rollout-function-path`` (given once, by the log function).

Example:
    >>> from types import SimpleNamespace
    >>> print(missing_knobs_warning(SimpleNamespace(rollout_batch_size=16, n_samples_per_prompt=8,
    ...                                             global_batch_size=64)))
    None
    >>> "fully_async_rollout" in no_judgement_warning(
    ...     SimpleNamespace(dynamic_sampling_filter_path=FILTER_PATH,
    ...                     rollout_function_path="slime.rollout.fully_async_rollout.generate_rollout_fully_async"), 3)
    True
"""

from __future__ import annotations

from typing import Any

from shopsim_metrics.settings import missing_knobs

FILTER_PATH = "shopsimrl.slime_runtime.fully_scored_group_filter"
DEFAULT_ROLLOUT_FUNCTION = "slime.rollout.sglang_rollout.generate_rollout"
"""The only rollout function of slime that calls the dynamic-sampling filter and the all-samples hook."""

_LOST_WITHOUT = {
    "rollout_batch_size": "no step is accounted or recorded (the filter still judges every group and the "
                          "failure limit still holds)",
    "n_samples_per_prompt": "groups with missing siblings are not caught (check too_few_rollouts is off)",
    "global_batch_size": "optimizer_update_count is not computed",
}


def missing_knobs_warning(args: Any) -> str | None:
    """One warning naming every accounting knob ``args`` lacks and what is lost, or None."""
    missing = missing_knobs(args)
    if not missing:
        return None
    lost = "; ".join(f"without {k}, {_LOST_WITHOUT[k]}" for k in missing)
    return (f"shopsim-metrics: slime's args lack {', '.join(missing)}: {lost}. Pass them on slime's command "
            "line (--rollout-batch-size, --n-samples-per-prompt, --global-batch-size).")


def no_judgement_warning(args: Any, rollout_id: int) -> str:
    """The warning for a step that ended with no judged group, naming the likely cause."""
    filter_path = getattr(args, "dynamic_sampling_filter_path", None)
    rollout_function = getattr(args, "rollout_function_path", None)
    if not filter_path:
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
