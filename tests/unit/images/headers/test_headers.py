"""images.headers (the package's dispatch): a format by its signature, its parser, else Pillow."""

from __future__ import annotations

import pytest

from sidecar.errors import NotAnImageError, TruncatedImageError
from sidecar.images import headers
from sidecar.images.byte_sources import BytesSource
from sidecar.images.headers import GENERIC, read_stored_header, sniff
from sidecar.images.headers.contract import ByteSource, StoredHeader, UsePillow
from tests.support.headers import encode, exif, frames, pillow_stored, scene


def _box(kind: bytes, body: bytes) -> bytes:
    return (8 + len(body)).to_bytes(4, "big") + kind + body


@pytest.mark.parametrize(
    ("raw", "kind"),
    [
        (encode(scene(8, 8), "JPEG"), "JPEG"),
        (encode(scene(8, 8), "PNG"), "PNG"),
        (encode(scene(8, 8, "P"), "GIF"), "GIF"),
        (encode(scene(8, 8), "WEBP"), "WEBP"),
        (encode(scene(8, 8), "AVIF"), "AVIF"),
        (encode(scene(8, 8), "BMP"), "BMP"),
        (encode(scene(8, 8), "TIFF"), "TIFF"),
        (encode(scene(8, 8), "TGA"), GENERIC),
    ],
    ids=["jpeg", "png", "gif", "webp", "avif", "bmp", "tiff", "tga-has-no-signature"],
)
def test_sniff_names_the_format_by_its_signature_as_pillow_names_it(raw: bytes, kind: str) -> None:
    assert sniff(BytesSource(raw)) == kind


def test_sniff_refuses_an_iso_media_file_that_is_not_avif() -> None:
    heic = _box(b"ftyp", b"heic\x00\x00\x00\x00mif1heic") + _box(b"meta", b"")
    with pytest.raises(NotAnImageError, match=r"'heic'.*HEIF/HEIC is not in its list"):
        sniff(BytesSource(heic))


@pytest.mark.parametrize("head", [b"\xff\xd8", b"\x89PN", b"GIF8", b"RIFF\x00"])
def test_sniff_says_truncated_when_a_few_bytes_start_a_signature(head: bytes) -> None:
    with pytest.raises(TruncatedImageError, match=f"only {len(head)} bytes"):
        sniff(BytesSource(head))


@pytest.mark.parametrize(
    "raw",
    [
        encode(scene(64, 48), "JPEG", exif=exif(6)),
        frames("MPO", 2),
        encode(scene(40, 30), "PNG"),
        frames("GIF", 2),
        encode(scene(64, 48), "WEBP"),
        encode(scene(64, 48), "AVIF"),
        encode(scene(31, 17), "BMP"),
        encode(scene(31, 17), "QOI"),
    ],
    ids=["jpeg", "mpo-goes-to-pillow", "png", "gif", "webp", "avif", "bmp", "qoi-sniffed"],
)
def test_read_stored_header_matches_pillow_whichever_path_reads_it(raw: bytes) -> None:
    assert read_stored_header(BytesSource(raw)) == pillow_stored(raw)


def test_read_stored_header_lets_pillow_decide_whatever_a_parser_gives_up_on(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    raw = encode(scene(64, 48), "PNG")

    def gives_up(source: ByteSource) -> StoredHeader:
        raise UsePillow

    def trips(source: ByteSource) -> StoredHeader:
        raise IndexError("a malformed field")

    for parser in (gives_up, trips):
        monkeypatch.setitem(headers.PARSERS, "PNG", parser)
        assert read_stored_header(BytesSource(raw)) == pillow_stored(raw)


def test_read_stored_header_refuses_bytes_no_format_of_vllms_recognises() -> None:
    with pytest.raises(NotAnImageError, match="not an image in a format vLLM opens"):
        read_stored_header(BytesSource(b"just some text, certainly no image at all"))
