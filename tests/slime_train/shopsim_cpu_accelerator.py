"""A CPU backend for slime's accelerator registry, so slime's driver starts on a machine without GPUs.

slime picks its accelerator from a registry (``slime.utils.accelerator.register_accelerator``) and
refuses to start when no registered backend is available. This module adds a lowest-priority
``cpu`` backend the moment ``slime.utils.accelerator`` is first imported, in every process of the
test venv (the driver and every Ray worker), through an import hook that ``setup_env.sh`` installs
with a ``.pth`` file::

    import shopsim_cpu_accelerator; shopsim_cpu_accelerator.install()

Nothing is imported until slime imports its accelerator module, so other programs of the venv pay
nothing. Only what slime's rollout-only path touches is implemented; memory figures are zeros.
"""

from __future__ import annotations

import importlib.abc
import importlib.util
import sys

WATCHED = "slime.utils.accelerator"


def _cpu_backend_class():
    import torch
    from slime.utils.accelerator.base import Accelerator

    class CPUAccelerator(Accelerator):
        name = "cpu"
        device_type = "cpu"
        communication_backend_name = "gloo"

        def is_available(self) -> bool:
            return True

        def device(self, index=None):
            return torch.device("cpu")

        def device_name(self, index=None) -> str:
            return "cpu"

        def set_device(self, index) -> None:
            return None

        def current_device(self):
            return 0

        def device_count(self) -> int:
            return 1

        def synchronize(self, device=None) -> None:
            return None

        def current_stream(self, device=None):
            return None

        def empty_cache(self) -> None:
            return None

        def mem_get_info(self, device=None) -> tuple[int, int]:
            return (0, 0)

        def memory_allocated(self, device=None) -> int:
            return 0

        def memory_reserved(self, device=None) -> int:
            return 0

        def distributed_device_id(self, index=None):
            return None

    return CPUAccelerator


def register(module) -> None:
    """Register the ``cpu`` backend in an imported ``slime.utils.accelerator`` module."""
    cls = _cpu_backend_class()
    module.register_accelerator("cpu", cls, lambda: True, priority=-1000, communication_backends=("gloo",))


class _Loader(importlib.abc.Loader):
    def __init__(self, inner):
        self.inner = inner

    def create_module(self, spec):
        return self.inner.create_module(spec)

    def exec_module(self, module):
        self.inner.exec_module(module)
        register(module)


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path, target=None):
        if fullname != WATCHED:
            return None
        sys.meta_path.remove(self)  # find the real module with the other finders, once
        try:
            spec = importlib.util.find_spec(fullname)
        finally:
            sys.meta_path.insert(0, self)
        if spec is None or spec.loader is None:
            return None
        spec.loader = _Loader(spec.loader)
        return spec


def install() -> None:
    """Watch for ``slime.utils.accelerator`` (idempotent); register at once if it is already imported."""
    if WATCHED in sys.modules:
        register(sys.modules[WATCHED])
        return
    if not any(isinstance(finder, _Finder) for finder in sys.meta_path):
        sys.meta_path.insert(0, _Finder())
