"""Images for the header parsers' tests, and Pillow's reading of them as the oracle."""

from __future__ import annotations

import io
import struct
from typing import Any

from PIL import Image

from sidecar.images.byte_sources import BytesSource
from sidecar.images.headers.contract import StoredHeader

ORIENTATION_TAG = 0x0112


def scene(width: int, height: int, mode: str = "RGB") -> Image.Image:
    """A deterministic picture with a gradient in every channel."""
    ramp = Image.linear_gradient("L").resize((width, height))
    ring = Image.radial_gradient("L").resize((width, height))
    rgb = Image.merge("RGB", (ramp, ring, ramp.transpose(Image.Transpose.FLIP_LEFT_RIGHT)))
    if mode == "RGBA":
        rgba = rgb.convert("RGBA")
        rgba.putalpha(ring)
        return rgba
    return rgb if mode == "RGB" else rgb.convert(mode)


def encode(image: Image.Image, fmt: str, **params: Any) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, fmt, **params)
    return buffer.getvalue()


def frames(fmt: str, count: int, width: int = 48, height: int = 32, **params: Any) -> bytes:
    """An animation (or multi-page file) of ``count`` different frames."""
    mode = "P" if fmt == "GIF" else "RGB"
    pictures = [scene(width, height, mode).rotate(90 * i) for i in range(count)]
    return encode(pictures[0], fmt, save_all=True, append_images=pictures[1:], **params)


def exif(orientation: int) -> bytes:
    """An EXIF block (``Exif\\0\\0`` and a TIFF header) holding only the orientation."""
    block = Image.Exif()
    block[ORIENTATION_TAG] = orientation
    return block.tobytes()


def tiff_orientation(orientation: int, byte_order: str = "<") -> bytes:
    """A bare TIFF header and IFD0 with one Orientation entry, in either byte order."""
    mark = b"II" if byte_order == "<" else b"MM"
    entry = struct.pack(f"{byte_order}HHIHH", ORIENTATION_TAG, 3, 1, orientation, 0)
    return (
        mark
        + struct.pack(f"{byte_order}HI", 42, 8)
        + struct.pack(f"{byte_order}H", 1)
        + entry
        + struct.pack(f"{byte_order}I", 0)
    )


def xmp(orientation: int) -> bytes:
    return (
        b'<x:xmpmeta xmlns:x="adobe:ns:meta/"><rdf:RDF><rdf:Description '
        b'tiff:Orientation="%d"/></rdf:RDF></x:xmpmeta>' % orientation
    )


def pillow_stored(raw: bytes) -> StoredHeader:
    """What Pillow reads from frame 0 before any pixel: format, stored size, orientation."""
    with Image.open(io.BytesIO(raw)) as image:
        orientation = int(image.getexif().get(ORIENTATION_TAG, 1))
        return StoredHeader(str(image.format), image.width, image.height, orientation)


class CountingSource(BytesSource):
    """Raw bytes that remember which ranges a parser read."""

    def __init__(self, data: bytes) -> None:
        super().__init__(data)
        self.reads: list[tuple[int, int]] = []

    def read(self, offset: int, length: int) -> bytes:
        self.reads.append((offset, length))
        return super().read(offset, length)

    @property
    def furthest_byte(self) -> int:
        """One past the last byte any read asked for."""
        return max(offset + length for offset, length in self.reads)
