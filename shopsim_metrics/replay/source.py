"""The simulator's group source for a replay: each draw of a prompt gets that prompt's recorded outcome.

:class:`TraceGroupSource` is the epoch pool of :mod:`shopsim_metrics.simulator.epochs` with the trace's
prompts in place of drawn difficulties: the data source (slime's stand-in, wrapped by the project's
skipping data source when a rule is on) walks the prompts epoch after epoch in a fresh shuffle per
seed, and a group of prompt ``i`` submitted at step ``s`` holds the outcome of the visit of ``i``
nearest in training time (:meth:`~shopsim_metrics.outcomes.trace.Trace.visit_at`): exactly its recorded
number of successes out of ``n`` (which siblings succeed is drawn), so it is zero-std exactly when the
recorded visit was.

Rewards are 1 for a success and 0 for a failure. A recorded visit whose zero-std verdict differs from
its successes (rewards with partial credit: all-fail with spread, or equal rewards with mixed successes)
keeps its verdict: its rewards are made to differ (or not), and each sibling says whether it succeeded
in ``metadata["shopsim_success"]``.

Tokens: a visit's recorded response tokens (split evenly over its rollouts) when the trace has them;
otherwise the simulator's token model (:mod:`shopsim_metrics.simulator.token_model`), whose lengths never
read the future (:data:`LENGTH_MODES`):

- ``by-outcome`` (the default): a group's hardness is ``-logit`` of its own visit's success fraction
  (clipped to ``[1/(2n), 1 - 1/(2n)]``, :func:`visit_hardness`): a group that fails more answers
  longer, as in the simulator, and nothing of the prompt's other visits (later ones included) shapes it;
- ``independent``: every group's lengths from the same distribution, whatever its outcome.

(A hardness per prompt from its success rate over the whole trace would let a draw's length, and the
cost a skip rule reads from the prompt's past visits, depend on the prompt's future visits.)

Example:
    >>> import numpy as np
    >>> from shopsim_metrics.outcomes.trace import trace_from_mapping
    >>> from shopsim_metrics.simulator.config import SimConfig
    >>> trace = trace_from_mapping({"a": [0.0, 0.5], "b": [1.0, 1.0]}, n_samples=4)
    >>> config = SimConfig(prompt_pool=2, n_samples_per_prompt=4, steps=2, technical_rate=0.0)
    >>> source = TraceGroupSource(config, np.random.default_rng(0), trace)
    >>> source.submit(range(2), step=1)
    >>> sorted(sum(s.reward for s in source.group(g, slot=g)) for g in range(2))   # a at its second visit, b
    [2.0, 4.0]
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from shopsim_metrics.outcomes.trace import Trace, Visit
from shopsim_metrics.simulator.config import SimConfig
from shopsim_metrics.simulator.epochs import EpochPromptSource
from shopsim_metrics.simulator.samples import SimSample
from shopsim_metrics.simulator.token_model import TokenModel

SUCCESS_FLAG = "shopsim_success"
"""The metadata flag the filter reads a sibling's success from (the ``shopsim_success_key`` default)."""

_PLAIN: dict = {}  # shared and never mutated
_FLAGS = {True: {SUCCESS_FLAG: True}, False: {SUCCESS_FLAG: False}}


BY_OUTCOME, INDEPENDENT = "by-outcome", "independent"
LENGTH_MODES = (BY_OUTCOME, INDEPENDENT)
"""How the token model sets a replayed group's lengths when the trace records no tokens (module docstring)."""


def visit_hardness(visit: Visit, n: int) -> float:
    """A visit's hardness for the token model: ``-logit`` of its clipped success fraction (its own outcome only).

    Example:
        >>> [round(visit_hardness(Visit(k, k in (0, 2), 0.5), 2), 2) for k in (1, 0, 2)]
        [0.0, 1.1, -1.1]
    """
    low = 1.0 / (2 * n)
    rate = min(max(visit.successes / n, low), 1.0 - low)
    return math.log((1.0 - rate) / rate)


def trace_prompt_names(trace: Trace) -> list[str]:
    """The replayed prompts, as the simulated data source serves them: ``trace prompt <key>``, in trace order."""
    return [f"trace prompt {key}" for key in trace.prompts]


def even_split(tokens: int, n: int) -> list[int]:
    """``tokens`` over ``n`` rollouts, as evenly as whole tokens allow.

    Example:
        >>> even_split(10, 4)
        [3, 3, 2, 2]
    """
    share, extra = divmod(tokens, n)
    return [share + (i < extra) for i in range(n)]


class TraceGroupSource(EpochPromptSource):
    """The epoch pool over a trace's prompts, each group filled from its prompt's recorded visit (module docstring)."""

    def __init__(self, config: SimConfig, rng: np.random.Generator, trace: Trace,
                 tokens: TokenModel | None = None, *, lengths: str = BY_OUTCOME) -> None:
        if config.prompt_pool != len(trace.prompts) or config.n_samples_per_prompt != trace.n_samples:
            raise ValueError(f"TraceGroupSource needs SimConfig.prompt_pool = the trace's prompts ({len(trace.prompts)}) "
                             f"and n_samples_per_prompt = its n ({trace.n_samples}); got {config.prompt_pool} and "
                             f"{config.n_samples_per_prompt}")
        if lengths not in LENGTH_MODES:
            raise ValueError(f"lengths: expected one of {', '.join(LENGTH_MODES)}; got {lengths!r}")
        self.trace = trace
        super().__init__(config, rng, tokens)
        self.length_mode = lengths
        self._visit_of: dict[int, Visit] = {}  # gid -> the recorded visit it replays

    def _pool_prompts(self) -> list[Any]:
        return trace_prompt_names(self.trace)

    def visit_of(self, gid: int) -> Visit:
        """The recorded visit group ``gid`` of the current step replays."""
        return self._visit_of[gid]

    def submit(self, gids: range, step: int, served: list | None = None, *, carry: bool = False) -> None:
        super().submit(gids, step, served, carry=carry)
        if self.tokens is not None:
            for gid in gids:
                recorded = self._visit_of[gid].tokens
                if recorded is not None:
                    self._lengths[gid] = even_split(recorded, self.n)

    def _forget(self) -> None:
        super()._forget()
        self._visit_of.clear()

    def _hardness(self, gids: range) -> list[float]:
        """What the token model reads: each group's own visit's outcome, or nothing (``independent``)."""
        if self.length_mode == INDEPENDENT:
            return [0.0] * len(gids)
        return [visit_hardness(self._visit_of[gid], self.n) for gid in gids]

    def _prepare(self, gids: range, step: int, served: list | None) -> None:
        steps = self.config.steps
        for gid, prompt in zip(gids, self._draw_prompts(gids, served)):
            self._prompt_of[gid] = prompt
            self._epoch_of[gid] = self._epoch
            self._visit_of[gid] = self.trace.visit_at(prompt, step, steps)

    def _fill(self, group: list[SimSample], gid: int, u: list[float]) -> None:
        visit = self._visit_of[gid]
        n = self.n
        ranked = sorted(range(n), key=lambda i: u[2 + i])  # which siblings succeed: drawn
        succeeded = [False] * n
        for i in ranked[:visit.successes]:
            succeeded[i] = True
        rewards = [1.0 if ok else 0.0 for ok in succeeded]
        flags: Any = None
        if visit.zero_std != (visit.successes in (0, n)):  # partial credit: keep the recorded verdict
            rewards = [0.5] * n if visit.zero_std else [0.0] * n
            if not visit.zero_std:
                rewards[ranked[-1]] = 0.5
            flags = succeeded
        for i, sample in enumerate(group):
            sample.reward = rewards[i]
            sample.metadata = _PLAIN if flags is None else _FLAGS[flags[i]]
        self._name(group, gid)
