"""Stand-in for ``torchvision.transforms.v2.functional`` (see the package docstring)."""

from torchvision import _unavailable


def __getattr__(name):
    if name.startswith("__"):
        raise AttributeError(name)
    return _unavailable
