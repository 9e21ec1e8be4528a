"""What a simulation runs with: slime's knobs, response tokens and latency, the reward model, failures.

One frozen :class:`SimConfig` holds every input of the simulator (seeded, so a config and a seed
give the same run). Two reward models are available:

- the **prompt model** (default): each prompt has a difficulty (normal, ``difficulty_spread``), the
  policy a skill that follows a learning curve over steps, and a sibling succeeds with probability
  ``sigmoid(skill(step) - difficulty)``; a failing sibling earns partial credit with probability
  ``partial_credit_rate`` (non-binary rewards, so a group can be zero-std at an intermediate value);
- the **rates model** (tuning): set ``zero_std_rate`` and each judged group is technical with
  probability ``technical_rate``, zero-std with probability ``zero_std_rate``, else it has spread.

Technical failures come at ``technical_rate`` per group, and at a burst's rate during its steps;
``max_technical_streak`` caps the consecutive technical groups the source emits (a service that
recovers briefly), which keeps a burst below the termination limit when wanted.

With ``agent`` (an :class:`AgentModel`) every rollout is an agent episode (turns, tool calls, observations:
:mod:`~shopsim_metrics.simulator.simulated_episodes`) and every technical group an environment failure: one episode's
tool call failed, with a cause drawn from ``agent.failure_causes`` (or the burst's ``cause``).

Example:
    >>> cfg = SimConfig(steps=5, bursts=(FailureBurst(step=2, rate=0.9),))
    >>> (cfg.over_sampling_batch_size, cfg.technical_rate_at(2), cfg.technical_rate_at(3))
    (32, 0.9, 0.02)
    >>> cfg.to_args().shopsim_max_consecutive_failed_groups
    8
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from types import SimpleNamespace
from typing import Any

from shopsim_metrics.settings import DEFAULTS, PREFIX, PROMPT_SKIP_MODES, WAVE_SIZE_MODES, ShopsimSettings
from shopsim_metrics.general.plain_values import is_int

ROLLOUT_MODES = ("sync", "fully-async")
"""Which slime rollout the simulator runs: the synchronous loop (waves, ``remaining``, abort at the
step's end) or the fully-async pool (:mod:`shopsim_metrics.simulator.fully_async_pool`)."""
PREDICTIVE_KNOBS = ("prompt_skip_threshold", "prompt_skip_forgetting", "prompt_skip_min_yield",
                    "prompt_skip_max_lost_signal", "prompt_skip_probe_every")
"""The predictive rule's knobs a simulated run may set: fields of :class:`SimConfig`, each the setting ``shopsim_<knob>``."""


@dataclass(frozen=True)
class FailureBurst:
    """A scheduled burst of technical failures: ``rate`` per group during ``steps`` steps from ``step``;
    ``cause``: with agent episodes, the environment failure's cause in the burst (None: drawn as outside it)."""

    step: int
    rate: float = 0.9
    steps: int = 1
    cause: str | None = None

    def covers(self, step: int) -> bool:
        return self.step <= step < self.step + self.steps


DEFAULT_FAILURE_CAUSES: tuple[tuple[str, float], ...] = (
    ("ToolTimeout: search_products", 0.4),
    ("ConnectionError: catalogue service unavailable", 0.25),
    ("ToolError: view_item returned HTTP 500", 0.2),
    ("EnvironmentError: cart session expired", 0.15),
)
"""The causes of the simulated environment failures, with their weights."""


@dataclass(frozen=True)
class ToolModel:
    """One tool of a simulated agent: how often episodes call it (``weight``), how slow it is against the episodes'
    drawn call seconds (``latency``: a factor), and the chance that a call of it fails without ending the episode:
    the environment's (``error_rate``: the tool answers an error) or the model's (``model_error_rate``: an unknown
    item id, arguments that do not parse). The calls go to ``metadata["shopsim_tool_calls"]``."""

    name: str
    weight: float = 1.0
    latency: float = 1.0
    error_rate: float = 0.0
    model_error_rate: float = 0.0

    def __post_init__(self) -> None:
        if not (isinstance(self.name, str) and self.name.strip()):
            raise ValueError(f"ToolModel.name must be a non-empty string; got {self.name!r}")
        for name in ("weight", "latency"):
            value = getattr(self, name)
            if not (isinstance(value, (int, float)) and 0 < value < math.inf):
                raise ValueError(f"ToolModel.{name} must be a finite number > 0; got {value!r}")
        rates = (self.error_rate, self.model_error_rate)
        if not all(isinstance(rate, (int, float)) and 0 <= rate <= 1 for rate in rates) or sum(rates) > 1:
            raise ValueError(f"ToolModel error_rate and model_error_rate must be in [0, 1] and add up to at most 1; "
                             f"got {self.error_rate!r} and {self.model_error_rate!r}")


DEFAULT_TOOLS: tuple[ToolModel, ...] = (
    ToolModel("search_products", weight=0.35, latency=1.5, error_rate=0.01),
    ToolModel("view_item", weight=0.3, latency=0.6, model_error_rate=0.08),
    ToolModel("add_to_cart", weight=0.2, latency=0.5, model_error_rate=0.04),
    ToolModel("checkout", weight=0.15, latency=1.0, error_rate=0.02),
)
"""A shop's tools: the search slowest, the model's mistakes in the item ids it names (their latencies' weighted
mean is about 1: ``tool_seconds_median`` stays the calls' median scale)."""


@dataclass(frozen=True)
class AgentModel:
    """What an agent episode looks like: turns, tool calls' seconds and output, failures' causes
    (:mod:`shopsim_metrics.simulator.simulated_episodes`); ``SimConfig.agent``.

    Example:
        >>> AgentModel(max_turns=0)
        Traceback (most recent call last):
        ...
        ValueError: AgentModel.max_turns must be a positive integer; got 0
    """

    turns_mean: float = 6.0  # mean turns per episode (before the max_turns cap)
    max_turns: int = 10  # an episode needing more stops here, truncated
    tool_seconds_median: float = 2.0  # seconds per tool call: lognormal
    tool_seconds_sigma: float = 0.8
    observation_tokens_median: float = 150.0  # tokens of a tool call's output: lognormal
    observation_tokens_sigma: float = 0.7
    failure_causes: tuple[tuple[str, float], ...] = DEFAULT_FAILURE_CAUSES  # (cause, weight) of environment failures
    round_number: bool = True  # leave metadata["round_number"] (else the turns are only in loss_mask)
    tools: tuple[ToolModel, ...] = DEFAULT_TOOLS  # the tools called, each its own latency and error rates (() none)

    def __post_init__(self) -> None:
        if not is_int(self.max_turns) or self.max_turns < 1:
            raise ValueError(f"AgentModel.max_turns must be a positive integer; got {self.max_turns!r}")
        if not (isinstance(self.turns_mean, (int, float)) and 1.0 <= self.turns_mean <= 1000.0):
            raise ValueError(f"AgentModel.turns_mean must be a number from 1 to 1000; got {self.turns_mean!r}")
        for name in ("tool_seconds_median", "observation_tokens_median"):
            value = getattr(self, name)
            if not (isinstance(value, (int, float)) and 0 < value < math.inf):
                raise ValueError(f"AgentModel.{name} must be a finite number > 0; got {value!r}")
        for name in ("tool_seconds_sigma", "observation_tokens_sigma"):
            value = getattr(self, name)
            if not (isinstance(value, (int, float)) and 0 <= value <= 5):
                raise ValueError(f"AgentModel.{name} must be a number from 0 to 5; got {value!r}")
        causes = self.failure_causes
        if (not causes or any(not (isinstance(c, str) and c and isinstance(w, (int, float)) and w > 0)
                              for c, w in causes)):
            raise ValueError(f"AgentModel.failure_causes must be (cause, weight > 0) pairs, at least one; got {causes!r}")
        if not all(isinstance(tool, ToolModel) for tool in self.tools) or len({t.name for t in self.tools}) < len(self.tools):
            raise ValueError(f"AgentModel.tools must be ToolModels with distinct names; got {self.tools!r}")


@dataclass(frozen=True)
class SimConfig:
    """Every input of a simulated run (see the module docstring)."""

    # slime's knobs
    rollout_batch_size: int = 16
    n_samples_per_prompt: int = 8
    over_sampling_batch_size: int = 32
    global_batch_size: int = 64
    steps: int = 40
    seed: int = 0
    # latency: one group (all siblings generated and scored) takes a lognormal time
    latency_median: float = 30.0  # seconds
    latency_sigma: float = 0.5  # lognormal shape
    latency_tick: float = 1.0  # completions within one tick come back in one batch (asyncio.wait)
    max_concurrent_groups: int | None = 48  # groups generating at once (None: no limit); others queue
    # response tokens (simulator/token_model.py): lognormal per rollout, longer for hard prompts; a group
    # takes seconds_per_token x its slowest rollout's tokens (None: the lognormal latency above instead)
    response_length_median: float = 700.0  # tokens of a rollout of a prompt of average hardness
    response_length_sigma: float = 0.6  # lognormal shape: the long tail of agent trajectories
    response_length_max: int = 8192  # slime's --rollout-max-response-len
    hard_prompt_length_slope: float = 0.3  # log-length per unit of prompt difficulty
    seconds_per_token: float | None = 0.02
    # prompt reward model
    skill_start: float = -0.5
    skill_end: float = 1.5
    learning_steps: float = 40.0  # time constant of the learning curve, in steps
    difficulty_spread: float = 1.5
    partial_credit_rate: float = 0.3  # a failing sibling earns partial credit with this probability
    partial_credit_levels: tuple[float, ...] = (0.25, 0.5, 0.75)
    success_reward: float = 1.0
    # epochs: a finite pool of prompts revisited epoch after epoch (None: a fresh prompt per group)
    prompt_pool: int | None = None
    difficulty_drift: float = 0.0  # per step, each pool prompt's difficulty takes a normal step of this size
    # skipping prompts before generation (needs prompt_pool): "off", "greso" or "predictive", through the real
    # data source; the predictive rule's knobs, each the setting shopsim_<field> (None: the setting's default)
    prompt_skip: str = "off"
    prompt_skip_threshold: float | None = None
    prompt_skip_forgetting: float | None = None
    prompt_skip_min_yield: float | None = None
    prompt_skip_max_lost_signal: float | None = None
    prompt_skip_probe_every: int | None = None
    # waves: "fixed" (over_sampling_batch_size per wave) or "adaptive" (sized by the real data source to fill
    # the batch with wave_fill_probability, at most wave_size_cap groups; None: over_sampling_batch_size)
    wave_size: str = "fixed"
    wave_fill_probability: float = DEFAULTS["shopsim_wave_fill_probability"]
    wave_size_cap: int | None = None
    # rates reward model (tuning): when set, replaces the prompt model
    zero_std_rate: float | None = None
    # technical failures
    technical_rate: float = 0.02
    bursts: tuple[FailureBurst, ...] = field(default_factory=tuple)
    max_technical_streak: int | None = None
    max_consecutive_failed_groups: int = DEFAULTS["shopsim_max_consecutive_failed_groups"]
    # slime's rollout: the synchronous loop, or the fully-async pool (max_concurrent_groups groups in flight)
    rollout: str = "sync"
    async_zero_std_drop_limit: int | None = None  # shopsim_async_zero_std_drop_limit (None: rollout_batch_size)
    async_abort_rate: float = 0.0  # fully-async: a generation is aborted part-way and put back with this probability
    # agent episodes (simulator/simulated_episodes.py): turns, tool calls and observations per rollout; every technical group
    # is then an environment failure (None: single-turn rollouts)
    agent: AgentModel | None = None

    def __post_init__(self) -> None:
        for name in ("rollout_batch_size", "n_samples_per_prompt", "over_sampling_batch_size", "global_batch_size"):
            value = getattr(self, name)
            if not is_int(value) or value < 1:
                raise ValueError(f"SimConfig.{name} must be a positive integer; got {value!r}")
        if self.steps < 0:
            raise ValueError(f"SimConfig.steps must be >= 0; got {self.steps}")
        for name in ("latency_median", "latency_tick"):
            if not getattr(self, name) > 0:
                raise ValueError(f"SimConfig.{name} must be > 0; got {getattr(self, name)!r}")
        if not self.response_length_median >= 1 or not self.response_length_sigma >= 0:
            raise ValueError(f"SimConfig.response_length_median must be >= 1 and response_length_sigma >= 0; got "
                             f"{self.response_length_median!r}, {self.response_length_sigma!r}")
        if not isinstance(self.response_length_max, int) or self.response_length_max < 1:
            raise ValueError(f"SimConfig.response_length_max must be a positive integer; got {self.response_length_max!r}")
        if self.seconds_per_token is not None and not self.seconds_per_token > 0:
            raise ValueError(f"SimConfig.seconds_per_token must be > 0 or None; got {self.seconds_per_token!r}")
        if self.max_concurrent_groups is not None and self.max_concurrent_groups < 1:
            raise ValueError(f"SimConfig.max_concurrent_groups must be >= 1 or None; got {self.max_concurrent_groups!r}")
        rates = [("technical_rate", self.technical_rate), ("partial_credit_rate", self.partial_credit_rate)]
        rates += [(f"bursts[{i}].rate", b.rate) for i, b in enumerate(self.bursts)]
        if self.zero_std_rate is not None:
            rates.append(("zero_std_rate", self.zero_std_rate))
        for name, rate in rates:
            if not (isinstance(rate, (int, float)) and 0.0 <= rate <= 1.0):
                raise ValueError(f"SimConfig.{name} must be a probability in [0, 1]; got {rate!r}")
        if self.zero_std_rate is not None and self.zero_std_rate + self.technical_rate > 1.0 + 1e-12:
            raise ValueError(f"SimConfig.zero_std_rate + technical_rate must be <= 1; got "
                             f"{self.zero_std_rate} + {self.technical_rate}")
        if any(not level < self.success_reward for level in self.partial_credit_levels):
            raise ValueError(f"SimConfig.partial_credit_levels must all be below success_reward "
                             f"({self.success_reward}); got {self.partial_credit_levels}")
        if self.prompt_pool is not None and (not is_int(self.prompt_pool) or self.prompt_pool < 1):
            raise ValueError(f"SimConfig.prompt_pool must be a positive integer or None; got {self.prompt_pool!r}")
        if not (isinstance(self.difficulty_drift, (int, float)) and self.difficulty_drift >= 0):
            raise ValueError(f"SimConfig.difficulty_drift must be a number >= 0; got {self.difficulty_drift!r}")
        if self.prompt_skip not in PROMPT_SKIP_MODES:
            raise ValueError(f"SimConfig.prompt_skip must be one of {', '.join(PROMPT_SKIP_MODES)}; "
                             f"got {self.prompt_skip!r}")
        if self.prompt_skip != "off" and self.prompt_pool is None:
            raise ValueError("SimConfig.prompt_skip needs a prompt_pool: skipping learns from prompts seen again")
        if self.wave_size not in WAVE_SIZE_MODES:
            raise ValueError(f"SimConfig.wave_size must be one of {', '.join(WAVE_SIZE_MODES)}; got {self.wave_size!r}")
        if self.rollout not in ROLLOUT_MODES:
            raise ValueError(f"SimConfig.rollout must be one of {', '.join(ROLLOUT_MODES)}; got {self.rollout!r}")
        if self.rollout == "fully-async":
            if self.max_concurrent_groups is None:
                raise ValueError("SimConfig.rollout fully-async needs max_concurrent_groups: the pool's size")
            if self.prompt_pool is not None or self.wave_size != "fixed":
                raise ValueError("SimConfig.rollout fully-async models fresh prompts only (no prompt_pool, so no "
                                 "prompt_skip) and has no waves (wave_size fixed)")
        if not (isinstance(self.async_abort_rate, (int, float)) and 0.0 <= self.async_abort_rate < 1.0):
            raise ValueError(f"SimConfig.async_abort_rate must be in [0, 1); got {self.async_abort_rate!r}")
        if self.agent is not None:
            if not isinstance(self.agent, AgentModel):
                raise ValueError(f"SimConfig.agent must be an AgentModel or None; got {self.agent!r}")
            if self.seconds_per_token is None or self.rollout != "sync":
                raise ValueError("SimConfig.agent models episodes on the synchronous loop with token timing: it needs "
                                 "seconds_per_token (an episode's time is its tokens' plus its tool calls') and "
                                 f"rollout sync; got seconds_per_token={self.seconds_per_token!r}, rollout={self.rollout!r}")
        if self.max_technical_streak is not None and self.max_technical_streak < 1:
            raise ValueError(f"SimConfig.max_technical_streak must be >= 1 or None; got {self.max_technical_streak!r}")
        ShopsimSettings.from_args(self.to_args())  # the knobs are checked where the hooks check them

    # --- derived ---------------------------------------------------------------------------------
    def technical_rate_at(self, step: int) -> float:
        """The technical-failure probability per group at ``step`` (the highest burst covering it wins)."""
        rate = self.technical_rate
        for burst in self.bursts:
            if burst.covers(step):
                rate = max(rate, burst.rate)
        return rate

    def failure_cause_at(self, step: int) -> str | None:
        """The environment failure's cause of the burst covering ``step`` (the highest rate wins), else None."""
        covering = [burst for burst in self.bursts if burst.covers(step)]
        return max(covering, key=lambda burst: burst.rate).cause if covering else None

    def skill_at(self, step: int) -> float:
        """The policy's skill at ``step``: from ``skill_start`` towards ``skill_end`` (exponential approach)."""
        progress = 1.0 - math.exp(-step / self.learning_steps) if self.learning_steps > 0 else 1.0
        return self.skill_start + (self.skill_end - self.skill_start) * progress

    def with_(self, **changes: Any) -> "SimConfig":
        """A copy with some fields changed (validated again)."""
        return replace(self, **changes)

    def to_args(self, **extra: Any) -> SimpleNamespace:
        """slime-like ``args`` for the hooks: slime's knobs plus the ``shopsim_*`` settings, plus ``extra``."""
        args = SimpleNamespace(
            rollout_batch_size=self.rollout_batch_size,
            n_samples_per_prompt=self.n_samples_per_prompt,
            over_sampling_batch_size=self.over_sampling_batch_size,
            global_batch_size=self.global_batch_size,
            reward_key=None,
            shopsim_max_consecutive_failed_groups=self.max_consecutive_failed_groups,
        )
        if self.prompt_skip != "off":
            args.shopsim_prompt_skip = self.prompt_skip
            args.rollout_seed = self.seed
            for knob in PREDICTIVE_KNOBS:
                setattr(args, PREFIX + knob, getattr(self, knob))
        if self.wave_size != "fixed":
            args.shopsim_wave_size = self.wave_size
            args.shopsim_wave_fill_probability = self.wave_fill_probability
            args.shopsim_wave_size_cap = self.wave_size_cap
        if self.rollout == "fully-async":
            args.shopsim_async_zero_std_drop_limit = self.async_zero_std_drop_limit
            args.sglang_server_concurrency = self.max_concurrent_groups
        for key, value in extra.items():
            setattr(args, key, value)
        return args
