"""images.headers.avif: the primary item's size and orientation from the ``meta`` box."""

from __future__ import annotations

import struct
from collections.abc import Callable

import pytest

from sidecar.errors import NotAnImageError
from sidecar.images.byte_sources import BytesSource
from sidecar.images.headers.avif import AVIF_BRANDS, ftyp_brands, parse_avif
from sidecar.images.headers.contract import UsePillow
from tests.support.headers import CountingSource, encode, exif, frames, pillow_stored, scene

CASES: dict[str, Callable[[], bytes]] = {
    "rgb-641x479": lambda: encode(scene(641, 479), "AVIF"),
    "rgba-1x1": lambda: encode(scene(1, 1, "RGBA"), "AVIF"),
    **{
        f"exif-orientation-{o}": (lambda o=o: encode(scene(64, 48), "AVIF", exif=exif(o)))  # type: ignore[misc]
        for o in (3, 6, 8)
    },
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_parse_avif_reads_what_pillow_reads(case: str) -> None:
    raw = CASES[case]()
    assert parse_avif(BytesSource(raw)) == pillow_stored(raw)


def test_parse_avif_reads_the_meta_box_but_not_the_pixel_data() -> None:
    raw = encode(scene(800, 600), "AVIF", quality=90)
    source = CountingSource(raw)
    parse_avif(source)
    assert sum(length for _, length in source.reads) < 2_000 < len(raw)


def test_parse_avif_leaves_an_image_sequence_to_pillow() -> None:
    with pytest.raises(UsePillow):
        parse_avif(BytesSource(frames("AVIF", 2)))


def _box(kind: bytes, body: bytes) -> bytes:
    return struct.pack(">I", 8 + len(body)) + kind + body


def test_ftyp_brands_gives_the_major_and_every_compatible_brand() -> None:
    raw = _box(b"ftyp", b"avif" + b"\x00" * 4 + b"mif1miaf") + _box(b"meta", b"")
    major, brands, end = ftyp_brands(BytesSource(raw))
    assert (major, brands, end) == (b"avif", frozenset((b"avif", b"mif1", b"miaf")), 24)
    assert brands & AVIF_BRANDS


def test_ftyp_brands_refuses_a_file_without_a_valid_ftyp_box() -> None:
    with pytest.raises(NotAnImageError, match="ftyp"):
        ftyp_brands(BytesSource(_box(b"free", b"\x00" * 16)))


def test_parse_avif_refuses_a_file_without_a_meta_box() -> None:
    raw = _box(b"ftyp", b"avif\x00\x00\x00\x00avifmif1") + _box(b"mdat", b"\x00" * 32)
    with pytest.raises(NotAnImageError, match="meta"):
        parse_avif(BytesSource(raw))
