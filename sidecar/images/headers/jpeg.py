"""JPEG: frame 0's size and orientation, from the markers up to start-of-scan.

Mirrors ``JpegImageFile._open``, which is too slow for a per-request probe. Invariants: only
segment lengths, the frame header, quantization tables, a few tag bytes per APP segment and
the first KB of the EXIF segment are read (a 60 KB EXIF thumbnail after IFD0 is skipped, not
decoded), and the XMP segment only where EXIF has no orientation. A multi-picture JPEG
(``MPF``) or an EXIF split over segments goes to Pillow, which makes an MPO or concatenates.
"""

from __future__ import annotations

import struct

from sidecar.errors import NotAnImageError, TruncatedImageError
from sidecar.images.headers.contract import ByteSource, StoredHeader, UsePillow, need
from sidecar.images.headers.exif import exif_orientation, xmp_orientation

_U16BE = struct.Struct(">H").unpack_from

# Pillow's marker table: which markers it reads as a frame header, which carry no length.
_SOF = frozenset(
    (0xC0, 0xC1, 0xC2, 0xC3, 0xC5, 0xC6, 0xC7, 0xC9, 0xCA, 0xCB, 0xCD, 0xCE, 0xCF, 0xDE)
)
_NO_LENGTH = frozenset((0xC8, *range(0xD0, 0xDA), *range(0xF0, 0xFE)))
_SOS = 0xDA
_XMP_NS = b"http://ns.adobe.com/xap/1.0/\x00"
_EXIF_HEAD_BYTES = 1024  # IFD0 sits at the start of the APP1 segment; a thumbnail follows it
_SCAN_BYTES = 4096


def parse_jpeg(src: ByteSource) -> StoredHeader:
    """Walk the markers up to start-of-scan, as ``JpegImageFile._open`` does."""
    pos = 2
    size: tuple[int, int] | None = None
    exif: tuple[int, int] | None = None
    xmp: tuple[int, int] | None = None
    while True:
        head = src.read(pos, 4)
        if len(head) < 2:
            raise TruncatedImageError(
                f"the JPEG image is truncated: it ends at byte {src.size}, before its scan"
            )
        if head[0] != 0xFF:  # Pillow skips stray bytes between segments
            window = src.read(pos, _SCAN_BYTES)
            skip = window.find(b"\xff")
            pos += skip if skip >= 0 else len(window)
            continue
        marker = head[1]
        if marker == 0xFF:  # fill byte
            pos += 1
            continue
        if marker == 0x00 or marker in _NO_LENGTH:
            pos += 2
            continue
        if marker < 0xC0:
            raise NotAnImageError(f"the JPEG header is corrupt: no marker at byte {pos}")
        if len(head) < 4:
            need(src, pos, 4, "JPEG")
        body, body_len = pos + 4, max(((head[2] << 8) | head[3]) - 2, 0)  # as Pillow: <2 is 0
        pos = body + body_len
        if marker == _SOS:
            if pos > src.size:
                need(src, body, body_len, "JPEG")
            break
        if marker in _SOF:
            frame = need(src, body, body_len, "JPEG")
            if body_len < 6 or (body_len - 6) % 3:
                raise NotAnImageError("the JPEG header is corrupt: bad frame header length")
            if frame[0] != 8 or frame[5] not in (1, 3, 4):
                raise NotAnImageError(
                    f"the JPEG has {frame[0]}-bit samples in {frame[5]} components; "
                    "only 8-bit greyscale, RGB and CMYK JPEGs can be read"
                )
            size = (_U16BE(frame, 3)[0], _U16BE(frame, 1)[0])
        elif marker == 0xDB:
            _check_quantization_tables(need(src, body, body_len, "JPEG"))
        elif marker == 0xE0 and body_len < 7 and src.read(body, 4) == b"JFIF":
            raise NotAnImageError("the JPEG header is corrupt: its JFIF segment is too short")
        elif marker == 0xE1:
            tag = src.read(body, min(body_len, len(_XMP_NS)))
            if tag.startswith(b"Exif\x00\x00"):
                if exif is not None:
                    raise UsePillow  # Pillow concatenates extended EXIF segments
                exif = (body, body_len)
            elif tag == _XMP_NS:
                xmp = (body, body_len)
        elif marker == 0xE2:
            if src.read(body, 4) == b"MPF\x00":
                raise UsePillow  # Pillow turns a multi-picture JPEG into an MPO
        elif marker == 0xEE and body_len < 7 and src.read(body, 5) == b"Adobe":
            raise NotAnImageError("the JPEG header is corrupt: its Adobe segment is too short")
    if size is None:
        raise NotAnImageError("the JPEG header is corrupt: no frame header before the scan")
    return StoredHeader("JPEG", size[0], size[1], _jpeg_orientation(src, exif, xmp))


def _check_quantization_tables(tables: bytes) -> None:
    at = 0
    while at < len(tables):
        table_len = 65 if tables[at] < 16 else 129
        if len(tables) - at < table_len:
            raise NotAnImageError("the JPEG header is corrupt: bad quantization table")
        at += table_len


def _jpeg_orientation(
    src: ByteSource, exif: tuple[int, int] | None, xmp: tuple[int, int] | None
) -> int:
    value = None
    if exif is not None:
        at, length = exif
        try:
            value = exif_orientation(src.read(at, min(length, _EXIF_HEAD_BYTES)))
        except UsePillow:
            if length <= _EXIF_HEAD_BYTES:
                raise
            value = exif_orientation(src.read(at, length))
    if value is None and xmp is not None:
        value = xmp_orientation(src.read(xmp[0] + len(_XMP_NS), xmp[1] - len(_XMP_NS)))
    return value or 1
