"""verl's rollout dumps: ``trainer.rollout_data_dir`` (and the validation dump, ``trainer.validation_data_dir``).

verl writes, per step, ``{step}.jsonl``: one line per response with ``input`` (the prompt text),
``output``, ``score`` and ``step``, and its extra reward keys. There is no group id and the rows are
reordered, so a step's rows are grouped by prompt: ``input`` (its hash, as the monitor keys a prompt),
or the column ``--prompt-key`` names; ``n`` is the rows per group. The reward is ``score``, or the
column ``--reward-key`` names; a row's columns are also its metadata, so a ``shopsim_success`` column
decides success as the filter's flag does. verl records no token counts.

A path is a directory of ``{step}.jsonl`` files, one such file, or a glob. Bad input is one line: a line
that is not a JSON object, a row without ``input`` or ``step``, a file holding two steps, a step in two
files, groups of unequal size.

Example:
    >>> import json, tempfile, pathlib
    >>> folder = pathlib.Path(tempfile.mkdtemp())
    >>> for step in (1, 2):
    ...     rows = [{"input": f"q{k}", "output": "a", "score": float(i < k), "step": step}
    ...             for k in (0, 1) for i in range(2)]
    ...     _ = (folder / f"{step}.jsonl").write_text("".join(json.dumps(r) + "\\n" for r in rows[::-1]))
    >>> from shopsim_metrics.outcomes.groups import WHOLE_RUN
    >>> trace = read_verl_dump(folder, DumpOptions(WHOLE_RUN))
    >>> trace.n_samples, sorted([v.successes for v in visits] for visits in trace.visits), trace.tokens_recorded
    (2, [[0, 0], [1, 1]], False)
"""

from __future__ import annotations

import dataclasses
from collections import Counter
import glob
import os
import re
from pathlib import Path
from typing import Any

from shopsim_metrics.outcomes.groups import (
    DumpError, DumpGroup, DumpOptions, DumpSample, holds_text, judge_dump_group, require_holds,
    trace_from_groups,
)
from shopsim_metrics.judging.prompt_keys import prompt_key
from shopsim_metrics.outcomes.json_items import json_lines
from shopsim_metrics.outcomes.trace import Trace
from shopsim_metrics.general.plain_values import is_int
from shopsim_metrics.errors import regular_files

STEP_FILE = re.compile(r"^\d+\.jsonl$")
"""verl's file name: the step, then ``.jsonl``."""


def verl_files(path: str | os.PathLike) -> list[Path]:
    """The ``{step}.jsonl`` files of ``path`` (a directory, a file or a glob), in step order."""
    text = os.fspath(path)
    target = Path(text)
    if target.is_dir():
        files = regular_files([f for f in target.iterdir() if STEP_FILE.match(f.name)])
    elif target.is_file():
        files = [target]
    else:
        files = regular_files([Path(p) for p in glob.glob(text)]) if glob.has_magic(text) else []
    if not files:
        raise DumpError(f"{text}: no verl rollout dump there (expected {{step}}.jsonl files of "
                        "trainer.rollout_data_dir, one such file, or a glob)")
    return sorted(files, key=lambda f: (int(f.stem) if f.stem.isdigit() else -1, f.name))


def read_rows(path: Path) -> tuple[int, list[dict[str, Any]]]:
    """One file's step and rows; :class:`DumpError` for a line that is not a verl row, or two steps in one file."""
    rows = []
    steps = set()
    with open(path, encoding="utf-8", errors="replace") as handle:
        for number, row in json_lines(handle, str(path), error=DumpError, context="not a verl rollout dump line"):
            if not isinstance(row, dict) or "input" not in row or "step" not in row:
                raise DumpError(f"{path}:{number}: not a verl rollout dump line (expected a JSON object with "
                                "'input', 'output', 'score' and 'step')")
            step = row["step"]
            if not is_int(step) or step < 0:
                raise DumpError(f"{path}:{number}: step {step!r} is not a step number")
            steps.add(step)
            rows.append(row)
    if not rows:
        raise DumpError(f"{path}: no row (an empty verl rollout dump)")
    if len(steps) > 1:
        raise DumpError(f"{path}: rows of {len(steps)} steps in one file ({sorted(steps)[:4]}...): verl writes one "
                        "file per step")
    return steps.pop(), rows


def step_groups(rows: list[dict[str, Any]], options: DumpOptions) -> list[list[DumpSample]]:
    """A step's rows grouped by prompt (``input``'s hash, or the ``--prompt-key`` column), in first-seen order;
    a prompt drawn k times in the step (k n rows) is k groups of n (:func:`split_repeats`)."""
    groups: dict[str | None, list[DumpSample]] = {}
    reward_column = options.reward_key or "score"
    for position, row in enumerate(rows):
        sample = DumpSample(prompt=row["input"], reward=row.get(reward_column), metadata=row, index=position)
        key, _ = prompt_key([sample], options.prompt_key)
        groups.setdefault(key, []).append(sample)
    return split_repeats(list(groups.values()))


def split_repeats(groups: list[list[DumpSample]]) -> list[list[DumpSample]]:
    """A step's groups with each prompt drawn k times (its rows a multiple k of the step's smallest group, n)
    split into k groups of n, in row order: a batch may draw a prompt twice (an epoch's end, a small dataset),
    and verl's dump has no group id, so which responses shared a group is not recorded (see
    :data:`REPEAT_NOTE`). A group of any other size is left whole (then refused: groups of unequal size).

    Example:
        >>> groups = [[DumpSample(index=i) for i in range(4)], [DumpSample(index=i) for i in range(2)]]
        >>> [[s.index for s in g] for g in split_repeats(groups)]
        [[0, 1], [2, 3], [0, 1]]
    """
    n = min((len(group) for group in groups), default=0)
    split: list[list[DumpSample]] = []
    for group in groups:
        if n and len(group) > n and len(group) % n == 0:
            split.extend(group[start:start + n] for start in range(0, len(group), n))
        else:
            split.append(group)
    return split


REPEAT_NOTE = ("{count} groups were a prompt drawn again in the same step (its rows a multiple of the group size), "
               "split in row order: verl's dump does not say which responses shared a group, so those groups' "
               "zero-std verdicts are a guess (their successes are not)")


def read_verl_dump(path: str | os.PathLike, options: DumpOptions) -> Trace:
    """The trace of verl's rollout dumps at ``path`` (module docstring)."""
    origin = os.fspath(path)
    require_holds(options, origin, "verl")
    judged = dataclasses.replace(options, reward_key=None)  # the reward column is read here, not a dict reward
    files = verl_files(path)
    file_of: dict[int, Path] = {}
    groups: list[DumpGroup] = []
    repeats = 0  # groups of a prompt drawn more than once in their step
    for file in files:
        step, rows = read_rows(file)
        if step in file_of:
            raise DumpError(f"{file}: step {step} twice (also in {file_of[step]}): files of two runs, or copies")
        file_of[step] = file
        judged_groups = [judge_dump_group(step, samples, judged, tokens_recorded=False)
                         for samples in step_groups(rows, options)]
        keys = Counter(group.key for group in judged_groups)
        repeats += sum(count for count in keys.values() if count > 1)
        groups.extend(judged_groups)
    return trace_from_groups(groups, origin=f"{origin} (verl's rollout dumps, {len(files)} files, "
                                            f"{holds_text(options)})",
                             options=options, notes=[REPEAT_NOTE.format(count=repeats)] if repeats else [])
