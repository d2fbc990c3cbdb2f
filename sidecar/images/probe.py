"""Width, height and format of one image, read from its header bytes only.

The public probe: one entry point per way a client sends an image (raw bytes, base64, a data
URL, a file), each wrapping it in a ``byte_sources`` reader and handing that to the
``headers`` dispatch, then applying the orientation and the pixel limit.

Invariants:

* Pixel data is never decoded, and a base64 payload is decoded only where header bytes lie:
  a few KB from its start, plus small windows further on when a header points there (the
  byte sources decode on demand, widening their cached prefix geometrically).
* The size is the one vLLM's processor sees: frame 0 of an animation, after
  ``ImageOps.exif_transpose`` (EXIF orientations 5 to 8 swap width and height).
* Every failure is an ``ImageError`` whose message tells the client what to fix; Pillow's
  exceptions, warnings and ``DecompressionBombError`` never escape.
* Only the header is checked: data cut short inside its pixels still probes (vLLM fails on it
  later), and ``probe_bytes`` works on a prefix, raising ``TruncatedImageError`` until the
  prefix holds the whole header.
* ``max_image_pixels`` is ours, checked on the header's size; Pillow's global
  ``MAX_IMAGE_PIXELS`` is left alone (see ``headers.pillow``).

JPEG, PNG, GIF, WebP and AVIF headers are read by hand-written parsers; every other format
vLLM 0.33 opens (BMP, TIFF, ICO, PSD, JPEG 2000, TGA, PPM, QOI, ...) and anything the parsers
find unusual is opened lazily by Pillow itself, over the same on-demand source (``headers``).

Known difference from vLLM: a PNG ``eXIf`` chunk placed after the pixel data is not seen
(vLLM's ``exif_transpose`` finds it only after loading the pixels).

``split_data_uri``, ``validate_base64`` (from ``data_uri``) and ``SUPPORTED_FORMATS`` (from
``headers``) are re-exported here for existing importers.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from sidecar.errors import EmptyImageError, ImageTooLargeError, NotAnImageError
from sidecar.images import headers
from sidecar.images.byte_sources import Base64Source, BytesSource, FileSource
from sidecar.images.data_uri import (
    byte_view,
    data_uri_payload_start,
    split_data_uri,
    validate_base64,
)
from sidecar.images.headers import SUPPORTED_FORMATS
from sidecar.images.headers.contract import ByteSource, StoredHeader
from sidecar.settings import VLLM_MAX_IMAGE_PIXELS

__all__ = [
    "DEFAULT_MAX_IMAGE_PIXELS",
    "SUPPORTED_FORMATS",
    "ImageHeader",
    "probe_base64",
    "probe_bytes",
    "probe_data_uri",
    "probe_path",
    "split_data_uri",
    "validate_base64",
]

DEFAULT_MAX_IMAGE_PIXELS = VLLM_MAX_IMAGE_PIXELS


@dataclass(frozen=True, slots=True)
class ImageHeader:
    """One image's size as vLLM's processor will see it (frame 0, EXIF orientation applied)."""

    width_px: int
    height_px: int
    format: str  # Pillow's format name
    exif_orientation: int = 1  # the orientation exif_transpose applies, 1 to 8

    @property
    def pixels(self) -> int:
        """Width times height."""
        return self.width_px * self.height_px


def probe_bytes(
    data: bytes | memoryview, *, max_image_pixels: int = DEFAULT_MAX_IMAGE_PIXELS
) -> ImageHeader:
    """Header of an image held as raw bytes (``bytes``, or a view of any buffer)."""
    if isinstance(data, bytes):
        return _probe(BytesSource(data), max_image_pixels)
    with byte_view(data) as view:  # released on return, so the caller's buffer stays resizable
        return _probe(BytesSource(view), max_image_pixels)


def probe_base64(
    payload: str | bytes | memoryview, *, max_image_pixels: int = DEFAULT_MAX_IMAGE_PIXELS
) -> ImageHeader:
    """Header of a base64 image; only the parts decoded are checked for strict base64."""
    if isinstance(payload, str | bytes):
        return _probe(Base64Source(payload, 0), max_image_pixels)
    with byte_view(payload) as view:
        return _probe(Base64Source(view, 0), max_image_pixels)


def probe_data_uri(
    uri: str | bytes | memoryview, *, max_image_pixels: int = DEFAULT_MAX_IMAGE_PIXELS
) -> ImageHeader:
    """Header of a ``data:[<media type>][;params];base64,<data>`` URL, without copying it."""
    if isinstance(uri, str | bytes):
        return _probe(Base64Source(uri, data_uri_payload_start(uri)[1]), max_image_pixels)
    with byte_view(uri) as view:
        return _probe(Base64Source(view, data_uri_payload_start(view)[1]), max_image_pixels)


def probe_path(
    path: str | os.PathLike[str], *, max_image_pixels: int = DEFAULT_MAX_IMAGE_PIXELS
) -> ImageHeader:
    """Header of an image file, reading only the parts of it the header needs.

    ``OSError`` (a missing or unreadable file) is not an image error and propagates.
    """
    with open(path, "rb", buffering=0) as file:
        return _probe(FileSource(file), max_image_pixels)


def _probe(source: ByteSource, max_image_pixels: int) -> ImageHeader:
    if source.size == 0:
        raise NotAnImageError("the image data is empty")
    return _oriented(headers.read_stored_header(source), max_image_pixels)


def _oriented(stored: StoredHeader, max_image_pixels: int) -> ImageHeader:
    fmt, width, height, orientation = stored
    orientation = orientation if 1 <= orientation <= 8 else 1
    if width <= 0 or height <= 0:
        raise EmptyImageError(
            f"the {fmt} header claims a size of {width}x{height} pixels; an image needs 1x1 or more"
        )
    if width * height > max_image_pixels:
        raise ImageTooLargeError(
            f"the {fmt} image is {width}x{height} = {width * height:,} pixels, more than the "
            f"limit of {max_image_pixels:,}; downscale it before sending"
        )
    if orientation >= 5:
        return ImageHeader(height, width, fmt, orientation)
    return ImageHeader(width, height, fmt, orientation)
