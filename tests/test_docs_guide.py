"""The guide, ``docs/training_monitoring.md``: short enough for one sitting, and true to the code it shows.

Every ``shopsim-metrics`` command it shows parses with the CLI's own parser, every flag of a slime launch it
shows is one slime's parser knows, every YAML block passes ``check-config``'s checks, and every field or
setting it names in backticks exists. (The README's commands are run end to end by ``test_readme_commands``;
the guide's paths are a real launch's, ``/shared/my-run/...``, so here they are parsed, not run.)
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import re
import shlex

import pytest
import yaml

from shopsim_metrics.cli import build_parser
from shopsim_metrics.record import contract
from shopsim_metrics.record.records import StepRecord
from shopsim_metrics.settings import SETTINGS_BY_NAME
from shopsim_metrics.settings.check import check_mapping
from shopsim_metrics.settings.slime_flags import is_slime_flag
from shopsimrl import slime_runtime
from tests.docs_pages import GUIDE, README

MAX_LINES = 600
"""The guide is read in one sitting; the detail belongs on the reference pages it links."""

OTHER_NAMES = {"loss_mask", "shopsim_metrics"}
"""Names the guide quotes that are neither a record field nor a setting: slime's ``Sample.loss_mask``, the package."""


def blocks(text: str, language: str) -> list[str]:
    """The fenced code blocks of ``text`` in ``language``.

    >>> blocks("a\\n```bash\\nx\\n```\\n```yaml\\ny: 1\\n```\\n", "yaml")
    ['y: 1\\n']
    """
    return re.findall(rf"^```{language}\n(.*?)^```", text, flags=re.M | re.S)


def commands(block: str) -> list[list[str]]:
    """The commands of a bash block as argument lists: continued lines joined, comments and ``cd ... &&`` dropped.

    >>> commands("cd /s && python train.py \\\\\\n  --a 1  # the a\\n# a comment\\nshopsim-metrics inspect run\\n")
    [['python', 'train.py', '--a', '1'], ['shopsim-metrics', 'inspect', 'run']]
    """
    out = []
    for line in re.sub(r"\\\n\s*", " ", block).splitlines():
        words = shlex.split(line, comments=True)
        if "&&" in words:
            words = words[len(words) - words[::-1].index("&&"):]
        if words:
            out.append(words)
    return out


def inline_commands(text: str) -> list[list[str]]:
    """The ``shopsim-metrics`` commands of the prose's inline code (an output line such as ``shopsim-metrics
    preflight: OK`` left out).

    >>> inline_commands("run `shopsim-metrics demo\\n--agent` and see `shopsim-metrics preflight: OK`")
    [['shopsim-metrics', 'demo', '--agent']]
    """
    prose = re.sub(r"^```.*?^```", "", text, flags=re.M | re.S)
    spans = [" ".join(span.split()) for span in re.findall(r"`(shopsim-metrics [^`]+)`", prose)]
    return [span.split() for span in spans if not span.split()[1].endswith(":")]


def guide_commands() -> list[list[str]]:
    text = GUIDE.read_text(encoding="utf-8")
    return [c for block in blocks(text, "bash") for c in commands(block)] + inline_commands(text)


def test_the_guide_is_read_in_one_sitting() -> None:
    lines = GUIDE.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= MAX_LINES, f"the guide has {len(lines)} lines; at most {MAX_LINES}: move detail to the reference"


def test_the_readme_links_the_guide_in_its_first_lines_after_its_two_commands() -> None:
    head = README.read_text(encoding="utf-8").split("\n## ")[0]
    assert "](docs/training_monitoring.md)" in head
    assert head.index("make demo") < head.index("make test") < head.index("](docs/training_monitoring.md)")


CLI_COMMANDS = [c for c in guide_commands() if c[0] == "shopsim-metrics"]


def test_the_guide_shows_every_command_a_newcomer_needs() -> None:
    shown = {c[1] for c in CLI_COMMANDS}
    assert {"demo", "check-config", "preflight", "inspect", "dashboard", "tune", "replay", "prompts"} <= shown


@pytest.mark.parametrize("argv", CLI_COMMANDS, ids=[" ".join(c[1:4]) for c in CLI_COMMANDS])
def test_every_command_the_guide_shows_parses_with_the_cli(argv: list[str]) -> None:
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        try:
            build_parser().parse_args(argv[1:])
        except SystemExit as exc:
            pytest.fail(f"`{shlex.join(argv)}` does not parse (exit {exc.code}): {err.getvalue().strip()}")


def launch_flags() -> list[str]:
    """The flags of every slime launch the guide shows: ``train.py`` lines, their snippets, ``preflight -- ...``."""
    flags = []
    for argv in guide_commands():
        if argv[0] == "shopsim-metrics":
            args = argv[argv.index("--") + 1:] if argv[1] == "preflight" else []
        elif argv[0] in {"make", "pip"}:
            args = []
        else:
            args = argv
        flags += [a for a in args if a.startswith("--") and a != "--"]
    return flags


def test_every_flag_of_a_launch_the_guide_shows_is_a_slime_flag() -> None:
    flags = launch_flags()
    assert {"--dynamic-sampling-filter-path", "--rollout-function-path", "--data-source-path"} <= set(flags)
    assert [f for f in flags if not is_slime_flag(f)] == []


def test_the_guide_wires_the_four_hooks_slime_runtime_exports() -> None:
    named = set(re.findall(r"shopsimrl\.slime_runtime\.(\w+)", GUIDE.read_text(encoding="utf-8")))
    assert named == {"fully_scored_group_filter", "record_all_samples", "log_rollout_step", "record_generated_sample"}
    assert named <= set(slime_runtime.__all__)


def test_every_settings_block_of_the_guide_passes_check_config() -> None:
    found = blocks(GUIDE.read_text(encoding="utf-8"), "yaml")
    assert len(found) >= 3
    for block in found:
        loaded = yaml.safe_load(block)
        assert isinstance(loaded, dict) and check_mapping(loaded) == [], (block, check_mapping(loaded))


def test_every_field_and_setting_the_guide_names_exists() -> None:
    names = set(re.findall(r"`([a-z][a-z0-9]*(?:_[a-z0-9]+)+)`", GUIDE.read_text(encoding="utf-8")))
    known = ({f.name for f in dataclasses.fields(StepRecord)} | set(SETTINGS_BY_NAME) | set(contract.LEDGER_COLUMNS)
             | set(slime_runtime.__all__) | OTHER_NAMES)
    assert len(names) > 30
    assert sorted(names - known) == []
