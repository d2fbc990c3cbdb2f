"""Lifting: the request body's large strings swapped for placeholders before the parse.

A 5 MB body is nearly all one base64 payload, and parsing that costs far more than
everything else. So before ``orjson.loads``, the raw bytes are scanned for strings that open
with ``"data:`` (data URIs) and for string values under a ``"data"`` key (Anthropic and
``input_audio`` base64). Each one's closing quote is found with a one-byte ``bytes.find``
(memchr speed), the string is *lifted*: a small copy of the body holding the placeholder
``"\\u0000<n>"`` in its place is parsed instead, and each :class:`Lift` points back into the
original bytes. A lifted string whose bytes hold a backslash (JSON allows ``\\/`` in base64)
is decoded on its own with orjson: the slow path. :func:`splice` writes new bytes into the
body as sent, in place of given spans.

Invariants:

* The scan never searches inside a payload for more than one byte, and it stops after
  ``2 * limit`` candidates; a string it does not lift (``DATA:`` in capitals, past the cap)
  stays in the body for the full parse.
* Placeholders start with NUL; when the body sends NUL characters of its own, a random tag
  follows the NUL so that no client string can pass for a placeholder.
* The body as sent is never changed: lifting parses a copy, and :func:`splice` returns a
  new body that differs from it only in the given spans.
"""

from __future__ import annotations

import secrets
from collections.abc import Sequence

import orjson

from sidecar.body.refs import Lift

_MARKER = b"\\u0000"
_JSON_SPACE = (0x20, 0x09, 0x0A, 0x0D)


def splice(body: bytes, replacements: Sequence[tuple[tuple[int, int], bytes]]) -> bytes:
    """``body`` with each ``[start, end)`` span replaced; every other byte is kept.

    Spans must not overlap. The new bytes go between JSON quotes as they are, so they must
    hold neither ``"`` nor a backslash (a data URI or base64 never does).
    """
    view, pos = memoryview(body), 0
    out: list[bytes | memoryview] = []
    for (start, end), new in sorted(replacements, key=lambda item: item[0]):
        if not pos <= start <= end <= len(body):
            raise ValueError(f"span [{start}, {end}) overlaps another or leaves the body")
        if b'"' in new or b"\\" in new:
            raise ValueError("a replacement must not contain a quote or a backslash")
        out += (view[pos:start], new)
        pos = end
    out.append(view[pos:])
    return b"".join(out)


def lift_strings(body: bytes, limit: int) -> tuple[bytes, dict[str, Lift]]:
    """The body with data-URI strings and ``"data"`` string values swapped for placeholders."""
    lifts: list[Lift] = []
    find, pos = body.find, 0
    for _ in range(2 * limit):
        quote = find(b'"data', pos)
        if quote < 0 or len(lifts) >= limit:
            break
        pos = quote + 5
        after = body[pos : pos + 1]
        if after not in (b":", b'"') or _escaped(body, quote):
            continue
        start = quote + 1
        if after == b'"':  # the key "data": lift its value if that is a string
            colon = _skip_space(body, pos + 1)
            start = _skip_space(body, colon + 1) + 1
            if body[colon : colon + 1] != b":" or body[start - 1 : start] != b'"':
                continue
        end = _string_end(body, start)
        if end < 0:
            break
        pos = end + 1
        follower = _skip_space(body, pos)
        if after == b":" and body[follower : follower + 1] == b":":
            continue  # a key that starts "data:", not a value
        lift = Lift(start, end)
        if find(b"\\", start, end) >= 0:
            lift.unescaped = _unescape(body, start, end)
            if lift.unescaped is None:
                continue  # left in place for the full parse to report
        lifts.append(lift)
    if not lifts:
        return body, {}
    tag = b""
    small = _with_placeholders(body, lifts, tag)
    if small.count(_MARKER) != len(lifts):  # the body carries NUL characters of its own
        tag = secrets.token_hex(8).encode()
        small = _with_placeholders(body, lifts, tag)
    prefix = "\x00" + tag.decode()
    return small, {f"{prefix}{k}": lift for k, lift in enumerate(lifts)}


def _with_placeholders(body: bytes, lifts: list[Lift], tag: bytes) -> bytes:
    view, pos = memoryview(body), 0
    out: list[bytes | memoryview] = []
    for k, lift in enumerate(lifts):
        out += (view[pos : lift.start], b"%s%s%d" % (_MARKER, tag, k))
        pos = lift.end
    out.append(view[pos:])
    return b"".join(out)


def _escaped(body: bytes, i: int) -> bool:
    """Whether the byte at ``i`` follows an odd run of backslashes."""
    k = i - 1
    while k >= 0 and body[k] == 0x5C:
        k -= 1
    return (i - 1 - k) % 2 == 1


def _skip_space(body: bytes, i: int) -> int:
    while i < len(body) and body[i] in _JSON_SPACE:
        i += 1
    return i


def _string_end(body: bytes, start: int) -> int:
    """The closing quote of the JSON string whose content starts at ``start``, or -1."""
    end = body.find(b'"', start)
    while end >= 0 and _escaped(body, end):
        end = body.find(b'"', end + 1)
    return end


def _unescape(body: bytes, start: int, end: int) -> bytes | None:
    """The UTF-8 of the JSON string ``body[start:end]`` that holds escapes, or None if invalid."""
    try:
        return str(orjson.loads(body[start - 1 : end + 1])).encode()
    except orjson.JSONDecodeError:
        return None
