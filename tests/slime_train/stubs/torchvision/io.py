"""Stand-in for ``torchvision.io`` (see the package docstring)."""

from torchvision import _unavailable

decode_jpeg = decode_image = read_image = encode_jpeg = _unavailable


class ImageReadMode:
    UNCHANGED = 0
    GRAY = 1
    RGB = 3
