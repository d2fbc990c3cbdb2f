"""Hand-written header parsers for JPEG, PNG, GIF, WebP and AVIF.

Pillow is the oracle; these exist because Pillow is too slow for a per-request probe (JPEG,
PNG, GIF) or needs the whole file (WebP and AVIF hand it to libwebp and libavif). Each parser
mirrors what Pillow's plugin reads for frame 0 of a *valid* file: the size as stored, the frame
count where the header holds it, and the orientation ``ImageOps.exif_transpose`` would apply.

They read through a ``ByteSource``, by offset, so that a base64 payload is decoded only where
header bytes lie: a JPEG's 60 KB EXIF thumbnail or a WebP's pixel data is skipped, not decoded.

The contract of every ``parse_*``:

* return a ``StoredHeader`` for a file whose header it mirrors exactly;
* raise ``UsePillow`` for anything valid-looking but unusual (odd EXIF encodings, a possible
  MPO, APNG quirks, bad checksums, AVIF grids or sequences), so that Pillow decides;
* raise ``TruncatedImageError`` when the data ends inside the header, ``NotAnImageError``
  when the header is corrupt in a way Pillow refuses too.
"""

from __future__ import annotations

import re
import struct
import zlib
from typing import NamedTuple, Protocol

from sidecar.errors import NotAnImageError, TruncatedImageError

_U16BE = struct.Struct(">H").unpack_from
_U32BE = struct.Struct(">I").unpack_from
_U16LE = struct.Struct("<H").unpack_from
_U32LE = struct.Struct("<I").unpack_from


class ByteSource(Protocol):
    """Random access to the bytes of one image, however they are held."""

    size: int

    def read(self, offset: int, length: int) -> bytes:
        """Up to ``length`` bytes from ``offset``; fewer only where the data ends."""
        ...


class StoredHeader(NamedTuple):
    """What a header says, before EXIF orientation is applied."""

    format: str
    width_px: int
    height_px: int
    frame_count: int | None
    orientation: int


class UsePillow(Exception):
    """The file is outside what the parser mirrors exactly; Pillow must decide."""


def _need(src: ByteSource, offset: int, length: int, fmt: str) -> bytes:
    """Exactly ``length`` bytes at ``offset``; nothing is read when they cannot all be there."""
    if offset + length > src.size:
        raise TruncatedImageError(
            f"the {fmt} image is truncated: its header needs more than the {src.size} bytes sent"
        )
    return src.read(offset, length)


# ----------------------------------------------------------------------------- EXIF and XMP

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


# ----------------------------------------------------------------------------- JPEG

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
            _need(src, pos, 4, "JPEG")
        body, body_len = pos + 4, max(((head[2] << 8) | head[3]) - 2, 0)  # as Pillow: <2 is 0
        pos = body + body_len
        if marker == _SOS:
            if pos > src.size:
                _need(src, body, body_len, "JPEG")
            break
        if marker in _SOF:
            frame = _need(src, body, body_len, "JPEG")
            if body_len < 6 or (body_len - 6) % 3:
                raise NotAnImageError("the JPEG header is corrupt: bad frame header length")
            if frame[0] != 8 or frame[5] not in (1, 3, 4):
                raise NotAnImageError(
                    f"the JPEG has {frame[0]}-bit samples in {frame[5]} components; "
                    "only 8-bit greyscale, RGB and CMYK JPEGs can be read"
                )
            size = (_U16BE(frame, 3)[0], _U16BE(frame, 1)[0])
        elif marker == 0xDB:
            _check_quantization_tables(_need(src, body, body_len, "JPEG"))
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
    return StoredHeader("JPEG", size[0], size[1], 1, _jpeg_orientation(src, exif, xmp))


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


# ----------------------------------------------------------------------------- PNG

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
    ihdr = _need(src, 8, 25, "PNG")
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
        head = _need(src, pos, 8, "PNG")
        length, kind = _U32BE(head, 0)[0], head[4:8]
        if not _CHUNK_TYPE.match(kind):
            raise UsePillow
        if kind in (b"IDAT", b"IEND"):
            break
        chunk = _need(src, pos + 4, length + 8, "PNG")
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
    if frames is not None and default_image:
        frames += 1  # the IDAT image is shown before the animation, as an extra frame
    value = exif_orientation(exif) if exif is not None else None
    return StoredHeader("PNG", width, height, frames or 1, value or 1)


# ----------------------------------------------------------------------------- GIF

_GIF_BLOCK = re.compile(rb"[!,;]")
_WINDOW_BYTES = 8192


def parse_gif(src: ByteSource) -> StoredHeader:
    """Logical screen, then blocks up to frame 0's descriptor, as ``GifImageFile._seek(0)``.

    Pillow widens the size when frame 0 reaches past the logical screen; so does this.
    The frame count is None: GIF has no frame table, and counting means walking every block.
    """
    screen = _need(src, 0, 13, "GIF")
    width, height, flags = _U16LE(screen, 6)[0], _U16LE(screen, 8)[0], screen[10]
    pos = 13 + (3 << ((flags & 7) + 1) if flags & 0x80 else 0)
    while True:
        block = _need(src, pos, 1, "GIF")
        if block == b"!":
            label = _need(src, pos + 1, 2, "GIF")
            if label[0] == 0xF9 and 0 < label[1] < 3:
                raise UsePillow  # Pillow cannot read a graphic control block this short
            pos = _skip_sub_blocks(src, pos + 2)
        elif block == b",":
            descriptor = _need(src, pos + 1, 9, "GIF")
            x, y, frame_w, frame_h = struct.unpack_from("<4H", descriptor)
            pos += 10
            if descriptor[8] & 0x80:
                pos += 3 << ((descriptor[8] & 7) + 1)
            _need(src, pos, 1, "GIF")  # LZW code size, the last byte Pillow reads
            return StoredHeader("GIF", max(width, x + frame_w), max(height, y + frame_h), None, 1)
        elif block == b";":
            raise NotAnImageError("the GIF holds no image: its trailer comes before any frame")
        else:  # Pillow skips stray bytes between blocks
            window = src.read(pos, _WINDOW_BYTES)
            found = _GIF_BLOCK.search(window)
            pos += found.start() if found else len(window)


def _skip_sub_blocks(src: ByteSource, pos: int) -> int:
    """Position after the zero-length block that ends a run of data sub-blocks."""
    while True:
        window = src.read(pos, _WINDOW_BYTES)
        at = 0
        while at < len(window):
            if window[at] == 0:
                return pos + at + 1
            at += window[at] + 1
        if len(window) < _WINDOW_BYTES:
            _need(src, pos + at, 1, "GIF")
        pos += at


# ----------------------------------------------------------------------------- WebP

_VP8X_ANIMATION, _VP8X_XMP, _VP8X_EXIF = 0x02, 0x04, 0x08
_WEBP_CHUNKS_LIMIT = 4096


def parse_webp(src: ByteSource) -> StoredHeader:
    """The first chunk's size, as libwebp's demuxer reports it to Pillow.

    For an extended file with animation, EXIF or XMP (the demuxer reads those chunks only when
    their flag is set), the chunk headers are walked to count frames and find the metadata,
    which sits after the image data: only the 8-byte chunk headers are read on the way.
    """
    head = _need(src, 0, 30, "WebP") if src.size >= 30 else _need(src, 0, 25, "WebP")
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
        return StoredHeader("WEBP", width, height, 1, 1)
    if kind == b"VP8L" and chunk_len >= 5 and head[20] == 0x2F:
        bits = _U32LE(head, 21)[0]
        if bits >> 29:
            raise UsePillow  # an unknown VP8L version
        return StoredHeader("WEBP", (bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1, 1, 1)
    if kind == b"VP8X" and len(head) == 30 and chunk_len >= 10:
        flags = head[20]
        width = (head[24] | head[25] << 8 | head[26] << 16) + 1
        height = (head[27] | head[28] << 8 | head[29] << 16) + 1
        frames, orientation = 1, 1
        if flags & (_VP8X_ANIMATION | _VP8X_XMP | _VP8X_EXIF):
            first = 20 + chunk_len + (chunk_len & 1)
            frames, orientation = _walk_webp_chunks(src, first, riff_end, flags)
        return StoredHeader("WEBP", width, height, frames, orientation)
    raise UsePillow


def _walk_webp_chunks(src: ByteSource, pos: int, riff_end: int, flags: int) -> tuple[int, int]:
    animation_frames = 0
    exif: tuple[int, int] | None = None
    xmp: tuple[int, int] | None = None
    for _ in range(_WEBP_CHUNKS_LIMIT):
        if pos + 8 > riff_end:
            break
        head = _need(src, pos, 8, "WebP")
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
        value = exif_orientation(_need(src, exif[0], exif[1], "WebP"))
    if value is None and xmp is not None:
        value = xmp_orientation(_need(src, xmp[0], xmp[1], "WebP"))
    return (animation_frames if flags & _VP8X_ANIMATION else 1), value or 1


# ----------------------------------------------------------------------------- AVIF

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
    kind, body, end = _box(src, 0, "AVIF/HEIF")
    if kind != b"ftyp" or end - body < 8:
        raise NotAnImageError("the ISO media file has no valid 'ftyp' box")
    brands = _need(src, body, end - body, "AVIF/HEIF")
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
            meta = _need(src, body, end - body, "AVIF")
        elif kind == b"moov":
            raise UsePillow  # without the 'avif' major brand, libavif prefers the track
        elif end > src.size and (meta is None or major != b"avif"):
            _need(src, end, 8, "AVIF")  # what follows this box is still needed
        pos = end
    if meta is None:
        raise NotAnImageError("the AVIF file has no 'meta' box")
    try:
        return _avif_primary_item(meta)
    except (struct.error, IndexError):
        raise UsePillow from None


def boxes_fit(src: ByteSource) -> bool:
    """Whether the top-level boxes of an ISOBMFF file end within the data (it is not cut)."""
    pos = 0
    try:
        while pos < src.size:
            pos = _box(src, pos, "ISOBMFF")[2]
    except (TruncatedImageError, NotAnImageError):
        return False
    return pos <= src.size


def _box(src: ByteSource, pos: int, fmt: str) -> tuple[bytes, int, int]:
    """Type, body offset and end offset of the box at ``pos``; only its header is read."""
    head = _need(src, pos, 8, fmt)
    size, kind, body = _U32BE(head, 0)[0], head[4:8], pos + 8
    if size == 1:
        size, body = struct.unpack(">Q", _need(src, pos + 8, 8, fmt))[0], pos + 16
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
    return StoredHeader("AVIF", ispe[0], ispe[1], 1, orientation)


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
