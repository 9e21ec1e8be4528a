"""shopsimrl: the hooks slime loads by dotted path (see :mod:`shopsimrl.slime_runtime`)."""
