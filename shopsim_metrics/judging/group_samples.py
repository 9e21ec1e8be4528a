"""The samples of a finished group, and the tokens the model generated in them: one rule each, for every reader.

A group is ``list[Sample]`` or, when the generate function fans one rollout out into segments,
``list[list[Sample]]``. :func:`leaves` is the one way the house flattens it (the judgement, the token counts,
the fully-async admission, the simulator); nothing else walks a group's segments by hand.

A rollout's generated tokens follow slime's rule (``Sample.effective_response_length``): the 1s of
``loss_mask`` when it is a list of 0s and 1s exactly as long as the response (a multi-turn episode marks the
environment's tokens 0), else ``response_length`` (a single-turn sample has no mask). The monitor's counts,
the run's outcomes and the simulator's lengths all read it through :func:`read_generated_tokens`.

Every segment of a rollout counts its own tokens (segments of one fanned-out rollout are separate
generations), and a sample object listed twice counts once. Scorable or not, every rollout of a judged
group counts: its tokens were generated.

``response_length`` is read defensively and never raises: ints, integral floats, numpy integers
and 0-dim arrays / tensors (through ``.item()``) count; anything else (missing, None, negative,
non-finite, fractional, text, an object whose ``.item()`` fails) counts 0, and so does a length above
:data:`MAX_TOKENS` (no response is that long: a value out of range, which the sample hook counts and warns of once).

Example:
    >>> from shopsim_metrics.simulator.samples import SimSample as S
    >>> len(leaves([[S(rollout_id=0), S(rollout_id=0)], [S(rollout_id=1)]]))   # two rollouts, three segments
    3
    >>> group_tokens([S(index=0, response_length=100), S(index=1, response_length=50)])
    150
    >>> group_tokens([[S(rollout_id=0, response_length=10), S(rollout_id=0, response_length=5)]])
    15
    >>> group_tokens([S(index=0, response_length=None), S(index=1, response_length=-3), "odd"])
    0
    >>> group_tokens([S(index=0, response_length=5, loss_mask=[1, 1, 0, 0, 1])])   # 2 tool tokens
    3
"""

from __future__ import annotations

import math
from typing import Any, Iterable

from shopsim_metrics.general.plain_values import as_float


def leaves(group: Iterable[Any]) -> list[Any]:
    """Every sample of ``group`` in order: a flat group's samples, a fanned-out group's segments one after another.

    An item that is a list or tuple is one rollout's segments. Raises what iterating ``group`` raises (a reader
    that must never raise catches it: an unreadable group has no samples).

    Example:
        >>> leaves([1, [2, 3], (4,)]), leaves([])
        ([1, 2, 3, 4], [])
    """
    samples: list[Any] = []
    for item in group:
        if isinstance(item, (list, tuple)):  # the segments of one fanned-out rollout
            samples.extend(item)
        else:
            samples.append(item)
    return samples


MAX_TOKENS = 2**31 - 1
"""The most tokens a response may hold (and an episode turns): what slime's int32 token tensors can index. A larger
``response_length`` or ``round_number`` is no real sample's: read as unknown, so no sum or mean of a step can
overflow or be swamped by it."""


def read_response_length(sample: Any) -> int:
    """``sample.response_length`` as a non-negative int, or 0 when it cannot be read as one.

    Example:
        >>> from types import SimpleNamespace as N
        >>> [read_response_length(N(response_length=v)) for v in (7, 7.0, 7.5, "7", True, float("inf"), 10**400)]
        [7, 7, 0, 0, 0, 0, 0]
    """
    return checked_response_length(sample)[0]


def checked_response_length(sample: Any) -> tuple[int, Any]:
    """:func:`read_response_length`, and the value read when it was a length out of range (above
    :data:`MAX_TOKENS`; else None).

    >>> from types import SimpleNamespace as N
    >>> checked_response_length(N(response_length=7)), checked_response_length(N(response_length=2**40))
    ((7, None), (0, 1099511627776))
    """
    try:
        value = getattr(sample, "response_length", None)
        if value is None or isinstance(value, bool) or type(value).__name__ == "bool_":
            return 0, None
        if isinstance(value, int):  # exact, however large (a float would round it)
            if value > MAX_TOKENS:
                return 0, value
            return (int(value), None) if value > 0 else (0, None)
        number = as_float(value)  # numpy integers, 0-dim arrays / tensors, integral floats
    except Exception:  # noqa: BLE001 - unreadable lengths count 0, never raise
        return 0, None
    if not math.isfinite(number) or number < 0 or number != int(number):
        return 0, None
    if number > MAX_TOKENS:
        return 0, number
    return int(number), None


def read_generated_tokens(sample: Any) -> int:
    """The tokens the model sampled in ``sample``: the 1s of an aligned ``loss_mask``, else ``response_length``.

    Example:
        >>> from types import SimpleNamespace as N
        >>> read_generated_tokens(N(response_length=4, loss_mask=[1, 0, 0, 1]))
        2
        >>> read_generated_tokens(N(response_length=4, loss_mask=[1, 0]))   # not aligned: the response
        4
    """
    length = read_response_length(sample)
    mask = trainable_mask(sample, length)
    return length if mask is None else mask.count(1)


def trainable_mask(sample: Any, length: int) -> bytes | None:
    """``sample.loss_mask`` as bytes when it is a list or tuple of 0s and 1s exactly ``length`` long, else None.

    Example:
        >>> from types import SimpleNamespace as N
        >>> trainable_mask(N(loss_mask=[1, 0, True]), 3), trainable_mask(N(loss_mask=[1, 2]), 2)
        (b'\\x01\\x00\\x01', None)
    """
    try:
        mask = getattr(sample, "loss_mask", None)
    except Exception:  # noqa: BLE001 - a property that raises reads as no mask
        return None
    if not isinstance(mask, (list, tuple)) or len(mask) != length or not length:
        return None
    try:
        data = bytes(mask)  # ints 0..255 (bools, numpy integers); anything else raises
    except Exception:  # noqa: BLE001 - floats, text, None inside: not a mask slime would train with
        return None
    return data if data.count(0) + data.count(1) == length else None


def group_tokens(group: Any) -> int:
    """Generated tokens of every segment of every rollout of ``group`` (0 for an unreadable group)."""
    try:
        samples = leaves(group)
    except Exception:  # noqa: BLE001 - not iterable: nothing readable was generated
        return 0
    seen: set[int] = set()
    total = 0
    for sample in samples:
        if id(sample) in seen:
            continue
        seen.add(id(sample))
        total += read_generated_tokens(sample)
    return total
