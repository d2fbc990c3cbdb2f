"""Re-encode one image at an exact size, as cheaply as the size allows.

``downscale_image`` is the one entry point. Its output, read back the way vLLM reads images,
has exactly ``target_size``; the vision rule chose that size so that the model's processor
maps it to an exact token count. Invariants:

* ``target_size`` is in display orientation, the size after ``ImageOps.exif_transpose``. The
  orientation the source declares is applied here, once (including vLLM's quirks: an EXIF that
  Pillow cannot read means no rotation, and XMP ``tiff:Orientation`` counts), and the output
  carries no EXIF and no XMP, so nothing rotates it again. Only the ICC profile is kept.
* At most ``max_decode_pixels`` are ever decoded. A JPEG counts at the size it is decoded at:
  DCT scaling (``Image.draft``) decodes it at 1/2, 1/4 or 1/8 when that still covers the target,
  which is also what makes a photo downscale fast. The limit is checked on the size ``probe``
  reads from the header before Pillow opens anything (libwebp allocates its canvas on open),
  and again on the drafted size before the pixels are allocated.
* Formats are opened by their plugin, not ``Image.open``: the limit here replaces Pillow's own
  decompression-bomb check, which would refuse a 30000x30000 JPEG that drafts to 3750x3750.
  (GIF and TIFF still run that check while loading: it warns above 89,478,485 pixels.)
* Undecodable bytes raise ``TruncatedImageError`` or ``NotAnImageError``, never Pillow's own
  exceptions. ``ImageFile.LOAD_TRUNCATED_IMAGES`` is left alone (False).
* Synchronous, no shared state: it runs in the proxy's thread pool; Pillow drops the GIL.

Output format, by source::

    source                    output   settings
    JPEG (and MPO)            JPEG     quality ``jpeg_quality``, baseline, default subsampling
    PNG                       PNG      compress_level 1: 1.5-5x faster than 6, 5-15 % larger
    WebP lossy / lossless     WebP     quality ``jpeg_quality`` method 0 / lossless effort 0
    GIF (frame 0: vLLM's)     PNG      a palette cannot be resized; PNG keeps it lossless
    every other format        PNG      lossless sources stay lossless (BMP, TIFF, TGA, ...)
    AVIF                      JPEG     PNG when there is alpha; its encoder is 100x slower

Modes: RGB, RGBA, L and LA are kept (vLLM composites alpha on white itself, so alpha stays);
palette and other images with transparency become RGBA (LA when grey), "1" becomes L, and
everything else (CMYK, YCbCr, 16-bit and float) becomes RGB through ``convert("RGB")``, the very
call vLLM makes, so the model sees the same colours; their ICC profile is dropped with them.
"""

from __future__ import annotations

import base64
import io
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import IO

from PIL import (
    AvifImagePlugin,  # noqa: F401  (imported for its registration in Image.OPEN)
    BmpImagePlugin,  # noqa: F401
    ExifTags,
    GifImagePlugin,  # noqa: F401
    IcoImagePlugin,  # noqa: F401
    Image,
    ImageFile,
    Jpeg2KImagePlugin,  # noqa: F401
    JpegImagePlugin,
    PngImagePlugin,  # noqa: F401
    PsdImagePlugin,  # noqa: F401
    TiffImagePlugin,  # noqa: F401
    WebPImagePlugin,  # noqa: F401
)

from sidecar.errors import ImageError, ImageTooLargeError, NotAnImageError, TruncatedImageError
from sidecar.images.headers.pillow import ALLOWED_IMAGE_FORMATS
from sidecar.images.probe import DEFAULT_MAX_IMAGE_PIXELS, probe_bytes

PNG_COMPRESS_LEVEL = 1
RESAMPLE = Image.Resampling.LANCZOS
REDUCING_GAP = 3.0  # Pillow: box-reduce first when shrinking 3x or more; indistinguishable

_NO_LIMIT = 1 << 62  # the probe reads the size; the limit below depends on the format
_REDUCIBLE = frozenset({"JPEG", "MPO"})  # formats that Image.draft decodes at 1/2, 1/4 or 1/8
_Factory = Callable[[IO[bytes], str], ImageFile.ImageFile]
Image.init()  # every plugin registered, so that each allowed format has its opener
_FACTORIES: dict[str, _Factory] = {  # every format ``probe`` accepts
    **{name: Image.OPEN[name][0] for name in ALLOWED_IMAGE_FORMATS if name in Image.OPEN},
    "MPO": Image.OPEN["JPEG"][0],
}
_MEDIA_TYPES = {"JPEG": "image/jpeg", "PNG": "image/png", "WEBP": "image/webp"}
_TRANSPOSE = {  # ImageOps.exif_transpose's table
    2: Image.Transpose.FLIP_LEFT_RIGHT,
    3: Image.Transpose.ROTATE_180,
    4: Image.Transpose.FLIP_TOP_BOTTOM,
    5: Image.Transpose.TRANSPOSE,
    6: Image.Transpose.ROTATE_270,
    7: Image.Transpose.TRANSVERSE,
    8: Image.Transpose.ROTATE_90,
}
_SWAPS_SIDES = frozenset({5, 6, 7, 8})
_KEPT_MODES = frozenset({"RGB", "RGBA", "L", "LA"})
_ICC_SAFE_MODES = frozenset({"RGB", "RGBA", "RGBX", "RGBa", "L", "LA", "La", "P", "PA", "1"})


@dataclass(frozen=True, slots=True)
class DownscaledImage:
    """An encoded image at its new size."""

    data: bytes
    media_type: str
    width_px: int
    height_px: int
    format: str  # Pillow's format name

    def data_uri(self) -> bytes:
        """``data:<media type>;base64,<payload>``, ready to splice into a JSON string."""
        return b"data:%s;base64,%s" % (self.media_type.encode(), base64.b64encode(self.data))


def downscale_image(
    raw: bytes,
    target_size: tuple[int, int],
    *,
    max_decode_pixels: int = DEFAULT_MAX_IMAGE_PIXELS,
    jpeg_quality: int = 90,
) -> DownscaledImage:
    """``raw`` re-encoded at exactly ``target_size`` (width, height in display orientation).

    ``jpeg_quality`` is also the quality of lossy WebP output.
    """
    width_px, height_px = target_size
    if width_px < 1 or height_px < 1:
        raise ValueError(f"target size {width_px}x{height_px} is empty")
    header = probe_bytes(raw, max_image_pixels=_NO_LIMIT)  # refuses what is no image
    factory = _FACTORIES.get(header.format)
    if factory is None:
        raise NotAnImageError(f"{header.format} images cannot be downscaled")
    size = (header.width_px, header.height_px)
    what = f"the {size[0]}x{size[1]} {header.format} image"
    if header.format in _REDUCIBLE:
        smallest = (math.ceil(size[0] / 8), math.ceil(size[1] / 8))
        _check_pixels(smallest, max_decode_pixels, f"{what}, even at 1/8 scale,")
    else:
        _check_pixels(size, max_decode_pixels, what)
    source_format = "JPEG" if header.format == "MPO" else header.format
    try:
        with factory(io.BytesIO(raw), "") as source:
            image, icc_profile = _decode(source, target_size, max_decode_pixels)
    except ImageError:
        raise
    except (Image.DecompressionBombError, Image.DecompressionBombWarning) as exc:  # GIF, TIFF
        raise ImageTooLargeError(f"the image is too large to decode: {exc}") from exc
    # Warning too: Pillow warns about damaged metadata, and under ``-W error`` that raises.
    except (
        OSError, EOFError, ValueError, SyntaxError, IndexError, TypeError, RuntimeError, Warning
    ) as exc:  # fmt: skip
        if _is_truncation(raw, exc):
            raise TruncatedImageError(f"the image data ends early: {exc}") from exc
        raise NotAnImageError(f"the image data is corrupt and cannot be decoded: {exc}") from exc
    lossless = source_format == "WEBP" and _webp_is_lossless(raw)
    return _encode(image, source_format, icc_profile, lossless=lossless, quality=jpeg_quality)


def _decode(
    source: ImageFile.ImageFile, target_size: tuple[int, int], max_decode_pixels: int
) -> tuple[Image.Image, bytes | None]:
    """Frame 0 of ``source``, oriented for display, at ``target_size``; and its ICC profile."""
    box = None
    if isinstance(source, JpegImagePlugin.JpegImageFile):
        # Draft in stored orientation; a JPEG's orientation is the same before and after load.
        swap = _orientation(source) in _SWAPS_SIDES
        drafted = source.draft("RGB", target_size[::-1] if swap else target_size)
        box = drafted[1] if drafted else None
    _check_pixels(source.size, max_decode_pixels, f"the {source.format} image, as drafted,")
    source.load()
    transpose = _orientation(source)  # after load, as exif_transpose: TIFF rotates itself then
    stored_size = target_size[::-1] if transpose in _SWAPS_SIDES else target_size
    icc_profile = source.info.get("icc_profile") if source.mode in _ICC_SAFE_MODES else None
    image: Image.Image = _working_mode(source)
    if image.size != stored_size or box is not None:
        image = image.resize(stored_size, RESAMPLE, box=box, reducing_gap=REDUCING_GAP)
    if transpose is not None:
        image = image.transpose(_TRANSPOSE[transpose])
    if image is source:
        image = source.copy()  # closing the source frees its pixels
    image.info = {}  # no EXIF or XMP orientation may reach the encoder
    return image, icc_profile if isinstance(icc_profile, bytes) else None


_TRUNCATION_WORDS = ("truncat", "end of file", "only got", "no more images")


def _is_truncation(raw: bytes, exc: Exception) -> bool:
    """Pillow says "ends early" in many ways; a RIFF (WebP) states its own length."""
    riff_short = raw[:4] == b"RIFF" and int.from_bytes(raw[4:8], "little") + 8 > len(raw)
    text = str(exc).lower()
    return isinstance(exc, EOFError) or riff_short or any(w in text for w in _TRUNCATION_WORDS)


def _check_pixels(decoded: tuple[int, int], max_decode_pixels: int, what: str) -> None:
    if decoded[0] * decoded[1] > max_decode_pixels:
        raise ImageTooLargeError(
            f"{what} would decode to {decoded[0]}x{decoded[1]} = {decoded[0] * decoded[1]:,} "
            f"pixels; the limit for downscaling is {max_decode_pixels:,}"
        )


def _orientation(source: Image.Image) -> int | None:
    """The EXIF (or XMP) orientation that vLLM's ``exif_transpose`` applies, if any."""
    try:
        orientation = source.getexif().get(ExifTags.Base.Orientation, 1)
        return orientation if orientation in _TRANSPOSE else None
    except Exception:  # vLLM suppresses any error in exif_transpose: no rotation then
        return None


def _working_mode(image: Image.Image) -> Image.Image:
    if image.mode in _KEPT_MODES and "transparency" not in image.info:
        return image
    if image.has_transparency_data:
        return image.convert("LA" if image.mode in ("1", "L", "La") else "RGBA")
    return image.convert("L" if image.mode == "1" else "RGB")


def _encode(
    image: Image.Image, source_format: str, icc: bytes | None, *, lossless: bool, quality: int
) -> DownscaledImage:
    options: dict[str, object] = {"icc_profile": icc} if icc else {}
    if source_format == "WEBP":
        output = "WEBP"
        options |= {"lossless": True, "quality": 0, "method": 0} if lossless else {}
        options |= {} if lossless else {"quality": quality, "method": 0}
    elif source_format == "JPEG" or (source_format == "AVIF" and image.mode in ("RGB", "L")):
        output = "JPEG"
        options |= {"quality": quality, "optimize": False, "progressive": False}
    else:
        output = "PNG"
        options |= {"compress_level": PNG_COMPRESS_LEVEL, "optimize": False}
    buffer = io.BytesIO()
    image.save(buffer, output, **options)
    return DownscaledImage(
        data=buffer.getvalue(),
        media_type=_MEDIA_TYPES[output],
        width_px=image.width,
        height_px=image.height,
        format=output,
    )


def _webp_is_lossless(raw: bytes) -> bool:
    """Whether the first frame's bitstream is VP8L (lossless) rather than VP8 (lossy)."""
    pos = 12  # after "RIFF", the size and "WEBP"
    while pos + 8 <= len(raw):
        fourcc, size = raw[pos : pos + 4], int.from_bytes(raw[pos + 4 : pos + 8], "little")
        if fourcc in (b"VP8L", b"VP8 "):
            return fourcc == b"VP8L"
        # An ANMF chunk holds a 16-byte frame header, then that frame's own chunks.
        pos += 24 if fourcc == b"ANMF" else 8 + size + (size & 1)
    return False
