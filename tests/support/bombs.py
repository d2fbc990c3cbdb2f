"""Image bombs, and tripwires on Pillow's pixel allocators, for the bomb tests.

Each bomb (``fuzz.images.BOMBS``) is a real file whose header was patched to claim gigapixels:
a decoder that trusted it would allocate gigabytes. ``forbid_pixels`` replaces Pillow's
allocators (``Image.core.new``, ``Image.core.fill``) and every ``load`` by tripwires that raise a
``BaseException`` nothing may swallow; ``record_pixel_buffers`` notes the size of each buffer.
"""

from __future__ import annotations

import base64
from collections.abc import Callable
from typing import Any

import pytest
from PIL import Image, ImageFile

from fuzz.images import BOMBS

BOMB_BYTES = {name: make() for name, make in BOMBS.items()}  # built before any tripwire is set


class PixelsAllocated(BaseException):
    """Raised by a tripwire: something asked Pillow for pixels. Not an ``Exception``, so no
    ``except Exception`` on the way can turn it into an image error."""


def data_uri_bytes(raw: bytes, media_type: str = "image/png") -> bytes:
    """A data URI as bytes, the form the proxy hands the probe (a slice of the body)."""
    return b"data:%s;base64,%s" % (media_type.encode(), base64.b64encode(raw))


def forbid_pixels(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make any pixel allocation or decode raise ``PixelsAllocated`` (until the test ends)."""

    def tripwire(*args: Any, **kwargs: Any) -> Any:
        raise PixelsAllocated(args[:2])

    monkeypatch.setattr(Image.core, "new", tripwire)
    monkeypatch.setattr(Image.core, "fill", tripwire)
    monkeypatch.setattr(Image.Image, "load", tripwire)
    monkeypatch.setattr(ImageFile.ImageFile, "load", tripwire)


def record_pixel_buffers(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, int]]:
    """The size of every pixel buffer Pillow allocates from Python from now until the test ends."""
    sizes: list[tuple[int, int]] = []
    new, fill = Image.core.new, Image.core.fill

    def recording(allocate: Callable[..., Any]) -> Callable[..., Any]:
        def allocate_and_record(mode: str, size: tuple[int, int], *args: Any) -> Any:
            sizes.append(tuple(size))  # type: ignore[arg-type]
            return allocate(mode, size, *args)

        return allocate_and_record

    monkeypatch.setattr(Image.core, "new", recording(new))
    monkeypatch.setattr(Image.core, "fill", recording(fill))
    return sizes
