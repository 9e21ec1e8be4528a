"""The simulator's fully-async pool against the real rollout function, on the same scripted latencies.

The real side: :func:`shopsimrl.async_rollout.generate_rollout_fully_async` over the fake slime pieces of
``fake_slime_async`` (slime's own ``AsyncRolloutWorker`` when ``SLIME_SRC`` names a checkout, else the
plain worker written to its behaviour, on its own thread and event loop), steps called back to back as
``train_async.py`` calls them, the weights updated after every step. Its engine runs on its own clock,
not the wall clock: a generation ends when the step asks for a finished group, in the order of the
scripted ends, after the worker has refilled its pool (``fake_slime_async``'s docstring), so how busy
the machine is changes nothing. The simulated side:
:class:`~shopsim_metrics.simulator.loop.Simulator` with ``rollout="fully-async"`` and an engine that
does in simulated seconds what the fake engine does on its clock. The script (latencies, rewards,
tokens) is laid out so that no two groups finish within 0.12 s of each other (checked on the simulated
timeline): no tie decides the order of finishing, which is then the same on both sides, and so must be
every record.

Aborts are left out of that comparison: when a generation ends aborted, slime's worker may reap the
finished task and give its slot to a new group before the task's callback has put the aborted group
back (a race of one event-loop turn); the simulator puts it back first. The abort path of the
simulator is checked on its own below.
"""

from __future__ import annotations

import math
import random
from types import SimpleNamespace

import pytest
from hypothesis import given, settings, strategies as st

import fake_slime_async as fake
from shopsim_metrics.run.identity import WRITER_FIELDS
from shopsim_metrics.simulator.config import SimConfig
from shopsim_metrics.simulator.loop import Simulator
from shopsim_metrics.sinks import MemorySink
from shopsimrl import async_rollout, slime_runtime

N = 2
STEPS = 5
POOL = 3
SCALE = 1.5  # seconds per unit of the script's latencies
TIME_FIELDS = ("rollout_seconds", "filter_seconds", "filter_time_fraction")
MIN_GAP = 0.12


def script(seed: int = 3, groups: int = 40, aborted: tuple[int, ...] = ()) -> list[fake.GroupScript]:
    """Mixed kinds in the first half (spread, zero-std both ways, technical); ``aborted``: groups aborted once."""
    rng = random.Random(seed)
    spread, all_pass, all_fail, technical = (0.0, 1.0), (1.0, 1.0), (0.0, 0.0), (None, None)
    out = []
    for i in range(groups):
        rewards = rng.choice([spread, spread, all_fail, all_pass, technical] if i < 20 else [spread, all_fail])
        latency = rng.choice([0.21, 0.53, 0.87, 1.19]) * SCALE
        out.append(fake.GroupScript(latency, rewards, aborted=i in aborted, aborts=1 if i in aborted else None,
                                    tokens=rng.choice([3, 5, 8])))
    return out


class SimulatedEngine:
    """The fake engine (``fake_slime_async.Engine``) in simulated time: same rewards, tokens, versions, aborts."""

    def __init__(self, scripts: list[fake.GroupScript]) -> None:
        self.scripts = scripts
        self.attempts: dict[int, int] = {}
        self.now = 0.0  # the pool starts groups at the time of the last finish
        self._ends: dict[int, float] = {}
        self.timeline: list[float] = []  # every generation's end, in simulated seconds
        self.events: list[tuple] = []  # ("start", group) and ("end", group, aborted), in order
        self.version_of: dict[int, int] = {}  # group -> the weight version of its first generation

    def start(self, group, step, version):
        gi = group[0].group_index
        self.attempts[gi] = attempt = self.attempts.get(gi, 0) + 1
        self._ends[gi] = self.now + self.scripts[gi].latency
        self.events.append(("start", gi))
        self.version_of.setdefault(gi, version)
        return self.scripts[gi].latency, self.scripts[gi].aborted_at(attempt)

    def finish(self, group, slot, version, aborted):
        gi = group[0].group_index
        self.now = self._ends.pop(gi)
        self.timeline.append(self.now)
        self.events.append(("end", gi, aborted))
        s = self.scripts[gi]
        for sample, reward in zip(group, s.rewards):
            sample.status = fake.Status.ABORTED if aborted else fake.Status.COMPLETED
            sample.reward = None if aborted else reward
            sample.response_length += s.tokens
            sample.weight_versions.append(str(version))
        return group

    def all_ends(self) -> list[float]:
        return sorted(self.timeline + list(self._ends.values()))


def config() -> SimConfig:
    return SimConfig(rollout="fully-async", rollout_batch_size=2, n_samples_per_prompt=N, over_sampling_batch_size=2,
                     global_batch_size=4, max_concurrent_groups=POOL, async_zero_std_drop_limit=1,
                     max_consecutive_failed_groups=4, steps=STEPS)


def simulated(scripts):
    engine = SimulatedEngine(scripts)
    result = Simulator(config(), sinks=[], async_engine=engine, async_data_source=fake.DataSource(N, len(scripts))).run()
    return result, engine


def real(scripts, tmp_path, monkeypatch):
    monkeypatch.setattr(fake, "POLL_INTERVAL", 0.001)  # the worker's top-up period
    monkeypatch.setattr(async_rollout, "POLL_SECONDS", 0.002)  # the step's look at the worker's queue
    args = config().to_args(shopsim_run_dir=str(tmp_path), shopsim_wandb="off")
    engine = fake.Engine(scripts, N)
    source = fake.DataSource(N, len(scripts))
    memory = MemorySink()
    state = SimpleNamespace(step=None)
    engine.sample_hook = lambda a, sample: slime_runtime.record_generated_sample(a, sample, rollout_id=state.step)
    before = fake.install(engine)
    batches = []
    try:
        slime_runtime.configure(args, sinks=[memory])
        for rollout_id in range(STEPS):
            state.step = rollout_id
            out = async_rollout.generate_rollout_fully_async(args, rollout_id, source)
            batches.append([group[0].group_index for group in out.samples])
            slime_runtime.log_rollout_step(rollout_id, args, [s for g in out.samples for s in g], out.metrics, 1.0)
            engine.weight_version += 1  # the trainer updates the weights after every step
    finally:
        async_rollout.stop_worker()
        slime_runtime.reset_runtime()
        fake.uninstall(before)
    return memory.records, batches, (engine.started, engine.finished, engine.version_of)


def comparable(record) -> dict:
    data = {k: v for k, v in record.to_dict().items() if k not in TIME_FIELDS and k not in WRITER_FIELDS}
    data["decisions"] = [{k: v for k, v in row.items() if k != "judged_at"} for row in data["decisions"]]
    return data


def test_the_script_leaves_no_near_ties_and_exercises_every_decision():
    result, engine = simulated(script())
    ends = engine.all_ends()
    assert min(b - a for a, b in zip(ends, ends[1:])) >= MIN_GAP
    records = result.records
    assert not result.terminated and [r.rollout_id for r in records] == list(range(STEPS))
    assert sum(r.carried_group_count for r in records) >= 3
    assert sum(r.fallback_group_count for r in records) >= 1
    assert sum(r.technical_group_drop_count for r in records) >= 1
    assert sum(r.zero_std_group_drop_count for r in records) >= 2
    assert max(r.policy_version_lag_max for r in records) >= 1


def test_the_simulator_writes_the_records_the_real_function_writes_step_by_step(tmp_path, monkeypatch):
    scripts = script()
    result, engine = simulated(scripts)
    records, batches, (started, finished, versions) = real(scripts, tmp_path, monkeypatch)
    assert started == [e[1] for e in engine.events if e[0] == "start"][:len(started)]
    assert finished == [e[1] for e in engine.events if e[0] == "end"][:len(finished)]
    assert versions == {gi: engine.version_of[gi] for gi in versions}  # each started with the same weights
    assert [r.rollout_id for r in records] == list(range(STEPS))
    for sim, got, outcome, batch in zip(result.records, sorted(records, key=lambda r: r.rollout_id),
                                        result.outcomes, batches):
        assert comparable(sim) == comparable(got), sim.rollout_id
        assert sorted(outcome.train_ids) == batch  # the same groups reach slime's batch
        # simulated seconds: the step lasts from its start to its batch's last group
        assert sim.rollout_seconds == pytest.approx(outcome.rollout_time) and math.isfinite(outcome.rollout_time)


def test_an_aborted_group_goes_back_is_drawn_first_and_is_judged_once_with_its_tokens():
    scripts = script(aborted=(1, 4))
    result, engine = simulated(scripts)
    records, outcomes = result.records, result.outcomes
    assert sorted(gid for o in outcomes for gid in o.aborted_ids) == [1, 4]
    for k, event in enumerate(engine.events):  # the slot it frees goes to it again: put back, drawn first
        if event[0] == "end" and event[2]:
            assert engine.events[k + 1] == ("start", event[1])
    assert [r.aborted_group_count for r in records] == [len(o.aborted_ids) for o in outcomes]
    judged = [row.group_index for r in records for row in r.decisions]
    assert len(judged) == len(set(judged)) and {1, 4} <= set(judged)
    assert engine.attempts[1] == engine.attempts[4] == 2
    for r in records:
        for row in r.decisions:
            generations = 2 if row.group_index in (1, 4) else 1  # the second generation continues the first
            assert row.response_tokens == generations * scripts[row.group_index].tokens * N
    # tokens of aborted generations are counted by the sample hook once, in the steps that saw them
    assert sum(r.total_token_count for r in records) >= sum(r.generated_token_count for r in records)


@settings(max_examples=40, deadline=None)
@given(zero_std=st.floats(0.0, 0.9), technical=st.floats(0.0, 0.1), pool=st.integers(1, 12), batch=st.integers(1, 4),
       abort=st.floats(0.0, 0.5), limit=st.one_of(st.none(), st.integers(0, 6)), seed=st.integers(0, 10_000))
def test_the_simulated_pool_keeps_the_step_identities(zero_std, technical, pool, batch, abort, limit, seed):
    technical = min(technical, 1.0 - zero_std)
    cfg = SimConfig(rollout="fully-async", rollout_batch_size=batch, n_samples_per_prompt=4, over_sampling_batch_size=batch,
                    global_batch_size=batch * 4, max_concurrent_groups=pool, zero_std_rate=zero_std,
                    technical_rate=technical, async_abort_rate=abort, async_zero_std_drop_limit=limit, steps=6, seed=seed,
                    max_consecutive_failed_groups=50)
    result = Simulator(cfg, sinks=[]).run()
    judged: list[int] = []
    for record, outcome in zip(result.records, result.outcomes):
        assert record.train_group_count == batch == len(outcome.train_ids)
        assert record.accepted_group_count == len(outcome.judged_ids) == (
            record.train_group_count + record.technical_group_drop_count + record.zero_std_group_drop_count)
        assert record.zero_std_group_drop_count <= (batch if limit is None else limit)
        if record.fallback_group_count:
            assert record.zero_std_group_drop_count == (batch if limit is None else limit)
        assert record.aborted_group_count == len(outcome.aborted_ids)
        assert 0 <= record.carried_group_count <= record.train_group_count
        assert record.surplus_group_count == 0 and record.wave_count is None and record.remaining_min is None
        assert outcome.in_flight == pool  # the pool stays full across steps
        judged += outcome.judged_ids
    assert len(judged) == len(set(judged))  # a group is judged once, in the step that took it
    assert result.records[0].carried_group_count == 0


def test_a_fully_async_config_refuses_what_it_does_not_model():
    with pytest.raises(ValueError, match="max_concurrent_groups"):
        SimConfig(rollout="fully-async", max_concurrent_groups=None)
    with pytest.raises(ValueError, match="prompt_pool"):
        SimConfig(rollout="fully-async", prompt_pool=64)
    with pytest.raises(ValueError, match="rollout must be one of"):
        SimConfig(rollout="async")


def test_demo_fully_async_writes_the_records_and_the_dashboard(tmp_path, monkeypatch, capsys):
    from shopsim_metrics.cli import main
    from shopsim_metrics.readers import read_steps
    from shopsim_metrics.record import contract

    import wandb

    for var, sub in (("WANDB_DIR", "dir"), ("WANDB_DATA_DIR", "data"), ("WANDB_CACHE_DIR", "cache"),
                     ("WANDB_CONFIG_DIR", "config"), ("WANDB_ARTIFACT_DIR", "artifacts")):
        (tmp_path / "wb" / sub).mkdir(parents=True)
        monkeypatch.setenv(var, str(tmp_path / "wb" / sub))
    for var, value in (("WANDB_MODE", "offline"), ("WANDB_SILENT", "true"), ("WANDB_CONSOLE", "off"),
                       ("WANDB_DISABLE_GIT", "true"), ("WANDB_BASE_URL", "http://127.0.0.1:9")):
        monkeypatch.setenv(var, value)
    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    out = tmp_path / "out"
    try:
        assert main(["demo", "--rollout", "fully-async", "--out", str(out), "--steps", "8", "--no-progress"]) == 0
    finally:
        if wandb.run is not None:
            wandb.run.finish()
        wandb.teardown()  # the next W&B user starts from its own environment
    printed = capsys.readouterr().out
    records = read_steps(out / "run" / "steps.jsonl")
    assert [r.rollout_id for r in records] == list(range(8))
    for r in records:
        assert r.loop_state_source == contract.LOOP_FULLY_ASYNC and r.train_group_count == 16
        assert r.wave_count is None and r.carried_group_count is not None
    assert sum(r.carried_group_count for r in records) > 0
    assert (out / "dashboard.html").is_file()
    assert "slime's fully-async pool: 48 groups in flight, no waves" in printed and "staleness:" in printed
    code = main(["demo", "--rollout", "fully-async", "--prompt-skip", "greso", "--out", str(out)])
    assert code == 2 and "--rollout fully-async neither skips prompts" in capsys.readouterr().err
