"""One rollout as an agent episode: the tokens the model sampled, the observations, turns and environment time.

slime's multi-turn generate functions append the environment's output (tool results, the user's reply) to the
response with ``loss_mask`` 0, so ``response_length`` counts it. The model sampled only the rest: slime's own
``Sample.effective_response_length`` is ``sum(loss_mask)``. :func:`read_episode` reads a sample by these rules,
never raising:

- **generated** tokens: the 1s of ``loss_mask`` when it is a list (or tuple) of 0s and 1s exactly as long as the
  response, else ``response_length`` (a single-turn sample has no mask: generated == response_length);
- **observation** tokens: the rest of the response (``response_length - generated``);
- **turns**: ``metadata["round_number"]`` (slime's own key, the one ``--log-multi-turn`` logs) when it is an int
  >= 0, else the runs of trainable tokens in the mask (a model turn is a maximal run of 1s), else 1 for a
  sample with a response; ``turns_from`` says which (``"metadata"``, ``"loss_mask"``, or None: no structure);
- **environment seconds**: ``Sample.non_generation_time`` (finite and >= 0, else 0);
- a value out of range is unknown, as if absent, and named in ``out_of_range`` (the sample hook counts them and
  warns once): a ``response_length`` or ``round_number`` above :data:`~shopsim_metrics.judging.group_samples.MAX_TOKENS`,
  a ``non_generation_time`` above :data:`MAX_EPISODE_SECONDS` (or infinite), metadata that raises when read. So no sum of a
  step can overflow, and one absurd episode never swamps the step's figures;
- **multi_turn**: the sample shows a turn structure (an observation token, a ``round_number``, environment
  seconds or an entry in a tool-call list): the per-step agent fields exist only in steps where some episode does;
- **tools**: ``metadata["shopsim_tool_calls"]`` read once (:func:`~shopsim_metrics.judging.tool_calls.read_tool_calls`),
  else retool's ``tool_call_count`` (:func:`~shopsim_metrics.judging.tool_calls.read_call_count`; None: neither);
  **failure_kind**: whose failure ended it (:func:`~shopsim_metrics.judging.tool_calls.read_failure_kind`);
  **failed**: status ``aborted`` or ``failed``. Tool-call entries out of range are counted there, not here.

``start`` reads only the response from that token on (a continued ``--partial-rollout`` sample: the tokens
before it were counted when they were generated).

Example:
    >>> from shopsim_metrics.simulator.samples import SimSample as S
    >>> e = read_episode(S(response_length=9, loss_mask=[1, 1, 1, 0, 0, 1, 1, 0, 1], non_generation_time=2.5))
    >>> e.generated, e.observation, e.turns, e.turns_from, e.environment_seconds, e.multi_turn
    (6, 3, 3, 'loss_mask', 2.5, True)
    >>> e = read_episode(S(response_length=7))   # single-turn: no mask
    >>> e.generated, e.observation, e.turns, e.turns_from, e.multi_turn
    (7, 0, 1, None, False)
"""

from __future__ import annotations

from enum import Enum
from typing import Any, NamedTuple

from shopsim_metrics.general.plain_values import as_float, is_int, shown_value
from shopsim_metrics.judging.group_samples import MAX_TOKENS, checked_response_length, trainable_mask
from shopsim_metrics.judging.tool_calls import ToolCalls, read_call_count, read_failure_kind, read_tool_calls

ROUND_NUMBER_KEY = "round_number"
"""slime's metadata key for an episode's turns (``slime.ray.rollout`` logs it with ``--log-multi-turn``)."""
MAX_EPISODE_SECONDS = 1e6
"""The most environment seconds one episode may report (about 11.6 days); more is no real episode's: unknown."""


class Episode(NamedTuple):
    """One rollout read as an episode (see the module docstring)."""

    response: int  # response_length (from ``start``)
    generated: int  # tokens the model sampled
    observation: int  # tokens the environment appended (loss_mask 0)
    turns: int
    turns_from: str | None  # "metadata", "loss_mask", or None (a plain sample)
    environment_seconds: float
    truncated: bool  # status truncated
    multi_turn: bool
    out_of_range: str | None = None  # the first value read as unknown because no episode could hold it
    tools: ToolCalls | None = None  # metadata shopsim_tool_calls, else a count (None: neither left)
    failure_kind: str | None = None  # "model", "environment" (a kind, or a cause left), None
    failed: bool = False  # status aborted or failed


def read_episode(sample: Any, start: int = 0) -> Episode:
    """``sample`` read as an episode, its response from token ``start`` on; never raises."""
    length, bad_length = checked_response_length(sample)
    response = max(length - start, 0)
    mask = trainable_mask(sample, length)
    if mask is not None:
        mask = mask[start:]
        generated = mask.count(1)
        runs = mask.count(b"\x00\x01") + (mask[:1] == b"\x01")
    else:
        generated, runs = response, 1 if response else 0
    metadata = _attribute(sample, "metadata")
    rounds, bad_rounds = _round_number(metadata)
    tools = read_tool_calls(metadata) or read_call_count(sample)
    seconds, bad_seconds = _seconds(_attribute(sample, "non_generation_time"))
    bad = (f"response_length {shown_value(bad_length)}" if bad_length is not None
           else bad_rounds if bad_rounds is not None else bad_seconds)
    observation = response - generated
    if rounds is not None:
        turns, turns_from = rounds, "metadata"
    elif observation:
        turns, turns_from = runs, "loss_mask"
    else:
        turns, turns_from = runs, None
    status = _status(sample)
    return Episode(response, generated, observation, turns, turns_from, seconds, status == "truncated",
                   multi_turn=bool(observation or rounds is not None or seconds
                                   or (tools is not None and (tools.calls or tools.unreadable or tools.counted))),
                   out_of_range=bad, tools=tools, failure_kind=read_failure_kind(metadata),
                   failed=status in ("aborted", "failed"))


def _attribute(sample: Any, name: str) -> Any:
    try:
        return getattr(sample, name, None)
    except Exception:  # noqa: BLE001 - a property that raises reads as absent
        return None


def _round_number(metadata: Any) -> tuple[int | None, str | None]:
    """The episode's turns as its metadata says them (None: it does not), and what was out of range."""
    if not isinstance(metadata, dict):
        return None, None
    try:
        value = metadata.get(ROUND_NUMBER_KEY)
    except Exception as exc:  # noqa: BLE001 - a mapping whose get raises: no turns from it
        return None, f"metadata that raises when read ({type(exc).__name__})"
    if not is_int(value) or value < 0:
        return None, None
    if value > MAX_TOKENS:
        return None, f"{ROUND_NUMBER_KEY} {shown_value(value)}"
    return value, None


def _seconds(value: Any) -> tuple[float, str | None]:
    """The episode's environment seconds (0: none known), and what was out of range (above
    :data:`MAX_EPISODE_SECONDS`, infinite, an integer beyond the float range)."""
    try:
        seconds = as_float(value)
    except OverflowError:
        return 0.0, f"non_generation_time {shown_value(value)}"
    except Exception:  # noqa: BLE001 - absent or unreadable: no environment time known
        return 0.0, None
    if seconds > MAX_EPISODE_SECONDS:  # infinity included
        return 0.0, f"non_generation_time {shown_value(value)}"
    return (seconds, None) if seconds > 0 else (0.0, None)  # NaN, 0 and negatives: none known


def _status(sample: Any) -> str | None:
    """The sample's status as a plain ``str`` (slime's enum's value), None when it is none: a ``str`` subclass's own
    comparison is never called."""
    status = _attribute(sample, "status")
    try:
        value = status._value_ if isinstance(status, Enum) else status
        return str.__str__(value) if isinstance(value, str) else None
    except Exception:  # noqa: BLE001 - an enum whose value raises when read: no status known
        return None
