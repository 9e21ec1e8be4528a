"""One step's tool calls per tool and why its episodes ended: the inputs of the record's tool fields.

Every episode the sample hook saw start in the step counts, aborted ones included, as its latest generate call
left it (:func:`~shopsim_metrics.judging.episodes.read_episode` read its tool-call list once).

**Why an episode ended** (:data:`~shopsim_metrics.judging.tool_calls.END_REASONS`, in this order of precedence):

- ``model_failure`` / ``environment_failure``: the generate function said whose failure it was
  (``metadata["shopsim_failure_kind"]``, or a failure cause, which is the environment's), whatever the status;
- ``unmarked_failure``: status ``aborted`` or ``failed`` with no kind and no cause, in a group the filter judged
  (slime's own abort never reaches the filter: this is the generate function's, unexplained; slime's
  ``examples/tau-bench`` ends every failure this way);
- ``slime_abort``: status ``aborted`` (or ``failed``) with no kind and no cause, in no judged group (slime's
  end-of-step abort);
- ``truncated``: status ``truncated``; ``completed``: the rest.

Example:
    >>> from shopsim_metrics.judging.episodes import Episode
    >>> from shopsim_metrics.judging.tool_calls import ToolCall, ToolCalls
    >>> calls = ToolCalls((ToolCall("search", 2.0, None), ToolCall("view", 0.5, "model")), 1)
    >>> done = Episode(9, 6, 3, 3, "metadata", 2.5, False, True, tools=calls)
    >>> broken = Episode(4, 4, 0, 1, None, 0.0, False, True, failure_kind="model", failed=True)
    >>> tally = ToolTally.of([(done, True), (broken, True)])
    >>> tally.tools["view"].model_errors, tally.unreadable, tally.ends["model_failure"], tally.ends["completed"]
    (1, 1, 1, 1)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable

from shopsim_metrics.judging.episodes import Episode
from shopsim_metrics.judging.tool_calls import END_REASONS, MODEL


@dataclass
class ToolStat:
    """One tool's calls in a step: how many, how many failed (all, and the model's), and each call's seconds."""

    calls: int = 0
    errors: int = 0
    model_errors: int = 0
    seconds: list[float] = field(default_factory=list)


@dataclass(frozen=True)
class ToolTally:
    """The step's tool calls by tool name, the entries that could not be read, and why its episodes ended."""

    episodes: int
    tools: dict[str, ToolStat]
    unreadable: int  # tool-call entries ignored (judging.tool_calls: bad entries are counted, never raised)
    reporting: int  # episodes that left a tool-call list
    ends: dict[str, int]  # END_REASONS -> episodes
    run_reported: bool = True  # some episode of the run (this step's or an earlier one) left a tool-call list
    counted: int = 0  # calls only counted (retool's tool_call_count: no name, time or outcome)

    @classmethod
    def of(cls, episodes: Iterable[tuple[Episode, bool]], run_reported: bool = False) -> "ToolTally":
        """The tally of ``(episode, in a judged group)`` pairs; ``run_reported``: an earlier step's episode left a
        tool-call list (this step's count too)."""
        tools: dict[str, ToolStat] = {}
        ends = dict.fromkeys(END_REASONS, 0)
        count = unreadable = reporting = counted = 0
        for episode, judged in episodes:
            count += 1
            ends[end_reason(episode, judged)] += 1
            calls = episode.tools
            if calls is None:
                continue
            reporting += calls.listed
            unreadable += calls.unreadable
            counted += calls.counted
            for call in calls.calls:
                stat = tools.get(call.name)
                if stat is None:
                    stat = tools[call.name] = ToolStat()
                stat.calls += 1
                stat.seconds.append(call.seconds)
                if call.error is not None:
                    stat.errors += 1
                    stat.model_errors += call.error == MODEL
        return cls(count, tools, unreadable, reporting, ends, run_reported or reporting > 0, counted)


def end_reason(episode: Episode, judged: bool) -> str:
    """Why ``episode`` ended (the module docstring's rules); ``judged``: its group was judged in the step.

    Example:
        >>> from shopsim_metrics.judging.episodes import Episode
        >>> aborted = Episode(4, 4, 0, 1, None, 0.0, False, True, failed=True)
        >>> end_reason(aborted, judged=True), end_reason(aborted, judged=False)
        ('unmarked_failure', 'slime_abort')
    """
    if episode.failure_kind is not None:
        return f"{episode.failure_kind}_failure"
    if episode.failed:
        return "unmarked_failure" if judged else "slime_abort"
    return "truncated" if episode.truncated else "completed"
