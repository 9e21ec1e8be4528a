"""Stand-in for ``torchvision.transforms.v2`` (see the package docstring)."""
