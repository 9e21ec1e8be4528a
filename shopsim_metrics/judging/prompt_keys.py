"""Which prompt a judged group belongs to: a key that stays the same from one visit to the next.

slime's ``group_index`` is a running counter (a prompt revisited in a later epoch gets a new one), so
it is never a prompt key. The key of a group is read from its first sample:

- ``metadata[metadata_key]`` when ``metadata_key`` (the ``shopsim_prompt_key`` setting) is set and
  the metadata holds that key: the value itself as a string (a string as it is, an int as its
  digits, anything else as canonical JSON). Source ``"metadata"``.
- otherwise a stable hash of ``Sample.prompt`` (text or a list of chat messages) together with
  ``Sample.label``: the first 60 bits of blake2b over the canonical JSON of ``[prompt, label]``
  (dict keys sorted, list order kept), written ``"b2:"`` + 15 hex digits. Source ``"prompt_hash"``.
  60 bits keep the key a two-digit Python int in the history (smaller than 64 bits would be).

Reading never raises. Values JSON cannot hold are converted first (numpy arrays and tensors through
``tolist()``, bytes as hex, sets sorted, dataclasses as dicts, anything else as ``str(value)``);
when even that fails (dict keys of mixed types, a cycle) the hash is taken of ``repr`` of the pair.
A group with no sample at all has no key (``None``, source ``"none"``) and is not tracked.

Example:
    >>> from shopsim_metrics.simulator.samples import SimSample as S
    >>> chat = [{"role": "user", "content": "hi"}]
    >>> a = prompt_key([S(prompt=chat, label="x")])
    >>> a == prompt_key([S(prompt=[{"content": "hi", "role": "user"}], label="x")])  # dict key order
    True
    >>> a[1], a[0].startswith("b2:"), len(a[0])
    ('prompt_hash', True, 18)
    >>> prompt_key([S(metadata={"uid": 17})], "uid")
    ('17', 'metadata')
    >>> history_key("b2:0000000000000ff"), history_key("17")
    (255, '17')
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from typing import Any, Sequence
from shopsim_metrics.judging.group_samples import leaves
from shopsim_metrics.general.plain_values import is_int

KEY_METADATA = "metadata"
KEY_PROMPT_HASH = "prompt_hash"
KEY_NONE = "none"
KEY_MIXED = "mixed"
KEY_SOURCES = (KEY_METADATA, KEY_PROMPT_HASH, KEY_NONE, KEY_MIXED)
"""Values of a step's ``prompt_key_source``: the kind of key its groups used (``mixed``: several)."""

HASH_PREFIX = "b2:"
_HASH_DIGITS = 15  # hex digits: 60 bits
_HASH_TEXT_LENGTH = len(HASH_PREFIX) + _HASH_DIGITS


def prompt_key(group: Sequence[Any], metadata_key: str | None = None) -> tuple[str | None, str]:
    """The group's prompt key and its source (see the module docstring); never raises."""
    try:
        sample = next(iter(leaves(group)), None)
    except Exception:  # noqa: BLE001 - an odd group has no key, it never stops the monitor
        sample = None
    if sample is None:
        return None, KEY_NONE
    if metadata_key is not None:
        metadata = getattr(sample, "metadata", None)
        try:
            if isinstance(metadata, dict) and metadata_key in metadata:
                return _metadata_text(metadata[metadata_key]), KEY_METADATA
        except Exception:  # noqa: BLE001 - an unhashable metadata_key: fall back to the prompt hash
            pass
    return hash_prompt(getattr(sample, "prompt", None), getattr(sample, "label", None)), KEY_PROMPT_HASH


def hash_prompt(prompt: Any, label: Any = None) -> str:
    """``"b2:"`` + the first 15 hex digits (60 bits) of blake2b over the canonical JSON of ``[prompt, label]``.

    Example:
        >>> hash_prompt("2+2=?", "4") == hash_prompt("2+2=?", "4") != hash_prompt("2+2=?", "5")
        True
    """
    digest = hashlib.blake2b(canonical_bytes(prompt, label), digest_size=8).hexdigest()
    return HASH_PREFIX + digest[:_HASH_DIGITS]


def canonical_bytes(prompt: Any, label: Any = None) -> bytes:
    """The canonical JSON of ``[prompt, label]`` as UTF-8 (lone surrogates kept): what the hash is taken of.

    Example:
        >>> canonical_bytes([{"role": "user", "content": "d\u00e9j\u00e0 \\n"}], "x")
        b'[[{"content":"d\xc3\xa9j\xc3\xa0 \\\\n","role":"user"}],"x"]'
    """
    try:
        text = _ENCODER.encode([prompt, label])
    except Exception:  # noqa: BLE001 - mixed-type dict keys, cycles: the documented fallback
        try:
            text = "repr:" + repr((prompt, label))
        except Exception:  # noqa: BLE001
            text = "type:" + type(prompt).__name__
    return text.encode("utf-8", "surrogatepass")


def history_key(key: str) -> int | str:
    """The compact form a prompt history keeps: a hash key as its 60-bit int, a metadata key as it is."""
    if len(key) == _HASH_TEXT_LENGTH and key.startswith(HASH_PREFIX):
        try:
            return int(key[len(HASH_PREFIX):], 16)
        except ValueError:
            return key
    return key


def key_text(key: int | str) -> str:
    """The inverse of :func:`history_key`: the key as the ledger writes it.

    Example:
        >>> key_text(history_key("b2:0123456789abcde"))
        'b2:0123456789abcde'
    """
    return f"{HASH_PREFIX}{key:015x}" if isinstance(key, int) else key


def combine_sources(sources: set[str]) -> str:
    """One ``prompt_key_source`` for a step from the sources of its groups.

    Example:
        >>> combine_sources({"metadata"}), combine_sources({"metadata", "prompt_hash"}), combine_sources(set())
        ('metadata', 'mixed', 'none')
    """
    real = sources - {KEY_NONE}
    if len(real) > 1:
        return KEY_MIXED
    if real:
        return next(iter(real))
    return KEY_NONE


def _metadata_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if is_int(value):
        return str(value)
    try:
        return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=_jsonable)
    except Exception:  # noqa: BLE001
        try:
            return repr(value)
        except Exception:  # noqa: BLE001
            return type(value).__name__


def _jsonable(value: Any) -> Any:
    """What JSON cannot hold, as something it can (json's ``default``)."""
    tolist = getattr(value, "tolist", None)
    if callable(tolist):  # numpy arrays / scalars, torch tensors
        return tolist()
    if isinstance(value, (bytes, bytearray)):
        return value.hex()
    if isinstance(value, (set, frozenset)):
        return sorted(map(str, value))
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    return str(value)


_ENCODER = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=_jsonable)
"""The canonical serialisation, built once (``json.dumps`` with arguments builds an encoder per call)."""
