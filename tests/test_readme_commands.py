"""The README works as written: every ``shopsim-metrics …`` line of its code blocks runs after a small
demo and exits 0; the README and docs name no file outside the repository."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
CLI = Path(sys.executable).with_name("shopsim-metrics")


def readme_command_lines(text: str) -> list[str]:
    """Every command of a fenced code block that starts with ``shopsim-metrics`` (lines continued with a
    backslash joined), comments stripped.

    >>> readme_command_lines("x\\n```bash\\nshopsim-metrics inspect run   # table\\nmake demo\\n```\\nshopsim-metrics no")
    ['shopsim-metrics inspect run']
    >>> readme_command_lines("```\\nshopsim-metrics preflight -- --a 1 \\\\\\n    --b x  # c\\n```")
    ['shopsim-metrics preflight -- --a 1 --b x']
    """
    lines = []
    for block in re.findall(r"^```[^\n]*\n(.*?)^```", text, flags=re.M | re.S):
        for line in re.sub(r"\\\n\s*", " ", block).splitlines():
            if line.startswith("shopsim-metrics"):
                lines.append(shlex.join(shlex.split(line, comments=True)))
    return lines


def _offline_env(root: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("WANDB_")}
    for var, sub in (("WANDB_DIR", "dir"), ("WANDB_DATA_DIR", "data"), ("WANDB_CACHE_DIR", "cache"),
                     ("WANDB_CONFIG_DIR", "config"), ("WANDB_ARTIFACT_DIR", "artifacts")):
        (root / sub).mkdir(parents=True, exist_ok=True)
        env[var] = str(root / sub)
    env.update(WANDB_MODE="offline", WANDB_SILENT="true", WANDB_CONSOLE="off", WANDB_DISABLE_GIT="true",
               WANDB_BASE_URL="http://127.0.0.1:9", NETRC=str(root / "no-netrc"),
               PATH=f"{CLI.parent}{os.pathsep}{os.environ.get('PATH', '/usr/bin:/bin')}")
    return env


def test_the_readme_lists_every_command_of_the_cli() -> None:
    from shopsim_metrics.cli import build_parser

    parser = build_parser()
    (sub,) = [a for a in parser._actions if a.dest == "command"]
    commands = {line.split()[1] for line in readme_command_lines(README.read_text())}
    missing = [name for name in sub.choices if name not in commands]
    assert not missing, f"the README's command list leaves out {missing}"
    assert "--version" in commands


NUMBER_WORDS = {2: "two", 3: "three", 4: "four", 5: "five", 6: "six"}


def test_the_readme_and_docs_count_the_hooks_as_the_launch_lists_them() -> None:
    """The README's launch block lists the hook paths; "N hooks" anywhere in the README and docs says the same N."""
    launch = re.search(r"Add \w+ hook paths to a slime launch:\n\n```bash\n(.*?)^```", README.read_text(), re.M | re.S)
    assert launch is not None
    hooks = re.findall(r"shopsimrl\.slime_runtime\.\w+", launch.group(1))
    assert len(hooks) == len(set(hooks)) == 4
    said = {}
    for path in (README, *sorted((ROOT / "docs").rglob("*.md"))):
        for word in re.findall(r"\b(two|three|four|five|six) (?:hooks|hook paths)\b", path.read_text()):
            said.setdefault(word, []).append(path.name)
    assert set(said) == {NUMBER_WORDS[len(hooks)]}, said


def test_every_readme_command_runs_as_written_after_a_small_demo(tmp_path: Path) -> None:
    lines = readme_command_lines(README.read_text())
    assert len(lines) >= 8, lines
    (tmp_path / "examples").mkdir()
    shutil.copy(ROOT / "examples" / "shopsim.yaml", tmp_path / "examples" / "shopsim.yaml")
    env = _offline_env(tmp_path / "wb")
    small = [str(CLI), "demo", "--out", "demo_out", "--steps", "16", "--no-progress"]
    subprocess.run(small, cwd=tmp_path, env=env, check=True, capture_output=True, timeout=300)
    failed = []
    for line in lines:
        argv = shlex.split(line.replace("$PWD", str(tmp_path)))  # the shell's $PWD: the repository's root
        done = subprocess.run([str(CLI), *argv[1:]], cwd=tmp_path, env=env, capture_output=True, text=True,
                              timeout=600)
        if done.returncode != 0:
            failed.append(f"{line}: exit {done.returncode}: {done.stderr.strip()[-300:]}")
    assert not failed, "\n".join(failed)
    assert (tmp_path / "demo_out" / "dashboard.html").is_file()  # the lines did what they say
    assert (tmp_path / "demo_out" / "wandb_templates" / "wandb_workspace.json").is_file()


@pytest.mark.parametrize("needle", ["../" + "shared", "shared" + "/spec"])
def test_no_file_of_the_repository_points_outside_it(needle: str) -> None:
    roots = [ROOT / name for name in ("README.md", "docs", "dashboards", "examples", "shopsim_metrics", "filter",
                                      "benchmarks", "tests", "pyproject.toml", "Makefile")]
    offenders = []
    for root in roots:
        for path in [root] if root.is_file() else root.rglob("*"):
            if path.is_file() and path.suffix in {".md", ".py", ".json", ".yaml", ".sh", ".toml", ""}:
                if needle in path.read_text(encoding="utf-8", errors="replace"):
                    offenders.append(str(path.relative_to(ROOT)))
    assert not offenders, f"{needle!r} in {offenders}"
