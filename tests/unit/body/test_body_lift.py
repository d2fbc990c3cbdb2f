"""body.body_lift: splicing new image payloads into the raw body, every other byte kept."""

from __future__ import annotations

import base64
from typing import Any

import orjson
import pytest

from sidecar.body.body_lift import splice
from sidecar.body.request_body import parse_request_body
from sidecar.routes import Route

PAYLOAD = base64.b64encode(bytes(range(256)) * 3).decode()  # holds "+" and "/"
DATA_URI = f"data:image/png;base64,{PAYLOAD}"


def body_of(**fields: Any) -> bytes:
    return orjson.dumps(fields)


def image_chat(*urls: str, **fields: Any) -> bytes:
    parts = [{"type": "image_url", "image_url": {"url": url}} for url in urls]
    return body_of(model="m", messages=[{"role": "user", "content": parts}], **fields)


def test_splice_keeps_every_other_byte_when_one_image_is_rewritten() -> None:
    body = image_chat("https://x", DATA_URI, DATA_URI)
    ref = parse_request_body(body, Route.CHAT).images[1]
    (start, end), new = ref.replacement("image/jpeg", b"QUJD")
    out = splice(body, [((start, end), new)])
    assert out[:start] == body[:start]
    assert out[start + len(new) :] == body[end:]
    again = parse_request_body(out, Route.CHAT)
    assert bytes(again.images[1].payload(out)) == b"QUJD"
    assert again.images[1].media_type == "image/jpeg"
    assert bytes(again.images[2].payload(out)) == PAYLOAD.encode()


def test_splice_writes_bare_base64_when_the_image_is_an_anthropic_source() -> None:
    source = {"type": "base64", "media_type": "image/png", "data": PAYLOAD}
    body = body_of(messages=[{"role": "user", "content": [{"type": "image", "source": source}]}])
    ref = parse_request_body(body, Route.MESSAGES).images[0]
    out = splice(body, [ref.replacement("image/jpeg", b"QUJD")])
    assert orjson.loads(out)["messages"][0]["content"][0]["source"]["data"] == "QUJD"


def test_splice_applies_replacements_in_body_order_when_given_out_of_order() -> None:
    assert splice(b"abcdef", [((4, 5), b"X"), ((0, 1), b"YY")]) == b"YYbcdXf"
    assert splice(b"abc", []) == b"abc"


@pytest.mark.parametrize(
    "replacements",
    [[((0, 3), b"x"), ((2, 4), b"y")], [((5, 9), b"x")], [((0, 1), b'"')], [((0, 1), b"\\")]],
    ids=["overlap", "out of the body", "quote", "backslash"],
)
def test_splice_raises_when_a_replacement_would_corrupt_the_body(
    replacements: list[tuple[tuple[int, int], bytes]],
) -> None:
    with pytest.raises(ValueError, match=r"span|replacement"):
        splice(b"abcdef", replacements)
