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
  informative rate, fixed waves then fill the batch early, and the surplus is aborted);
- **zero-std persistence** without skipping: P(zero-std | zero-std at the prompt's last visit), what
  decides whether skipping can pay at all (:func:`~shopsim_metrics.health.advisories.skipping_pays`).

``tune --prompt-skip`` has no pool of its own (its model draws each group zero-std independently, so
skipping cannot save there): it runs :func:`pool_for_zero_std_rate`'s pool, whose zero-std follows the
prompt, and says so (:func:`format_saving`'s ``pool``), with the verdict of the run's own persistence
when ``--from`` measured it (:func:`skipping_verdict`).

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
    repeat_zero_std_groups: int = 0  # zero-std again at a prompt zero-std at its last visit
    skippable_groups: int = 0  # judged at a prompt zero-std at its last visit

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

    @property
    def zero_std_persistence(self) -> float | None:
        return self.repeat_zero_std_groups / self.skippable_groups if self.skippable_groups else None


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
                  multi_wave_steps=0, zero_std_groups=0, judged_groups=0, skipped_prompts=0,
                  repeat_zero_std_groups=0, skippable_groups=0)
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
            totals["repeat_zero_std_groups"] += r.repeat_zero_std_group_count or 0
            totals["skippable_groups"] += r.skippable_group_count or 0
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


def format_saving(saving: SkipComparison, over_sampling_batch_size: int, *, wave_size: str = "fixed",
                  pool: str = "the same pool", assumed: bool = False) -> str:
    """The comparison as a few lines: the headline ratio, then one row per setting (a table, indented).

    ``pool`` names what was run: the run's own pool (the demo's), or the one a caller assumed (tune's); ``assumed``:
    the ratio is that pool's, not the run's, and the headline says so (the verdict is :func:`skipping_verdict`'s).
    """
    def number(value: float | None, form: str) -> str:
        return "-" if value is None else format(value, form)

    def row(name: str, run: SkipRun) -> list[object]:
        return [name, run.tokens_per_informative_group, run.informative_share, run.second_wave_probability,
                run.aborted_tokens_per_step, run.skipped_prompts]

    where = f"seeds {', '.join(map(str, saving.seeds))}; "
    table = format_table(_SAVING_COLUMNS, [row("off", saving.off), row(saving.mode, saving.skipping)])
    tail = " on that pool (whether your run is such a pool: the verdict below)" if assumed else ""
    return "\n".join([
        f"prompt skipping ({saving.mode}) on {pool}, the same seeds ({where}over_sampling_batch_size "
        f"{over_sampling_batch_size}, {wave_size} waves; zero-std {number(saving.off.zero_std_share, '.2f')}, "
        f"persistence {number(saving.off.zero_std_persistence, '.2f')} without skipping): total tokens per "
        f"informative trained group, aborted generation included: {ratio_text(saving.token_ratio)}{tail}",
        *("  " + line for line in table.splitlines()),
    ])


def ratio_text(ratio: float | None) -> str:
    """``1.22x fewer with skipping``, ``1.10x more with skipping``, ``no fewer with skipping`` (1.00x) or ``-``.

    Example:
        >>> ratio_text(1.2249), ratio_text(0.9), ratio_text(1.001), ratio_text(None)
        ('1.22x fewer with skipping', '1.11x more with skipping', 'no fewer with skipping', '-')
    """
    if ratio is None:
        return "-"
    if round(ratio, 2) == 1.0:
        return "no fewer with skipping"
    return f"{ratio:.2f}x fewer with skipping" if ratio > 1 else f"{1 / ratio:.2f}x more with skipping"


ASSUMED_POOL = ("an assumed pool of {prompts} simulated prompts whose zero-std follows the prompt, not the independent "
                "draws of the table above (where skipping cannot save)")
"""How ``tune --prompt-skip`` names the pool its comparison ran (:func:`pool_for_zero_std_rate`'s)."""

VERDICT = "verdict: "
"""The start of ``tune --prompt-skip``'s one verdict line (:func:`skipping_verdict`)."""


def skipping_decision(persistence: float | None, share: float | None, ratio: float | None = None) -> bool | None:
    """Whether to turn skipping on: True (the run's zero-std follows the prompt, by the advisory's rule
    :func:`~shopsim_metrics.health.advisories.skipping_pays`, and the pool where it does saves tokens), False (either
    fails), None (no run measured: unknown). ``ratio``: the assumed pool's tokens per informative group off / on
    (None: not compared).

    Example:
        >>> skipping_decision(0.9, 0.5, 1.3), skipping_decision(0.9, 0.5, 0.95), skipping_decision(0.6, 0.5, 1.3)
        (True, False, False)
        >>> skipping_decision(None, None, 1.3), skipping_decision(None, 0.5, 1.3)
        (None, False)
    """
    from shopsim_metrics.health.advisories import skipping_pays

    if share is None:
        return None
    saves = ratio is None or round(ratio, 2) > 1.0
    return skipping_pays(persistence, share) and saves


def skipping_verdict(persistence: float | None, share: float | None, ratio: float | None = None) -> str:
    """The one line that says whether to turn skipping on (:func:`skipping_decision`), and why: the run's measured
    zero-std ``persistence`` and ``share`` against the advisory's rule, beside the assumed pool's ``ratio``.

    Example:
        >>> print(skipping_verdict(0.9, 0.5, 1.3))
        verdict: skipping pays on your run: its zero-std persistence 0.90 at a zero-std share of 0.50 is at least (1 + 0.50) / 2 = 0.75 (zero-std follows the prompt), and on a pool where it does skipping gave 1.30x fewer tokens per informative trained group (docs §3.2)
        >>> print(skipping_verdict(0.6, 0.5, 1.3))
        verdict: skipping does not pay on your run, over-sampling does: its zero-std persistence 0.60 at a zero-std share of 0.50 is below (1 + 0.50) / 2 = 0.75 (its zero-std is mostly the luck of the draw); the pool's 1.30x above holds only where zero-std follows the prompt (docs §3.2)
    """
    decision = skipping_decision(persistence, share, ratio)
    fewer = "" if ratio is None else f" {ratio_text(ratio).replace(' with skipping', '')}"
    if share is None:
        pool = (f", and on a pool where zero-std follows the prompt skipping gave{fewer} tokens per informative "
                "trained group" if ratio is not None else "")
        return (f"{VERDICT}unknown for your run: whether skipping pays depends on whether its zero-std follows the "
                f"prompt, which tune's rates alone do not say{pool}; `tune --from RUN --prompt-skip MODE` weighs the "
                "run's zero_std_persistence (docs §3.2)")
    if persistence is None:
        return (f"{VERDICT}skipping does not pay on your run yet, over-sampling does: no prompt was revisited, so "
                "whether its zero-std follows the prompt is unknown (docs §3.2)")
    measured = f"its zero-std persistence {persistence:.2f} at a zero-std share of {share:.2f}"
    bar = f"(1 + {share:.2f}) / 2 = {(1 + share) / 2:.2f}"
    if decision:
        pool = (f", and on a pool where it does skipping gave{fewer} tokens per informative trained group"
                if ratio is not None else "")
        return (f"{VERDICT}skipping pays on your run: {measured} is at least {bar} (zero-std follows the "
                f"prompt){pool} (docs §3.2)")
    from shopsim_metrics.health.advisories import skipping_pays

    if skipping_pays(persistence, share):  # the run would let it, the pool shows no saving
        return (f"{VERDICT}skipping does not pay, over-sampling does: {measured} is at least {bar} (zero-std follows "
                f"the prompt), but even on a pool where it does skipping gave{fewer} tokens per informative trained "
                "group (docs §3.2)")
    if persistence >= (1 + share) / 2:  # at a share of 1 every group is zero-std: nothing to tell apart
        return (f"{VERDICT}skipping does not pay on your run: {measured}: every group is zero-std, so no prompt is "
                "told apart from another; the run's reward needs looking at first (docs §3.2)")
    pool = (f"; the pool's {ratio:.2f}x above holds only where zero-std follows the prompt"
            if ratio is not None and round(ratio, 2) > 1.0 else "")
    return (f"{VERDICT}skipping does not pay on your run, over-sampling does: {measured} is below {bar} (its "
            f"zero-std is mostly the luck of the draw){pool} (docs §3.2)")
