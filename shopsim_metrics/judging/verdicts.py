"""The verdict of a judged group: its kind, with a zero-std group split by its successes.

Too easy (``zero_std_all_pass``: every scorable rollout a success), too hard (``zero_std_all_fail``:
none), or neither (``zero_std_other``). The step's zero-std cause counts, the prompt history and the
skipping rule all speak these words.

Example:
    >>> verdict_of("zero_std", 8, 8), verdict_of("spread", 4, 8)
    ('zero_std_all_pass', 'spread')
"""

from __future__ import annotations

from shopsim_metrics.judging.group_judgement import SPREAD, TECHNICAL, ZERO_STD

ZERO_STD_ALL_PASS = "zero_std_all_pass"
ZERO_STD_ALL_FAIL = "zero_std_all_fail"
ZERO_STD_OTHER = "zero_std_other"
VERDICTS = (SPREAD, ZERO_STD_ALL_PASS, ZERO_STD_ALL_FAIL, ZERO_STD_OTHER, TECHNICAL)
"""A visit's verdict (exactly one): the judgement's kind, with a zero-std group split by its successes."""
ZERO_STD_VERDICTS = frozenset((ZERO_STD_ALL_PASS, ZERO_STD_ALL_FAIL, ZERO_STD_OTHER))


def verdict_of(kind: str, success_count: int | None, scorable_rollouts: int | None) -> str:
    """A visit's verdict from the filter's judgement kind (``spread``, ``zero_std``, ``technical``).

    Example:
        >>> verdict_of("zero_std", 8, 8), verdict_of("zero_std", 0, 8), verdict_of("zero_std", 3, 8)
        ('zero_std_all_pass', 'zero_std_all_fail', 'zero_std_other')
    """
    if kind == SPREAD:
        return SPREAD
    if kind != ZERO_STD:
        return TECHNICAL
    if not success_count:
        return ZERO_STD_ALL_FAIL
    return ZERO_STD_ALL_PASS if success_count == scorable_rollouts else ZERO_STD_OTHER
