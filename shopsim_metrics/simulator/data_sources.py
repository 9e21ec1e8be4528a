"""The data source the simulated loop asks for each wave, as slime asks its ``--data-source-path``.

When a :class:`~shopsim_metrics.simulator.config.SimConfig` skips prompts or sizes its waves
(``prompt_skip`` other than ``off``, ``wave_size: adaptive``), the loop asks the project's real data
source (:class:`shopsim_metrics.prompts.data_source.PromptSkipDataSource`, the class slime loads as
``shopsimrl.data_source.PromptSkipDataSource``) for every wave, reporting to the process's monitor, and
submits as many groups as it
served: the same class decides the waves in a simulated run and in training. It wraps a stand-in for
slime's default data source: the prompt pool's (:class:`~shopsim_metrics.simulator.epochs.PoolDataSource`)
or, for sources without prompts, :class:`CountingDataSource`.

Example:
    >>> from shopsim_metrics.simulator.config import SimConfig
    >>> source = project_data_source(SimConfig(wave_size="adaptive", zero_std_rate=0.3), CountingDataSource())
    >>> type(source).__name__, source.wave_size, len(source.get_samples(40))   # no step closed yet: as asked, at most the cap (32)
    ('PromptSkipDataSource', 'adaptive', 32)
"""

from __future__ import annotations

from typing import Any

from shopsim_metrics.monitor import get_runtime
from shopsim_metrics.prompts.data_source import PromptSkipDataSource
from shopsim_metrics.simulator.samples import SimSample


class CountingDataSource:
    """slime's default data source for sources whose groups carry no prompt: one sample per group, a running ``group_index``."""

    def __init__(self) -> None:
        self.group_index = 0

    def get_samples(self, num_samples: int) -> list[list[SimSample]]:
        groups = [[SimSample(group_index=self.group_index + k, prompt=f"prompt {self.group_index + k}")]
                  for k in range(num_samples)]
        self.group_index += num_samples
        return groups

    def __len__(self) -> int:
        return 0


def project_data_source(config: Any, inner: Any) -> Any:
    """The project's data source for ``config``'s settings, wrapped around ``inner``."""
    return PromptSkipDataSource(config.to_args(), inner=inner, monitor_of=get_runtime)
