"""images.headers.exif: the orientation Pillow's ``Exif`` reads, or ``UsePillow`` when unsure."""

from __future__ import annotations

import struct

import pytest
from PIL import Image

from sidecar.images.headers.contract import UsePillow
from sidecar.images.headers.exif import exif_orientation, xmp_orientation
from tests.support.headers import ORIENTATION_TAG, exif, tiff_orientation, xmp


def _pillow_reads(block: bytes) -> int | None:
    parsed = Image.Exif()
    parsed.load(block)
    value = parsed.get(ORIENTATION_TAG)
    return None if value is None else int(value)


@pytest.mark.parametrize("orientation", range(1, 9))
@pytest.mark.parametrize("byte_order", ["<", ">"], ids=["little-endian", "big-endian"])
def test_exif_orientation_reads_a_short_in_either_byte_order_as_pillow(
    orientation: int, byte_order: str
) -> None:
    block = tiff_orientation(orientation, byte_order)
    assert exif_orientation(block) == _pillow_reads(block) == orientation


def test_exif_orientation_reads_through_the_exif_prefix() -> None:
    assert exif_orientation(exif(6)) == 6
    assert exif_orientation(b"Exif\x00\x00" + exif(3)) == 3  # a doubled prefix, as Pillow strips


def test_exif_orientation_is_none_when_the_tag_is_absent() -> None:
    block = Image.Exif()
    block[0x0131] = "software"
    assert exif_orientation(block.tobytes()) is None
    assert exif_orientation(b"") is None


def test_exif_orientation_reads_a_long_value() -> None:
    long_entry = struct.pack("<HHII", ORIENTATION_TAG, 4, 1, 8)
    block = b"II*\x00" + struct.pack("<I", 8) + struct.pack("<H", 1) + long_entry + b"\x00" * 4
    assert exif_orientation(block) == 8


@pytest.mark.parametrize(
    "block",
    [
        b"XX*\x00\x08\x00\x00\x00\x00\x00",
        b"II*\x00\xff\x00\x00\x00",
        tiff_orientation(6)[:12],
        b"II*\x00" + struct.pack("<I", 8) + struct.pack("<H", 1)
        + struct.pack("<HHI4s", ORIENTATION_TAG, 3, 2, b"\x06\x00\x06\x00") + b"\x00" * 4,
        b"II*\x00" + struct.pack("<I", 8) + struct.pack("<H", 1)
        + struct.pack("<HHI4s", ORIENTATION_TAG, 9, 1, b"\x06\x00\x00\x00") + b"\x00" * 4,
    ],
    ids=["unknown-byte-order", "ifd-beyond-the-data", "entries-cut", "two-values", "signed-type"],
)  # fmt: skip
def test_exif_orientation_leaves_odd_encodings_to_pillow(block: bytes) -> None:
    with pytest.raises(UsePillow):
        exif_orientation(block)


@pytest.mark.parametrize("orientation", [2, 6, 8])
def test_xmp_orientation_reads_the_attribute_pillow_reads(orientation: int) -> None:
    assert xmp_orientation(xmp(orientation)) == orientation


def test_xmp_orientation_reads_the_element_form_and_none_without_it() -> None:
    assert xmp_orientation(b"<tiff:Orientation>5</tiff:Orientation>") == 5
    assert xmp_orientation(b"<x:xmpmeta/>") is None
