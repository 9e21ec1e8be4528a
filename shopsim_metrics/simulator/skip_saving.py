"""What skipping prompts before generation does: the same pool run without and with it, side by side.

The runs share one :class:`~shopsim_metrics.simulator.config.SimConfig` over a prompt pool with temporal
consistency (:mod:`shopsim_metrics.simulator.epochs`) and the same seeds; only ``prompt_skip`` differs
(and ``wave_size`` when both are compared). The figure decided on is the one a live run records:

- **tokens per informative group**: every token generated (the records' ``total_token_count``,
  aborted groups included) / trained groups with spread (``trained``, not ``fallback``): what one unit
  of learning signal costs in generation. A skipped prompt is never counted as saved generation: it is
  replaced by another draw that is generated, and what skipping does shows in this figure only;
- **informative share**: those groups / the train batch;
- **P(second wave)**: the share of steps that needed more than one wave;
- **aborted tokens per step**: generation the step paid for and discarded (skipping raises the
  informative rate, fixed waves then fill the batch early, and the surplus is aborted).

Over several seeds the totals are pooled (the sum of tokens over the sum of informative groups), so no
seed is chosen. ``demo --prompt-skip`` and ``tune --prompt-skip`` print :func:`format_saving`.

Example:
    >>> cfg = SimConfig(steps=30, prompt_pool=64, skill_start=0.0, skill_end=0.0, difficulty_spread=6.0,
    ...                 partial_credit_rate=0.0, technical_rate=0.0)
    >>> saving = compare_skipping(cfg, "greso", seeds=(0,))
    >>> saving.skipping.skipped_prompts > 0 == saving.off.skipped_prompts, saving.token_ratio > 1
    (True, True)
"""

from __future__ import annotations

import contextlib
import logging
from dataclasses import dataclass, replace
from typing import Iterable, Iterator

from shopsim_metrics.simulator.config import SimConfig
from shopsim_metrics.simulator.loop import simulate
from shopsim_metrics.tables import Column, format_table

DEFAULT_SEEDS = (0, 1, 2)
"""The seeds a comparison pools when none are given."""


@dataclass(frozen=True)
class SkipRun:
    """The pooled totals of one setting's runs (see the module docstring)."""

    steps: int
    total_tokens: int  # every token generated, aborted groups included (total_token_count)
    aborted_tokens: int
    informative_groups: int  # trained, not fallback
    train_groups: int
    waves: int
    multi_wave_steps: int
    zero_std_groups: int
    judged_groups: int
    skipped_prompts: int

    @property
    def tokens_per_informative_group(self) -> float | None:
        return self.total_tokens / self.informative_groups if self.informative_groups else None

    @property
    def informative_share(self) -> float | None:
        return self.informative_groups / self.train_groups if self.train_groups else None

    @property
    def waves_per_step(self) -> float | None:
        return self.waves / self.steps if self.steps else None

    @property
    def second_wave_probability(self) -> float | None:
        return self.multi_wave_steps / self.steps if self.steps else None

    @property
    def aborted_tokens_per_step(self) -> float | None:
        return self.aborted_tokens / self.steps if self.steps else None

    @property
    def zero_std_share(self) -> float | None:
        return self.zero_std_groups / self.judged_groups if self.judged_groups else None


@dataclass(frozen=True)
class SkipComparison:
    """The same pool and seeds without skipping (``off``) and with it (``skipping``, by ``mode``)."""

    off: SkipRun
    skipping: SkipRun
    mode: str
    seeds: tuple[int, ...] = DEFAULT_SEEDS

    @property
    def token_ratio(self) -> float | None:
        """Tokens per informative group without skipping / with it (> 1: skipping costs less; < 1: more)."""
        a, b = self.off.tokens_per_informative_group, self.skipping.tokens_per_informative_group
        return a / b if a is not None and b else None


def run_totals(config: SimConfig, seeds: Iterable[int] | None = None) -> SkipRun:
    """Simulate ``config`` (tuning mode: no sinks) at each seed (default: its own) and pool the totals."""
    totals = dict(steps=0, total_tokens=0, aborted_tokens=0, informative_groups=0, train_groups=0, waves=0,
                  multi_wave_steps=0, zero_std_groups=0, judged_groups=0, skipped_prompts=0)
    for seed in (config.seed,) if seeds is None else seeds:
        with alerts_silenced():  # the comparison's alerts are the demo's or tune's own run's, already shown
            records = simulate(replace(config, seed=seed)).records
        for r in records:
            totals["steps"] += 1
            totals["total_tokens"] += r.total_token_count or 0
            totals["aborted_tokens"] += r.aborted_token_count or 0
            totals["informative_groups"] += r.train_group_count - r.fallback_group_count
            totals["train_groups"] += r.train_group_count
            totals["waves"] += r.wave_count
            totals["multi_wave_steps"] += r.wave_count > 1
            totals["zero_std_groups"] += r.zero_std_group_count
            totals["judged_groups"] += r.accepted_group_count
            totals["skipped_prompts"] += r.skipped_prompt_count or 0
    return SkipRun(**totals)


def compare_skipping(config: SimConfig, mode: str = "greso", *, seeds: Iterable[int] = DEFAULT_SEEDS) -> SkipComparison:
    """``config`` (it needs a ``prompt_pool``) run with ``prompt_skip`` off and ``mode``, at the same seeds."""
    seeds = tuple(seeds)
    return SkipComparison(off=run_totals(replace(config, prompt_skip="off"), seeds),
                          skipping=run_totals(replace(config, prompt_skip=mode), seeds), mode=mode, seeds=seeds)


@contextlib.contextmanager
def alerts_silenced() -> Iterator[None]:
    """The project's logger quiet below ERROR for the duration (the simulated runs' alerts)."""
    log = logging.getLogger("shopsim_metrics")
    level = log.level
    log.setLevel(logging.ERROR)
    try:
        yield
    finally:
        log.setLevel(level)


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


_SAVING_COLUMNS = (Column("skip", align="<"), Column("tokens/inf.grp", spec=",.0f"), Column("inf.share", spec=".3f"),
                   Column("P(2nd)", spec=".3f"), Column("aborted.tok", spec=",.0f"), Column("skipped"))
"""The comparison's columns, one row per setting (skipping off, then on)."""


def format_saving(saving: SkipComparison, over_sampling_batch_size: int, *, wave_size: str = "fixed") -> str:
    """The comparison as a few lines: the headline ratio, then one row per setting (a table, indented)."""
    def number(value: float | None, form: str) -> str:
        return "-" if value is None else format(value, form)

    def row(name: str, run: SkipRun) -> list[object]:
        return [name, run.tokens_per_informative_group, run.informative_share, run.second_wave_probability,
                run.aborted_tokens_per_step, run.skipped_prompts]

    ratio = saving.token_ratio
    verdict = ("-" if ratio is None else f"{ratio:.2f}x fewer with skipping" if ratio >= 1
               else f"{1 / ratio:.2f}x more with skipping")
    where = f"seeds {', '.join(map(str, saving.seeds))}; "
    table = format_table(_SAVING_COLUMNS, [row("off", saving.off), row(saving.mode, saving.skipping)])
    return "\n".join([
        f"prompt skipping ({saving.mode}) on the same pool and seeds ({where}over_sampling_batch_size "
        f"{over_sampling_batch_size}, {wave_size} waves; zero-std {number(saving.off.zero_std_share, '.2f')} "
        f"without skipping): total tokens per informative trained group, aborted generation included: {verdict}",
        *("  " + line for line in table.splitlines()),
    ])
