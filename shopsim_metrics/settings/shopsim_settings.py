"""The ``shopsim_*`` settings: declared once, as the fields of :class:`ShopsimSettings` (and, for
``shopsim_prompt_skip_<field>``, of the :class:`SkipRuleSettings` it holds); the table (:data:`SETTINGS`),
validation, ``from_args``, check-config, preflight, replay's flags and the docs derive from them.

slime applies the ``--custom-config-path`` YAML with ``setattr`` and no checks, so every setting is
validated here, the same way for ``shopsim-metrics check-config`` (before launch) and for slime's
``args`` (at the first hook call). A problem is reported as one line naming the key, the allowed
values and the value received; an unknown ``shopsim_*`` key (a typo) is a problem too, named with the
closest known key.

YAML 1.1 (PyYAML, slime's loader) reads unquoted ``off``/``on``/``no``/``yes`` as booleans and ``5e-1``
as a string; the validators take both: ``shopsim_wandb: off`` means ``off`` (``on``/``yes``/``true`` mean
``auto``) and a numeric string is read as a number for a number setting.

slime's own knobs (``rollout_batch_size`` ...) are read as they are; a bare ``args`` (slime's contract
tests) lacks most of them, which is allowed: they are then ``None``.

Example:
    >>> from types import SimpleNamespace
    >>> s = ShopsimSettings.from_args(SimpleNamespace(rollout_batch_size=16, n_samples_per_prompt=8,
    ...                                               shopsim_wandb=False, shopsim_success_threshold="5e-1"))
    >>> (s.rollout_batch_size, s.over_sampling_batch_size, s.max_consecutive_failed_groups, s.wandb, s.success_threshold)
    (16, 16, 8, 'off', 0.5)
    >>> validate_settings({"shopsim_max_consecutive_failed_group": 4})[1]
    ["shopsim_max_consecutive_failed_group: unknown key; did you mean 'shopsim_max_consecutive_failed_groups'?"]
"""

from __future__ import annotations

import difflib
import functools
import os
import reprlib
from dataclasses import dataclass, fields
from typing import Any, Callable, Mapping, Sequence

from shopsim_metrics.general.plain_values import is_int
from shopsim_metrics.settings.prompt_skip import SkipRuleSettings, SkipRuleSettingsError
from shopsim_metrics.settings.setting_field import (
    SETTING, SETTINGS_OF, YAML_BOOL_HINT, InvalidValue, choice, flag, integer, number, optional, optional_path,
    setting, settings_of, text,
)

PREFIX = "shopsim_"
DEFAULT_RUN_DIR = "shopsim_run"
SAVE_SUBDIR = "shopsim"
WANDB_MODES = ("auto", "join", "standalone", "off")
PROMPT_SKIP_MODES = ("off", "greso", "predictive")
PROMPT_SKIP = "shopsim_prompt_skip"
WAVE_SIZE_MODES = ("fixed", "adaptive")
PROMPT_SKIP_RULE_PREFIX = "shopsim_prompt_skip_"
"""``shopsim_prompt_skip_<field>`` for every field of :class:`~shopsim_metrics.settings.prompt_skip.SkipRuleSettings`."""
ALERT_LEVELS = ("INFO", "WARN", "ERROR")
SLIME_KNOBS = ("rollout_batch_size", "n_samples_per_prompt", "over_sampling_batch_size", "global_batch_size")
"""slime's knobs the accounting reads (positive integers; ``over_sampling_batch_size`` defaults to
``rollout_batch_size`` and must be >= it)."""

SHOWN_VALUE_CHARS = 80
"""An error message shows at most this much of a value (an alias bomb's value is never formatted whole)."""

_REPR = reprlib.Repr()
_REPR.maxlevel, _REPR.maxlist, _REPR.maxdict, _REPR.maxtuple, _REPR.maxset = 3, 4, 4, 4, 4
_REPR.maxstring = _REPR.maxother = _REPR.maxlong = SHOWN_VALUE_CHARS


def shown(value: Any) -> str:
    """A value as an error message shows it: its ``repr``, bounded (nested containers and long text cut).

    Example:
        >>> shown("x" * 1000)[-5:], len(shown("x" * 1000)) <= SHOWN_VALUE_CHARS + 10
        ("xx...'", True)
        >>> bomb = ["lol"] * 9
        >>> for _ in range(9): bomb = [bomb] * 9       # YAML aliases: 9**10 strings if expanded
        >>> len(shown(bomb)) <= 2 * SHOWN_VALUE_CHARS + 3
        True
    """
    try:
        text = _REPR.repr(value)
    except Exception:  # noqa: BLE001 - a value whose repr raises
        text = f"<unprintable {type(value).__name__}>"
    return text if len(text) <= 2 * SHOWN_VALUE_CHARS else text[: 2 * SHOWN_VALUE_CHARS] + "..."


class ShopsimConfigError(ValueError):
    """A ``shopsim_*`` setting (or a slime knob the project needs) has a value that cannot work."""


# --- the declaration: one ShopsimSettings field per setting -------------------------------------------
@dataclass(frozen=True)
class Setting:
    """One ``shopsim_*`` setting: its default, how its value is read, and its docs line.

    Made from a :class:`ShopsimSettings` or :class:`SkipRuleSettings` field declared with :func:`setting` (see
    :func:`declared_settings`).
    """

    name: str
    default: Any
    parse: Callable[[Any], Any]
    allowed: str  # what the error message says is allowed
    doc: str  # the meaning column of docs §2.2 (markdown)
    bool_hint: str = YAML_BOOL_HINT  # appended to the error when a boolean is not allowed

    def read(self, value: Any) -> Any:
        """The normalised value (None means the default); raises :class:`ShopsimConfigError`.

        Example:
            >>> SETTINGS_BY_NAME["shopsim_alert_warn_level"].read("warn")
            'WARN'
        """
        if value is None:  # YAML's null, or a key slime's args do not carry
            return self.default
        try:
            return self.parse(value)
        except InvalidValue:
            hint = self.bool_hint if isinstance(value, bool) else ""
            raise ShopsimConfigError(f"{self.name}: expected {self.allowed}; got {shown(value)}{hint}") from None

    def from_args(self, args: Any) -> Any:
        """``args.<name>`` read as :meth:`ShopsimSettings.from_args` reads it (absent or None: the default).

        For an adapter that needs one setting before the monitor exists (slime's data source); a bad
        value raises :class:`ShopsimConfigError` (one line).

        Example:
            >>> from types import SimpleNamespace
            >>> SETTINGS_BY_NAME["shopsim_wave_size"].from_args(SimpleNamespace(shopsim_wave_size="Adaptive"))
            'adaptive'
        """
        return self.read(getattr(args, self.name, None))


MAX_WAVE_GROUPS = 1_000_000
"""The most groups a wave may hold (``shopsim_wave_size_cap``): more than slime could ever submit in one wave (its
data source serves at most the rest of an epoch and one whole epoch per call; the CLI bounds every batch knob
alike)."""


@dataclass(frozen=True, kw_only=True)
class ShopsimSettings:
    """The project's settings and the slime knobs it reads, validated once (:meth:`from_args`).

    Each ``shopsim_*`` setting is one field declared with :func:`setting`, named after the key without
    its prefix, but ``shopsim_prompt_skip_<field>``: a field of the :class:`SkipRuleSettings` held in
    ``prompt_skip_rule``. The settings table (:data:`SETTINGS`), check-config, preflight and the docs table
    of §2.2 are derived from these fields in their order. The other fields are read from slime's ``args``.
    """

    # --- slime's knobs and switches (not shopsim_* settings) ---
    rollout_batch_size: int | None
    n_samples_per_prompt: int | None
    over_sampling_batch_size: int | None  # defaults to rollout_batch_size, as in slime
    global_batch_size: int | None
    reward_key: str | None
    wandb_always_use_train_step: bool = False
    inside_slime: bool = False  # args carries slime's own W&B switch (use_wandb)
    use_wandb: bool | None = None
    num_rollout: int | None = None  # slime's --num-rollout: the step ``num_rollout - 1`` ends the run
    start_rollout_id: int = 0  # slime's first step in this process (> 0: resumed from a checkpoint)
    partial_rollout: bool = False  # slime's --partial-rollout: aborted groups are continued in a later step

    # --- the shopsim_* settings, in the order of the docs table ---
    # filter
    max_consecutive_failed_groups: int = setting(
        8, integer(1), "an integer >= 1",
        "technical groups in a row (across steps) that terminate the run with "
        "`shopsim_metrics.errors.TechnicalFailureLimitExceeded`")
    success_threshold: float = setting(
        1.0, number(), "a finite number",
        "a rollout is a success when reward ≥ this, unless its metadata carries the success flag")
    success_metadata_key: str = setting(
        "shopsim_success", text, "a non-empty string",
        "metadata flag set by the environment; when present it decides success")
    unscored_metadata_key: str = setting(
        "shopsim_unscored", text, "a non-empty string",
        "metadata flag: the episode could not be scored (the group is technical, check `metadata_unscored`)")
    # local record
    run_dir: str | None = setting(  # from_args: resolved and absolute (resolve_run_dir); None: the monitor's own
        None, optional_path, "null or a directory path",
        "directory of `steps.jsonl`; `null` means `$SHOPSIM_RUN_DIR`, else `<--save>/shopsim` when "
        "slime's `--save` is set, else `<--load>/shopsim`, else a new `./shopsim_run/run-<UTC time>-<pid>-<random>` per run "
        "(made absolute when the runtime starts, §1.3)")
    # W&B
    wandb: str = setting(
        "auto", choice(WANDB_MODES, booleans={False: "off", True: "auto"}), "one of auto, join, standalone, off",
        "`auto`, `join`, `standalone` or `off` (§1.3); YAML's unquoted `off`/`no`/`false` mean `off`, "
        "`on`/`yes`/`true` mean `auto`")
    wandb_project: str = setting(
        "shopsim-metrics", text, "a non-empty string", "project of a run the project starts itself")
    wandb_init_timeout: float = setting(
        30.0, number(0.0, low_open=True), "a number > 0",
        "seconds a run the project starts itself (`standalone`) may take to start (`wandb.init` on its own "
        "thread, with W&B's own `init_timeout` set too); past them W&B is off for the run with one warning "
        "and every record still goes to `steps.jsonl`; a run that starts late is finished unused")
    wandb_table_every: int = setting(
        10, integer(0), "an integer >= 0",
        "decision-ledger table every N rollout steps (`rollout_id % N == 0`); `0` = only the special "
        "steps (more than one wave, termination)")
    # alerts
    alerts: bool = setting(True, flag, "true or false", "send the technical-streak alerts and the advisories (W&B and log; §3.2)")
    alert_warn_fraction: float = setting(
        0.5, number(0.0, 1.0, low_open=True), "a number in (0, 1]",
        "one WARN per rollout step in which a streak reaches this fraction of the limit (4 of 8)")
    alert_warn_level: str = setting(
        "WARN", choice(ALERT_LEVELS, upper=True), "one of INFO, WARN, ERROR",
        "W&B alert level of the early warning (`INFO`, `WARN`, `ERROR`)")
    alert_error_level: str = setting(
        "ERROR", choice(ALERT_LEVELS, upper=True), "one of INFO, WARN, ERROR",
        "W&B alert level sent just before termination")
    # prompt value over time
    prompt_key: str | None = setting(
        None, optional(text), "null or a metadata key (a non-empty string)",
        "metadata key that names a group's prompt (read from its first sample); `null`, or a group whose "
        "metadata lacks it: a hash of `Sample.prompt` and `label` (§3.5)")
    prompt_history_limit: int = setting(
        1_000_000, integer(0), "an integer >= 0",
        "prompts tracked at most for the prompt-value fields; the least recently seen is evicted first; "
        "`0` = no prompt tracking (the prompt-value fields are null) (§3.5)")
    prompts_table_every: int = setting(
        50, integer(0), "an integer >= 0",
        "prompts table (`rollout/shopsim/prompts`) every N rollout steps and with the run's last step "
        "(`--num-rollout` - 1, or a terminated one); `0` = only with the last step")
    # skipping prompts before generation (shopsimrl.data_source.PromptSkipDataSource)
    prompt_skip: str = setting(
        "off", choice(PROMPT_SKIP_MODES, booleans={False: "off"}), "one of off, greso, predictive",
        "`off`, `greso` or `predictive`: with `--data-source-path shopsimrl.data_source.PromptSkipDataSource`, "
        "`greso` skips prompts whose recent visits were zero-std by GRESO's rule, `predictive` skips a prompt "
        "whose predicted probability of a zero-std group (a forgetting posterior of its success rate) is at "
        "least `shopsim_prompt_skip_threshold`, or low for its token cost (§3.6); YAML's unquoted `off`/`no`/`false` mean `off`",
        bool_hint=" (YAML reads unquoted on/yes/true as a boolean: write greso)")
    # shopsim_prompt_skip_<field>: one per field of SkipRuleSettings, declared there (from_args: the seed's null
    # is slime's --rollout-seed, else 0)
    prompt_skip_rule: SkipRuleSettings = settings_of(SkipRuleSettings, "prompt_skip_")
    # waves sized by the data source (shopsimrl.data_source.PromptSkipDataSource)
    wave_size: str = setting(
        "fixed", choice(WAVE_SIZE_MODES), "one of fixed, adaptive",
        "`fixed` (slime's `over_sampling_batch_size` groups per wave) or `adaptive`: with "
        "`--data-source-path shopsimrl.data_source.PromptSkipDataSource`, each wave holds the groups that fill "
        "`rollout_batch_size` without another wave with probability ≥ `shopsim_wave_fill_probability` (slime's "
        "drop rule played forward over the recent steps' judged groups in finishing order and what the step "
        "still needs, §3.7)")
    wave_fill_probability: float = setting(
        0.95, number(0.0, 1.0, low_open=True), "a number in (0, 1]",
        "with `shopsim_wave_size: adaptive`: the probability a wave (with the groups still generating) fills "
        "the train batch without another wave")
    wave_size_cap: int | None = setting(
        None, optional(integer(1, MAX_WAVE_GROUPS)), f"null or an integer from 1 to {MAX_WAVE_GROUPS:,}",
        "with `shopsim_wave_size: adaptive`: most groups per wave; `null` = `over_sampling_batch_size` "
        "(a wave is never smaller than slime needs to leave its inner loop, `rollout_batch_size − remaining`); "
        f"at most {MAX_WAVE_GROUPS:,}, more than slime could ever submit in one wave")
    # slime's fully-async path (shopsimrl.async_rollout.generate_rollout_fully_async)
    async_zero_std_drop_limit: int | None = setting(
        None, optional(integer(0)), "null or an integer >= 0",
        "on the fully-async path: zero-std groups a step drops before it lets every further zero-std group in "
        "as `fallback` (the bound on what a starving step waits for); `null` = `rollout_batch_size`; `0` = "
        "never drop a zero-std group (§3.8)")
    # miles (shopsimrl.miles_generate: tokens counted where miles has no sample hook)
    generate_function_path: str | None = setting(
        None, optional(text), "null or a dotted path (a non-empty string)",
        "in miles, with `--custom-generate-function-path shopsimrl.miles_generate.count_generated_tokens`: the generate function it wraps and counts every token of (a dotted path, e.g. a multi-turn one); `null` = miles' default for the rollout in use (docs/miles.md)")

    @classmethod
    def from_args(cls, args: Any) -> "ShopsimSettings":
        """Read and check ``args``; every problem (unknown ``shopsim_*`` key included) in one error.

        Every declared setting is read by its table row (no list of names here: a new field declared
        with :func:`setting`, here or in :class:`SkipRuleSettings`, is read with nothing else to change); the
        skip rule's seed, when ``null``, is slime's ``rollout_seed``. Raises :class:`ShopsimConfigError`
        with one line per problem.

        Example:
            >>> from types import SimpleNamespace
            >>> rule = ShopsimSettings.from_args(SimpleNamespace(shopsim_prompt_skip_floor="2e-2", rollout_seed=7)).prompt_skip_rule
            >>> rule.floor, rule.seed
            (0.02, 7)
        """
        table = declared_settings(cls)
        values, problems = validate_settings(shopsim_attributes(args), table)
        knobs, knob_problems = validate_slime_knobs({k: getattr(args, k, None) for k in SLIME_KNOBS})
        problems += knob_problems
        if problems:
            raise ShopsimConfigError(
                "invalid shopsim settings (check the --custom-config-path YAML before launch with "
                "`shopsim-metrics check-config <yaml>`):\n  " + "\n  ".join(problems)
            )
        read = {f.name: values[PREFIX + f.name] for f in fields(cls) if SETTING in f.metadata}
        read["run_dir"] = resolve_run_dir(read["run_dir"], getattr(args, "save", None), load=getattr(args, "load", None))
        rollout_batch_size = knobs["rollout_batch_size"]
        return cls(
            **read,
            prompt_skip_rule=skip_rule_settings(values, getattr(args, "rollout_seed", None)),
            rollout_batch_size=rollout_batch_size,
            n_samples_per_prompt=knobs["n_samples_per_prompt"],
            over_sampling_batch_size=knobs["over_sampling_batch_size"] or rollout_batch_size,
            global_batch_size=knobs["global_batch_size"],
            reward_key=getattr(args, "reward_key", None) or None,
            wandb_always_use_train_step=bool(getattr(args, "wandb_always_use_train_step", False)),
            inside_slime=hasattr(args, "use_wandb"),
            use_wandb=getattr(args, "use_wandb", None),
            num_rollout=_whole_or_none(getattr(args, "num_rollout", None)),
            start_rollout_id=_whole_or_none(getattr(args, "start_rollout_id", None)) or 0,
            partial_rollout=getattr(args, "partial_rollout", False) is True,
        )


@functools.cache
def declared_settings(cls: type = ShopsimSettings, prefix: str = PREFIX) -> tuple[Setting, ...]:
    """The settings table of a settings class: one row per field declared with :func:`setting`, in order,
    named ``<prefix><field>``; a field declared with :func:`settings_of` gives the rows of its class there,
    named ``<prefix><its prefix><field>`` (the skip rule's: ``shopsim_prompt_skip_<field>``).

    Example:
        >>> [s.name for s in declared_settings()][:2]
        ['shopsim_max_consecutive_failed_groups', 'shopsim_success_threshold']
        >>> [s.name for s in declared_settings(SkipRuleSettings, PROMPT_SKIP_RULE_PREFIX)][:2]
        ['shopsim_prompt_skip_target_share', 'shopsim_prompt_skip_easy_share_of_target']
    """
    rows: list[Setting] = []
    for f in fields(cls):
        if SETTING in f.metadata:
            rows.append(Setting(prefix + f.name, **{"default": f.default, **f.metadata[SETTING]}))
        elif SETTINGS_OF in f.metadata:
            nested, nested_prefix = f.metadata[SETTINGS_OF]
            rows.extend(declared_settings(nested, prefix + nested_prefix))
    return tuple(rows)


SETTINGS: tuple[Setting, ...] = declared_settings(ShopsimSettings)
"""Every ``shopsim_*`` setting, from the fields of :class:`ShopsimSettings` and :class:`SkipRuleSettings` (the one
declaration)."""
SETTINGS_BY_NAME: dict[str, Setting] = {s.name: s for s in SETTINGS}
DEFAULTS: dict[str, Any] = {s.name: s.default for s in SETTINGS}
"""Every ``shopsim_*`` key at its default (``examples/shopsim.yaml`` lists exactly these)."""
SKIP_RULE_SETTINGS: tuple[Setting, ...] = declared_settings(SkipRuleSettings, PROMPT_SKIP_RULE_PREFIX)
"""The ``shopsim_prompt_skip_<field>`` settings, one per field of :class:`SkipRuleSettings`."""


def closest_key(key: str) -> str | None:
    """The known setting a misspelled key most likely meant (difflib), or None.

    Example:
        >>> closest_key("shopsim_wandb_proj")
        'shopsim_wandb_project'
    """
    suffixes = [name[len(PREFIX):] for name in SETTINGS_BY_NAME]  # the shared prefix would match anything
    match = difflib.get_close_matches(key[len(PREFIX):] if key.startswith(PREFIX) else key, suffixes, n=1, cutoff=0.6)
    return PREFIX + match[0] if match else None


def unknown_key_problem(key: str) -> str:
    """The one-line problem of an unknown ``shopsim_*`` key."""
    near = closest_key(key)
    hint = f"did you mean {near!r}?" if near else f"known keys: {', '.join(SETTINGS_BY_NAME)}"
    return f"{key if len(key) <= SHOWN_VALUE_CHARS else key[:SHOWN_VALUE_CHARS] + '...'}: unknown key; {hint}"


def validate_settings(values: Mapping[str, Any], table: Sequence[Setting] | None = None
                      ) -> tuple[dict[str, Any], list[str]]:
    """Read every ``shopsim_*`` key of ``values``: (every setting's value, defaults filled in; problems).

    Keys without the ``shopsim_`` prefix are not looked at. Each problem is one line. ``table``: the
    settings to read (default :data:`SETTINGS`; a subclass of :class:`ShopsimSettings` passes its own).

    Example:
        >>> settings, problems = validate_settings({"shopsim_wandb": "loud", "rollout_batch_size": 16})
        >>> settings["shopsim_alerts"], problems
        (True, ["shopsim_wandb: expected one of auto, join, standalone, off; got 'loud'"])
    """
    table = SETTINGS if table is None else table
    known = {row.name for row in table}
    problems: list[str] = []
    for key in values:
        if isinstance(key, str) and key.startswith(PREFIX) and key not in known:
            problems.append(unknown_key_problem(key))
    result: dict[str, Any] = {}
    for row in table:
        try:
            result[row.name] = row.read(values.get(row.name))
        except ShopsimConfigError as exc:
            problems.append(str(exc))
            result[row.name] = row.default
    if not any(p.startswith(PROMPT_SKIP_RULE_PREFIX) for p in problems):
        try:
            skip_rule_settings(result)
        except ShopsimConfigError as exc:
            problems.append(str(exc))
    return result, problems


def skip_rule_settings(values: Mapping[str, Any], rollout_seed: Any = None) -> SkipRuleSettings:
    """GRESO's rule settings from validated ``shopsim_prompt_skip_<field>`` values (the one place they are read).

    The seed defaults to slime's ``rollout_seed`` (a non-negative int), else 0. A combination that
    cannot work (``p_min > p_max``, a start outside them) is a :class:`ShopsimConfigError` naming the key.

    Example:
        >>> skip_rule_settings(validate_settings({"shopsim_prompt_skip_floor": "2e-2"})[0], rollout_seed=42)
        SkipRuleSettings(target_share=0.25, easy_share_of_target=0.3333333333333333, floor=0.02, step=0.01, p_min=0.05, p_max=0.95, p_easy_start=0.5, p_hard_start=0.5, seed=42, threshold=0.7, forgetting=0.995, min_yield=0.11, max_lost_signal=0.1, probe_every=8)
        >>> skip_rule_settings({"shopsim_prompt_skip_p_min": 0.92, "shopsim_prompt_skip_p_max": 0.9})
        Traceback (most recent call last):
        ...
        shopsim_metrics.settings.shopsim_settings.ShopsimConfigError: shopsim_prompt_skip_p_min: expected a number <= p_max (0.9); got 0.92
    """
    kwargs = {}
    for rule_field in fields(SkipRuleSettings):
        value = values.get(PROMPT_SKIP_RULE_PREFIX + rule_field.name)
        if value is not None:
            kwargs[rule_field.name] = value
    if "seed" not in kwargs and is_int(rollout_seed) and rollout_seed >= 0:
        kwargs["seed"] = rollout_seed
    try:
        return SkipRuleSettings(**kwargs)
    except SkipRuleSettingsError as exc:
        raise ShopsimConfigError(f"{PROMPT_SKIP_RULE_PREFIX}{exc.field}: expected {exc.expected}; "
                                 f"got {shown(exc.value)}") from None


def validate_slime_knobs(values: Mapping[str, Any]) -> tuple[dict[str, int | None], list[str]]:
    """Read slime's knobs the accounting needs (absent or None: None), with one line per problem.

    The one check of ``over_sampling_batch_size >= rollout_batch_size`` (the accountant and the
    simulator take their knobs from validated settings).

    Example:
        >>> validate_slime_knobs({"rollout_batch_size": 16, "over_sampling_batch_size": 8})[1]
        ['over_sampling_batch_size: expected an integer >= rollout_batch_size (16); got 8']
    """
    knobs: dict[str, int | None] = {}
    problems: list[str] = []
    for key in SLIME_KNOBS:
        value = values.get(key)
        if value is not None and (not is_int(value) or value < 1):
            problems.append(f"{key}: expected a positive integer; got {shown(value)}")
            value = None
        knobs[key] = value
    rollout_batch_size, over = knobs["rollout_batch_size"], knobs["over_sampling_batch_size"]
    if rollout_batch_size is not None and over is not None and over < rollout_batch_size:
        problems.append(f"over_sampling_batch_size: expected an integer >= rollout_batch_size ({rollout_batch_size}); got {over}")
    return knobs, problems


def resolve_run_dir(run_dir: str | None, save: Any = None, environ: Mapping[str, str] | None = None,
                    load: Any = None) -> str | None:
    """The absolute directory of ``steps.jsonl``: ``shopsim_run_dir``, else ``$SHOPSIM_RUN_DIR``, else
    ``<save>/shopsim`` (slime's checkpoint directory, normally on shared storage), else ``<load>/shopsim``
    (a resume that saves nothing more), else None: a new directory per run, which the monitor makes when it
    starts (:func:`fresh_run_dir`), so reading the settings twice gives the same settings.

    Relative paths resolve against the current directory of the process that resolves them.

    Example:
        >>> resolve_run_dir(None, save="/ckpt/run1", environ={})
        '/ckpt/run1/shopsim'
        >>> resolve_run_dir("/data/x", save="/ckpt/run1", environ={})
        '/data/x'
        >>> resolve_run_dir(None, environ={}) is None
        True
    """
    environ = os.environ if environ is None else environ
    if run_dir:
        chosen = run_dir
    elif environ.get("SHOPSIM_RUN_DIR"):
        chosen = environ["SHOPSIM_RUN_DIR"]
    elif isinstance(save, (str, os.PathLike)) and os.fspath(save):
        chosen = os.path.join(os.fspath(save), SAVE_SUBDIR)
    elif isinstance(load, (str, os.PathLike)) and os.fspath(load):
        chosen = os.path.join(os.fspath(load), SAVE_SUBDIR)
    else:
        return None
    return os.path.abspath(os.path.expanduser(chosen))


def fresh_run_dir() -> str:
    """The directory of a run without ``shopsim_run_dir``, ``--save`` or ``--load``: ``./shopsim_run/run-<UTC
    start>-<pid>-<random>``, absolute (unique per run: runs started in one working directory never share their
    records).

    >>> a, b = fresh_run_dir(), fresh_run_dir()
    >>> a != b and os.path.basename(os.path.dirname(a)) == DEFAULT_RUN_DIR and os.path.isabs(a)
    True
    """
    import time
    import uuid

    name = f"run-{time.strftime('%Y%m%dT%H%M%S', time.gmtime())}-{os.getpid()}-{uuid.uuid4().hex[:6]}"
    return os.path.abspath(os.path.join(DEFAULT_RUN_DIR, name))


def shopsim_attributes(args: Any) -> dict[str, Any]:
    """Every ``shopsim_*`` attribute of ``args`` (slime's namespace, or any object)."""
    names = [n for n in dir(args) if n.startswith(PREFIX)]
    return {n: getattr(args, n, None) for n in names}


def missing_knobs(args: Any) -> list[str]:
    """The accounting knobs ``args`` lacks (None or absent), besides ``over_sampling_batch_size``.

    Without ``rollout_batch_size`` nothing is accounted; without ``n_samples_per_prompt`` short groups
    are not caught; without ``global_batch_size`` ``optimizer_update_count`` is not computed.
    """
    return [k for k in SLIME_KNOBS if k != "over_sampling_batch_size" and getattr(args, k, None) is None]


def _whole_or_none(value: Any) -> int | None:
    """A step count slime set (a non-negative int), else None: these are slime's, never a user's typo.

    Example:
        >>> _whole_or_none(3), _whole_or_none(None), _whole_or_none(-1), _whole_or_none(True)
        (3, None, None, None)
    """
    return value if is_int(value) and value >= 0 else None


_LOST_WITHOUT = {
    "rollout_batch_size": "no step is accounted or recorded (the filter still judges every group and the "
                          "failure limit still holds)",
    "n_samples_per_prompt": "groups with missing siblings are not caught (check too_few_rollouts is off)",
    "global_batch_size": "optimizer_update_count is not computed",
}


def missing_knobs_warning(args: Any) -> str | None:
    """One warning naming every accounting knob ``args`` lacks and what is lost, or None."""
    missing = missing_knobs(args)
    if not missing:
        return None
    lost = "; ".join(f"without {k}, {_LOST_WITHOUT[k]}" for k in missing)
    return (f"shopsim-metrics: slime's args lack {', '.join(missing)}: {lost}. Pass them on slime's command "
            "line (--rollout-batch-size, --n-samples-per-prompt, --global-batch-size).")
