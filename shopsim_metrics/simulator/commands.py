"""The ``demo`` and ``tune`` subcommands of ``shopsim-metrics``.

Example:
    >>> import argparse
    >>> parser = argparse.ArgumentParser(); register(parser.add_subparsers(dest="command"))
    >>> parser.parse_args(["tune", "--zero-std-rate", "0.3"]).candidates is None
    True
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from typing import Any

from shopsim_metrics.settings import PROMPT_SKIP_MODES, WAVE_SIZE_MODES
from shopsim_metrics.simulator.config import ROLLOUT_MODES, AgentModel
from shopsim_metrics.simulator.tuning.step_rates import BURST_RULES

_ERROR = "shopsim-metrics tune: error:"
"""How every error of ``tune`` starts (the prefix of every command's errors)."""


def register(subparsers: Any) -> None:
    """Add ``demo`` and ``tune`` to the CLI's subparsers."""
    demo = subparsers.add_parser(
        "demo", help="simulate a slime run (with a technical-failure burst) through the real hooks: "
                     "W&B offline run, steps.jsonl and an HTML dashboard",
        description="Simulate a slime run through the project's real hooks. W&B logs offline (WANDB_MODE=offline "
                    "unless WANDB_MODE is set); upload later with `wandb sync <run dir>`.")
    demo.add_argument("--out", default="demo_out", help="output directory (default: demo_out)")
    demo.add_argument("--steps", type=_step_count, default=40, help="rollout steps to simulate (default: 40)")
    demo.add_argument("--seed", type=_seed, default=0, help="random seed (default: 0)")
    demo.add_argument("--no-progress", action="store_true", help="no progress bar")
    demo.add_argument("--prompt-skip", choices=PROMPT_SKIP_MODES, default="off",
                      help="skip prompts before generation by this rule, through shopsimrl's data source, and print "
                           "the same pool run without and with it side by side over 3 seeds (default: off)")
    demo.add_argument("--wave-size", choices=WAVE_SIZE_MODES, default="fixed",
                      help="shopsim_wave_size: fixed waves of over_sampling_batch_size, or adaptive (the data source "
                           "sizes each wave to fill the batch; default: fixed)")
    demo.add_argument("--rollout", choices=ROLLOUT_MODES, default="sync",
                      help="slime's rollout to simulate: sync (train.py's loop: waves, remaining, abort at the step's "
                           "end) or fully-async (train_async.py with shopsimrl.async_rollout: a pool of groups in "
                           "flight across steps, each finished group judged; default: sync)")
    add_agent_arguments(demo)
    demo.set_defaults(func=_demo)

    tune = subparsers.add_parser(
        "tune", help="compare over_sampling_batch_size candidates by simulation",
        description="Compare over_sampling_batch_size candidates by simulating slime's loop with the real filter. "
                    "Recommendation: among the candidates whose zero-advantage fraction and P(2nd wave) are within "
                    "the targets, the one with the lowest cost (every token generated per step, the tokens of "
                    "aborted groups included; ties: fewer seconds per step, then the smaller size), else the one "
                    "closest to the targets. When that is the smallest or largest candidate, the range is widened "
                    "once beyond it (unless --no-widen); if it is still at an edge, the output says so.")
    tune.add_argument("--zero-std-rate", type=_probability, help="share of judged groups that are zero-std")
    tune.add_argument("--technical-rate", type=_probability,
                      help="share of judged groups that fail technically (default 0, or measured with --from)")
    tune.add_argument("--from", dest="from_path", metavar="PATH",
                      help="measure both rates (and the batch knobs) from a run's steps.jsonl or run directory, and "
                           "calibrate the cost columns (response lengths, time per token) to its records")
    tune.add_argument("--burst-rule", choices=BURST_RULES, default="schedule",
                      help="with --from, how a step with a burst of technical failures is weighed: schedule (default) "
                           "simulates the background rate on every step and the bursts as bursts, at the run's "
                           "frequency; pooled spreads them over every step")
    tune.add_argument("--candidates", type=_int_list, help="comma-separated sizes, each >= rollout_batch_size "
                                                           "(default: 1, 1.5, 2, 3, 4 x rollout_batch_size)")
    tune.add_argument("--no-widen", dest="widen", action="store_false",
                      help="simulate exactly the candidates, even when the recommendation is at an edge of the range")
    tune.add_argument("--steps", type=_step_count, default=2000, help="simulated steps per candidate (default 2000)")
    tune.add_argument("--seed", type=_seed, default=0)
    tune.add_argument("--rollout-batch-size", type=_positive_int)
    tune.add_argument("--n-samples-per-prompt", type=_positive_int)
    tune.add_argument("--global-batch-size", type=_positive_int)
    tune.add_argument("--max-consecutive-failed-groups", type=_positive_int, default=8,
                      help="shopsim_max_consecutive_failed_groups, for P(limit) (default 8)")
    tune.add_argument("--max-zero-advantage", type=_probability, default=0.05,
                      help="target: zero-advantage fraction of the train batch (default 0.05)")
    tune.add_argument("--max-second-wave", type=_probability, default=0.05,
                      help="target: probability of a second wave (default 0.05)")
    tune.add_argument("--jobs", type=_job_count, default=None,
                      help="candidates simulated in parallel processes (default: one per CPU)")
    tune.add_argument("--plot", metavar="OUT.html", help="also write a plotly HTML plot")
    tune.add_argument("--json", action="store_true", help="print the report as JSON instead of the table")
    tune.add_argument("--prompt-skip", choices=PROMPT_SKIP_MODES, default="off",
                      help="also run a prompt pool zero-std at the tuned rate without and with skipping by this rule, "
                           "at the recommended size, and report total tokens per informative group side by side "
                           "(default: off)")
    tune.add_argument("--wave-size", choices=WAVE_SIZE_MODES, default="fixed",
                      help="the waves of that comparison: fixed or adaptive (shopsim_wave_size; default: fixed)")
    add_agent_arguments(tune)
    tune.set_defaults(func=_tune)


_AGENT_KNOBS = {"turns_mean": "turns_mean", "max_turns": "max_turns", "tool_seconds_median": "tool_seconds",
                "observation_tokens_median": "observation_tokens"}
"""The agent knobs of ``demo`` and ``tune``: :class:`AgentModel` field -> the option's dest (``--turns-mean`` ...)."""


def add_agent_arguments(parser: argparse.ArgumentParser) -> None:
    """``--agent`` and its knobs, the same for ``demo`` and ``tune``."""
    defaults = AgentModel()
    group = parser.add_argument_group("agent episodes")
    group.add_argument("--agent", action="store_true",
                       help="simulate agent episodes: turns of generation and tool calls, the tool output appended "
                            "with loss_mask 0, the tool seconds in non_generation_time; every technical failure is "
                            "then an environment failure (a tool call that raised, its cause in the metadata)")
    group.add_argument("--turns-mean", type=_turns, help=f"with --agent: mean turns per episode (default "
                                                         f"{defaults.turns_mean:g})")
    group.add_argument("--max-turns", type=_max_turns, help="with --agent: an episode needing more turns stops there, "
                                                            f"truncated (default {defaults.max_turns})")
    group.add_argument("--tool-seconds", type=_positive_number,
                       help=f"with --agent: median seconds of a tool call (default {defaults.tool_seconds_median:g})")
    group.add_argument("--observation-tokens", type=_positive_number,
                       help="with --agent: median tokens of a tool call's output (default "
                            f"{defaults.observation_tokens_median:g})")


def agent_model(args: argparse.Namespace) -> AgentModel | None:
    """The :class:`AgentModel` the options ask for (None without ``--agent``); ValueError for a knob without it.

    Example:
        >>> parser = argparse.ArgumentParser(); add_agent_arguments(parser)
        >>> agent_model(parser.parse_args(["--agent", "--max-turns", "4"])).max_turns
        4
        >>> agent_model(parser.parse_args(["--max-turns", "4"]))
        Traceback (most recent call last):
        ...
        ValueError: --max-turns needs --agent
    """
    given = {name: getattr(args, dest) for name, dest in _AGENT_KNOBS.items() if getattr(args, dest) is not None}
    if not args.agent:
        if given:
            raise ValueError(f"--{_AGENT_KNOBS[next(iter(given))].replace('_', '-')} needs --agent")
        return None
    return AgentModel(**given)


def _demo(args: argparse.Namespace) -> int:
    from shopsim_metrics.simulator.demo import run_demo

    if args.rollout == "fully-async" and (args.prompt_skip != "off" or args.wave_size != "fixed"):
        print("shopsim-metrics demo: error: --rollout fully-async neither skips prompts nor sizes waves (it has "
              "none): leave --prompt-skip off and --wave-size fixed", file=sys.stderr)
        return 2
    try:
        agent = agent_model(args)
    except ValueError as exc:
        print(f"shopsim-metrics demo: error: {exc}", file=sys.stderr)
        return 2
    if agent is not None and args.rollout == "fully-async":
        print("shopsim-metrics demo: error: --agent simulates agent episodes on the synchronous loop only: leave "
              "--rollout sync", file=sys.stderr)
        return 2
    demo = run_demo(args.out, steps=args.steps, seed=args.seed, progress=not args.no_progress,
                    prompt_skip=args.prompt_skip, wave_size=args.wave_size, rollout=args.rollout, agent=agent)
    return 1 if demo.result.terminated else 0


class _Refused(Exception):
    """An input ``tune`` cannot work with: the one line after :data:`_ERROR` (the command exits 2)."""


@dataclasses.dataclass(frozen=True)
class _Rates:
    """The rates ``tune`` simulates, where they come from, and what the run at ``--from`` told besides."""

    zero: float
    technical: float
    source: str  # "given rates", or the run they were measured from
    knobs: dict[str, int]  # the batch knobs the run recorded (the command line's override them)
    bursts: list[tuple[int, float]]  # the run's technical bursts, scheduled over the simulated steps
    notes: list[str]  # how the rates were estimated (printed below the header, ``rate_notes`` in JSON)
    measured: Any = None  # the run's measured rates and knobs (None: no --from)
    observed: Any = None  # the run's recorded costs, to calibrate the cost model to (None: no --from)


_RUN_KNOBS = ("rollout_batch_size", "n_samples_per_prompt", "global_batch_size")
"""The batch knobs ``tune`` takes from the run at ``--from`` or the command line (the latter first)."""


def _tune(args: argparse.Namespace) -> int:
    """``tune``: read and check the inputs, simulate the candidates, print the report (exit 2 on a bad input)."""
    try:
        agent = _agent(args)
        rates = _rates(args)
        base = _base_config(args, rates, agent)
        report = _simulate_candidates(args, base, rates, _calibration(args, base, rates))
    except _Refused as exc:
        print(f"{_ERROR} {exc}", file=sys.stderr)
        return 2
    saving = _skip_saving(args, base, rates.zero, rates.technical, report.recommended) if args.prompt_skip != "off" else None
    if args.json:
        _print_json(args, rates, report, saving)
    else:
        _print_table(args, rates, base, report, saving)
    if args.plot:
        from shopsim_metrics.simulator.tuning.tune import write_plot

        path = write_plot(report, args.plot)
        print(f"plot: {path}", file=sys.stderr if args.json else sys.stdout)
    return 0


def _agent(args: argparse.Namespace) -> AgentModel | None:
    """The agent model ``--agent`` asks for (None without it); refused with a knob but no ``--agent``, or with ``--from``."""
    try:
        agent = agent_model(args)
    except ValueError as exc:
        raise _Refused(str(exc)) from None
    if agent is not None and args.from_path:
        raise _Refused("--agent simulates the episodes its knobs describe; --from calibrates a single-turn cost "
                       "model to a run: give one of them")
    return agent


def _rates(args: argparse.Namespace) -> _Rates:
    """The rates to simulate: the command line's, each one it leaves out measured from the run at ``--from``."""
    if args.from_path:
        rates = _measured_rates(args)
    elif args.zero_std_rate is None:
        raise _Refused("give --zero-std-rate (and --technical-rate), or --from PATH to measure them from a run")
    else:
        rates = _Rates(args.zero_std_rate, args.technical_rate, "given rates", {}, [], [])
    technical = rates.technical or 0.0
    if rates.zero + technical > 1:
        raise _Refused(f"--zero-std-rate + --technical-rate must be <= 1; got {rates.zero} + {technical}")
    return dataclasses.replace(rates, technical=technical)


def _measured_rates(args: argparse.Namespace) -> _Rates:
    """The rates, knobs and bursts of the run at ``--from`` (one pass over its records), under the command line's."""
    from shopsim_metrics.simulator.tuning.tune import measured_rates_and_cost

    try:
        measured, observed = measured_rates_and_cost(args.from_path)
    except FileNotFoundError as exc:  # the missing-path error every command gives
        raise _Refused(str(exc)) from None
    except (OSError, ValueError) as exc:
        raise _Refused(f"cannot measure rates from {args.from_path}: {exc}") from None
    zero, technical = measured.zero_std_rate, measured.technical_rate
    bursts: list[tuple[int, float]] = []
    notes: list[str] = []
    estimate = measured.estimate
    if estimate is not None:
        if args.technical_rate is None:  # a technical rate given as such is used as given, with no bursts
            zero, technical = estimate.rates(args.burst_rule)
            if args.burst_rule == "schedule":
                bursts = estimate.scheduled_bursts(args.steps)
        notes = estimate.lines(args.burst_rule if args.technical_rate is None else "given")
    return _Rates(zero=zero if args.zero_std_rate is None else args.zero_std_rate,
                  technical=technical if args.technical_rate is None else args.technical_rate,
                  source=_source(args, measured), knobs={k: getattr(measured, k) for k in _RUN_KNOBS if getattr(measured, k)},
                  bursts=bursts, notes=notes, measured=measured, observed=observed)


def _base_config(args: argparse.Namespace, rates: _Rates, agent: AgentModel | None) -> Any:
    """The simulator's config every candidate varies: the batch knobs (the command line's over the run's), the
    failure limit and the agent model; refused when a candidate is below ``rollout_batch_size``."""
    from shopsim_metrics.simulator.config import SimConfig

    knobs = {**rates.knobs, **{k: getattr(args, k) for k in _RUN_KNOBS if getattr(args, k) is not None}}
    rbs = knobs.get("rollout_batch_size", SimConfig.rollout_batch_size)
    too_small = [size for size in args.candidates or () if size < rbs]
    if too_small:
        origin = "--rollout-batch-size" if args.rollout_batch_size is not None else (
            f"the run at {args.from_path}" if "rollout_batch_size" in knobs else "the default")
        raise _Refused(f"--candidates: every over_sampling_batch_size must be >= rollout_batch_size ({rbs}, from "
                       f"{origin}): slime never keeps more groups than it submits; got {too_small[0]}")
    return SimConfig(over_sampling_batch_size=rbs, max_consecutive_failed_groups=args.max_consecutive_failed_groups,
                     agent=agent, **knobs)


def _calibration(args: argparse.Namespace, base: Any, rates: _Rates) -> Any:
    """The cost model fitted to the run at ``--from`` (None without it, or when it records no tokens)."""
    if not args.from_path:
        return None
    try:
        return _calibrate(args, base, rates.observed, rates.measured.over_sampling_batch_size, rates.zero,
                          rates.technical)
    except (OSError, ValueError) as exc:
        raise _Refused(f"cannot calibrate the cost from {args.from_path}: {exc}") from None


def _simulate_candidates(args: argparse.Namespace, base: Any, rates: _Rates, calibration: Any) -> Any:
    """The tune report: every candidate simulated (``--jobs`` processes), the recommendation made."""
    import os

    from shopsim_metrics.simulator.tuning.tune import TuneTargets

    jobs = args.jobs or min(os.cpu_count() or 1, len(args.candidates) if args.candidates else 5)
    try:
        return _run_tune(rates.zero, rates.technical, args, base, TuneTargets(args.max_zero_advantage,
                         args.max_second_wave), rates.source, jobs, calibration, rates.bursts)
    except ValueError as exc:
        raise _Refused(str(exc)) from None


def _run_share(rates: _Rates) -> tuple[float | None, float | None]:
    """The run's zero-std persistence and share (None, None without ``--from``): what skipping would act on."""
    if rates.measured is None:
        return None, None
    return rates.measured.zero_std_persistence, rates.measured.zero_std_rate


def _print_json(args: argparse.Namespace, rates: _Rates, report: Any, saving: Any) -> None:
    """The report as JSON, with the rates' notes and (``--prompt-skip``) the pool run without and with skipping."""
    out = report.to_dict()
    out["rate_notes"] = rates.notes
    if saving is not None:
        from shopsim_metrics.simulator.skipping.skip_saving import skipping_decision, skipping_verdict

        persistence, share = _run_share(rates)
        out["prompt_skip"] = {"mode": saving.mode, "wave_size": args.wave_size, "seeds": list(saving.seeds),
                              "pool": "assumed: zero-std follows the prompt", "pool_prompts": SKIP_POOL_PROMPTS,
                              "token_ratio": saving.token_ratio, "off": _run_dict(saving.off),
                              "skipping": _run_dict(saving.skipping),
                              "run_zero_std_persistence": persistence, "run_zero_std_share": share,
                              "skipping_pays": skipping_decision(persistence, share, saving.token_ratio),
                              "verdict": skipping_verdict(persistence, share, saving.token_ratio)}
    print(json.dumps(out, indent=2))


def _print_table(args: argparse.Namespace, rates: _Rates, base: Any, report: Any, saving: Any) -> None:
    """The report as text: the rates, the candidates' table, the recommendation and its price, the cost note and
    (``--prompt-skip``) the pool run without and with skipping."""
    from shopsim_metrics.simulator.tuning.tune import cost_note, format_table, table_legend, wave_price

    print(f"zero-std rate {rates.zero:.4f}, technical rate {rates.technical:.4f} ({rates.source}); rollout_batch_size "
          f"{base.rollout_batch_size}, {args.steps} simulated steps per candidate, seed {args.seed}")
    for line in rates.notes:
        print(line)
    print(format_table(report))
    print(table_legend(report))
    print(f"recommended over_sampling_batch_size: {report.recommended}  ({report.reason})")
    price = wave_price(report)
    if price is not None:
        print(price)
    print(f"rel.time = mean step rollout time / one wave of {base.rollout_batch_size} groups run to completion "
          f"({report.reference_wave_seconds:.1f} s in the latency model); simulated in {report.wall_seconds:.1f} s of wall time")
    print(cost_note(report))
    if saving is not None:
        from shopsim_metrics.simulator.skipping.skip_saving import ASSUMED_POOL, format_saving, skipping_verdict

        print(format_saving(saving, report.recommended, wave_size=args.wave_size,
                            pool=ASSUMED_POOL.format(prompts=SKIP_POOL_PROMPTS), assumed=True))
        print(skipping_verdict(*_run_share(rates), saving.token_ratio))


def _source(args: argparse.Namespace, measured: Any) -> str:
    """Where the rates come from: each is measured from the run at ``--from`` unless given on the command line."""
    run = f"{args.from_path} ({measured.steps} steps, {measured.accepted_groups} judged groups)"
    given = [name for name, value in (("zero-std rate", args.zero_std_rate), ("technical rate", args.technical_rate))
             if value is not None]
    if not given:
        return f"measured from {run}"
    if len(given) == 2:
        return f"both rates given; cost calibrated to {run}"
    other = "technical rate" if given[0] == "zero-std rate" else "zero-std rate"
    return f"{given[0]} given, {other} measured from {run}"


SKIP_POOL_PROMPTS = 256
"""The prompts of the pool ``tune --prompt-skip`` runs its comparison on (tune's own model has no pool)."""


def _skip_saving(args: argparse.Namespace, base: Any, zero: float, technical: float, over_sampling: int) -> Any:
    """The pool run without and with skipping at ``over_sampling`` (tune's ``--prompt-skip MODE``), 3 seeds."""
    from dataclasses import replace

    from shopsim_metrics.simulator.skipping.skip_saving import compare_skipping, pool_for_zero_std_rate

    pool = pool_for_zero_std_rate(replace(base, technical_rate=technical, seed=args.seed), zero, pool=SKIP_POOL_PROMPTS)
    pool = replace(pool, over_sampling_batch_size=over_sampling, steps=min(args.steps, 200), wave_size=args.wave_size)
    return compare_skipping(pool, args.prompt_skip, seeds=(args.seed, args.seed + 1, args.seed + 2))


def _run_dict(run: Any) -> dict[str, Any]:
    """One setting's pooled totals and the figures derived from them (tune's JSON)."""
    return {**dataclasses.asdict(run), "tokens_per_informative_group": run.tokens_per_informative_group,
            "informative_share": run.informative_share, "second_wave_probability": run.second_wave_probability,
            "aborted_tokens_per_step": run.aborted_tokens_per_step, "zero_std_persistence": run.zero_std_persistence}


def _calibrate(args: argparse.Namespace, base: Any, observed: Any, over_sampling: int | None, zero: float,
               technical: float) -> Any:
    """The cost model fitted to what the run at ``--from`` recorded (``observed``): its own loop (knobs,
    over-sampling, rates) re-simulated."""
    from shopsim_metrics.simulator.tuning.calibration import CALIBRATION_STEPS, calibrate

    if observed.tokens_per_rollout is None:
        print(f"shopsim-metrics tune: {args.from_path} records no response tokens; the cost columns use the simulator's model",
              file=sys.stderr)
        return None
    run = base.with_(over_sampling_batch_size=max(over_sampling or base.rollout_batch_size, base.rollout_batch_size),
                     zero_std_rate=zero, technical_rate=technical, seed=args.seed)
    return calibrate(observed, run, source=str(args.from_path), steps=min(args.steps, CALIBRATION_STEPS) or 1)


def _run_tune(zero: float, technical: float, args: argparse.Namespace, base: Any, targets: Any, source: str,
              jobs: int, calibration: Any = None, bursts: Any = ()) -> Any:
    from shopsim_metrics.simulator.tuning.tune import tune

    from shopsim_metrics.simulator.progress import Progress
    from shopsim_metrics.simulator.tuning.tune import default_candidates

    total = len(set(args.candidates)) if args.candidates else len(default_candidates(base.rollout_batch_size))
    bar = Progress(total, unit="candidate", desc="simulating candidates")
    try:
        return tune(zero_std_rate=zero, technical_rate=technical, candidates=args.candidates, steps=args.steps,
                    seed=args.seed, base=base, targets=targets, source=source, jobs=jobs, calibration=calibration,
                    widen=args.widen, bursts=bursts,
                    progress=(lambda size, result: _advance(bar)) if bar is not None else None)
    finally:
        if bar is not None:
            bar.close()


def _advance(bar: Any) -> None:
    """One candidate simulated; the candidates that widening adds grow the bar's total, never past it."""
    if bar.done >= bar.total:
        bar.grow(bar.done + 1)
    bar.update()


MAX_STEPS = 10_000_000
"""Most simulated steps one command accepts (100,000 take minutes)."""

MAX_COUNT = 1_000_000
"""Largest batch knob, candidate or limit accepted on the command line (groups or samples per step)."""


def _bounded_int(text: str, *, most: int) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a positive integer; got {text!r}") from None
    if not 1 <= value <= most:
        raise argparse.ArgumentTypeError(f"must be a positive integer up to {most:,}; got {text}")
    return value


def _positive_int(text: str) -> int:
    """A count on the command line: 1 to :data:`MAX_COUNT`."""
    return _bounded_int(text, most=MAX_COUNT)


def _step_count(text: str) -> int:
    """A number of simulated steps: 1 to :data:`MAX_STEPS`."""
    return _bounded_int(text, most=MAX_STEPS)


def _job_count(text: str) -> int:
    return _bounded_int(text, most=256)


def _seed(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be an integer >= 0; got {text!r}") from None
    if not 0 <= value < 2**63:
        raise argparse.ArgumentTypeError(f"must be an integer from 0 to 2**63 - 1; got {text}")
    return value


def _positive_number(text: str) -> float:
    """A finite number > 0 and at most a million (seconds, tokens)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number > 0; got {text!r}") from None
    if not 0.0 < value <= 1e6:
        raise argparse.ArgumentTypeError(f"must be a number > 0 and at most 1,000,000; got {text!r}")
    return value


def _turns(text: str) -> float:
    """Mean turns per episode: 1 to 1000."""
    value = _positive_number(text)
    if not 1.0 <= value <= 1000.0:
        raise argparse.ArgumentTypeError(f"must be a number from 1 to 1000; got {text!r}")
    return value


def _max_turns(text: str) -> int:
    return _bounded_int(text, most=1000)


def _probability(text: str, *, zero: bool = True) -> float:
    interval = "[0, 1]" if zero else "(0, 1]"
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a probability in {interval}; got {text!r}") from None
    if not (0.0 <= value <= 1.0) or (value == 0.0 and not zero):
        raise argparse.ArgumentTypeError(f"must be a probability in {interval}; got {text!r}")
    return value


def _positive_probability(text: str) -> float:
    """A probability above 0 (a wave that must fill the batch with probability 0 is no wave)."""
    return _probability(text, zero=False)


def _int_list(text: str) -> list[int]:
    try:
        values = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be comma-separated integers such as 16,24,32; got {text!r}") from None
    too_big = [v for v in values if not 1 <= v <= MAX_COUNT]
    if too_big:
        raise argparse.ArgumentTypeError(f"candidates must be from 1 to {MAX_COUNT:,}; got {too_big[0]}")
    if not values:
        raise argparse.ArgumentTypeError(f"needs at least one candidate; got {text!r}")
    return values
