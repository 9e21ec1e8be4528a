"""``shopsim-metrics prompts RUN``: the prompts table from a run's records (or a framework's dump), and a skip list.

The run's ``steps.jsonl`` ledger rows carry each judged group's ``prompt_key``; replaying them in
step and judgement order through the same :class:`~shopsim_metrics.prompts.value.PromptValueTracker`
the runtime uses (with the run's ``shopsim_prompt_history_limit``) gives the same history, so the
printed table is the one W&B received at the end of the run (the latest record of each step wins, as
for every reader).

``--out skip.jsonl`` writes one JSON object per prompt whose last ``--min-visits`` visits (default
:data:`DEFAULT_MIN_VISITS`) all had the same zero-std verdict, most wasted generation first::

    {"prompt_key": "b2:…", "visits": 6, "zero_std_run": 4, "last_verdict": "zero_std_all_pass",
     "verdicts": ["spread", "zero_std_all_pass", …], "wasted_tokens": 1234, "data_line": 17, "prompt": …}

so that a data pipeline can drop or down-weight those prompts. A key is the prompt's hash (or its
``shopsim_prompt_key`` metadata value): ``--prompt-data FILE``, the launch's own dataset read with its
``--input-key`` / ``--label-key`` / ``--metadata-key`` (and ``--prompt-key`` as the run's
``shopsim_prompt_key``), maps each entry to its line and prompt (:mod:`shopsim_metrics.prompts.dataset`);
without it, or for a prompt not found, ``data_line`` and ``prompt`` are null.

RUN may also be slime's or verl's rollout dumps (:mod:`shopsim_metrics.outcomes`, with ``--whole-run`` or
``--kept-only``): their visits, in step order, go through the same prompt history (:func:`tracker_from_trace`).

Example:
    >>> parser = __import__("argparse").ArgumentParser(); sub = parser.add_subparsers(dest="command")
    >>> register(sub)
    >>> parser.parse_args(["prompts", "run", "--out", "skip.jsonl"]).min_visits
    '2'
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any, Iterable, Mapping

from shopsim_metrics.outcomes.sources import (
    DUMP_KINDS, add_dump_arguments, dump_options, load_outcomes, refuse_dump_options, source_kind,
)
from shopsim_metrics.errors import check_output_file
from shopsim_metrics.judging.group_judgement import SPREAD, ZERO_STD
from shopsim_metrics.judging.verdicts import ZERO_STD_VERDICTS, verdict_of
from shopsim_metrics.prompts.dataset import (
    SLIME_INPUT_KEY, SLIME_METADATA_KEY, ChatTemplate, DatasetRow, rows_by_key, tokenizer_chat_template,
)
from shopsim_metrics.prompts.history import DEFAULT_LIMIT, PromptStats
from shopsim_metrics.judging.prompt_keys import HASH_PREFIX, history_key
from shopsim_metrics.prompts.value import PROMPT_TABLE_ROWS, PromptValueTracker, table_row
from shopsim_metrics.outcomes.trace import Trace
from shopsim_metrics.record.contract import PROMPT_TABLE_COLUMNS
from shopsim_metrics.record.records import StepRecord
from shopsim_metrics.tables import Column, format_table

DEFAULT_MIN_VISITS = 2
"""A prompt enters the skip list after this many consecutive visits with the same zero-std verdict."""

_TEXT_COLUMNS = ("prompt_key", "verdicts")
PROMPT_COLUMNS = tuple(Column(name, align="<" if name in _TEXT_COLUMNS else ">") for name in PROMPT_TABLE_COLUMNS)
"""The printed prompts table: keys and verdict letters left-aligned, counts right-aligned."""


def register(sub: Any) -> None:
    cmd = sub.add_parser("prompts", help="the prompts that wasted the most generation, from a run's steps.jsonl; "
                                         "--out writes a skip list")
    cmd.add_argument("run", help="a steps.jsonl file or the run directory holding it; or slime's / verl's rollout "
                                 "dumps (with --whole-run or --kept-only)")
    cmd.add_argument("--top", default=str(PROMPT_TABLE_ROWS), help=f"rows to print (default {PROMPT_TABLE_ROWS})")
    cmd.add_argument("--out", default=None, help="write the skip list (JSON lines) to this file")
    cmd.add_argument("--min-visits", default=str(DEFAULT_MIN_VISITS),
                     help=f"consecutive equal zero-std visits that put a prompt on the skip list "
                          f"(default {DEFAULT_MIN_VISITS})")
    data = cmd.add_argument_group("the launch's prompt dataset, to map the skip list's keys to its lines")
    data.add_argument("--prompt-data", metavar="FILE",
                      help="the launch's --prompt-data (.jsonl): each skip-list entry gets its line (data_line) and "
                           "prompt; with --prompt-key as the run's shopsim_prompt_key, if it set one")
    data.add_argument("--input-key", default=SLIME_INPUT_KEY, help=f"as the launch's (default {SLIME_INPUT_KEY})")
    data.add_argument("--label-key", default=None, help="as the launch's (default: none)")
    data.add_argument("--metadata-key", default=SLIME_METADATA_KEY,
                      help=f"as the launch's (default {SLIME_METADATA_KEY})")
    data.add_argument("--apply-chat-template", action="store_true",
                      help="as the launch's: the keys hash the templated text, so apply the tokenizer's chat "
                           "template as slime does (needs --hf-checkpoint and transformers)")
    data.add_argument("--hf-checkpoint", metavar="DIR", help="as the launch's: the tokenizer of its chat template")
    data.add_argument("--apply-chat-template-kwargs", type=_json_object, default=None, metavar="JSON",
                      help="as the launch's (a JSON object)")
    data.add_argument("--tool-key", default=None, help="as the launch's (default: none)")
    add_dump_arguments(cmd)
    cmd.set_defaults(func=run_prompts)


def replay(records: Iterable[StepRecord]) -> PromptValueTracker:
    """The prompt history a run's records describe (step order, judgement order within a step)."""
    ordered = sorted(records, key=lambda r: r.rollout_id)
    limits = [r.prompt_history_limit for r in ordered if r.prompt_history_limit]
    tracker = PromptValueTracker(limit=limits[-1] if limits else DEFAULT_LIMIT)
    for record in ordered:
        tracker.observe(record)
    return tracker


def tracker_from_trace(trace: Trace) -> PromptValueTracker:
    """The prompt history of a trace's visits, in step order (a dump's; its keys are the monitor's).

    Example:
        >>> from shopsim_metrics.outcomes.groups import DumpGroup, DumpOptions, WHOLE_RUN, trace_from_groups
        >>> groups = [DumpGroup(step, "k", 4, successes, "spread" if successes % 4 else "zero_std", 10)
        ...           for step, successes in enumerate([2, 0, 0])]
        >>> stats = tracker_from_trace(trace_from_groups(groups, origin="d", options=DumpOptions(WHOLE_RUN)))
        >>> [(s.key, s.verdict_letters, s.zero_std_run, s.wasted_tokens) for s in stats.history]
        [('k', 'SFF', 2, 20)]
    """
    tracker = PromptValueTracker(limit=max(DEFAULT_LIMIT, len(trace.prompts)))
    n = trace.n_samples
    order = sorted(((visit.step or 0, index, visit) for index, visits in enumerate(trace.visits) for visit in visits),
                   key=lambda item: (item[0], item[1]))
    for step, index, visit in order:
        verdict = verdict_of(ZERO_STD if visit.zero_std else SPREAD, visit.successes, n)
        tracker.history.visit(history_key(trace.prompts[index]), verdict, visit.tokens, successes=visit.successes,
                              scored=n, step=step)
    tracker.tokens_known = trace.tokens_recorded
    return tracker


def skip_list(tracker: PromptValueTracker, min_visits: int, dataset: dict[str, DatasetRow] | None = None,
              texts: Mapping[str, str] | None = None) -> list[dict[str, Any]]:
    """Prompts whose last ``min_visits`` visits had the same zero-std verdict, most wasted first; ``dataset``
    (:func:`~shopsim_metrics.prompts.dataset.rows_by_key`) gives each its line and prompt, else ``texts`` (a
    dump's prompts, :attr:`~shopsim_metrics.outcomes.trace.Trace.texts`) its prompt."""
    out = []
    for stats in tracker.history.most_wasted(len(tracker.history)):
        if stats.zero_std_run >= min_visits and stats.last_verdict in ZERO_STD_VERDICTS:
            out.append(_skip_entry(stats, tracker.tokens_known, (dataset or {}).get(stats.key),
                                   (texts or {}).get(stats.key)))
    return out


def _skip_entry(stats: PromptStats, tokens_known: bool, row: DatasetRow | None, text: str | None) -> dict[str, Any]:
    return {"prompt_key": stats.key, "visits": stats.visits, "zero_std_run": stats.zero_std_run,
            "last_verdict": stats.last_verdict, "verdicts": list(stats.verdicts),
            "wasted_tokens": stats.wasted_tokens if tokens_known else None,
            "data_line": row.line if row else None, "prompt": row.prompt if row else text}


def read_skip_list(path: str | Path) -> list[dict[str, Any]]:
    """The entries of a skip list written by ``--out``."""
    return [json.loads(line) for line in Path(path).read_text(encoding="utf-8").splitlines() if line.strip()]


def _positive(value: str, name: str) -> int:
    try:
        number = int(value)
    except ValueError:
        number = 0
    if number < 1:
        raise ValueError(f"{name} must be an integer >= 1; got {value!r}")
    return number


def run_prompts(args: argparse.Namespace) -> int:
    from shopsim_metrics.readers.steps import read_steps

    top = _positive(args.top, "--top")
    min_visits = _positive(args.min_visits, "--min-visits")
    if args.out is not None:
        check_output_file(args.out, "--out", make_parents=True)
    dataset = None
    if args.prompt_data is not None:
        if args.out is None:
            raise ValueError("--prompt-data maps the skip list's keys to the dataset's lines: give --out FILE too")
        dataset = rows_by_key(args.prompt_data, input_key=args.input_key, label_key=args.label_key,
                              metadata_key=args.metadata_key, prompt_key_name=args.prompt_key,
                              chat_template=_chat_template(args), tool_key=args.tool_key)
    kind = source_kind(args.run)
    texts: Mapping[str, str] = {}
    if kind in DUMP_KINDS:
        trace = load_outcomes(args.run, options=dump_options(args))
        tracker, steps = tracker_from_trace(trace), trace.run.steps if trace.run else 0
        texts = trace.texts
        for note in trace.notes:
            print(f"note: {note}")
    else:
        refuse_dump_options(args.run, dump_options(args))
        records = read_steps(args.run)
        if not any(row.prompt_key is not None for record in records for row in record.decisions):
            raise ValueError(f"{args.run}: no ledger row carries a prompt_key (records written before prompt "
                             "tracking?)")
        tracker, steps = replay(records), len(records)
    rows = [table_row(stats, tracker.tokens_known) for stats in tracker.history.most_wasted(top)]
    print(format_table(PROMPT_COLUMNS, rows))
    print(f"{len(tracker.history)} prompts tracked over {steps} steps; verdicts oldest first: "
          "S spread, P all-pass, F all-fail, O other zero-std, T technical")
    if args.out is not None:
        entries = skip_list(tracker, min_visits, dataset, texts)
        out = Path(args.out)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text("".join(json.dumps(e) + "\n" for e in entries), encoding="utf-8")
        print(f"{len(entries)} prompts with their last {min_visits} visits zero-std (same verdict) written to {out}")
        print(_mapping_note(entries, args.prompt_data, bool(texts)))
    return 0


def _json_object(text: str) -> dict[str, Any]:
    """A flag's JSON object (argparse's type)."""
    try:
        value = json.loads(text)
    except ValueError:
        value = None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError(f"expected a JSON object, as slime reads it; got {text!r}")
    return value


def _chat_template(args: argparse.Namespace) -> ChatTemplate | None:
    """The launch's chat template when ``--apply-chat-template`` is given (with ``--hf-checkpoint``)."""
    if not args.apply_chat_template:
        if args.hf_checkpoint or args.apply_chat_template_kwargs is not None:
            raise ValueError("--hf-checkpoint and --apply-chat-template-kwargs are read only with --apply-chat-template")
        return None
    if not args.hf_checkpoint:
        raise ValueError("--apply-chat-template needs --hf-checkpoint DIR (the launch's): its tokenizer's template")
    return tokenizer_chat_template(args.hf_checkpoint, args.apply_chat_template_kwargs)


def _mapping_note(entries: list[dict[str, Any]], prompt_data: str | None, texts: bool = False) -> str:
    """How the skip list's keys map back to the dataset: found lines, or how to find them."""
    hashed = any(str(e["prompt_key"]).startswith(HASH_PREFIX) for e in entries)
    if prompt_data is None:
        what = "hashes of each prompt and its label" if hashed else "the run's shopsim_prompt_key values"
        said = "the prompt is the dump's text; " if texts else ""
        return (f"the keys are {what}: {said}--prompt-data FILE (the launch's, with its --input-key / --label-key) "
                "gives each entry its line (data_line)" + ("" if texts else " and prompt"))
    found = sum(1 for e in entries if e["data_line"] is not None)
    note = f"{found} of {len(entries)} found in {prompt_data} (data_line: the line, prompt: the prompt)"
    if found < len(entries):
        note += ("; the others are not in it as keyed: check --input-key, --label-key and --prompt-key against the "
                 "launch (a launch with --apply-chat-template hashes the templated text: pass --apply-chat-template "
                 "and its --hf-checkpoint too, or set shopsim_prompt_key to an id column of the metadata)")
    return note


