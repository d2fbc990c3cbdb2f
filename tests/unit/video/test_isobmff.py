"""video.isobmff: walking MP4/MOV boxes for the index and the display rotation."""

from __future__ import annotations

import pytest

from sidecar.video.isobmff import IndexReach, display_rotation_degrees, index_reach


def test_display_rotation_is_zero_for_a_file_without_a_movie_box() -> None:
    assert display_rotation_degrees(b"\x00\x00\x00\x08free", None) == 0


def _box(kind: bytes, payload: bytes = b"", *, size: int | None = None) -> bytes:
    return (len(payload) + 8 if size is None else size).to_bytes(4) + kind + payload


@pytest.mark.parametrize(
    ("prefix", "reach"),
    [
        (_box(b"ftyp", b"isom") + _box(b"moov", b"x" * 8), IndexReach.COMPLETE),
        (_box(b"ftyp", b"isom") + _box(b"moov", size=4096), IndexReach.NEEDS_MORE),
        (_box(b"ftyp", b"isom") + _box(b"moov", size=1 << 30), IndexReach.BEYOND_LIMIT),
        (_box(b"ftyp") + _box(b"mdat", (1 << 40).to_bytes(8), size=1), IndexReach.BEYOND_LIMIT),
        (_box(b"ftyp") + _box(b"mdat", b"x" * 32, size=0), IndexReach.NEEDS_MORE),
    ],
    ids=["moov-inside", "moov-cut", "moov-too-big", "64-bit-mdat", "mdat-to-the-end"],
)
def test_index_reach_walks_top_level_boxes(prefix: bytes, reach: IndexReach) -> None:
    assert index_reach(prefix, 1 << 20) is reach
