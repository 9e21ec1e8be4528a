"""Advisories: what the recent steps say is wrong with a run, and what to change.

Each advisory is a rule over the last :data:`ADVISORY_WINDOW` steps' records (the recent
:data:`RECENT_STEPS` and the ones before them), with a level, a title and a text that says what to
change. It reaches the record's ``alerts``, W&B's alert list and the HTML dashboard as the
technical-streak alerts do (:mod:`shopsim_metrics.health.alerts`), **once per condition**: raised at the
step its rule first holds, and again only after the rule has not held for a whole window of steps.

The rules and why their thresholds are where they are (docs §3.2). A share is over the step's judged
groups that are not technical (the groups a verdict exists for), a median is over the steps' own shares
(one burst step does not move it), a pooled share is summed over the steps first:

- ``collapse`` (WARN): all-fail groups, median share of the recent steps >= :data:`NEAR_ONE` and not
  below the steps before: the reward or the policy broke (a learning hard start falls and stays quiet);
- ``saturation`` (WARN): the same for all-pass groups: the pool is learned;
- ``zero_std`` (INFO): zero-std above :data:`ZERO_STD_SHARE` in every recent step: the first wave of
  slime's default over-sampling (twice the batch) can no longer fill the batch with groups that
  teach. Over-sampling or skipping pays, by :func:`skipping_pays` (not raised beside a collapse or a
  saturation: the data is the cause then, not the sampling);
- ``abort_storm`` (INFO): aborted tokens >= :data:`ABORTED_TOKEN_SHARE` of every token the window's
  steps generated: as much went to groups slime aborted as to every group it judged; waves too big;
- ``second_waves`` (INFO): >= :data:`SECOND_WAVE_STEPS` steps of the window needed another wave, a burst
  step left out (its streak reached the warning threshold: an outage the streak WARN answers, which no
  over-sampling buys back; ``tune`` leaves bursts out of its targets too);
- ``technical`` (WARN): technical groups, median share of the recent steps >= :data:`TECHNICAL_SHARE`
  and not below the steps before: failures that cost generation long before a streak nears the limit;
- ``policy_lag`` (WARN, fully-async path): the trained groups' lag, the larger of the group mean and
  the token-weighted mean, median of the recent steps >= :data:`POLICY_LAG_HIGH` weight updates.
- ``lost_signal`` (WARN, predictive skipping; **once per run**, over its own :data:`LOST_SIGNAL_STEPS`): the
  guard's ``skip_lost_signal_estimate`` above its limit ``skip_max_lost_signal`` in each of the last
  :data:`LOST_SIGNAL_STEPS` steps: the skips forgo more signal than the run allows, and the cap did not bring it
  back; the text says what to change (skip less, probe more, or skipping off with the waves kept).

Example (eight steps whose every judged group fails: the reward or the policy broke):
    >>> advisor = Advisor()
    >>> alerts = [advisor.observe(StepFacts(rollout_id=n, accepted=32, zero_std=32, all_fail=32)) for n in range(9)]
    >>> [len(a) for a in alerts]
    [0, 0, 0, 0, 0, 0, 0, 1, 0]
    >>> [(a.level, a.title) for a in alerts[7]]
    [('WARN', 'shopsim: all-fail groups rising toward 1 at rollout step 7')]
"""

from __future__ import annotations

import math
import statistics
from collections import deque
from dataclasses import asdict, dataclass, field, fields
from typing import Any, Callable, Iterable, Sequence

from shopsim_metrics.health.alerts import Alert
from shopsim_metrics.record.saved_values import saved_count, saved_counts, saved_number
from shopsim_metrics.general.plain_values import is_int, is_number

ADVISORY_WINDOW = 8
"""The steps every rule looks at (the one place the window is set); no advisory before the window is full."""

RECENT_STEPS = 4
"""The recent part of the window ("for several steps"); the rules that compare compare it with the steps before."""

NEAR_ONE = 0.75
"""All-fail (collapse) or all-pass (saturation) share "toward 1": three in four judged groups teach nothing,
so even four times the batch in over-sampling barely fills it with groups that do; no sampling knob helps."""

ZERO_STD_SHARE = 0.5
"""Zero-std share above which slime's default first wave (over-sampling twice the batch) cannot fill the batch
with groups that have spread: zero-advantage groups train (fallback) or a second wave opens."""

ABORTED_TOKEN_SHARE = 0.5
"""Aborted tokens / every token: at this share the steps paid as much for groups slime aborted unjudged as for
every group they judged (tune at rates like the demo's, zero-std 0.4 and technical 0.016: 0.24 at its
recommendation, 32 for a batch of 16; 0.64 at 64)."""

SECOND_WAVE_STEPS = 3
"""Steps of the window with another wave: at tune's target P(second wave) = 0.05, 3 or more of 8 steps happen
with probability 0.006, so the run's rate is well above the target."""

TECHNICAL_SHARE = 0.1
"""Technical share of the judged groups: a tenth of the generation lost, six times the demo's background rate,
while independent failures at that rate reach a streak of 8 about once in 10**8 groups (the streak alerts stay
silent)."""

POLICY_LAG_HIGH = 4.0
"""Weight updates behind the newest policy: twice the lag of a pool three batches deep updated every step (the
fully-async demo's 48 groups in flight for a batch of 16: 1 to 2.4), so more than the pool's depth explains."""

LOST_SIGNAL_STEPS = 3
"""Steps in a row the guard's estimate must sit above its limit: one step above is the skips of a step the cap
answers at its close; three say the cap could not bring the estimate back, so the setting, not the guard, must
change. The rule needs only these steps (not :data:`ADVISORY_WINDOW`): a run that starts above its limit hears
it at its third step."""

ONCE_PER_RUN = frozenset({"lost_signal"})
"""Conditions raised at most once in a run (a WARN that says what to change; the panel shows the rest)."""

RULE_STEPS: dict[str, int] = {"lost_signal": LOST_SIGNAL_STEPS}
"""Rules that need fewer steps than :data:`ADVISORY_WINDOW` (the others wait for the whole window)."""


def _count(value: Any) -> int | None:
    return value if is_int(value) else None


def _number(value: Any) -> float | None:
    if not is_number(value):
        return None
    return float(value) if math.isfinite(value) else None


@dataclass(frozen=True)
class StepFacts:
    """What the rules read of one step's record (its fields' values; None where the record has none)."""

    rollout_id: int
    accepted: int = 0  # accepted_group_count
    technical: int = 0  # technical_group_drop_count
    zero_std: int = 0  # zero_std_group_count
    all_fail: int = 0  # zero_std_all_fail_group_count
    all_pass: int = 0  # zero_std_all_pass_group_count
    waves: int | None = None  # wave_count (None: the fully-async path, which has no waves)
    total_tokens: int | None = None  # total_token_count (None: the sample hook is not wired)
    aborted_tokens: int | None = None  # aborted_token_count
    repeat_zero_std: int | None = None  # repeat_zero_std_group_count (None: prompts not tracked)
    skippable: int | None = None  # skippable_group_count: the denominator of zero_std_persistence
    adaptive: bool = False  # the first wave was sized (predicted_second_wave_probability set)
    skipping: bool = False  # prompts are skipped before generation (skipped_prompt_count set)
    lag: float | None = None  # policy_version_lag_mean
    token_lag: float | None = None  # policy_version_lag_token_mean
    failed_checks: dict[str, int] = field(default_factory=dict)  # failed_check_counts
    burst: bool = False  # the streak reached technical_failure_warn_at: an outage, answered by the streak WARN
    lost_signal: float | None = None  # skip_lost_signal_estimate (None: not predictive, or nothing judged yet)
    lost_signal_limit: float | None = None  # skip_max_lost_signal: the limit in force
    skip_cap: float | None = None  # skip_cap: the largest chance of spread a skipped draw may have

    @classmethod
    def read(cls, rollout_id: int, value: Callable[[str], Any]) -> "StepFacts":
        """The facts of step ``rollout_id`` from ``value(field name)``: a record's or a draft's fields.

        Example:
            >>> facts = StepFacts.read(3, {"accepted_group_count": 32, "wave_count": 2.5}.get)
            >>> facts.accepted, facts.waves, facts.lag, facts.burst  # a value that is not a count is unknown
            (32, None, None, False)
        """
        checks, warn_at = value("failed_check_counts"), _count(value("technical_failure_warn_at"))
        return cls(
            rollout_id=rollout_id,
            accepted=_count(value("accepted_group_count")) or 0,
            technical=_count(value("technical_group_drop_count")) or 0,
            zero_std=_count(value("zero_std_group_count")) or 0,
            all_fail=_count(value("zero_std_all_fail_group_count")) or 0,
            all_pass=_count(value("zero_std_all_pass_group_count")) or 0,
            waves=_count(value("wave_count")),
            total_tokens=_count(value("total_token_count")),
            aborted_tokens=_count(value("aborted_token_count")),
            repeat_zero_std=_count(value("repeat_zero_std_group_count")),
            skippable=_count(value("skippable_group_count")),
            adaptive=value("predicted_second_wave_probability") is not None,
            skipping=value("skipped_prompt_count") is not None,
            lag=_number(value("policy_version_lag_mean")),
            token_lag=_number(value("policy_version_lag_token_mean")),
            failed_checks={str(k): n for k, n in checks.items() if _count(n)} if isinstance(checks, dict) else {},
            burst=warn_at is not None and (_count(value("max_consecutive_technical_failures")) or 0) >= warn_at,
            lost_signal=_number(value("skip_lost_signal_estimate")),
            lost_signal_limit=_number(value("skip_max_lost_signal")),
            skip_cap=_number(value("skip_cap")),
        )

    @classmethod
    def of_record(cls, record: Any) -> "StepFacts":
        """The facts of a :class:`~shopsim_metrics.record.records.StepRecord` (a resume replays records through them)."""
        return cls.read(record.rollout_id, lambda name: getattr(record, name, None))

    @property
    def judged(self) -> int:
        """Judged groups with a verdict (not technical): the denominator of the zero-std shares."""
        return self.accepted - self.technical

    @property
    def staleness(self) -> float | None:
        """The larger of the group-mean and the token-weighted policy lag (None: not on the fully-async path)."""
        known = [lag for lag in (self.lag, self.token_lag) if lag is not None]
        return max(known) if known else None


def _saved_facts(item: Any) -> StepFacts:
    """One saved step of the advisor's window, each value checked by its field's type as a record's are (a count
    where a count is, a finite number, a flag); ``ValueError`` naming the first that is not.

    >>> _saved_facts({"rollout_id": 2, "accepted": 4, "lag": 1.5}).accepted
    4
    >>> _saved_facts({"rollout_id": 2, "technical": -1})
    Traceback (most recent call last):
    ...
    ValueError: technical: -1 is not a count
    """
    if not isinstance(item, dict):
        raise ValueError("a saved step of the advisories is not an object")
    values: dict[str, Any] = {}
    for f in fields(StepFacts):
        if f.name not in item:
            continue
        value, kind = item[f.name], str(f.type)
        if kind == "bool":
            if not isinstance(value, bool):
                raise ValueError(f"{f.name}: {value!r} is not true or false"[:200])
        elif kind.startswith("dict"):
            value = saved_counts(value, f.name)
        elif value is not None or "None" not in kind:
            value = saved_number(value, f.name) if kind.startswith("float") else saved_count(value, f.name)
        values[f.name] = value
    return StepFacts(**values)


def _share(part: int, whole: int) -> float | None:
    return part / whole if whole > 0 else None


def _median(values: Iterable[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return statistics.median(known) if known else None


def _halves(window: Sequence[StepFacts],
            per_step: Callable[[StepFacts], float | None]) -> tuple[float | None, float | None]:
    """The median of ``per_step`` over the recent steps, and over the steps before them."""
    return (_median(per_step(f) for f in window[-RECENT_STEPS:]),
            _median(per_step(f) for f in window[:-RECENT_STEPS]))


def _rising(recent: float | None, earlier: float | None, threshold: float) -> bool:
    """At or above ``threshold`` and not falling (no earlier figure: the level alone)."""
    return recent is not None and recent >= threshold and (earlier is None or recent >= earlier)


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.0%}"


def skipping_pays(persistence: float | None, share: float) -> bool:
    """Whether zero-std follows the prompt enough for skipping to pay rather than over-sampling.

    ``tune``'s model draws every group zero-std independently at the run's rate, so there
    P(zero-std | zero-std at the prompt's last visit) equals the zero-std ``share`` itself: the luck
    of the draw, which over-sampling answers. Skipping pays once the measured ``persistence`` is at
    least halfway from that to certainty, ``(1 + share) / 2``, and above the share (at a share of 1 every group is
    zero-std: nothing to tell apart); unknown (no prompt revisited yet): over-sampling.

    Example:
        >>> skipping_pays(0.9, 0.6), skipping_pays(0.7, 0.6), skipping_pays(None, 0.6), skipping_pays(1.0, 1.0)
        (True, False, False, False)
    """
    return persistence is not None and persistence >= (1 + share) / 2 and persistence > share


def toward_one(kind: str, count: Callable[[StepFacts], int], meaning: str) -> Callable[[Sequence[StepFacts]], str | None]:
    """The rule of one kind of zero-std group rising toward 1 (``collapse``: all-fail, ``saturation``: all-pass):
    the median share of ``count`` over the judged groups of the recent steps at or above :data:`NEAR_ONE` and not
    below the steps before; its text names the shares, then ``meaning`` (what it says and what to do).

    Example:
        >>> rule = toward_one("all-fail", lambda f: f.all_fail, "the reward broke.")
        >>> rule([StepFacts(rollout_id=n, accepted=32, zero_std=32, all_fail=32) for n in range(8)])
        'all-fail groups were 100% of the judged groups (median of the last 4 steps; 100% in the 4 before): the reward broke.'
    """
    def rule(window: Sequence[StepFacts]) -> str | None:
        recent, earlier = _halves(window, lambda f: _share(count(f), f.judged))
        if not _rising(recent, earlier, NEAR_ONE):
            return None
        return (f"{kind} groups were {_pct(recent)} of the judged groups (median of the last {RECENT_STEPS} steps; "
                f"{_pct(earlier)} in the {len(window) - RECENT_STEPS} before): {meaning}")
    return rule


_collapse = toward_one("all-fail", lambda f: f.all_fail, (
    "no rollout of most prompts succeeds. Check the reward first (a service that pays 0, a changed success key or "
    "threshold), then the policy (compare with the last good checkpoint; lower the learning rate). Over-sampling "
    "cannot help: these groups carry no signal."))
_saturation = toward_one("all-pass", lambda f: f.all_pass, (
    "the policy has learned this pool. Add new prompts or harder data; more over-sampling only pays for more groups "
    "that teach nothing."))


def _zero_std(window: Sequence[StepFacts]) -> str | None:
    shares = [_share(f.zero_std, f.judged) for f in window[-RECENT_STEPS:]]
    if any(s is None or s <= ZERO_STD_SHARE for s in shares):
        return None
    share = _share(sum(f.zero_std for f in window), sum(f.judged for f in window)) or 0.0
    tracked = [f for f in window if f.skippable is not None and f.repeat_zero_std is not None]
    persistence = _share(sum(f.repeat_zero_std or 0 for f in tracked), sum(f.skippable or 0 for f in tracked))
    said = (f"zero-std groups were over half of the judged groups in each of the last {RECENT_STEPS} steps "
            f"({', '.join(_pct(s) for s in shares)}). ")
    if share >= 1.0:  # nothing to weigh: neither skipping nor over-sampling finds a group with spread
        return (said + f"Over the last {len(window)} steps every judged group was zero-std: no prompt has spread to "
                "find, by skipping others or by over-sampling. With n_samples_per_prompt 1 no group ever has spread "
                "(sample more rollouts per prompt); otherwise check the reward, which does not vary within a group.")
    if persistence is None:
        why = "No prompt was revisited yet, so whether zero-std follows the prompt is not known: "
    else:
        why = (f"P(zero-std | zero-std at the prompt's last visit) = {persistence:.2f} over the last {len(window)} "
               f"steps, against {share:.2f} if each group were zero-std by the luck of the draw (tune's model): ")
    if skipping_pays(persistence, share):
        act = ("lower shopsim_prompt_skip_threshold (prompts are skipped already, not enough)"
               if any(f.skipping for f in window) else
               "shopsim_prompt_skip: predictive, with --data-source-path shopsimrl.data_source.PromptSkipDataSource")
        return (said + why + "zero-std follows the prompt, so skipping pays: " + act
                + "; more over-sampling would pay again for the same prompts.")
    if all(f.waves is None for f in window):  # the fully-async path: its over-sampling is the zero-std drop limit
        return (said + why + "over-sampling pays: raise shopsim_async_zero_std_drop_limit (the zero-std groups a "
                "step drops before it lets them in as fallback).")
    return (said + why + "over-sampling pays: raise over_sampling_batch_size to what `shopsim-metrics tune --from "
            "<run dir>` recommends (with adaptive waves: shopsim_wave_size_cap).")


def _abort_storm(window: Sequence[StepFacts]) -> str | None:
    if any(f.waves is None or f.total_tokens is None or f.aborted_tokens is None for f in window):
        return None  # the fully-async path (no waves), or no sample hook: aborted tokens unknown
    share = _share(sum(f.aborted_tokens or 0 for f in window), sum(f.total_tokens or 0 for f in window))
    if share is None or share < ABORTED_TOKEN_SHARE:
        return None
    act = ("lower shopsim_wave_size_cap (waves are adaptive already; the cap lets them grow too large)"
           if any(f.adaptive for f in window) else
           "shopsim_wave_size: adaptive (with --data-source-path shopsimrl.data_source.PromptSkipDataSource), which "
           "sizes each wave to what the step still needs, or a smaller over_sampling_batch_size")
    return (f"aborted groups' tokens were {_pct(share)} of every token generated over the last {len(window)} steps: "
            f"the waves are bigger than the steps need and slime aborts the rest when the batch fills. Try {act}.")


def _second_waves(window: Sequence[StepFacts]) -> str | None:
    steps = [f for f in window if f.waves is not None and f.waves > 1 and not f.burst]
    if len(steps) < SECOND_WAVE_STEPS:
        return None
    technical = sum(f.technical for f in steps)
    zero_std = sum(f.zero_std for f in steps)
    act = ("raise shopsim_wave_size_cap or shopsim_wave_fill_probability" if any(f.adaptive for f in window) else
           "raise over_sampling_batch_size to what `shopsim-metrics tune --from <run dir>` recommends (P(second wave) "
           "<= 0.05)")
    return (f"{len(steps)} of the last {len(window)} steps needed more than one wave (steps "
            f"{', '.join(str(f.rollout_id) for f in steps)}; {technical} technical and {zero_std} zero-std groups "
            f"judged in them): over-sampling is too small for this run's drop rates. {act[0].upper()}{act[1:]}.")


def _technical(window: Sequence[StepFacts]) -> str | None:
    recent, earlier = _halves(window, lambda f: _share(f.technical, f.accepted))
    if not _rising(recent, earlier, TECHNICAL_SHARE):
        return None
    checks: dict[str, int] = {}
    for f in window[-RECENT_STEPS:]:
        for check, n in f.failed_checks.items():
            checks[check] = checks.get(check, 0) + n
    named = ", ".join(f"{check}={n}" for check, n in sorted(checks.items(), key=lambda kv: (-kv[1], kv[0]))[:3])
    return (f"technical groups were {_pct(recent)} of the judged groups (median of the last {RECENT_STEPS} steps; "
            f"{_pct(earlier)} in the {len(window) - RECENT_STEPS} before); failing checks of the last "
            f"{RECENT_STEPS} steps: {named or 'none recorded'}. Fix the environment or the reward service now: the "
            "lost groups open second waves, and a burst ends the run at the streak limit.")


def _policy_lag(window: Sequence[StepFacts]) -> str | None:
    recent = window[-RECENT_STEPS:]
    lag = _median(f.staleness for f in recent)
    if lag is None or lag < POLICY_LAG_HIGH:
        return None
    group, tokens = _median(f.lag for f in recent), _median(f.token_lag for f in recent)
    tail = (" The long generations are the stalest (the token-weighted lag is above the group mean)."
            if group is not None and tokens is not None and tokens > group else "")
    return (f"trained groups were {_fmt(group)} weight updates behind the newest policy (group mean), "
            f"{_fmt(tokens)} weighted by their tokens (medians of the last {RECENT_STEPS} steps).{tail} Shrink the "
            "pool of groups in flight (--sglang-server-concurrency) or the longest generations "
            "(--rollout-max-response-len), or update the weights more often.")


def _lost_signal(window: Sequence[StepFacts]) -> str | None:
    recent = window[-LOST_SIGNAL_STEPS:]
    if len(recent) < LOST_SIGNAL_STEPS or any(
            f.lost_signal is None or f.lost_signal_limit is None or f.lost_signal <= f.lost_signal_limit
            for f in recent):
        return None
    limit, cap = recent[-1].lost_signal_limit, recent[-1].skip_cap
    capped = "" if cap is None else (
        f" The cap is {cap:.2f}: the guard skips nothing more, and the estimate falls only as informative groups are "
        "judged." if cap <= 0 else
        f" The cap is {cap:.2f}: the guard still lets the surest skips through.")
    return (f"the guard's estimated lost signal was above its limit (shopsim_prompt_skip_max_lost_signal "
            f"{limit:g}) in each of the last {LOST_SIGNAL_STEPS} steps ({', '.join(f'{f.lost_signal:.3f}' for f in recent)}"
            f"): the skips forgo more informative groups per informative group than the run allows.{capped} The "
            "probes say the rule's predictions are bolder than this run's prompts bear (zero-std by the luck of the "
            "draw, or prompts turning learnable). To skip less, raise shopsim_prompt_skip_threshold and set "
            "shopsim_prompt_skip_min_yield: 0 (no skip for token cost); to correct the estimate sooner, probe more "
            "(a lower shopsim_prompt_skip_probe_every); or turn skipping off (shopsim_prompt_skip: off) and keep "
            "shopsim_wave_size: adaptive, whose saving forgoes no signal. Raise the limit only if this run can "
            "afford the loss (the benchmarks count a saving within 0.15). Raised once per run (docs §3.2).")


def _fmt(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.1f}"


RULES: dict[str, tuple[str, str, Callable[[Sequence[StepFacts]], str | None]]] = {
    "collapse": ("WARN", "all-fail groups rising toward 1", _collapse),
    "saturation": ("WARN", "all-pass groups rising toward 1", _saturation),
    "zero_std": ("INFO", "most groups zero-std", _zero_std),
    "abort_storm": ("INFO", "abort storm", _abort_storm),
    "second_waves": ("INFO", "frequent second waves", _second_waves),
    "technical": ("WARN", "technical failures rising", _technical),
    "policy_lag": ("WARN", "policy lag high", _policy_lag),
    "lost_signal": ("WARN", "skipping's lost signal above its limit", _lost_signal),
}
"""Each condition's level, title and rule (its text when it holds over a full window, else None), in the order a
step raises them."""


def advise(window: Sequence[StepFacts]) -> dict[str, Alert]:
    """The advisories whose rule holds over ``window`` (the recent steps, oldest first), by condition.

    Pure: the same steps always give the same advisories; none before its rule's window is full (every rule's is
    :data:`ADVISORY_WINDOW`, but those of :data:`RULE_STEPS`).

    Example:
        >>> quiet = [StepFacts(rollout_id=n, accepted=32, zero_std=8, all_pass=4, all_fail=4) for n in range(8)]
        >>> advise(quiet)
        {}
        >>> waves = [StepFacts(rollout_id=n, accepted=32, waves=1 + (n % 2)) for n in range(8)]
        >>> list(advise(waves))
        ['second_waves']
    """
    window = list(window)[-ADVISORY_WINDOW:]
    if not window:
        return {}
    step = window[-1].rollout_id
    held = {}
    for condition, (level, heading, rule) in RULES.items():
        if len(window) < RULE_STEPS.get(condition, ADVISORY_WINDOW):
            continue
        if condition == "zero_std" and ("collapse" in held or "saturation" in held):
            continue  # the data is the cause, not the sampling: the collapse or saturation text says so
        text = rule(window)
        if text is not None:
            held[condition] = Alert(title=f"shopsim: {heading} at rollout step {step}", text=text, level=level,
                                    rollout_id=step)
    return held


class Advisor:
    """The recent steps and which advisories were raised: each condition is raised once, and again only after
    its rule has not held for :data:`ADVISORY_WINDOW` steps in a row (those of :data:`ONCE_PER_RUN`: never again).

    Fed each step's facts in step order as the step is emitted (:meth:`observe`, by the one thread that
    emits); a resume rebuilds it by replaying the records, or loads it from the monitor's snapshot
    (:meth:`state_dict`).
    """

    def __init__(self) -> None:
        self._window: deque[StepFacts] = deque(maxlen=ADVISORY_WINDOW)
        self._quiet: dict[str, int] = {}  # raised conditions: steps in a row since their rule last held

    def observe(self, facts: StepFacts) -> list[Alert]:
        """Add one step; the advisories it raises (conditions whose rule holds and that are not raised already)."""
        self._window.append(facts)
        held = advise(self._window)
        raised = [alert for condition, alert in held.items() if condition not in self._quiet]
        for condition in list(self._quiet):
            if condition not in held and condition not in ONCE_PER_RUN:
                self._quiet[condition] += 1
                if self._quiet[condition] >= ADVISORY_WINDOW:
                    del self._quiet[condition]
        for condition in held:
            self._quiet[condition] = 0
        return raised

    def replay(self, record: Any) -> None:
        """Add a recorded step (a resume replaying the records: the advisories it raised are in the record already)."""
        self.observe(StepFacts.of_record(record))

    def state_dict(self) -> dict[str, Any]:
        """The state as JSON-native data (the snapshot's ``advisories``)."""
        return {"window": [asdict(f) for f in self._window], "quiet": dict(self._quiet)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Replace the state with a saved one; all or nothing (a malformed state raises ``ValueError`` and changes
        nothing).

        Example:
            >>> a = Advisor(); _ = a.observe(StepFacts(rollout_id=0, accepted=4)); b = Advisor()
            >>> b.load_state_dict(a.state_dict()); b.state_dict() == a.state_dict()
            True
        """
        try:
            window = [_saved_facts(item) for item in state["window"]]
            quiet = {name: count for name, count in saved_counts(state["quiet"], "quiet steps").items() if name in RULES}
        except (AttributeError, KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"advisor state: not one this version saves ({type(exc).__name__}: {exc})") from exc
        self._window = deque(window[-ADVISORY_WINDOW:], maxlen=ADVISORY_WINDOW)
        self._quiet = quiet
