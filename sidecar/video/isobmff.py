"""Two facts from MP4/MOV (ISO base media) boxes that PyAV does not expose.

* The display rotation. FFmpeg's mov demuxer builds the stream's display matrix as the
  track's ``tkhd`` matrix times the movie's ``mvhd`` matrix (``mov_read_tkhd``); OpenCV reads
  ``-round(av_display_rotation_get(matrix))`` and rotates decoded frames by 90, 180 or 270
  degrees (``CAP_PROP_ORIENTATION_AUTO`` is on by default). PyAV 18 can set a stream's matrix
  but not read it, so the boxes are read here, with the same arithmetic.
* Whether the index (``moov``) can be reached from a prefix: a file written without
  ``faststart`` keeps it after the media data (``mdat``), possibly gigabytes in.

Only box headers are walked; sizes that point past the data end the walk.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Iterator
from enum import Enum

# Top-level box types a QuickTime or MP4 file may start with.
FILE_START_BOXES = frozenset((b"ftyp", b"moov", b"mdat", b"free", b"skip", b"wide", b"pnot"))
Matrix = tuple[tuple[int, ...], ...]  # 3x3, rows of signed fixed-point integers

_IDENTITY: Matrix = ((1 << 16, 0, 0), (0, 1 << 16, 0), (0, 0, 1 << 30))
_FIXED_SHIFTS = (16, 16, 30)  # a, b, c, d are 16.16 fixed point; u, v, w are 2.30


class IndexReach(Enum):
    """Where a prefix stands with respect to the ``moov`` box."""

    COMPLETE = "complete"  # the whole moov lies in the prefix
    NEEDS_MORE = "needs_more"  # a longer prefix, within the limit, may hold it
    BEYOND_LIMIT = "beyond_limit"  # it starts after the byte limit (moov at the end)


def is_isobmff(data: bytes) -> bool:
    """Whether ``data`` opens with a QuickTime/MP4 box."""
    return len(data) >= 8 and data[4:8] in FILE_START_BOXES


def index_reach(prefix: bytes, limit_bytes: int) -> IndexReach:
    """Whether a prefix of at most ``limit_bytes`` can hold the file's ``moov`` box."""
    pos = 0
    while pos + 8 <= len(prefix):
        box_type, _, end = _box_at(prefix, pos, None)
        if box_type == b"moov":
            return IndexReach.COMPLETE if end <= len(prefix) else _within(end, limit_bytes)
        if end > limit_bytes:
            return IndexReach.BEYOND_LIMIT
        pos = end
    return IndexReach.NEEDS_MORE


def display_rotation_degrees(data: bytes, track_id: int | None) -> int:
    """OpenCV's rotation angle for the video track: 0 to 359, clockwise; 0 without a matrix.

    ``track_id`` is the stream's ``id`` (the ``tkhd`` track ID); None takes the first track.
    """
    moov = next((span for kind, *span in _children(data, 0, len(data)) if kind == b"moov"), None)
    if moov is None:
        return 0
    movie = _IDENTITY
    track_matrix: Matrix | None = None
    for kind, start, end in _children(data, *moov):
        if kind == b"mvhd":
            movie = _matrix(data, start, mvhd=True)
        elif kind == b"trak" and track_matrix is None:
            tkhd = next((s for k, *s in _children(data, start, end) if k == b"tkhd"), None)
            if tkhd is not None and track_id in (None, _track_id(data, tkhd[0])):
                track_matrix = _matrix(data, tkhd[0], mvhd=False)
    if track_matrix is None:
        return 0
    m = [
        [sum((track_matrix[i][e] * movie[e][j]) >> _FIXED_SHIFTS[e] for e in range(3))
         for j in range(3)]
        for i in range(3)
    ]  # fmt: skip
    scale_x, scale_y = math.hypot(m[0][0], m[1][0]), math.hypot(m[0][1], m[1][1])
    if scale_x == 0 or scale_y == 0:
        return 0
    # av_display_rotation_get returns minus this angle; OpenCV negates it again and rounds.
    angle = math.degrees(math.atan2(m[0][1] / scale_y, m[0][0] / scale_x))
    return math.floor(angle + 0.5) % 360


def _within(end: int, limit_bytes: int) -> IndexReach:
    return IndexReach.NEEDS_MORE if end <= limit_bytes else IndexReach.BEYOND_LIMIT


def _box_at(data: bytes, pos: int, parent_end: int | None) -> tuple[bytes, int, int]:
    """(type, payload start, end) of the box at ``pos``; the end may lie past ``data``."""
    size, box_type = struct.unpack_from(">I4s", data, pos)
    header = 8
    if size == 1 and pos + 16 <= len(data):
        size, header = struct.unpack_from(">Q", data, pos + 8)[0], 16
    elif size == 0:  # the box runs to the end of its parent (or of the file)
        size = (len(data) if parent_end is None else parent_end) - pos
    return box_type, pos + header, pos + max(size, header)


def _children(data: bytes, start: int, end: int) -> Iterator[tuple[bytes, int, int]]:
    """The boxes between ``start`` and ``end`` that lie wholly inside ``data``."""
    pos = start
    while pos + 8 <= min(end, len(data)):
        box_type, payload, box_end = _box_at(data, pos, end)
        if box_end > min(end, len(data)):
            return
        yield box_type, payload, box_end
        pos = box_end


def _track_id(data: bytes, tkhd: int) -> int:
    version = data[tkhd]
    return int(struct.unpack_from(">I", data, tkhd + (20 if version == 1 else 12))[0])


def _matrix(data: bytes, payload: int, *, mvhd: bool) -> Matrix:
    """The 3x3 matrix of an ``mvhd`` or ``tkhd`` payload, as signed fixed-point integers."""
    version = data[payload]
    if mvhd:  # version/flags, times, timescale, duration, rate, volume, reserved
        offset = 4 + (28 if version == 1 else 16) + 4 + 2 + 10
    else:  # version/flags, times, track ID, reserved, duration, reserved, layer... volume
        offset = 4 + (32 if version == 1 else 20) + 8 + 2 + 2 + 2 + 2
    if payload + offset + 36 > len(data):
        return _IDENTITY
    values = struct.unpack_from(">9i", data, payload + offset)
    return (values[0:3], values[3:6], values[6:9])
