"""``shopsim-metrics check-config shopsim.yaml``: the settings checked before any GPU starts.

slime applies the ``--custom-config-path`` YAML blindly and loads the hooks only at the first
rollout, so a typo or a bad value would surface after the engines started. This reads the file
with slime's own loader (``yaml.safe_load``, YAML 1.1) and checks every ``shopsim_*`` key against
:data:`shopsim_metrics.settings.SETTINGS`, plus slime's knobs the accounting needs when the file sets
them. Other keys (slime's own) are not looked at. One line per problem; exit code 2 on problems, 0
when clean.

Example:
    >>> check_mapping({"shopsim_wandb": False, "shopsim_alert_warn_fraction": "5e-1", "lr": 1e-6})
    []
    >>> check_mapping({"shopsim_max_consecutive_failed_group": 8})
    ["shopsim_max_consecutive_failed_group: unknown key; did you mean 'shopsim_max_consecutive_failed_groups'?"]
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from typing import Any, Mapping

import yaml

from shopsim_metrics.errors import missing_path
from shopsim_metrics.settings import PREFIX, SETTINGS_BY_NAME, unknown_key_problem, validate_settings, validate_slime_knobs
from shopsim_metrics.settings.loops import LOOPS, MILES, LoopUnknown, detect_loop, miles_settings_unsupported


def check_mapping(values: Mapping[Any, Any]) -> list[str]:
    """Every problem of a loaded config mapping, one line each (empty when clean)."""
    problems = [problem for key in values if (problem := near_miss_problem(key))]
    problems += validate_settings(values)[1]
    problems += validate_slime_knobs({k: v for k, v in values.items() if isinstance(k, str)})[1]
    return problems


def near_miss_problem(key: Any) -> str | None:
    """The problem of a key that is a ``shopsim_*`` key written with another separator or case.

    slime sets every YAML key as an attribute of ``args`` as written, so ``shopsim-wandb`` or
    ``Shopsim_alerts`` is never read: the setting silently keeps its default.

    Example:
        >>> near_miss_problem("shopsim-wandb")
        "shopsim-wandb: not read (shopsim_* keys are lower case with '_'); did you mean 'shopsim_wandb'?"
        >>> near_miss_problem("max_consecutive_failed_groups")
        "max_consecutive_failed_groups: not read (no shopsim_ prefix); did you mean 'shopsim_max_consecutive_failed_groups'?"
        >>> near_miss_problem("shopsim_wandb"), near_miss_problem("lr"), near_miss_problem("wandb_project")
        (None, None, None)
    """
    if not isinstance(key, str):
        return None
    normal = re.sub(r"[^a-z0-9]+", "_", key.strip().lower())
    prefixed = PREFIX + normal
    if not normal.startswith(PREFIX) and prefixed in SETTINGS_BY_NAME and not _is_slime_key(normal):
        return f"{key}: not read (no shopsim_ prefix); did you mean {prefixed!r}?"
    if key.startswith(PREFIX) or not normal.startswith(PREFIX):  # with the prefix: an unknown key, said elsewhere
        return None
    hint = f"did you mean {normal!r}?" if normal in SETTINGS_BY_NAME else unknown_key_problem(normal).split("; ", 1)[-1]
    return f"{key}: not read (shopsim_* keys are lower case with '_'); {hint}"


def _is_slime_key(name: str) -> bool:
    """A YAML key slime itself reads (``wandb_project`` is slime's ``--wandb-project``): never a near miss."""
    from shopsim_metrics.settings.slime_flags import SLIME_FLAGS

    return "--" + name.replace("_", "-") in SLIME_FLAGS


MAX_CONFIG_BYTES = 1024 * 1024
"""A settings file larger than this (1 MiB) is refused unread: a real one is a few KB."""
MAX_YAML_NODES = 100_000
"""A YAML document that would hold more values than this once its aliases are expanded is refused
(an alias bomb: ten lines that expand into billions of values)."""


class ConfigFileRefused(ValueError):
    """A settings file that is not read: not a regular file, too large, or an alias bomb (one line)."""


def read_config_text(path: str | os.PathLike) -> str:
    """The text of a settings file, bounded: a directory, FIFO or device is named as such and never
    opened (so never read forever), a file over :data:`MAX_CONFIG_BYTES` is refused.

    Raises :class:`FileNotFoundError` (missing), :class:`ConfigFileRefused`, :class:`OSError` or
    :class:`UnicodeDecodeError`.

    Example:
        >>> read_config_text("/dev/null")
        Traceback (most recent call last):
        ...
        shopsim_metrics.settings.check.ConfigFileRefused: is a character device, not a YAML file
    """
    from shopsim_metrics.state_file import file_kind

    kind = file_kind(os.stat(path).st_mode)
    if kind is not None:
        raise ConfigFileRefused(f"is {kind}, not a YAML file" if kind.startswith("a ") else f"{kind}, not a YAML file")
    with open(path, "rb") as fh:
        data = fh.read(MAX_CONFIG_BYTES + 1)
    if len(data) > MAX_CONFIG_BYTES:
        raise ConfigFileRefused(f"larger than {MAX_CONFIG_BYTES // (1024 * 1024)} MB, not read (a settings file is a "
                                "few KB)")
    return data.decode("utf-8")


def load_config(text: str) -> Any:
    r"""``yaml.safe_load`` (slime's loader) of ``text``, refusing a document whose aliases would expand
    it beyond :data:`MAX_YAML_NODES` values (:class:`ConfigFileRefused`, one line).

    Example:
        >>> lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x]"] + [
        ...     f"a{i}: &a{i} [" + ", ".join([f"*a{i-1}"] * 9) + "]" for i in range(1, 9)]
        >>> load_config("\n".join(lines + ["shopsim_wandb: *a8"]))
        Traceback (most recent call last):
        ...
        shopsim_metrics.settings.check.ConfigFileRefused: its aliases expand to more than 100000 values (a YAML alias bomb?); not loaded
        >>> load_config("shopsim_wandb: &w off\nother: *w\n")
        {'shopsim_wandb': False, 'other': False}
    """
    node = yaml.compose(text, Loader=yaml.SafeLoader)
    if node is None:
        return None
    _check_expansion(node)
    return yaml.safe_load(text)


def _check_expansion(root: yaml.Node) -> None:
    """Count the values ``root`` expands to (an alias counts as often as it is used), up to the bound."""
    sizes: dict[int, int] = {}
    on_path: set[int] = set()

    def size(node: yaml.Node) -> int:
        key = id(node)
        if key in sizes:
            return sizes[key]
        if key in on_path:
            raise ConfigFileRefused("holds a recursive alias; not loaded")
        on_path.add(key)
        total = 1
        if isinstance(node, yaml.SequenceNode):
            children = node.value
        elif isinstance(node, yaml.MappingNode):
            children = [item for pair in node.value for item in pair]
        else:
            children = []
        for child in children:
            total += size(child)
            if total > MAX_YAML_NODES:
                raise ConfigFileRefused(f"its aliases expand to more than {MAX_YAML_NODES} values (a YAML alias "
                                        "bomb?); not loaded")
        on_path.discard(key)
        sizes[key] = total
        return total

    try:
        size(root)
    except RecursionError:
        raise ConfigFileRefused("nested too deeply; not loaded") from None


def read_config(path: str | os.PathLike) -> Any:
    """A settings file loaded within the bounds (:func:`read_config_text`, :func:`load_config`)."""
    return load_config(read_config_text(path))


def check_file(path: str | os.PathLike, *, loop: str | None = None) -> list[str]:
    """Every problem of a YAML config file, one line each, with the line of its key when known, in line order.

    With ``loop="miles"``, the settings that act only through what miles cannot run are problems too
    (:func:`~shopsim_metrics.settings.loops.miles_settings_unsupported`).

    An unreadable file is one problem; a ``shopsim_*`` key set twice is one too (slime applies the last).
    A directory, FIFO or device, a file over 1 MB, or a document whose aliases expand beyond
    :data:`MAX_YAML_NODES` values is refused with one line, unread.

    Example:
        >>> check_file("/nonexistent/shopsim.yaml")
        ['/nonexistent/shopsim.yaml: no such file or directory (expected a YAML file of shopsim_* settings)']
        >>> check_file("/")
        ['is a directory, not a YAML file']
    """
    try:
        text = read_config_text(path)
        loaded = load_config(text)
    except FileNotFoundError:
        return [str(missing_path(path, "a YAML file of shopsim_* settings"))]
    except ConfigFileRefused as exc:
        return [str(exc)]
    except UnicodeDecodeError:
        return ["cannot read the file (not UTF-8 text)"]
    except OSError as exc:
        return [f"cannot read the file ({getattr(exc, 'strerror', None) or exc})"]
    except yaml.YAMLError as exc:
        where = getattr(exc, "problem_mark", None)
        line = f" at line {where.line + 1}" if where is not None else ""
        return [f"not valid YAML{line} ({str(getattr(exc, 'problem', None) or exc)[:200]})"]
    except RecursionError:
        return ["not loaded: nested too deeply"]
    if loaded is None:  # an empty file: slime applies nothing, every setting keeps its default
        return []
    if not isinstance(loaded, dict):
        return [f"expected a mapping of key: value at the top level; got a {type(loaded).__name__}"]
    key_lines = _key_lines(text)
    problems = [f"{key}: set {len(lines)} times (lines {', '.join(map(str, lines))}); slime applies the last"
                for key, lines in key_lines.items() if len(lines) > 1 and key.startswith("shopsim_")]
    problems += check_mapping(loaded)
    if loop == MILES:
        problems += miles_settings_unsupported(loaded)
    return [_with_line(problem, key_lines) for problem in sorted(problems, key=lambda p: _line_of(p, key_lines))]


def _key_lines(text: str) -> dict[str, list[int]]:
    """The 1-based lines of each top-level key (a key set twice has two)."""
    node = yaml.compose(text, Loader=yaml.SafeLoader)
    lines: dict[str, list[int]] = {}
    if isinstance(node, yaml.MappingNode):
        for key, _ in node.value:
            if isinstance(key, yaml.ScalarNode):
                lines.setdefault(str(key.value), []).append(key.start_mark.line + 1)
    return lines


def _line_of(problem: str, key_lines: dict[str, list[int]]) -> int:
    """The line of the key a problem is about (every problem starts with ``<key>: ``); 0 when none is known."""
    lines = key_lines.get(problem.split(":", 1)[0])
    return lines[-1] if lines else 0


def _with_line(problem: str, key_lines: dict[str, list[int]]) -> str:
    """``line N: <problem>`` for a problem about one key."""
    line = _line_of(problem, key_lines)
    return f"line {line}: {problem}" if line else problem


def run(args: argparse.Namespace) -> int:
    """Each file's verdict: one line per problem (stderr), or ``<path>: OK`` (stdout); 2 when any file has a problem.

    Every problem line starts ``shopsim-metrics check-config: error: <path>: `` (a missing file: the
    missing-path error every command gives).
    """
    status = 0
    loop = getattr(args, "loop", None)
    if loop is None:
        try:
            loop = detect_loop()
        except LoopUnknown as exc:
            print(f"shopsim-metrics check-config: error: {str(exc).removeprefix('shopsim-metrics: ')} (or say which "
                  "with --loop)", file=sys.stderr)
            return 2
    for path in args.paths:
        problems = check_file(path, loop=loop)
        for line in problems:
            where = "" if line.startswith(f"{path}: ") else f"{path}: "
            print(f"shopsim-metrics check-config: error: {where}{line}", file=sys.stderr)
        if problems:
            status = 2
        else:
            print(f"shopsim-metrics check-config: {path}: OK" + (" (for miles)" if loop == MILES else ""))
    return status


def register(subparsers: Any) -> None:
    """Add the ``check-config`` subcommand."""
    parser = subparsers.add_parser(
        "check-config", help="check the shopsim_* settings of a --custom-config-path YAML before launch")
    parser.add_argument("paths", nargs="+", metavar="shopsim.yaml")
    parser.add_argument("--loop", choices=LOOPS[:2], default=None,
                        help="the framework the settings are for: slime or miles (slime's production fork); default: "
                             "the one installed here (slime's checks when neither is)")
    parser.set_defaults(func=run)
