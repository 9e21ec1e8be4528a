"""``shopsim-metrics replay``: what skipping and adaptive waves would have saved on a run's recorded outcomes.

- :mod:`.trace` - recorded per-prompt outcomes (a JSON trace, or the project's records) and training time;
- :mod:`.source` - the simulator's group source that serves a draw its prompt's recorded outcome;
- :mod:`.measure` - one replay per rule and wave size, pooled over seeds, with the lost signal;
- :mod:`.command` - the ``replay`` subcommand.
"""
