"""AVIF, and the ISOBMFF boxes it is made of: the primary item's size and orientation.

Pillow's AVIF plugin gives libavif the whole file; this reads the ``ftyp`` box, the headers
of the top-level boxes and the ``meta`` box (1 MB at most) only. Sequences, grids and
anything else unusual go to Pillow. ``ftyp_brands`` serves the dispatch, which tells AVIF
from the ISO formats vLLM does not open (HEIF) by brand.
"""

from __future__ import annotations

import struct

from sidecar.errors import NotAnImageError
from sidecar.images.headers.contract import ByteSource, StoredHeader, UsePillow, need

_U16BE = struct.Struct(">H").unpack_from
_U32BE = struct.Struct(">I").unpack_from

AVIF_BRANDS = frozenset((b"avif", b"avis"))
# irot angle (anticlockwise quarter turns) and imir axis -> the EXIF orientation Pillow derives.
_AVIF_ORIENTATION = {
    (0, None): 1, (1, None): 8, (2, None): 3, (3, None): 6,
    (0, 0): 4, (1, 0): 5, (2, 0): 2, (3, 0): 7,
    (0, 1): 2, (1, 1): 7, (2, 1): 4, (3, 1): 5,
}  # fmt: skip
_META_BYTES_LIMIT = 1 << 20


def ftyp_brands(src: ByteSource) -> tuple[bytes, frozenset[bytes], int]:
    """Major brand, all brands and the end of an ISOBMFF file's leading ``ftyp`` box."""
    kind, body, end = _box(src, 0, "ISOBMFF")
    if kind != b"ftyp" or end - body < 8:
        raise NotAnImageError("the ISO media file has no valid 'ftyp' box")
    brands = need(src, body, end - body, "ISOBMFF")
    compatible = {brands[at : at + 4] for at in range(8, len(brands) - 3, 4)}
    return brands[:4], frozenset((brands[:4], *compatible)), end


def parse_avif(src: ByteSource) -> StoredHeader:
    """The primary item's ``ispe`` size and ``irot``/``imir`` orientation, as libavif reads it.

    Pillow's AVIF plugin gives libavif the whole file; this reads the top-level box headers
    and the ``meta`` box only. Sequences, grids and anything else unusual go to Pillow.
    """
    major, _, pos = ftyp_brands(src)
    if major == b"avis":
        raise UsePillow
    meta: bytes | None = None
    while pos < src.size and not (meta is not None and major == b"avif"):
        kind, body, end = _box(src, pos, "AVIF")
        if kind == b"meta":
            if meta is not None or end - body > _META_BYTES_LIMIT:
                raise UsePillow
            meta = need(src, body, end - body, "AVIF")
        elif kind == b"moov":
            raise UsePillow  # without the 'avif' major brand, libavif prefers the track
        elif end > src.size and (meta is None or major != b"avif"):
            need(src, end, 8, "AVIF")  # what follows this box is still needed
        pos = end
    if meta is None:
        raise NotAnImageError("the AVIF file has no 'meta' box")
    try:
        return _avif_primary_item(meta)
    except (struct.error, IndexError):
        raise UsePillow from None


def _box(src: ByteSource, pos: int, fmt: str) -> tuple[bytes, int, int]:
    """Type, body offset and end offset of the box at ``pos``; only its header is read."""
    head = need(src, pos, 8, fmt)
    size, kind, body = _U32BE(head, 0)[0], head[4:8], pos + 8
    if size == 1:
        size, body = struct.unpack(">Q", need(src, pos + 8, 8, fmt))[0], pos + 16
    elif size == 0:
        size = max(src.size - pos, 8)
    if size < body - pos:
        raise NotAnImageError(f"the {fmt} file is corrupt: box {kind!r} has size {size}")
    return kind, body, pos + size


def _children(data: bytes, pos: int = 0) -> list[tuple[bytes, bytes]]:
    """(type, body) of each box in an in-memory box body, in file order."""
    children: list[tuple[bytes, bytes]] = []
    while pos + 8 <= len(data):
        size, kind = _U32BE(data, pos)[0], data[pos + 4 : pos + 8]
        if size < 8 or pos + size > len(data):
            raise UsePillow
        children.append((kind, data[pos + 8 : pos + size]))
        pos += size
    return children


def _by_type(children: list[tuple[bytes, bytes]]) -> dict[bytes, list[bytes]]:
    found: dict[bytes, list[bytes]] = {}
    for kind, body in children:
        found.setdefault(kind, []).append(body)
    return found


def _avif_primary_item(meta: bytes) -> StoredHeader:
    children = _by_type(_children(meta, 4))
    try:
        (pitm,) = children[b"pitm"]
        (iinf,) = children[b"iinf"]
        (iprp,) = children[b"iprp"]
    except (KeyError, ValueError):
        raise UsePillow from None
    primary = _U16BE(pitm, 4)[0] if pitm[0] == 0 else _U32BE(pitm, 4)[0]
    item_types = _item_types(iinf)
    if item_types.get(primary) != b"av01":
        raise UsePillow
    properties = _by_type(_children(iprp))
    try:
        (ipco,) = properties[b"ipco"]
        associations = [i for ipma in properties[b"ipma"] for i in _associations(ipma, primary)]
    except (KeyError, ValueError):
        raise UsePillow from None
    props = _children(ipco)
    ispe = angle = axis = None
    for index in associations:
        if not 0 < index <= len(props):
            raise UsePillow
        kind, body = props[index - 1]
        if kind == b"ispe" and ispe is None and len(body) >= 12:
            ispe = (_U32BE(body, 4)[0], _U32BE(body, 8)[0])
        elif kind == b"irot" and body:
            angle = body[0] & 3
        elif kind == b"imir" and body:
            axis = body[0] & 1
    if ispe is None:
        raise UsePillow
    orientation = _AVIF_ORIENTATION[(angle or 0, axis)]
    if orientation == 1 and b"mime" in item_types.values():
        raise UsePillow  # an XMP packet may carry tiff:Orientation
    return StoredHeader("AVIF", ispe[0], ispe[1], orientation)


def _item_types(iinf: bytes) -> dict[int, bytes]:
    pos = 6 if iinf[0] == 0 else 8
    types: dict[int, bytes] = {}
    for infe in _by_type(_children(iinf, pos)).get(b"infe", []):
        version = infe[0]
        if version == 2 and len(infe) >= 12:
            types[_U16BE(infe, 4)[0]] = infe[8:12]
        elif version == 3 and len(infe) >= 14:
            types[_U32BE(infe, 4)[0]] = infe[10:14]
        else:
            raise UsePillow
    return types


def _associations(ipma: bytes, item: int) -> list[int]:
    version, wide = ipma[0], ipma[3] & 1
    count, pos = _U32BE(ipma, 4)[0], 8
    for _ in range(count):
        if version < 1:
            item_id, pos = _U16BE(ipma, pos)[0], pos + 2
        else:
            item_id, pos = _U32BE(ipma, pos)[0], pos + 4
        n = ipma[pos]
        pos += 1
        if wide:
            indices = [v & 0x7FFF for v in struct.unpack_from(f">{n}H", ipma, pos)]
            pos += 2 * n
        else:
            indices = [v & 0x7F for v in ipma[pos : pos + n]]
            pos += n
        if item_id == item:
            return indices
    return []
