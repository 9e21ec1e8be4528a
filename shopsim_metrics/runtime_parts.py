"""The parts of one process's monitor, built once from its settings: :func:`build_runtime` gives a frozen
:class:`RuntimeParts`.

Each part owns one piece of a run's state (the module docstring of :mod:`shopsim_metrics.monitor` says which);
the bundle is frozen, so a part is fed but never replaced, and what a resume restores is registered once, here,
over these very objects. Without slime's accounting knobs (``rollout_batch_size`` None) nothing is accounted: no
wave planner, accountant, prompt history or skip tally. The monitor (:class:`~shopsim_metrics.monitor.ShopsimRuntime`)
adds what belongs to the process rather than to the settings: the sinks, the record's writer identity, the
snapshot writer and the locks.

Example:
    >>> from types import SimpleNamespace
    >>> from shopsim_metrics.settings import ShopsimSettings
    >>> from shopsim_metrics.simulator.samples import SimSample as S
    >>> parts = build_runtime(ShopsimSettings.from_args(SimpleNamespace(rollout_batch_size=16, n_samples_per_prompt=2)))
    >>> parts.waves.rollout_batch_size, parts.streak.count, parts.prompts is parts.accountant.prompts
    (16, 0, True)
    >>> parts.judge([S(index=0, reward=1.0), S(index=1, reward=0.0)]).kind
    'spread'
    >>> build_runtime(ShopsimSettings.from_args(SimpleNamespace(n_samples_per_prompt=2))).accountant is None
    True
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Any, Callable

from shopsim_metrics.health.advisories import Advisor
from shopsim_metrics.health.alerts import StreakAlertPolicy
from shopsim_metrics.health.streak import TechnicalStreak
from shopsim_metrics.judging.group_judgement import GroupJudgement, judge_group
from shopsim_metrics.loop.loop_state import LoopState, NoLoopState
from shopsim_metrics.loop.step_number import StepNumbers
from shopsim_metrics.prompts.skip_record import SkipTally
from shopsim_metrics.prompts.value import PromptValueTracker
from shopsim_metrics.run.state import ResumableState, monitor_state
from shopsim_metrics.settings import ShopsimSettings
from shopsim_metrics.step.accounting import StepAccountant
from shopsim_metrics.step.closed_step import StepKnobs
from shopsim_metrics.step.generated_tokens import GeneratedTokens
from shopsim_metrics.waves.wave_planner import WavePlanner


@dataclass(frozen=True, slots=True)
class RuntimeParts:
    """What the four hooks share, each part built once from the settings (see the module docstring)."""

    settings: ShopsimSettings
    """Read and checked once, from ``args``."""
    loop_state: LoopState
    """What the rollout loop says (slime's live step and ``remaining_batch_size``)."""
    steps: StepNumbers
    """The step numbers' one owner: slime's live id, the sample hook's, the accountant's count, the log function's."""
    waves: WavePlanner | None
    """Sizes and records each wave the data source serves; None when nothing is accounted."""
    accountant: StepAccountant | None
    """Each step's ledger, its tokens and its close (:mod:`~shopsim_metrics.step.accounting`); None when nothing is
    accounted."""
    prompts: PromptValueTracker | None
    """The prompt history, the accountant's (restored on a resumed run by :mod:`shopsim_metrics.run.resume`); None
    when not kept (``shopsim_prompt_history_limit: 0``) or nothing is accounted."""
    streak: TechnicalStreak
    """The run's technical streak: fed by every judgement, read by the records, the alerts and the termination."""
    alerts: StreakAlertPolicy
    """One warning per step at most, the error at the limit."""
    advisor: Advisor | None
    """The recent steps' advisories (:mod:`~shopsim_metrics.health.advisories`); None with ``shopsim_alerts`` off."""
    skip_tally: SkipTally | None
    """The skip fields of each record, once a skipping data source attaches; None without a prompt history."""
    resumable: ResumableState
    """What a resume restores and a snapshot saves: the parts above, each registered once
    (:mod:`~shopsim_metrics.run.state`)."""
    judge: Callable[[Any], GroupJudgement]
    """One finished group judged by the settings' rules (:func:`~shopsim_metrics.judging.group_judgement.judge_group`)."""


def build_runtime(settings: ShopsimSettings, *, loop_state: LoopState | None = None) -> RuntimeParts:
    """The parts of a monitor for ``settings``, reading the loop through ``loop_state`` (none: nothing live)."""
    loop_state = loop_state or NoLoopState()
    steps = StepNumbers(loop_state, first=settings.start_rollout_id)
    accounted = settings.rollout_batch_size is not None  # without slime's knobs nothing is accounted
    waves = wave_planner(settings, loop_state, steps) if accounted else None
    prompts = (PromptValueTracker(metadata_key=settings.prompt_key, limit=settings.prompt_history_limit,
                                  table_every=settings.prompts_table_every,
                                  forgetting=settings.prompt_skip_rule.forgetting)
               if accounted and settings.prompt_history_limit else None)
    accountant = step_accountant(settings, loop_state, steps, waves, prompts) if accounted else None
    streak = TechnicalStreak(limit=settings.max_consecutive_failed_groups)
    advisor = Advisor() if settings.alerts else None
    skip_tally = SkipTally(limit=prompts.history.limit) if prompts is not None else None
    return RuntimeParts(
        settings=settings, loop_state=loop_state, steps=steps, waves=waves, accountant=accountant, prompts=prompts,
        streak=streak,
        alerts=StreakAlertPolicy(
            max_consecutive_failed_groups=settings.max_consecutive_failed_groups,
            warn_fraction=settings.alert_warn_fraction, warn_level=settings.alert_warn_level,
            error_level=settings.alert_error_level, enabled=settings.alerts),
        advisor=advisor, skip_tally=skip_tally,
        resumable=monitor_state(streak=streak, prompts=prompts, skips=skip_tally,
                                recent_orders=waves.recent_orders if waves is not None else None, advisor=advisor),
        judge=partial(judge_group, n_samples=settings.n_samples_per_prompt, reward_key=settings.reward_key,
                      success_threshold=settings.success_threshold, success_key=settings.success_metadata_key,
                      unscored_key=settings.unscored_metadata_key))


def wave_planner(settings: ShopsimSettings, loop_state: LoopState, steps: StepNumbers) -> WavePlanner:
    """The run's wave planner, from its settings (``shopsim_wave_fill_probability``, ``shopsim_wave_size_cap``)."""
    assert settings.rollout_batch_size is not None and settings.over_sampling_batch_size is not None
    return WavePlanner(rollout_batch_size=settings.rollout_batch_size,
                       over_sampling_batch_size=settings.over_sampling_batch_size,
                       fill_probability=settings.wave_fill_probability, cap=settings.wave_size_cap, loop_state=loop_state,
                       steps=steps)


def step_accountant(settings: ShopsimSettings, loop_state: LoopState, steps: StepNumbers,
                    waves: WavePlanner | None, prompts: PromptValueTracker | None) -> StepAccountant:
    """The run's accountant, from slime's knobs and the settings, with the prompt tracker (None:
    ``shopsim_prompt_history_limit`` is 0) and its count of every generated token."""
    assert settings.rollout_batch_size is not None and settings.over_sampling_batch_size is not None
    knobs = StepKnobs(
        rollout_batch_size=settings.rollout_batch_size, over_sampling_batch_size=settings.over_sampling_batch_size,
        n_samples_per_prompt=settings.n_samples_per_prompt, global_batch_size=settings.global_batch_size,
        max_consecutive_failed_groups=settings.max_consecutive_failed_groups)
    return StepAccountant(
        knobs,
        clock=getattr(loop_state, "clock", None),  # a simulated loop's own clock, else monotonic
        prompts=prompts, tokens=GeneratedTokens(continues=settings.partial_rollout),
        steps=steps, waves=waves)
