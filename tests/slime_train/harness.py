"""Run slime's own ``train.py --debug-rollout-only`` on a CPU-only machine, and read what it did.

The pieces, each a process this module starts and stops by its id:

- the fake SGLang engine and router (``fake_sglang_server.py``) on 127.0.0.1;
- a private Ray head (``ray start --head --block``, one logical GPU, loopback only, its own temp
  dir and ports), stopped by killing its process group and every process that descends from it;
- slime's ``train.py`` with the project's four hooks loaded by dotted path.

Three views of what slime did, independent of the project's records, are read back here: the debug
rollout data (``--save-debug-rollout-data``), slime's ``perf N: {...}`` log lines and its data
source checkpoints (``<save>/rollout/global_dataset_state_dict_N.pt``).

Clocks (the rule of ``tests/test_no_clock_in_tests.py``, which scans this directory too): the harness runs
real processes, so it may bound every wait with a deadline (``proc.wait(timeout=...)``, polling for Ray or
the engine to be up) and the fake engine models decoding as timeouts of waits on its abort event; neither
reads a clock to measure: no elapsed time is kept, printed or compared (speed is measured in ``benchmarks/``).

Needs a Python with ray, torch, aiohttp and tokenizers (``setup_env.sh`` builds one), ``SLIME_SRC``
(a slime checkout) and ``MEGATRON_SRC`` (a directory holding Megatron-LM's ``megatron/`` package).

    python harness.py OUT_DIR [--num-rollout 3]     # one run, by hand; prints where everything is
"""

from __future__ import annotations

import ast
import contextlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
from collections import Counter
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path


SLIME_SRC = os.environ.get("SLIME_SRC")
MEGATRON_SRC = os.environ.get("MEGATRON_SRC")
NEEDED = ("ray", "torch", "aiohttp", "tokenizers")
"""What this interpreter must import to run slime's train.py (the venv ``setup_env.sh`` builds has them)."""


def pytest_marks(timeout: int) -> list:
    """The marks of a train.py test module: skipped without a slime checkout, a Megatron tree or the venv."""
    import importlib.util

    import pytest

    missing = [name for name in NEEDED if importlib.util.find_spec(name) is None]
    return [
        pytest.mark.slime,
        pytest.mark.skipif(not (SLIME_SRC and MEGATRON_SRC),
                           reason="set SLIME_SRC (slime checkout) and MEGATRON_SRC (Megatron-LM's megatron/ at slime's "
                                  "pinned commit) to run slime's own train.py; see tests/slime_train/setup_env.sh"),
        pytest.mark.skipif(bool(missing), reason=f"this interpreter lacks {', '.join(missing)}: run the test with the "
                                                 "venv tests/slime_train/setup_env.sh builds"),
        pytest.mark.timeout(timeout),
    ]

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
DATASET = HERE / "dataset.jsonl"
STUBS = HERE / "stubs"
HOOKS = {
    "--dynamic-sampling-filter-path": "shopsimrl.slime_runtime.fully_scored_group_filter",
    "--rollout-all-samples-process-path": "shopsimrl.slime_runtime.record_all_samples",
    "--custom-rollout-log-function-path": "shopsimrl.slime_runtime.log_rollout_step",
    "--rollout-sample-hook-path": "shopsimrl.slime_runtime.record_generated_sample",
}
ASYNC_HOOKS = {
    "--rollout-function-path": "shopsimrl.async_rollout.generate_rollout_fully_async",
    "--custom-rollout-log-function-path": "shopsimrl.slime_runtime.log_rollout_step",
    "--rollout-sample-hook-path": "shopsimrl.slime_runtime.record_generated_sample",
}
"""The hooks of a ``train_async.py`` run with the project's fully-async rollout function (docs §3.8)."""
REASONS = ("shopsim_unscored_technical_group", "shopsim_zero_std_group")
SHOP_AGENT = ROOT / "examples" / "shop_agent"
"""The project's multi-turn example (``generate_shop_agent.generate`` and ``.reward``), put on the path."""
RETOOL = Path(SLIME_SRC) / "examples" / "retool" if SLIME_SRC else None
"""slime's own multi-turn example (``generate_with_retool.generate``), run unchanged from the slime checkout."""
SAMPLE_LOG_HOOK = "sample_log.log_sample"
"""The harness's own rollout sample hook (``sample_log.py``): what every generate call returned, per line."""
AGENT_FLAGS = ("--rollout-max-response-len", "16", "--rollout-max-context-len", "4096")
"""``train.py`` flags of a multi-turn run: a turn of the fake engine's dialects fits in 16 tokens."""


def dataset_rows() -> list[dict]:
    """The rows of the tests' dataset (``dataset.jsonl``: prompts with their ``reward_kind`` and ``prompt_id``)."""
    return [json.loads(line) for line in DATASET.read_text().splitlines() if line.strip()]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _descendants(pid: int) -> list[int]:
    try:
        import psutil

        return [child.pid for child in psutil.Process(pid).children(recursive=True)]
    except Exception:
        return []


def stop_process(proc: subprocess.Popen, *, grace: float = 10.0) -> None:
    """Stop a process this module started, its process group and its descendants, by their ids."""
    if proc.poll() is not None and not _descendants(proc.pid):
        return
    family = _descendants(proc.pid)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGTERM)  # started with start_new_session: pgid == pid
    try:
        proc.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        pass
    family += _descendants(proc.pid)
    deadline = time.monotonic() + grace
    for pid in [proc.pid, *family]:
        while time.monotonic() < deadline and _alive(pid):
            time.sleep(0.1)
        if _alive(pid):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=grace)


def _alive(pid: int) -> bool:
    try:
        import psutil

        return psutil.pid_exists(pid) and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except Exception:
        return False


def build_tokenizer(out_dir: Path, dataset: Path = DATASET) -> Path:
    """The word-level tokenizer of ``dataset``'s prompts (``build_tokenizer.py``) in ``out_dir``."""
    sys.path.insert(0, str(HERE))
    try:
        import build_tokenizer
    finally:
        sys.path.remove(str(HERE))
    return build_tokenizer.build(out_dir, dataset)


@dataclass
class FakeServer:
    port: int
    proc: subprocess.Popen
    log_file: Path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def stats(self) -> dict:
        import urllib.request

        with urllib.request.urlopen(f"{self.url}/stats", timeout=10) as response:
            return json.loads(response.read())


def start_fake_server(work: Path, tokenizer: Path, *, python: str = sys.executable,
                      extra_args: tuple[str, ...] = (), dataset: Path = DATASET) -> FakeServer:
    """The fake engine on a free port, knowing ``dataset``'s prompts; ``extra_args``: more of its flags
    (``--base-delay 0.3``, ``--script FILE``, ...)."""
    port = free_port()
    log_file = work / "engine_requests.jsonl"
    proc = subprocess.Popen(
        [python, str(HERE / "fake_sglang_server.py"), "--port", str(port), "--tokenizer", str(tokenizer),
         "--dataset", str(dataset), "--key-column", "prompt_id", "--log-file", str(log_file), *extra_args],
        stdout=subprocess.PIPE, stderr=open(work / "engine.stderr", "w"), text=True, start_new_session=True,
    )
    line = proc.stdout.readline()
    if not line.startswith("READY"):
        stop_process(proc)
        raise RuntimeError(f"fake engine did not start: {line!r}; see {work / 'engine.stderr'}")
    return FakeServer(port, proc, log_file)


def base_env(slime_src: str, megatron_src: str, work: Path, python_path: tuple[Path, ...] = ()) -> dict:
    """The environment of Ray (and so of every actor) and of the driver: this checkout's project, slime,
    Megatron, the torchvision stand-in, the harness and ``python_path`` (e.g. a generate function's
    directory: :data:`RETOOL`, :data:`SHOP_AGENT`) on the path; W&B's files under ``work``; loopback only."""
    env = dict(os.environ)
    for key in [k for k in env if k.startswith(("RAY_", "WANDB_", "SHOPSIM_"))]:
        del env[key]
    # the project of this checkout first (not another one installed in the venv), so the actors run the code under test
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(ROOT / "filter"), slime_src, megatron_src, str(STUBS), str(HERE),
                                         *map(str, python_path)])
    env.update(
        RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER="0",
        RAY_USAGE_STATS_ENABLED="0",
        RAY_DEDUP_LOGS="0",
        WANDB_DIR=str(work / "wandb_root"),
        WANDB_CACHE_DIR=str(work / "wandb_cache"),
        WANDB_CONFIG_DIR=str(work / "wandb_config"),
        WANDB_DATA_DIR=str(work / "wandb_data"),
        WANDB_ARTIFACT_DIR=str(work / "wandb_artifacts"),
        WANDB_MODE="offline",
        WANDB_SILENT="true",
        TOKENIZERS_PARALLELISM="false",
        PYTHONUNBUFFERED="1",
        OMP_NUM_THREADS="1",
    )
    for name in ("wandb_root", "wandb_cache", "wandb_config", "wandb_data", "wandb_artifacts"):
        (work / name).mkdir(parents=True, exist_ok=True)
    return env


@dataclass
class RayHead:
    address: str
    proc: subprocess.Popen
    temp_dir: Path


def start_ray(env: dict, log: Path, *, python: str = sys.executable) -> RayHead:
    """A private Ray head on 127.0.0.1 with one logical GPU; ``--block`` keeps its processes under one
    parent this module can stop. Its temp dir is short (Unix socket paths are limited to 107 bytes)."""
    temp_dir = Path(tempfile.mkdtemp(prefix="rh", dir="/tmp"))
    port = free_port()
    ray_bin = str(Path(python).parent / "ray")
    cmd = [ray_bin, "start", "--head", "--block", "--node-ip-address", "127.0.0.1", "--port", str(port),
           "--num-gpus", "1", "--num-cpus", "8", "--temp-dir", str(temp_dir), "--include-dashboard", "false",
           "--disable-usage-stats", "--ray-client-server-port", str(free_port()),
           "--dashboard-agent-listen-port", str(free_port()), "--dashboard-agent-grpc-port", str(free_port()),
           "--metrics-export-port", str(free_port()), "--runtime-env-agent-port", str(free_port()),
           "--min-worker-port", "0", "--max-worker-port", "0"]
    proc = subprocess.Popen(cmd, env=env, stdout=open(log, "w"), stderr=subprocess.STDOUT, start_new_session=True)
    address = f"127.0.0.1:{port}"
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"ray start exited with {proc.returncode}; see {log}")
        if list(temp_dir.glob("session_latest/logs/raylet.out")) and "Ray runtime started" in log.read_text():
            return RayHead(address, proc, temp_dir)
        time.sleep(0.5)
    stop_process(proc)
    raise RuntimeError(f"Ray head did not come up in 90 s; see {log}")


def stop_ray(head: RayHead) -> None:
    stop_process(head.proc, grace=15)
    shutil.rmtree(head.temp_dir, ignore_errors=True)


def shopsim_yaml(path: Path, run_dir: Path, extra: dict | None = None) -> Path:
    """``examples/shopsim.yaml`` with ``shopsim_run_dir`` set, tables logged every step, and ``extra`` on top."""
    import yaml

    settings = yaml.safe_load((ROOT / "examples" / "shopsim.yaml").read_text())
    settings.update(shopsim_run_dir=str(run_dir), shopsim_prompt_key="prompt_id", shopsim_wandb_table_every=1,
                    shopsim_prompts_table_every=0)
    settings.update(extra or {})
    path.write_text(yaml.safe_dump(settings, sort_keys=False))
    return path


@dataclass
class TrainRun:
    """One ``train.py`` run: its directories, its output and slime's own views of what it did."""

    work: Path
    save: Path
    debug_dir: Path
    run_dir: Path
    wandb_dir: Path
    num_rollout: int
    start_rollout_id: int = 0
    returncode: int | None = None
    output: str = ""
    server_stats: dict = field(default_factory=dict)  # the engine's /stats after the run
    server_stats_before: dict = field(default_factory=dict)
    server_log_file: Path | None = None  # the engine's per-request log, and where this run's lines start and end in it
    server_log_offset: int = 0
    server_log_end: int | None = None  # None: to the end of the file (the run has not ended)

    def server_delta(self, kind: str = "requests") -> dict[str, int]:
        """What the engine counted during this run (``requests``, ``answered`` or ``aborted``), by prompt key."""
        before = self.server_stats_before.get(kind, {})
        after = self.server_stats.get(kind, {})
        delta = {key: after.get(key, 0) - before.get(key, 0) for key in after}
        return {key: n for key, n in delta.items() if n}

    def server_log(self) -> list[dict]:
        """The engine's log lines of this run's requests (one per request, written as each one ends), not those
        of a later run against the same engine."""
        if self.server_log_file is None:
            return []
        with open(self.server_log_file, "rb") as handle:
            handle.seek(self.server_log_offset)
            size = -1 if self.server_log_end is None else self.server_log_end - self.server_log_offset
            text = handle.read(size).decode()
        return [json.loads(line) for line in text.splitlines() if line.strip()]

    def server_log_by_step(self) -> list[list[dict]]:
        """This run's engine log lines, one list per rollout step, in order.

        A step's requests are those that arrived between two of slime's aborts (the log's
        ``aborts_before``): slime aborts the engine once at the end of each step, and again only
        while requests are still in flight, so the distinct values, in order, are the steps. A turn of
        a multi-turn episode counts in its episode's step (``episode_step``: the aborts before its first
        request), even when it came after the step's abort (the episode was in a tool then).
        """
        by_epoch: dict[int, list[dict]] = {}
        for line in self.server_log():
            by_epoch.setdefault(line.get("episode_step", line["aborts_before"]), []).append(line)
        return [by_epoch[epoch] for epoch in sorted(by_epoch)]

    def sample_log(self) -> list[dict]:
        """What every generate call of this run returned, as slime handed it to its rollout sample hooks
        (:data:`SAMPLE_LOG_HOOK`; a run with ``log_samples``), in order."""
        path = self.work / "samples.jsonl"
        return [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.exists() else []

    def server_requests_by_step(self) -> list[dict[str, int]]:
        """This run's requests by prompt key, one dict per rollout step, in order."""
        return [dict(Counter(str(line["key"]) for line in lines)) for lines in self.server_log_by_step()]

    def server_tokens_by_step(self) -> list[int]:
        """The response tokens the engine returned in each rollout step (answered and aborted requests), in order."""
        return [sum(int(line["tokens"]) for line in lines) for lines in self.server_log_by_step()]

    def snapshot_records(self) -> Path:
        """A copy of the run directory's records as this run left them (a resumed run appends to it)."""
        target = self.work / "records_at_end"
        shutil.rmtree(target, ignore_errors=True)
        shutil.copytree(self.run_dir, target)
        return target

    @property
    def records_at_end(self) -> Path:
        return self.work / "records_at_end"

    def perf_lines(self) -> dict[int, dict]:
        """slime's ``perf N: {...}`` rollout log lines (the RolloutManager's), by rollout id."""
        found: dict[int, dict] = {}
        for match in re.finditer(r"perf (\d+): (\{.*?\})\s*$", self.output, re.M):
            with contextlib.suppress(ValueError, SyntaxError):
                values = ast.literal_eval(match.group(2))
                if any(key.startswith("rollout/") for key in values):
                    found[int(match.group(1))] = values
        return found

    def debug_rollout(self, rollout_id: int) -> list[dict]:
        """The samples slime trained on at ``rollout_id`` (``--save-debug-rollout-data``)."""
        import torch

        return torch.load(self.debug_dir / f"rollout_{rollout_id}.pt", weights_only=False)["samples"]

    def dataset_state(self, rollout_id: int) -> dict:
        import torch

        return torch.load(self.save / "rollout" / f"global_dataset_state_dict_{rollout_id}.pt", weights_only=False)


def train_command(run: TrainRun, server: FakeServer, tokenizer: Path, config: Path, *, slime_src: str,
                  python: str = sys.executable, load: Path | None = None, rollout_batch_size: int = 2,
                  over_sampling_batch_size: int = 4, n_samples_per_prompt: int = 4,
                  extra_args: tuple[str, ...] = (), script: str = "train.py",
                  hooks: dict[str, str] | None = None, dataset: Path = DATASET) -> list[str]:
    """slime's ``script`` (``train.py`` or ``train_async.py``) with ``hooks`` (default: the four of ``HOOKS``)
    on the prompts of ``dataset``; ``extra_args`` come last, so they override the flags above."""
    hooks = HOOKS if hooks is None else hooks
    cmd = [
        python, str(Path(slime_src) / script),
        "--debug-rollout-only",
        "--rollout-external-engine-addrs", f"127.0.0.1:{server.port}",
        "--sglang-router-ip", "127.0.0.1", "--sglang-router-port", str(server.port),
        "--actor-num-nodes", "1", "--actor-num-gpus-per-node", "1",
        "--hf-checkpoint", str(tokenizer),
        "--prompt-data", str(dataset), "--input-key", "prompt", "--label-key", "label", "--metadata-key", "metadata",
        "--num-rollout", str(run.num_rollout),
        "--rollout-batch-size", str(rollout_batch_size),
        "--over-sampling-batch-size", str(over_sampling_batch_size),
        "--n-samples-per-prompt", str(n_samples_per_prompt),
        "--global-batch-size", str(rollout_batch_size * n_samples_per_prompt),
        "--rollout-max-response-len", "8", "--rollout-temperature", "1.0",
        "--custom-rm-path", "harness_reward.reward",
        "--advantage-estimator", "grpo",
        *[part for flag, path in hooks.items() for part in (flag, path)],
        "--custom-config-path", str(run.work / "shopsim.yaml"),
        "--use-wandb", "--wandb-mode", "offline", "--disable-wandb-random-suffix",
        "--wandb-project", "shopsim-harness", "--wandb-group", "harness", "--wandb-dir", str(run.wandb_dir),
        "--save-debug-rollout-data", str(run.debug_dir / "rollout_{rollout_id}.pt"),
        "--save", str(run.save), "--save-interval", "1",
        *extra_args,
    ]
    if load is not None:
        cmd += ["--load", str(load), "--start-rollout-id", str(run.start_rollout_id)]
    return cmd


def run_train(run: TrainRun, server: FakeServer, tokenizer: Path, env: dict, ray_address: str, *, slime_src: str,
              python: str = sys.executable, load: Path | None = None, timeout: float = 240,
              settings: dict | None = None, extra_args: tuple[str, ...] = (), log_samples: bool = False,
              **sizes) -> TrainRun:
    """Run ``train.py`` to the end (or ``timeout``) and keep its whole output in ``run.output``.

    ``settings``: the project's settings over the harness's YAML; ``extra_args``: more ``train.py`` flags;
    ``log_samples``: add the harness's sample hook (:meth:`TrainRun.sample_log` reads what it wrote).
    """
    if log_samples:
        settings = {**(settings or {}), "harness_sample_log_path": str(run.work / "samples.jsonl")}
        extra_args = (*extra_args, "--rollout-sample-hook-path", SAMPLE_LOG_HOOK)
    shopsim_yaml(run.work / "shopsim.yaml", run.run_dir, settings)
    cmd = train_command(run, server, tokenizer, run.work / "shopsim.yaml", slime_src=slime_src, python=python,
                        load=load, extra_args=extra_args, **sizes)
    driver_env = dict(env, RAY_ADDRESS=ray_address)
    run.server_stats_before = server.stats()
    run.server_log_file = server.log_file
    run.server_log_offset = server.log_file.stat().st_size if server.log_file.exists() else 0
    log_path = run.work / "train.log"
    with open(log_path, "w") as log:
        proc = subprocess.Popen(cmd, env=driver_env, cwd=run.work, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True)
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            pass
        finally:
            stop_process(proc)
    run.returncode = proc.returncode
    run.output = log_path.read_text(errors="replace")
    run.server_stats = server.stats()  # slime waited for the engine to be idle: every request of the run is logged
    run.server_log_end = server.log_file.stat().st_size if server.log_file.exists() else 0
    if run.run_dir.is_dir():
        run.snapshot_records()
    return run


def new_run(work: Path, num_rollout: int, *, save: Path | None = None, run_dir: Path | None = None,
            start_rollout_id: int = 0) -> TrainRun:
    """A run's directories under ``work``; a resumed run passes the first run's ``save`` and ``run_dir``."""
    work.mkdir(parents=True, exist_ok=True)
    run = TrainRun(work=work, save=save or work / "save", debug_dir=work / "debug", run_dir=run_dir or work / "shopsim_run",
                   wandb_dir=work / "wandb", num_rollout=num_rollout, start_rollout_id=start_rollout_id)
    run.save.mkdir(parents=True, exist_ok=True)
    return run


@dataclass
class Rig:
    """The fake engine and a private Ray head, for one or more ``train.py`` runs in turn (:func:`engine_and_ray`)."""

    work: Path
    tokenizer: Path
    env: dict
    server: FakeServer
    head: RayHead
    dataset: Path
    runs: dict[str, TrainRun] = field(default_factory=dict)

    def train(self, name: str, num_rollout: int, **train_kwargs) -> TrainRun:
        """Run ``train.py`` once as ``name`` under ``work/name`` (:func:`run_train` with ``train_kwargs``)."""
        train = new_run(self.work / name, num_rollout)
        self.runs[name] = train
        train_kwargs.setdefault("dataset", self.dataset)
        return run_train(train, self.server, self.tokenizer, self.env, self.head.address, slime_src=SLIME_SRC,
                         **train_kwargs)


@contextlib.contextmanager
def engine_and_ray(work: Path, *, server_args: tuple[str, ...] = (), dataset: Path = DATASET,
                   python_path: tuple[Path, ...] = ()):
    """Start the fake engine (with ``server_args``, knowing ``dataset``'s prompts) and a private Ray head
    under ``work`` (``python_path``: more directories on every process's path), yield a :class:`Rig` whose
    ``train`` runs ``train.py`` (as often as wanted, one run at a time), and stop every process started
    here, by its id.

    Raises RuntimeError when this interpreter lacks the CPU accelerator hook (slime refuses to start
    without an accelerator: build the venv with ``setup_env.sh``).
    """
    if "shopsim_cpu_accelerator" not in sys.modules:
        raise RuntimeError("the CPU accelerator hook is not installed in this interpreter (slime refuses to start "
                           "without an accelerator): build the venv with tests/slime_train/setup_env.sh")
    tokenizer = build_tokenizer(work / "tokenizer", dataset)
    env = base_env(SLIME_SRC, MEGATRON_SRC, work, python_path)
    server = start_fake_server(work, tokenizer, extra_args=server_args, dataset=dataset)
    head = None
    rig = None
    try:
        head = start_ray(env, work / "ray.log")
        rig = Rig(work, tokenizer, env, server, head, dataset)
        yield rig
    finally:
        if head is not None:
            stop_ray(head)
        stop_process(server.proc)
        for name, train in (rig.runs if rig is not None else {}).items():
            print(f"slime train.py run {name}: rc={train.returncode}, log {train.work / 'train.log'}")


@contextlib.contextmanager
def one_train_run(work: Path, name: str, num_rollout: int, *, server_args: tuple[str, ...] = (), **train_kwargs):
    """Start the fake engine (with ``server_args``) and a private Ray head under ``work``, run ``train.py``
    once as ``name`` (:func:`run_train` with ``train_kwargs``), yield the :class:`TrainRun`, and stop every
    process started here, by its id (:func:`engine_and_ray`)."""
    with engine_and_ray(work, server_args=server_args) as rig:
        yield rig.train(name, num_rollout, **train_kwargs)


def started_tokens(lines: list[dict]) -> list[int]:
    """The tokens of each request of ``lines`` (engine log lines) that made a token: answered, or aborted
    part-way (a request aborted before its first token, still waiting in the engine, never started)."""
    return [line["tokens"] for line in lines if line["finish"] != "abort" or line["tokens"] > 0]


def aborted_tokens(lines: list[dict]) -> list[int]:
    """The tokens each request of ``lines`` had made when slime aborted it part-way."""
    return [line["tokens"] for line in lines if line["finish"] == "abort" and line["tokens"] > 0]


def engine_episodes(lines: list[dict]) -> list[list[dict]]:
    """The multi-turn episodes in ``lines`` (engine log lines of an ``--agent`` engine), each its requests
    in turn order, by serial number."""
    by_serial: dict[int, list[dict]] = {}
    for line in lines:
        by_serial.setdefault(line["episode"], []).append(line)
    return [sorted(by_serial[serial], key=lambda line: line["turn"]) for serial in sorted(by_serial)]


def observation_tokens(turns: list[dict]) -> int:
    """The tokens a generate function put between an episode's turns (each request's input less the
    previous input and answer): its observations, when it appends none after its last turn."""
    return sum(after["input_tokens"] - before["input_tokens"] - before["tokens"]
               for before, after in zip(turns, turns[1:]))


def finished_records(run: TrainRun, num_rollout: int) -> list[dict]:
    """The records the run left in its ``steps.jsonl``, as dicts; asserts train.py ended well and every
    step ``0 .. num_rollout - 1`` has its record."""
    from shopsim_metrics.readers import read_steps

    assert run.returncode == 0, f"train.py exited with {run.returncode}; last output:\n{run.output[-4000:]}"
    found = [record.to_dict() for record in read_steps(run.records_at_end / "steps.jsonl")]
    assert [r["rollout_id"] for r in found] == list(range(num_rollout))
    return found


def mark_checkpoint(save: Path, rollout_id: int) -> None:
    """Write Megatron's tracker file into ``save``, which a rollout-only run does not write (its actors
    save no weights) but slime's ``--load`` requires before it keeps the path (otherwise it swaps
    ``--load`` for ``--ref-load`` and restores no data source state)."""
    (save / "latest_checkpointed_iteration.txt").write_text(f"{rollout_id}\n")


def main(argv=None) -> None:
    import argparse

    parser = argparse.ArgumentParser(description="one slime train.py run through the harness", allow_abbrev=False)
    parser.add_argument("out", type=Path)
    parser.add_argument("--num-rollout", type=int, default=3)
    options = parser.parse_args(argv)
    slime_src, megatron_src = os.environ["SLIME_SRC"], os.environ["MEGATRON_SRC"]
    out = options.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    tokenizer = build_tokenizer(out / "tokenizer")
    env = base_env(slime_src, megatron_src, out)
    server = start_fake_server(out, tokenizer)
    head = None
    try:
        head = start_ray(env, out / "ray.log")
        run = run_train(new_run(out / "run", options.num_rollout), server, tokenizer, env, head.address,
                        slime_src=slime_src)
        print(json.dumps({"returncode": run.returncode,
                          "log": str(run.work / "train.log"), "perf": run.perf_lines(),
                          "server": run.server_stats}, indent=1, default=str))
    finally:
        if head is not None:
            stop_ray(head)
        stop_process(server.proc)


if __name__ == "__main__":
    main()
