"""images.headers.pillow: Pillow's own plugins over a ``ByteSource``, nothing decoded."""

from __future__ import annotations

import io
import struct
from collections.abc import Callable

import pytest
from PIL import Image

from sidecar.errors import ImageError, ImageTooLargeError, NotAnImageError, TruncatedImageError
from sidecar.images.byte_sources import BytesSource
from sidecar.images.headers.contract import StoredHeader
from sidecar.images.headers.pillow import ALLOWED_IMAGE_FORMATS, pillow_header
from tests.support.headers import CountingSource, encode, exif, frames, pillow_stored, scene

CASES: dict[str, tuple[str, Callable[[], bytes]]] = {
    "bmp-641x479": ("BMP", lambda: encode(scene(641, 479), "BMP")),
    "bmp-palette-17x9": ("BMP", lambda: encode(scene(17, 9, "P"), "BMP")),
    "tiff-lzw-64x64": ("TIFF", lambda: encode(scene(64, 64), "TIFF", compression="tiff_lzw")),
    "tiff-3-pages": ("TIFF", lambda: frames("TIFF", 3)),
    "jpeg2000-codestream-65x33": (
        "JPEG2000", lambda: encode(scene(65, 33), "JPEG2000", no_jp2=True)
    ),
    "jpeg-through-pillow": ("JPEG", lambda: encode(scene(64, 48), "JPEG", exif=exif(6))),
    "png-through-pillow": ("PNG", lambda: encode(scene(40, 20), "PNG")),
    "tga-sniffed": ("PILLOW", lambda: encode(scene(30, 20), "TGA")),
    "ppm-sniffed": ("PILLOW", lambda: encode(scene(30, 20), "PPM")),
}  # fmt: skip


@pytest.mark.parametrize("case", sorted(CASES))
def test_pillow_header_reads_what_pillow_reads(case: str) -> None:
    kind, make = CASES[case]
    raw = make()
    assert pillow_header(kind, BytesSource(raw)) == pillow_stored(raw)


def test_pillow_header_gives_a_tiffs_size_as_stored_before_its_orientation() -> None:
    raw = encode(scene(60, 20), "TIFF", exif=exif(6))
    assert pillow_header("TIFF", BytesSource(raw)) == StoredHeader("TIFF", 60, 20, 6)


def test_pillow_header_reads_an_icos_icon_without_decoding_it() -> None:
    raw = encode(scene(64, 48), "ICO")
    with Image.open(io.BytesIO(raw)) as image:
        image.load()
        expected = image.size
    header = pillow_header("ICO", BytesSource(raw))
    assert (header.format, header.width_px, header.height_px) == ("ICO", *expected)


def test_pillow_header_reads_only_the_header_of_a_large_file() -> None:
    raw = encode(scene(1000, 800), "BMP")
    source = CountingSource(raw)
    pillow_header("BMP", source)
    assert sum(length for _, length in source.reads) < 10_000 < len(raw)


def test_pillow_header_refuses_a_format_outside_vllms_list() -> None:
    raw = encode(scene(30, 20), "EPS")  # Pillow opens EPS; vLLM's list leaves it out
    assert "EPS" not in ALLOWED_IMAGE_FORMATS
    with pytest.raises(NotAnImageError, match="not an image in a format vLLM opens"):
        pillow_header("PILLOW", BytesSource(raw))


def test_pillow_header_says_truncated_when_the_header_is_cut() -> None:
    with pytest.raises(TruncatedImageError):
        pillow_header("BMP", BytesSource(encode(scene(30, 20), "BMP")[:20]))


def test_pillow_header_turns_pillows_bomb_error_into_image_too_large() -> None:
    info = struct.pack("<IiiHHIIiiII", 40, 40_000, 40_000, 1, 24, 0, 0, 2835, 2835, 0, 0)
    raw = b"BM" + struct.pack("<IHHI", 54, 0, 0, 54) + info
    with pytest.raises(ImageTooLargeError, match="size limit"):
        pillow_header("PILLOW", BytesSource(raw))  # sniffed: Image.open's bomb check


@pytest.mark.parametrize("raw", [b"\x00" * 64, b"hello, world" * 4, bytes(range(256))])
def test_pillow_header_raises_only_image_errors_for_garbage(raw: bytes) -> None:
    with pytest.raises(ImageError):
        pillow_header("PILLOW", BytesSource(raw))
