"""PNG: the size, APNG frame count and orientation, from the chunks before the first IDAT.

Mirrors ``PngImageFile._open``, which is too slow for a per-request probe. Invariants: every
chunk before IDAT is read whole and its CRC checked, as Pillow does (a bad CRC, an odd APNG
or EXIF in a text chunk goes to Pillow); nothing from IDAT on is read.

Known difference from vLLM: an ``eXIf`` chunk placed after the pixel data is not seen (vLLM's
``exif_transpose`` finds it only after loading the pixels).
"""

from __future__ import annotations

import re
import struct
import zlib

from sidecar.errors import NotAnImageError
from sidecar.images.headers.contract import ByteSource, StoredHeader, UsePillow, need
from sidecar.images.headers.exif import exif_orientation

_U32BE = struct.Struct(">I").unpack_from

# (bit depth, colour type) pairs Pillow has a mode for.
_PNG_MODES = frozenset(
    ((1, 0), (2, 0), (4, 0), (8, 0), (16, 0), (8, 2), (16, 2), (1, 3), (2, 3), (4, 3), (8, 3),
     (8, 4), (16, 4), (8, 6), (16, 6))
)  # fmt: skip
_PNG_EXIF_TEXT_KEYS = frozenset((b"exif", b"Raw profile type exif", b"XML:com.adobe.xmp"))
_PNG_TEXT = frozenset((b"tEXt", b"zTXt", b"iTXt"))
_CHUNK_TYPE = re.compile(rb"\w\w\w\w")


def parse_png(src: ByteSource) -> StoredHeader:
    """IHDR, then every chunk up to the first IDAT with its CRC, as ``PngImageFile._open``.

    Reads ``eXIf`` before IDAT, as Pillow does before pixels are loaded; an ``eXIf`` after
    IDAT, which vLLM's ``exif_transpose`` would find after loading, is not seen.
    """
    ihdr = need(src, 8, 25, "PNG")
    if ihdr[4:8] != b"IHDR" or _U32BE(ihdr, 0)[0] != 13:
        raise UsePillow
    width, height = _U32BE(ihdr, 8)[0], _U32BE(ihdr, 12)[0]
    if zlib.crc32(ihdr[4:21]) != _U32BE(ihdr, 21)[0]:
        raise UsePillow
    if (ihdr[16], ihdr[17]) not in _PNG_MODES or ihdr[19]:
        raise NotAnImageError(
            f"the PNG header is corrupt: bit depth {ihdr[16]} with colour type {ihdr[17]}"
        )
    pos, frames, default_image, exif = 33, None, True, None
    while True:
        head = need(src, pos, 8, "PNG")
        length, kind = _U32BE(head, 0)[0], head[4:8]
        if not _CHUNK_TYPE.match(kind):
            raise UsePillow
        if kind in (b"IDAT", b"IEND"):
            break
        chunk = need(src, pos + 4, length + 8, "PNG")
        data = chunk[4:-4]
        if zlib.crc32(chunk[:-4]) != _U32BE(chunk, length + 4)[0]:
            raise UsePillow
        if kind == b"eXIf":
            exif = data
        elif kind in _PNG_TEXT and data.split(b"\x00", 1)[0] in _PNG_EXIF_TEXT_KEYS:
            raise UsePillow
        elif kind == b"acTL":
            if frames is not None or length < 8 or not 0 < _U32BE(data, 0)[0] <= 0x80000000:
                raise UsePillow
            frames = _U32BE(data, 0)[0]
        elif kind == b"fcTL":
            if not default_image or length < 26 or _U32BE(data, 0)[0] != 0:
                raise UsePillow
            frame_w, frame_h, x, y = struct.unpack_from(">IIII", data, 4)
            if x + frame_w > width or y + frame_h > height:
                raise UsePillow
            default_image = False
        elif kind == b"fdAT":
            raise UsePillow
        pos += 12 + length
    value = exif_orientation(exif) if exif is not None else None
    return StoredHeader("PNG", width, height, value or 1)
