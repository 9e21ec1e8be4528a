"""Groups of unequal size: judged groups whose unique rollouts are not ``n_samples_per_prompt``.

slime's reward post-processing (``RolloutManager._post_process_rewards``, GRPO with
``--rewards-normalization``) reshapes the train batch's rewards into groups of ``n_samples_per_prompt``
only when the batch holds exactly ``n_samples_per_prompt × rollout_batch_size`` samples; otherwise it
normalises the whole batch as one single group, silently. A group's size here is its unique rollouts,
fan-out folded by ``rollout_id`` (the ledger's ``unique_rollouts``). The accountant counts such groups
(:func:`unequal_size_rows`) and the monitor names them in one warning per step
(:func:`unequal_size_warning`); both use the one rule below.

Example:
    >>> from shopsim_metrics.record.records import DecisionRow
    >>> rows = [DecisionRow(order=1, waves_open=1, group_index=40, outcome="trained", reason=None,
    ...                     remaining_before=4, unique_rollouts=5),
    ...         DecisionRow(order=2, waves_open=1, group_index=41, outcome="trained", reason=None,
    ...                     remaining_before=4, unique_rollouts=4)]
    >>> [row.group_index for row in unequal_size_rows(rows, n_samples_per_prompt=4)]
    [40]
    >>> unequal_size_rows(rows, n_samples_per_prompt=None) is None   # n unknown: no verdict
    True
"""

from __future__ import annotations

from typing import Any, Sequence

from shopsim_metrics.record import contract as C

NAMED_GROUPS_LIMIT = 10
"""Groups a warning names one by one; the rest are counted (the record has every row)."""


def unequal_size_rows(rows: Sequence[Any], n_samples_per_prompt: int | None) -> list[Any] | None:
    """The ledger rows whose ``unique_rollouts`` differ from ``n_samples_per_prompt`` (None when it is unknown)."""
    if n_samples_per_prompt is None:
        return None
    return [row for row in rows if row.unique_rollouts != n_samples_per_prompt]


def unequal_size_warning(rollout_id: int, rows: Sequence[Any], n_samples_per_prompt: int | None) -> str | None:
    """The step's one warning naming its groups of unequal size (None when there are none).

    Example:
        >>> from shopsim_metrics.record.records import DecisionRow
        >>> row = DecisionRow(order=1, waves_open=1, group_index=7, outcome="fallback", reason=None,
        ...                   remaining_before=2, unique_rollouts=9)
        >>> print(unequal_size_warning(3, [row], 8))  # doctest: +NORMALIZE_WHITESPACE
        shopsim-metrics: step 3: 1 judged group has a number of unique rollouts (fan-out folded by rollout_id)
        other than n_samples_per_prompt=8: group_index 7 (9 rollouts, fallback). 1 of them is in the train
        batch: slime's default reward post-processing then normalises the whole batch as one group (GRPO group
        normalisation is lost for the step). Counted in rollout/shopsim/unequal_size_group_count.
    """
    unequal = unequal_size_rows(rows, n_samples_per_prompt)
    if not unequal:
        return None
    named = ", ".join(f"group_index {row.group_index} ({row.unique_rollouts} rollouts, {row.outcome})"
                      for row in unequal[:NAMED_GROUPS_LIMIT])
    more = len(unequal) - NAMED_GROUPS_LIMIT
    if more > 0:
        named += f" and {more} more (the record's decisions list them)"
    trained = sum(1 for row in unequal if row.outcome in (C.OUTCOME_TRAINED, C.OUTCOME_FALLBACK))
    groups = "group has" if len(unequal) == 1 else "groups have"
    if trained:
        effect = (f"{trained} of them {'is' if trained == 1 else 'are'} in the train batch: slime's default reward "
                  "post-processing then normalises the whole batch as one group (GRPO group normalisation is "
                  "lost for the step)")
    else:
        effect = "none of them is in the train batch (slime's group normalisation of the step is unaffected)"
    return (f"shopsim-metrics: step {rollout_id}: {len(unequal)} judged {groups} a number of unique rollouts "
            f"(fan-out folded by rollout_id) other than n_samples_per_prompt={n_samples_per_prompt}: {named}. "
            f"{effect}. Counted in {C.wandb_key('unequal_size_group_count')}.")
