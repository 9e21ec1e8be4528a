"""Dumps that never end or cost far more than their size: only regular files are opened (the others named), and
a slime dump's unpacked size and the objects it would make are bounded before it is loaded."""

from __future__ import annotations

import errno
import io
import os
import struct
import threading
import zipfile
from pathlib import Path

import pytest

from shopsim_metrics.cli import main
from shopsim_metrics.outcomes.slime import MAX_UNPACK_RATIO, MAX_UNPACKED_BYTES, check_dump_archive

torch = pytest.importorskip("torch")

from test_dumps import simple_run  # noqa: E402 - after torch's import check, as test_dumps itself


class FifoWatch:
    """A FIFO at ``path``, watched: should anything open it for reading, it is marked opened and released (a writer
    opens it and closes it at once), so a reader that waits on it ends instead of blocking the test forever."""

    def __init__(self, path: Path) -> None:
        os.mkfifo(path)
        self.path, self.opened, self._done = path, False, threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self._thread.start()

    def _watch(self) -> None:
        while not self._done.wait(0.05):
            try:
                fd = os.open(self.path, os.O_WRONLY | os.O_NONBLOCK)
            except OSError as exc:  # ENXIO: no reader has it open
                if exc.errno != errno.ENXIO:
                    return
                continue
            self.opened = True
            os.close(fd)

    def stop(self) -> bool:
        self._done.set()
        self._thread.join()
        return self.opened


@pytest.mark.parametrize("command", [
    ["replay", "{dump}", "--whole-run", "--no-progress", "--seeds", "1", "--over-sampling-batch-size", "4"],
    ["prompts", "{dump}", "--whole-run"],
    ["dashboard", "html", "{dump}", "--whole-run", "--out", "{out}"],
])
def test_a_fifo_named_like_a_dump_is_never_opened_and_is_named(tmp_path: Path, capsys, caplog, command) -> None:
    """Before: replay, prompts and dashboard html opened the FIFO and waited on it forever."""
    dump = tmp_path / "dump"
    simple_run(dump, steps=2, groups=4)
    watch = FifoWatch(dump / "rollout_2.pt")
    try:
        code = main([part.format(dump=dump, out=tmp_path / "d.html") for part in command])
    finally:
        opened = watch.stop()
    assert not opened, "the FIFO was opened"
    assert code == 0, capsys.readouterr().err
    said = capsys.readouterr().err + caplog.text
    assert "rollout_2.pt" in said and "FIFO" in said, said


def test_a_fifo_named_like_a_verl_step_file_is_never_opened_and_is_named(tmp_path: Path, capsys, caplog) -> None:
    from test_dumps import PROMPTS, write_verl_step

    for step in range(1, 4):
        write_verl_step(tmp_path, step, [{"input": p, "output": "o", "score": float(i < k), "step": step}
                                         for k, p in enumerate(PROMPTS) for i in range(4)])
    watch = FifoWatch(tmp_path / "4.jsonl")
    try:
        code = main(["replay", str(tmp_path), "--whole-run", "--seeds", "1", "--no-progress", "--prompt-skip", "off",
                     "--wave-size", "fixed"])
    finally:
        opened = watch.stop()
    assert not opened and code == 0
    said = capsys.readouterr().err + caplog.text
    assert "4.jsonl" in said and "FIFO" in said, said


def _memo_bomb(path: Path, references: int, *, deflate: bool) -> Path:
    """A .pt whose pickle lists one sample dict ``references`` times (one dict, then memo references to it)."""
    buf = io.BytesIO()
    torch.save({"rollout_id": 0, "samples": []}, buf)
    source = zipfile.ZipFile(io.BytesIO(buf.getvalue()))

    def text(value: str) -> bytes:
        raw = value.encode()
        return b"X" + struct.pack("<I", len(raw)) + raw

    sample = (b"}q\x02(" + text("group_index") + b"K\x00" + text("index") + b"K\x00" + text("prompt") + text("p")
              + text("reward") + b"G" + struct.pack(">d", 1.0) + text("status") + text("completed") + b"u")
    pickle_bytes = (b"\x80\x02}q\x00(" + text("rollout_id") + b"K\x00" + text("samples") + b"]q\x01(" + sample
                    + b"h\x02" * (references - 1) + b"eu.")
    with zipfile.ZipFile(path, "w") as out:
        for info in source.infolist():
            pickled = info.filename.endswith("data.pkl")
            out.writestr(info.filename, pickle_bytes if pickled else source.read(info),
                         compress_type=zipfile.ZIP_DEFLATED if pickled and deflate else zipfile.ZIP_STORED)
    return path


def test_a_deflated_pickle_that_unpacks_far_beyond_its_size_is_refused_before_it_is_loaded(tmp_path, capsys,
                                                                                           monkeypatch) -> None:
    """Before: a 79 KB .pt whose data.pkl references one dict 2e7 times took 108 s and 2.75 GB to refuse."""
    (tmp_path / "dump").mkdir()
    bomb = _memo_bomb(tmp_path / "dump" / "rollout_0.pt", 20_000_000, deflate=True)
    assert bomb.stat().st_size < 200_000
    monkeypatch.setattr(torch, "load", _never_called)
    assert main(["replay", str(bomb.parent), "--whole-run", "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1, err
    assert "rollout_0.pt" in err and "data.pkl" in err and f"{MAX_UNPACK_RATIO}" in err, err


def test_a_stored_pickle_of_one_sample_referenced_again_and_again_is_refused(tmp_path, capsys) -> None:
    bomb = _memo_bomb(tmp_path / "rollout_0.pt", 5_000, deflate=False)
    assert main(["replay", str(bomb), "--whole-run", "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "rollout_0.pt" in err and "same object" in err, err


def test_a_dump_above_the_unpacked_size_bound_is_refused_by_its_directory_alone(tmp_path, monkeypatch) -> None:
    from shopsim_metrics.outcomes import slime
    from shopsim_metrics.outcomes.groups import DumpError

    simple_run(tmp_path, steps=1)
    (path,) = sorted(tmp_path.glob("*.pt"))
    check_dump_archive(path)  # a dump torch.save wrote passes
    unpacked = sum(info.file_size for info in zipfile.ZipFile(path).infolist())
    monkeypatch.setattr(slime, "MAX_UNPACKED_BYTES", unpacked - 1)
    with pytest.raises(DumpError, match=f"unpacks to {unpacked} bytes"):
        check_dump_archive(path)
    assert MAX_UNPACKED_BYTES >= 2**30


def _never_called(*args, **kwargs):
    raise AssertionError("torch.load was called")
