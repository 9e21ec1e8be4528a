"""slime's drop rule (``should_drop_dynamic_filter_output``), held once for the accountant and the simulator.

slime drops a group its filter did not keep, unless the filter asked to keep it when the batch
would otherwise fall short (``keep_when_insufficient``) and ``remaining_batch_size`` is no longer
above ``target_data_size`` (= ``rollout_batch_size``). The project's filter answers per judgement
kind (:func:`filter_flags`): a spread group is kept, a zero-std one is kept only as a fallback, a
technical one never.

Example:
    >>> [should_drop(*filter_flags("zero_std"), remaining_batch_size=r, target_data_size=2) for r in (3, 2)]
    [True, False]
    >>> should_drop(*filter_flags("technical"), remaining_batch_size=1, target_data_size=2)
    True
"""

from __future__ import annotations

from shopsim_metrics.judging.group_judgement import SPREAD, ZERO_STD


def should_drop(
    keep: bool, keep_when_insufficient: bool, *, remaining_batch_size: int, target_data_size: int,
) -> bool:
    """Whether slime drops a group the filter answered ``(keep, keep_when_insufficient)`` for.

    Example:
        >>> should_drop(True, False, remaining_batch_size=9, target_data_size=1)
        False
    """
    return not keep and not (keep_when_insufficient and remaining_batch_size <= target_data_size)


def filter_flags(kind: str) -> tuple[bool, bool]:
    """``(keep, keep_when_insufficient)``: what the project's filter answers for a judgement ``kind``.

    Example:
        >>> filter_flags("spread"), filter_flags("zero_std"), filter_flags("technical")
        ((True, False), (False, True), (False, False))
    """
    return kind == SPREAD, kind == ZERO_STD
