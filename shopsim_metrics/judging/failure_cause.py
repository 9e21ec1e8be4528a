"""Why an episode failed, as its generate function left it: ``metadata["shopsim_failure_cause"]``.

A multi-turn generate function that catches an environment error (a tool that timed out, a simulator that
raised) marks the sample ``aborted`` or ``failed``, which makes its group technical. The check that failed
(``status_aborted``) does not say what broke; the generate function can, by leaving the cause in the
sample's metadata under :data:`FAILURE_CAUSE_KEY`:

- a string, e.g. ``"ToolTimeout: search_products"`` (the convention: the exception's type, a colon, what it
  concerned), or
- the exception itself (read as ``"<type name>: <message>"``).

Anything else there reads as :data:`UNREADABLE_CAUSE`. Control characters, the line and paragraph separators and
the bidirectional controls (U+202E would print the rest of an alert reversed) are escaped
(:func:`escape_text`) and the text is cut to :data:`CAUSE_LENGTH` characters, so a cause is always one short
printable line (it reaches alerts, W&B tables and terminals). A ``str`` subclass is read as the plain text it
holds (its own methods are not called), and reading never raises. slime's own end-of-step abort of the requests in flight leaves no cause, and its
groups are never judged.

Example:
    >>> from shopsim_metrics.simulator.samples import SimSample as S
    >>> read_failure_cause(S(metadata={"shopsim_failure_cause": TimeoutError("search_products")}))
    'TimeoutError: search_products'
    >>> read_failure_cause(S(metadata={"shopsim_failure_cause": "bad\\x1b[31m tool"}))
    'bad\\\\x1b[31m tool'
    >>> read_failure_cause(S(metadata={})) is None
    True
"""

from __future__ import annotations

import re
from typing import Any

FAILURE_CAUSE_KEY = "shopsim_failure_cause"
"""The metadata key a generate function leaves an episode's failure cause under."""
CAUSE_LENGTH = 120
"""A cause longer than this is cut (with ``...``)."""
UNREADABLE_CAUSE = "(unreadable cause)"
"""A cause that is neither a string nor an exception (or whose text cannot be read)."""

_UNPRINTABLE = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200b-\u200f\u2028-\u202e\u2060-\u206f\ufeff"
                          "\ufff9-\ufffb]")
"""C0 and C1 controls, the line and paragraph separators, the bidirectional marks, embeddings, overrides and
isolates, and the invisible format characters (zero-width, BOM): what could break or reorder a printed line."""


def escape_text(text: str) -> str:
    """``text`` with every character of :data:`_UNPRINTABLE` shown as its escape (``\\x1b``, ``\\u202e``).

    >>> escape_text("cart\u202eyeknom\u2028x\x1b[2J")
    'cart\\\\u202eyeknom\\\\u2028x\\\\x1b[2J'
    """
    return _UNPRINTABLE.sub(lambda m: f"\\x{ord(m.group()):02x}" if ord(m.group()) < 0x100
                            else f"\\u{ord(m.group()):04x}", text)


def read_failure_cause(sample: Any) -> str | None:
    """The failure cause ``sample``'s metadata holds, as one short printable line; None when it holds none."""
    try:
        metadata = getattr(sample, "metadata", None)
        if not isinstance(metadata, dict) or metadata.get(FAILURE_CAUSE_KEY) is None:
            return None
        value = metadata[FAILURE_CAUSE_KEY]
        if isinstance(value, BaseException):
            message = str(value)
            text = f"{type(value).__name__}: {message}" if message else type(value).__name__
        elif isinstance(value, str):
            text = value
        else:
            return UNREADABLE_CAUSE
        text = str.strip(str.__str__(text))  # the plain text, whatever a subclass's own methods do
    except Exception:  # noqa: BLE001 - metadata or an exception whose text raises when read
        return UNREADABLE_CAUSE
    text = escape_text(text)
    if not text:
        return None
    return text if len(text) <= CAUSE_LENGTH else text[:CAUSE_LENGTH - 3] + "..."


def leading_cause_text(causes: dict[str, int]) -> str:
    """The streak's leading cause for an alert's text (``causes`` most frequent first), or ``""`` without one.

    Example:
        >>> leading_cause_text({"ToolTimeout: search_products": 7, "EnvError: cart": 1})
        ', 7 of them `ToolTimeout: search_products`'
    """
    if not causes:
        return ""
    cause, count = next(iter(causes.items()))
    return f", {count} of them `{cause}`"
