"""The skip measurements: what skipping prompts saves, the same pool run without and with it (``skip_saving.py``), and
what a skip rule costs in signal against the simulator's truth (``skip_measure.py``)."""
