"""The bytes of one image, read by offset however the client sent them: raw, base64 or a file.

Each source implements ``headers.contract.ByteSource``: a ``size`` in bytes and
``read(offset, length)``, which returns fewer bytes only where the data ends. The header
parsers and Pillow read through them, so only the parts of an image its header needs are
ever copied, decoded or read from disk.

Invariants:

* A base64 payload is decoded only where header bytes lie: a growing prefix from its start
  (1.5 KB first, then at least doubling) plus one window of about 1 KB further on when a
  header points there (a JPEG's EXIF thumbnail or a WebP's pixel data is skipped, not
  decoded). Only the parts decoded are checked for strict base64, and a refusal is a
  ``NotBase64Error`` naming the characters around the fault.
* A file is read in one 64 KB head read, widened geometrically, plus single seeks past it.
* Raw bytes are copied a slice at a time, only the slices asked for.
"""

from __future__ import annotations

import binascii
import os
from typing import IO

from sidecar.errors import NotBase64Error
from sidecar.images.data_uri import ascii_bytes, short_base64_error

_HEAD_CHARS = 2048  # the first decode: 1.5 KB, a whole header for most files without EXIF
_WINDOW_CHARS = 1368  # a read far from the start decodes at least about 1 KB around it
_FILE_HEAD_BYTES = 1 << 16  # one read covers the header of almost every file


class BytesSource:
    """Raw bytes; a read copies only the slice asked for."""

    __slots__ = ("_data", "size")

    def __init__(self, data: bytes | memoryview) -> None:
        self._data = data
        self.size = len(data)

    def read(self, offset: int, length: int) -> bytes:
        """Up to ``length`` bytes from ``offset``."""
        return bytes(self._data[offset : offset + length])


class Base64Source:
    """Decodes a base64 payload on demand: a growing prefix plus one window further on."""

    __slots__ = (
        "_chars",
        "_head",
        "_payload",
        "_short_tail",
        "_start",
        "_window",
        "_window_at",
        "size",
    )

    def __init__(self, payload: str | bytes | memoryview, start: int) -> None:
        """``start`` is the offset of the base64 text in ``payload`` (after a data URL's comma)."""
        self._payload = payload
        self._start = start
        self._chars = (len(payload) - start) // 4 * 4
        self._short_tail = (len(payload) - start) % 4 != 0
        if self._short_tail and not self._chars:
            raise short_base64_error()
        end = start + self._chars
        tail = ascii_bytes(payload[end - 2 : end]) if self._chars else b""
        self.size = self._chars // 4 * 3 - (len(tail) - len(tail.rstrip(b"=")))
        self._head = b""
        self._window = b""
        self._window_at = 0

    def read(self, offset: int, length: int) -> bytes:
        """Up to ``length`` decoded bytes from ``offset``, decoding only what is not cached."""
        stop = min(offset + length, self.size)
        if stop <= len(self._head) or offset >= stop:
            return self._head[offset:stop]
        if offset <= len(self._head):
            wanted = max(stop, 2 * len(self._head), _HEAD_CHARS // 4 * 3)
            self._head = self._decode(0, wanted)
            return self._head[offset:stop]
        at = offset - self._window_at
        if at < 0 or stop - self._window_at > len(self._window):
            self._window_at = offset // 3 * 3
            self._window = self._decode(self._window_at, max(stop, offset + _WINDOW_CHARS // 4 * 3))
            at = offset - self._window_at
        return self._window[at : at + stop - offset]

    def _decode(self, byte_start: int, byte_stop: int) -> bytes:
        first = self._start + byte_start // 3 * 4
        last = min(self._start + -(-byte_stop // 3) * 4, self._start + self._chars)
        at_end = last == self._start + self._chars
        if at_end and self._short_tail:
            raise short_base64_error()
        try:
            decoded = binascii.a2b_base64(self._payload[first:last], strict_mode=True)
        except ValueError as exc:
            raise NotBase64Error(
                f"the image data is not strict base64 (between characters {first - self._start} "
                f"and {last - self._start}: {exc}); send standard base64 without line breaks "
                "or spaces, '=' only as final padding"
            ) from exc
        expected = (last - first) // 4 * 3
        if len(decoded) != expected and not (at_end and len(decoded) >= expected - 2):
            raise NotBase64Error("the image data is not strict base64: '=' before its end")
        return decoded


class FileSource:
    """An open file; the head is read once and widened, reads far past it seek."""

    __slots__ = ("_file", "_head", "size")

    def __init__(self, file: IO[bytes]) -> None:
        self._file = file
        self.size = os.fstat(file.fileno()).st_size
        self._head = b""

    def read(self, offset: int, length: int) -> bytes:
        """Up to ``length`` bytes from ``offset``."""
        stop = offset + length
        if stop > len(self._head) and len(self._head) < self.size:
            if offset > max(len(self._head), _FILE_HEAD_BYTES):
                self._file.seek(offset)
                return self._file.read(length)
            self._file.seek(0)
            self._head = self._file.read(max(stop, 2 * len(self._head), _FILE_HEAD_BYTES))
        return self._head[offset:stop]
