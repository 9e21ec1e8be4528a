"""Reward function for slime's ``--custom-rm-path``: rewards fixed per prompt by the dataset.

Each dataset row's metadata names a ``reward_kind``; a group's rollouts are told apart by their
position in the group (slime numbers a group's samples consecutively: ``index % n``):

- ``spread``: 1.0 for even positions, 0.0 for odd ones (the group has spread);
- ``all_pass`` / ``all_fail``: 1.0 / 0.0 for every rollout (zero-std: dropped or fallback);
- ``technical``: no reward (None) for position 0, spread otherwise (the filter's technical drop).

An engine answer that was aborted or empty gets no reward either.
"""

from __future__ import annotations

REWARD_KINDS = ("spread", "all_pass", "all_fail", "technical")


def reward_for(kind: str, position: int) -> float | None:
    """The scripted reward of the rollout at ``position`` in a group of prompt kind ``kind``."""
    if kind not in REWARD_KINDS:
        raise ValueError(f"reward_kind must be one of {REWARD_KINDS}, got {kind!r}")
    if kind == "all_pass":
        return 1.0
    if kind == "all_fail":
        return 0.0
    if kind == "technical" and position == 0:
        return None
    return 1.0 if position % 2 == 0 else 0.0


async def reward(args, sample, **kwargs):
    if not sample.response:
        return None
    kind = (sample.metadata or {}).get("reward_kind", "spread")
    return reward_for(kind, sample.index % args.n_samples_per_prompt)
