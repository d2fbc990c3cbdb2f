"""What every header parser reads, returns and raises.

The contract of every ``parse_*`` in this package:

* read only through a ``ByteSource``, by offset, so that a base64 payload is decoded only
  where header bytes lie;
* return a ``StoredHeader`` for a file whose header it mirrors exactly;
* raise ``UsePillow`` for anything valid-looking but unusual (odd EXIF encodings, a possible
  MPO, APNG quirks, bad checksums, AVIF grids or sequences), so that Pillow decides;
* raise ``TruncatedImageError`` when the data ends inside the header (``need`` does this),
  ``NotAnImageError`` when the header is corrupt in a way Pillow refuses too.
"""

from __future__ import annotations

from typing import NamedTuple, Protocol

from sidecar.errors import TruncatedImageError


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
    orientation: int


class UsePillow(Exception):
    """The file is outside what the parser mirrors exactly; Pillow must decide."""


def need(src: ByteSource, offset: int, length: int, fmt: str) -> bytes:
    """Exactly ``length`` bytes at ``offset``; nothing is read when they cannot all be there."""
    if offset + length > src.size:
        raise TruncatedImageError(
            f"the {fmt} image is truncated: its header needs more than the {src.size} bytes sent"
        )
    return src.read(offset, length)
