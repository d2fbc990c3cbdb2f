"""Images for fuzzing and for the bomb tests: small valid seeds, and bombs made from them.

A bomb here is a real, decodable file whose header has been patched to claim a huge size, so
that anything which trusted the header and allocated a pixel buffer would try to allocate
gigabytes. ``padded`` appends junk after the image's end, so that a probe that decoded the
whole base64 payload (instead of its first kilobytes) would show it in time and memory.

Used by the bomb tests (``tests/support/bombs.py``), ``fuzz/bomb_timing.py`` and as atheris seeds.
"""

from __future__ import annotations

import io
import random
import struct
import zlib
from collections.abc import Callable

from PIL import Image

SEED_FORMATS = ("JPEG", "PNG", "GIF", "WEBP", "BMP", "TIFF")


def gradient(width: int, height: int, mode: str = "RGB") -> Image.Image:
    """A smooth test picture (compresses well, decodes like a photo)."""
    return Image.linear_gradient("L").resize((width, height)).convert(mode)


def encode(image: Image.Image, image_format: str, **options: object) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, image_format, **options)
    return buffer.getvalue()


def seeds() -> dict[str, bytes]:
    """One small valid file per format and variant, for a fuzzer's starting corpus."""
    picture = gradient(24, 16)
    found = {name.lower(): encode(picture, name) for name in SEED_FORMATS}
    found["png-alpha"] = encode(gradient(24, 16, "RGBA"), "PNG")
    found["webp-lossless"] = encode(picture, "WEBP", lossless=True)
    found["webp-extended"] = encode(picture, "WEBP", exif=_exif(6))
    found["jpeg-exif"] = encode(picture, "JPEG", exif=_exif(6))
    found["avif"] = encode(picture, "AVIF")
    found["gif-animated"] = animated_gif(3)
    return found


def _exif(orientation: int) -> bytes:
    exif = Image.Exif()
    exif[0x0112] = orientation
    return exif.tobytes()


def padded(raw: bytes, junk_bytes: int) -> bytes:
    """``raw`` followed by ``junk_bytes`` of random bytes (every format ignores a tail)."""
    return raw + random.Random(junk_bytes).randbytes(junk_bytes)  # noqa: S311 - junk, not secrets


# ----------------------------------------------------------------------------- bombs


def png_bomb(width: int = 100_000, height: int = 100_000) -> bytes:
    """A valid PNG whose IHDR (with a correct CRC) claims ``width x height``."""
    raw = bytearray(encode(gradient(16, 16), "PNG"))
    raw[16:24] = struct.pack(">II", width, height)
    raw[29:33] = struct.pack(">I", zlib.crc32(bytes(raw[12:29])))
    return bytes(raw)


def jpeg_bomb(width: int = 65_535, height: int = 65_535) -> bytes:
    """A valid baseline JPEG whose frame header claims ``width x height``."""
    raw = bytearray(encode(gradient(16, 16), "JPEG"))
    sof = raw.index(b"\xff\xc0")
    raw[sof + 5 : sof + 9] = struct.pack(">HH", height, width)
    return bytes(raw)


def gif_bomb(width: int = 65_535, height: int = 65_535, frames: int = 1) -> bytes:
    """A valid GIF (``frames`` frames) whose logical screen claims ``width x height``."""
    raw = bytearray(animated_gif(frames))
    raw[6:10] = struct.pack("<HH", width, height)
    return bytes(raw)


def webp_extended_bomb(width: int = 100_000, height: int = 100_000) -> bytes:
    """A valid extended WebP (VP8X, with EXIF) whose canvas claims ``width x height``."""
    raw = bytearray(encode(gradient(16, 16), "WEBP", exif=_exif(1)))
    if raw[12:16] != b"VP8X":
        raise ValueError("Pillow wrote no VP8X chunk")
    raw[24:30] = (width - 1).to_bytes(3, "little") + (height - 1).to_bytes(3, "little")
    return bytes(raw)


def webp_lossy_bomb() -> bytes:
    """A valid lossy WebP (simple VP8) claiming 16383 x 16383, the most its 14 bits hold."""
    raw = bytearray(encode(gradient(16, 16), "WEBP"))
    if raw[12:16] != b"VP8 ":
        raise ValueError("Pillow wrote no simple VP8 file")
    raw[26:30] = struct.pack("<HH", 16383, 16383)
    return bytes(raw)


def webp_lossless_bomb() -> bytes:
    """A valid lossless WebP (VP8L) claiming 16384 x 16384."""
    raw = bytearray(encode(gradient(16, 16), "WEBP", lossless=True))
    if raw[12:16] != b"VP8L":
        raise ValueError("Pillow wrote no VP8L file")
    bits = struct.unpack("<I", raw[21:25])[0]
    bits = (bits & ~((1 << 28) - 1)) | 16383 | (16383 << 14)
    raw[21:25] = struct.pack("<I", bits)
    return bytes(raw)


def avif_bomb(width: int = 100_000, height: int = 100_000) -> bytes:
    """A valid AVIF whose primary item's ``ispe`` claims ``width x height``."""
    raw = bytearray(encode(gradient(16, 16), "AVIF"))
    ispe = raw.index(b"ispe")
    raw[ispe + 8 : ispe + 16] = struct.pack(">II", width, height)
    return bytes(raw)


BOMBS: dict[str, Callable[[], bytes]] = {
    "png-100000x100000": png_bomb,
    "jpeg-65535x65535": jpeg_bomb,
    "gif-65535x65535": gif_bomb,
    "gif-65535x65535-5000-frames": lambda: gif_bomb(frames=5000),
    "webp-vp8x-100000x100000": webp_extended_bomb,
    "webp-vp8-16383x16383": webp_lossy_bomb,
    "webp-vp8l-16384x16384": webp_lossless_bomb,
    "avif-100000x100000": avif_bomb,
}


# ----------------------------------------------------------------------------- animations


def animated_gif(frames: int, size: tuple[int, int] = (8, 8)) -> bytes:
    """A GIF of ``frames`` frames: frame 0 of ``size``, then copies of one 1x1 frame block.

    Pillow's encoder merges identical frames, so the copies are spliced in directly; a decoder
    (and a hostile client) sees every one of them.
    """
    first = encode(gradient(*size), "GIF")
    _split_gif(first)  # checks the layout the splice relies on
    _, later = _split_gif(encode(gradient(1, 1), "GIF"))
    control = b"!\xf9\x04\x00\x0a\x00\x00\x00"  # 100 ms per frame, no disposal
    return first[:-1] + (control + later) * (frames - 1) + b";"


def _split_gif(raw: bytes) -> tuple[bytes, bytes]:
    """(everything before frame 0's descriptor, frame 0's block without the trailer)."""
    flags = raw[10]
    pos = 13 + (3 << ((flags & 7) + 1) if flags & 0x80 else 0)
    while raw[pos : pos + 1] == b"!":  # extensions before frame 0's descriptor
        pos += 2
        while raw[pos]:
            pos += raw[pos] + 1
        pos += 1
    if raw[pos : pos + 1] != b"," or raw[-1:] != b";":
        raise ValueError("unexpected GIF layout from Pillow")
    return raw[:pos], raw[pos:-1]
