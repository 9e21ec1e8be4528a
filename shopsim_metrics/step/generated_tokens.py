"""Every response token generated in a rollout step, as slime's sample hook sees each generate call.

slime calls every ``--rollout-sample-hook-path`` hook after each generate call of a rollout sample,
aborted ones included (an aborted sample has status ABORTED and ``response_length`` = the tokens made
before the abort). :class:`GeneratedTokens` adds up what those calls report, per step, so a record can
say what the step generated in all (``total_token_count``) and how much of it belonged to groups that
were never judged (``aborted_token_count``), instead of seeing the judged groups only.

Rules:

- a call counts the tokens the model generated in the sample (read as :func:`~shopsim_metrics.judging.episodes.read_episode`
  reads it: the 1s of an aligned ``loss_mask``, else ``response_length``); the rest of the response is the
  environment's (a multi-turn episode's tool output, ``loss_mask`` 0): its **observation** tokens, counted apart;
  each leaf of a fanned-out generate call is its own call, and counts its own tokens;
- with ``--partial-rollout`` (``continues=True``) an aborted sample goes back to slime's buffer and is
  continued in a later step with its earlier tokens still in its response: that later call counts
  only the tokens past the length it had at its abort, so no token is counted twice (the lengths at the
  abort are remembered by ``Sample.index``, at most :data:`CARRIED_LIMIT` of them, oldest forgotten first);
- evaluation samples are not counted (the caller leaves them out);
- a step's ``aborted`` tokens are the tokens generated in the step by samples whose group was not judged
  in the step: ``total`` minus the tokens the step's judged samples were counted for in it.
- the rollouts the hook saw and no judged group of the step holds (by ``rollout_id``, else ``index``:
  the judged rollout with the same id is that rollout, judged) are the step's **unjudged** rollouts, each
  at its generated length as last seen (the sum over its segments); those whose last generate call was
  aborted are its **aborted** rollouts, at the partial length slime's abort left them (a lower bound of
  the length they would have reached). A sample aborted before it made a token in the step (still queued
  in the engine) never started: it is in neither.
- every sample the hook saw start in the step is an **episode**: its turns, environment seconds and status
  (:class:`EpisodeTally`) are kept as last seen (an episode aborted before its first token, or whose generate
  function threw away its only turn, never started). Once an episode showed a turn structure (an observation
  token, a ``round_number``, environment seconds), the process is an agent run and every step has a tally (a
  step whose episodes all answered in one turn included); before that (single-turn generation) no step has one
  (``StepTokens.episodes`` None), and its record no agent fields. No episode reporting environment seconds
  makes them unknown (None), not 0.
- a value no episode could hold (:func:`~shopsim_metrics.judging.episodes.read_episode`: a length or turns
  above ``MAX_TOKENS``, environment seconds above ``MAX_EPISODE_SECONDS``, metadata that raises) is unknown: the
  sample counts as if it lacked it, ``out_of_range_count`` counts such samples, and the first one is named in one
  warning.
- the same episodes' tool calls and why each ended (:class:`~shopsim_metrics.step.tool_tally.ToolTally`, in
  ``StepTokens.tools``) in every step of an agent run; each sample's episode as last seen is kept by ``id()`` for
  the ledger's per-group counts (``StepTokens.by_sample``).

A step no call reported (the hook is not wired) has no figures: :meth:`GeneratedTokens.take` returns None,
and the record's fields stay null rather than guessed.

Example:
    >>> from shopsim_metrics.simulator.samples import SimSample as S
    >>> tokens = GeneratedTokens(continues=False)
    >>> judged = [S(index=0, response_length=100), S(index=1, response_length=60)]
    >>> aborted = S(index=2, response_length=30, status="aborted")
    >>> for sample in [*judged, aborted]:
    ...     tokens.observe(sample, step=5)
    >>> tokens.take(5, [judged])
    StepTokens(total=190, aborted=30, unjudged_rollouts=1, unjudged_length=30, aborted_rollouts=1, aborted_length=30, observation=0, episodes=None, source=None, tools=None)
    >>> tokens.take(6, []) is None   # nothing reported for step 6: unknown, not 0
    True
"""

from __future__ import annotations

import logging
import math
import threading
from dataclasses import dataclass, field
from typing import Any, Hashable, Iterable, Mapping, NamedTuple

from shopsim_metrics.judging.episodes import Episode, read_episode
from shopsim_metrics.judging.group_judgement import rollout_key, status_check
from shopsim_metrics.judging.group_samples import leaves
from shopsim_metrics.general.plain_values import is_int
from shopsim_metrics.step.tool_tally import ToolTally

logger = logging.getLogger("shopsim_metrics")

CARRIED_LIMIT = 1_000_000
"""Aborted samples whose length at the abort is remembered for their continuation (``--partial-rollout``)."""

ABORTED = "status_aborted"


@dataclass(frozen=True)
class EpisodeTally:
    """The episodes (samples) the hook saw start in one step, as agent episodes: the inputs of the agent fields.

    Example:
        >>> from shopsim_metrics.judging.episodes import Episode
        >>> tally = EpisodeTally.of([Episode(9, 6, 3, 3, "loss_mask", 2.0, False, True),
        ...                          Episode(4, 4, 0, 1, None, 0.0, True, False)])
        >>> tally.episodes, tally.turns_max, tally.turns_mean, tally.turns_from, tally.truncated
        (2, 3, 2.0, 'loss_mask', 1)
    """

    episodes: int
    turns_total: int
    turns_max: int
    turns_from: str | None  # "loss_mask", "metadata", "mixed" (episodes read both ways), None
    environment_seconds: float | None  # None: no episode reported any (the generate function does not measure it)
    truncated: int

    @property
    def turns_mean(self) -> float:
        return self.turns_total / self.episodes

    @classmethod
    def of(cls, episodes: list[Episode]) -> "EpisodeTally | None":
        """The tally of ``episodes`` (None for none)."""
        if not episodes:
            return None
        sources = {e.turns_from for e in episodes} - {None}
        timed = any(e.environment_seconds for e in episodes)
        return cls(episodes=len(episodes), turns_total=sum(e.turns for e in episodes),
                   turns_max=max(e.turns for e in episodes),
                   turns_from=sources.pop() if len(sources) == 1 else ("mixed" if sources else None),
                   environment_seconds=math.fsum(e.environment_seconds for e in episodes) if timed else None,
                   truncated=sum(e.truncated for e in episodes))


@dataclass(frozen=True)
class StepTokens:
    """One step's generation as the sample hook saw it: every generated token, those of groups never judged, the
    rollouts never judged with their generated lengths, the environment's tokens and the episodes (see the module
    docstring)."""

    total: int
    aborted: int
    unjudged_rollouts: int = 0  # rollouts the hook saw start that no judged group of the step holds
    unjudged_length: int = 0  # their generated lengths as last seen, summed
    aborted_rollouts: int = 0  # of those, the rollouts whose last generate call was aborted
    aborted_length: int = 0  # their partial lengths at the abort, summed
    observation: int = 0  # the environment's tokens (loss_mask 0) in every response the hook saw, aborted included
    episodes: EpisodeTally | None = None  # None: no episode of the step shows a turn structure
    source: str | None = None  # who reported the calls when not slime's sample hook ("generate_function" in miles)
    tools: ToolTally | None = None  # the episodes' tool calls and ends (None: not an agent run)
    by_sample: Mapping[int, Episode] = field(default_factory=dict, repr=False, compare=False)
    """Each sample's episode as last seen, by ``id()`` (the ledger's per-group tool counts; empty: not an agent run)."""


class _Call(NamedTuple):
    """A sample's generate calls in one step, as the hook saw them."""

    sample: Any  # held, so its id stays its own until the step is taken
    tokens: int  # generated tokens in the step
    observation: int  # the environment's tokens in the step
    length: int  # generated tokens of the whole response at the latest call
    aborted: bool  # the latest call was aborted
    rollout: Hashable  # its rollout (rollout_key), read at the call
    episode: Episode  # the sample read as an episode at the latest call


class GeneratedTokens:
    """Tokens per step from the sample hook's calls (see the module docstring); safe across threads."""

    def __init__(self, *, continues: bool = False) -> None:
        self.continues = continues
        """``--partial-rollout``: aborted samples are continued later, so only their new tokens count then."""
        self._lock = threading.Lock()
        # step -> id(sample) -> its calls in the step; the sample is held so its id stays its own until the step
        # is taken (an aborted sample slime drops could otherwise lend its id to a judged one)
        self._steps: dict[int | None, dict[int, _Call]] = {}
        # Sample.index -> (response_length, generated tokens) at its abort
        self._carried: dict[Hashable, tuple[int, int]] = {}
        self.agent_run = False
        """Some episode this process saw showed a turn structure: from then on every step has its episode tally."""
        self.out_of_range_count = 0
        """Generate calls whose sample held a value out of range (read as unknown; the first one warned of)."""
        self.source: str | None = None
        """Who reports the calls when it is not slime's sample hook (miles' generate-function wrapper sets
        ``"generate_function"``); each step's figures say it (``token_count_source``)."""
        self.tools_run = False
        """Some episode this process saw left a tool-call list: from then on every step has the tool fields."""
        self.seen_turns = False
        """Some generate call this process saw showed a turn structure (set as it is seen, not at a step's close):
        the streak then says who failed a technical group (``unmarked`` when nobody said)."""

    def observe(self, sample: Any, step: int | None) -> None:
        """Count one generate call of ``sample`` in ``step`` (None: the step is not known; the next step taken gets it)."""
        aborted = status_check(getattr(sample, "status", None)) == ABORTED
        key = _carry_key(sample)
        rollout = rollout_key(sample)
        with self._lock:
            earlier, earlier_generated = (self._carried.pop(key, (0, 0)) if self.continues and key is not None
                                          else (0, 0))
            episode = read_episode(sample, start=earlier)
            length = earlier_generated + episode.generated
            if self.continues and aborted and key is not None:
                self._carried[key] = (earlier + episode.response, length)
                if len(self._carried) > CARRIED_LIMIT:
                    self._carried.pop(next(iter(self._carried)))
            if episode.multi_turn:
                self.seen_turns = True
            bucket = self._steps.setdefault(step, {})
            held = bucket.get(id(sample))
            tokens, observation = episode.generated, episode.observation
            if held is not None:
                tokens, observation = tokens + held.tokens, observation + held.observation
            bucket[id(sample)] = _Call(sample, tokens, observation, length, aborted, rollout, episode)
            if episode.out_of_range is not None:
                self.out_of_range_count += 1
                if self.out_of_range_count == 1:
                    logger.warning(
                        "shopsim-metrics: a sample of step %s holds %s, out of range for an episode: read as unknown "
                        "(its tokens, turns or environment seconds are left out of the step's figures; the step's "
                        "record and judgements are unchanged). Samples like it are counted, not warned of again.",
                        step, episode.out_of_range)

    def take(self, step: int, judged_groups: Iterable[Any]) -> StepTokens | None:
        """The figures of ``step`` (and of calls whose step was unknown), forgetting them and any earlier step's.

        ``judged_groups``: the groups judged in the step (``list[Sample]`` or fanned-out ``list[list[Sample]]``).
        """
        with self._lock:
            buckets = [self._steps.pop(key) for key in list(self._steps)
                       if key is None or key <= step]  # earlier steps never closed: no record can take them
        mine = [bucket for bucket in buckets if bucket]
        if not mine:
            return None
        calls: dict[int, _Call] = {}
        for bucket in mine:
            for sample_id, call in bucket.items():
                held = calls.get(sample_id)
                calls[sample_id] = call if held is None else call._replace(
                    tokens=held.tokens + call.tokens, observation=held.observation + call.observation)
        total = sum(call.tokens for call in calls.values())
        judged_ids: set[int] = set()
        judged_rollouts: set[Hashable] = set()
        for sample in _distinct_samples(judged_groups):
            judged_ids.add(id(sample))
            judged_rollouts.add(rollout_key(sample))
        judged = sum(calls[sample_id].tokens for sample_id in judged_ids if sample_id in calls)
        unjudged: dict[Hashable, list[Any]] = {}  # rollout -> [its length, aborted]
        for sample_id, call in calls.items():
            if sample_id in judged_ids or call.rollout in judged_rollouts:
                continue
            if _never_started(call):
                continue
            entry = unjudged.setdefault(call.rollout, [0, False])
            entry[0] += call.length
            entry[1] = entry[1] or call.aborted
        aborted = [length for length, was_aborted in unjudged.values() if was_aborted]
        started = [(call.episode, sample_id in judged_ids or call.rollout in judged_rollouts)
                   for sample_id, call in calls.items() if not _never_started(call)]
        self.agent_run = self.agent_run or any(episode.multi_turn for episode, _ in started)
        agent = self.agent_run
        tools = ToolTally.of(started, self.tools_run) if agent and started else None
        self.tools_run = self.tools_run or (tools is not None and tools.run_reported)
        return StepTokens(total=total, aborted=total - judged, unjudged_rollouts=len(unjudged),
                          unjudged_length=sum(length for length, _ in unjudged.values()),
                          aborted_rollouts=len(aborted), aborted_length=sum(aborted),
                          observation=sum(call.observation for call in calls.values()),
                          episodes=EpisodeTally.of([episode for episode, _ in started]) if agent else None,
                          source=self.source, tools=tools,
                          by_sample={sample_id: call.episode for sample_id, call in calls.items()} if agent else {})


def group_tool_counts(group: Any, by_sample: Mapping[int, Episode]) -> dict[str, int]:
    """A judged group's tool calls, failed calls and calls the model failed, summed over its samples' episodes as the
    hook last saw them (``StepTokens.by_sample``); empty when none of them left a tool-call list.

    Example:
        >>> from shopsim_metrics.judging.tool_calls import ToolCall, ToolCalls
        >>> from shopsim_metrics.simulator.samples import SimSample as S
        >>> sample = S(index=0)
        >>> calls = ToolCalls((ToolCall("search", 1.0, None), ToolCall("view", 0.1, "model")), 0, errors=1, model_errors=1)
        >>> episode = Episode(9, 6, 3, 2, "metadata", 1.1, False, True, tools=calls)
        >>> group_tool_counts([sample], {id(sample): episode})
        {'tool_call_count': 2, 'tool_error_count': 1, 'model_error_count': 1}
        >>> group_tool_counts([sample], {})
        {}
    """
    if not by_sample:
        return {}
    calls = errors = model = 0
    reported = False
    for sample in leaves([group]):
        episode = by_sample.get(id(sample))
        if episode is None or episode.tools is None:
            continue
        reported = True
        calls += len(episode.tools.calls)
        errors += episode.tools.errors
        model += episode.tools.model_errors
    if not reported:
        return {}
    return {"tool_call_count": calls, "tool_error_count": errors, "model_error_count": model}


def _never_started(call: _Call) -> bool:
    """Aborted before its first token in the step (still queued in the engine): it never started."""
    return call.aborted and not call.tokens and not call.observation


def _carry_key(sample: Any) -> Hashable | None:
    index = getattr(sample, "index", None)
    return index if is_int(index) else None


def _distinct_samples(groups: Iterable[Any]) -> Iterable[Any]:
    """Every distinct sample object of the groups (fanned-out segments included)."""
    seen: set[int] = set()
    for group in groups:
        try:
            samples = leaves(group)
        except Exception:  # noqa: BLE001 - an unreadable group has no readable samples
            continue
        for sample in samples:
            if id(sample) not in seen:
                seen.add(id(sample))
                yield sample
