"""images.headers.webp: the size and orientation libwebp reports to Pillow, from chunk headers."""

from __future__ import annotations

import struct
from collections.abc import Callable

import pytest

from sidecar.errors import TruncatedImageError
from sidecar.images.byte_sources import BytesSource
from sidecar.images.headers.contract import UsePillow
from sidecar.images.headers.webp import parse_webp
from tests.support.headers import CountingSource, encode, exif, frames, pillow_stored, scene, xmp

CASES: dict[str, Callable[[], bytes]] = {
    "lossy-641x479": lambda: encode(scene(641, 479), "WEBP"),
    "lossless-1x1": lambda: encode(scene(1, 1), "WEBP", lossless=True),
    "alpha-257x129": lambda: encode(scene(257, 129, "RGBA"), "WEBP"),
    "animated-3-frames": lambda: frames("WEBP", 3),
    "exif-orientation-6": lambda: encode(scene(64, 48), "WEBP", exif=exif(6)),
    "icc-and-xmp-orientation-5": lambda: encode(
        scene(64, 48), "WEBP", icc_profile=b"\x01" * 600, xmp=xmp(5)
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_parse_webp_reads_what_pillow_reads(case: str) -> None:
    raw = CASES[case]()
    assert parse_webp(BytesSource(raw)) == pillow_stored(raw)


def test_parse_webp_reads_only_chunk_headers_on_the_way_to_the_metadata() -> None:
    raw = encode(scene(600, 400), "WEBP", quality=95, exif=exif(3))
    source = CountingSource(raw)
    assert parse_webp(source).orientation == 3
    assert sum(length for _, length in source.reads) < 200 < len(raw) // 10


def test_parse_webp_leaves_an_unknown_lossless_version_to_pillow() -> None:
    bits = (1 << 29) | 9 | (9 << 14)
    chunk = b"VP8L" + struct.pack("<I", 5) + b"\x2f" + struct.pack("<I", bits)
    raw = b"RIFF" + struct.pack("<I", 4 + len(chunk)) + b"WEBP" + chunk + b"\x00" * 8
    with pytest.raises(UsePillow):
        parse_webp(BytesSource(raw))


def test_parse_webp_leaves_an_unknown_first_chunk_to_pillow() -> None:
    chunk = b"ALPH" + struct.pack("<I", 10) + b"\x00" * 10
    raw = b"RIFF" + struct.pack("<I", 4 + len(chunk)) + b"WEBP" + chunk
    with pytest.raises(UsePillow):
        parse_webp(BytesSource(raw))


def test_parse_webp_says_truncated_when_the_first_chunk_is_cut() -> None:
    with pytest.raises(TruncatedImageError):
        parse_webp(BytesSource(encode(scene(64, 48), "WEBP")[:20]))
