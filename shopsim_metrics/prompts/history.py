"""Per-prompt history: what each prompt's visits looked like, in a compact, bounded store.

For every tracked prompt the history keeps its visits, its last verdicts, the current run of equal
zero-std verdicts, the tokens spent on it and the tokens spent on its zero-std visits ("wasted").
At most ``limit`` prompts are tracked; the least recently seen one is evicted first. The tokens and
visits of every tracked prompt are also kept summed, so a prompt's cost against the tracked prompts'
mean (:meth:`PromptHistory.relative_cost`) is one division.

Store: an ``OrderedDict`` (recency order) from the key (a 60-bit int for hashed prompts, the string
for metadata keys, see :mod:`shopsim_metrics.judging.prompt_keys`) to one small record per prompt
(:class:`PromptRecord`, slotted): about 280 bytes per prompt at 1,000,000 prompts, within the
400-byte goal (``benchmarks/bench_prompt_history.py``).

Example:
    >>> h = PromptHistory(limit=2)
    >>> [h.visit("a", ZERO_STD_ALL_FAIL, 10), h.visit("a", ZERO_STD_ALL_FAIL, 12)]
    [None, 'zero_std_all_fail']
    >>> h.visit("b", SPREAD, 5); h.visit("c", SPREAD, 5)   # "a" is now the least recently seen
    >>> len(h), "a" in h
    (2, False)
    >>> s = h.stats("b"); (s.visits, s.last_verdict, s.zero_std_run, s.tokens)
    (1, 'spread', 0, 5)
"""

from __future__ import annotations

import gc
from collections import OrderedDict
from contextlib import contextmanager
from dataclasses import dataclass
from heapq import nlargest
from typing import Any, Hashable, Iterator

from shopsim_metrics.judging.group_judgement import SPREAD, TECHNICAL
from shopsim_metrics.judging.verdicts import (
    ZERO_STD_ALL_FAIL, ZERO_STD_ALL_PASS, ZERO_STD_OTHER, ZERO_STD_VERDICTS,
)
from shopsim_metrics.judging.prompt_keys import key_text
from shopsim_metrics.record.saved_values import at_most, count_column, number_column, saved_count
from shopsim_metrics.settings.prompt_skip import SkipRuleSettings
from shopsim_metrics.general.plain_values import is_int

VERDICT_LETTERS = {SPREAD: "S", ZERO_STD_ALL_PASS: "P", ZERO_STD_ALL_FAIL: "F", ZERO_STD_OTHER: "O", TECHNICAL: "T"}
"""One letter per verdict, for the compact verdict history (``"FFFP"``: oldest first)."""

HISTORY_LENGTH = 8  # verdicts kept per prompt
DEFAULT_LIMIT = 1_000_000
DEFAULT_FORGETTING = SkipRuleSettings.forgetting  # shopsim_prompt_skip_forgetting's default, declared there

_LETTER_VERDICT = {letter: verdict for verdict, letter in VERDICT_LETTERS.items()}


@dataclass(frozen=True)
class PromptStats:
    """One tracked prompt, as the prompts table and the ``prompts`` command show it."""

    key: str  # as the ledger writes it
    visits: int
    verdicts: tuple[str, ...]  # the last (up to 8) verdicts, oldest first
    zero_std_run: int  # consecutive visits with the same zero-std verdict, up to the last one
    zero_std_visits: int
    tokens: int  # over all visits (0 when the tokens were not known)
    wasted_tokens: int  # over the zero-std visits

    @property
    def last_verdict(self) -> str | None:
        return self.verdicts[-1] if self.verdicts else None

    @property
    def verdict_letters(self) -> str:
        """The compact verdict history, e.g. ``"SFFF"`` (oldest first; see :data:`VERDICT_LETTERS`)."""
        return "".join(VERDICT_LETTERS[v] for v in self.verdicts)


class PromptRecord:
    """What the history holds for one prompt (the fields of :class:`PromptStats`, the verdicts as letters)."""

    __slots__ = ("letters", "visits", "zero_std_run", "zero_std_visits", "tokens", "wasted_tokens", "successes",
                 "failures", "seen_step")

    def __init__(self, letters: str = "", visits: int = 0, zero_std_run: int = 0, zero_std_visits: int = 0,
                 tokens: int = 0, wasted_tokens: int = 0, successes: float = 0.0, failures: float = 0.0,
                 seen_step: int | None = None) -> None:
        self.letters = letters  # the last HISTORY_LENGTH verdicts, oldest first (VERDICT_LETTERS)
        self.visits = visits
        self.zero_std_run = zero_std_run
        self.zero_std_visits = zero_std_visits
        self.tokens = tokens
        self.wasted_tokens = wasted_tokens
        self.successes = successes  # scored rollouts that succeeded, each visit weighed by forgetting ** (seen_step - its step)
        self.failures = failures
        self.seen_step = seen_step  # the rollout step of the last visit that carried success counts

    def stats(self, key: Hashable) -> PromptStats:
        return PromptStats(key=key_text(key), visits=self.visits,  # type: ignore[arg-type]
                           verdicts=tuple(_LETTER_VERDICT[letter] for letter in self.letters),
                           zero_std_run=self.zero_std_run, zero_std_visits=self.zero_std_visits,
                           tokens=self.tokens, wasted_tokens=self.wasted_tokens)


def _waste_rank(item: tuple[Hashable, PromptRecord]) -> tuple[int, int, int]:
    record = item[1]
    return record.wasted_tokens, record.zero_std_visits, record.tokens


def _check_columns(columns: dict[str, list]) -> None:
    """``ValueError`` unless the saved columns hold what a history can: counts where counts are, zero-std runs
    and visits within the visits, wasted tokens within the tokens, finite evidence >= 0, steps >= 0, and
    verdict letters of :data:`VERDICT_LETTERS`, at most :data:`HISTORY_LENGTH` per prompt.

    Example:
        >>> _check_columns({"letters": ["SQ"], "visits": [2], "zero_std_run": [0], "zero_std_visits": [0],
        ...                 "tokens": [0], "wasted_tokens": [0], "successes": [0.0], "failures": [0.0],
        ...                 "seen_step": [None]})
        Traceback (most recent call last):
        ...
        ValueError: a saved prompt history holds verdict letters outside SPFOT: 'SQ'
    """
    for name in ("visits", "zero_std_run", "zero_std_visits", "tokens", "wasted_tokens"):
        count_column(columns[name], f"the prompt history's {name}")
    for name in ("successes", "failures"):
        number_column(columns[name], f"the prompt history's {name}")
    count_column([step for step in columns["seen_step"] if step is not None], "the prompt history's seen_step")
    at_most(columns["zero_std_run"], columns["zero_std_visits"], "a prompt's zero-std run within its zero-std visits")
    at_most(columns["zero_std_visits"], columns["visits"], "a prompt's zero-std visits within its visits")
    at_most(columns["wasted_tokens"], columns["tokens"], "a prompt's wasted tokens within its tokens")
    try:
        histories = set(columns["letters"])
    except TypeError:
        raise ValueError("a saved prompt history's letters must be strings") from None
    alphabet = "".join(VERDICT_LETTERS.values())
    for letters in histories:
        if not isinstance(letters, str) or len(letters) > HISTORY_LENGTH or not set(letters) <= set(alphabet):
            raise ValueError(f"a saved prompt history holds verdict letters outside {alphabet}: {letters!r}"[:200])


class PromptHistory:
    """Bounded per-prompt history with least-recently-seen eviction (see the module docstring)."""

    def __init__(self, limit: int = DEFAULT_LIMIT, *, forgetting: float = DEFAULT_FORGETTING) -> None:
        if not is_int(limit) or limit < 1:
            raise ValueError(f"PromptHistory limit must be an integer >= 1; got {limit!r}")
        if not 0.0 <= forgetting <= 1.0:
            raise ValueError(f"PromptHistory forgetting must be a number in [0, 1]; got {forgetting!r}")
        self.limit = limit
        self.forgetting = forgetting
        self._records: OrderedDict[Hashable, PromptRecord] = OrderedDict()
        self.evicted = 0  # prompts evicted so far
        self._tokens = 0  # the tracked records' tokens and visits, summed (derived: see _evict and load_state_columns)
        self._visits = 0

    def __len__(self) -> int:
        return len(self._records)

    def __contains__(self, key: Hashable) -> bool:
        return key in self._records

    def visit(self, key: Hashable, verdict: str, tokens: int | None = None, *, successes: int | None = None,
              scored: int | None = None, step: int | None = None) -> str | None:
        """Record one visit; returns the verdict of the prompt's previous visit (None: not tracked).

        ``successes`` of ``scored`` rollouts at rollout ``step`` add to the prompt's success evidence
        (:meth:`evidence`); a technical visit with no scored rollout adds nothing.
        """
        letter = VERDICT_LETTERS[verdict]
        tokens = tokens if tokens and tokens > 0 else 0
        record = self._records.get(key)
        if record is None:
            record = self._records[key] = PromptRecord()
            if len(self._records) > self.limit:
                self._evict()
            previous = None
        else:
            self._records.move_to_end(key)
            previous = _LETTER_VERDICT[record.letters[-1]]
        if verdict in ZERO_STD_VERDICTS:
            record.zero_std_run = record.zero_std_run + 1 if previous == verdict else 1
            record.zero_std_visits += 1
            record.wasted_tokens += tokens
        else:
            record.zero_std_run = 0
        record.letters = (record.letters + letter)[-HISTORY_LENGTH:]
        record.visits += 1
        record.tokens += tokens
        self._visits += 1
        self._tokens += tokens
        if scored and successes is not None and step is not None:
            weight = self._weight(record, step)
            record.successes = record.successes * weight + min(max(successes, 0), scored)
            record.failures = record.failures * weight + scored - min(max(successes, 0), scored)
            record.seen_step = step if record.seen_step is None else max(step, record.seen_step)
        return previous

    def evidence(self, key: Hashable, step: int) -> tuple[float, float] | None:
        """The prompt's ``(successes, failures)`` weighed to rollout ``step`` (None: no scored visit tracked).

        Example:
            >>> h = PromptHistory(forgetting=0.5)
            >>> h.visit("a", ZERO_STD_ALL_FAIL, successes=0, scored=8, step=2)
            >>> h.evidence("a", 2), h.evidence("a", 4), h.evidence("b", 4)
            ((0.0, 8.0), (0.0, 2.0), None)
        """
        record = self._records.get(key)
        if record is None or record.seen_step is None:
            return None
        weight = self._weight(record, step)
        return record.successes * weight, record.failures * weight

    def evidence_items(self) -> Iterator[tuple[Hashable, tuple[float, float, int]]]:
        """``(key, (successes, failures, seen_step))`` of every prompt with evidence, least recently seen first."""
        for key, record in self._records.items():
            if record.seen_step is not None:
                yield key, (record.successes, record.failures, record.seen_step)

    def restore_evidence(self, key: Hashable, successes: float, failures: float, seen_step: int) -> None:
        """Put back one prompt's evidence as :meth:`evidence_items` gave it (a saved state)."""
        record = self._records.get(key)
        if record is None:
            record = self._records[key] = PromptRecord()
            if len(self._records) > self.limit:
                self._evict(count=False)
        record.successes, record.failures, record.seen_step = successes, failures, seen_step

    def state_columns(self) -> dict[str, Any]:
        """The whole history as columns (one list per :class:`PromptRecord` field, plus ``keys``), least
        recently seen first: what a snapshot saves (:mod:`shopsim_metrics.run.snapshot`).

        Example:
            >>> h = PromptHistory(limit=4)
            >>> h.visit("a", SPREAD, 7, successes=3, scored=8, step=1)
            >>> columns = h.state_columns(); columns["keys"], columns["letters"], columns["tokens"]
            (['a'], ['S'], [7])
            >>> g = PromptHistory(limit=4); g.load_state_columns(columns); g.stats("a") == h.stats("a")
            True
        """
        records = list(self._records.values())
        columns: dict[str, Any] = {"keys": list(self._records), "evicted": self.evicted}
        for name in PromptRecord.__slots__:
            columns[name] = [getattr(record, name) for record in records]
        return columns

    def load_state_columns(self, columns: dict[str, Any]) -> None:
        """Replace the history with :meth:`state_columns`' (the most recently seen ``limit`` prompts kept).

        Raises ``ValueError`` (``KeyError``, ``TypeError``) for columns that are not a saved history, or hold
        what no history could (:func:`_check_columns`).
        """
        keys = columns["keys"]
        saved = {name: columns[name] for name in PromptRecord.__slots__}
        if not isinstance(keys, list) or any(not isinstance(v, list) or len(v) != len(keys) for v in saved.values()):
            raise ValueError("a saved prompt history's columns must be lists of one length")
        start = max(len(keys) - self.limit, 0)
        keys = keys[start:]
        if not set(map(type, keys)) <= {int, str}:
            raise ValueError("a saved prompt key must be an int or a string")
        kept = {name: column[start:] for name, column in saved.items()}
        _check_columns(kept)
        evicted = saved_count(columns.get("evicted", 0), "the prompt history's evicted prompts")
        with _collector_paused():
            records = OrderedDict(zip(keys, map(PromptRecord, *kept.values())))
        if len(records) != len(keys):
            raise ValueError("a saved prompt history names a prompt twice")
        self._records = records
        self.evicted = evicted + start
        self._tokens = sum(kept["tokens"])  # the records' own values, summed as the column
        self._visits = sum(kept["visits"])

    def _evict(self, *, count: bool = True) -> None:
        """Drop the least recently seen prompt (and its tokens and visits from the sums)."""
        _, record = self._records.popitem(last=False)
        self._tokens -= record.tokens
        self._visits -= record.visits
        if count:
            self.evicted += 1

    def relative_cost(self, key: Hashable) -> float | None:
        """The prompt's tokens per visit over the tracked prompts' tokens per visit (None: no tokens known for it).

        What a visit of this prompt costs against an average visit: 2.0 for a prompt whose groups are
        twice as long as the tracked prompts' on average.

        Example:
            >>> h = PromptHistory()
            >>> for key, tokens in (("long", 3000), ("short", 1000), ("short", 1000)): _ = h.visit(key, SPREAD, tokens)
            >>> round(h.relative_cost("long"), 6), round(h.relative_cost("short"), 6), h.relative_cost("never seen")
            (1.8, 0.6, None)
        """
        record = self._records.get(key)
        if record is None or not record.tokens or not record.visits or not self._tokens:
            return None
        return (record.tokens / record.visits) / (self._tokens / self._visits)

    def _weight(self, record: PromptRecord, step: int) -> float:
        """``forgetting ** (step - seen_step)``: what the prompt's evidence weighs at ``step`` (1 at or before it)."""
        if record.seen_step is None or step <= record.seen_step:
            return 1.0
        return self.forgetting ** (step - record.seen_step)

    def stats(self, key: Hashable) -> PromptStats | None:
        """The record of one prompt (None when it is not tracked); does not count as a visit."""
        record = self._records.get(key)
        return None if record is None else record.stats(key)

    def most_wasted(self, count: int) -> list[PromptStats]:
        """The ``count`` prompts with the most tokens on zero-std visits (then most zero-std visits, tokens)."""
        return [record.stats(key) for key, record in nlargest(count, self._records.items(), key=_waste_rank)]

    def __iter__(self) -> Iterator[PromptStats]:
        """Every tracked prompt, least recently seen first."""
        return (record.stats(key) for key, record in self._records.items())


@contextmanager
def _collector_paused() -> Iterator[None]:
    """Python's cycle collector off while a saved history is built: a million new records would set it
    walking every tracked object over and over (3-4x the build's time), and records hold no cycles."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
