"""slime's data source, with prompts skipped before generation (opt-in): the core of ``--data-source-path``.

Wire it with ``--data-source-path shopsimrl.data_source.PromptSkipDataSource`` (the adapter's subclass,
which finds the process's monitor as slime's hooks create it); slime constructs it as ``cls(args)``. The
simulator uses this class itself, told which monitor to report to (``monitor_of``). It wraps slime's
default data source
(``slime.rollout.data_source.RolloutDataSourceWithBuffer``, imported when the class is constructed,
so this module imports without slime) and delegates to it:

- ``shopsim_prompt_skip: off`` (the default; YAML's unquoted ``off``/``false``/``no`` mean ``off``):
  every call goes to slime's data source as it is: the same prompts in the same order, the same
  ``group_index``/``index``, the same checkpoint files, nothing of its own saved.
Each rule is a skip policy (:mod:`shopsim_metrics.prompts.skip_policy`), built once, when chosen: this class is
slime's adapter, and names no rule.

- ``shopsim_prompt_skip: greso``: each wave's groups are drawn from slime's data source, and each
  group's prompt (keyed as the monitor keys it: ``metadata[shopsim_prompt_key]`` or the prompt hash)
  is put to :class:`~shopsim_metrics.prompts.greso_policy.GresoPolicy` with its ``zero_std_run`` from
  the prompt history; the groups it skips are dropped and replacements drawn until the wave has the
  ``num_samples`` groups slime asked for.
- ``shopsim_prompt_skip: predictive``: the same, with :class:`~shopsim_metrics.prompts.predictive_policy.PredictivePolicy`
  deciding: a drawn prompt is skipped when its predicted probability of a zero-std group (from its
  forgetting success evidence, the history's ``success_evidence``) is at least
  ``shopsim_prompt_skip_threshold``, or its chance of spread is below ``shopsim_prompt_skip_min_yield``
  times its relative token cost (the history's ``relative_cost``); the prediction of every prompt let through is handed to the
  monitor (:meth:`PromptSkipDataSource.take_rule_report`) for the calibration fields. Every skip passes the
  lost-signal guard (:mod:`shopsim_metrics.prompts.lost_signal_guard`): one in ``shopsim_prompt_skip_probe_every``
  (more while its bound is wide) is served as a probe, and a draw past the guard's cap or step budget is served;
  the verdicts of both, read from the history at the next closed step, check the predictions (its fields:
  :meth:`PromptSkipDataSource.take_rule_report`). The guard's lost signal is per informative *trained* group
  (the closed step's ``trained`` rows, :attr:`~shopsim_metrics.prompts.skip_evidence.StepShares.trained_informative`).
- ``shopsim_wave_size: adaptive`` (with either mode): each call serves the number of groups that fills
  ``rollout_batch_size`` without another wave with probability ``shopsim_wave_fill_probability``, from the
  step's needs and the recent steps' judged groups in finishing order, as the monitor's wave planner answers
  (:meth:`~shopsim_metrics.waves.wave_planner.WavePlanner.plan`: one call sizes the wave and records it);
  slime adds however many groups a call returns. The planner hands each step's waves to the accountant at the
  close, so the records' ``wave_count`` is the number of calls and ``submitted_group_count`` their sum.
  ``fixed`` (the default) serves what slime asks.

What a skipped prompt costs slime's bookkeeping: it was drawn, so it consumed its slot of the epoch
(slime's ``sample_offset``, ``group_index`` and ``index`` counters moved past it). The served
``group_index`` values therefore have gaps, and slime's epochs, counted by ``len(dataset)`` draws,
pass in fewer steps than without skipping: with ``--num-epoch`` the run keeps its number of steps and
walks the dataset more often.

The search for replacements is bounded: after :attr:`PromptSkipDataSource.max_rounds` rounds of draws in one
call, or once one call has drawn ``max_epochs_per_call`` times the dataset's length (nearly every
prompt skippable), the rest of the wave is served without asking the rule. Groups slime serves from
its buffer (aborted groups of a partial rollout, put back with ``add_samples``) are never skipped:
their generation has begun.

The prompt history is the monitor's own (:mod:`shopsim_metrics.monitor`, the process-wide runtime
slime's hooks share): at its first ``get_samples`` the data source attaches itself to the process's
monitor (``monitor_of(args)``: in slime, ``shopsimrl.slime_runtime.get_runtime``) and reads, through
:class:`~shopsim_metrics.prompts.skip_evidence.MonitorSkipHistory`, the history the filter's
judgements feed as each step closes (the same prompt keys, the same verdicts). The monitor takes the
skipped prompts (:meth:`PromptSkipDataSource.take_skipped`) into each step's record. A test may
inject any :class:`~shopsim_metrics.prompts.skip_evidence.SkipHistory` (``history=``), e.g. a
:class:`~shopsim_metrics.prompts.skip_evidence.MonitorSkipHistory` over a tracker it feeds itself. The
rule adapts its ``p`` values once per closed step, at the first wave after the step closed.

State: with slime's checkpoint ``<save>/rollout/global_dataset_state_dict_<N>.pt`` this class writes
``<save>/rollout/shopsim_prompt_skip_state_<N>.json`` (the policy's keys: GRESO's ``p`` values and random state
(``rule``), or the guard's numbers and pending probes (``guard``, ``predictive``), an injected history's state, the last step adapted to, the run's ``run_id``; the
monitor's history is restored from the records, ``shopsim_metrics.run.resume``) and reads it back on ``load``, so a
resumed run skips as an unbroken one would. The guard's numbers are checked (a value no run reaches: one warning,
the guard starts afresh), and a state another run saved is refused at the first serve (one warning naming both
runs; the rule and the guard start afresh). The file is written durably (``fsync``, then replace:
:mod:`shopsim_metrics.state_file`); a damaged one (0 bytes, truncated, ``[]``, ``null``, binary, a
directory) stops the load with one line naming it and what to do
(:class:`~shopsim_metrics.state_file.DamagedStateFile`, a ``ValueError``).

Settings (each read from ``args`` by its row of the settings table, :meth:`shopsim_metrics.settings.Setting.from_args`:
the defaults, checks and error messages of check-config and the monitor's ``ShopsimSettings.from_args``;
absent or None means the default):

- ``shopsim_prompt_skip``: ``off`` (default), ``greso`` or ``predictive``;
- ``shopsim_prompt_skip_<field>`` for every field of :class:`SkipRuleSettings` (declared there; ``threshold``,
  ``forgetting`` and ``min_yield`` for ``predictive``): the field's default, GRESO's published value; the seed
  defaults to slime's ``rollout_seed``;
- ``shopsim_prompt_key``: the metadata column that names a prompt (the monitor's setting).

Example:
    >>> from types import SimpleNamespace
    >>> class Inner:  # stands in for slime's data source: one prompt, drawn again and again
    ...     def __init__(self): self.drawn = 0
    ...     def get_samples(self, n):
    ...         self.drawn += n
    ...         return [[SimpleNamespace(prompt="2+2=?", label="4", metadata={}, group_index=None)] for _ in range(n)]
    ...     def __len__(self): return 100
    >>> from shopsim_metrics.judging.prompt_keys import history_key
    >>> from shopsim_metrics.prompts.value import PromptValueTracker
    >>> tracker = PromptValueTracker()   # the monitor's prompt history, here fed by hand
    >>> ds = PromptSkipDataSource(SimpleNamespace(shopsim_prompt_skip="greso"), inner=Inner(),
    ...                           history=MonitorSkipHistory(tracker))
    >>> key = prompt_key(ds.get_samples(1)[0])[0]
    >>> for _ in range(3): _ = tracker.history.visit(history_key(key), "zero_std_all_pass")
    >>> len(ds.get_samples(4)), ds.inner.drawn > 5   # skipped draws were replaced
    (4, True)
    >>> row = ds.take_skipped()[0]; (row.zero_std_run, row.kind, row.skip_probability)
    (3, 'zero_std_all_pass', 0.875)
"""

from __future__ import annotations

import importlib
import logging
import os
import threading
from typing import Any, Callable

from shopsim_metrics.judging.prompt_keys import prompt_key
from shopsim_metrics.settings import PROMPT_SKIP, SETTINGS_BY_NAME, SKIP_RULE_SETTINGS
from shopsim_metrics.settings import WAVE_SIZE_MODES, ShopsimSettings
from shopsim_metrics.settings import skip_rule_settings
from shopsim_metrics.prompts.skip_evidence import MonitorSkipHistory, SkipHistory, StepShares
from shopsim_metrics.prompts.skip_monitor import SkipMonitor
from shopsim_metrics.prompts.skip_policy import PolicyDecision, SkipPolicy, build_skip_policy
from shopsim_metrics.prompts.skip_record import RuleReport, SkippedPrompt
from shopsim_metrics.settings.prompt_skip import SkipRuleSettings
from shopsim_metrics.state_file import DamagedStateFile, read_json_object, write_json

logger = logging.getLogger("shopsim_metrics")

__all__ = ["PromptSkipDataSource", "SkippedPrompt", "skip_mode", "rule_settings_from_args"]

FIXED, ADAPTIVE = WAVE_SIZE_MODES
MODE_ARG = PROMPT_SKIP
SLIME_DATA_SOURCE = "slime.rollout.data_source.RolloutDataSourceWithBuffer"
STATE_FILE = "shopsim_prompt_skip_state_{rollout_id}.json"
STATE_FORMAT = 1
DEFAULT_MAX_ROUNDS = 64
DEFAULT_MAX_EPOCHS_PER_CALL = 2


def skip_mode(args: Any) -> str:
    """``args.shopsim_prompt_skip`` read by the settings table: ``off`` (absent, None, YAML's false) or ``greso``.

    Example:
        >>> from types import SimpleNamespace
        >>> skip_mode(SimpleNamespace()), skip_mode(SimpleNamespace(shopsim_prompt_skip=False))
        ('off', 'off')
        >>> skip_mode(SimpleNamespace(shopsim_prompt_skip=True))
        Traceback (most recent call last):
        ...
        shopsim_metrics.settings.shopsim_settings.ShopsimConfigError: shopsim_prompt_skip: expected one of off, greso, predictive; got True (YAML reads unquoted on/yes/true as a boolean: write greso)
    """
    return SETTINGS_BY_NAME[MODE_ARG].from_args(args)


def rule_settings_from_args(args: Any) -> SkipRuleSettings:
    """The rule's settings from ``args.shopsim_prompt_skip_<field>``, read by the settings table.

    Absent or None: the field's default; the seed defaults to slime's ``rollout_seed``. A bad value
    is named by its ``args`` name.

    Example:
        >>> from types import SimpleNamespace
        >>> rule_settings_from_args(SimpleNamespace(rollout_seed=42, shopsim_prompt_skip_floor=0.02)).seed
        42
        >>> rule_settings_from_args(SimpleNamespace(shopsim_prompt_skip_step="a tenth"))
        Traceback (most recent call last):
        ...
        shopsim_metrics.settings.shopsim_settings.ShopsimConfigError: shopsim_prompt_skip_step: expected a number in [0, 1]; got 'a tenth'
    """
    values = {setting.name: setting.from_args(args) for setting in SKIP_RULE_SETTINGS}
    return skip_rule_settings(values, getattr(args, "rollout_seed", None))


class PromptSkipDataSource:
    """slime's data source with prompts skipped before generation by the chosen policy (see the module docstring).

    ``inner``: the data source to wrap (default: slime's ``RolloutDataSourceWithBuffer(args)``, or
    the class :attr:`inner_class` names); ``history``: the prompt history (default: the monitor's,
    attached at the first ``get_samples``); ``monitor``: the runtime to attach to, else ``monitor_of(args)``
    at first use (the process's: the adapter's subclass passes slime's ``get_runtime``).
    """

    inner_class: str = SLIME_DATA_SOURCE
    """Dotted path of the data source wrapped when none is given (a subclass may name its own)."""
    max_rounds: int = DEFAULT_MAX_ROUNDS
    """Draws per call after which the rest of a wave is served without asking the rule."""
    max_epochs_per_call: int = DEFAULT_MAX_EPOCHS_PER_CALL
    """Dataset lengths one call may draw before the rest of the wave is served without asking the rule."""

    def __init__(self, args: Any, *, inner: Any = None, history: SkipHistory | None = None,
                 monitor: SkipMonitor | None = None, monitor_of: Callable[[Any], SkipMonitor] | None = None) -> None:
        self.args = args
        self.settings = ShopsimSettings.from_args(args)
        """Every ``shopsim_*`` setting, read and checked once (as the monitor reads them: one table)."""
        self.mode = self.settings.prompt_skip
        self.wave_size: str = self.settings.wave_size
        """``fixed`` (serve what slime asks) or ``adaptive`` (size each wave to fill the batch)."""
        self.metadata_key: str | None = self.settings.prompt_key
        """The metadata column that names a prompt (``shopsim_prompt_key``)."""
        self.policy: SkipPolicy | None = self._new_policy()
        """The chosen rule (:mod:`shopsim_metrics.prompts.skip_policy`; None: ``off``, every call goes to slime's)."""
        self._history: SkipHistory | None = history
        self._monitor = monitor
        self.monitor_of = monitor_of
        """Finds the monitor from ``args`` when none was given (at first use: it may not exist yet)."""
        self.inner = inner if inner is not None else _load_class(self.inner_class)(args)
        self.adapted_step: int | None = None  # rollout_id of the last closed step the rule adapted to
        self._skipped: list[SkippedPrompt] = []
        self._loaded_run_id: str | None = None  # the run a loaded state was saved by, checked at the first serve
        self._lock = threading.Lock()

    # --- slime's interface -------------------------------------------------------------------------
    def get_samples(self, num_samples: int) -> list[list[Any]]:
        """``num_samples`` groups (``adaptive``: as many as fill the batch); skipped prompts are replaced by further draws."""
        planner = self.monitor.waves if self.wave_size == ADAPTIVE else None
        return self._serve(planner.plan(num_samples) if planner is not None else num_samples)

    def _serve(self, num_samples: int) -> list[list[Any]]:
        """``num_samples`` groups: slime's data source's with ``off``; with skipping, skipped draws replaced."""
        if self.policy is None:
            return self.inner.get_samples(num_samples)
        if self._loaded_run_id is not None:
            self._check_loaded_run()
        closed = self._newly_closed_step()
        if closed is not None:
            self.policy.close_step(closed, self.history)
        dataset_length = len(self.inner)
        served: list[list[Any]] = []
        rounds = drawn = 0
        while len(served) < num_samples:
            skipping = rounds < self.max_rounds and (
                dataset_length == 0 or drawn < self.max_epochs_per_call * dataset_length)
            buffered = self._buffer_length()
            groups = self.inner.get_samples(num_samples - len(served))
            if not groups:
                raise RuntimeError(f"{type(self.inner).__name__}.get_samples({num_samples - len(served)}) returned "
                                   "no group: PromptSkipDataSource needs a data source that always serves")
            from_buffer = buffered - self._buffer_length()  # slime serves its buffer first
            rounds += 1
            drawn += len(groups) - from_buffer
            for position, group in enumerate(groups):
                if skipping and position >= from_buffer and self._skips(self.policy, group):
                    continue
                served.append(group)
        return served

    def add_samples(self, samples: list[list[Any]]) -> None:
        """Put groups back (slime's partial rollout): they go to the wrapped source's buffer."""
        self.inner.add_samples(samples)

    def save(self, rollout_id: int) -> None:
        """slime's checkpoint of the data source, and with a skip policy this class's state beside it."""
        self.inner.save(rollout_id)
        save_dir = getattr(self.args, "save", None)
        if self.policy is None or not getattr(self.args, "rollout_global_dataset", True) or not save_dir:
            return
        write_json(_state_path(save_dir, rollout_id), self.state_dict())  # fsync'ed, then replaced

    def load(self, rollout_id: int | None = None) -> None:
        """slime's restore of the data source, and with a skip policy this class's state saved with it."""
        self.inner.load(rollout_id)
        load_dir = getattr(self.args, "load", None)
        if (self.policy is None or not getattr(self.args, "rollout_global_dataset", True) or load_dir is None
                or rollout_id is None):
            return
        path = _state_path(load_dir, rollout_id)
        remedy = ("move the file away to start prompt skipping afresh, or --load another checkpoint")
        try:
            state = read_json_object(path, what="prompt-skip state", remedy=remedy)
        except FileNotFoundError:
            logger.warning("shopsim-metrics: %s does not exist: prompt skipping starts afresh (p values at their "
                           "start, empty history) while slime resumes at rollout %s", path, rollout_id)
            return
        try:
            self.load_state_dict(state)
        except Exception as exc:  # noqa: BLE001 - whatever the file holds: one line naming it
            raise DamagedStateFile(f"{path}: not a prompt-skip state this version can read "
                                   f"({type(exc).__name__}: {str(exc)[:120]}); {remedy}") from None

    def __len__(self) -> int:
        return len(self.inner)

    def __getattr__(self, name: str) -> Any:
        """Anything else slime's data source offers (``buffer``, ``get_buffer_length``, ``dataset`` ...)."""
        if name == "inner":  # not set yet (during construction): no recursion
            raise AttributeError(name)
        return getattr(self.inner, name)

    @property
    def history(self) -> SkipHistory:
        """The prompt history the rule reads: the injected one, else the monitor's (attached on first use)."""
        if self._history is None:
            self._history = self._attach()
        return self._history

    @property
    def monitor(self) -> SkipMonitor:
        """The monitor this data source reports to: the injected one, else ``monitor_of(args)``'s."""
        if self._monitor is None:
            if self.monitor_of is None:
                raise RuntimeError("PromptSkipDataSource: no monitor to report to; pass monitor= or monitor_of=, or "
                                   "wire shopsimrl.data_source.PromptSkipDataSource, which finds slime's")
            self._monitor = self.monitor_of(self.args)
        return self._monitor

    def _attach(self) -> SkipHistory:
        history = self.monitor.attach_prompt_skip(self)
        if history is None:
            logger.warning("shopsim-metrics: the monitor keeps no prompt history (shopsim_prompt_history_limit: 0, "
                           "or slime's rollout_batch_size missing): shopsim_prompt_skip has nothing to learn from "
                           "and skips no prompt")
            from shopsim_metrics.prompts.value import PromptValueTracker

            return MonitorSkipHistory(PromptValueTracker(limit=1))  # an empty history, never fed: no skip
        return history

    # --- for the monitor ----------------------------------------------------------------------------
    def take_skipped(self) -> list[SkippedPrompt]:
        """The prompts skipped since the last call (one step's, when called once per step), oldest first."""
        with self._lock:
            skipped, self._skipped = self._skipped, []
        return skipped

    def take_rule_report(self) -> RuleReport:
        """What the skip policy adds to the step's record since the last call (nothing with ``off``)."""
        return self.policy.take_report() if self.policy is not None else RuleReport()

    def state_dict(self) -> dict[str, Any]:
        """The history's state, the last step adapted to, the run, and the policy's own keys, JSON-able."""
        state = {"format": STATE_FORMAT, "mode": self.mode, "adapted_step": self.adapted_step,
                 "history": self.history.state_dict(), "run_id": self._run_id()}
        if self.policy is not None:
            state.update(self.policy.state_dict())  # greso: rule; predictive: guard
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if state.get("format") != STATE_FORMAT:
            raise ValueError(f"format: expected {STATE_FORMAT}; got {state.get('format')!r}")
        if self.policy is not None:
            self.policy.load_state_dict(state)
        self.history.load_state_dict(state["history"])
        self.adapted_step = state["adapted_step"]
        run_id = state.get("run_id")
        self._loaded_run_id = run_id if isinstance(run_id, str) else None

    def _run_id(self) -> str | None:
        """The run this data source serves (its monitor's ``run_id``; None: no monitor attached yet)."""
        run_id = getattr(self._monitor, "run_id", None)
        return run_id if isinstance(run_id, str) else None

    def _check_loaded_run(self) -> None:
        """At the first serve after a load (the monitor has restored the run by then): a state saved by another run
        (its ``run_id`` not the monitor's) is refused with one warning, and the rule and the guard start afresh."""
        saved, self._loaded_run_id = self._loaded_run_id, None
        if self._monitor is None and self.monitor_of is None:
            return  # no monitor to ask (an injected history): nothing to compare with
        mine = getattr(self.monitor, "run_id", None)
        if not isinstance(mine, str) or mine == saved:
            return
        logger.warning("shopsim-metrics: the prompt-skip state loaded was saved by run %s, not this run (%s): it is "
                       "refused, and prompt skipping starts afresh (the rule's p values at their start, the guard "
                       "with no probe); check that --load names this run's checkpoints", saved, mine)
        self.policy = self._new_policy()
        self.adapted_step = None

    def _new_policy(self) -> SkipPolicy | None:
        """The policy ``shopsim_prompt_skip`` chooses, afresh (the seed: ``shopsim_prompt_skip_seed``, else slime's
        ``rollout_seed``)."""
        return build_skip_policy(self.mode, self.settings.prompt_skip_rule,
                                 n_samples=getattr(self.args, "n_samples_per_prompt", None))

    # --- internals ----------------------------------------------------------------------------------
    def _newly_closed_step(self) -> StepShares | None:
        """The latest closed step if the rule has not adapted to it yet (then it has): once per step, however many
        waves read it."""
        closed = self.history.last_closed_step()
        if closed is None or closed.step == self.adapted_step:
            return None
        self.adapted_step = closed.step
        return closed

    def _skips(self, policy: SkipPolicy, group: list[Any]) -> bool:
        """Ask the policy about one drawn group; a skipped one is recorded."""
        key, _ = prompt_key(group, self.metadata_key)
        if key is None:
            return False
        decision = policy.decide(key, getattr(group[0], "group_index", None), self.history)
        if decision.skip:
            self._record_skip(group, key, decision)
        return decision.skip

    def _record_skip(self, group: list[Any], key: str, decision: PolicyDecision) -> None:
        """One skipped draw, for the monitor's next record (:meth:`take_skipped`)."""
        kind = decision.kind  # a skip has one: a zero-std run's, or the side its evidence leans to
        skipped = SkippedPrompt(prompt_key=key, zero_std_run=decision.zero_std_run,
                                skip_probability=decision.probability, kind=kind,  # type: ignore[arg-type]
                                group_index=getattr(group[0], "group_index", None), for_cost=decision.for_cost)
        with self._lock:
            self._skipped.append(skipped)

    def _buffer_length(self) -> int:
        get_buffer_length = getattr(self.inner, "get_buffer_length", None)
        return get_buffer_length() if get_buffer_length is not None else 0


def _state_path(directory: str, rollout_id: int) -> str:
    return os.path.join(directory, "rollout", STATE_FILE.format(rollout_id=rollout_id))


def _load_class(path: str) -> Any:
    module_name, _, name = path.rpartition(".")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ImportError(f"PromptSkipDataSource wraps {path}, which could not be imported ({exc}); run it inside "
                          "slime's environment, or pass the data source to wrap as inner=") from exc
    return getattr(module, name)
