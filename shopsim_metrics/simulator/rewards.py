"""What finished groups hold: the group sources the simulated loop asks when it judges a group.

A group source has three calls: ``submit(gids, step, served)`` when a wave is submitted (prompt
properties are drawn then; ``served``: the groups the data source served for the wave, when the loop
asks one), ``group(gid, slot)`` when the group has finished and is about to be judged
(contents are drawn then, in judgement order, which is what lets ``max_technical_streak`` cap the
streak the filter sees), and ``aborted_samples(gid, share)`` for a group aborted when ``share`` of its
generation time had passed (its rollouts as slime's abort hands them back: the tokens each had made, never
judged; ``aborted_lengths(gid, share)``: their lengths alone). ``slot`` is the group's judgement index within the step: sources reuse
the :class:`~shopsim_metrics.simulator.samples.SimSample` objects of a slot from step to step, so building
a group costs a few attribute writes. A slot's group stays valid until the next step begins (the
all-samples hook reads every group of the step at its end).

- :class:`PromptGroupSource`: the prompt model (difficulty, learning curve, partial credit);
- :class:`RatesGroupSource`: fixed zero-std / technical rates (tuning);
- :class:`FactoryGroupSource`: explicit contents, ``make_group(gid) -> group`` (scripted groups).

Technical groups break one sibling in one of three ways (``status_failed``, ``reward_missing``,
``metadata_unscored``), so the ledger's ``failed_check`` column varies; their other siblings keep
their rewards and count as completed generations. With agent episodes (``SimConfig.agent``) every rollout
is an episode (:mod:`~shopsim_metrics.simulator.simulated_episodes`, drawn at submission: they set the group's time)
and a technical group's broken sibling is an environment failure instead: its episode failed at a tool call,
status ``aborted``, with its cause in the metadata. :meth:`_SlotSource.take_episodes` hands the loop what the
step's episodes held.

Example:
    >>> import numpy as np
    >>> from shopsim_metrics.simulator.config import SimConfig
    >>> src = RatesGroupSource(SimConfig(zero_std_rate=1.0, technical_rate=0.0), np.random.default_rng(0))
    >>> src.submit(range(2), step=0)
    >>> group = src.group(0, slot=0)
    >>> len(group), len({s.reward for s in group})
    (8, 1)
"""

from __future__ import annotations

from typing import Any, Callable, Protocol

import numpy as np

from shopsim_metrics.simulator.samples import SimSample
from shopsim_metrics.simulator.config import SimConfig
from shopsim_metrics.simulator.simulated_episodes import EpisodeModel, EpisodePlan, GeneratedEpisodes, episode_rng
from shopsim_metrics.simulator.token_model import TokenModel, lengths_generated_by

TECHNICAL_KINDS = ("status_failed", "reward_missing", "metadata_unscored")
"""How a simulated technical group is broken (each maps to the filter's failed check of that name)."""

_UNSCORED_METADATA = {"shopsim_unscored": True}  # shared and never mutated
_NO_METADATA: dict = {}


class GroupSource(Protocol):
    """Contents of finished groups (see the module docstring)."""

    data_source: Any  # what the loop asks for each wave (slime's --data-source-path), or None: waves of the asked size

    def submit(self, gids: range, step: int, served: list | None = None, *, carry: bool = False) -> None: ...

    def group(self, gid: int, slot: int) -> list: ...

    def aborted_lengths(self, gid: int, share: float) -> list[int]: ...

    def aborted_samples(self, gid: int, share: float) -> list: ...


class FactoryGroupSource:
    """Explicit contents: ``make_group(gid)`` builds the finished group of ``gid``.

    Example:
        >>> src = FactoryGroupSource(lambda gid: [SimSample(index=gid, reward=1.0)])
        >>> src.submit(range(1), step=0); src.group(0, slot=0)[0].index
        0
    """

    data_source = None

    def __init__(self, make_group: Callable[[int], list]) -> None:
        self.make_group = make_group

    def submit(self, gids: range, step: int, served: list | None = None, *, carry: bool = False) -> None:
        pass

    def group(self, gid: int, slot: int) -> list:
        return self.make_group(gid)

    def aborted_lengths(self, gid: int, share: float) -> list[int]:
        """Explicit contents are built only for judged groups: an aborted one has no rollouts to count."""
        return []

    def aborted_samples(self, gid: int, share: float) -> list:
        """As :meth:`aborted_lengths`: none."""
        return []


class _SlotSource:
    """Reusable sample slots plus the technical-streak cap shared by the drawn sources."""

    def __init__(self, config: SimConfig, rng: np.random.Generator, tokens: TokenModel | None = None) -> None:
        self.config = config
        self.rng = rng
        self.tokens = tokens  # response lengths (and generation time) per rollout; None: lengths stay 0
        self._lengths: dict[int, list[int]] = {}  # gid -> response lengths drawn at submission
        self.n = config.n_samples_per_prompt
        self._slots: list[list[SimSample]] = []
        self._broken: list[SimSample | None] = []  # per slot: the sibling a technical group broke
        self._draws: dict[int, list[float]] = {}  # gid -> uniforms drawn at submission
        self._step: int | None = None
        self._streak = 0  # technical groups emitted in a row (judgement order, across steps)
        self._technical_rate = config.technical_rate
        self._failure_cause: str | None = None  # the burst's cause of environment failures, at the current step
        self.episodes: EpisodeModel | None = None  # agent episodes (SimConfig.agent), drawn at submission
        self._plans: dict[int, list[EpisodePlan]] = {}  # gid -> its rollouts' episodes
        self._episode_tally = GeneratedEpisodes()
        if config.agent is not None:
            if tokens is None or not config.seconds_per_token:
                raise ValueError("agent episodes need a token model with seconds_per_token: an episode's generated "
                                 "tokens and time come from it")
            self.episodes = EpisodeModel(config.agent, seconds_per_token=config.seconds_per_token,
                                         rng=episode_rng(config.seed))
        self.data_source: Any = self._data_source()
        """What the loop asks for each wave, as slime asks its data source (None: waves of the asked size)."""

    def submit(self, gids: range, step: int, served: list | None = None, *, carry: bool = False) -> None:
        """Draw the groups' properties; ``carry``: groups of earlier steps are still generating (fully-async), keep them."""
        if step != self._step and not carry:
            self._draws.clear()  # groups of earlier steps were aborted: forget them
            self._lengths.clear()
            self._plans.clear()
            self._forget()
        self._step = step
        self._technical_rate = self.config.technical_rate_at(step)
        self._failure_cause = self.config.failure_cause_at(step)
        self._prepare(gids, step, served)
        if self.tokens is not None:
            self._lengths.update(zip(gids, self.tokens.lengths(self._hardness(gids))))
        if self.episodes is not None:
            self._plans.update(zip(gids, self.episodes.plans([self._lengths[gid] for gid in gids])))
        rows = self.rng.random((len(gids), 3 + 2 * self.n)).tolist()
        self._draws.update(zip(gids, rows))

    def _data_source(self) -> Any:
        """The project's data source when the config sizes its waves (``wave_size: adaptive``), else None."""
        if self.config.wave_size == "fixed":
            return None
        from shopsim_metrics.simulator.data_sources import CountingDataSource, project_data_source

        return project_data_source(self.config, CountingDataSource())

    def _prepare(self, gids: range, step: int, served: list | None) -> None:
        """Per-prompt properties drawn at submission (none by default)."""

    def _forget(self) -> None:
        """Drop per-prompt properties of aborted groups (a new step began)."""

    def _hardness(self, gids: range) -> list[float]:
        """How hard each prompt is, for its response lengths (drawn when the reward model has none)."""
        return self.tokens.hardness(len(gids)) if self.tokens is not None else [0.0] * len(gids)

    def generation_ticks(self, gids: range) -> list[int] | None:
        """Each submitted group's generation time in ticks: its slowest rollout's tokens (None: no token model)."""
        if self.tokens is None or not self.config.seconds_per_token:
            return None
        if self.episodes is not None:  # an episode's generation and its tool calls
            return self.episodes.group_ticks([self._plans[gid] for gid in gids], self.config.latency_tick)
        return self.tokens.group_ticks([self._lengths[gid] for gid in gids])

    def aborted_lengths(self, gid: int, share: float) -> list[int]:
        """Each rollout's tokens of an unjudged group of this step at ``share`` of its generation time
        (:func:`~.token_model.lengths_generated_by` of the lengths drawn at submission; none without a token model)."""
        lengths = self._lengths.get(gid)
        return lengths_generated_by(lengths, share) if lengths is not None else []

    def aborted_samples(self, gid: int, share: float) -> list[SimSample]:
        """The rollouts of an unjudged group of this step aborted at ``share`` of its generation time, as slime's
        abort hands them back: each with the tokens it had made (:meth:`aborted_lengths`; an agent episode as
        :meth:`~.simulated_episodes.EpisodePlan.at` says), status ``aborted``, or ``completed`` for one done before."""
        lengths = self._lengths.get(gid)
        if lengths is None:
            return []
        samples = [SimSample(index=gid * self.n + k, group_index=gid) for k in range(len(lengths))]
        plans = self._plans.get(gid)
        if plans is None:
            for sample, made, full in zip(samples, lengths_generated_by(lengths, share), lengths):
                sample.status, sample.response_length = "completed" if made >= full else "aborted", made
            return samples
        spt = self.config.seconds_per_token or 0.0
        seconds = share * max(plan.seconds(spt) for plan in plans)
        for sample, plan in zip(samples, plans):
            episode = plan.at(seconds, spt)
            self._episode_tally.add(episode, seconds_per_token=spt, aborted_by_slime=episode.status == "aborted")
            episode.write(sample, round_number=self._round_number, tool_calls=self._tool_calls)
        return samples

    @property
    def _tool_calls(self) -> bool:
        """The episodes leave their tool-call list (the agent model has tools)."""
        return self.config.agent is not None and bool(self.config.agent.tools)

    @property
    def _round_number(self) -> bool:
        return self.config.agent is None or self.config.agent.round_number

    def take_episodes(self) -> GeneratedEpisodes | None:
        """What the episodes handed out since the last call held (None: single-turn rollouts); starts afresh."""
        if self.episodes is None:
            return None
        tally, self._episode_tally = self._episode_tally, GeneratedEpisodes()
        return tally

    def _slot(self, gid: int, slot: int) -> list[SimSample]:
        slots = self._slots
        while len(slots) <= slot:
            slots.append([SimSample(status="completed", metadata=_NO_METADATA) for _ in range(self.n)])
            self._broken.append(None)
        group = slots[slot]
        broken = self._broken[slot]
        if broken is not None:  # repair the sibling broken when the slot last held a technical group
            broken.status, broken.metadata = "completed", _NO_METADATA
            self._broken[slot] = None
        index = gid * self.n
        for sample in group:
            sample.index = sample.rollout_id = index
            sample.group_index = gid
            index += 1
        return group

    def group(self, gid: int, slot: int) -> list[SimSample]:
        u = self._draws.pop(gid)
        group = self._slot(gid, slot)
        rate = self._technical_rate
        cap = self.config.max_technical_streak
        technical = u[0] < rate and (cap is None or self._streak < cap)
        self._fill(group, gid, u)
        lengths = self._lengths.pop(gid, None)
        if lengths is not None:
            for sample, length in zip(group, lengths):
                sample.response_length = length
        plans = self._plans.pop(gid, None)
        broken: SimSample | None = None
        if technical:
            self._streak += 1
            broken = group[int(u[1] * self.n) % self.n]
            self._broken[slot] = broken
            if plans is None:
                kind = TECHNICAL_KINDS[min(int(u[0] / rate * len(TECHNICAL_KINDS)), len(TECHNICAL_KINDS) - 1)]
                if kind == "status_failed":
                    broken.status = "failed"
                elif kind == "reward_missing":
                    broken.reward = None
                else:
                    broken.metadata = _UNSCORED_METADATA
        else:
            self._streak = 0
        if plans is not None:
            self._write_episodes(gid, group, plans, broken)
        return group

    def _write_episodes(self, gid: int, group: list[SimSample], plans: list[EpisodePlan],
                        broken: SimSample | None) -> None:
        """Each sample as its episode left it; ``broken``'s episode failed in the environment (a technical group)."""
        assert self.episodes is not None
        spt = self.episodes.seconds_per_token
        for sample, plan in zip(group, plans):
            episode = plan.finished() if sample is not broken else self.episodes.failure(plan, self._failure_cause)
            if episode.cause is not None:
                self._episode_tally.causes[gid] = episode.cause
            episode.write(sample, round_number=self._round_number, tool_calls=self._tool_calls)
            self._episode_tally.add(episode, seconds_per_token=spt)

    def _fill(self, group: list[SimSample], gid: int, u: list[float]) -> None:
        raise NotImplementedError


class PromptGroupSource(_SlotSource):
    """The prompt model: per-prompt difficulty, a learning curve over steps, partial credit.

    A sibling succeeds (reward ``success_reward``) with probability ``sigmoid(skill(step) - d)``;
    a failing sibling earns one of ``partial_credit_levels`` with probability ``partial_credit_rate``,
    else 0.
    """

    def __init__(self, config: SimConfig, rng: np.random.Generator, tokens: TokenModel | None = None) -> None:
        super().__init__(config, rng, tokens)
        self._p_success: dict[int, float] = {}
        self._difficulty: dict[int, float] = {}

    def _forget(self) -> None:
        self._p_success.clear()
        self._difficulty.clear()

    def _hardness(self, gids: range) -> list[float]:
        return [self._difficulty.pop(gid) for gid in gids]

    def _prepare(self, gids: range, step: int, served: list | None) -> None:
        skill = self.config.skill_at(step)
        difficulty = self.rng.normal(0.0, self.config.difficulty_spread, len(gids))
        p = (1.0 / (1.0 + np.exp(difficulty - skill))).tolist()
        self._p_success.update(zip(gids, p))
        self._difficulty.update(zip(gids, difficulty.tolist()))

    def _fill(self, group: list[SimSample], gid: int, u: list[float]) -> None:
        cfg = self.config
        p = self._p_success.pop(gid)
        n = self.n
        partial_rate = cfg.partial_credit_rate
        levels = cfg.partial_credit_levels
        win = cfg.success_reward
        for i, sample in enumerate(group):
            if u[2 + i] < p:
                sample.reward = win
            else:
                v = u[2 + n + i]
                if v < partial_rate and levels:
                    sample.reward = levels[min(int(v / partial_rate * len(levels)), len(levels) - 1)]
                else:
                    sample.reward = 0.0


class RatesGroupSource(_SlotSource):
    """Fixed rates: a non-technical group is zero-std with probability ``zero_std_rate / (1 - technical_rate)``.

    So over all judged groups, technical ones come at ``technical_rate`` and zero-std ones at
    ``zero_std_rate`` (when no streak cap or burst intervenes). The share of zero-std groups among the
    healthy ones is the same inside a burst (``technical_rate`` is the background rate, not the
    burst's), so a burst takes groups from both kinds alike. A zero-std group is all-0 or all-1;
    a group with spread holds at least one 0 and one 1 (with one sibling per prompt every group is zero-std).
    """

    def __init__(self, config: SimConfig, rng: np.random.Generator, tokens: TokenModel | None = None) -> None:
        super().__init__(config, rng, tokens)
        if config.zero_std_rate is None:
            raise ValueError("RatesGroupSource needs SimConfig.zero_std_rate (a probability); got None")

    def _fill(self, group: list[SimSample], gid: int, u: list[float]) -> None:
        cfg = self.config
        healthy = 1.0 - cfg.technical_rate
        n = self.n
        zero_std = healthy > 0 and u[2 + n] * healthy < cfg.zero_std_rate
        win = cfg.success_reward
        if zero_std:
            value = win if u[2 + 2 * n] < 0.5 else 0.0
            for sample in group:
                sample.reward = value
            return
        for i, sample in enumerate(group):
            sample.reward = win if u[2 + i] < 0.5 else 0.0
        if n > 1:  # spread for sure (a single rollout never has spread)
            group[0].reward, group[1].reward = win, 0.0

