"""body.input_image: a chat ``input_image`` part without a valid ``detail`` is refused with
vLLM 0.33's own message (recorded from its renderer; ``tests/renderer`` checks it live), and
the Responses API, which fills ``detail`` in, is not refused."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from sidecar.body.request_body import parse_request_body
from sidecar.errors import InvalidRequestError
from sidecar.routes import Route

URL = "https://example.com/a.png"
MISSING = (
    "1 validation error for ResponseInputImageParam\ndetail\n  Field required [type=missing, "
    "input_value={{'image_url': {shown}, 'type': 'input_image'}}, input_type=dict]\n"
    "    For further information visit https://errors.pydantic.dev/2.14/v/missing"
)


def chat(part: dict[str, Any]) -> bytes:
    return orjson.dumps({"model": "m", "messages": [{"role": "user", "content": [part]}]})


@pytest.mark.parametrize(
    ("part", "shown"),
    [
        ({"type": "input_image", "image_url": URL}, "'https://ex..."),
        ({"type": "input_image", "image_url": "data:image/png;base64," + "A" * 64},
         "'data:image..."),
    ],
    ids=["url", "data-uri"],
)  # fmt: skip
def test_a_chat_input_image_without_detail_gets_vllms_message(
    part: dict[str, Any], shown: str
) -> None:
    with pytest.raises(InvalidRequestError) as refused:
        parse_request_body(chat(part), Route.CHAT)
    assert refused.value.message == MISSING.format(shown=shown)
    assert refused.value.param is None


def test_a_detail_vllm_does_not_know_is_refused() -> None:
    with pytest.raises(InvalidRequestError, match="Input should be 'low', 'high', 'auto'"):
        parse_request_body(chat({"type": "input_image", "image_url": URL, "detail": "max"}),
                           Route.CHAT)  # fmt: skip


@pytest.mark.parametrize("detail", ["low", "high", "auto", "original"])
def test_each_detail_vllm_knows_is_accepted(detail: str) -> None:
    part = {"type": "input_image", "image_url": URL, "detail": detail}
    assert len(parse_request_body(chat(part), Route.CHAT).images) == 1


def test_a_part_with_a_uuid_and_the_responses_api_are_not_checked() -> None:
    with_uuid = {"type": "input_image", "image_url": URL, "uuid": "u"}
    assert len(parse_request_body(chat(with_uuid), Route.CHAT).images) == 1
    body = {"model": "m", "input": [{"role": "user", "content": [
        {"type": "input_image", "image_url": URL}]}]}  # fmt: skip
    assert len(parse_request_body(orjson.dumps(body), Route.RESPONSES).images) == 1
