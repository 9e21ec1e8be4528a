"""A stand-in for slime's ``Sample`` with the fields the project reads, for use without slime.

The filter reads samples by attribute (``index``, ``group_index``, ``rollout_id``, ``reward``,
``status``, ``metadata``, ``response_length``; ``prompt`` and ``label`` for the prompt key), so
slime's own ``Sample`` and this class are interchangeable. ``status`` may be an enum with ``.value`` or a plain string.

Example:
    >>> s = SimSample(index=3, reward=1.0)
    >>> (s.rollout_id, s.status)
    (None, 'completed')
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class SimSample:
    """The attributes of ``slime.utils.types.Sample`` that the project reads."""

    index: int | None = None
    group_index: int | None = None
    rollout_id: int | None = None
    reward: Any = None
    status: Any = "completed"  # pending/completed/truncated/aborted/failed
    metadata: dict = field(default_factory=dict)
    response_length: int = 0
    prompt: Any = ""  # text or chat messages (list of {"role", "content"} dicts), as slime's Sample
    label: str | None = None
    weight_versions: list = field(default_factory=list)  # the engine's weight version at each generate call

    def get_reward_value(self, args: Any) -> Any:
        """The reward slime trains on: the entry ``args.reward_key`` of a dict reward, else the reward."""
        return self.reward if not args.reward_key else self.reward[args.reward_key]
