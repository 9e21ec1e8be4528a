"""A pool of prompts from a recorded trace, for slime's ``train.py`` through the harness.

The shared trace (``benchmarks/data/one_shot_rlvr_dsr_sub_acc.dev.json``: per-prompt success fractions of
groups of 8, one per visit, from ypwang61/One-Shot-RLVR, Apache-2.0) says how many of a prompt's 8 rollouts
succeeded each time it was visited. :func:`write_pool` turns a sample of its prompts into

- a dataset for slime (``--prompt-data``): one row per prompt, ``metadata`` ``{"prompt_id": "t<key>",
  "trace_key": key, "reward_kind": "trace"}``, so ``harness_reward.reward`` reads each group's outcome
  from the trace at the step it was generated in;
- a script for the fake engine (``--script``): each prompt's response length and delay. Response lengths
  are not in the trace; here they are per prompt and long-tailed: log-normal around a median that
  grows with the prompt's difficulty (its recorded failure rate: an always-failed prompt's median is
  three times an always-solved one's, as failed attempts of reasoning models run longer), capped at
  ``max_tokens`` (those answers end with ``length``). The engine makes a prompt's tokens evenly over its
  delay (``seconds_per_token`` each), so long prompts finish last and are the ones slime aborts.

The sample and the lengths are fixed by ``seed``: a pool is reproducible.

Example:
    >>> import json, tempfile
    >>> from pathlib import Path
    >>> out = Path(tempfile.mkdtemp())
    >>> (out / "trace.json").write_text(json.dumps({"a": [0.0, 0.0], "b": [1.0, 0.5], "c": [0.125]}))
    48
    >>> pool = write_pool(out / "trace.json", out, size=2, seed=0)
    >>> [row["metadata"]["trace_key"] for row in pool.rows], sorted(pool.script) == ["tb", "tc"]
    (['b', 'c'], True)
    >>> all(1 <= s["tokens"] <= 1024 for s in pool.script.values())
    True
"""

from __future__ import annotations

import json
import math
import os
import random
from dataclasses import dataclass
from pathlib import Path

SHARED_TRACE = Path(__file__).resolve().parents[2] / "benchmarks" / "data" / "one_shot_rlvr_dsr_sub_acc.dev.json"
"""The shared trace, kept in the repository (``benchmarks/data``, with its source, license and citation)."""
TRACE = Path(os.environ.get("SHOPSIM_TRACE_FILE") or SHARED_TRACE)
"""The trace the tests replay: the shared one, or the file ``SHOPSIM_TRACE_FILE`` names (the kept-aside half of
``data/acc_step_500.json``, its odd keys, built outside the repository: a check on outcomes nothing was tuned on)."""
TRACE_N = 8
"""The trace's group size: its fractions are successes out of 8."""
PROMPT_ID_PREFIX = "t"
"""A pool row's ``prompt_id`` is this and its trace key (``t324``): distinct from ``dataset.jsonl``'s ``p00``..."""


@dataclass(frozen=True)
class Pool:
    dataset: Path  # slime's --prompt-data (and the engine's --dataset)
    script: dict[str, dict]  # the engine's per-prompt settings, by prompt_id
    script_file: Path  # the same, for the engine's --script
    rows: list[dict]  # the dataset's rows


def trace_key_of(prompt_id: str) -> str:
    """The trace key of a pool row's ``prompt_id`` (``trace_key_of("t324") == "324"``)."""
    if not prompt_id.startswith(PROMPT_ID_PREFIX):
        raise ValueError(f"prompt_id: expected {PROMPT_ID_PREFIX!r} and a trace key; got {prompt_id!r}")
    return prompt_id[len(PROMPT_ID_PREFIX):]


def prompt_length(failure_rate: float, rng: random.Random, *, median_tokens: float, sigma: float,
                   max_tokens: int) -> int:
    """One prompt's response length: log-normal around ``median_tokens × (1 + 2 × failure_rate)``, within
    ``[1, max_tokens]``."""
    median = median_tokens * (1.0 + 2.0 * failure_rate)
    return max(1, min(max_tokens, round(median * math.exp(sigma * rng.gauss(0.0, 1.0)))))


def write_pool(trace_path: str | Path, out_dir: str | Path, *, size: int, seed: int = 0,
               exclude: frozenset[str] = frozenset(), median_tokens: float = 120.0, sigma: float = 0.7,
               max_tokens: int = 1024, seconds_per_token: float = 0.0005) -> Pool:
    """``size`` prompts of the trace drawn with ``seed`` (none of ``exclude``), written as a dataset and an
    engine script under ``out_dir`` (see the module docstring); rows in the trace's key order."""
    trace = json.loads(Path(trace_path).read_text())
    keys = [key for key in trace if key not in exclude and trace[key]]
    if size > len(keys):
        raise ValueError(f"size: the trace has {len(keys)} prompts to draw from; got size={size}")
    rng = random.Random(seed)
    chosen = set(rng.sample(keys, size))
    rows, script = [], {}
    for key in (k for k in keys if k in chosen):
        prompt_id = f"{PROMPT_ID_PREFIX}{key}"
        rows.append({"prompt": f"prompt_{prompt_id} solve the recorded problem {key}", "label": key,
                     "metadata": {"prompt_id": prompt_id, "trace_key": key, "reward_kind": "trace"}})
        failure_rate = 1.0 - sum(trace[key]) / len(trace[key])
        tokens = prompt_length(failure_rate, random.Random(f"{seed}:{key}"), median_tokens=median_tokens,
                                sigma=sigma, max_tokens=max_tokens)
        script[prompt_id] = {"tokens": tokens, "delay": round(tokens * seconds_per_token, 6), "finish": "stop"}
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    dataset = out / "pool.jsonl"
    dataset.write_text("".join(json.dumps(row) + "\n" for row in rows))
    script_file = out / "engine_script.json"
    script_file.write_text(json.dumps(script, indent=0))
    return Pool(dataset, script, script_file, rows)


def merge_pools(out: Path, *pools: Pool) -> Pool:
    """One pool holding every pool's rows and engine settings, written under ``out``: the engine's
    ``--dataset`` and ``--script`` (and the tokenizer's vocabulary) when one engine serves several pools."""
    rows = [row for pool in pools for row in pool.rows]
    script = {key: value for pool in pools for key, value in pool.script.items()}
    out.mkdir(parents=True, exist_ok=True)
    dataset, script_file = out / "pool.jsonl", out / "engine_script.json"
    dataset.write_text("".join(json.dumps(row) + "\n" for row in rows))
    script_file.write_text(json.dumps(script, indent=0))
    return Pool(dataset, script, script_file, rows)
