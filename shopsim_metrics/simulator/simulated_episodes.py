"""Agent episodes: turns of generation interleaved with tool calls, as slime's multi-turn generate functions make them.

An episode (one rollout of an agent) takes turns: the model generates, calls a tool, the tool's output (the
observation) is appended to the response with ``loss_mask`` 0, the model generates again, and so on until it
answers. Per rollout the simulator draws (:class:`AgentModel`, :class:`EpisodeModel`):

- the tokens the model generates: the token model's response length (:mod:`.token_model`), split at random over the
  turns, at least one token each;
- the turns: ``1 + Poisson(turns_mean - 1)``. An episode that would need more than ``max_turns`` stops after
  ``max_turns`` turns, each followed by a tool call, with status ``truncated`` (out of turns, as retool's loop);
- each tool call's seconds (lognormal, ``tool_seconds_median``, ``tool_seconds_sigma``) and its observation's
  tokens (lognormal, ``observation_tokens_median``, ``observation_tokens_sigma``, at least 1).

The sample an episode leaves (:meth:`Episode.write`, what a multi-turn generate function returns):
``response_length`` = generated + observation tokens, ``loss_mask`` 1 per generated and 0 per observation
token, ``non_generation_time`` = the tool calls' seconds (0 for an episode that called no tool, as slime's
``Sample`` leaves it: the monitor reads 0 as not reported, so a step without a tool call has null environment
fields), ``metadata["round_number"]`` = the turns (slime's key; with ``round_number=False`` it is left out and the
turns are read from the mask), status ``completed``, ``truncated`` or ``aborted``.

Time: an episode takes ``seconds_per_token`` per generated token plus its tool calls' seconds; its group ends
with its slowest episode. When slime aborts the group at ``seconds`` into it (:meth:`EpisodePlan.at`), each
episode holds what it had made by then: its finished turns and observations, the tokens of the turn it was
generating (as :func:`~.token_model.tokens_generated_by` counts a single turn), and the seconds of a tool call it was
waiting on, without that call's observation: an episode aborted mid-tool-call wasted environment time too.

Each tool call calls one of ``AgentModel.tools`` (drawn by their weights, on a stream of its own), takes the drawn
seconds times the tool's ``latency``, and fails without ending the episode at the tool's ``error_rate`` (the
environment's) or ``model_error_rate`` (the model's); with tools, the sample's ``metadata["shopsim_tool_calls"]``
lists every call that ended (the contract of ``judging.tool_calls``: a call slime's abort cut short is not in it,
its seconds are in ``non_generation_time``).

An environment failure (:meth:`EpisodePlan.failed`): the tool call after turn ``k`` raised. The episode holds turns
1 to ``k``, the observations before, the failed call's seconds, status ``aborted`` and
``metadata["shopsim_failure_cause"]`` (e.g. ``"ToolTimeout: search_products"``), as slime's tau-bench example maps
a tool's exception to an aborted sample; the failed call is the named tool's (the cause's first word after the
colon, when it is a tool: the demo's burst is one tool timing out).

Example:
    >>> plan = EpisodePlan(turn_tokens=(10, 5), observation_tokens=(3, 4), tool_seconds=(2.0, 9.0))
    >>> done = plan.finished()
    >>> (done.generated, done.observation, done.turns, done.environment_seconds, done.status)
    (15, 3, 2, 2.0, 'completed')
    >>> done.loss_mask() == [1] * 10 + [0] * 3 + [1] * 5
    True
    >>> plan.seconds(0.1)                    # 15 tokens at 0.1 s, one tool call of 2 s
    3.5
    >>> mid_tool = plan.at(1.5, 0.1)         # 10 tokens in 1 s, then half a second into the tool call
    >>> (mid_tool.generated, mid_tool.observation, mid_tool.environment_seconds, mid_tool.status)
    (10, 0, 0.5, 'aborted')
    >>> failed = plan.failed(1, "ToolTimeout: search_products")
    >>> (failed.turns, failed.environment_seconds, failed.status, failed.cause)
    (1, 2.0, 'aborted', 'ToolTimeout: search_products')
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from shopsim_metrics.judging.episodes import ROUND_NUMBER_KEY
from shopsim_metrics.judging.failure_cause import FAILURE_CAUSE_KEY
from shopsim_metrics.judging.tool_calls import ENVIRONMENT, MODEL, TOOL_CALLS_KEY
from shopsim_metrics.simulator.config import AgentModel

ToolCallEntry = tuple[str, float, "str | None"]
"""A tool call that ended: its tool, its seconds, who failed it (None: ok; ``"environment"``, ``"model"``)."""


@dataclass(frozen=True)
class Episode:
    """What an episode's sample holds: the generated tokens per turn, the observations appended after them, the
    seconds in tool calls, the status and, for an environment failure, its cause."""

    turn_tokens: tuple[int, ...]
    observation_tokens: tuple[int, ...]  # one per tool call that returned (as many as the turns, or one fewer)
    environment_seconds: float
    status: str
    cause: str | None = None
    calls: tuple[ToolCallEntry, ...] = ()  # the tool calls that ended, in order (empty: none, or no tools modelled)

    @property
    def generated(self) -> int:
        return sum(self.turn_tokens)

    @property
    def observation(self) -> int:
        return sum(self.observation_tokens)

    @property
    def turns(self) -> int:
        return len(self.turn_tokens)

    def loss_mask(self) -> list[int]:
        """1 per generated token, 0 per observation token, in the order they were appended."""
        parts = []
        for turn, tokens in enumerate(self.turn_tokens):
            parts.append(b"\x01" * tokens)
            if turn < len(self.observation_tokens):
                parts.append(b"\x00" * self.observation_tokens[turn])
        return list(b"".join(parts))  # built as bytes: a list of ints in one pass

    def write(self, sample: Any, *, round_number: bool = True, tool_calls: bool = False) -> Any:
        """Fill ``sample`` as a multi-turn generate function leaves it (see the module docstring; ``tool_calls``:
        leave the tool-call list); returns it."""
        sample.response_length = self.generated + self.observation
        sample.loss_mask = self.loss_mask()
        sample.non_generation_time = self.environment_seconds
        sample.status = self.status
        metadata: dict[str, Any] = {ROUND_NUMBER_KEY: self.turns} if round_number else {}
        if self.cause is not None:
            metadata[FAILURE_CAUSE_KEY] = self.cause
        if tool_calls:
            metadata[TOOL_CALLS_KEY] = [{"name": name, "seconds": seconds, "ok": error is None,
                                         **({"kind": error} if error is not None else {})}
                                        for name, seconds, error in self.calls]
        sample.metadata = metadata
        return sample


@dataclass(frozen=True)
class EpisodePlan:
    """An episode as drawn: each turn's generated tokens and, after each turn, a tool call's seconds and its
    observation's tokens. The last call is made only when the episode is ``truncated`` (it ran out of turns
    after a tool call) or when it fails."""

    turn_tokens: tuple[int, ...]
    observation_tokens: tuple[int, ...]  # as many as the turns
    tool_seconds: tuple[float, ...]  # as many as the turns
    truncated: bool = False
    tool_names: tuple[str, ...] = ()  # as many as the turns (empty: no tools modelled)
    tool_errors: tuple[str | None, ...] = ()  # who fails each call without ending the episode (None: ok)

    def _calls(self, count: int) -> tuple[ToolCallEntry, ...]:
        """The first ``count`` calls as entries (none without tools)."""
        if not self.tool_names:
            return ()
        return tuple(zip(self.tool_names[:count], self.tool_seconds[:count], self.tool_errors[:count]))

    @property
    def calls(self) -> int:
        """Tool calls the episode makes when nothing fails."""
        return len(self.turn_tokens) - (0 if self.truncated else 1)

    def seconds(self, seconds_per_token: float) -> float:
        """Seconds the whole episode takes: its generation and its tool calls."""
        return sum(self.turn_tokens) * seconds_per_token + sum(self.tool_seconds[:self.calls])

    def finished(self) -> Episode:
        """The episode run to its end."""
        calls = self.calls
        return Episode(self.turn_tokens, self.observation_tokens[:calls], sum(self.tool_seconds[:calls]),
                       "truncated" if self.truncated else "completed", calls=self._calls(calls))

    def failed(self, turn: int, cause: str, tool: str | None = None) -> Episode:
        """The episode whose tool call after turn ``turn`` (1 to the turns) raised ``cause``; ``tool``: the failed
        call's tool (None: the one drawn for it)."""
        if not 1 <= turn <= len(self.turn_tokens):
            raise ValueError(f"EpisodePlan.failed: turn must be from 1 to {len(self.turn_tokens)}; got {turn}")
        calls = self._calls(turn - 1)
        if self.tool_names:
            calls += ((tool or self.tool_names[turn - 1], self.tool_seconds[turn - 1], ENVIRONMENT),)
        return Episode(self.turn_tokens[:turn], self.observation_tokens[:turn - 1], sum(self.tool_seconds[:turn]),
                       "aborted", cause, calls)

    def at(self, seconds: float, seconds_per_token: float) -> Episode:
        """What the episode holds ``seconds`` after it started (slime aborted it then; see the module docstring).

        Example:
            >>> plan = EpisodePlan(turn_tokens=(10, 5), observation_tokens=(3, 4), tool_seconds=(2.0, 9.0))
            >>> [plan.at(s, 0.1).generated for s in (0.0, 0.55, 3.0, 3.2, 9.0)]
            [0, 5, 10, 12, 15]
            >>> [plan.at(s, 0.1).status for s in (3.2, 3.5)]
            ['aborted', 'completed']
        """
        if seconds >= self.seconds(seconds_per_token):
            return self.finished()
        left = max(seconds, 0.0)
        turns: list[int] = []
        observations: list[int] = []
        environment = 0.0
        for turn, tokens in enumerate(self.turn_tokens):
            needed = tokens * seconds_per_token
            if left < needed:  # generating this turn
                made = min(tokens, math.floor(left / seconds_per_token + 1e-9))
                turns += [made] if made else []
                break
            left -= needed
            turns.append(tokens)
            if turn >= self.calls:
                break
            if left < self.tool_seconds[turn]:  # waiting on this tool call
                environment += left
                break
            left -= self.tool_seconds[turn]
            environment += self.tool_seconds[turn]
            observations.append(self.observation_tokens[turn])
        return Episode(tuple(turns), tuple(observations), environment, "aborted", calls=self._calls(len(observations)))


def episode_rng(seed: int) -> np.random.Generator:
    """The generator of the episodes' draws: a sixth stream of the seed, so single-turn runs draw as before."""
    return np.random.default_rng(np.random.SeedSequence(seed).spawn(6)[5])


class EpisodeModel:
    """Draws :class:`EpisodePlan` s, failures and their causes (see the module docstring).

    Example:
        >>> model = EpisodeModel(AgentModel(turns_mean=3.0), seconds_per_token=0.02, rng=np.random.default_rng(0))
        >>> [plan] = model.plans([[90]])[0]
        >>> sum(plan.turn_tokens), len(plan.turn_tokens) == len(plan.tool_seconds) == len(plan.observation_tokens)
        (90, True)
    """

    def __init__(self, agent: AgentModel, *, seconds_per_token: float, rng: np.random.Generator) -> None:
        self.agent = agent
        self.seconds_per_token = seconds_per_token
        self.rng = rng
        self.tool_rng = rng.spawn(1)[0]  # the tools' draws: a stream of their own (the episodes' draws stay as they were)
        tools = agent.tools
        self._tool_names = [tool.name for tool in tools]
        self._tool_weights = np.asarray([tool.weight for tool in tools], dtype=float)
        self._tool_weights = self._tool_weights / self._tool_weights.sum() if tools else self._tool_weights
        self._tool_latency = np.asarray([tool.latency for tool in tools], dtype=float)
        self._tool_error = np.asarray([tool.error_rate for tool in tools], dtype=float)
        self._tool_model_error = np.asarray([tool.error_rate + tool.model_error_rate for tool in tools], dtype=float)
        self._tool_mu = math.log(agent.tool_seconds_median)
        self._observation_mu = math.log(agent.observation_tokens_median)
        causes, weights = zip(*agent.failure_causes)
        self._causes = list(causes)
        self._cause_weights = np.asarray(weights, dtype=float) / float(sum(weights))

    def plans(self, lengths: Sequence[Sequence[int]]) -> list[list[EpisodePlan]]:
        """One plan per rollout of each group, from the rollouts' generated tokens (``lengths``)."""
        agent, rng = self.agent, self.rng
        flat = [int(length) for group in lengths for length in group]
        wanted = 1 + rng.poisson(agent.turns_mean - 1.0, len(flat))
        capped = np.minimum(np.minimum(wanted, agent.max_turns), np.maximum(flat, 1))  # a turn generates a token or more
        truncated = (wanted > agent.max_turns) & (capped == agent.max_turns)
        turns = capped.tolist()
        calls = int(sum(turns))
        seconds = rng.lognormal(self._tool_mu, agent.tool_seconds_sigma, calls)
        names: list[str] = []
        errors: list[str | None] = []
        if self._tool_names:
            chosen = self.tool_rng.choice(len(self._tool_names), size=calls, p=self._tool_weights)
            draws = self.tool_rng.random(calls)
            seconds = seconds * self._tool_latency[chosen]
            names = [self._tool_names[i] for i in chosen.tolist()]
            errors = [ENVIRONMENT if u < self._tool_error[i] else (MODEL if u < self._tool_model_error[i] else None)
                      for i, u in zip(chosen.tolist(), draws.tolist())]
        seconds = seconds.tolist()
        observations = np.maximum(1, np.rint(rng.lognormal(self._observation_mu, agent.observation_tokens_sigma,
                                                           calls))).astype(np.int64).tolist()
        plans: list[EpisodePlan] = []
        start = 0
        for length, count, cut in zip(flat, turns, truncated.tolist()):
            split = (1 + rng.multinomial(max(length - count, 0), [1.0 / count] * count)).tolist()
            end = start + count
            plans.append(EpisodePlan(tuple(split), tuple(observations[start:end]), tuple(seconds[start:end]),
                                     truncated=bool(cut), tool_names=tuple(names[start:end]),
                                     tool_errors=tuple(errors[start:end])))
            start = end
        out, position = [], 0
        for group in lengths:
            out.append(plans[position:position + len(group)])
            position += len(group)
        return out

    def group_ticks(self, groups: Sequence[Sequence[EpisodePlan]], tick: float) -> list[int]:
        """Whole ticks until each group's slowest episode is done (at least 1)."""
        spt = self.seconds_per_token
        return [max(1, math.ceil(max((plan.seconds(spt) for plan in group), default=0.0) / tick - 1e-9))
                for group in groups]

    def failure(self, plan: EpisodePlan, cause: str | None = None) -> Episode:
        """``plan`` failing at a tool call drawn uniformly among its turns, with ``cause`` (else a drawn one)."""
        turn = 1 + int(self.rng.integers(len(plan.turn_tokens)))
        if cause is None:
            cause = self._causes[int(self.rng.choice(len(self._causes), p=self._cause_weights))]
        named = cause.partition(": ")[2].split(" ", 1)[0]  # "ToolTimeout: search_products": that tool's call failed
        return plan.failed(turn, cause, named if named in self._tool_names else None)


@dataclass
class GeneratedEpisodes:
    """What the episodes of one step held, as the simulator made them: the ground truth of the agent fields.

    Every episode the sample hook sees counts: those of judged groups, and those slime aborted at the step's
    end (:attr:`aborted_environment_seconds` is their tool time, spent on episodes that never train).

    Example:
        >>> tally = GeneratedEpisodes()
        >>> tally.add(EpisodePlan((10, 5), (3, 4), (2.0, 9.0)).finished(), seconds_per_token=0.1)
        >>> (tally.episodes, tally.observation_tokens, tally.turns_max, tally.generation_seconds)
        (1, 3, 2, 1.5)
    """

    episodes: int = 0
    generated_tokens: int = 0
    observation_tokens: int = 0
    turns: int = 0  # summed over the episodes
    turns_max: int = 0
    environment_seconds: float = 0.0
    generation_seconds: float = 0.0  # generated tokens x seconds_per_token
    aborted_environment_seconds: float = 0.0  # tool seconds of the episodes slime aborted at the step's end
    truncated: int = 0
    causes: dict[int, str] = field(default_factory=dict)  # group id -> the cause injected into the technical group
    tools: dict[str, list[float]] = field(default_factory=dict)  # tool -> [calls, errors, model errors, seconds]

    def add(self, episode: Episode, *, seconds_per_token: float, aborted_by_slime: bool = False) -> None:
        self.episodes += 1
        self.generated_tokens += episode.generated
        self.observation_tokens += episode.observation
        self.turns += episode.turns
        self.turns_max = max(self.turns_max, episode.turns)
        self.environment_seconds += episode.environment_seconds
        self.generation_seconds += episode.generated * seconds_per_token
        self.truncated += episode.status == "truncated"
        for name, seconds, error in episode.calls:
            tool = self.tools.setdefault(name, [0, 0, 0, 0.0])
            tool[0] += 1
            tool[1] += error is not None
            tool[2] += error == MODEL
            tool[3] += seconds
        if aborted_by_slime:
            self.aborted_environment_seconds += episode.environment_seconds


class AgentWaveTime:
    """A group's generation time in ticks when its rollouts are agent episodes: the latency-model interface
    (``ticks``, ``tick``) that :func:`~.latency.reference_wave_time` asks for the unit of relative rollout time.

    Example:
        >>> from shopsim_metrics.simulator.token_model import TokenModel
        >>> tokens = TokenModel(median=100.0, sigma=0.0, slope=0.0, max_tokens=1000, seconds_per_token=0.1,
        ...                     tick=1.0, n=2, rng=np.random.default_rng(0))
        >>> model = EpisodeModel(AgentModel(turns_mean=1.0), seconds_per_token=0.1, rng=np.random.default_rng(0))
        >>> AgentWaveTime(tokens, model).ticks(2)   # one turn of 100 tokens at 0.1 s: no tool call
        [10, 10]
    """

    def __init__(self, tokens: Any, episodes: EpisodeModel) -> None:
        self.tokens, self.episodes, self.tick = tokens, episodes, tokens.tick

    def ticks(self, count: int) -> list[int]:
        lengths = self.tokens.lengths(self.tokens.hardness(count))
        return self.episodes.group_ticks(self.episodes.plans(lengths), self.tick)
