"""A rollout sample hook of the harness: what every generate call returned, one JSON line per sample.

slime calls its rollout sample hooks (``--rollout-sample-hook-path``, repeatable) after every generate
call, aborted ones included, with its live ``rollout_id``: the same samples the project's own sample hook
counts, written down independently of the project. The file is named by ``args.harness_sample_log_path``
(a key of the ``--custom-config-path`` YAML; no key, no log).

Each line: ``rollout_id``, ``index``, ``group_index``, ``status``, ``prompt_key`` (the dataset's
``prompt_id``), ``response_ids`` (the response's tokens), ``loss_mask``, ``non_generation_time`` and the
metadata a multi-turn generate function leaves (``round_number``, ``shopsim_failure_cause``,
``shop_order``, ``shopsim_tool_calls``).
"""

from __future__ import annotations

import json

LOG_PATH_ARG = "harness_sample_log_path"
METADATA_KEYS = ("round_number", "shopsim_failure_cause", "shop_order", "shopsim_tool_calls")


def log_sample(args, sample, *, rollout_id=None, evaluation=False):
    """slime's rollout sample hook: append the sample's line to the log; slime keeps its sample (None)."""
    path = getattr(args, LOG_PATH_ARG, None)
    if evaluation or not path:
        return None
    metadata = sample.metadata or {}
    length = int(sample.response_length)
    line = {
        "rollout_id": rollout_id, "index": sample.index, "group_index": sample.group_index,
        "status": sample.status.value, "prompt_key": metadata.get("prompt_id"),
        "response_ids": [int(token) for token in sample.tokens[len(sample.tokens) - length:]] if length else [],
        "loss_mask": None if sample.loss_mask is None else [int(bit) for bit in sample.loss_mask],
        "non_generation_time": float(sample.non_generation_time),
        **{key: metadata[key] for key in METADATA_KEYS if key in metadata},
    }
    with open(path, "a") as handle:
        handle.write(json.dumps(line) + "\n")
    return None
