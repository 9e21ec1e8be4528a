"""What skipping prompts before generation saves: the same pool run without and with GRESO's rule.

Both runs use one :class:`~shopsim_metrics.simulator.config.SimConfig` over a prompt pool with
temporal consistency (:mod:`shopsim_metrics.simulator.epochs`); only ``prompt_skip`` differs. The
figures a user decides on, per run:

- **tokens per informative group**: generated tokens / trained groups with spread (``trained``, not
  ``fallback``): what one unit of learning signal costs in generation;
- **informative share**: those groups / the train batch (skipping must not lower it);
- **waves per step** (skipping must not add waves).

``tune --prompt-skip greso`` prints :func:`format_saving` beside its over-sampling table, on a pool
whose zero-std share is matched to the rate it tunes for (:func:`pool_for_zero_std_rate`).

Example:
    >>> cfg = SimConfig(steps=30, prompt_pool=64, skill_start=0.0, skill_end=0.0, difficulty_spread=6.0,
    ...                 partial_credit_rate=0.0, technical_rate=0.0)
    >>> saving = compare_skipping(cfg)
    >>> saving.greso.skipped_prompts > 0 == saving.off.skipped_prompts, saving.token_ratio > 1
    (True, True)
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from shopsim_metrics.simulator.config import SimConfig
from shopsim_metrics.simulator.loop import simulate


@dataclass(frozen=True)
class SkipRun:
    """One run's totals (see the module docstring)."""

    steps: int
    generated_tokens: int
    informative_groups: int  # trained, not fallback
    train_groups: int
    waves: int
    zero_std_groups: int
    judged_groups: int
    skipped_prompts: int

    @property
    def tokens_per_informative_group(self) -> float | None:
        return self.generated_tokens / self.informative_groups if self.informative_groups else None

    @property
    def informative_share(self) -> float | None:
        return self.informative_groups / self.train_groups if self.train_groups else None

    @property
    def waves_per_step(self) -> float | None:
        return self.waves / self.steps if self.steps else None

    @property
    def zero_std_share(self) -> float | None:
        return self.zero_std_groups / self.judged_groups if self.judged_groups else None


@dataclass(frozen=True)
class SkipComparison:
    off: SkipRun
    greso: SkipRun

    @property
    def token_ratio(self) -> float | None:
        """Tokens per informative group without skipping / with it (> 1: skipping saves)."""
        a, b = self.off.tokens_per_informative_group, self.greso.tokens_per_informative_group
        return a / b if a is not None and b else None


def run_totals(config: SimConfig) -> SkipRun:
    """Simulate ``config`` (tuning mode: no sinks) and sum what the comparison reads."""
    records = simulate(config).records
    return SkipRun(
        steps=len(records),
        generated_tokens=sum(r.generated_token_count for r in records),
        informative_groups=sum(r.train_group_count - r.fallback_group_count for r in records),
        train_groups=sum(r.train_group_count for r in records),
        waves=sum(r.wave_count for r in records),
        zero_std_groups=sum(r.zero_std_group_count for r in records),
        judged_groups=sum(r.accepted_group_count for r in records),
        skipped_prompts=sum(r.skipped_prompt_count or 0 for r in records),
    )


def compare_skipping(config: SimConfig) -> SkipComparison:
    """``config`` run with ``prompt_skip`` off and greso (it needs a ``prompt_pool``)."""
    return SkipComparison(off=run_totals(replace(config, prompt_skip="off")),
                          greso=run_totals(replace(config, prompt_skip="greso")))


def pool_for_zero_std_rate(base: SimConfig, zero_std_rate: float, *, pool: int = 256, steps: int = 60,
                           rounds: int = 8) -> SimConfig:
    """A pool config (skill 0, no partial credit) whose run without skipping is zero-std at about ``zero_std_rate``.

    The difficulty spread is found by bisection (a wider spread: more prompts far from the policy's
    skill, all-pass or all-fail, visit after visit).
    """
    low, high = 0.0, 20.0
    config = replace(base, steps=steps, prompt_pool=pool, skill_start=0.0, skill_end=0.0, partial_credit_rate=0.0,
                     zero_std_rate=None, prompt_skip="off")
    for _ in range(rounds):
        middle = (low + high) / 2
        share = run_totals(replace(config, difficulty_spread=middle)).zero_std_share or 0.0
        low, high = (middle, high) if share < zero_std_rate else (low, middle)
    return replace(config, difficulty_spread=(low + high) / 2)


def format_saving(saving: SkipComparison, over_sampling_batch_size: int) -> str:
    """The saving as three lines beside tune's table."""
    def row(name: str, run: SkipRun) -> str:
        tokens = run.tokens_per_informative_group
        share, waves = run.informative_share, run.waves_per_step
        return (f"  {name:<6} {'-' if tokens is None else f'{tokens:,.0f}':>12}  "
                f"{'-' if share is None else f'{share:.3f}':>11}  {'-' if waves is None else f'{waves:.2f}':>10}  "
                f"{run.skipped_prompts:>8}")
    ratio = saving.token_ratio
    return "\n".join([
        f"prompt skipping (GRESO) at over_sampling_batch_size {over_sampling_batch_size}, on a prompt pool zero-std at "
        f"{saving.off.zero_std_share or 0:.2f} without skipping: tokens per informative group "
        + ("-" if ratio is None else f"{ratio:.2f}x lower with skipping"),
        f"  {'skip':<6} {'tokens/inf.':>12}  {'inf. share':>11}  {'waves/step':>10}  {'skipped':>8}",
        row("off", saving.off),
        row("greso", saving.greso),
    ])
