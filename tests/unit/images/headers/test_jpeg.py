"""images.headers.jpeg: frame 0's size and orientation as Pillow's JPEG plugin reads them."""

from __future__ import annotations

import struct
from collections.abc import Callable

import pytest

from sidecar.errors import NotAnImageError, TruncatedImageError
from sidecar.images.byte_sources import BytesSource
from sidecar.images.headers.contract import UsePillow
from sidecar.images.headers.jpeg import parse_jpeg
from tests.support.headers import CountingSource, encode, exif, frames, pillow_stored, scene, xmp

CASES: dict[str, Callable[[], bytes]] = {
    "baseline-641x479": lambda: encode(scene(641, 479), "JPEG"),
    "progressive-640x480": lambda: encode(scene(640, 480), "JPEG", progressive=True),
    "cmyk-333x222": lambda: encode(scene(333, 222, "CMYK"), "JPEG"),
    "grey-1x1": lambda: encode(scene(1, 1, "L"), "JPEG"),
    "exif-orientation-6": lambda: encode(scene(64, 48), "JPEG", exif=exif(6)),
    "xmp-orientation-8": lambda: encode(scene(64, 48), "JPEG", xmp=xmp(8)),
    "exif-wins-over-xmp": lambda: encode(scene(64, 48), "JPEG", exif=exif(3), xmp=xmp(8)),
    "icc-profile": lambda: encode(scene(50, 40), "JPEG", icc_profile=b"\x07" * 5000),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_parse_jpeg_reads_what_pillow_reads(case: str) -> None:
    raw = CASES[case]()
    assert parse_jpeg(BytesSource(raw)) == pillow_stored(raw)


def test_parse_jpeg_skips_stray_bytes_and_fill_bytes_between_segments() -> None:
    raw = encode(scene(30, 20), "JPEG")
    after_app0 = 4 + struct.unpack_from(">H", raw, 4)[0]
    padded = raw[:after_app0] + b"\x00\x17\xff\xff" + raw[after_app0:]
    assert parse_jpeg(BytesSource(padded)) == pillow_stored(padded)


def test_parse_jpeg_reads_no_further_than_the_start_of_scan() -> None:
    raw = encode(scene(800, 600), "JPEG", quality=95)
    source = CountingSource(raw)
    parse_jpeg(source)
    assert source.furthest_byte < 1_000 < len(raw)


def test_parse_jpeg_skips_a_large_exif_thumbnail_without_reading_it() -> None:
    big_exif = exif(6) + bytes(range(256)) * 200  # IFD0 first, then 51 KB it need not read
    raw = encode(scene(64, 48), "JPEG", exif=big_exif)
    source = CountingSource(raw)
    assert parse_jpeg(source).orientation == 6
    assert sum(length for _, length in source.reads) < 4_000


def test_parse_jpeg_leaves_a_multi_picture_file_to_pillow() -> None:
    with pytest.raises(UsePillow):
        parse_jpeg(BytesSource(frames("MPO", 2)))


def _segment(marker: int, body: bytes) -> bytes:
    return b"\xff" + bytes((marker,)) + struct.pack(">H", len(body) + 2) + body


def test_parse_jpeg_leaves_an_exif_split_over_segments_to_pillow() -> None:
    raw = encode(scene(30, 20), "JPEG", exif=exif(6))
    second = _segment(0xE1, exif(3))
    with pytest.raises(UsePillow):
        parse_jpeg(BytesSource(raw[:2] + second + raw[2:]))


def test_parse_jpeg_refuses_a_file_with_no_frame_header_before_the_scan() -> None:
    scan = _segment(0xDA, b"\x01\x01\x00\x00\x3f\x00") + b"\x00" * 8
    with pytest.raises(NotAnImageError, match="no frame header"):
        parse_jpeg(BytesSource(b"\xff\xd8" + scan))


def test_parse_jpeg_refuses_samples_pillow_cannot_read() -> None:
    frame = struct.pack(">BHHB", 12, 10, 10, 1) + b"\x01\x11\x00"
    with pytest.raises(NotAnImageError, match="12-bit"):
        parse_jpeg(BytesSource(b"\xff\xd8" + _segment(0xC0, frame)))


def test_parse_jpeg_refuses_a_bad_quantization_table() -> None:
    with pytest.raises(NotAnImageError, match="quantization"):
        parse_jpeg(BytesSource(b"\xff\xd8" + _segment(0xDB, b"\x00" * 10)))


@pytest.mark.parametrize("keep", [3, 40, 150])
def test_parse_jpeg_says_truncated_when_the_file_ends_before_its_scan(keep: int) -> None:
    raw = encode(scene(64, 48), "JPEG")
    with pytest.raises(TruncatedImageError, match="truncated"):
        parse_jpeg(BytesSource(raw[:keep]))
