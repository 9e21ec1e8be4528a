"""Epochs over a finite prompt pool: the same prompts come back, so their verdicts can persist.

With ``SimConfig.prompt_pool`` set, the data source holds that many prompts, each with its own
difficulty (drawn once, normal with ``difficulty_spread``), and hands them out epoch after epoch
(a fresh shuffle per epoch; a prompt whose group is aborted is not handed out again until the next
epoch, as a data source that moves on). A sibling succeeds with probability
``sigmoid(skill(step) - difficulty)``, so as the policy improves the easy prompts saturate to
all-pass and the hard ones stay all-fail: zero-std becomes a property of the prompt and
``zero_std_persistence`` rises over the run.

Samples carry ``prompt`` (a chat message list, or plain text for every third prompt) and ``label``,
which is what the monitor's prompt key hashes; :meth:`EpochPromptSource.prompt_id` says which pool
prompt a group asked, the ground truth the tests check the ledger's keys against.

Example:
    >>> import numpy as np
    >>> from shopsim_metrics.simulator.config import SimConfig
    >>> src = EpochPromptSource(SimConfig(prompt_pool=3, technical_rate=0.0), np.random.default_rng(0))
    >>> src.submit(range(4), step=0)
    >>> sorted(src.prompt_id(g) for g in range(3)), src.epoch_of(3)
    ([0, 1, 2], 1)
    >>> group = src.group(0, slot=0)
    >>> group[0].prompt == group[-1].prompt and group[0].label is not None
    True
"""

from __future__ import annotations

import numpy as np

from shopsim_metrics.simulator.samples import SimSample
from shopsim_metrics.simulator.config import SimConfig
from shopsim_metrics.simulator.rewards import PromptGroupSource
from shopsim_metrics.simulator.tokens import TokenModel


def pool_prompt(prompt_id: int) -> object:
    """The prompt text (or chat messages) of pool prompt ``prompt_id``.

    Example:
        >>> pool_prompt(1)
        [{'role': 'system', 'content': 'You are a shopping agent.'}, {'role': 'user', 'content': 'shopping task 1'}]
        >>> pool_prompt(3)
        'shopping task 3'
    """
    if prompt_id % 3 == 0:
        return f"shopping task {prompt_id}"
    return [{"role": "system", "content": "You are a shopping agent."},
            {"role": "user", "content": f"shopping task {prompt_id}"}]


class EpochPromptSource(PromptGroupSource):
    """The prompt model over a finite pool visited epoch after epoch (see the module docstring)."""

    def __init__(self, config: SimConfig, rng: np.random.Generator, tokens: TokenModel | None = None) -> None:
        super().__init__(config, rng, tokens)
        if not config.prompt_pool:
            raise ValueError(f"EpochPromptSource needs SimConfig.prompt_pool >= 1; got {config.prompt_pool!r}")
        self.pool = config.prompt_pool
        self.difficulty = rng.normal(0.0, config.difficulty_spread, self.pool)
        self.prompts = [pool_prompt(i) for i in range(self.pool)]
        self._order: list[int] = []  # the current epoch's remaining prompts
        self._epoch = -1
        self._prompt_of: dict[int, int] = {}  # gid -> pool prompt
        self._epoch_of: dict[int, int] = {}

    def _forget(self) -> None:
        super()._forget()
        self._prompt_of.clear()  # groups of earlier steps are done: memory stays constant over a run
        self._epoch_of.clear()

    def _hardness(self, gids: range) -> list[float]:
        return [float(self.difficulty[self._prompt_of[gid]]) for gid in gids]  # a prompt's length follows it

    def prompt_id(self, gid: int) -> int:
        """The pool prompt group ``gid`` of the current step asked."""
        return self._prompt_of[gid]

    def epoch_of(self, gid: int) -> int:
        """The epoch group ``gid`` of the current step belongs to (0 first)."""
        return self._epoch_of[gid]

    def _next_prompt(self) -> int:
        if not self._order:
            self._epoch += 1
            self._order = self.rng.permutation(self.pool).tolist()[::-1]
        return self._order.pop()

    def _prepare(self, gids: range, step: int) -> None:
        skill = self.config.skill_at(step)
        for gid in gids:
            prompt = self._next_prompt()
            self._prompt_of[gid] = prompt
            self._epoch_of[gid] = self._epoch
            self._p_success[gid] = float(1.0 / (1.0 + np.exp(self.difficulty[prompt] - skill)))

    def _fill(self, group: list[SimSample], gid: int, u: list[float]) -> None:
        super()._fill(group, gid, u)
        prompt_id = self._prompt_of[gid]
        prompt, label = self.prompts[prompt_id], f"answer {prompt_id}"
        for sample in group:
            sample.prompt = prompt
            sample.label = label
