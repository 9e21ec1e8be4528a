"""shopsimrl: the hooks slime (or miles, slime's production fork) loads by dotted path (see :mod:`shopsimrl.slime_runtime`).

:data:`LOOP` is the loop that loads them, decided once, as the package is imported, before either framework is
imported by the package itself (:func:`shopsim_metrics.settings.loops.detect_loop`; both in one process is refused
with one line).
"""

from shopsim_metrics.settings.loops import detect_loop

LOOP: str = detect_loop()
"""``"slime"``, ``"miles"`` or ``"none"`` (the simulator, tests, notebooks)."""
