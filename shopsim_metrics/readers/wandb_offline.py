"""Read back what was logged to an offline W&B run directory (``.../wandb/offline-run-*/``).

The tests use it to check what the W&B sink really wrote, and the dashboards render HTML from it.
:func:`read_offline_run` asks wandb's own reader first (``wandb leet inspect --json RUN_DIR``, wandb
0.31 and later); when that command is missing it decodes the run's ``.wandb`` transaction log itself
(wandb's documented record framing plus wandb's own protobuf classes).

Media values in history rows (tables, images) are nested dicts such as
``{"_type": "table-file", "path": "media/table/...json", ...}``; tables are also loaded into
:attr:`OfflineRun.tables`.

Example:
    >>> run = read_offline_run("wandb/offline-run-20260101_000000-abc")  # doctest: +SKIP
    >>> [row["rollout/step"] for row in run.history]                     # doctest: +SKIP
    [0, 1, 2]
"""

from __future__ import annotations

import json
import logging
import math
import os
import struct
import subprocess
import sys
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Iterator

from shopsim_metrics.record import contract

logger = logging.getLogger("shopsim_metrics")

_INTERNAL_KEYS = ("_wandb",)


@dataclass
class OfflineTable:
    """One ``wandb.Table`` logged at one history row."""

    key: str  # the W&B key it was logged under
    step: int  # wandb's internal ``_step`` of the history row
    row: dict[str, Any]  # the whole history row (holds e.g. ``rollout/step``)
    columns: list[str]
    data: list[list[Any]]

    def records(self) -> list[dict[str, Any]]:
        """The table as a list of ``{column: value}`` dicts."""
        return [dict(zip(self.columns, values)) for values in self.data]


@dataclass
class OfflineRun:
    """What an offline W&B run holds, read from its files.

    ``history``: one dict per ``run.log`` call, in order (keys as logged, plus ``_step``,
    ``_runtime``, ``_timestamp``); ``summary``: the final summary; ``alerts``: ``{"title", "text",
    "level", ...}`` in order; ``config``: the run config (without wandb's ``_wandb`` entry);
    ``metrics``: the ``define_metric`` declarations (``{"name" or "glob_name", "step_metric", ...}``);
    ``tables``: every logged table by key.
    """

    run_dir: Path
    history: list[dict[str, Any]] = field(default_factory=list)
    summary: dict[str, Any] = field(default_factory=dict)
    alerts: list[dict[str, Any]] = field(default_factory=list)
    config: dict[str, Any] = field(default_factory=dict)
    metrics: list[dict[str, Any]] = field(default_factory=list)
    tables: dict[str, list[OfflineTable]] = field(default_factory=dict)
    run_id: str | None = None
    project: str | None = None
    exit_code: int | None = None
    reader: str = ""  # "leet" or "transaction-log": which reader produced it

    def step_metric_of(self, key: str) -> str | None:
        """The step metric declared for ``key`` (by exact name or a ``prefix/*`` glob), if any."""
        for metric in self.metrics:
            name, glob = metric.get("name"), metric.get("glob_name")
            if name == key or (glob and glob.endswith("*") and key.startswith(glob[:-1])):
                if metric.get("step_metric"):
                    return metric["step_metric"]
        return None


def find_wandb_file(run_dir: str | os.PathLike) -> Path:
    """The ``run-<id>.wandb`` transaction log inside a run directory (never one linked from outside it)."""
    path = Path(run_dir)
    if path.is_file():
        return path
    found = sorted(p for p in path.glob("*.wandb") if inside_run_dir(path, p.name) is not None)
    if not found:
        raise FileNotFoundError(f"no .wandb transaction log in {path}: expected a W&B run directory "
                                "such as wandb/offline-run-<date>-<id>")
    return found[0]


def find_run_dirs(root: str | os.PathLike) -> list[Path]:
    """Every W&B run directory under ``root`` (a ``wandb`` dir or a directory holding one), oldest first."""
    root = Path(root)
    return sorted({p.parent for p in root.glob("**/*-run-*/*.wandb")})


def read_offline_run(run_dir: str | os.PathLike, *, prefer_leet: bool = True) -> OfflineRun:
    """Read history, summary, alerts, config, metric declarations and tables of a W&B run directory.

    ``run_dir`` is a run directory (``.../wandb/offline-run-*``) or its ``.wandb`` file. Read it
    after the run has finished. wandb's ``leet inspect --json`` is used when available, else the
    ``.wandb`` log is decoded directly; both give the same :class:`OfflineRun`.
    """
    wandb_file = find_wandb_file(run_dir)
    records: list[dict[str, Any]] | None = None
    reader = "leet"
    if prefer_leet:
        records = _records_from_leet(wandb_file)
    if records is None:
        records, reader = list(_records_from_log(wandb_file)), "transaction-log"
    run = _assemble(records, wandb_file.parent)
    run.reader = reader
    return run


# --- assembling records (leet's JSON shape) into an OfflineRun -----------------------------------
def _assemble(records: list[dict[str, Any]], run_dir: Path) -> OfflineRun:
    run = OfflineRun(run_dir=run_dir)
    summary_flat: dict[str, Any] = {}
    for rec in records:
        kind = rec.get("type")
        body = rec.get(kind) or {}
        if kind == "run":
            run.run_id, run.project = body.get("run_id"), body.get("project")
            run.config.update((body.get("config") or {}).get("update") or {})
        elif kind == "config":
            run.config.update(body.get("update") or {})
            for key in body.get("remove") or []:
                run.config.pop(key if isinstance(key, str) else key.get("key"), None)
        elif kind == "history":
            row = _nest_media(body.get("item") or {})
            run.history.append(row)
            for key, value in row.items():
                if isinstance(value, dict) and value.get("_type") == "table-file":
                    run.tables.setdefault(key, []).append(_load_table(run_dir, key, row, value))
        elif kind == "summary":
            summary_flat.update(body.get("update") or {})
            for key in body.get("remove") or []:
                summary_flat.pop(key if isinstance(key, str) else key.get("key"), None)
        elif kind == "alert":
            run.alerts.append(dict(body))
        elif kind == "metric":
            run.metrics.append({k: body[k] for k in ("name", "glob_name", "step_metric") if body.get(k)})
        elif kind == "exit":
            run.exit_code = int(body.get("exit_code", 0))
    for key in _INTERNAL_KEYS:
        run.config.pop(key, None)
    run.summary = _nest_media(summary_flat)
    return run


def _nest_media(flat: dict[str, Any]) -> dict[str, Any]:
    """Fold ``key._type``/``key.path``... (how wandb flattens media values) back into ``key: {...}``."""
    media = {k[: -len("._type")] for k in flat if k.endswith("._type")}
    out: dict[str, Any] = {}
    for key, value in flat.items():
        head = next((m for m in media if key.startswith(m + ".")), None)
        if head is None:
            out[key] = value
        else:
            out.setdefault(head, {})[key[len(head) + 1:]] = value
    return out


MAX_TABLE_BYTES = 256 * 1024 * 1024
"""A table file larger than this is not read (a decision table of one step is kilobytes)."""


def inside_run_dir(run_dir: Path, relative: str) -> Path | None:
    """``run_dir/relative`` resolved (symlinks followed), or None when it lands outside ``run_dir``.

    Example:
        >>> import tempfile
        >>> d = Path(tempfile.mkdtemp())
        >>> inside_run_dir(d, "files/t.json") == (d / "files/t.json").resolve()
        True
        >>> inside_run_dir(d, "files/../../etc/passwd"), inside_run_dir(d, "/etc/passwd")
        (None, None)
    """
    base = run_dir.resolve()
    candidate = (base / relative).resolve()
    return candidate if candidate.is_relative_to(base) else None


def _load_table(run_dir: Path, key: str, row: dict[str, Any], ref: dict[str, Any]) -> OfflineTable:
    columns: list[str] = []
    data: list[list[Any]] = []
    relative = str(ref.get("path", ""))
    path = inside_run_dir(run_dir, os.path.join("files", relative))
    if path is None:
        logger.warning("shopsim-metrics: refused the table file %r of %s: it lies outside the run directory %s",
                       relative, key, run_dir)
    elif not path.is_file():
        logger.warning("shopsim-metrics: table file %s of %s is missing", path, key)
    elif path.stat().st_size > MAX_TABLE_BYTES:
        logger.warning("shopsim-metrics: table file %s of %s is larger than %d bytes; not read", path, key,
                       MAX_TABLE_BYTES)
    else:
        try:
            content = json.loads(path.read_text(encoding="utf-8"))
            columns, data = list(content.get("columns", [])), list(content.get("data", []))
            if not all(isinstance(c, str) for c in columns) or not all(isinstance(r, list) for r in data):
                raise ValueError("columns must be strings and rows lists")
        except (ValueError, RecursionError, AttributeError) as exc:
            logger.warning("shopsim-metrics: table file %s of %s is not a W&B table (%s); skipped", path, key, exc)
            columns, data = [], []
    step = row.get("_step", -1)
    return OfflineTable(key=key, step=int(step) if isinstance(step, (int, float)) and math.isfinite(step) else -1,
                        row=row, columns=columns, data=data)


# --- reader 1: wandb's own `wandb leet inspect --json` -------------------------------------------
def _records_from_leet(wandb_file: Path) -> list[dict[str, Any]] | None:
    cmd = [sys.executable, "-m", "wandb", "leet", "inspect", "--json", str(wandb_file)]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as exc:
        logger.info("shopsim-metrics: `wandb leet inspect` unavailable (%s); decoding the log directly", exc)
        return None
    if proc.returncode != 0:
        logger.info("shopsim-metrics: `wandb leet inspect` failed (%s); decoding the log directly",
                    proc.stderr.strip()[:200])
        return None
    records = []
    for line in proc.stdout.splitlines():
        line = line.strip()
        if line.startswith("{"):
            records.append(json.loads(line))
    return records


# --- reader 2: the .wandb transaction log, decoded with wandb's protobuf classes -----------------
# Framing (LevelDB log format, as wandb documents it): a 7-byte file header ":W&B", magic 0xBEE1,
# version 0; then 32 KiB blocks of chunks, each with a 7-byte header <crc32 u32, length u16,
# type u8> (1 full, 2 first, 3 middle, 4 last); a block tail shorter than a header is padding.
_FILE_HEADER = struct.Struct("<4sHB")
_CHUNK_HEADER = struct.Struct("<IHB")
_BLOCK = 32768
_FULL, _FIRST, _MIDDLE, _LAST = 1, 2, 3, 4


def _iter_chunks(buf: bytes) -> Iterator[bytes]:
    if len(buf) < _FILE_HEADER.size:
        raise ValueError("not a W&B transaction log: shorter than its file header")
    ident, magic, _version = _FILE_HEADER.unpack_from(buf, 0)
    if ident != b":W&B" or magic != 0xBEE1:
        raise ValueError("not a W&B transaction log: bad file header")
    pos, pending = _FILE_HEADER.size, b""
    while pos + _CHUNK_HEADER.size <= len(buf):
        left_in_block = _BLOCK - pos % _BLOCK
        if left_in_block < _CHUNK_HEADER.size:
            pos += left_in_block
            continue
        crc, length, kind = _CHUNK_HEADER.unpack_from(buf, pos)
        start = pos + _CHUNK_HEADER.size
        data = buf[start:start + length]
        if kind == 0 and length == 0 or len(data) < length:
            break  # zero padding at the end, or a torn tail
        if zlib.crc32(data, zlib.crc32(bytes([kind]))) & 0xFFFFFFFF != crc:
            logger.warning("shopsim-metrics: checksum mismatch in the W&B log at byte %d; stopping there", pos)
            break
        pos = start + length
        if kind == _FULL:
            yield data
        elif kind == _FIRST:
            pending = data
        elif kind == _MIDDLE:
            pending += data
        elif kind == _LAST:
            yield pending + data
            pending = b""


def _records_from_log(wandb_file: Path) -> Iterator[dict[str, Any]]:
    from wandb.proto import wandb_internal_pb2 as pb  # lazy: only readers need wandb

    for number, chunk in enumerate(_iter_chunks(wandb_file.read_bytes()), start=1):
        rec = pb.Record()
        rec.ParseFromString(chunk)
        kind = rec.WhichOneof("record_type")
        msg = getattr(rec, kind) if kind else None
        body: dict[str, Any] = {}
        if kind == "run":
            body = {"run_id": msg.run_id, "project": msg.project,
                    "config": {"update": _items(msg.config.update)}}
        elif kind == "config":
            body = {"update": _items(msg.update), "remove": [_item_key(i) for i in msg.remove]}
        elif kind == "history":
            body = {"item": _items(msg.item)}
        elif kind == "summary":
            body = {"update": _items(msg.update), "remove": [_item_key(i) for i in msg.remove]}
        elif kind == "alert":
            body = {"title": msg.title, "text": msg.text, "level": msg.level,
                    "wait_duration": str(msg.wait_duration)}
        elif kind == "metric":
            body = {k: v for k, v in (("name", msg.name), ("glob_name", msg.glob_name),
                                      ("step_metric", msg.step_metric)) if v}
        elif kind == "exit":
            body = {"exit_code": msg.exit_code}
        yield {"num": number, "type": kind, kind: body}


def _item_key(item: Any) -> str:
    return ".".join(list(item.nested_key)) if item.nested_key else item.key


def _items(items: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for item in items:
        out[_item_key(item)] = _item_value(item)
    return out


def _item_value(item: Any) -> Any:
    which = item.WhichOneof("value") if "value" in item.DESCRIPTOR.oneofs_by_name else None
    if which is None:
        return json.loads(item.value_json) if item.value_json else None
    if which == "none":
        return None
    if which == "json":
        return json.loads(item.json)
    return getattr(item, which)


def find_wandb_offline_run(path: Path) -> Path | None:
    """The W&B run directory at or under ``path`` (the newest ``offline-run-*`` when several), or None."""
    if any(path.glob("run-*.wandb")):
        return path
    for base in (path, path / "wandb"):
        latest = base / "latest-run"
        if latest.is_dir() and any(latest.glob("run-*.wandb")) and latest.resolve().is_relative_to(base.resolve()):
            return latest.resolve()  # wandb's link to the newest run beside it; never one out of the directory
        runs = sorted(d for d in base.glob("offline-run-*") if d.is_dir() and any(d.glob("run-*.wandb")))
        if not runs:
            runs = sorted(d for d in base.glob("run-*") if d.is_dir() and any(d.glob("run-*.wandb")))
        if runs:
            return runs[-1]
    return None


def history_to_steps(history: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Merge W&B history rows into one row per ``rollout/step``, keyed by contract names.

    Example:
        >>> history_to_steps([{"rollout/step": 2, "rollout/shopsim/wave_count": 2, "other": 1},
        ...                   {"rollout/step": 2, "rollout/shopsim/terminated": 1}])
        [{'rollout_id': 2, 'wave_count': 2, 'terminated': True}]
    """
    by_step: dict[int, dict[str, Any]] = {}
    for row in history:
        step = row.get(contract.WANDB_STEP_KEY)
        if step is None or (isinstance(step, float) and not math.isfinite(step)):
            continue
        out = by_step.setdefault(int(step), {"rollout_id": int(step)})
        for name in contract.WANDB_SCALAR_NAMES:
            key = contract.wandb_key(name)
            if key not in row:
                continue
            value = row[key]
            if isinstance(value, float) and not math.isfinite(value):
                value = None
            if name == "terminated" and value is not None:
                value = bool(value)
            if value is not None or name not in out:
                out[name] = value
    return [by_step[k] for k in sorted(by_step)]
