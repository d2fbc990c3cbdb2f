"""Width, height, format and frame count of one image, read from its header bytes only.

Invariants:

* Pixel data is never decoded, and a base64 payload is decoded only where header bytes lie:
  a few KB from its start, plus small windows further on when a header points there (the
  byte sources below decode on demand, widening their cached prefix geometrically).
* The size is the one vLLM's processor sees: frame 0 of an animation, after
  ``ImageOps.exif_transpose`` (EXIF orientations 5 to 8 swap width and height).
* Every failure is an ``ImageError`` whose message tells the client what to fix; Pillow's
  exceptions, warnings and ``DecompressionBombError`` never escape.
* Only the header is checked: data cut short inside its pixels still probes (vLLM fails on it
  later), and ``probe_bytes`` works on a prefix, raising ``TruncatedImageError`` until the
  prefix holds the whole header.

JPEG, PNG, GIF, WebP and AVIF headers are read by ``header_parsers``; BMP, TIFF, HEIF, ICO,
PSD, JPEG 2000 and anything the parsers find unusual are opened lazily by Pillow itself, over
the same on-demand source. Pillow's global ``MAX_IMAGE_PIXELS`` is left alone: the plugin
classes are called directly, so its bomb check never runs, and ``max_image_pixels`` is ours.
pillow-heif's opener is registered with Pillow once, when the first HEIF image arrives.
Pillow's warnings are muted around Pillow calls with ``warnings.catch_warnings``, which is
process-wide: a warning another thread raises at that moment is muted too.

Known difference from vLLM: a PNG ``eXIf`` chunk placed after the pixel data is not seen
(vLLM's ``exif_transpose`` finds it only after loading the pixels).
"""

from __future__ import annotations

import binascii
import functools
import io
import os
import struct
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import IO, cast, overload

import pybase64
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

from sidecar.errors import (
    EmptyImageError,
    ImageError,
    ImageTooLargeError,
    NotAnImageError,
    NotBase64Error,
    TruncatedImageError,
)
from sidecar.images import header_parsers as hp

DEFAULT_MAX_IMAGE_PIXELS = 178_956_970  # Pillow's bomb limit (2 x MAX_IMAGE_PIXELS) = vLLM's
SUPPORTED_FORMATS = "JPEG, PNG, WebP, GIF, BMP, TIFF, AVIF, HEIF, ICO, PSD or JPEG 2000"


@dataclass(frozen=True, slots=True)
class ImageHeader:
    """One image's size as vLLM's processor will see it (frame 0, EXIF orientation applied)."""

    width_px: int
    height_px: int
    format: str  # Pillow's format name
    frame_count: int | None  # None where counting frames means reading the whole file
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
        return _probe(_BytesSource(data), max_image_pixels)
    with _byte_view(data) as view:  # released on return, so the caller's buffer stays resizable
        return _probe(_BytesSource(view), max_image_pixels)


def probe_base64(
    payload: str | bytes | memoryview, *, max_image_pixels: int = DEFAULT_MAX_IMAGE_PIXELS
) -> ImageHeader:
    """Header of a base64 image; only the parts decoded are checked for strict base64."""
    if isinstance(payload, str | bytes):
        return _probe(_Base64Source(payload, 0), max_image_pixels)
    with _byte_view(payload) as view:
        return _probe(_Base64Source(view, 0), max_image_pixels)


def probe_data_uri(
    uri: str | bytes | memoryview, *, max_image_pixels: int = DEFAULT_MAX_IMAGE_PIXELS
) -> ImageHeader:
    """Header of a ``data:[<media type>][;params];base64,<data>`` URL, without copying it."""
    if isinstance(uri, str | bytes):
        return _probe(_Base64Source(uri, _data_uri_payload_start(uri)[1]), max_image_pixels)
    with _byte_view(uri) as view:
        return _probe(_Base64Source(view, _data_uri_payload_start(view)[1]), max_image_pixels)


def probe_path(
    path: str | os.PathLike[str], *, max_image_pixels: int = DEFAULT_MAX_IMAGE_PIXELS
) -> ImageHeader:
    """Header of an image file, reading only the parts of it the header needs.

    ``OSError`` (a missing or unreadable file) is not an image error and propagates.
    """
    with open(path, "rb", buffering=0) as file:
        return _probe(_FileSource(file), max_image_pixels)


@overload
def split_data_uri(uri: str) -> tuple[str, str]: ...
@overload
def split_data_uri(uri: bytes | memoryview) -> tuple[str, memoryview]: ...
def split_data_uri(uri: str | bytes | memoryview) -> tuple[str, str | memoryview]:
    """(media type, base64 payload) of a data URL; the payload of bytes is a zero-copy view.

    As vLLM: ``data:`` in any case, split at the first comma, the last ``;param`` must be
    ``base64``, the media type is not checked.
    """
    media_type, start = _data_uri_payload_start(uri)
    if isinstance(uri, str):
        return media_type, uri[start:]
    return media_type, _byte_view(uri)[start:]


_ALPHABET = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
_VALIDATE_CHUNK = 1 << 18  # cache-sized pieces make bytes.translate about twice as fast


def validate_base64(payload: str | bytes | memoryview) -> None:
    """Raise ``NotBase64Error`` unless the whole payload is what vLLM's strict decoder accepts.

    That is ``pybase64.b64decode(payload, validate=True)``, the very call vLLM makes: only the
    base64 alphabet, a length that is a multiple of 4, and ``=`` padding only at the end.
    pybase64's SIMD decoder checks about 30 GB/s; the slower scan below only runs to explain
    a refusal (which character, where).
    """
    try:
        pybase64.b64decode(payload, validate=True)
    except (binascii.Error, ValueError):
        pass
    else:
        return
    if isinstance(payload, str):
        if not payload.isascii():
            at = next(i for i, char in enumerate(payload) if not char.isascii())
            raise _bad_char(at, payload[at])
        _validate(payload)
    else:
        with _byte_view(payload) as view:
            _validate(view)


def _validate(view: str | memoryview) -> None:
    length = len(view)
    if length % 4:
        raise _short_base64()
    body_end = max(0, length - 2)
    for start in range(0, body_end, _VALIDATE_CHUNK):
        chunk = _ascii_bytes(view[start : min(start + _VALIDATE_CHUNK, body_end)])
        stray = chunk.translate(None, _ALPHABET)
        if stray:
            at = chunk.find(stray[:1])
            raise _bad_char(start + at, chr(stray[0]))
    tail = _ascii_bytes(view[body_end:]).rstrip(b"=")  # the last two characters
    stray = tail.translate(None, _ALPHABET)
    if stray:
        raise _bad_char(body_end + tail.find(stray[:1]), chr(stray[0]))
    raise NotBase64Error("the image data is not valid base64: its '=' padding is misplaced")


def _short_base64() -> NotBase64Error:
    return NotBase64Error(
        "the base64 image data is not a multiple of 4 characters long: "
        "it is cut short or its '=' padding is missing"
    )


def _bad_char(at: int, char: str) -> NotBase64Error:
    return NotBase64Error(
        f"the image data is not strict base64: character {at} is {char!r}; send standard "
        "base64 (A-Z, a-z, 0-9, +, /) without line breaks or spaces, '=' only as final padding"
    )


def _byte_view(data: bytes | memoryview) -> memoryview:
    """A new one-dimensional byte view of ``data``, which the caller may release."""
    view = memoryview(data)
    return view if view.format == "B" and view.ndim == 1 else view.cast("B")


def _ascii_bytes(piece: str | bytes | memoryview) -> bytes:
    return piece.encode("ascii", "replace") if isinstance(piece, str) else bytes(piece)


def _data_uri_payload_start(uri: str | bytes | memoryview) -> tuple[str, int]:
    """The media type and the offset of the payload in a base64 data URL."""
    head = uri[:5] if isinstance(uri, str) else bytes(uri[:5]).decode("latin-1")
    if head.lower() != "data:":
        raise NotBase64Error("the image URL is not a data: URL")
    if isinstance(uri, str):
        comma = uri.find(",")
    else:
        comma = bytes(uri[:4096]).find(b",")
        if comma < 0:
            comma = bytes(uri).find(b",")
    if comma < 0:
        raise NotBase64Error("the data URL has no ',' between its media type and its data")
    spec = uri[5:comma] if isinstance(uri, str) else bytes(uri[5:comma]).decode("latin-1")
    media_type, semicolon, encoding = spec.rpartition(";")
    if not semicolon or encoding != "base64":
        raise NotBase64Error(
            "only base64 data URLs are supported: write 'data:<media type>;base64,<data>'"
        )
    return media_type, comma + 1


# ----------------------------------------------------------------------------- byte sources


class _BytesSource:
    """Raw bytes; a read copies only the slice asked for."""

    __slots__ = ("_data", "size")

    def __init__(self, data: bytes | memoryview) -> None:
        self._data = data
        self.size = len(data)

    def read(self, offset: int, length: int) -> bytes:
        return bytes(self._data[offset : offset + length])


_HEAD_CHARS = 2048  # the first decode: 1.5 KB, a whole header for most files without EXIF
_WINDOW_CHARS = 1368  # a read far from the start decodes at least about 1 KB around it


class _Base64Source:
    """Decodes a base64 payload on demand: a growing prefix plus one window further on."""

    __slots__ = (
        "_chars",
        "_head",
        "_payload",
        "_short_tail",
        "_start",
        "_window",
        "_window_at",
        "size",
    )

    def __init__(self, payload: str | bytes | memoryview, start: int) -> None:
        self._payload = payload
        self._start = start
        self._chars = (len(payload) - start) // 4 * 4
        self._short_tail = (len(payload) - start) % 4 != 0
        if self._short_tail and not self._chars:
            raise _short_base64()
        end = start + self._chars
        tail = _ascii_bytes(payload[end - 2 : end]) if self._chars else b""
        self.size = self._chars // 4 * 3 - (len(tail) - len(tail.rstrip(b"=")))
        self._head = b""
        self._window = b""
        self._window_at = 0

    def read(self, offset: int, length: int) -> bytes:
        stop = min(offset + length, self.size)
        if stop <= len(self._head) or offset >= stop:
            return self._head[offset:stop]
        if offset <= len(self._head):
            wanted = max(stop, 2 * len(self._head), _HEAD_CHARS // 4 * 3)
            self._head = self._decode(0, wanted)
            return self._head[offset:stop]
        at = offset - self._window_at
        if at < 0 or stop - self._window_at > len(self._window):
            self._window_at = offset // 3 * 3
            self._window = self._decode(self._window_at, max(stop, offset + _WINDOW_CHARS // 4 * 3))
            at = offset - self._window_at
        return self._window[at : at + stop - offset]

    def _decode(self, byte_start: int, byte_stop: int) -> bytes:
        first = self._start + byte_start // 3 * 4
        last = min(self._start + -(-byte_stop // 3) * 4, self._start + self._chars)
        at_end = last == self._start + self._chars
        if at_end and self._short_tail:
            raise _short_base64()
        try:
            decoded = binascii.a2b_base64(self._payload[first:last], strict_mode=True)
        except ValueError as exc:
            raise NotBase64Error(
                f"the image data is not strict base64 (between characters {first - self._start} "
                f"and {last - self._start}: {exc}); send standard base64 without line breaks "
                "or spaces, '=' only as final padding"
            ) from exc
        expected = (last - first) // 4 * 3
        if len(decoded) != expected and not (at_end and len(decoded) >= expected - 2):
            raise NotBase64Error("the image data is not strict base64: '=' before its end")
        return decoded


_FILE_HEAD_BYTES = 1 << 16  # one read covers the header of almost every file


class _FileSource:
    __slots__ = ("_file", "_head", "size")

    def __init__(self, file: IO[bytes]) -> None:
        self._file = file
        self.size = os.fstat(file.fileno()).st_size
        self._head = b""

    def read(self, offset: int, length: int) -> bytes:
        stop = offset + length
        if stop > len(self._head) and len(self._head) < self.size:
            if offset > max(len(self._head), _FILE_HEAD_BYTES):
                self._file.seek(offset)
                return self._file.read(length)
            self._file.seek(0)
            self._head = self._file.read(max(stop, 2 * len(self._head), _FILE_HEAD_BYTES))
        return self._head[offset:stop]


_BYTEWISE_READ = 2  # Pillow walks JPEG and GIF headers in reads this small: serve them in chunks
_STREAM_CHUNK_BYTES = 4096


class _SourceStream(io.RawIOBase):
    """A read-only file over a ``ByteSource``, for Pillow; notes whether a read ran short."""

    def __init__(self, source: hp.ByteSource) -> None:
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


# ----------------------------------------------------------------------------- probing


def _probe(source: hp.ByteSource, max_image_pixels: int) -> ImageHeader:
    if source.size == 0:
        raise NotAnImageError("the image data is empty")
    kind = _sniff(source.read(0, 16), source.size)
    parser = _PARSERS.get(kind)
    if kind == "ISOBMFF":
        kind, parser = _isobmff_kind(source)
    try:
        if parser is None:
            raise hp.UsePillow
        stored = parser(source)
    except (hp.UsePillow, struct.error, IndexError):  # Pillow decides anything a parser cannot
        stored = _heif_header(source) if kind == "HEIF" else _pillow_header(kind, source)
    return _oriented(stored, max_image_pixels)


def _oriented(stored: hp.StoredHeader, max_image_pixels: int) -> ImageHeader:
    fmt, width, height, frames, orientation = stored
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
        return ImageHeader(height, width, fmt, frames, orientation)
    return ImageHeader(width, height, fmt, frames, orientation)


def _sniff(head: bytes, size: int) -> str:
    for kind, signature, at in _SIGNATURES:
        if head[at : at + len(signature)] == signature and (kind != "WEBP" or _is_webp(head)):
            return kind
    if size < 16 and len(head) >= 2 and _starts_a_signature(head):
        raise TruncatedImageError(f"the image is truncated: only {size} bytes were sent")
    raise NotAnImageError(
        f"the data is not an image in a supported format ({SUPPORTED_FORMATS}); "
        f"it starts {head[:8]!r}"
    )


def _is_webp(head: bytes) -> bool:
    return head.startswith(b"RIFF") and head[12:15] == b"VP8"  # as Pillow's WebP _accept


def _starts_a_signature(head: bytes) -> bool:
    """Whether these few bytes are the start of some format's signature."""
    if head.startswith(b"RIFF") or (4 < len(head) < 8 and b"ftyp".startswith(head[4:])):
        return True
    return any(at == 0 and signature.startswith(head) for _, signature, at in _SIGNATURES)


_SIGNATURES = (
    ("JPEG", b"\xff\xd8\xff", 0),
    ("PNG", b"\x89PNG\r\n\x1a\n", 0),
    ("GIF", b"GIF87a", 0),
    ("GIF", b"GIF89a", 0),
    ("WEBP", b"WEBP", 8),
    ("ISOBMFF", b"ftyp", 4),
    ("BMP", b"BM", 0),
    *(("TIFF", prefix, 0) for prefix in TiffImagePlugin.PREFIXES),
    ("ICO", b"\x00\x00\x01\x00", 0),
    ("PSD", b"8BPS", 0),
    ("JPEG2000", b"\xff\x4f\xff\x51", 0),
    ("JPEG2000", b"\x00\x00\x00\x0cjP  \r\n\x87\n", 0),
)
_PARSERS: dict[str, Callable[[hp.ByteSource], hp.StoredHeader]] = {
    "JPEG": hp.parse_jpeg,
    "PNG": hp.parse_png,
    "GIF": hp.parse_gif,
    "WEBP": hp.parse_webp,
}
_AVIF_MAJOR_BRANDS = frozenset((b"avif", b"avis", b"mif1", b"msf1"))  # Pillow's AVIF _accept
_HEIF_MAJOR_BRANDS = frozenset(
    (b"heic", b"heix", b"heim", b"heis", b"hevc", b"hevx", b"hevm", b"hevs", b"mif1", b"msf1")
)


def _isobmff_kind(
    source: hp.ByteSource,
) -> tuple[str, Callable[[hp.ByteSource], hp.StoredHeader] | None]:
    """AVIF or HEIF, tried in the order Pillow tries its plugins."""
    major, brands, _ = hp.ftyp_brands(source)
    if major in _AVIF_MAJOR_BRANDS and brands & hp.AVIF_BRANDS:
        return "AVIF", hp.parse_avif
    if major in _HEIF_MAJOR_BRANDS:
        return "HEIF", None
    raise NotAnImageError(f"the ISO media file (brand {major!r}) is neither AVIF nor HEIF")


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


def _pillow_header(kind: str, source: hp.ByteSource) -> hp.StoredHeader:
    """Open with Pillow's plugin over the on-demand source; nothing is decoded."""
    stream = _SourceStream(source)
    try:
        with warnings.catch_warnings(action="ignore"):
            return _stored(_PILLOW_OPENERS[kind](cast(IO[bytes], stream)))
    except ImageError:
        raise
    except Image.DecompressionBombError as exc:
        raise ImageTooLargeError(f"the {kind} image exceeds Pillow's size limit: {exc}") from exc
    except Exception as exc:  # a corrupt header raises almost anything inside a plugin
        raise _unreadable(kind, exc, truncated=stream.hit_end) from exc


def _heif_header(source: hp.ByteSource) -> hp.StoredHeader:
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
            raise _unreadable("HEIF", exc, truncated=not hp.boxes_fit(source)) from exc


@functools.cache
def _heif_opener() -> Callable[[IO[bytes]], ImageFile.ImageFile]:
    import pillow_heif  # here, not at the top: libheif loads only once a HEIF image arrives

    pillow_heif.register_heif_opener()
    opener: Callable[[IO[bytes]], ImageFile.ImageFile] = pillow_heif.HeifImageFile
    return opener


_NO_CHEAP_FRAME_COUNT = frozenset(("GIF", "TIFF"))  # their n_frames walks the whole file
_ORIENTATIONS = {value: value for value in range(1, 9)}


def _stored(image: ImageFile.ImageFile) -> hp.StoredHeader:
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
    return hp.StoredHeader(fmt, width, height, frames, orientation)


def _unreadable(kind: str, exc: Exception, *, truncated: bool) -> ImageError:
    if truncated or "truncat" in str(exc).lower():
        return TruncatedImageError(f"the {kind} image is truncated before its header ends ({exc})")
    return NotAnImageError(f"the {kind} header is corrupt and cannot be read ({exc})")
