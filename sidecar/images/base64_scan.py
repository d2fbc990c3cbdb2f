"""Strict base64 validation done while the body arrives, so that it costs no time afterwards.

Validating a 4 MB inline image (``validate_base64``) scans every byte once, about a millisecond
or more. Most of that scan can happen while the rest of the body is still on the wire:
``Base64Scan.feed`` checks each received block of ``BLOCK_BYTES`` against the base64 alphabet
and remembers the few blocks that hold anything else (the JSON around a payload, or a bad
character). Once the payloads' spans are known, ``validate`` re-reads only those blocks.

Invariant: ``validate(body, start, end)`` accepts exactly what
``validate_base64(body[start:end])`` accepts, and on a refusal raises that very error (it
calls it to say which character is wrong).
"""

from __future__ import annotations

from bisect import bisect_right

from sidecar.images.probe import validate_base64

ALPHABET = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
BLOCK_BYTES = 1 << 16


class Base64Scan:
    """Which blocks of a body may hold bytes outside the base64 alphabet."""

    __slots__ = ("_dirty_starts", "_size")

    def __init__(self) -> None:
        self._dirty_starts: list[int] = []  # body offsets of blocks holding a non-alphabet byte
        self._size = 0

    @property
    def size(self) -> int:
        """Bytes fed so far."""
        return self._size

    def feed(self, chunk: bytes) -> None:
        """Scan the next bytes of the body, in blocks aligned to ``BLOCK_BYTES``."""
        offset, size = 0, len(chunk)
        while offset < size:
            start = self._size + offset
            take = min(size - offset, BLOCK_BYTES - start % BLOCK_BYTES)
            if chunk[offset : offset + take].translate(None, ALPHABET):
                block = start - start % BLOCK_BYTES
                if not self._dirty_starts or self._dirty_starts[-1] != block:
                    self._dirty_starts.append(block)
            offset += take
        self._size += size

    def validate(self, body: bytes, start: int, end: int) -> None:
        """``validate_base64(body[start:end])``, reading only blocks that may hold strays."""
        payload = memoryview(body)[start:end]
        if self._size != len(body) or (end - start) % 4:
            validate_base64(payload)  # not scanned, or cut short: it raises or checks it all
            return
        body_end = max(start, end - 2)  # the last two characters may be '=' padding
        first = bisect_right(self._dirty_starts, start - BLOCK_BYTES)
        for block in self._dirty_starts[first:]:
            if block >= body_end:
                break
            piece = body[max(block, start) : min(block + BLOCK_BYTES, body_end)]
            if piece.translate(None, ALPHABET):
                validate_base64(payload)  # raises, naming the character
        if body[body_end:end].rstrip(b"=").translate(None, ALPHABET):
            validate_base64(payload)
