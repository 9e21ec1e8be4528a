"""Recorded per-prompt outcomes of a run: what ``shopsim-metrics replay`` replays.

A trace holds, for every prompt, its visits in training order: how many of the group's ``n``
rollouts succeeded, whether the group was zero-std, when in the run it was visited, and (when the
run recorded them) its response tokens. Two sources:

- **a JSON object** ``{prompt_key: [success fraction per visit, in visit order]}`` with the group size
  ``n`` given (``--n-samples-per-prompt``): each fraction must be ``k/n``; a visit is zero-std exactly
  when it is 0 or 1. The step of a visit is not recorded: a prompt's ``V`` visits are taken as evenly
  spread over the run (visit ``j`` at time ``(j + 1/2) / V``), as epochs over a shuffled dataset are;
- **the project's own records** (a run directory or ``steps.jsonl``): every decision row with a prompt
  key whose ``n`` rollouts were all scored is a visit at its step (time ``(rollout_id + 1/2) / steps``),
  zero-std when its rewards did not differ, with the group's recorded response tokens. Technical groups
  are left out (their outcome was not scored).

**Training time, not epochs.** A replayed draw of a prompt at step ``s`` of a replay of ``S`` steps
(time ``(s + 1/2) / S``) gets the prompt's visit nearest in time (:meth:`Trace.visit_at`): what the
policy of that point in training did with it. Skipping makes a data source walk its epochs faster, and
indexing a prompt's history by its draws would then show it later, better-trained outcomes early; indexed
by time it cannot.

Bad input raises :class:`TraceError` (a ``ValueError``), one line naming the problem.

Example:
    >>> trace = trace_from_mapping({"a": [0.0, 0.5, 1.0], "b": [0.25]}, n_samples=4)
    >>> [v.successes for v in trace.visits[0]], trace.visits[0][1].zero_std, trace.visit_count
    ([0, 2, 4], False, 4)
    >>> [trace.visit_at(0, step, steps=6).successes for step in range(6)]   # 6 replay steps over 3 visits
    [0, 0, 2, 2, 4, 4]
    >>> trace_from_mapping({"a": [0.3]}, n_samples=4)
    Traceback (most recent call last):
    ...
    shopsim_metrics.replay.trace.TraceError: prompt 'a', visit 1: 0.3 is not a number of successes out of 4 (k/4)
"""

from __future__ import annotations

import bisect
import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from shopsim_metrics.errors import check_input_path
from shopsim_metrics.judging.group_judgement import ZERO_STD_TOLERANCE

FRACTION_TOLERANCE = 1e-6
"""How far ``fraction × n`` may sit from a whole number of successes (JSON rounding)."""


class TraceError(ValueError):
    """A trace that cannot be replayed; the message names what is wrong and where."""


@dataclass(frozen=True)
class Visit:
    """One recorded group of a prompt."""

    successes: int  # rollouts that succeeded, of the trace's n
    zero_std: bool  # the group's rewards did not differ (it taught nothing)
    time: float  # when in the recorded run, as a share of it: in [0, 1)
    tokens: int | None = None  # the group's response tokens (None: not recorded)
    step: int | None = None  # the recorded run's step (None: not recorded, a JSON trace)


@dataclass(frozen=True)
class RunKnobs:
    """slime's knobs of the recorded run (records only): the replay's defaults."""

    rollout_batch_size: int | None
    over_sampling_batch_size: int | None
    steps: int


@dataclass(frozen=True)
class Trace:
    """Per-prompt visits in training order (see the module docstring)."""

    prompts: tuple[str, ...]
    visits: tuple[tuple[Visit, ...], ...]  # per prompt, in time order
    n_samples: int
    origin: str  # what it was read from, for the output
    run: RunKnobs | None = None  # the recorded run's knobs (records only)
    notes: tuple[str, ...] = ()  # what the output must say about how the trace was read (a dump's biases)
    _times: tuple[tuple[float, ...], ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_times", tuple(tuple(v.time for v in visits) for visits in self.visits))

    @property
    def visit_count(self) -> int:
        """Visits over every prompt."""
        return sum(len(visits) for visits in self.visits)

    @property
    def tokens_recorded(self) -> bool:
        """Every visit carries its recorded response tokens."""
        return all(v.tokens is not None for visits in self.visits for v in visits)

    @property
    def zero_std_share(self) -> float:
        """Zero-std visits over all visits."""
        return sum(v.zero_std for visits in self.visits for v in visits) / self.visit_count

    def visit_at(self, prompt: int, step: int, steps: int) -> Visit:
        """The visit of prompt ``prompt`` nearest in training time to replay step ``step`` of ``steps``
        (time ``(step + 1/2) / steps``; a tie goes to the earlier visit)."""
        times = self._times[prompt]
        now = (step + 0.5) / max(steps, 1)
        right = bisect.bisect_left(times, now)
        if right == 0:
            return self.visits[prompt][0]
        if right == len(times):
            return self.visits[prompt][-1]
        left = right - 1
        return self.visits[prompt][left if now - times[left] <= times[right] - now else right]

    def success_rate(self, prompt: int) -> float:
        """The prompt's successes over all its recorded rollouts."""
        visits = self.visits[prompt]
        return sum(v.successes for v in visits) / (self.n_samples * len(visits))


def trace_from_mapping(data: Any, n_samples: int, origin: str = "trace") -> Trace:
    """A trace from ``{prompt_key: [success fraction per visit]}`` with groups of ``n_samples`` (see the module docstring)."""
    if isinstance(n_samples, bool) or not isinstance(n_samples, int) or n_samples < 1:
        raise TraceError(f"--n-samples-per-prompt: expected an integer >= 1; got {n_samples!r}")
    if not isinstance(data, Mapping):
        raise TraceError(f"{origin}: expected a JSON object {{prompt_key: [success fraction per visit]}}; "
                         f"got {type(data).__name__}")
    prompts, visits = [], []
    for key, fractions in data.items():
        if not isinstance(fractions, list):
            raise TraceError(f"{origin}: prompt {key!r}: expected a list of success fractions; "
                             f"got {type(fractions).__name__}")
        if not fractions:
            continue
        count = len(fractions)
        row = []
        for j, value in enumerate(fractions):
            row.append(Visit(successes=_successes(key, j, value, n_samples), zero_std=False, time=(j + 0.5) / count))
        row = [Visit(v.successes, v.successes in (0, n_samples), v.time) for v in row]
        prompts.append(str(key))
        visits.append(tuple(row))
    if not prompts:
        raise TraceError(f"{origin}: the trace holds no visit (an empty object, or only empty lists)")
    return Trace(prompts=tuple(prompts), visits=tuple(visits), n_samples=n_samples, origin=origin)


def _successes(key: Any, j: int, value: Any, n: int) -> int:
    where = f"prompt {key!r}, visit {j + 1}"
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise TraceError(f"{where}: expected a success fraction (a number in [0, 1]); got {value!r}")
    if not 0.0 <= value <= 1.0:
        raise TraceError(f"{where}: {value!r} is outside [0, 1]")
    k = round(value * n)
    if abs(value * n - k) > FRACTION_TOLERANCE:
        raise TraceError(f"{where}: {value!r} is not a number of successes out of {n} (k/{n})")
    return k


def trace_from_json_file(path: str | os.PathLike, n_samples: int | None) -> Trace:
    """A JSON trace file (``n_samples`` is required: the fractions are ``k/n`` of it)."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise TraceError(f"{path}: not a JSON trace (not UTF-8 text)") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise TraceError(f"{path}: not JSON ({exc.msg} at line {exc.lineno}, column {exc.colno})") from None
    if n_samples is None:
        raise TraceError(f"{path}: a JSON trace needs --n-samples-per-prompt N (its fractions are successes out of N)")
    return trace_from_mapping(data, n_samples, origin=str(path))


def trace_from_records(path: str | os.PathLike) -> Trace:
    """The visits in a run's records (a run directory or ``steps.jsonl``; see the module docstring)."""
    from shopsim_metrics.readers.steps import read_step_records

    records, _ = read_step_records(path)
    n_values = {r.n_samples_per_prompt for r in records if r.n_samples_per_prompt}
    if len(n_values) > 1:
        raise TraceError(f"{path}: the records change n_samples_per_prompt ({sorted(n_values)}); replay one setting")
    if not n_values:
        raise TraceError(f"{path}: the records do not say n_samples_per_prompt")
    n = n_values.pop()
    steps = max(r.rollout_id for r in records) + 1
    found: dict[str, list[Visit]] = {}
    for record in records:
        time = (record.rollout_id + 0.5) / steps
        for row in record.decisions:
            if row.prompt_key is None or row.failed_check is not None or row.scorable_rollouts != n:
                continue
            spread = (row.reward_max or 0.0) - (row.reward_min or 0.0) > ZERO_STD_TOLERANCE
            found.setdefault(row.prompt_key, []).append(
                Visit(successes=int(row.success_count or 0), zero_std=not spread, time=time,
                      tokens=row.response_tokens or None, step=record.rollout_id))
    if not found:
        raise TraceError(f"{path}: no per-prompt outcomes in the records (no decision row with a prompt key and "
                         f"{n} scored rollouts; were prompts tracked? shopsim_prompt_history_limit must not be 0)")
    last = records[-1]
    run = RunKnobs(rollout_batch_size=last.rollout_batch_size, over_sampling_batch_size=last.over_sampling_batch_size,
                   steps=steps)
    skipped = sum(r.skipped_prompt_count or 0 for r in records)
    origin = f"{path}" + (f" (a run that skipped {skipped} draws: their outcomes are the nearest visits')"
                          if skipped else "")
    keys = sorted(found)
    return Trace(prompts=tuple(keys), visits=tuple(tuple(found[k]) for k in keys), n_samples=n, origin=origin,
                 run=run)


def load_trace(path: str | os.PathLike, n_samples: int | None = None) -> Trace:
    """A trace from a JSON file, or from a run directory / ``steps.jsonl`` of the project's records; a FIFO or
    a device is refused unopened."""
    try:
        target = check_input_path(path, "a JSON trace, or a run directory / steps.jsonl of the project's records")
    except (FileNotFoundError, ValueError) as exc:
        raise TraceError(str(exc)) from None
    if target.is_dir() or target.name.endswith(".jsonl"):
        return trace_from_records(target)
    return trace_from_json_file(target, n_samples)
