"""The header parser of last resort: Pillow's own plugin, opened lazily over a ``ByteSource``.

BMP, TIFF, HEIF, ICO, PSD, JPEG 2000, and anything the hand-written parsers find unusual,
are opened here, reading only what the plugin reads through ``SourceStream``.

Invariants:

* Nothing is decoded: a plugin class is called directly on the stream, so Pillow's global
  ``MAX_IMAGE_PIXELS`` is left alone and its bomb check never runs (``max_image_pixels`` is
  the probe's). A ``DecompressionBombError`` from inside a plugin becomes
  ``ImageTooLargeError``.
* Every failure is an ``ImageError``: Pillow's exceptions never escape, and a read that ran
  past the data makes it a ``TruncatedImageError``.
* pillow-heif's opener is registered with Pillow once, when the first HEIF image arrives;
  libheif reads from a prefix grown x4 until it holds the header.
* Pillow's warnings are muted around Pillow calls with ``warnings.catch_warnings``, which is
  process-wide: a warning another thread raises at that moment is muted too.
* The size is returned as stored, before orientation, like every parser's: Pillow's TIFF
  plugin turns its size by the EXIF tag itself, so that turn is undone here.
"""

from __future__ import annotations

import functools
import io
import warnings
from collections.abc import Callable
from typing import IO, cast

from PIL import (
    AvifImagePlugin,
    BmpImagePlugin,
    GifImagePlugin,
    IcoImagePlugin,
    Image,
    ImageFile,
    Jpeg2KImagePlugin,
    JpegImagePlugin,
    PngImagePlugin,
    PsdImagePlugin,
    TiffImagePlugin,
    WebPImagePlugin,
)

from sidecar.errors import ImageError, ImageTooLargeError, NotAnImageError, TruncatedImageError
from sidecar.images.headers.avif import boxes_fit
from sidecar.images.headers.contract import ByteSource, StoredHeader

_BYTEWISE_READ = 2  # Pillow walks JPEG and GIF headers in reads this small: serve them in chunks
_STREAM_CHUNK_BYTES = 4096


class SourceStream(io.RawIOBase):
    """A read-only file over a ``ByteSource``, for Pillow; notes whether a read ran short."""

    def __init__(self, source: ByteSource) -> None:
        super().__init__()
        self._source = source
        self._pos = 0
        self._chunk = b""
        self._chunk_at = 0
        self.hit_end = False

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = (0, self._pos, self._source.size)[whence]
        self._pos = max(0, base + offset)
        return self._pos

    def read(self, size: int | None = -1) -> bytes:
        if size is None or size < 0:
            size = max(0, self._source.size - self._pos)
        at = self._pos - self._chunk_at
        if size > _BYTEWISE_READ:
            data = self._source.read(self._pos, size)
        elif at >= 0 and at + size <= len(self._chunk):
            data = self._chunk[at : at + size]
        else:
            self._chunk_at = self._pos
            self._chunk = self._source.read(self._pos, _STREAM_CHUNK_BYTES)
            data = self._chunk[:size]
        self.hit_end |= len(data) < size
        self._pos += len(data)
        return data


_PILLOW_OPENERS: dict[str, Callable[[IO[bytes]], ImageFile.ImageFile]] = {
    "JPEG": JpegImagePlugin.jpeg_factory,
    "PNG": PngImagePlugin.PngImageFile,
    "GIF": GifImagePlugin.GifImageFile,
    "WEBP": WebPImagePlugin.WebPImageFile,
    "AVIF": AvifImagePlugin.AvifImageFile,
    "BMP": BmpImagePlugin.BmpImageFile,
    "TIFF": TiffImagePlugin.TiffImageFile,
    "ICO": IcoImagePlugin.IcoImageFile,
    "PSD": PsdImagePlugin.PsdImageFile,
    "JPEG2000": Jpeg2KImagePlugin.Jpeg2KImageFile,
}
_HEIF_PREFIX_BYTES = 4096  # libheif reads a HEIF header from a prefix; grown 4x until it does


def pillow_header(kind: str, source: ByteSource) -> StoredHeader:
    """Open with Pillow's plugin over the on-demand source; nothing is decoded."""
    stream = SourceStream(source)
    try:
        with warnings.catch_warnings(action="ignore"):
            return _stored(_PILLOW_OPENERS[kind](cast(IO[bytes], stream)))
    except ImageError:
        raise
    except Image.DecompressionBombError as exc:
        raise ImageTooLargeError(f"the {kind} image exceeds Pillow's size limit: {exc}") from exc
    except Exception as exc:  # a corrupt header raises almost anything inside a plugin
        raise _unreadable(kind, exc, truncated=stream.hit_end) from exc


def heif_header(source: ByteSource) -> StoredHeader:
    """Open with pillow-heif from a prefix that grows until libheif can read the header."""
    try:
        opener = _heif_opener()
    except ImportError as exc:
        raise NotAnImageError("HEIF images cannot be read: pillow-heif is not installed") from exc
    length = _HEIF_PREFIX_BYTES
    while True:
        prefix = source.read(0, length)
        try:
            with warnings.catch_warnings(action="ignore"):
                return _stored(opener(io.BytesIO(prefix)))
        except ImageError:
            raise
        except Exception as exc:  # libheif reports every failure the same way
            if len(prefix) < source.size:
                length *= 4
                continue
            raise _unreadable("HEIF", exc, truncated=not boxes_fit(source)) from exc


@functools.cache
def _heif_opener() -> Callable[[IO[bytes]], ImageFile.ImageFile]:
    import pillow_heif  # here, not at the top: libheif loads only once a HEIF image arrives

    pillow_heif.register_heif_opener()
    opener: Callable[[IO[bytes]], ImageFile.ImageFile] = pillow_heif.HeifImageFile
    return opener


_NO_CHEAP_FRAME_COUNT = frozenset(("GIF", "TIFF"))  # their n_frames walks the whole file
_ORIENTATIONS = {value: value for value in range(1, 9)}


def _stored(image: ImageFile.ImageFile) -> StoredHeader:
    """Size, frames and orientation of a lazily opened image."""
    fmt = image.format or "unknown"
    frames = None if fmt in _NO_CHEAP_FRAME_COUNT else int(getattr(image, "n_frames", 1))
    try:
        # The base method: PngImageFile.getexif would load the pixels to look after IDAT.
        orientation = _ORIENTATIONS.get(Image.Image.getexif(image).get(0x0112, 1), 1)
    except Exception:  # vLLM suppresses any error of exif_transpose, and keeps the size
        orientation = 1
    width, height = image.size
    if isinstance(image, TiffImagePlugin.TiffImageFile) and image.tag_v2.get(0x0112) in (
        5,
        6,
        7,
        8,
    ):
        width, height = height, width  # Pillow's TIFF plugin turns the size by the EXIF tag itself
    return StoredHeader(fmt, width, height, frames, orientation)


def _unreadable(kind: str, exc: Exception, *, truncated: bool) -> ImageError:
    if truncated or "truncat" in str(exc).lower():
        return TruncatedImageError(f"the {kind} image is truncated before its header ends ({exc})")
    return NotAnImageError(f"the {kind} header is corrupt and cannot be read ({exc})")
