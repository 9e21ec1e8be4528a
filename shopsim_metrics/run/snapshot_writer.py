"""The one writer of the monitor's snapshots: off slime's log-function thread, one at a time, durably.

When slime checkpoints after step N (:class:`~shopsim_metrics.run.snapshot.SnapshotPlan`), the monitor asks
:meth:`SnapshotWriter.save`. slime's log function does not wait for the snapshot: the writer takes the
judgement lock, checks that the live state is the state right after step N (no group of a later step judged
yet), and hands the lock to a thread of its own. That thread copies the state (a judgement of the next step
that comes during the copy waits for it), releases the lock, and writes the copy durably (temporary file,
``fsync``, replace: a crash at any moment leaves the snapshots written before whole, and this one whole or
absent). The run's last step waits for its own snapshot (the process may end right after it), and so does
the monitor's shutdown (:meth:`SnapshotWriter.wait`). Each failed snapshot is one warning, naming its step (a
failure at every checkpoint is said at every checkpoint); training goes on and a resume from that checkpoint
replays the records instead.

Example:
    >>> import json, tempfile, threading
    >>> from pathlib import Path
    >>> ckpt = tempfile.mkdtemp()
    >>> plan = SnapshotPlan(save=ckpt, load=None, save_interval=2, num_rollout=4)
    >>> writer = SnapshotWriter(plan, threading.Lock(), copy=lambda step: {"rollout_id": step}, warn=print)
    >>> writer.save(0, live_after=lambda step: True)  # not due: slime checkpoints after steps 1 and 3
    >>> writer.save(1, live_after=lambda step: True); writer.wait()
    >>> json.loads(snapshot_path(ckpt, 1).read_text())
    {'rollout_id': 1}
"""

from __future__ import annotations

import logging
import threading
from typing import Any, Callable

from shopsim_metrics.run.snapshot import SnapshotPlan, snapshot_path
from shopsim_metrics.state_file import write_json

logger = logging.getLogger("shopsim_metrics")


class SnapshotWriter:
    """Writes the snapshot of a step when slime checkpoints after it (see the module docstring).

    ``judge_lock``: the monitor's judgement lock, held while the state is checked and copied; ``copy(step)``:
    the snapshot's JSON-native data (called on the writer's thread, under the lock); ``warn(message, *args)``:
    where a failure is said (once per kind, by the monitor).
    """

    def __init__(self, plan: SnapshotPlan, judge_lock: threading.Lock, *, copy: Callable[[int], dict[str, Any]],
                 warn: Callable[..., None]) -> None:
        self.plan = plan
        self._judge_lock = judge_lock
        self._copy = copy
        self._warn = warn
        self._thread: threading.Thread | None = None  # the snapshot being written

    def save(self, rollout_id: int, *, live_after: Callable[[int], bool]) -> None:
        """Start writing the snapshot of step ``rollout_id`` when it is due and ``live_after(rollout_id)`` (checked
        under the judgement lock) says the live state is the state right after that step; return at once,
        except at the run's last step."""
        plan = self.plan
        if plan.save is None or not plan.due(rollout_id):
            return
        self.wait()
        self._judge_lock.acquire()
        handed = False
        try:
            if not live_after(rollout_id):
                logger.info("shopsim-metrics: no monitor snapshot at step %d: groups of a later step are already "
                            "judged (a resume from it replays from an older snapshot)", rollout_id)
                return
            thread = threading.Thread(target=self._write, args=(rollout_id,), name="shopsim-snapshot")
            thread.start()  # it releases the judgement lock once it has copied the state
            handed = True
            self._thread = thread
        except Exception as exc:  # noqa: BLE001 - monitoring never stops training
            self._failed(rollout_id, exc)
        finally:
            if not handed:
                self._judge_lock.release()
        if plan.num_rollout is not None and rollout_id == plan.num_rollout - 1:
            self.wait()

    def wait(self) -> None:
        """Return once the snapshot being written (if any) is on disk (or has failed, with its warning)."""
        thread = self._thread
        if thread is not None:
            thread.join()
            self._thread = None

    def _write(self, rollout_id: int) -> None:
        """The writer's thread: copy the state (holding the judgement lock it was handed), let the judgements
        go on, then write the copy durably."""
        try:
            try:
                data = self._copy(rollout_id)
            finally:
                self._judge_lock.release()
            assert self.plan.save is not None  # only started with --save
            write_json(snapshot_path(self.plan.save, rollout_id), data)  # fsync'ed, then replaced
        except Exception as exc:  # noqa: BLE001 - monitoring never stops training
            self._failed(rollout_id, exc)

    def _failed(self, rollout_id: int, exc: Exception) -> None:
        self._warn(f"snapshot {rollout_id}", "shopsim-metrics: writing the monitor snapshot of step %s failed (%s: "
                   "%s); a resume from it replays the records instead.", rollout_id, type(exc).__name__, exc)
