"""images.headers.png: the size, frame count and orientation from the chunks before IDAT."""

from __future__ import annotations

import struct
import zlib
from collections.abc import Callable

import pytest
from PIL import PngImagePlugin

from sidecar.errors import NotAnImageError, TruncatedImageError
from sidecar.images.byte_sources import BytesSource
from sidecar.images.headers.contract import UsePillow
from sidecar.images.headers.png import parse_png
from tests.support.headers import CountingSource, encode, exif, frames, pillow_stored, scene
from tests.support.imaging import png_chunk


def _with_text(key: str, value: str) -> bytes:
    info = PngImagePlugin.PngInfo()
    info.add_text(key, value)
    return encode(scene(40, 30), "PNG", pnginfo=info)


CASES: dict[str, Callable[[], bytes]] = {
    "rgb-1x1": lambda: encode(scene(1, 1), "PNG"),
    "rgba-257x129": lambda: encode(scene(257, 129, "RGBA"), "PNG"),
    "palette-transparency-31x17": lambda: encode(scene(31, 17, "P"), "PNG", transparency=0),
    "grey-16-bit-129x85": lambda: encode(scene(129, 85, "I;16"), "PNG"),
    "one-bit-300x7": lambda: encode(scene(300, 7, "1"), "PNG"),
    "exif-orientation-6": lambda: encode(scene(40, 20), "PNG", exif=exif(6)),
    "apng-3-frames": lambda: frames("PNG", 3),
    "plain-text-chunk": lambda: _with_text("Software", "a test"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_parse_png_reads_what_pillow_reads(case: str) -> None:
    raw = CASES[case]()
    assert parse_png(BytesSource(raw)) == pillow_stored(raw)


def test_parse_png_reads_nothing_from_the_pixel_data_on() -> None:
    raw = encode(scene(400, 300), "PNG")
    source = CountingSource(raw)
    parse_png(source)
    assert source.furthest_byte <= raw.index(b"IDAT") + 4


def _iend(raw: bytes) -> int:
    return raw.rindex(b"IEND") - 4


def test_parse_png_does_not_see_an_exif_chunk_placed_after_the_pixels() -> None:
    raw = encode(scene(40, 20), "PNG")
    late = raw[: _iend(raw)] + png_chunk(b"eXIf", exif(6)[6:]) + raw[_iend(raw) :]
    assert parse_png(BytesSource(late)).orientation == 1  # the known difference from vLLM


@pytest.mark.parametrize("key", ["Raw profile type exif", "XML:com.adobe.xmp"])
def test_parse_png_leaves_exif_or_xmp_in_a_text_chunk_to_pillow(key: str) -> None:
    with pytest.raises(UsePillow):
        parse_png(BytesSource(_with_text(key, "whatever")))


def test_parse_png_leaves_a_chunk_with_a_bad_checksum_to_pillow() -> None:
    raw = bytearray(encode(scene(40, 30), "PNG"))
    raw[29:33] = b"\x00\x00\x00\x00"  # IHDR's CRC
    with pytest.raises(UsePillow):
        parse_png(BytesSource(bytes(raw)))


def test_parse_png_refuses_a_bit_depth_no_mode_has() -> None:
    ihdr = b"IHDR" + struct.pack(">IIBBBBB", 10, 10, 3, 2, 0, 0, 0)
    raw = b"\x89PNG\r\n\x1a\n" + struct.pack(">I", 13) + ihdr + struct.pack(">I", zlib.crc32(ihdr))
    with pytest.raises(NotAnImageError, match="bit depth 3 with colour type 2"):
        parse_png(BytesSource(raw + b"\x00" * 16))


def test_parse_png_says_truncated_when_the_file_ends_before_the_pixels() -> None:
    raw = _with_text("Software", "x" * 200)
    with pytest.raises(TruncatedImageError):
        parse_png(BytesSource(raw[:60]))
