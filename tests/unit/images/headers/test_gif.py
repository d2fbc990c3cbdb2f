"""images.headers.gif: the size Pillow reports from the logical screen and frame 0."""

from __future__ import annotations

import struct

import pytest

from sidecar.errors import NotAnImageError, TruncatedImageError
from sidecar.images.byte_sources import BytesSource
from sidecar.images.headers.gif import parse_gif
from tests.support.headers import CountingSource, encode, frames, pillow_stored, scene


def _gif(screen: tuple[int, int], frame: tuple[int, int], before_frame: bytes = b"") -> bytes:
    """A GIF without colour tables: screen, optional blocks, then frame 0 and its data."""
    return (
        b"GIF89a"
        + struct.pack("<HHBBB", *screen, 0, 0, 0)
        + before_frame
        + b","
        + struct.pack("<HHHHB", 0, 0, *frame, 0)
        + b"\x02\x02\x44\x01\x00;"
    )


@pytest.mark.parametrize(
    "raw",
    [
        encode(scene(1, 1, "P"), "GIF"),
        encode(scene(97, 31, "P"), "GIF"),
        frames("GIF", 3, loop=0, comment=b"x" * 300),
        _gif((10, 3), (20, 5)),
    ],
    ids=["1x1", "97x31", "animated-with-comment", "frame-wider-than-screen"],
)
def test_parse_gif_reads_what_pillow_reads(raw: bytes) -> None:
    assert parse_gif(BytesSource(raw)) == pillow_stored(raw)


def test_parse_gif_widens_the_size_when_frame_0_reaches_past_the_screen() -> None:
    header = parse_gif(BytesSource(_gif((10, 3), (20, 5))))
    assert (header.width_px, header.height_px) == (20, 5)


def test_parse_gif_skips_large_extension_blocks_by_their_lengths() -> None:
    comment = b"!\xfe" + (b"\xff" + b"c" * 255) * 200 + b"\x00"  # 200 sub-blocks of 255 bytes
    raw = _gif((16, 8), (16, 8), before_frame=comment)
    source = CountingSource(raw)
    assert parse_gif(source) == pillow_stored(raw)
    assert source.furthest_byte >= 200 * 255  # it walked to frame 0, past 50 KB of comment
    assert len(source.reads) < 20  # in windows, not a read per sub-block


def test_parse_gif_refuses_a_file_whose_trailer_comes_before_any_frame() -> None:
    with pytest.raises(NotAnImageError, match="trailer"):
        parse_gif(BytesSource(b"GIF89a" + struct.pack("<HHBBB", 4, 4, 0, 0, 0) + b";"))


@pytest.mark.parametrize("keep", [8, 13, 20])
def test_parse_gif_says_truncated_when_the_file_ends_inside_the_header(keep: int) -> None:
    with pytest.raises(TruncatedImageError):
        parse_gif(BytesSource(_gif((16, 8), (16, 8))[:keep]))
