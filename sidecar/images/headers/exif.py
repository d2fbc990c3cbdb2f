"""The orientation ``ImageOps.exif_transpose`` would apply, read from EXIF or XMP bytes.

Shared by the JPEG, PNG and WebP parsers. Invariant: a value is returned only for an encoding
Pillow's ``Exif`` reads the same way; anything else raises ``UsePillow`` so that Pillow decides.
"""

from __future__ import annotations

import re
import struct

from sidecar.images.headers.contract import UsePillow

_U16BE = struct.Struct(">H").unpack_from
_U32BE = struct.Struct(">I").unpack_from
_U16LE = struct.Struct("<H").unpack_from
_U32LE = struct.Struct("<I").unpack_from

_ORIENTATION_TAG = 0x0112
_XMP_ORIENTATION = re.compile(rb'tiff:Orientation(="|>)([0-9])')  # Pillow's getexif pattern
_IFD_ENTRY = {"<": struct.Struct("<HHI4s"), ">": struct.Struct(">HHI4s")}


def exif_orientation(exif: bytes) -> int | None:
    """IFD0's Orientation as Pillow's ``Exif`` reads it, or None when the tag is absent.

    Only the plain encoding (one SHORT or LONG, inline, stated once) is read here; anything
    else raises ``UsePillow``, whose ``Exif`` has its own rules for odd types and counts.
    """
    while exif.startswith(b"Exif\x00\x00"):
        exif = exif[6:]
    if not exif:
        return None
    if len(exif) < 8:
        raise UsePillow
    if exif.startswith(b"II*\x00"):
        endian = "<"
    elif exif.startswith(b"MM\x00*"):
        endian = ">"
    else:
        raise UsePillow
    ifd = (_U32LE if endian == "<" else _U32BE)(exif, 4)[0]
    if ifd + 2 > len(exif):
        raise UsePillow
    count = (_U16LE if endian == "<" else _U16BE)(exif, ifd)[0]
    end = ifd + 2 + 12 * count
    if end > len(exif):
        raise UsePillow
    found: list[tuple[int, int, bytes]] = [
        (typ, n, value)
        for tag, typ, n, value in _IFD_ENTRY[endian].iter_unpack(exif[ifd + 2 : end])
        if tag == _ORIENTATION_TAG
    ]
    if not found:
        return None
    if len(found) > 1 or found[0][1] != 1:
        raise UsePillow
    typ, _, value = found[0]
    if typ == 3:  # SHORT
        return int((_U16LE if endian == "<" else _U16BE)(value, 0)[0])
    if typ == 4:  # LONG
        return int((_U32LE if endian == "<" else _U32BE)(value, 0)[0])
    raise UsePillow


def xmp_orientation(xmp: bytes) -> int | None:
    """``tiff:Orientation`` in an XMP packet, which Pillow honours when EXIF has none."""
    match = _XMP_ORIENTATION.search(xmp)
    return int(match[2]) if match else None
