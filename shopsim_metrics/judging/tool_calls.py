"""An episode's tool calls and who failed, as its generate function left them in the sample's metadata.

**The contract.** A multi-turn generate function leaves ``metadata["shopsim_tool_calls"]``: a list with one entry
per tool call of the episode, in call order::

    {"name": "search_products", "seconds": 0.41, "ok": True}
    {"name": "view_item", "seconds": 0.02, "ok": False, "error": "UnknownItem: sku-999", "kind": "model"}

- ``name`` (str, required): the tool; control characters are escaped and it is cut to :data:`NAME_LENGTH`;
- ``seconds`` (int or float, required): the call's wall time, finite, ``>= 0`` and at most :data:`MAX_SECONDS`;
- ``ok`` (bool, required): the call returned what the model asked for;
- ``error`` (str, optional): what went wrong (not counted per step: its text is unbounded);
- ``kind`` (optional, read only when ``ok`` is false): who failed, ``"model"`` (an unknown tool, arguments that do
  not parse, an item id that does not exist: the model reads the error as the tool's answer) or ``"environment"``
  (a tool or service that failed); absent means ``"environment"``.

**Bad entries are ignored and counted, never raised**: an entry that is not a dict, a missing or wrong-typed field,
a value out of range (``seconds`` negative, non-finite, beyond :data:`MAX_SECONDS` or an int too large for a float;
an empty name; a ``kind`` outside the two), an entry whose reading raises (a ``str`` subclass whose methods raise,
a mapping that raises on access) counts one in ``unreadable``. A value that is not a list or tuple counts one;
entries past :data:`MAX_CALLS` count one each, unread. Names are read as plain ``str`` (a subclass's own methods
are never called).

**A count alone.** slime's ``examples/retool`` leaves no list but counts its code-interpreter calls in the sample
attribute ``tool_call_count``: without a list, that count is read (:func:`read_call_count`, an int from 0 to
:data:`MAX_CALLS`, else one unreadable entry) as calls of no known tool, time or outcome: they count in the calls
per episode, in no tool's figures.

**Who failed the episode.** ``metadata["shopsim_failure_kind"]`` (``"model"`` or ``"environment"``) says whose
failure ended the episode; a failure cause (``metadata["shopsim_failure_cause"]``) without a kind is the
environment's (the failure-cause convention). :func:`read_failure_kind` reads it.

Example:
    >>> calls = read_tool_calls({"shopsim_tool_calls": [
    ...     {"name": "search", "seconds": 0.5, "ok": True},
    ...     {"name": "view", "seconds": 0.25, "ok": False, "kind": "model"},
    ...     {"name": "view", "seconds": -1.0, "ok": True}, "junk"]})
    >>> calls.calls, calls.unreadable, calls.errors, calls.model_errors
    ((ToolCall(name='search', seconds=0.5, error=None), ToolCall(name='view', seconds=0.25, error='model')), 2, 1, 1)
    >>> read_tool_calls({}) is None    # no list left: the generate function does not report tools
    True
"""

from __future__ import annotations

import re
from typing import Any, NamedTuple

from shopsim_metrics.general.plain_values import is_int, is_number

TOOL_CALLS_KEY = "shopsim_tool_calls"
"""The metadata key a generate function leaves its episode's tool calls under."""
FAILURE_KIND_KEY = "shopsim_failure_kind"
"""The metadata key that says whose failure ended an episode: ``"model"`` or ``"environment"``."""
FAILURE_CAUSE_KEY = "shopsim_failure_cause"  # judging.failure_cause's key (that module imports the judgement)
MODEL, ENVIRONMENT = "model", "environment"
FAILURE_KINDS = (ENVIRONMENT, MODEL)
"""Who failed: a tool call's ``kind``, an episode's ``shopsim_failure_kind``."""
END_REASONS = ("completed", "truncated", "environment_failure", "model_failure", "unmarked_failure", "slime_abort")
"""Why an episode ended (``episode_end_counts``' keys, always all of them: ``step.tool_tally``)."""
UNMARKED = "unmarked"
"""A technical group's failure kind when its generate function failed it (status aborted or failed) with no kind
and no cause."""
NAME_LENGTH = 64
"""A tool name longer than this is cut (with ``...``)."""
MAX_SECONDS = 7 * 24 * 3600.0
"""A tool call's seconds above this (a week) are out of range: the entry is unreadable."""
MAX_CALLS = 10_000
"""Entries read per episode; each one past it counts as unreadable, unread."""

_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


class ToolCall(NamedTuple):
    """One readable tool call: its name, seconds, and who failed it (None: it succeeded)."""

    name: str
    seconds: float
    error: str | None  # None (ok), "environment" or "model"


class ToolCalls(NamedTuple):
    """An episode's readable tool calls (in call order), how many entries could not be read, and the calls only
    counted (``tool_call_count``: no name, time or outcome known)."""

    calls: tuple[ToolCall, ...]
    unreadable: int
    counted: int = 0
    listed: bool = True  # read from metadata shopsim_tool_calls (False: from a count alone)
    errors: int = 0  # of the readable calls, those not ok
    model_errors: int = 0  # of those, the model's


def read_tool_calls(metadata: Any) -> ToolCalls | None:
    """The tool calls ``metadata`` holds under :data:`TOOL_CALLS_KEY`; None when it holds none. Never raises."""
    try:
        if not isinstance(metadata, dict):
            return None
        entries = metadata.get(TOOL_CALLS_KEY)
    except Exception:  # noqa: BLE001 - a metadata mapping that raises on access reports nothing
        return None
    if entries is None:
        return None
    if not isinstance(entries, (list, tuple)):
        return ToolCalls((), 1)
    try:
        count = len(entries)
    except Exception:  # noqa: BLE001 - a list subclass whose len raises
        return ToolCalls((), 1)
    calls = []
    unreadable = max(count - MAX_CALLS, 0)
    errors = model_errors = 0
    names: dict[str, str | None] = {}  # a plain name read once per episode, however often it is called
    for index in range(min(count, MAX_CALLS)):
        try:
            call = _entry(entries[index], names)
        except Exception:  # noqa: BLE001 - whatever an entry holds, its reading never raises
            call = None
        if call is None:
            unreadable += 1
            continue
        calls.append(call)
        if call.error is not None:
            errors += 1
            model_errors += call.error == MODEL
    return ToolCalls(tuple(calls), unreadable, 0, True, errors, model_errors)


def _entry(entry: Any, names: dict[str, str | None]) -> ToolCall | None:
    if not isinstance(entry, dict):
        return None
    get = dict.get
    name, seconds, ok = get(entry, "name"), get(entry, "seconds"), get(entry, "ok")
    if ok is not True and ok is not False:
        return None
    if type(seconds) is not float:  # plain values whatever the subclass; an int too large for a float raises
        if not is_number(seconds):
            return None
        seconds = float(int.__index__(seconds)) if isinstance(seconds, int) else float.__float__(seconds)
    if not (0.0 <= seconds <= MAX_SECONDS):  # NaN fails both
        return None
    if type(name) is str:
        text = names.get(name, "")
        if text == "":
            text = names[name] = plain_name(name)
    elif isinstance(name, str):
        text = plain_name(name)
    else:
        return None
    if text is None:
        return None
    if ok:
        return ToolCall(text, seconds, None)
    kind = get(entry, "kind", ENVIRONMENT)
    if kind == ENVIRONMENT and type(kind) is str:
        return ToolCall(text, seconds, ENVIRONMENT)
    if not isinstance(kind, str) or str.__str__(kind) not in FAILURE_KINDS:
        return None
    return ToolCall(text, seconds, str.__str__(kind))


CALL_COUNT_ATTRIBUTE = "tool_call_count"
"""The sample attribute slime's ``examples/retool`` counts its tool calls in."""


def read_call_count(sample: Any) -> ToolCalls | None:
    """``sample.tool_call_count`` as calls only counted (slime's retool); None when the sample has none. Never raises.

    Example:
        >>> from types import SimpleNamespace as S
        >>> read_call_count(S(tool_call_count=3)).counted, read_call_count(S())
        (3, None)
        >>> read_call_count(S(tool_call_count=10**400)).unreadable
        1
    """
    try:
        count = getattr(sample, CALL_COUNT_ATTRIBUTE, None)
        if count is None:
            return None
        if not is_int(count) or not 0 <= int.__index__(count) <= MAX_CALLS:
            return ToolCalls((), 1, 0, False)
        return ToolCalls((), 0, int.__index__(count), False)
    except Exception:  # noqa: BLE001 - a property that raises, an int subclass whose comparison raises
        return ToolCalls((), 1, 0, False)


def plain_name(name: str) -> str | None:
    """``name`` as one short printable plain ``str`` (a subclass's methods are never called); None when empty.

    Example:
        >>> plain_name(" search "), plain_name("a\\x1bb"), plain_name(" "), len(plain_name("x" * 100))
        ('search', 'a\\\\x1bb', None, 64)
    """
    text = str.strip(str.__str__(name))
    if not text:
        return None
    text = _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)
    return text if len(text) <= NAME_LENGTH else text[:NAME_LENGTH - 3] + "..."


def read_failure_kind(metadata: Any) -> str | None:
    """Whose failure ended the episode: ``metadata["shopsim_failure_kind"]`` when it is one of
    :data:`FAILURE_KINDS`, else ``"environment"`` when a failure cause was left, else None. Never raises.

    Example:
        >>> read_failure_kind({"shopsim_failure_kind": "model"}), read_failure_kind({"shopsim_failure_cause": "X: y"})
        ('model', 'environment')
        >>> read_failure_kind({"shopsim_failure_kind": "the moon"}) is None, read_failure_kind(None) is None
        (True, True)
    """
    try:
        if not isinstance(metadata, dict):
            return None
        kind = metadata.get(FAILURE_KIND_KEY)
        if isinstance(kind, str) and str.__str__(kind) in FAILURE_KINDS:
            return str.__str__(kind)
        return ENVIRONMENT if metadata.get(FAILURE_CAUSE_KEY) is not None else None
    except Exception:  # noqa: BLE001 - a metadata mapping that raises on access says nothing
        return None
