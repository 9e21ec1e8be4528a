"""Downsampling long per-step series for drawing, so a 100k-step run draws as fast as a short one.

- :func:`minmax_buckets` (lines): the steps are cut into equal buckets; each bucket keeps the points
  holding its minimum and its maximum, in step order. Spikes survive: a single step with 8 waves among
  100,000 with one is still drawn at its height.
- :func:`mean_buckets` (stacked bars): the same buckets for every series of the panel, each drawn at
  the bucket's first step with the mean of its values, so the stack still adds up (mean accepted =
  mean of the parts).

Missing values (``None``) stay missing: a bucket with no value draws a gap.

Example:
    >>> x = list(range(10)); y = [0, 5, 1, 1, 1, 1, 1, 1, -3, 1]
    >>> minmax_buckets(x, y, max_points=4)
    ([0, 1, 5, 8], [0, 5, 1, -3])
    >>> mean_buckets(x, [y], max_points=2)
    ([0, 5], [[1.6, 0.2]])
"""

from __future__ import annotations

from typing import Any, Sequence

MAX_POINTS = 5000
"""At most this many points per drawn trace."""


def _edges(n: int, buckets: int) -> list[tuple[int, int]]:
    return [(i * n // buckets, (i + 1) * n // buckets) for i in range(buckets)]


def minmax_buckets(x: Sequence[Any], y: Sequence[Any], *, max_points: int = MAX_POINTS) -> tuple[list, list]:
    """``(x, y)`` with at most ``max_points`` points, keeping each bucket's minimum and maximum."""
    n = len(x)
    if n <= max_points:
        return list(x), list(y)
    xs: list[Any] = []
    ys: list[Any] = []
    for lo, hi in _edges(n, max(1, max_points // 2)):
        present = [v for v in y[lo:hi] if v is not None]
        if not present:  # only missing values: keep the gap
            xs.append(x[lo])
            ys.append(None)
            continue
        low, high = y.index(min(present), lo, hi), y.index(max(present), lo, hi)  # the first of each
        for i in sorted({low, high}):
            xs.append(x[i])
            ys.append(y[i])
    return xs, ys


def mean_buckets(
    x: Sequence[Any], series: Sequence[Sequence[Any]], *, max_points: int = MAX_POINTS
) -> tuple[list, list[list]]:
    """``(bucket x, [bucket means per series])`` with at most ``max_points`` buckets, shared by all series."""
    n = len(x)
    if n <= max_points:
        return list(x), [list(s) for s in series]
    edges = _edges(n, max_points)
    out_x = [x[lo] for lo, _ in edges]
    out = []
    for values in series:
        means = []
        for lo, hi in edges:
            present = [v for v in values[lo:hi] if v is not None]
            means.append(sum(present) / len(present) if present else None)
        out.append(means)
    return out_x, out
