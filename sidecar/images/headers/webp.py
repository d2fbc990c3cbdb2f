"""WebP: the size, frame count and orientation libwebp's demuxer reports to Pillow.

Pillow hands the whole file to libwebp; this reads the first 30 bytes and, only for an
extended file that flags animation, EXIF or XMP, the 8-byte chunk headers on the way to the
metadata, which sits after the image data. Invariant: pixel data is never read.
"""

from __future__ import annotations

import struct

from sidecar.images.headers.contract import ByteSource, StoredHeader, UsePillow, need
from sidecar.images.headers.exif import exif_orientation, xmp_orientation

_U16LE = struct.Struct("<H").unpack_from
_U32LE = struct.Struct("<I").unpack_from

_VP8X_ANIMATION, _VP8X_XMP, _VP8X_EXIF = 0x02, 0x04, 0x08
_WEBP_CHUNKS_LIMIT = 4096


def parse_webp(src: ByteSource) -> StoredHeader:
    """The first chunk's size, as libwebp's demuxer reports it to Pillow.

    For an extended file with animation, EXIF or XMP (the demuxer reads those chunks only when
    their flag is set), the chunk headers are walked to count frames and find the metadata,
    which sits after the image data: only the 8-byte chunk headers are read on the way.
    """
    head = need(src, 0, 30, "WebP") if src.size >= 30 else need(src, 0, 25, "WebP")
    riff_end = _U32LE(head, 4)[0] + 8
    if riff_end < 20:
        raise UsePillow
    kind, chunk_len = head[12:16], _U32LE(head, 16)[0]
    if kind == b"VP8 " and len(head) == 30 and chunk_len >= 10:
        tag = head[20] | head[21] << 8 | head[22] << 16
        keyframe, profile, shown = not tag & 1, (tag >> 1) & 7, (tag >> 4) & 1
        if not keyframe or profile > 3 or not shown or tag >> 5 >= chunk_len:
            raise UsePillow
        if head[23:26] != b"\x9d\x01\x2a":
            raise UsePillow
        width, height = _U16LE(head, 26)[0] & 0x3FFF, _U16LE(head, 28)[0] & 0x3FFF
        return StoredHeader("WEBP", width, height, 1)
    if kind == b"VP8L" and chunk_len >= 5 and head[20] == 0x2F:
        bits = _U32LE(head, 21)[0]
        if bits >> 29:
            raise UsePillow  # an unknown VP8L version
        return StoredHeader("WEBP", (bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1, 1)
    if kind == b"VP8X" and len(head) == 30 and chunk_len >= 10:
        flags = head[20]
        width = (head[24] | head[25] << 8 | head[26] << 16) + 1
        height = (head[27] | head[28] << 8 | head[29] << 16) + 1
        orientation = 1
        if flags & (_VP8X_ANIMATION | _VP8X_XMP | _VP8X_EXIF):
            first = 20 + chunk_len + (chunk_len & 1)
            orientation = _walk_webp_chunks(src, first, riff_end, flags)
        return StoredHeader("WEBP", width, height, orientation)
    raise UsePillow


def _walk_webp_chunks(src: ByteSource, pos: int, riff_end: int, flags: int) -> int:
    """The orientation an EXIF or XMP chunk sets; frames are walked past, never read."""
    animation_frames = 0
    exif: tuple[int, int] | None = None
    xmp: tuple[int, int] | None = None
    for _ in range(_WEBP_CHUNKS_LIMIT):
        if pos + 8 > riff_end:
            break
        head = need(src, pos, 8, "WebP")
        kind, length = head[:4], _U32LE(head, 4)[0]
        if kind == b"ANMF":
            animation_frames += 1
        elif kind == b"EXIF" and exif is None and flags & _VP8X_EXIF:
            exif = (pos + 8, length)
        elif kind == b"XMP " and xmp is None and flags & _VP8X_XMP:
            xmp = (pos + 8, length)
        pos += 8 + length + (length & 1)
    else:
        raise UsePillow  # walking this many chunks in Python would be slower than libwebp
    if pos > riff_end or (flags & _VP8X_ANIMATION and not animation_frames):
        raise UsePillow
    value = None
    if exif is not None:
        value = exif_orientation(need(src, exif[0], exif[1], "WebP"))
    if value is None and xmp is not None:
        value = xmp_orientation(need(src, xmp[0], xmp[1], "WebP"))
    return value or 1
