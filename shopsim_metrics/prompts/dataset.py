"""A prompt dataset's rows by the key the monitor gives their groups: how a skip list maps back to the data.

The ledger keys a group by its prompt (:func:`~shopsim_metrics.judging.prompt_keys.prompt_key`): a metadata
value when ``shopsim_prompt_key`` names one, else a hash of slime's ``Sample.prompt`` and ``label``.
slime builds those from a row of its ``--prompt-data`` file: ``prompt`` the row's ``--input-key``
column, ``label`` its ``--label-key`` column (None without one), ``metadata`` its ``--metadata-key``
column. Reading the same file with the same keys gives each row the key its groups got, so
``prompts --prompt-data`` can say which line of the dataset each skip-list prompt is.

One case cannot be mapped from the file alone: a launch with ``--apply-chat-template`` hands the
generation the templated text (slime applies the tokenizer's template), which is what the monitor
hashes. Set ``shopsim_prompt_key`` to a metadata column of your own ids for keys that survive that.

Example:
    >>> import json, pathlib
    >>> path = pathlib.Path("prompts.jsonl")
    >>> _ = path.write_text(json.dumps({"input": "2+2?", "label": "4"}) + "\\n\\n" + json.dumps({"input": "3+3?"}) + "\\n")
    >>> rows = rows_by_key(path, label_key="label")
    >>> from shopsim_metrics.judging.prompt_keys import hash_prompt
    >>> rows[hash_prompt("2+2?", "4")], rows[hash_prompt("3+3?", None)].line
    (DatasetRow(line=1, prompt='2+2?'), 3)
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

from shopsim_metrics.errors import check_input_path
from shopsim_metrics.judging.prompt_keys import prompt_key
from shopsim_metrics.outcomes.json_items import json_lines

SLIME_INPUT_KEY = "input"
"""slime's ``--input-key`` default: the dataset column that holds the prompt."""
SLIME_METADATA_KEY = "metadata"
"""slime's ``--metadata-key`` default: the dataset column that holds a row's metadata."""


@dataclass(frozen=True)
class DatasetRow:
    """A dataset row a key names: its line in the file (from 1) and its prompt as slime reads it."""

    line: int
    prompt: Any


def rows_by_key(path: str | os.PathLike, *, input_key: str = SLIME_INPUT_KEY, label_key: str | None = None,
                metadata_key: str = SLIME_METADATA_KEY, prompt_key_name: str | None = None) -> dict[str, DatasetRow]:
    """Every row of a ``.jsonl`` prompt dataset under the key the monitor gives its groups (the first row of a key
    wins); ``prompt_key_name`` is the run's ``shopsim_prompt_key``. A line that is not a JSON object is one error."""
    source = check_input_path(path, "a prompt dataset (.jsonl, slime's --prompt-data)")
    if source.is_dir() or source.suffix != ".jsonl":
        raise ValueError(f"{os.fspath(path)}: expected a .jsonl prompt dataset (slime's --prompt-data; convert a "
                         ".parquet one to JSON lines)")
    rows: dict[str, DatasetRow] = {}
    with open(source, encoding="utf-8") as lines:
        for number, row in json_lines(lines, os.fspath(path)):
            if not isinstance(row, dict):
                raise ValueError(f"{os.fspath(path)}:{number}: expected a JSON object per line; got "
                                 f"{type(row).__name__}")
            metadata = row.get(metadata_key)
            sample = SimpleNamespace(prompt=row.get(input_key), label=row.get(label_key) if label_key else None,
                                     metadata=metadata if isinstance(metadata, dict) else {})
            key, _ = prompt_key([sample], prompt_key_name)
            if key is not None:
                rows.setdefault(key, DatasetRow(number, sample.prompt))
    return rows
