"""GIF: the size Pillow reports, from the logical screen and frame 0's image descriptor.

Mirrors ``GifImageFile._seek(0)``, which is too slow for a per-request probe. Invariants: the
blocks before frame 0 are skipped by their sub-block lengths, in windows of 8 KB; the frame
count is None, since GIF has no frame table and counting means walking every block.
"""

from __future__ import annotations

import re
import struct

from sidecar.errors import NotAnImageError
from sidecar.images.headers.contract import ByteSource, StoredHeader, UsePillow, need

_U16LE = struct.Struct("<H").unpack_from

_GIF_BLOCK = re.compile(rb"[!,;]")
_WINDOW_BYTES = 8192


def parse_gif(src: ByteSource) -> StoredHeader:
    """Logical screen, then blocks up to frame 0's descriptor, as ``GifImageFile._seek(0)``.

    Pillow widens the size when frame 0 reaches past the logical screen; so does this.
    The frame count is None: GIF has no frame table, and counting means walking every block.
    """
    screen = need(src, 0, 13, "GIF")
    width, height, flags = _U16LE(screen, 6)[0], _U16LE(screen, 8)[0], screen[10]
    pos = 13 + (3 << ((flags & 7) + 1) if flags & 0x80 else 0)
    while True:
        block = need(src, pos, 1, "GIF")
        if block == b"!":
            label = need(src, pos + 1, 2, "GIF")
            if label[0] == 0xF9 and 0 < label[1] < 3:
                raise UsePillow  # Pillow cannot read a graphic control block this short
            pos = _skip_sub_blocks(src, pos + 2)
        elif block == b",":
            descriptor = need(src, pos + 1, 9, "GIF")
            x, y, frame_w, frame_h = struct.unpack_from("<4H", descriptor)
            pos += 10
            if descriptor[8] & 0x80:
                pos += 3 << ((descriptor[8] & 7) + 1)
            need(src, pos, 1, "GIF")  # LZW code size, the last byte Pillow reads
            return StoredHeader("GIF", max(width, x + frame_w), max(height, y + frame_h), 1)
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
            need(src, pos + at, 1, "GIF")
        pos += at
