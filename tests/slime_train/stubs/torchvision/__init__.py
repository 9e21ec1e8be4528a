"""Import-only stand-in for torchvision (the harness venv has the CPU torch; PyPI's torchvision links
CUDA). SGLang imports a few names at import time and never calls them in slime's rollout-only path:
calling one raises."""

__version__ = "0.0.0+harness-stub"


def _unavailable(*args, **kwargs):
    raise RuntimeError("torchvision is a stand-in in the slime harness venv (tests/slime_train/stubs)")
