"""miles' ``--custom-generate-function-path shopsimrl.miles_generate.count_generated_tokens``: every generated token
counted, as slime's sample hook counts them (miles has no ``--rollout-sample-hook-path``).

Where miles lets a package see every finished sample (read from miles 31f1ca9): its generate function. Both of
its rollouts (``sglang_rollout`` and ``InferenceRolloutFn``) call ``--custom-generate-function-path`` once per
rollout sample that starts, through ``load_generate_function``, with a ``GenerateFnInput``, and it returns when
the sample is finished or aborted (an aborted sample holds the tokens made before the abort), before its reward;
a sample aborted before it started is never passed to it (slime's sample hook skips those too). The
all-samples hook sees only the judged groups (no aborted one), and miles' trajectory probe
(``TrajectoryLifecycle().sink``) is the dashboard's one slot. So this wrapper calls the generate function the
launch would have used and counts each sample it returns (each leaf of a fan-out) with the sample hook's
rules (:meth:`shopsim_metrics.hooks.Hooks.sample`); the records say so (``token_count_source:
generate_function``).

The generate function wrapped: ``shopsim_generate_function_path`` (in the ``--custom-config-path`` YAML) when
set (a custom multi-turn or agent function), else miles' default for the rollout in use
(``miles.rollout.sglang_rollout.generate`` on the old rollout, ``miles.rollout.generate_hub.single_turn.generate``
on ``InferenceRolloutFn``). A sample's own ``generate_function_path`` (an evaluation dataset's) is left to miles.
Evaluation samples are not counted. The wrapper never reads the monitor's settings as a whole (a bad setting is
refused by the filter's first call, as in slime): miles' class-based rollout logs a generate function's error and
goes on, so an error here would repeat for every sample instead of stopping the run; ``preflight`` checks that the
wrapped path loads.

Example:
    >>> import inspect
    >>> list(inspect.signature(count_generated_tokens).parameters)   # miles' class-based generate signature
    ['input']
"""

from __future__ import annotations

from typing import Any

from shopsim_metrics.record.contract import MILES_GENERATE_PATH
from shopsim_metrics.settings import SETTINGS_BY_NAME
from shopsimrl.slime_runtime import HOOKS

__all__ = ["count_generated_tokens", "TOKEN_SOURCE", "GENERATE_SETTING"]

TOKEN_SOURCE = "generate_function"
"""``token_count_source`` of a step whose tokens this wrapper counted."""
GENERATE_SETTING = "shopsim_generate_function_path"
"""The ``--custom-config-path`` key naming the generate function to wrap (unset: miles' default)."""

_OLD_ROLLOUT_GENERATE = "miles.rollout.sglang_rollout.generate"
_INFERENCE_ROLLOUT_GENERATE = "miles.rollout.generate_hub.single_turn.generate"
_wrapped: dict[str, Any] = {}  # path -> miles' adapted generate function (loaded once)


def _inner_path(args: Any, state: Any) -> str:
    path = SETTINGS_BY_NAME[GENERATE_SETTING].from_args(args)  # a bad value: one line, logged by miles per sample
    if path:
        return path
    old = type(state).__module__ == "miles.rollout.sglang_rollout"
    return _OLD_ROLLOUT_GENERATE if old else _INFERENCE_ROLLOUT_GENERATE


def _generate_function(path: str) -> Any:
    fn = _wrapped.get(path)
    if fn is None:
        from miles.rollout.inference_rollout.compatibility import load_generate_function  # type: ignore[import-not-found]

        if path == MILES_GENERATE_PATH:
            raise ValueError(f"{GENERATE_SETTING}: {path} would wrap itself; name the generate function to count "
                             "(or leave it unset for miles' default)")
        fn = _wrapped[path] = load_generate_function(path)
    return fn


async def count_generated_tokens(input: Any) -> Any:
    """miles' generate function: the wrapped one's output, unchanged, once every sample it returns is counted."""
    args = input.state.args
    output = await _generate_function(_inner_path(args, input.state))(input)
    if not input.evaluation:
        samples = output.samples
        for sample in samples if isinstance(samples, list) else (samples,):
            HOOKS.sample(args, sample, source=TOKEN_SOURCE)
    return output
