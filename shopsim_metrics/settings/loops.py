"""Which rollout loop loads the hooks (slime, its production fork miles, or neither), and what each cannot honour.

slime (THUDM) and miles (radixark, slime's production fork) take the same hook flags, but their loops differ
where the project depends on them: miles' ``DynamicFilterOutput`` has no ``keep_when_insufficient`` (a
filter's fallback must be decided by the filter itself), its class-based rollout (``InferenceRolloutFn``) has
no ``remaining_batch_size``, it has no ``--rollout-sample-hook-path`` and no live rollout id, and its
fully-async rollout is its own. So the hooks first know which loop they are in (:func:`detect_loop`), and where
they cannot honour a launch in it they stop with one line (:func:`unsupported`), before a step runs, instead
of recording what did not happen.

The loop is told by the packages already imported in the process (the loop that loads a hook by dotted path
has imported its own package), else by the one importable; both imported (or, with neither imported, both
importable) cannot be told apart and is refused (:class:`LoopUnknown`). Nothing is imported here.

Example:
    >>> detect_loop({"miles": object()}, importable=lambda name: False)
    'miles'
    >>> detect_loop({}, importable=lambda name: name == "slime")
    'slime'
    >>> detect_loop({}, importable=lambda name: False)
    'none'
    >>> from types import SimpleNamespace
    >>> unsupported("miles", SimpleNamespace(fully_async=True))
    ["miles' --fully-async: not supported by shopsim-metrics (its rollout calls the filter with no step to close and refuses the all-samples hook, so no step could be recorded as miles trained it); run miles' synchronous rollout (docs/miles.md)"]
"""

from __future__ import annotations

import importlib.util
import sys
from typing import Any, Callable, Mapping

from shopsim_metrics.record.contract import ASYNC_ROLLOUT_PATH, DATA_SOURCE_PATH
from shopsim_metrics.settings.shopsim_settings import ShopsimConfigError, shopsim_attributes

SLIME, MILES, NO_LOOP = "slime", "miles", "none"
LOOPS = (SLIME, MILES, NO_LOOP)
"""The loops the hooks can be loaded by: slime, miles, or neither (the simulator, tests, notebooks)."""



class LoopUnknown(ImportError):
    """Both slime and miles are in the process and neither can be told to be the loop: the hooks refuse to guess."""


class LoopUnsupported(ShopsimConfigError):
    """The launch asks for what the hooks cannot honour in the loop they run in (one line per thing)."""


def check_launch(loop: str, args: Any) -> None:
    """Raise :class:`LoopUnsupported` with one line per thing the hooks cannot honour in ``loop`` (see
    :func:`unsupported`, and in miles the ``shopsim_*`` settings :func:`miles_settings_unsupported` names).

    Example:
        >>> from types import SimpleNamespace
        >>> check_launch("miles", SimpleNamespace(shopsim_wave_size="fixed"))
        >>> check_launch("miles", SimpleNamespace(shopsim_prompt_skip="greso"))
        Traceback (most recent call last):
        ...
        shopsim_metrics.settings.loops.LoopUnsupported: shopsim_prompt_skip: greso acts only through the prompt-skipping data source, which miles cannot run; set it to off (docs/miles.md)
    """
    lines = unsupported(loop, args)
    if loop == MILES:
        lines += miles_settings_unsupported(shopsim_attributes(args))
    if lines:
        raise LoopUnsupported("\n".join(lines))


def _importable(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def detect_loop(modules: Mapping[str, Any] | None = None, *,
                importable: Callable[[str], bool] = _importable) -> str:
    """``"slime"``, ``"miles"`` or ``"none"``: the loop this process runs (see the module docstring).

    Raises :class:`LoopUnknown` (one line) when both are imported, or neither is and both are importable.

    Example:
        >>> detect_loop({"slime": 1, "miles": 2})
        Traceback (most recent call last):
        ...
        shopsim_metrics.settings.loops.LoopUnknown: shopsim-metrics: both slime and miles are imported in this process, so the hooks cannot tell which loop calls them; run them where only one of the two is installed
    """
    modules = sys.modules if modules is None else modules
    imported = [loop for loop in (SLIME, MILES) if loop in modules]
    if len(imported) == 1:
        return imported[0]
    if len(imported) == 2:
        raise LoopUnknown("shopsim-metrics: both slime and miles are imported in this process, so the hooks cannot "
                          "tell which loop calls them; run them where only one of the two is installed")
    found = [loop for loop in (SLIME, MILES) if importable(loop)]
    if len(found) == 2:
        raise LoopUnknown("shopsim-metrics: both slime and miles are importable and neither is imported yet, so the "
                          "hooks cannot tell which loop will call them; run them where only one of the two is "
                          "installed")
    return found[0] if found else NO_LOOP


def unsupported(loop: str, args: Any) -> list[str]:
    """One line for each thing of the launch ``args`` the hooks cannot honour in ``loop`` (empty: all honoured).

    miles: its ``--fully-async`` rollout, ``--rollout-submission-granularity sample`` (waves no longer open as
    the filter's fallback assumes), the project's fully-async rollout function and prompt-skipping data source
    (both built on slime's own classes). slime and no loop: nothing here (slime's own checks are
    :mod:`shopsim_metrics.settings.preflight`'s).

    Example:
        >>> from types import SimpleNamespace
        >>> unsupported("miles", SimpleNamespace(rollout_submission_granularity="group", fully_async=False))
        []
        >>> unsupported("slime", SimpleNamespace(fully_async=True))
        []
    """
    if loop != MILES:
        return []
    lines = []
    if getattr(args, "fully_async", False) is True:
        lines.append("miles' --fully-async: not supported by shopsim-metrics (its rollout calls the filter with no "
                     "step to close and refuses the all-samples hook, so no step could be recorded as miles trained "
                     "it); run miles' synchronous rollout (docs/miles.md)")
    if getattr(args, "rollout_submission_granularity", None) == "sample":
        lines.append("--rollout-submission-granularity sample: not supported by shopsim-metrics in miles (a group "
                     "is submitted as samples free up, not in waves of over_sampling_batch_size, so the filter's "
                     "fallback and the recorded waves would not be miles'); leave it unset or set it to group "
                     "(docs/miles.md)")
    if getattr(args, "rollout_function_path", None) == ASYNC_ROLLOUT_PATH:
        lines.append(f"--rollout-function-path {ASYNC_ROLLOUT_PATH}: slime's fully-async rollout, which miles does "
                     "not have (no AsyncRolloutWorker); run miles' synchronous rollout (docs/miles.md)")
    if getattr(args, "data_source_path", None) == DATA_SOURCE_PATH:
        lines.append(f"--data-source-path {DATA_SOURCE_PATH}: not supported in miles (it wraps slime's data "
                     "source); prompt skipping and adaptive waves are slime-only, leave --data-source-path at "
                     "miles' default (docs/miles.md)")
    return lines


def miles_settings_unsupported(settings: Mapping[str, Any]) -> list[str]:
    """One line for each ``shopsim_*`` setting that acts only through what miles cannot run (empty: none).

    Example:
        >>> miles_settings_unsupported({"shopsim_prompt_skip": "greso", "shopsim_wave_size": "fixed"})
        ['shopsim_prompt_skip: greso acts only through the prompt-skipping data source, which miles cannot run; set it to off (docs/miles.md)']
    """
    lines = []
    skip = settings.get("shopsim_prompt_skip")
    if skip not in (None, False, "off"):
        lines.append(f"shopsim_prompt_skip: {skip} acts only through the prompt-skipping data source, which miles "
                     "cannot run; set it to off (docs/miles.md)")
    if settings.get("shopsim_wave_size") == "adaptive":
        lines.append("shopsim_wave_size: adaptive acts only through the prompt-skipping data source, which miles "
                     "cannot run; set it to fixed (docs/miles.md)")
    return lines
