"""The ``shopsim_*`` settings, read from slime's ``args`` (set through ``--custom-config-path`` YAML).

Every attribute the project reads from ``args`` is listed in :data:`DEFAULTS` with its default, and
validated with an error that names the key, what is allowed and what was received. slime's own
knobs (``rollout_batch_size`` ...) are read as they are; a bare ``args`` (slime's contract tests)
lacks most of them, which is allowed: they are then ``None``.

Example:
    >>> from types import SimpleNamespace
    >>> s = ShopsimSettings.from_args(SimpleNamespace(rollout_batch_size=16, n_samples_per_prompt=8))
    >>> (s.rollout_batch_size, s.over_sampling_batch_size, s.max_consecutive_failed_groups)
    (16, 16, 8)
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

DEFAULTS: dict[str, Any] = {
    # filter
    "shopsim_max_consecutive_failed_groups": 8,  # terminate when this many technical groups come in a row
    "shopsim_success_threshold": 1.0,  # reward >= this is a success (when no metadata flag)
    "shopsim_success_metadata_key": "shopsim_success",  # metadata flag set by the environment
    "shopsim_unscored_metadata_key": "shopsim_unscored",  # metadata flag: the episode could not be scored
    # local record
    "shopsim_run_dir": None,  # None: $SHOPSIM_RUN_DIR, else ./shopsim_run
    # W&B
    "shopsim_wandb": "auto",  # auto | join | standalone | off
    "shopsim_wandb_project": "shopsim-metrics",  # for a standalone run
    "shopsim_wandb_table_every": 10,  # decision-ledger table every N steps (0: only special steps)
    # alerts
    "shopsim_alerts": True,
    "shopsim_alert_warn_fraction": 0.5,  # WARN when the streak reaches this fraction of the limit
    "shopsim_alert_warn_level": "WARN",
    "shopsim_alert_error_level": "ERROR",
}

DEFAULT_RUN_DIR = "shopsim_run"
WANDB_MODES = ("auto", "join", "standalone", "off")
ALERT_LEVELS = ("INFO", "WARN", "ERROR")


class ShopsimConfigError(ValueError):
    """A ``shopsim_*`` setting (or a slime knob the project needs) has a value that cannot work."""


@dataclass(frozen=True)
class ShopsimSettings:
    """The project's settings and the slime knobs it reads, validated once."""

    rollout_batch_size: int | None
    n_samples_per_prompt: int | None
    over_sampling_batch_size: int | None  # defaults to rollout_batch_size, as in slime
    global_batch_size: int | None
    reward_key: str | None
    max_consecutive_failed_groups: int
    success_threshold: float
    success_metadata_key: str
    unscored_metadata_key: str
    run_dir: str | None
    wandb: str
    wandb_project: str
    wandb_table_every: int
    alerts: bool
    alert_warn_fraction: float
    alert_warn_level: str
    alert_error_level: str
    wandb_always_use_train_step: bool = False
    inside_slime: bool = False  # args carries slime's own W&B switch (use_wandb)
    use_wandb: bool | None = None

    @classmethod
    def from_args(cls, args: Any) -> "ShopsimSettings":
        def get(key: str) -> Any:
            value = getattr(args, key, None)
            return DEFAULTS[key] if value is None else value

        rollout_batch_size = _optional_positive_int(args, "rollout_batch_size")
        over_sampling_batch_size = _optional_positive_int(args, "over_sampling_batch_size") or rollout_batch_size
        # the one check of over_sampling_batch_size >= rollout_batch_size (the accountant and the
        # simulator take their knobs from validated settings)
        if (rollout_batch_size is not None and over_sampling_batch_size is not None
                and over_sampling_batch_size < rollout_batch_size):
            raise ShopsimConfigError(
                f"over_sampling_batch_size must be >= rollout_batch_size ({rollout_batch_size}); "
                f"got {over_sampling_batch_size}"
            )
        max_consecutive_failed_groups = get("shopsim_max_consecutive_failed_groups")
        if (isinstance(max_consecutive_failed_groups, bool) or not isinstance(max_consecutive_failed_groups, int)
                or max_consecutive_failed_groups < 1):
            raise ShopsimConfigError(
                "shopsim_max_consecutive_failed_groups must be an integer >= 1 "
                f"(set it in the --custom-config-path YAML); got {max_consecutive_failed_groups!r}"
            )
        threshold = get("shopsim_success_threshold")
        if isinstance(threshold, bool) or not isinstance(threshold, (int, float)) or not math.isfinite(threshold):
            raise ShopsimConfigError(f"shopsim_success_threshold must be a finite number; got {threshold!r}")
        mode = str(get("shopsim_wandb")).lower()
        if mode not in WANDB_MODES:
            raise ShopsimConfigError(f"shopsim_wandb must be one of {WANDB_MODES}; got {mode!r}")
        every = get("shopsim_wandb_table_every")
        if isinstance(every, bool) or not isinstance(every, int) or every < 0:
            raise ShopsimConfigError(f"shopsim_wandb_table_every must be an integer >= 0; got {every!r}")
        fraction = get("shopsim_alert_warn_fraction")
        if isinstance(fraction, bool) or not isinstance(fraction, (int, float)) or not 0 < fraction <= 1:
            raise ShopsimConfigError(f"shopsim_alert_warn_fraction must be in (0, 1]; got {fraction!r}")
        levels = {}
        for key in ("shopsim_alert_warn_level", "shopsim_alert_error_level"):
            level = str(get(key)).upper()
            if level not in ALERT_LEVELS:
                raise ShopsimConfigError(f"{key} must be one of {ALERT_LEVELS}; got {get(key)!r}")
            levels[key] = level
        alerts = get("shopsim_alerts")
        if not isinstance(alerts, bool):
            raise ShopsimConfigError(f"shopsim_alerts must be true or false; got {alerts!r}")
        reward_key = getattr(args, "reward_key", None)
        return cls(
            rollout_batch_size=rollout_batch_size,
            n_samples_per_prompt=_optional_positive_int(args, "n_samples_per_prompt"),
            over_sampling_batch_size=over_sampling_batch_size,
            global_batch_size=_optional_positive_int(args, "global_batch_size"),
            reward_key=reward_key or None,
            max_consecutive_failed_groups=max_consecutive_failed_groups,
            success_threshold=float(threshold),
            success_metadata_key=str(get("shopsim_success_metadata_key")),
            unscored_metadata_key=str(get("shopsim_unscored_metadata_key")),
            run_dir=getattr(args, "shopsim_run_dir", None),
            wandb=mode,
            wandb_project=str(get("shopsim_wandb_project")),
            wandb_table_every=every,
            alerts=alerts,
            alert_warn_fraction=float(fraction),
            alert_warn_level=levels["shopsim_alert_warn_level"],
            alert_error_level=levels["shopsim_alert_error_level"],
            wandb_always_use_train_step=bool(getattr(args, "wandb_always_use_train_step", False)),
            inside_slime=hasattr(args, "use_wandb"),
            use_wandb=getattr(args, "use_wandb", None),
        )


def _optional_positive_int(args: Any, key: str) -> int | None:
    value = getattr(args, key, None)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ShopsimConfigError(f"{key} must be a positive integer; got {value!r}")
    return value
