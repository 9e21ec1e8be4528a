"""A dump's groups, judged by the project's own rules, and the trace they make.

A framework's dump holds, per step, the rollouts of the groups it trained. Each group is judged as the
filter judges one (:func:`~shopsim_metrics.judging.group_judgement.judge_group`: scorable rollouts,
successes by ``--success-threshold`` or the metadata flag, a dict reward read by ``--reward-key``) and
keyed as the monitor keys it (:func:`~shopsim_metrics.judging.prompt_keys.prompt_key`: ``--prompt-key``'s
metadata value, else the hash of the prompt), so a dump and this package's records of the same run name
the same prompts. Its generated tokens are the monitor's (:func:`~shopsim_metrics.judging.group_samples.read_generated_tokens`,
slime's rule): the 1s of a ``loss_mask`` as long as ``response_length``, else ``response_length`` (a
multi-turn episode's tool output is not generated).

:func:`trace_from_groups` turns the groups into a :class:`~shopsim_metrics.outcomes.trace.Trace`: each
scored group is a visit of its prompt at its step (time ``(step - first + 1/2) / steps``), zero-std
when its rewards did not differ. Technical groups (an aborted or failed rollout, a missing reward)
are counted and left out, as in a records trace.

**The wave size.** A replay runs at the dump's own ``over_sampling_batch_size``: the groups a step drew. A whole run's
dump holds every group it trained; the groups a step drew are those, plus the groups slime aborted when the batch
filled (``drawn_per_step``: a slime dump's group numbers count them; verl generates exactly its batch, so its groups
per step are the figure). The most common per step is the wave size (:func:`wave_size_of`). A kept-only dump cannot
say it (the groups the filter dropped and the extra waves are missing): the wave size is unknown, and the replay
says so.

**Whole run or kept groups.** A dump does not say whether the run had a dynamic filter; with one it
holds only the groups the filter kept. The user says which (:data:`WHOLE_RUN` or :data:`KEPT_ONLY`):
nothing else is read. A "whole run" with no zero-std group among many is refused (a filter such as
slime's ``check_reward_nonzero_std`` keeps none; a run that trains every group has some); kept groups are
read with the bias said (:data:`KEPT_ONLY_NOTE`).

Example:
    >>> samples = [DumpSample(prompt="2+2", reward=float(i % 2), index=i) for i in range(4)]
    >>> group = judge_dump_group(3, samples, DumpOptions(WHOLE_RUN))
    >>> group.kind, group.successes, group.rollouts, group.key.startswith("b2:")
    ('spread', 2, 4, True)
    >>> trace = trace_from_groups([group], origin="dump", options=DumpOptions(WHOLE_RUN))
    >>> trace.visits[0][0].step, trace.n_samples, trace.run.rollout_batch_size, trace.run.over_sampling_batch_size
    (3, 4, 1, 1)
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from shopsim_metrics.judging.group_judgement import SPREAD, TECHNICAL, judge_group
from shopsim_metrics.judging.group_samples import read_generated_tokens
from shopsim_metrics.judging.prompt_keys import prompt_key
from shopsim_metrics.outcomes.trace import RunKnobs, Trace, TraceError, Visit

WHOLE_RUN = "whole-run"
KEPT_ONLY = "kept-only"
DUMP_HOLDS = (WHOLE_RUN, KEPT_ONLY)
"""What a dump holds, as the user says (``--whole-run``, ``--kept-only``): every group a run without a dynamic
filter trained, or only the groups a filter kept."""

MIN_GROUPS_FOR_NO_ZERO_STD = 32
"""A "whole run" with this many scored groups and not one zero-std is refused: a filter kept only groups with spread."""

RECORD_EVERY_GROUP = ("record every group with the project's hooks (--rollout-all-samples-process-path "
                      "shopsimrl.slime_runtime.record_all_samples, docs §1.1) and replay the run directory")

KEPT_ONLY_NOTE = ("figures biased (--kept-only): the dump holds only the groups the dynamic filter kept; every "
                  "group it dropped is missing, so the trace's zero-std share ({share:.2f}) is below the run's, "
                  "the savings shown are understated and the lost signal overstated; to judge skipping, "
                  + RECORD_EVERY_GROUP)


class DumpError(TraceError):
    """A dump that cannot be read as a trace; the message names the file and what is wrong."""


@dataclass(frozen=True)
class DumpOptions:
    """How a dump is read: what it holds, and the filter's settings for keys, rewards and success."""

    holds: str | None  # WHOLE_RUN, KEPT_ONLY, or None: not said (refused)
    prompt_key: str | None = None  # a metadata key naming the prompt (else the prompt's hash)
    reward_key: str | None = None  # the key of a dict reward
    success_threshold: float = 1.0
    success_key: str = "shopsim_success"  # the metadata flag that decides success when present


@dataclass(slots=True)
class DumpSample:
    """One rollout of a dump under slime's ``Sample`` attribute names (what the judging and keying read)."""

    prompt: Any = None
    label: Any = None
    reward: Any = None
    status: Any = "completed"
    metadata: Any = None
    response_length: Any = None
    loss_mask: Any = None
    index: Any = None
    rollout_id: Any = None


@dataclass(frozen=True, slots=True)
class DumpGroup:
    """One group of a dump, judged."""

    step: int
    key: str
    rollouts: int  # unique rollouts (segments of one rollout count once)
    successes: int  # of the scorable rollouts
    kind: str  # SPREAD, ZERO_STD or TECHNICAL
    tokens: int | None  # generated tokens of every rollout (None: the dump records none)
    text: str | None = None  # the prompt as the dump holds it (:func:`prompt_text`), for people to read


TEXT_LIMIT = 400
"""Characters of a prompt's text a trace keeps (what a table cell or a skip-list entry shows)."""


def prompt_text(prompt: Any) -> str | None:
    """A dump's prompt as one line people can read: the text itself, a chat's messages as ``role: content``
    (the last ones when long), anything else as JSON; at most :data:`TEXT_LIMIT` characters (None: no prompt).

    Example:
        >>> prompt_text("What is 2+2?\\n")
        'What is 2+2?'
        >>> prompt_text([{"role": "system", "content": "Be brief."}, {"role": "user", "content": "2+2?"}])
        'system: Be brief. | user: 2+2?'
        >>> len(prompt_text("x" * 1000)), prompt_text(None)
        (400, None)
    """
    if prompt is None:
        return None
    if isinstance(prompt, str):
        text = prompt
    elif isinstance(prompt, list) and all(isinstance(m, dict) and "content" in m for m in prompt):
        text = " | ".join(f"{m.get('role', '?')}: {m['content']}" for m in prompt)
    else:
        text = json.dumps(prompt, default=str, ensure_ascii=False)
    text = " ".join(text.split())
    return text if len(text) <= TEXT_LIMIT else text[:TEXT_LIMIT - 1] + "…"


def judge_dump_group(step: int, samples: Sequence[DumpSample], options: DumpOptions, *,
                     tokens_recorded: bool = True) -> DumpGroup:
    """One group of a dump, judged and keyed as the filter and the monitor would (module docstring)."""
    judgement = judge_group(samples, reward_key=options.reward_key, success_threshold=options.success_threshold,
                            success_key=options.success_key)
    key, _ = prompt_key(samples, options.prompt_key)
    tokens = sum(read_generated_tokens(s) for s in samples) if tokens_recorded else None
    return DumpGroup(step=step, key=str(key), rollouts=judgement.unique_rollouts, successes=judgement.success_count,
                     kind=judgement.kind, tokens=tokens, text=prompt_text(samples[0].prompt) if samples else None)


def require_holds(options: DumpOptions, origin: str, framework: str) -> None:
    """Refuse a dump whose content the user did not state (see the module docstring)."""
    if options.holds not in DUMP_HOLDS:
        raise DumpError(f"{origin}: {framework}'s dump does not say whether the run had a dynamic filter: pass "
                        "--whole-run if it had none (the dump holds every group it trained), or --kept-only if it "
                        "had one (only the kept groups: figures biased); or " + RECORD_EVERY_GROUP)


def holds_text(options: DumpOptions) -> str:
    """What the output says the dump holds."""
    return "every group trained, no dynamic filter" if options.holds == WHOLE_RUN else "only the kept groups"


DRAWN_TEXT = "the dump's own: the groups a step drew, held or aborted, most common per step"
HELD_TEXT = "the dump's own: the groups a step holds, most common per step (verl generates exactly its batch)"
UNKNOWN_WAVE_TEXT = ("unknown: a kept-only dump holds neither the groups the filter dropped nor the extra waves; pass "
                     "the run's --over-sampling-batch-size")


def wave_size_of(per_step: Mapping[int, int]) -> int:
    """The most common count of ``per_step`` (the larger one on a tie): a dump's wave size, or its batch.

    Example:
        >>> wave_size_of({0: 16, 1: 16, 2: 12}), wave_size_of({0: 8, 1: 16})
        (16, 16)
    """
    counts = Counter(per_step.values())
    return max(counts, key=lambda size: (counts[size], size))


def trace_from_groups(groups: Sequence[DumpGroup], *, origin: str, options: DumpOptions,
                      notes: Sequence[str] = (), drawn_per_step: Mapping[int, int] | None = None) -> Trace:
    """The trace of a dump's groups (module docstring); raises :class:`DumpError` for a dump it cannot be.

    ``drawn_per_step``: the groups each step drew, held or aborted (a slime dump's group numbers); None: the groups
    it holds are all it drew (verl)."""
    scored = [g for g in groups if g.kind != TECHNICAL]
    if not scored:
        raise DumpError(f"{origin}: no scored group in the dump ({len(groups)} groups, all technical: an aborted or "
                        "failed rollout, or a reward that is not a number; a dict reward needs --reward-key)")
    sizes = Counter(g.rollouts for g in groups)
    if len(sizes) > 1:
        n, count = sizes.most_common(1)[0]
        odd = next(g for g in groups if g.rollouts != n)
        raise DumpError(f"{origin}: groups of unequal size: step {odd.step}'s group of prompt {odd.key} has "
                        f"{odd.rollouts} rollouts where {count} of {len(groups)} groups have {n} (one run has one "
                        "n_samples_per_prompt; are files of two runs mixed?)")
    zero_std = sum(g.kind != SPREAD for g in scored)
    if options.holds == WHOLE_RUN and not zero_std and len(scored) >= MIN_GROUPS_FOR_NO_ZERO_STD:
        raise DumpError(f"{origin}: --whole-run, but not one of its {len(scored)} scored groups is zero-std: a run "
                        "without a dynamic filter trains its zero-std groups, a filter (such as slime's "
                        "check_reward_nonzero_std) keeps none; if the run had one pass --kept-only, or "
                        + RECORD_EVERY_GROUP)
    steps = sorted({g.step for g in groups})
    first, span = steps[0], steps[-1] - steps[0] + 1
    found: dict[str, list[Visit]] = {}
    for group in sorted(scored, key=lambda g: g.step):
        found.setdefault(group.key, []).append(
            Visit(successes=group.successes, zero_std=group.kind != SPREAD, time=(group.step - first + 0.5) / span,
                  tokens=group.tokens, step=group.step))
    texts: dict[str, str] = {}  # each prompt's text, as its first scored group holds it
    for group in scored:
        if group.text is not None:
            texts.setdefault(group.key, group.text)

    per_step = Counter(g.step for g in groups)
    said = list(notes)
    technical = len(groups) - len(scored)
    if technical:
        said.append(f"{technical} technical groups of {len(groups)} left out (an aborted or failed rollout, or no "
                    "numeric reward: their outcome was not scored)")
    if options.holds == KEPT_ONLY:
        said.append(KEPT_ONLY_NOTE.format(share=zero_std / len(scored)))
    keys = sorted(found)
    if options.holds == KEPT_ONLY:
        over, wave_origin = None, UNKNOWN_WAVE_TEXT
    elif drawn_per_step:
        over, wave_origin = wave_size_of(drawn_per_step), DRAWN_TEXT
    else:
        over, wave_origin = wave_size_of(per_step), HELD_TEXT
    batch = wave_size_of(per_step)
    run = RunKnobs(rollout_batch_size=batch, over_sampling_batch_size=None if over is None else max(over, batch),
                   steps=span, wave_origin=wave_origin)
    return Trace(prompts=tuple(keys), visits=tuple(tuple(found[k]) for k in keys), n_samples=sizes.most_common(1)[0][0],
                 origin=origin, run=run, notes=tuple(said), texts=texts)
