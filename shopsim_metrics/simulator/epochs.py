"""Epochs over a finite prompt pool: the same prompts come back, so their verdicts can persist.

With ``SimConfig.prompt_pool`` set, the data source holds that many prompts, each with its own
difficulty (drawn once, normal with ``difficulty_spread``), and hands them out epoch after epoch
(a fresh shuffle per epoch; a prompt whose group is aborted is not handed out again until the next
epoch, as a data source that moves on). A sibling succeeds with probability
``sigmoid(skill(step) - difficulty)``, so as the policy improves the easy prompts saturate to
all-pass and the hard ones stay all-fail: zero-std becomes a property of the prompt and
``zero_std_persistence`` rises over the run.

Temporal consistency: a prompt keeps its difficulty from visit to visit, so a prompt too easy (or too
hard) for the policy stays so for a while; with ``SimConfig.difficulty_drift`` every prompt's
difficulty also takes a normal step of that size per rollout step, so prompts drift in and out of
the informative band as training goes.

Skipping (``SimConfig.prompt_skip: greso``): the prompts of each wave come from the project's real
skipping data source (:class:`~shopsim_metrics.prompts.data_source.PromptSkipDataSource`, which slime
loads through the adapter as ``shopsimrl.data_source.PromptSkipDataSource``), wrapped around
:class:`PoolDataSource`, which stands in for slime's default data source (epochs over the pool, a
running ``group_index``). The data source learns from the monitor's prompt history, as in training.

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

import json
import os
from pathlib import Path
from typing import Any

import numpy as np

from shopsim_metrics.simulator.samples import SimSample
from shopsim_metrics.simulator.config import SimConfig
from shopsim_metrics.simulator.rewards import PromptGroupSource
from shopsim_metrics.simulator.token_model import TokenModel


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


def pool_label(prompt_id: int) -> str:
    """The label of pool prompt ``prompt_id``.

    Example:
        >>> pool_label(3)
        'answer 3'
    """
    return f"answer {prompt_id}"


def write_prompt_data(path: str | os.PathLike, pool: int) -> Path:
    """The pool as slime's ``--prompt-data`` would hold it: one JSON object per line, ``prompt`` and ``label``
    (a launch's ``--input-key prompt --label-key label``), so the ledger's prompt keys map back to its lines.

    Example:
        >>> import json
        >>> [json.loads(line)["label"] for line in write_prompt_data("prompts.jsonl", 2).read_text().splitlines()]
        ['answer 0', 'answer 1']
    """
    out = Path(path)
    out.write_text("".join(json.dumps({"prompt": pool_prompt(i), "label": pool_label(i)}) + "\n" for i in range(pool)),
                   encoding="utf-8")
    return out


class PoolDataSource:
    """slime's default data source over the pool, for the simulator: epochs in a fresh shuffle each,
    one sample per group carrying the pool prompt (``metadata["pool_id"]``) and a running ``group_index``."""

    def __init__(self, source: "EpochPromptSource") -> None:
        self.source = source
        self.group_index = 0

    def get_samples(self, num_samples: int) -> list[list[SimSample]]:
        groups = []
        for _ in range(num_samples):
            prompt_id = self.source._next_prompt()
            sample = SimSample(prompt=self.source.prompts[prompt_id], label=pool_label(prompt_id),
                               metadata={"pool_id": prompt_id}, group_index=self.group_index)
            self.group_index += 1
            groups.append([sample])
        return groups

    def __len__(self) -> int:
        return self.source.pool


class EpochPromptSource(PromptGroupSource):
    """The prompt model over a finite pool visited epoch after epoch (see the module docstring)."""

    def __init__(self, config: SimConfig, rng: np.random.Generator, tokens: TokenModel | None = None) -> None:
        super().__init__(config, rng, tokens)
        if not config.prompt_pool:
            raise ValueError(f"EpochPromptSource needs SimConfig.prompt_pool >= 1; got {config.prompt_pool!r}")
        self.pool = config.prompt_pool
        self.difficulty = rng.normal(0.0, config.difficulty_spread, self.pool)
        self.prompts = self._pool_prompts()
        self._order: list[int] = []  # the current epoch's remaining prompts
        self._epoch = -1
        self._prompt_of: dict[int, int] = {}  # gid -> pool prompt
        self._epoch_of: dict[int, int] = {}
        self._group_index_of: dict[int, int] = {}  # gid -> the data source's group_index (skipping only)
        self._drifted_to = 0  # the step the difficulties have drifted up to

    def _pool_prompts(self) -> list[Any]:
        """The pool's prompts, in pool order (a replay names the trace's)."""
        return [pool_prompt(i) for i in range(self.pool)]

    def _data_source(self) -> Any:
        """The project's data source over the pool when the config skips prompts or sizes waves, else None."""
        if self.config.prompt_skip == "off" and self.config.wave_size == "fixed":
            return None
        from shopsim_metrics.simulator.data_sources import project_data_source

        return project_data_source(self.config, PoolDataSource(self))

    def _forget(self) -> None:
        super()._forget()
        self._prompt_of.clear()  # groups of earlier steps are done: memory stays constant over a run
        self._epoch_of.clear()
        self._group_index_of.clear()

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

    def _drift(self, step: int) -> None:
        drift = self.config.difficulty_drift
        while drift and self._drifted_to < step:
            self.difficulty += self.rng.normal(0.0, drift, self.pool)
            self._drifted_to += 1

    def _draw_prompts(self, gids: range, served: list | None) -> list[int]:
        """The wave's pool prompts: those the data source served when the loop asked it, else the epoch order."""
        if served is None:
            return [self._next_prompt() for _ in gids]
        groups = served
        for gid, group in zip(gids, groups):
            self._group_index_of[gid] = group[0].group_index
        return [group[0].metadata["pool_id"] for group in groups]

    def _prepare(self, gids: range, step: int, served: list | None) -> None:
        self._drift(step)
        skill = self.config.skill_at(step)
        for gid, prompt in zip(gids, self._draw_prompts(gids, served)):
            self._prompt_of[gid] = prompt
            self._epoch_of[gid] = self._epoch
            self._p_success[gid] = float(1.0 / (1.0 + np.exp(self.difficulty[prompt] - skill)))

    def _fill(self, group: list[SimSample], gid: int, u: list[float]) -> None:
        super()._fill(group, gid, u)
        self._name(group, gid)

    def _name(self, group: list[SimSample], gid: int) -> None:
        """Give the group's samples its pool prompt, label and the data source's ``group_index``."""
        prompt_id = self._prompt_of[gid]
        prompt, label = self.prompts[prompt_id], pool_label(prompt_id)
        group_index = self._group_index_of.get(gid)
        for sample in group:
            sample.prompt = prompt
            sample.label = label
            if group_index is not None:  # the data source's counter, which its skipped draws share
                sample.group_index = group_index
