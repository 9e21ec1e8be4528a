"""Per-prompt history: what each prompt's visits looked like, in a compact, bounded store.

For every tracked prompt the history keeps its visits, its last verdicts, the current run of equal
zero-std verdicts, the tokens spent on it and the tokens spent on its zero-std visits ("wasted").
At most ``limit`` prompts are tracked; the least recently seen one is evicted first.

Compact form: an ``OrderedDict`` (recency order) from the key (a 64-bit int for hashed prompts,
the string for metadata keys, see :mod:`shopsim_metrics.prompts.keys`) to ONE packed Python int,
about 170 bytes per prompt at 1,000,000 prompts (``benchmarks/bench_prompt_history.py``). Bits,
from the lowest:

====== ======= ====================================================================
bits   width   field
====== ======= ====================================================================
0      24      the last 8 verdicts, 3 bits each, newest lowest (0 = no visit)
24     24      visits (saturating)
48     24      current run of equal zero-std verdicts (saturating)
72     40      tokens over all visits (saturating)
112    24      zero-std visits (saturating)
136    --      tokens of zero-std visits (unbounded)
====== ======= ====================================================================

The highest fields come first when packed ints are compared, so "most wasted generation first" is
a plain sort of the packed values (wasted tokens, then zero-std visits, then tokens).

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

from collections import OrderedDict
from dataclasses import dataclass
from heapq import nlargest
from operator import itemgetter
from typing import Hashable, Iterator

from shopsim_metrics.judging.group_judgement import SPREAD, TECHNICAL, ZERO_STD
from shopsim_metrics.prompts.keys import key_text

ZERO_STD_ALL_PASS = "zero_std_all_pass"
ZERO_STD_ALL_FAIL = "zero_std_all_fail"
ZERO_STD_OTHER = "zero_std_other"
VERDICTS = (SPREAD, ZERO_STD_ALL_PASS, ZERO_STD_ALL_FAIL, ZERO_STD_OTHER, TECHNICAL)
"""A visit's verdict (exactly one): the judgement's kind, with a zero-std group split by its successes."""
ZERO_STD_VERDICTS = frozenset((ZERO_STD_ALL_PASS, ZERO_STD_ALL_FAIL, ZERO_STD_OTHER))
VERDICT_LETTERS = {SPREAD: "S", ZERO_STD_ALL_PASS: "P", ZERO_STD_ALL_FAIL: "F", ZERO_STD_OTHER: "O", TECHNICAL: "T"}
"""One letter per verdict, for the compact verdict history (``"FFFP"``: oldest first)."""

HISTORY_LENGTH = 8  # verdicts kept per prompt
DEFAULT_LIMIT = 1_000_000

_CODE = {verdict: code for code, verdict in enumerate(VERDICTS, start=1)}
_VERDICT = {code: verdict for verdict, code in _CODE.items()}
_ZERO_CODES = frozenset(_CODE[v] for v in ZERO_STD_VERDICTS)
_M3, _M24, _M40 = (1 << 3) - 1, (1 << 24) - 1, (1 << 40) - 1
_VISITS, _RUN, _TOKENS, _ZVISITS, _WASTED = 24, 48, 72, 112, 136


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


@dataclass(frozen=True)
class PromptStats:
    """One tracked prompt, unpacked."""

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


def unpack(key: Hashable, packed: int) -> PromptStats:
    """The fields of one packed record (see the module docstring)."""
    verdicts = []
    history = packed & _M24
    while history:
        verdicts.append(_VERDICT.get(history & _M3, TECHNICAL))
        history >>= 3
    return PromptStats(
        key=key_text(key),  # type: ignore[arg-type]
        visits=(packed >> _VISITS) & _M24,
        verdicts=tuple(reversed(verdicts)),
        zero_std_run=(packed >> _RUN) & _M24,
        zero_std_visits=(packed >> _ZVISITS) & _M24,
        tokens=(packed >> _TOKENS) & _M40,
        wasted_tokens=packed >> _WASTED,
    )


class PromptHistory:
    """Bounded per-prompt history with least-recently-seen eviction (see the module docstring)."""

    def __init__(self, limit: int = DEFAULT_LIMIT) -> None:
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise ValueError(f"PromptHistory limit must be an integer >= 1; got {limit!r}")
        self.limit = limit
        self._records: OrderedDict[Hashable, int] = OrderedDict()
        self.evicted = 0  # prompts evicted so far

    def __len__(self) -> int:
        return len(self._records)

    def __contains__(self, key: Hashable) -> bool:
        return key in self._records

    def visit(self, key: Hashable, verdict: str, tokens: int | None = None) -> str | None:
        """Record one visit; returns the verdict of the prompt's previous visit (None: not tracked).

        The packed record is updated field by field in place (each field saturating at its width,
        the wasted tokens unbounded).
        """
        records = self._records
        code = _CODE[verdict]
        zero = code in _ZERO_CODES
        tokens = tokens if tokens and tokens > 0 else 0
        packed = records.get(key)
        if packed is None:
            packed = code | 1 << _VISITS | min(tokens, _M40) << _TOKENS
            if zero:
                packed |= 1 << _RUN | 1 << _ZVISITS | tokens << _WASTED
            records[key] = packed
            if len(records) > self.limit:
                records.popitem(last=False)
                self.evicted += 1
            return None
        records.move_to_end(key)
        previous_code = packed & _M3
        history = packed & _M24
        updated = packed - history + (((history << 3) | code) & _M24)
        if (packed >> _VISITS) & _M24 != _M24:
            updated += 1 << _VISITS
        run = (packed >> _RUN) & _M24
        if zero:
            new_run = min(run + 1, _M24) if previous_code == code else 1
            if (packed >> _ZVISITS) & _M24 != _M24:
                updated += 1 << _ZVISITS
            updated += tokens << _WASTED
        else:
            new_run = 0
        updated += (new_run - run) << _RUN
        if tokens:
            spent = (packed >> _TOKENS) & _M40
            updated += (min(spent + tokens, _M40) - spent) << _TOKENS
        records[key] = updated
        return _VERDICT.get(previous_code)

    def stats(self, key: Hashable) -> PromptStats | None:
        """The unpacked record of one prompt (None when it is not tracked); does not count as a visit."""
        packed = self._records.get(key)
        return None if packed is None else unpack(key, packed)

    def most_wasted(self, count: int) -> list[PromptStats]:
        """The ``count`` prompts with the most tokens on zero-std visits (then most zero-std visits, tokens)."""
        return [unpack(k, v) for k, v in nlargest(count, self._records.items(), key=itemgetter(1))]

    def __iter__(self) -> Iterator[PromptStats]:
        """Every tracked prompt, least recently seen first."""
        return (unpack(k, v) for k, v in self._records.items())
