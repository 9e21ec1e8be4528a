"""The monitor's resumable state, declared once: each piece under its name, saved, loaded and replayed alike.

A resumed run holds what an unbroken run would: the technical streak, the prompt history, the skip tally,
the recent steps' finishing orders and the advisor. Each is registered once, under the name it has in the
snapshot (:func:`monitor_state`); the snapshot (:func:`~shopsim_metrics.run.snapshot.build_snapshot`), its
load and the replay of the records (:mod:`shopsim_metrics.run.resume`) iterate the registry and name none
of them. A piece the run does not keep (no prompt history; alerts off, so no advisor) is not registered:
it is neither saved, nor loaded, nor replayed.

A registered piece is :class:`Resumable`: it gives its state as JSON-native data (``state_dict``), puts
such a state back (``load_state_dict``, all or nothing) and walks one step's record again (``replay``).
A registered setting is a value the saved pieces depend on: a snapshot saved with another value is not
used. In a snapshot each entry is one top-level key, in registration order.

Example:
    >>> from shopsim_metrics.record.records import DecisionRow, StepRecord
    >>> from shopsim_metrics.health.streak import TechnicalStreak
    >>> row = DecisionRow(order=1, waves_open=1, group_index=0, outcome="dropped_technical", reason=None,
    ...                   remaining_before=8, unique_rollouts=8, failed_check="status_failed")
    >>> live = ResumableState()
    >>> live.register("streak", TechnicalStreak())
    >>> live.replay(StepRecord(rollout_id=0, decisions=[row]))
    >>> saved = live.state_dict(); saved
    {'streak': {'count': 1, 'checks': {'status_failed': 1}}}
    >>> streak = TechnicalStreak(); resumed = ResumableState(); resumed.register("streak", streak)
    >>> resumed.unusable(saved) is None
    True
    >>> resumed.load_state_dict(saved); streak.count
    1
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Protocol

from shopsim_metrics.prompts.skip_record import SkipTally
from shopsim_metrics.prompts.value import PromptValueTracker
from shopsim_metrics.health.advisories import Advisor
from shopsim_metrics.record.records import StepRecord
from shopsim_metrics.health.streak import TechnicalStreak
from shopsim_metrics.waves.wave_size import RecentOrders

SNAPSHOT_HEADER = ("kind", "format", "rollout_id", "run_id", "writer", "processes", "missing", "records")
"""The snapshot's own fields (:mod:`shopsim_metrics.run.snapshot`); every other key of a snapshot is a registered
piece of the monitor's state, so no piece may take one of these names."""


class Resumable(Protocol):
    """A piece of state a resumed run restores, from a snapshot or by replaying the records."""

    def state_dict(self) -> dict[str, Any]:
        """The state as JSON-native data."""

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Put back a :meth:`state_dict`'s state; all or nothing (raises ``ValueError``, ``KeyError`` or
        ``TypeError`` for another shape)."""

    def replay(self, record: StepRecord) -> None:
        """Walk one recorded step again, as the live step fed the piece."""


@dataclass(frozen=True)
class _Piece:
    piece: Resumable
    optional: bool  # absent from a snapshot, it keeps its fresh state (else the snapshot is not used)
    older_names: tuple[str, ...]  # the keys older snapshots saved it under


@dataclass(frozen=True)
class _Setting:
    value: Any  # JSON-native


class ResumableState:
    """The registry of the resumable pieces and the settings their saved state depends on (see the module)."""

    def __init__(self) -> None:
        self._entries: dict[str, _Piece | _Setting] = {}

    def register(self, name: str, piece: Resumable, *, optional: bool = False,
                 older_names: tuple[str, ...] = ()) -> None:
        """Register ``piece`` under ``name``, its key in a snapshot.

        ``optional``: a snapshot without it (saved before the piece existed) leaves it as it is, fresh;
        otherwise such a snapshot is not used. ``older_names``: keys older snapshots saved it under.
        """
        self._add(name, _Piece(piece, optional, tuple(older_names)))

    def require_setting(self, name: str, value: Any) -> None:
        """Save ``value`` (JSON-native) under ``name``; a snapshot that says another value, or none, is not used."""
        self._add(name, _Setting(value))

    def _add(self, name: str, entry: _Piece | _Setting) -> None:
        if name in SNAPSHOT_HEADER:
            raise ValueError(f"resumable state: {name!r} is a snapshot header field "
                             f"({', '.join(SNAPSHOT_HEADER)}); register the piece under another name")
        if name in self._entries:
            raise ValueError(f"resumable state: {name!r} is registered already; each piece is declared once, "
                             "under a name of its own")
        self._entries[name] = entry

    @property
    def names(self) -> tuple[str, ...]:
        """The registered names, in registration order (the snapshot's order).

        >>> state = ResumableState(); state.require_setting("limit", 6); state.names
        ('limit',)
        """
        return tuple(self._entries)

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def _pieces(self) -> list[tuple[str, _Piece]]:
        return [(name, entry) for name, entry in self._entries.items() if isinstance(entry, _Piece)]

    def state_dict(self) -> dict[str, Any]:
        """Every entry under its name: a piece's ``state_dict()``, a setting's value."""
        return {name: entry.piece.state_dict() if isinstance(entry, _Piece) else entry.value
                for name, entry in self._entries.items()}

    def unusable(self, saved: Mapping[str, Any]) -> str | None:
        """Why the snapshot ``saved`` cannot stand for these pieces (it was taken with another setting, or
        lacks a piece that is not optional), as the end of a sentence; None when it can. A key of ``saved``
        that is not registered (a piece this run does not keep) is left aside; a key saved as ``null`` is
        absent.

        >>> state = ResumableState(); state.require_setting("limit", 6)
        >>> state.unusable({"limit": 4})
        'was taken with another limit (4 against 6)'
        """
        for name, entry in self._entries.items():
            if isinstance(entry, _Setting):
                if saved.get(name) != entry.value:
                    return f"was taken with another {name} ({saved.get(name)} against {entry.value})"
            elif not entry.optional and _saved_state(saved, name, entry) is None:
                return f"holds no {name}"
        return None

    def load_state_dict(self, saved: Mapping[str, Any]) -> None:
        """Load every registered piece from the snapshot ``saved`` (check :meth:`unusable` first); all or
        nothing: when one piece's state is not one it loads (``ValueError``, ``KeyError``, ``TypeError``),
        the pieces loaded before it get their state back and the error goes on."""
        before: list[tuple[Resumable, dict[str, Any]]] = []
        try:
            for name, entry in self._pieces():
                state = _saved_state(saved, name, entry)
                if state is None:
                    if entry.optional:
                        continue
                    raise KeyError(f"the snapshot holds no {name}")
                if not isinstance(state, dict):
                    raise TypeError(f"{name}: a saved state is a JSON object, not {type(state).__name__}")
                before.append((entry.piece, entry.piece.state_dict()))
                entry.piece.load_state_dict(state)
        except BaseException:
            for piece, state in before:
                piece.load_state_dict(state)
            raise

    def replay(self, record: StepRecord) -> None:
        """Walk one recorded step again through every piece, in registration order."""
        for _, entry in self._pieces():
            entry.piece.replay(record)


def _saved_state(saved: Mapping[str, Any], name: str, entry: _Piece) -> Any:
    """The piece's saved state under its name or an older one; None when absent (or saved as ``null``)."""
    for key in (name, *entry.older_names):
        if saved.get(key) is not None:
            return saved[key]
    return None


def prompt_settings(prompts: PromptValueTracker | None) -> dict[str, Any] | None:
    """What a saved prompt history depends on (None: no prompt history): a snapshot of other values is not used.

    >>> prompt_settings(PromptValueTracker(limit=6, forgetting=0.9))
    {'limit': 6, 'forgetting': 0.9, 'metadata_key': None}
    """
    if prompts is None:
        return None
    return {"limit": prompts.history.limit, "forgetting": prompts.history.forgetting,
            "metadata_key": prompts.metadata_key}


def monitor_state(*, streak: TechnicalStreak, prompts: PromptValueTracker | None = None,
                  skips: SkipTally | None = None, recent_orders: RecentOrders | None = None,
                  advisor: Advisor | None = None) -> ResumableState:
    """The monitor's resumable state, declared once; the pieces a run does not keep are None.

    The names are the snapshot's keys (format 1): ``recent_orders`` was ``rates`` before the orders were
    kept (counts only, loaded as steps of unknown order); a snapshot saved before the advisories existed
    has none (the advisor starts empty). ``prompt_settings`` is registered even without a prompt history
    (None), so a snapshot with one and a run without one (or the reverse) do not mix.

    Example:
        >>> monitor_state(streak=TechnicalStreak(), recent_orders=RecentOrders()).names
        ('streak', 'prompt_settings', 'recent_orders')
        >>> monitor_state(streak=TechnicalStreak(), prompts=PromptValueTracker(), skips=SkipTally(),
        ...               recent_orders=RecentOrders(), advisor=Advisor()).names
        ('streak', 'prompt_settings', 'prompts', 'skips', 'recent_orders', 'advisories')
    """
    state = ResumableState()
    state.register("streak", streak)
    state.require_setting("prompt_settings", prompt_settings(prompts))
    if prompts is not None:
        state.register("prompts", prompts)
    if skips is not None:
        state.register("skips", skips)
    if recent_orders is not None:
        state.register("recent_orders", recent_orders, older_names=("rates",))
    if advisor is not None:
        state.register("advisories", advisor, optional=True)
    return state
