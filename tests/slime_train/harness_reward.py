"""Reward function for slime's ``--custom-rm-path``: rewards fixed per prompt by the dataset, or read from a trace.

Each dataset row's metadata names a ``reward_kind``; a group's rollouts are told apart by their
position in the group (slime numbers a group's samples consecutively: ``index % n``):

- ``spread``: 1.0 for even positions, 0.0 for odd ones (the group has spread);
- ``all_pass`` / ``all_fail``: 1.0 / 0.0 for every rollout (zero-std: dropped or fallback);
- ``technical``: no reward (None) for position 0, spread otherwise (the filter's technical drop);
- ``trace``: the recorded outcome of the row's ``trace_key`` in the trace file ``args.harness_trace_path``
  (a key of the ``--custom-config-path`` YAML), at the training time of the step the group was generated
  in: the prompt's visit nearest to that time (:meth:`shopsim_metrics.outcomes.trace.Trace.visit_at`, step
  ``s`` of ``args.num_rollout``) decides how many of the group's ``n`` rollouts succeed, exactly ``k`` of
  them: positions ``0 .. k-1`` get 1.0, the others 0.0.

The step comes from slime itself: :func:`stamp_rollout_step` is a rollout sample hook
(``--rollout-sample-hook-path harness_reward.stamp_rollout_step``), which slime calls after every generate
call and before the reward, with its live ``rollout_id``; it writes it into the sample's metadata
(``harness_rollout_step``), where the reward reads it. A ``trace`` row without the stamp is an error, not a
guess. (Not slime's private ``_current_rollout_id``, nor a file the harness writes between steps: the hook
is slime's public interface and gives the step the group was generated in, at no race.)

An engine answer that was aborted or empty gets no reward either.

With ``args.harness_reward_log`` (a key of the ``--custom-config-path`` YAML) every reward returned is also
appended there as one JSON line (the step stamp, the sample's ``group_index``, ``index`` and ``prompt_id``,
and the reward): what the reward function returned, for a test to compare slime's dumps with.
"""

from __future__ import annotations

import json
from functools import lru_cache

REWARD_KINDS = ("spread", "all_pass", "all_fail", "technical", "trace")
STEP_KEY = "harness_rollout_step"
"""The metadata key :func:`stamp_rollout_step` writes slime's rollout id into."""
REWARD_LOG_ARG = "harness_reward_log"
"""The ``args`` attribute naming the JSONL file every returned reward is appended to (none: not logged)."""
TRACE_PATH_ARG = "harness_trace_path"
"""The ``args`` attribute (a key of the ``--custom-config-path`` YAML) naming the trace file of ``trace`` rows."""


def reward_for(kind: str, position: int) -> float | None:
    """The scripted reward of the rollout at ``position`` in a group of prompt kind ``kind`` (not ``trace``)."""
    if kind not in REWARD_KINDS or kind == "trace":
        raise ValueError(f"reward_kind must be one of {REWARD_KINDS[:-1]}, got {kind!r}")
    if kind == "all_pass":
        return 1.0
    if kind == "all_fail":
        return 0.0
    if kind == "technical" and position == 0:
        return None
    return 1.0 if position % 2 == 0 else 0.0


@lru_cache(maxsize=4)
def _trace(path: str, n_samples: int):
    from shopsim_metrics.outcomes.trace import load_trace

    trace = load_trace(path, n_samples)
    return trace, {key: i for i, key in enumerate(trace.prompts)}


def trace_successes(path: str, n_samples: int, key: str, step: int, steps: int) -> int:
    """Successes of ``n_samples`` for trace prompt ``key`` drawn at step ``step`` of ``steps``: its visit nearest
    in training time (the project's replay's mapping)."""
    trace, index = _trace(path, n_samples)
    if key not in index:
        raise KeyError(f"trace_key {key!r} is not a prompt of the trace {path}")
    return trace.visit_at(index[key], step, steps).successes


def trace_reward(args, sample) -> float:
    """The ``trace`` reward of one rollout (see the module docstring)."""
    metadata = sample.metadata or {}
    step = metadata.get(STEP_KEY)
    if step is None:
        raise RuntimeError(f"a trace row's sample has no {STEP_KEY!r} in its metadata: run train.py with "
                           "--rollout-sample-hook-path harness_reward.stamp_rollout_step")
    path = getattr(args, TRACE_PATH_ARG, None)
    if not path:
        raise RuntimeError(f"a trace row needs args.{TRACE_PATH_ARG} (a key of the --custom-config-path YAML)")
    n = args.n_samples_per_prompt
    successes = trace_successes(str(path), n, str(metadata["trace_key"]), int(step), int(args.num_rollout))
    return 1.0 if sample.index % n < successes else 0.0


def stamp_rollout_step(args, sample, *, rollout_id=None, evaluation=False):
    """slime's rollout sample hook: keep slime's live ``rollout_id`` in the sample's metadata for the reward."""
    if not evaluation and rollout_id is not None:
        if not isinstance(sample.metadata, dict):
            sample.metadata = {}
        sample.metadata[STEP_KEY] = int(rollout_id)
    return None


async def reward(args, sample, **kwargs):
    value = _reward(args, sample)
    path = getattr(args, REWARD_LOG_ARG, None)
    if path:
        metadata = sample.metadata or {}
        line = {"step": metadata.get(STEP_KEY), "group_index": sample.group_index, "index": sample.index,
                "prompt_id": metadata.get("prompt_id"), "reward": value}
        with open(path, "a") as log:  # one short line per append: whole lines, whatever the concurrency
            log.write(json.dumps(line) + "\n")
    return value


def _reward(args, sample) -> float | None:
    if not sample.response:
        return None
    kind = (sample.metadata or {}).get("reward_kind", "spread")
    if kind == "trace":
        return trace_reward(args, sample)
    return reward_for(kind, sample.index % args.n_samples_per_prompt)
