"""The three hooks as slime calls them: contract quirks, step closing, live loop state, threads, imports."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import types
from pathlib import Path

import pytest
from conftest import make_args, spread, technical, zero

from shopsim_metrics.simulator.samples import SimSample
from shopsim_metrics.sinks import MemorySink
from shopsim_metrics.readers import read_steps
from shopsimrl import slime_runtime
from shopsimrl.slime_bridge import SlimeLoopState

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True)
def _fresh_runtime():
    yield
    slime_runtime.reset_runtime()


def test_log_function_contract_with_empty_args(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    args = type("Args", (), {})()
    result = slime_runtime.log_rollout_step(3, args, [SimSample(index=0)], {"reward": 1.0}, 0.5)
    assert result is False  # slime's own logging still runs
    assert args.logged_rollout_id == 3
    assert not (tmp_path / "shopsim_run").exists()  # no judged step: nothing invented


def test_all_samples_contract_with_empty_args():
    args = type("Args", (), {})()
    slime_runtime.record_all_samples(args, [[SimSample(index=0)]], object())
    assert args.processed_group_count == 1


def test_hook_signatures_match_slimes_contract():
    import inspect

    params = lambda fn: tuple(inspect.signature(fn).parameters)  # noqa: E731
    assert params(slime_runtime.fully_scored_group_filter)[:2] == ("args", "samples")
    assert params(slime_runtime.record_all_samples) == ("args", "all_groups", "data_source")
    assert params(slime_runtime.log_rollout_step) == (
        "rollout_id", "args", "samples", "rollout_extra_metrics", "rollout_time")


def _one_wave_step(args, step):
    """Sequential judgements as slime's loop would do them with groups finishing one at a time."""
    for gid in range(32):
        group = zero(gid) if gid < 16 else spread(gid)
        slime_runtime.fully_scored_group_filter(args, group)
        if gid == 31:
            break


def test_mirror_without_loop_state_counts_steps_and_waves(tmp_path):
    args = make_args(shopsim_run_dir=str(tmp_path))
    memory = MemorySink()
    slime_runtime.configure(args, sinks=[memory])
    for step in range(2):
        _one_wave_step(args, step)
        slime_runtime.record_all_samples(args, [zero(g) if g < 16 else spread(g) for g in range(32)], None)
        slime_runtime.log_rollout_step(step, args, [], {}, 1.0)
    assert [r.rollout_id for r in memory.records] == [0, 1]
    rec = memory.records[0]
    assert rec.loop_state_source == "mirror"
    assert (rec.zero_std_group_drop_count, rec.train_group_count, rec.surplus_group_count) == (16, 16, 0)
    assert rec.generation_stats_source == "all_samples_hook" and rec.all_samples_group_count == 32
    assert rec.success_rate == pytest.approx(16 * 4 / 256)
    assert rec.train_success_rate == 0.5
    assert rec.reconcile_mismatch_count == 1  # no slime counters passed: 16 zero-std drops vs 0 (technical agrees at 0)


def test_reconciliation_against_slimes_counters(tmp_path):
    args = make_args()
    memory = MemorySink()
    slime_runtime.configure(args, sinks=[memory])
    _one_wave_step(args, 0)
    metrics = {"rollout/dynamic_filter/drop_shopsim_zero_std_group": 16}
    slime_runtime.log_rollout_step(0, args, [], metrics, 1.0)
    (rec,) = memory.records
    assert rec.reconcile_mismatch_count == 0
    assert rec.generation_stats_source == "ledger"  # the all-samples hook was not wired
    assert rec.slime_drop_counts == {"shopsim_unscored_technical_group": 0, "shopsim_zero_std_group": 16}


def test_slime_loop_state_is_read_live_from_slimes_modules(monkeypatch):
    class SingletonMeta(type):
        _instances: dict = {}

    class GenerateState(metaclass=SingletonMeta):
        pass

    state = GenerateState()
    state.remaining_batch_size = 27
    SingletonMeta._instances[GenerateState] = state
    rollout_mod = types.ModuleType("slime.rollout.sglang_rollout")
    rollout_mod.GenerateState = GenerateState
    hooks_mod = types.ModuleType("slime.rollout.sample_hooks")
    hooks_mod._current_rollout_id = 12
    monkeypatch.setitem(sys.modules, "slime.rollout.sglang_rollout", rollout_mod)
    monkeypatch.setitem(sys.modules, "slime.rollout.sample_hooks", hooks_mod)

    live = SlimeLoopState()
    assert (live.rollout_step(), live.remaining_batch_size()) == (12, 27)
    state.remaining_batch_size = 14
    assert live.remaining_batch_size() == 14

    memory = MemorySink()
    args = make_args()
    slime_runtime.configure(args, sinks=[memory])  # default loop state: slime's
    out = slime_runtime.fully_scored_group_filter(args, zero(0))
    slime_runtime.log_rollout_step(12, args, [], {}, 1.0)
    (rec,) = memory.records
    assert rec.rollout_id == 12 and rec.loop_state_source == "slime"
    assert rec.decisions[0].outcome == "fallback" and rec.decisions[0].remaining_before == 14
    assert out.keep_when_insufficient is True
    SingletonMeta._instances.clear()  # no GenerateState: facts are unknown, never created
    assert live.remaining_batch_size() is None


def test_filter_and_log_function_on_different_threads(tmp_path):
    args = make_args(over_sampling_batch_size=16, rollout_batch_size=16)
    memory = MemorySink()
    slime_runtime.configure(args, sinks=[memory])
    steps = 30
    done = threading.Event()
    emitted: list[int] = []

    def rollout_thread():
        for step in range(steps):
            for gid in range(16):
                slime_runtime.fully_scored_group_filter(args, spread(gid) if gid % 3 else zero(gid))
            slime_runtime.record_all_samples(args, [], None)
            emitted.append(step)
        done.set()

    worker = threading.Thread(target=rollout_thread)
    worker.start()
    while not done.is_set() or emitted:
        if emitted:
            slime_runtime.log_rollout_step(emitted.pop(0), args, [], {}, 0.0)
    worker.join()
    assert [r.rollout_id for r in memory.records] == list(range(steps))
    assert all(r.accepted_group_count == 16 and r.train_group_count == 16 for r in memory.records)


def test_unclosed_step_is_emitted_when_the_next_begins(tmp_path):
    """Without the all-samples hook and log function, no finished step is lost."""
    args = make_args(over_sampling_batch_size=16)
    memory = MemorySink()
    from shopsim_metrics.loop.loop_state import ManualLoopState

    state = ManualLoopState()
    slime_runtime.configure(args, sinks=[memory], loop_state=state)
    for step in range(3):
        state.step = step
        for gid in range(16):
            state.remaining = 16
            slime_runtime.fully_scored_group_filter(args, spread(gid))
    assert [r.rollout_id for r in memory.records] == [0, 1]
    slime_runtime.reset_runtime()  # process exit / shutdown emits the open step
    assert [r.rollout_id for r in memory.records] == [0, 1, 2]


def test_import_is_light():
    """The hooks' import loads no heavy dependency (how long it takes is benchmarks/bench_import.py's ratio)."""
    code = (
        "import sys; import shopsimrl.slime_runtime; "
        "print([m for m in ('wandb', 'torch', 'slime', 'plotly', 'numpy') if m in sys.modules])"
    )
    env = {"PATH": "/usr/bin:/bin"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    assert out.stdout.strip() == "[]"


def test_termination_record_is_on_disk_before_the_exception_leaves(tmp_path):
    from shopsim_metrics.errors import TechnicalFailureLimitExceeded

    args = make_args(shopsim_run_dir=str(tmp_path), shopsim_max_consecutive_failed_groups=2)
    slime_runtime.configure(args, sinks=None)  # default sinks: JSONL in shopsim_run_dir
    slime_runtime.fully_scored_group_filter(args, technical(0))
    with pytest.raises(TechnicalFailureLimitExceeded):
        slime_runtime.fully_scored_group_filter(args, technical(1))
    lines = (tmp_path / "steps.jsonl").read_text().splitlines()
    assert len(lines) == 1
    record = json.loads(lines[0])
    assert record["terminated"] is True and record["technical_group_drop_count"] == 2
    assert [d["failed_check"] for d in record["decisions"]] == ["status_failed", "status_failed"]
    assert read_steps(tmp_path)[0].consecutive_technical_failures == 2


def test_filter_works_with_slime_torch_wandb_numpy_unimportable():
    code = """
import sys
class Block:
    def find_spec(self, name, path=None, target=None):
        if name.split('.')[0] in {'slime', 'torch', 'wandb', 'numpy', 'sglang', 'plotly'}:
            raise ImportError('blocked for the test: ' + name)
sys.meta_path.insert(0, Block())
from shopsimrl import slime_runtime
from shopsim_metrics.simulator.samples import SimSample
from types import SimpleNamespace
args = SimpleNamespace(n_samples_per_prompt=2, reward_key=None)
out = slime_runtime.fully_scored_group_filter(args, [SimSample(index=0, reward=0.0), SimSample(index=1, reward=1.0)])
print(type(out).__module__, out.keep)
"""
    env = {"PATH": "/usr/bin:/bin"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert out.returncode == 0, out.stderr
    module, keep = out.stdout.split()
    assert module == "shopsimrl.slime_bridge" and keep == "True"  # the stand-in output class


def test_cli_reports_bad_inputs_in_one_line(tmp_path, capsys):
    from shopsim_metrics.cli import main

    assert main(["inspect", str(tmp_path / "missing")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("shopsim-metrics inspect: error: ") and "no such file or directory" in err and err.count("\n") == 1
    (tmp_path / "steps.jsonl").write_text('{"rollout_id": 0}\nnot json\n{"rollout_id": 1}\n')
    assert main(["inspect", str(tmp_path)]) == 0
    assert "skipped 1 bad line" in capsys.readouterr().out


def test_cli_inspect_prints_one_row_per_step(tmp_path, capsys):
    from shopsim_metrics.cli import main
    from shopsim_metrics.record.records import StepRecord
    from shopsim_metrics.sinks import JsonlSink

    sink = JsonlSink(tmp_path, fsync=False)
    sink.emit(StepRecord(rollout_id=0, wave_count=1, success_rate=0.25))
    sink.emit(StepRecord(rollout_id=1, wave_count=3, terminated=True))
    assert main(["inspect", str(tmp_path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 6 and "0.250" in lines[1] and lines[2].endswith("TERMINATED") and lines[3] == "2 steps"
    assert lines[4].startswith("tokens per informative trained group: - (the sample hook was not wired")
    assert lines[0].split()[:4] == ["step", "waves", "accepted", "train"]
    assert lines[5].startswith("accepted = groups judged by the filter")  # the legend: the contract's meanings


def test_demo_and_inspect_print_the_same_columns_for_the_same_records(tmp_path, capsys):
    from shopsim_metrics.cli import main
    from shopsim_metrics.simulator.demo import format_steps_table
    from shopsim_metrics.record.records import StepRecord
    from shopsim_metrics.sinks import JsonlSink

    records = [StepRecord(rollout_id=0, wave_count=4, accepted_group_count=109, train_group_count=16,
                          fallback_group_count=2, technical_group_drop_count=85, zero_std_group_drop_count=8)]
    sink = JsonlSink(tmp_path, fsync=False)
    sink.emit(records[0])
    assert main(["inspect", str(tmp_path)]) == 0
    inspect_lines = capsys.readouterr().out.splitlines()
    demo_lines = format_steps_table(records).splitlines()
    assert demo_lines[0].split() == inspect_lines[0].split()  # the same columns, both with a last note column
    assert demo_lines[1].rstrip() == inspect_lines[1].rstrip()  # the same cells, and both note the 4 waves
    assert inspect_lines[1].rstrip().endswith(" 4 waves")
    assert demo_lines[-1] == inspect_lines[-1]




# --- the hooks in slime's image: only what slime's own requirements bring -------------------------
SLIME_IMAGE_DISTRIBUTIONS = ("numpy", "pyyaml", "wandb")
"""What slime's requirements bring that the hooks may use (wandb only when logging to W&B)."""
CLI_ONLY = ("plotly", "tqdm", "orjson", "wandb_workspaces", "hypothesis", "pytest", "websocket")
"""Needed by the CLI, the dashboards or the tests only: never imported on the hooks' path."""

_THREE_STEPS = """
import json, sys
from types import SimpleNamespace
class Block:  # the CLI's and the tests' dependencies, wherever they are installed
    def find_spec(self, name, path=None, target=None):
        if name.split('.')[0] in BLOCKED:
            raise ImportError('blocked for the test: ' + name)
sys.meta_path.insert(0, Block())
from shopsimrl import slime_runtime
from shopsim_metrics.simulator.samples import SimSample
args = SimpleNamespace(n_samples_per_prompt=2, rollout_batch_size=2, over_sampling_batch_size=4,
                       global_batch_size=4, reward_key=None, shopsim_run_dir=RUN_DIR, shopsim_wandb=WANDB)
for step in range(3):
    groups = [[SimSample(index=2 * g + i, group_index=g, reward=float(i if g % 2 else 1), prompt=f"p{g}",
                         response_length=10) for i in range(2)] for g in range(4)]
    outputs = [slime_runtime.fully_scored_group_filter(args, group) for group in groups]
    slime_runtime.record_all_samples(args, groups, None)
    slime_runtime.log_rollout_step(step, args, [], {}, 2.0)
slime_runtime.reset_runtime()
imported = sorted({m.split('.')[0] for m in sys.modules if not m.startswith('_')} - set(sys.stdlib_module_names))
print(json.dumps({"keep": [o.keep for o in outputs], "imported": imported}))
"""


def _three_steps(run_dir: Path, wandb: str) -> str:
    return f"BLOCKED = {set(CLI_ONLY)!r}\nRUN_DIR = {str(run_dir)!r}\nWANDB = {wandb!r}\n" + _THREE_STEPS


def _distribution_closure(names: tuple[str, ...]) -> list:
    """The installed distributions ``names`` and everything they require (extras left out), recursively."""
    import re
    from importlib import metadata

    seen: dict[str, metadata.Distribution] = {}
    todo = list(names)
    while todo:
        name = re.sub(r"[-_.]+", "-", todo.pop()).lower()
        if name in seen:
            continue
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:  # a requirement for another platform or Python
            continue
        seen[name] = dist
        for requirement in dist.requires or ():
            if "extra ==" not in requirement:
                todo.append(re.match(r"[A-Za-z0-9._-]+", requirement).group(0))
    return list(seen.values())


def _slime_image_path(target: Path) -> Path:
    """A directory holding only slime's numpy, pyyaml and wandb (with what they require), linked from
    this environment's site-packages: the path of a training image without the project's other dependencies."""
    target.mkdir()
    for dist in _distribution_closure(SLIME_IMAGE_DISTRIBUTIONS):
        tops = {Path(str(f)).parts[0] for f in dist.files or () if not str(f).startswith("..")}
        for top in tops - {"__pycache__"}:
            source = Path(dist.locate_file(top))
            if source.exists() and not (target / top).exists():
                (target / top).symlink_to(source)
    return target


def test_the_three_hooks_run_without_the_cli_dependencies(tmp_path):
    """The filter, the all-samples hook and the log function through three steps, W&B off, with the
    CLI's dependencies blocked: no package beyond the standard library is imported at all."""
    code = _three_steps(tmp_path / "run", "off")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout.splitlines()[-1])
    assert result["keep"] == [False, True, False, True]
    assert result["imported"] == ["shopsim_metrics", "shopsimrl"]
    assert [r.rollout_id for r in read_steps(tmp_path / "run")] == [0, 1, 2]


def test_the_three_hooks_log_to_wandb_with_only_slimes_requirements(tmp_path):
    """Python without site-packages, then only numpy, pyyaml and wandb (with their requirements) and the
    project's source on the path: three steps through the three hooks, logged to an offline W&B run."""
    from shopsim_metrics.readers.wandb_offline import find_run_dirs, read_offline_run

    image = _slime_image_path(tmp_path / "image")
    assert not any((image / name).exists() for name in CLI_ONLY)
    code = f"import sys; sys.path[:0] = {[str(image), str(ROOT / 'filter'), str(ROOT)]!r}\n"
    code += _three_steps(tmp_path / "run", "standalone")
    wb = tmp_path / "wb"
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "WANDB_MODE": "offline", "WANDB_DIR": str(wb),
           "WANDB_DATA_DIR": str(wb / "data"), "WANDB_CACHE_DIR": str(wb / "cache"),
           "WANDB_CONFIG_DIR": str(wb / "config"), "WANDB_SILENT": "true", "WANDB_CONSOLE": "off",
           "WANDB_DISABLE_GIT": "true", "WANDB_BASE_URL": "http://127.0.0.1:9", "NETRC": str(tmp_path / "no-netrc")}
    out = subprocess.run([sys.executable, "-S", "-c", code], capture_output=True, text=True, env=env, cwd=tmp_path,
                         timeout=300)
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout.splitlines()[-1])
    assert "wandb" in result["imported"] and not set(result["imported"]) & set(CLI_ONLY)
    assert [r.rollout_id for r in read_steps(tmp_path / "run")] == [0, 1, 2]
    (run_dir,) = find_run_dirs(wb)
    history = [row for row in read_offline_run(run_dir).history if "rollout/shopsim/wave_count" in row]
    assert [row["rollout/step"] for row in history] == [0, 1, 2]
