"""How long simulated answers are, and how long a group takes to generate them.

Agent trajectories have long-tailed lengths, and hard prompts run longer (more tool calls, more
retries). Each rollout's ``response_length`` is drawn from a lognormal whose median is
``response_length_median × exp(hard_prompt_length_slope × hardness)`` (``hardness``: the prompt's
difficulty in the prompt model, a draw of the same spread in the rates model), with shape
``response_length_sigma``, rounded, at least 1 and at most ``response_length_max`` (slime's
``--rollout-max-response-len``). A group finishes when its slowest rollout does:
``seconds_per_token × max(lengths)``, rounded up to whole ticks.

A group aborted part-way (the train batch filled while it was generating) has spent the tokens its
rollouts produced until then (:func:`tokens_generated_by`): its rollouts decode side by side at one
pace, the pace at which the longest one ends when the group does, and a shorter one stops at its length.

Example:
    >>> import numpy as np
    >>> model = TokenModel(median=100.0, sigma=0.0, slope=0.0, max_tokens=1000, seconds_per_token=0.5,
    ...                    tick=1.0, n=3, rng=np.random.default_rng(0))
    >>> lengths = model.lengths([0.0, 1.0])
    >>> lengths
    [[100, 100, 100], [100, 100, 100]]
    >>> model.group_ticks(lengths)
    [50, 50]
    >>> tokens_generated_by([100, 40, 100], share=0.5)   # half of its time: 50 + 40 (done) + 50
    140
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np


class TokenModel:
    """Per-rollout response lengths and the generation time they imply (see the module docstring)."""

    def __init__(
        self, *, median: float, sigma: float, slope: float, max_tokens: int, seconds_per_token: float,
        tick: float, n: int, rng: np.random.Generator, hardness_spread: float = 1.0,
    ) -> None:
        self.mu = math.log(median)
        self.sigma = sigma
        self.slope = slope
        self.max_tokens = max_tokens
        self.seconds_per_token = seconds_per_token
        self.tick = tick
        self.n = n
        self.rng = rng
        self.hardness_spread = hardness_spread

    @classmethod
    def from_config(cls, config, rng: np.random.Generator) -> "TokenModel":
        """The model a :class:`~shopsim_metrics.simulator.config.SimConfig` describes."""
        return cls(median=config.response_length_median, sigma=config.response_length_sigma,
                   slope=config.hard_prompt_length_slope, max_tokens=config.response_length_max,
                   seconds_per_token=config.seconds_per_token or 0.0, tick=config.latency_tick,
                   n=config.n_samples_per_prompt, rng=rng, hardness_spread=config.difficulty_spread)

    def hardness(self, count: int) -> list[float]:
        """Prompt hardness when the reward model has none (the rates model): normal, ``difficulty_spread``."""
        return self.rng.normal(0.0, self.hardness_spread, count).tolist()

    def lengths(self, hardness: Sequence[float]) -> list[list[int]]:
        """``n`` response lengths per prompt of the given hardness."""
        count = len(hardness)
        centre = self.mu + self.slope * np.asarray(hardness, dtype=float)[:, None]
        noise = self.rng.standard_normal((count, self.n)) * self.sigma
        drawn = np.rint(np.exp(centre + noise))
        return np.clip(drawn, 1, self.max_tokens).astype(np.int64).tolist()

    def group_ticks(self, lengths: Sequence[Sequence[int]]) -> list[int]:
        """Whole ticks until each group's slowest rollout is done (at least 1)."""
        per_tick = self.seconds_per_token / self.tick
        return [max(1, math.ceil(max(group, default=0) * per_tick - 1e-9)) for group in lengths]

    def ticks(self, count: int) -> list[int]:
        """Generation ticks of ``count`` fresh groups (the latency-model interface, for reference waves)."""
        return self.group_ticks(self.lengths(self.hardness(count)))

    def mean_group_tokens(self, samples: int = 20000) -> float:
        """Expected tokens of one group, by drawing (the clip makes a closed form awkward)."""
        rng_state = self.rng.bit_generator.state
        try:
            return float(np.mean([sum(g) for g in self.lengths(self.hardness(samples))]))
        finally:
            self.rng.bit_generator.state = rng_state


def tokens_generated_by(lengths: Sequence[int], share: float) -> int:
    """Tokens a group's rollouts have produced when ``share`` (0 to 1) of its generation time has passed.

    Each rollout produces ``share × max(lengths)`` tokens, capped at its own length (the rule of the
    module docstring): 0 at the start, ``sum(lengths)`` at the end.

    Example:
        >>> tokens_generated_by([300, 100], 0.0), tokens_generated_by([300, 100], 0.25), tokens_generated_by([300, 100], 1.0)
        (0, 150, 400)
    """
    return sum(lengths_generated_by(lengths, share))


def lengths_generated_by(lengths: Sequence[int], share: float) -> list[int]:
    """Each rollout's tokens when ``share`` (0 to 1) of its group's generation time has passed (see above).

    Example:
        >>> lengths_generated_by([300, 100], 0.25)
        [75, 75]
    """
    share = min(max(share, 0.0), 1.0)
    produced = math.floor(share * max(lengths, default=0))
    return [min(length, produced) for length in lengths]
