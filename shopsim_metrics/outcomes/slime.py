"""slime's rollout dumps: ``--save-debug-rollout-data PATH_{rollout_id}.pt`` and ``--dump-details DIR``.

slime writes, per step, ``torch.save({"rollout_id": id, "samples": [Sample.to_dict(), ...]})``
(``observability/rollout_data_utils.py``): the samples of the groups the step trained, each with its
``group_index`` (the data source's running group number), ``index``, ``prompt``, ``label``,
``reward``, ``status``, ``response_length``, ``loss_mask`` and ``metadata``. ``--dump-details DIR``
writes the same files to ``DIR/rollout_data/{rollout_id}.pt``. Evaluation dumps (``eval_{id}.pt``)
are not training steps and are left out.

A path is one file, a directory (its ``*.pt``, or ``rollout_data/*.pt`` of a ``--dump-details``
directory) or a glob (``'dump/rollout_*.pt'``). Only regular files are read: a FIFO, a device or a socket named
like a dump is skipped, with one warning naming it (a FIFO would be waited on forever). Each file is loaded with
``torch.load(weights_only=True)``: plain containers and tensors only, never code (torch is needed here and only
here).

**Bounded before it is loaded.** A ``.pt`` is a zip archive; its directory says what each member unpacks to, and
is read first (:func:`check_dump_archive`): a dump that unpacks to more than :data:`MAX_UNPACKED_BYTES` (4 GiB),
or holds a member that unpacks to more than :data:`MAX_UNPACK_RATIO` times its packed size (``torch.save`` stores
its members uncompressed: a deflated ``data.pkl`` that unpacks 500-fold was made to cost far more than its size),
is refused in one line without being loaded. The objects a pickle makes are at most one per byte of it, so the
size bound bounds them too; and a dump whose ``samples`` list one object more than once (a pickle's reference,
never what slime writes) is refused before any sample is read.

Samples are grouped by ``group_index``, judged and keyed (:mod:`.groups`). What the reader checks:
one ``rollout_id`` per file and no step twice; a ``group_index`` in one step only, and each step's
groups numbered after the previous step's (files of two runs otherwise); groups of one size.

**Groups the dump cannot hold.** slime stops a step when the batch is full and aborts the groups still
generating: they are in no dump. Their group numbers are missing between the dump's, and the reader
counts them: they are the slowest to finish (long answers, often the hardest prompts), so their
prompts' visits and tokens are missing and a replay's savings are understated (:data:`ABORTED_NOTE`).

Example:
    >>> import tempfile, pathlib
    >>> torch = __import__("pytest").importorskip("torch")
    >>> folder = pathlib.Path(tempfile.mkdtemp())
    >>> sample = lambda g, i, r: {"group_index": g, "index": i, "prompt": f"p{g % 2}", "reward": r,
    ...                           "status": "completed", "response_length": 3, "metadata": {}}
    >>> for step in range(2):
    ...     samples = [sample(2 * step + g, 4 * step + 2 * g + i, float(i)) for g in range(2) for i in range(2)]
    ...     torch.save({"rollout_id": step, "samples": samples}, folder / f"rollout_{step}.pt")
    >>> from shopsim_metrics.outcomes.groups import WHOLE_RUN
    >>> trace = read_slime_dump(folder, DumpOptions(WHOLE_RUN))
    >>> len(trace.prompts), trace.n_samples, trace.visit_count, trace.tokens_recorded
    (2, 2, 4, True)
"""

from __future__ import annotations

import glob
import os
import re
import zipfile
from pathlib import Path
from typing import Any

from shopsim_metrics.outcomes.groups import (
    KEPT_ONLY, DumpError, DumpGroup, DumpOptions, DumpSample, holds_text, judge_dump_group, require_holds,
    trace_from_groups,
)
from shopsim_metrics.outcomes.trace import Trace
from shopsim_metrics.general.plain_values import is_int, shown_value
from shopsim_metrics.judging.group_samples import MAX_TOKENS, checked_response_length
from shopsim_metrics.errors import regular_files

MAX_UNPACKED_BYTES = 4 * 2**30
"""The most a step's dump may unpack to (its zip members summed), checked before it is loaded: slime's dump of a
large step (1,024 samples of 64k tokens with their log-probs) unpacks to about 1.5 GB."""
MAX_UNPACK_RATIO = 20
"""The most a member of a dump may unpack to, as a multiple of its packed size (members above 1 MiB):
``torch.save`` stores them uncompressed (a ratio of 1)."""
_RATIO_FREE_BYTES = 2**20

TORCH_MISSING = ("reading slime's .pt dumps needs torch (pip install torch; the rest of shopsim-metrics does "
                 "not): it is not installed in this Python")

ABORTED_NOTE = ("{missing} groups slime started are not in the dump (numbers missing between its group indices): "
                "groups aborted when the batch filled{dropped}, the slowest to finish (long answers, often the "
                "hardest prompts), so their prompts' visits and tokens are missing and the savings shown are "
                "likely understated")

_EVAL_NAME = re.compile(r"eval_\d+")
_SAMPLE_FIELDS = ("prompt", "label", "reward", "status", "metadata", "response_length", "loss_mask", "index",
                  "rollout_id")


def dump_files(path: str | os.PathLike) -> list[Path]:
    """The ``.pt`` files of ``path`` (a file, a directory, a ``--dump-details`` directory or a glob), eval dumps out.

    Example:
        >>> dump_files("no/such/dir")
        Traceback (most recent call last):
        ...
        shopsim_metrics.outcomes.groups.DumpError: no/such/dir: no such file, directory or glob match (expected slime's rollout dumps: a .pt file, a directory of them or a glob)
    """
    text = os.fspath(path)
    target = Path(text)
    if target.is_dir():
        inner = target / "rollout_data"
        folder = inner if inner.is_dir() and not any(target.glob("*.pt")) else target
        files = regular_files(sorted(folder.glob("*.pt")))
    elif target.exists() and not glob.has_magic(text):
        files = regular_files([target])
    elif glob.has_magic(text):
        files = regular_files(sorted(Path(p) for p in glob.glob(text)))
    else:
        files = []
    if not files and not target.exists() and not glob.has_magic(text):
        raise DumpError(f"{text}: no such file, directory or glob match (expected slime's rollout dumps: a .pt "
                        "file, a directory of them or a glob)")
    training = [f for f in files if not _EVAL_NAME.search(f.name)]
    if not training:
        raise DumpError(f"{text}: no slime rollout dump there (no .pt file" + (", only evaluation dumps eval_*.pt"
                                                                            if files else "") + ")")
    return training


def check_dump_archive(path: Path) -> None:
    """Refuse (:class:`DumpError`) a ``.pt`` whose zip directory says it unpacks beyond the bounds (module
    docstring: :data:`MAX_UNPACKED_BYTES`, :data:`MAX_UNPACK_RATIO`), before anything of it is unpacked.
    A file that is not a zip archive is left to ``torch.load`` (it says what the file is)."""
    try:
        with zipfile.ZipFile(path) as archive:
            members = archive.infolist()
    except (zipfile.BadZipFile, OSError, ValueError, EOFError):
        return
    unpacked = sum(member.file_size for member in members)
    if unpacked > MAX_UNPACKED_BYTES:
        raise DumpError(f"{path}: unpacks to {unpacked} bytes, above the {MAX_UNPACKED_BYTES} a step's dump may hold "
                        "(shopsim_metrics.outcomes.slime.MAX_UNPACKED_BYTES); not loaded")
    for member in members:
        if member.file_size > _RATIO_FREE_BYTES and member.file_size > MAX_UNPACK_RATIO * max(member.compress_size, 1):
            raise DumpError(f"{path}: its {member.filename} unpacks to {member.file_size} bytes from "
                            f"{member.compress_size}, more than {MAX_UNPACK_RATIO} times its size (torch.save stores "
                            "a dump uncompressed: this one was packed to cost far more than its size); not loaded")


def load_dump_file(path: Path) -> tuple[int, list[dict[str, Any]]]:
    """One file's ``(rollout_id, samples)``; :class:`DumpError` for a file that is not a slime rollout dump, or one
    beyond the bounds (module docstring), checked before it is loaded."""
    try:
        import torch
    except ImportError:
        raise DumpError(f"{path}: {TORCH_MISSING}") from None
    check_dump_archive(path)
    try:
        with _numpy_scalars_allowed(torch):
            data = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # noqa: BLE001 - a torn file, another format, an object torch refuses to unpickle
        reason = " ".join(str(exc).split())[:160]
        raise DumpError(f"{path}: not a slime rollout dump torch can load safely ({type(exc).__name__}: "
                        f"{reason})") from None
    if not isinstance(data, dict) or not isinstance(data.get("samples"), list):
        raise DumpError(f"{path}: not a slime rollout dump (expected a dict with 'rollout_id' and a 'samples' list, "
                        "as --save-debug-rollout-data writes)")
    rollout_id = data.get("rollout_id")
    if not is_int(rollout_id) or rollout_id < 0:
        raise DumpError(f"{path}: its rollout_id is {rollout_id!r}, not a step number (an evaluation dump?)")
    seen: set[int] = set()
    for position, sample in enumerate(data["samples"]):
        if id(sample) in seen:
            raise DumpError(f"{path}: sample {position} is the same object as an earlier sample (a pickle that lists "
                            "one sample again and again; slime writes each sample once): not a slime rollout dump")
        if isinstance(sample, (dict, list)):
            seen.add(id(sample))
    return rollout_id, data["samples"]


def step_groups(path: Path, samples: list[Any]) -> dict[int, list[DumpSample]]:
    """A step's samples by ``group_index`` (in the order slime wrote them). :class:`DumpError`, naming the sample
    and its value, for a sample no slime run writes: a ``response_length`` above
    :data:`~shopsim_metrics.judging.group_samples.MAX_TOKENS`, or an ``index`` another sample of its group has without a
    ``rollout_id`` telling them apart (slime gives each sample its own index; the segments of one rollout share a
    ``rollout_id``): the group would read as fewer rollouts than it holds."""
    groups: dict[int, list[DumpSample]] = {}
    indices: dict[tuple[int, Any], int] = {}  # (group, index) of a sample without rollout_id -> its position
    for position, raw in enumerate(samples):
        if not isinstance(raw, dict):
            raise DumpError(f"{path}: sample {position} is a {type(raw).__name__}, not a dict (Sample.to_dict())")
        group_index = raw.get("group_index")
        if not is_int(group_index):
            raise DumpError(f"{path}: sample {position} has no integer group_index ({group_index!r}): its group "
                            "cannot be told")
        sample = DumpSample(**{name: raw.get(name) for name in _SAMPLE_FIELDS})
        _, too_long = checked_response_length(sample)
        if too_long is not None:
            raise DumpError(f"{path}: sample {position} has response_length {shown_value(too_long)}, more than the "
                            f"{MAX_TOKENS:,} tokens a response can hold: a damaged dump, not one slime wrote")
        if sample.rollout_id is None and is_int(sample.index):
            first = indices.setdefault((group_index, sample.index), position)
            if first != position:
                raise DumpError(f"{path}: group {group_index} holds two samples with index {sample.index} (samples "
                                f"{first} and {position}) and no rollout_id: they would count as one rollout. slime "
                                "gives every sample its own index (the segments of one rollout share a rollout_id): "
                                "samples copied or merged into this dump?")
        groups.setdefault(group_index, []).append(sample)
    return groups


def plain(value: Any) -> Any:
    """``value`` with numpy scalars as Python's (a dict's values too): a reward function may return
    ``np.float32(1.0)``, which the filter's rules would not read as a number.

    Example:
        >>> import numpy as np
        >>> plain(np.float32(0.5)), plain({"acc": np.int64(1), "ok": np.bool_(True)}), plain([1])
        (0.5, {'acc': 1, 'ok': True}, [1])
    """
    import numpy as np

    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, dict):
        return {key: plain(item) for key, item in value.items()}
    return value


def _numpy_scalars_allowed(torch: Any) -> Any:
    """A context in which ``torch.load(weights_only=True)`` also takes numpy scalars and their dtypes (plain
    data, no code: a reward returned as ``np.float32`` is pickled as one), where torch can be told so."""
    import contextlib

    import numpy as np

    safe_globals = getattr(torch.serialization, "safe_globals", None)
    if safe_globals is None:  # an old torch: numpy scalars stay refused, in the error's one line
        return contextlib.nullcontext()
    scalar = np.float64(0.0).__reduce__()[0]  # numpy's scalar constructor, wherever this numpy keeps it
    dtypes = {type(np.dtype(code)) for code in "?bhilqBHILQefdgFDG"}
    return safe_globals([scalar, np.dtype, *dtypes])


def read_slime_dump(path: str | os.PathLike, options: DumpOptions) -> Trace:
    """The trace of slime's rollout dumps at ``path`` (module docstring). Files are read one at a time and
    only their judged groups kept."""
    origin = os.fspath(path)
    require_holds(options, origin, "slime")
    files = dump_files(path)
    groups: list[DumpGroup] = []
    file_of: dict[int, Path] = {}
    numbers: dict[int, list[int]] = {}  # step -> its group numbers
    owner: dict[int, int] = {}  # group number -> its step
    for file in files:
        step, samples = load_dump_file(file)
        if step in file_of:
            raise DumpError(f"{file}: step {step} twice (also in {file_of[step]}): files of two runs, or copies")
        file_of[step] = file
        by_index = step_groups(file, [plain(raw) for raw in samples])  # numpy scalars as Python's
        del samples
        for group_index, members in by_index.items():
            if group_index in owner:
                raise DumpError(f"{file}: group {group_index} is in step {owner[group_index]} and step {step}: "
                                "files of two runs")
            owner[group_index] = step
            groups.append(judge_dump_group(step, members, options))
        numbers[step] = sorted(by_index)
    check_numbering(numbers, file_of)
    if not groups:
        raise DumpError(f"{origin}: the dump holds no sample")
    check_missing_groups(numbers, file_of)
    missing = (max(owner) - min(owner) + 1) - len(owner)
    notes = []
    if missing:
        dropped = " or dropped by the dynamic filter" if options.holds == KEPT_ONLY else ""
        notes.append(ABORTED_NOTE.format(missing=missing, dropped=dropped))
    return trace_from_groups(groups, origin=f"{origin} (slime's rollout dumps, {len(files)} files, "
                                            f"{holds_text(options)})", options=options, notes=notes,
                             drawn_per_step=drawn_per_step(numbers))


def drawn_per_step(numbers: dict[int, list[int]]) -> dict[int, int]:
    """The groups each step drew, held or not: its group numbers up to its last, after the previous step's last
    (slime's data source counts every group it hands out; the first step from its first number).

    Example:
        >>> drawn_per_step({0: [0, 1, 3], 1: [4, 6], 2: [9, 11]})
        {0: 4, 1: 3, 2: 5}
    """
    drawn: dict[int, int] = {}
    previous: int | None = None
    for step in sorted(numbers):
        if not numbers[step]:
            continue
        first, last = numbers[step][0], numbers[step][-1]
        drawn[step] = last - (first - 1 if previous is None else previous)
        previous = last
    return drawn


MAX_MISSING_PER_GROUP = 100
"""The most groups a dump may lack between its group numbers, per group it holds: slime aborts (and a filter drops)
some of the groups it starts, never a hundred for each it keeps; more is a damaged ``group_index``."""


def check_missing_groups(numbers: dict[int, list[int]], file_of: dict[int, Path]) -> None:
    """Refuse group numbers that leave more than :data:`MAX_MISSING_PER_GROUP` groups missing per group held, naming
    the largest jump: slime's data source numbers its groups one after another.

    Example:
        >>> check_missing_groups({0: [0, 1], 1: [3, 4]}, {})
        >>> check_missing_groups({0: [0, 1], 1: [2, 10**15]}, {1: Path("rollout_1.pt")})
        Traceback (most recent call last):
        ...
        shopsim_metrics.outcomes.groups.DumpError: rollout_1.pt: group_index jumps from 2 to 1,000,000,000,000,000 in step 1: 999,999,999,999,997 groups would be missing from the dump, more than 100 for each of its 4 groups; slime numbers its groups one after another, so a group_index was damaged (or files of two runs are mixed)
    """
    placed = sorted((number, step) for step, found in numbers.items() for number in found)
    held = len(placed)
    missing = placed[-1][0] - placed[0][0] + 1 - held if placed else 0
    if missing <= MAX_MISSING_PER_GROUP * held:
        return
    (low, low_step), (high, step) = max(zip(placed, placed[1:]), key=lambda pair: pair[1][0] - pair[0][0])
    where = f"in step {step}" if low_step == step else f"from step {low_step} to step {step}"
    raise DumpError(f"{file_of.get(step, step)}: group_index jumps from {low:,} to {high:,} {where}: {missing:,} groups "
                    f"would be missing from the dump, more than {MAX_MISSING_PER_GROUP} for each of its {held:,} "
                    "groups; slime numbers its groups one after another, so a group_index was damaged (or files of "
                    "two runs are mixed)")


def check_numbering(numbers: dict[int, list[int]], file_of: dict[int, Path]) -> None:
    """Each step's groups numbered after the previous step's (slime's data source counts up): else files of two runs.

    Example:
        >>> check_numbering({0: [0, 1], 1: [2, 5]}, {})
        >>> check_numbering({0: [0, 9], 1: [2, 5]}, {1: Path("rollout_1.pt")})
        Traceback (most recent call last):
        ...
        shopsim_metrics.outcomes.groups.DumpError: rollout_1.pt: step 1's groups are numbered before step 0's (up to 5 against 9): files of two runs
    """
    previous: tuple[int, int] | None = None
    for step in sorted(numbers):
        if not numbers[step]:
            continue
        top = numbers[step][-1]
        if previous is not None and top <= previous[1]:
            raise DumpError(f"{file_of.get(step, step)}: step {step}'s groups are numbered before step "
                            f"{previous[0]}'s (up to {top} against {previous[1]}): files of two runs")
        previous = (step, top)
