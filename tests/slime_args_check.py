"""Applies a ``--custom-config-path`` YAML through slime's own argument parsing, then reads the settings.

Run by tests/test_slime_integration.py in a subprocess with slime's checkout on ``PYTHONPATH``.
slime's ``parse_args`` (``slime/utils/arguments.py``) runs for real, with its ``slime_validate_args``
(which applies the YAML) and slime's Megatron wrapper ``megatron_parse_args``; only what needs
Megatron, SGLang or a model is stubbed: Megatron's own ``parse_args`` becomes a plain argparse parser
carrying slime's arguments (``ignore_unknown_args`` as slime asks), its ``validate_args`` and SGLang's
parse/validate do nothing, and ``transformers.AutoConfig`` is never reached (no ``--hf-checkpoint``).

Prints one JSON object: the ``shopsim_*`` attributes and knobs slime's ``args`` ended with, the
project's :class:`ShopsimSettings` read from them (or the error it raised) and, when they read, the
directory and records file of the monitor slime's process creates from them (its first hook's
``get_runtime``: a run without ``shopsim_run_dir``, ``--save`` or ``--load`` gets its new directory there).

Usage: PYTHONPATH=/path/to/slime python tests/slime_args_check.py shopsim.yaml [more slime flags]
"""

from __future__ import annotations

import argparse
import json
import sys
import types
from dataclasses import asdict


def _module(name: str, **attrs) -> types.ModuleType:
    module = types.ModuleType(name)
    module.__dict__.update(attrs)
    sys.modules[name] = module
    return module


# Megatron's own arguments that slime's parsing reads, at Megatron's defaults
MEGATRON_DEFAULTS = dict(fp16=False, seq_length=None, max_position_embeddings=None, multi_latent_attention=False,
                         vocab_size=None, padded_vocab_size=None, tokenizer_model=None, tokenizer_type=None,
                         pipeline_model_parallel_size=1, decoder_first_pipeline_num_layers=None,
                         decoder_last_pipeline_num_layers=None)


def _megatron_parse_args(extra_args_provider=None, ignore_unknown_args=False):
    parser = argparse.ArgumentParser(allow_abbrev=False)
    if extra_args_provider is not None:
        parser = extra_args_provider(parser) or parser
    args = parser.parse_known_args()[0] if ignore_unknown_args else parser.parse_args()
    for key, value in MEGATRON_DEFAULTS.items():
        if not hasattr(args, key):
            setattr(args, key, value)
    return args


def install_stubs() -> None:
    """Stand-ins for Megatron, SGLang, the router, transformers and ray: none is installed here."""
    _module("megatron")
    _module("megatron.training")
    _module("megatron.training.arguments", parse_args=_megatron_parse_args, validate_args=lambda args, *a: args)
    _module("megatron.training.tokenizer")
    _module("megatron.training.tokenizer.tokenizer", _vocab_size_with_padding=lambda vocab_size, _args: vocab_size)
    _module("transformers", AutoConfig=types.SimpleNamespace(from_pretrained=lambda *a, **k: None))
    _module("sglang_router")
    _module("sglang_router.launch_router", RouterArgs=object)
    _module("slime.backends.sglang_utils.arguments", sglang_parse_args=lambda *a, **k: None,
            validate_args=lambda args: args)
    _module("slime.backends.sglang_utils.external", apply_external_engine_info_to_args=lambda *a, **k: None)
    _module("slime.observability.logging_utils", configure_logger=lambda *a, **k: None)


def main(argv: list[str]) -> int:
    config, *extra = argv
    install_stubs()
    from slime.utils.arguments import parse_args  # noqa: PLC0415 - after the stubs

    sys.argv = ["train.py", "--custom-config-path", config, "--num-rollout", "10", *extra]
    args = parse_args()

    from shopsim_metrics.settings import SLIME_KNOBS, ShopsimSettings, shopsim_attributes

    out: dict = {"args": shopsim_attributes(args), "knobs": {k: getattr(args, k, None) for k in SLIME_KNOBS},
                 "save": getattr(args, "save", None)}
    try:
        out["settings"] = asdict(ShopsimSettings.from_args(args))
    except ValueError as exc:
        out["error"] = str(exc)
    else:
        out["monitor"] = monitor_location(args)
    print(json.dumps(out))
    return 0


def monitor_location(args: argparse.Namespace) -> dict[str, str]:
    """The run directory of the monitor slime's process creates from ``args`` and the file its JSONL sink
    writes the records to (nothing is written: the monitor is shut down before its first step)."""
    from shopsim_metrics.sinks.jsonl import JsonlSink
    from shopsimrl.slime_runtime import get_runtime, reset_runtime

    runtime = get_runtime(args)
    try:
        [jsonl] = [sink for sink in runtime.sinks.sinks if isinstance(sink, JsonlSink)]
        return {"run_dir": runtime.run_dir, "records": str(jsonl.path)}
    finally:
        reset_runtime()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
