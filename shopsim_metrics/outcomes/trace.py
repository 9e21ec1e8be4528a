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
    shopsim_metrics.outcomes.trace.TraceError: trace: prompt 'a', visit 1: 0.3 is not a number of successes out of 4 (k/4)
"""

from __future__ import annotations

import functools
import os
from array import array
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence

import numpy as np

from shopsim_metrics.errors import check_input_path
from shopsim_metrics.judging.group_judgement import ZERO_STD_TOLERANCE
from shopsim_metrics.outcomes.json_items import NotJsonObject, iter_object_items
from shopsim_metrics.general.plain_values import is_int, is_number

FRACTION_TOLERANCE = 1e-6
"""How far ``fraction × n`` may sit from a whole number of successes (JSON rounding)."""

CHECK_BLOCK = 1 << 20
"""Fractions checked at a time (the check's temporary arrays stay this small)."""


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
    wave_origin: str = "the run's own"  # where over_sampling_batch_size comes from (printed beside it)


class TraceVisits(Sequence[tuple[Visit, ...]]):
    """Every prompt's visits, held as columns (a few numbers per visit, never an object each: a trace of millions
    of visits fits in memory); ``visits[i]`` is prompt ``i``'s, as :class:`Visit` objects made when asked for.

    Example:
        >>> visits = TraceVisits.from_rows([(Visit(2, False, 0.5, tokens=7),), ()])
        >>> len(visits), visits[0], visits[1], visits.count
        (2, (Visit(successes=2, zero_std=False, time=0.5, tokens=7, step=None),), (), 1)
    """

    def __init__(self, offsets: np.ndarray, successes: np.ndarray, zero_std: np.ndarray, times: np.ndarray,
                 tokens: np.ndarray | None = None, steps: np.ndarray | None = None) -> None:
        self.offsets = offsets  # prompt i's visits are [offsets[i], offsets[i + 1])
        self.successes, self.zero_std, self.times = successes, zero_std, times
        self.tokens, self.steps = tokens, steps  # -1: not recorded; None: no visit recorded one

    @classmethod
    def from_rows(cls, rows: Iterable[Iterable[Visit]]) -> "TraceVisits":
        """The columns of per-prompt rows of :class:`Visit` (a small trace, built visit by visit)."""
        offsets, flat = [0], []
        for row in rows:
            flat.extend(row)
            offsets.append(len(flat))

        def column(name: str, dtype: Any) -> np.ndarray:
            return np.array([getattr(v, name) for v in flat], dtype=dtype)

        def optional(name: str) -> np.ndarray | None:
            values = [getattr(v, name) for v in flat]
            return None if all(x is None for x in values) else np.array(
                [-1 if x is None else x for x in values], dtype=np.int64)

        return cls(np.array(offsets, dtype=np.int64), column("successes", np.int64), column("zero_std", bool),
                   column("time", np.float64), optional("tokens"), optional("step"))

    @property
    def count(self) -> int:
        """Visits over every prompt."""
        return len(self.successes)

    def visit(self, index: int) -> Visit:
        """The visit at ``index`` among all (prompt by prompt)."""
        tokens = None if self.tokens is None or self.tokens[index] < 0 else int(self.tokens[index])
        step = None if self.steps is None or self.steps[index] < 0 else int(self.steps[index])
        return Visit(successes=int(self.successes[index]), zero_std=bool(self.zero_std[index]),
                     time=float(self.times[index]), tokens=tokens, step=step)

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def __getitem__(self, prompt: Any) -> Any:
        if isinstance(prompt, slice):
            return [self[i] for i in range(*prompt.indices(len(self)))]
        first, end = self.offsets[prompt], self.offsets[prompt + 1] if prompt != -1 else self.offsets[-1]
        return tuple(self.visit(i) for i in range(int(first), int(end)))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, TraceVisits):
            return NotImplemented
        return all(_same(a, b) for a, b in zip(self._columns(), other._columns()))

    def _columns(self) -> tuple[np.ndarray | None, ...]:
        return self.offsets, self.successes, self.zero_std, self.times, self.tokens, self.steps


def _same(a: np.ndarray | None, b: np.ndarray | None) -> bool:
    return a is b if a is None or b is None else bool(np.array_equal(a, b))


@dataclass(frozen=True)
class Trace:
    """Per-prompt visits in training order (see the module docstring); ``visits`` may be given as rows of
    :class:`Visit` and is held as :class:`TraceVisits`."""

    prompts: tuple[str, ...]
    visits: Sequence[Sequence[Visit]]  # per prompt, in time order
    n_samples: int
    origin: str  # what it was read from, for the output
    run: RunKnobs | None = None  # the recorded run's knobs (records only)
    notes: tuple[str, ...] = ()  # what the output must say about how the trace was read (a dump's biases)
    texts: Mapping[str, str] = field(default_factory=dict)  # prompt key -> its text, where the source holds it

    def __post_init__(self) -> None:
        if not isinstance(self.visits, TraceVisits):
            object.__setattr__(self, "visits", TraceVisits.from_rows(self.visits))

    @property
    def columns(self) -> TraceVisits:
        return self.visits  # type: ignore[return-value]  # always, once built

    @property
    def visit_count(self) -> int:
        """Visits over every prompt."""
        return self.columns.count

    @property
    def tokens_recorded(self) -> bool:
        """Every visit carries its recorded response tokens."""
        tokens = self.columns.tokens
        return tokens is not None and bool((tokens >= 0).all())

    @property
    def zero_std_share(self) -> float:
        """Zero-std visits over all visits."""
        return float(self.columns.zero_std.mean())

    def visit_at(self, prompt: int, step: int, steps: int) -> Visit:
        """The visit of prompt ``prompt`` nearest in training time to replay step ``step`` of ``steps``
        (time ``(step + 1/2) / steps``; a tie goes to the earlier visit)."""
        columns = self.columns
        first, end = int(columns.offsets[prompt]), int(columns.offsets[prompt + 1])
        times = columns.times
        now = (step + 0.5) / max(steps, 1)
        right = first + int(np.searchsorted(times[first:end], now, side="left"))
        if right == first:
            return columns.visit(first)
        if right == end:
            return columns.visit(end - 1)
        left = right - 1
        return columns.visit(left if now - times[left] <= times[right] - now else right)

    def success_rate(self, prompt: int) -> float:
        """The prompt's successes over all its recorded rollouts."""
        return float(self.success_rates()[prompt])

    @functools.cached_property
    def _success_rates(self) -> np.ndarray:
        columns = self.columns
        counts = np.diff(columns.offsets)
        totals = (np.add.reduceat(columns.successes, columns.offsets[:-1], dtype=np.int64) if columns.count
                  else np.zeros(0))
        return totals / (self.n_samples * np.maximum(counts, 1))

    def success_rates(self) -> np.ndarray:
        """Every prompt's :meth:`success_rate`, at once."""
        return self._success_rates


def trace_from_mapping(data: Any, n_samples: int, origin: str = "trace") -> Trace:
    """A trace from ``{prompt_key: [success fraction per visit]}`` with groups of ``n_samples`` (see the module docstring)."""
    if not isinstance(data, Mapping):
        raise TraceError(f"{origin}: expected a JSON object {{prompt_key: [success fraction per visit]}}; "
                         f"got {type(data).__name__}")
    builder = _FractionsTrace(n_samples, origin)
    for key, fractions in data.items():
        builder.add(key, fractions)
    return builder.trace()


class _FractionsTrace:
    """A JSON trace built prompt by prompt: each prompt's fractions appended to one flat column, checked
    (numbers, within [0, 1], ``k/n``) all at once when the trace is made."""

    def __init__(self, n_samples: int, origin: str) -> None:
        if not is_int(n_samples) or n_samples < 1:
            raise TraceError(f"--n-samples-per-prompt: expected an integer >= 1; got {n_samples!r}")
        self.n, self.origin = n_samples, origin
        self.keys: list[str] = []
        self.offsets = array("q", [0])
        self.fractions = array("d")
        self.seen: set[str] = set()

    def add(self, key: Any, fractions: Any) -> None:
        if not isinstance(fractions, list):
            raise TraceError(f"{self.origin}: prompt {key!r}: expected a list of success fractions; "
                             f"got {type(fractions).__name__}")
        if not fractions:
            return
        if not set(map(type, fractions)) <= {int, float}:  # a bool, a string, a list ... (each said below)
            for j, value in enumerate(fractions):
                if not is_number(value):
                    raise TraceError(f"{self.origin}: prompt {key!r}, visit {j + 1}: expected a success fraction "
                                     f"(a number in [0, 1]); got {value!r}"[:300])
        key = str(key)
        if key in self.seen:
            raise TraceError(f"{self.origin}: prompt {key!r} appears twice; a trace names each prompt once")
        self.seen.add(key)
        try:
            self.fractions.extend(fractions)
        except OverflowError:  # an integer beyond a float
            self.fractions.extend(float("inf") if abs(v) > 1 else v for v in fractions)
        self.keys.append(key)
        self.offsets.append(len(self.fractions))

    def trace(self) -> Trace:
        if not self.keys:
            raise TraceError(f"{self.origin}: the trace holds no visit (an empty object, or only empty lists)")
        n = self.n
        offsets = np.frombuffer(self.offsets, dtype=np.int64).copy()
        values = np.frombuffer(self.fractions, dtype=np.float64)
        successes = np.empty(len(values), dtype=np.int32)
        for start in range(0, len(values), CHECK_BLOCK):  # bounded temporaries, whatever the trace's size
            block = values[start:start + CHECK_BLOCK]
            k = np.rint(block * n)
            problems = [(~np.isfinite(block), "expected a success fraction (a number in [0, 1]); got {value!r}"),
                        ((block < 0) | (block > 1), "{value!r} is outside [0, 1]"),
                        (np.abs(block * n - k) > FRACTION_TOLERANCE,
                         f"{{value!r}} is not a number of successes out of {n} (k/{n})")]
            for bad, message in problems:
                if bad.any():
                    index = start + int(np.argmax(bad))
                    prompt = int(np.searchsorted(offsets, index, side="right")) - 1
                    raise TraceError(f"{self.origin}: prompt {self.keys[prompt]!r}, visit "
                                     f"{index - int(offsets[prompt]) + 1}: " + message.format(value=float(values[index])))
            successes[start:start + CHECK_BLOCK] = k
        del values, block, k
        self.fractions = array("d")  # freed before the times are made
        counts = np.diff(offsets)
        times = np.arange(len(successes), dtype=np.float64)  # visit j of a prompt's V: (j + 1/2) / V
        times -= np.repeat(offsets[:-1], counts)
        times += 0.5
        times /= np.repeat(counts, counts)
        visits = TraceVisits(offsets, successes, (successes == 0) | (successes == n), times)
        return Trace(prompts=tuple(self.keys), visits=visits, n_samples=n, origin=self.origin)


def trace_from_json_file(path: str | os.PathLike, n_samples: int | None,
                         on_read: Callable[[int], None] | None = None) -> Trace:
    """A JSON trace file (``n_samples`` is required: the fractions are ``k/n`` of it), read one prompt at a time
    (:mod:`~shopsim_metrics.outcomes.json_items`: memory holds the trace's columns, never the file's text or its
    parsed values); ``on_read(n)`` after each ``n`` bytes read. Without ``n_samples``, a file that does not
    open with ``{`` is refused as not a JSON trace (an image, a log), not for the flag it lacks."""
    if n_samples is None and not opens_an_object(path):
        raise TraceError(f"{path}: not a JSON trace (it does not start with '{{'), nor a run's records, nor a dump; "
                         "expected a JSON object {prompt_key: [success fraction per visit]}, a run directory or "
                         "steps.jsonl, slime's .pt dumps or verl's {step}.jsonl files")
    if n_samples is None:
        raise TraceError(f"{path}: a JSON trace needs --n-samples-per-prompt N (its fractions are successes out of N)")
    builder = _FractionsTrace(n_samples, str(path))
    with open(path, "rb") as handle:
        try:
            for key, fractions in iter_object_items(handle, on_read=on_read):
                builder.add(key, fractions)
        except UnicodeDecodeError:
            raise TraceError(f"{path}: not a JSON trace (not UTF-8 text)") from None
        except NotJsonObject as exc:
            if str(exc).startswith("expected a JSON object"):
                raise TraceError(f"{path}: {exc} {{prompt_key: [success fraction per visit]}}") from None
            raise TraceError(f"{path}: {exc}") from None
    return builder.trace()


def opens_an_object(path: str | os.PathLike) -> bool:
    """Whether the file's first character other than white space (and a UTF-8 byte order mark) is ``{``.

    Example:
        >>> import tempfile, pathlib
        >>> path = pathlib.Path(tempfile.mkdtemp()) / "t.json"
        >>> _ = path.write_bytes(b"\\xef\\xbb\\xbf  \\n{}"); opens_an_object(path)
        True
        >>> _ = path.write_bytes(b"\\x89PNG\\r\\n"); opens_an_object(path)
        False
    """
    white = b" \t\r\n"
    with open(path, "rb") as handle:
        head = handle.read(4096).removeprefix(b"\xef\xbb\xbf")
        while head and not head.lstrip(white):
            head = handle.read(4096)
    return head.lstrip(white).startswith(b"{")


_KNOBS = ("n_samples_per_prompt", "rollout_batch_size", "over_sampling_batch_size", "skipped_prompt_count")
_ROW = ("prompt_key", "success_count", "scorable_rollouts", "reward_min", "reward_max", "response_tokens")


def trace_from_records(path: str | os.PathLike) -> Trace:
    """The visits in a run's records (a run directory or ``steps.jsonl``; see the module docstring), streamed:
    of each step's record (the one the run's lineage holds) only the scored rows' few fields are kept, never
    the records themselves."""
    from shopsim_metrics.readers.steps import read_step_columns

    rows_of: dict[int, list[tuple]] = {}

    def keep(rollout_id: int, data: dict[str, Any], _line: bytes) -> None:  # a later write of a step replaces it
        rows_of[rollout_id] = [tuple(row.get(name) for name in _ROW) for row in data.get("decisions") or ()
                               if row.get("prompt_key") is not None and row.get("failed_check") is None]

    table = read_step_columns(path, keep_ledger=keep, names=("rollout_id", *_KNOBS))
    n_values = {n for n in table.column("n_samples_per_prompt") if n}
    if len(n_values) > 1:
        raise TraceError(f"{path}: the records change n_samples_per_prompt ({sorted(n_values)}); replay one setting")
    if not n_values:
        raise TraceError(f"{path}: the records do not say n_samples_per_prompt")
    n = n_values.pop()
    steps = table.rollout_ids[-1] + 1
    found: dict[str, list[Visit]] = {}
    for rollout_id in table.rollout_ids:
        time = (rollout_id + 0.5) / steps
        for key, successes, scored, low, high, tokens in rows_of.pop(rollout_id, ()):
            if scored != n:
                continue
            spread = (high or 0.0) - (low or 0.0) > ZERO_STD_TOLERANCE
            found.setdefault(key, []).append(Visit(successes=int(successes or 0), zero_std=not spread, time=time,
                                                   tokens=tokens or None, step=rollout_id))
    if not found:
        raise TraceError(f"{path}: no per-prompt outcomes in the records (no decision row with a prompt key and "
                         f"{n} scored rollouts; were prompts tracked? shopsim_prompt_history_limit must not be 0)")
    last = table.last_values
    run = RunKnobs(rollout_batch_size=last.get("rollout_batch_size"),
                   over_sampling_batch_size=last.get("over_sampling_batch_size"), steps=steps)
    skipped = sum(count or 0 for count in table.column("skipped_prompt_count"))
    origin = f"{path}" + (f" (a run that skipped {skipped} draws: their outcomes are the nearest visits')"
                          if skipped else "")
    keys = sorted(found)
    return Trace(prompts=tuple(keys), visits=tuple(tuple(found[k]) for k in keys), n_samples=n, origin=origin,
                 run=run)


def holds_records(path: Path) -> bool:
    """Whether the file ``path`` holds the project's records (JSON lines, each a step record) rather than a JSON
    trace, by what it holds, whatever its name: a record's first item is its ``rollout_id``, a trace's a prompt's
    visits. A file that is neither is taken by its name (``.jsonl``: records), so its error is the expected one's.

    Example:
        >>> import tempfile, pathlib
        >>> path = pathlib.Path(tempfile.mkdtemp()) / "trace.jsonl"
        >>> _ = path.write_text('{"a": [0.5]}'); holds_records(path)
        False
        >>> _ = path.write_text('{"rollout_id": 0}\\n{"rollout_id": 1}\\n'); holds_records(path)
        True
    """
    with open(path, "rb") as handle:
        items = iter_object_items(handle, chunk=64 * 1024)
        try:
            key, value = next(items)
        except (StopIteration, NotJsonObject, UnicodeDecodeError):
            return path.name.endswith(".jsonl")
        finally:
            items.close()
    return key == "rollout_id" and isinstance(value, int)


def load_trace(path: str | os.PathLike, n_samples: int | None = None,
               on_read: Callable[[int], None] | None = None) -> Trace:
    """A trace from a JSON file, or from a run directory / ``steps.jsonl`` of the project's records; a FIFO or
    a device is refused unopened. ``on_read(n)``: after each ``n`` bytes of a JSON trace read."""
    try:
        target = check_input_path(path, "a JSON trace, or a run directory / steps.jsonl of the project's records")
    except (FileNotFoundError, ValueError) as exc:
        raise TraceError(str(exc)) from None
    if target.is_dir() or holds_records(target):
        return trace_from_records(target)
    return trace_from_json_file(target, n_samples, on_read)
