"""The header parser of last resort: Pillow's own plugin, opened lazily over a ``ByteSource``.

BMP, TIFF, ICO, PSD, JPEG 2000, every other format of vLLM's allow-list, and anything the
hand-written parsers find unusual, are opened here, reading only what the plugin reads
through ``SourceStream``.

Invariants:

* Nothing is decoded, and no frame or layer is visited: the size is the plugin's ``size``
  after its ``_open``, and the frame count is left unknown (a PSD's layer block, or a TIFF's
  frame list, may be corrupt while the image vLLM decodes is fine).
  ICO is the exception to "the plugin's ``size``": ``IcoImageFile._open`` decodes its icon, so
  the icon's own header is read instead (``_ico_header``).
* A known format's plugin class is called directly on the stream, so Pillow's global
  ``MAX_IMAGE_PIXELS`` is left alone; bytes with no signature of ours go through
  ``Image.open(formats=ALLOWED_IMAGE_FORMATS)``, the call vLLM makes, whose bomb check raises
  only far above the probe's own limit. A ``DecompressionBombError`` becomes
  ``ImageTooLargeError``.
* Every failure is an ``ImageError``: Pillow's exceptions never escape, and a read that ran
  past the data makes it a ``TruncatedImageError``.
* Pillow's warnings are muted around Pillow calls with ``warnings.catch_warnings``, which is
  process-wide: a warning another thread raises at that moment is muted too.
* The size is returned as stored, before orientation, like every parser's: Pillow's TIFF
  plugin turns its size by the EXIF tag itself, so that turn is undone here.
"""

from __future__ import annotations

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
    UnidentifiedImageError,
    WebPImagePlugin,
)

from sidecar.errors import ImageError, ImageTooLargeError, NotAnImageError, TruncatedImageError
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

    def peek_start(self) -> bytes:
        """The first bytes of the source, for messages."""
        return self._source.read(0, 8)

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
    "PSD": PsdImagePlugin.PsdImageFile,
    "JPEG2000": Jpeg2KImagePlugin.Jpeg2KImageFile,
}
# vLLM 0.33's ``vllm.multimodal.image.ALLOWED_IMAGE_FORMATS``: what its ``Image.open`` tries.
ALLOWED_IMAGE_FORMATS: tuple[str, ...] = (
    "AVIF", "BLP", "BMP", "CUR", "DCX", "DDS", "DIB", "FITS", "FLI", "FTEX", "GBR", "GIF",
    "ICNS", "ICO", "IM", "IMT", "IPTC", "JPEG", "JPEG2000", "MCIDAS", "MSP", "PCD", "PCX",
    "PIXAR", "PNG", "PPM", "PSD", "QOI", "SGI", "SPIDER", "SUN", "TGA", "TIFF", "WEBP", "XBM",
    "XPM", "XVTHUMB",
)  # fmt: skip


def pillow_header(kind: str, source: ByteSource) -> StoredHeader:
    """Open with Pillow's plugin over the on-demand source; nothing is decoded. ``kind`` is a
    format told by its signature, or ``PILLOW``: let Pillow sniff, as vLLM does."""
    stream = SourceStream(source)
    try:
        with warnings.catch_warnings(action="ignore"):
            if kind == "ICO":
                return _ico_header(stream)
            opener = _PILLOW_OPENERS.get(kind)
            if opener is None:
                return _stored(_open_allowed(stream))
            return _stored(opener(cast(IO[bytes], stream)))
    except ImageError:
        raise
    except Image.DecompressionBombError as exc:
        named = "image" if kind not in _PILLOW_OPENERS else f"{kind} image"
        raise ImageTooLargeError(f"the {named} exceeds Pillow's size limit: {exc}") from exc
    except Exception as exc:  # a corrupt header raises almost anything inside a plugin
        raise _unreadable(kind, exc, truncated=stream.hit_end) from exc


def _ico_header(stream: SourceStream) -> StoredHeader:
    """An ICO's size without ``IcoImageFile``, whose ``_open`` decodes the icon it picks.

    The icon is the one ``IcoImageFile`` picks (the first of ``IcoFile``'s sorted directory),
    and its size is the one ``IcoImageFile`` adopts on loading it: its PNG's, or its DIB's
    with half the height (the DIB holds the AND mask's rows too), as ``IcoFile.frame`` reads
    it, not the directory's. Pillow's bomb check on the icon is kept; no EXIF reaches vLLM.
    """
    icon = IcoImagePlugin.IcoFile(cast(IO[bytes], stream)).entry[0]
    stream.seek(icon.offset)
    is_png = stream.read(8) == PngImagePlugin._MAGIC
    stream.seek(icon.offset)
    if is_png:
        frame: ImageFile.ImageFile = PngImagePlugin.PngImageFile(cast(IO[bytes], stream))
        width, height = frame.size
    else:
        frame = BmpImagePlugin.DibImageFile(cast(IO[bytes], stream))
        width, height = frame.size[0], int(frame.size[1] / 2)
    Image._decompression_bomb_check(frame.size)
    return StoredHeader("ICO", width, height, 1)


def _open_allowed(stream: SourceStream) -> ImageFile.ImageFile:
    """``Image.open`` limited to vLLM's formats; NotAnImageError when none accepts the bytes."""
    try:
        image = Image.open(cast(IO[bytes], stream), formats=ALLOWED_IMAGE_FORMATS)
    except UnidentifiedImageError:
        head = stream.peek_start()
        raise NotAnImageError(
            "the data is not an image in a format vLLM opens "
            f"({', '.join(ALLOWED_IMAGE_FORMATS)}); it starts {head!r}"
        ) from None
    if not isinstance(image, ImageFile.ImageFile):
        raise NotAnImageError(f"{image.format} is not an image file format vLLM opens")
    return image


_ORIENTATIONS = {value: value for value in range(1, 9)}


def _stored(image: ImageFile.ImageFile) -> StoredHeader:
    """Size, frames and orientation of a lazily opened image."""
    fmt = image.format or "unknown"
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
    return StoredHeader(fmt, width, height, orientation)


def _unreadable(kind: str, exc: Exception, *, truncated: bool) -> ImageError:
    if truncated or "truncat" in str(exc).lower():
        return TruncatedImageError(f"the {kind} image is truncated before its header ends ({exc})")
    return NotAnImageError(f"the {kind} header is corrupt and cannot be read ({exc})")
