"""Print the flags of slime's own parser, one per line, to renew ``shopsim_metrics.settings.slime_flags.SLIME_FLAGS``.

    SLIME_SRC=... MEGATRON_SRC=... PYTHONPATH=$SLIME_SRC:$MEGATRON_SRC:tests/slime_train/stubs \
        /work/slime-venv/bin/python tests/slime_train/list_slime_flags.py
"""

from shopsim_metrics.settings.slime_flags import slime_parser_flags

if __name__ == "__main__":
    flags = slime_parser_flags()
    if flags is None:
        raise SystemExit("slime cannot be imported in this interpreter (see the usage above)")
    print("\n".join(sorted(flags)))
