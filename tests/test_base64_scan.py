"""``Base64Scan.validate`` accepts and refuses exactly what ``validate_base64`` does."""

from __future__ import annotations

import base64

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sidecar.errors import NotBase64Error
from sidecar.images.base64_scan import BLOCK_BYTES, Base64Scan
from sidecar.images.probe import validate_base64

PREFIX = b'{"messages": [{"content": [{"image_url": {"url": "data:image/png;base64,'
SUFFIX = b'"}}]}]}'


def outcome(check: object, *args: object) -> str | None:
    try:
        check(*args)  # type: ignore[operator]
    except NotBase64Error as exc:
        return exc.message
    return None


def scanned(body: bytes, cuts: list[int]) -> Base64Scan:
    scan = Base64Scan()
    previous = 0
    for cut in [*sorted(c % (len(body) + 1) for c in cuts), len(body)]:
        scan.feed(body[previous:cut])
        previous = max(previous, cut)
    return scan


@given(
    payload=st.one_of(
        st.binary(max_size=600).map(base64.b64encode),
        st.text(alphabet="ABCabc019+/=-_ \n\\\"é", max_size=300).map(str.encode),
    ),
    damage=st.lists(st.tuples(st.integers(0, 10**6), st.sampled_from(b"=-_ \n.\x00\xff")),
                    max_size=3),
    cuts=st.lists(st.integers(0, 10**6), max_size=6),
)  # fmt: skip
def test_base64_scan_agrees_with_validate_base64(
    payload: bytes, damage: list[tuple[int, int]], cuts: list[int]
) -> None:
    raw = bytearray(payload)
    for at, byte in damage:
        if raw:
            raw[at % len(raw)] = byte
    body = PREFIX + bytes(raw) + SUFFIX
    start, end = len(PREFIX), len(PREFIX) + len(raw)
    scan = scanned(body, cuts)
    assert outcome(scan.validate, body, start, end) == outcome(validate_base64, bytes(raw))


@pytest.mark.parametrize(
    "at",
    [0, BLOCK_BYTES - 1, BLOCK_BYTES, 3 * BLOCK_BYTES + 7, -3],
    ids=["first", "block-end", "block-start", "middle", "before-padding"],
)
def test_base64_scan_finds_a_bad_character_anywhere_in_a_large_payload(at: int) -> None:
    payload = bytearray(base64.b64encode(bytes(5 * BLOCK_BYTES)))
    payload[at] = ord("-")
    body = PREFIX + bytes(payload) + SUFFIX
    scan = scanned(body, [1000, BLOCK_BYTES + 5, 2 * BLOCK_BYTES])
    expected = outcome(validate_base64, bytes(payload))
    assert expected is not None
    assert outcome(scan.validate, body, len(PREFIX), len(PREFIX) + len(payload)) == expected


def test_base64_scan_rereads_only_the_blocks_that_hold_other_bytes() -> None:
    payload = base64.b64encode(bytes(6 * BLOCK_BYTES))
    body = PREFIX + payload + SUFFIX
    scan = scanned(body, [7, 70_000, 300_000])
    assert scan.size == len(body)
    assert scan._dirty_starts == [0, (len(body) - len(SUFFIX)) // BLOCK_BYTES * BLOCK_BYTES]
    scan.validate(body, len(PREFIX), len(PREFIX) + len(payload))


def test_base64_scan_validates_everything_for_a_body_it_did_not_see() -> None:
    body = PREFIX + b"AAA-" + SUFFIX
    assert outcome(Base64Scan().validate, body, len(PREFIX), len(PREFIX) + 4) is not None
