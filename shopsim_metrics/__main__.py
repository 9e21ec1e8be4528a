"""``python -m shopsim_metrics ...`` is the ``shopsim-metrics`` command (for environments without its script)."""

import sys

from shopsim_metrics.cli import main

sys.exit(main())
