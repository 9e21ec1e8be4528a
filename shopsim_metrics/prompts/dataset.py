"""A prompt dataset's rows by the key the monitor gives their groups: how a skip list maps back to the data.

The ledger keys a group by its prompt (:func:`~shopsim_metrics.judging.prompt_keys.prompt_key`): a metadata
value when ``shopsim_prompt_key`` names one, else a hash of slime's ``Sample.prompt`` and ``label``.
slime builds those from a row of its ``--prompt-data`` file: ``prompt`` the row's ``--input-key``
column, ``label`` its ``--label-key`` column (None without one), ``metadata`` its ``--metadata-key``
column. Reading the same file with the same keys gives each row the key its groups got, so
``prompts --prompt-data`` can say which line of the dataset each skip-list prompt is.

A launch with ``--apply-chat-template`` hands the generation the templated text (slime applies the
tokenizer's chat template to the row's messages, a plain string becoming one user message), which is
what the monitor hashes: ``chat_template`` does the same (:func:`tokenizer_chat_template`: the launch's
``--hf-checkpoint``), so those rows map too. ``shopsim_prompt_key`` set to a metadata column of your own
ids gives keys that need no tokenizer.

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

import json
import os
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any, Callable

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


ChatTemplate = Callable[[list, Any], str]
"""``(messages, tools) -> text``: a launch's chat template, as slime applies it (``tokenize=False``,
``add_generation_prompt=True``)."""


def rows_by_key(path: str | os.PathLike, *, input_key: str = SLIME_INPUT_KEY, label_key: str | None = None,
                metadata_key: str = SLIME_METADATA_KEY, prompt_key_name: str | None = None,
                chat_template: ChatTemplate | None = None, tool_key: str | None = None) -> dict[str, DatasetRow]:
    """Every row of a ``.jsonl`` prompt dataset under the key the monitor gives its groups (the first row of a key
    wins); ``prompt_key_name`` is the run's ``shopsim_prompt_key``; ``chat_template`` (and the row's
    ``tool_key`` column) as the launch's ``--apply-chat-template``. A line that is not a JSON object is one error.

    Example:
        >>> import json, pathlib, tempfile
        >>> path = pathlib.Path(tempfile.mkdtemp()) / "chat.jsonl"
        >>> _ = path.write_text(json.dumps({"input": [{"role": "user", "content": "2+2?"}]}) + "\\n")
        >>> template = lambda messages, tools: "".join(f"<{m['role']}>{m['content']}" for m in messages) + "<assistant>"
        >>> from shopsim_metrics.judging.prompt_keys import hash_prompt
        >>> rows_by_key(path, chat_template=template)[hash_prompt("<user>2+2?<assistant>")].line
        1
    """
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
            prompt = row.get(input_key)
            if chat_template is not None:
                prompt = _templated(chat_template, prompt, row.get(tool_key) if tool_key else None,
                                    f"{os.fspath(path)}:{number}")
            sample = SimpleNamespace(prompt=prompt, label=row.get(label_key) if label_key else None,
                                     metadata=metadata if isinstance(metadata, dict) else {})
            key, _ = prompt_key([sample], prompt_key_name)
            if key is not None:
                rows.setdefault(key, DatasetRow(number, row.get(input_key)))
    return rows


def _templated(chat_template: ChatTemplate, prompt: Any, tools: Any, where: str) -> str:
    """A row's prompt as slime hands it to generation under ``--apply-chat-template`` (a string is one user
    message; a tools column given as JSON text is parsed, as slime does)."""
    messages = [{"role": "user", "content": prompt}] if isinstance(prompt, str) else prompt
    if isinstance(tools, str):
        try:
            tools = json.loads(tools)
        except ValueError:
            raise ValueError(f"{where}: its tools column is not JSON (slime parses it as JSON)") from None
    try:
        return chat_template(messages, tools)
    except Exception as exc:  # noqa: BLE001 - the tokenizer's own error, named with the row
        raise ValueError(f"{where}: the chat template refused this row ({type(exc).__name__}: {exc})") from None


def tokenizer_chat_template(checkpoint: str, kwargs: dict[str, Any] | None = None) -> ChatTemplate:
    """The chat template of the tokenizer at ``checkpoint`` (the launch's ``--hf-checkpoint``), applied as slime
    applies it; ``kwargs`` as the launch's ``--apply-chat-template-kwargs``. Needs transformers (slime's
    image has it; the rest of shopsim-metrics does not)."""
    try:
        from transformers import AutoTokenizer
    except ImportError:
        raise ValueError("--apply-chat-template applies the launch's tokenizer as slime does: it needs transformers "
                         "(pip install transformers; slime's image has it)") from None
    tokenizer = AutoTokenizer.from_pretrained(checkpoint, trust_remote_code=True)
    extra = dict(kwargs or {})

    def apply(messages: list, tools: Any) -> str:
        return tokenizer.apply_chat_template(messages, tools=tools, tokenize=False, add_generation_prompt=True,
                                             **extra)

    return apply
