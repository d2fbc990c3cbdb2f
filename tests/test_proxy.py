"""End to end: client -> sidecar -> stand-in vLLM, all on 127.0.0.1."""

from __future__ import annotations

import asyncio
import base64
from typing import Any

import aiohttp
import orjson
import pytest
from structlog.testing import capture_logs

from sidecar.images.probe import probe_data_uri
from sidecar.model_profiles import load_profile
from sidecar.server import RunningSidecar
from sidecar.standin import StandinServer
from tests.conftest import QWEN, SidecarFactory
from tests.imaging import chat_body, data_uri, image_bytes, jpeg_uri

PROFILE = load_profile(QWEN)


async def post(
    session: aiohttp.ClientSession,
    sidecar: RunningSidecar,
    body: dict[str, Any] | bytes,
    path: str = "/v1/chat/completions",
    headers: dict[str, str] | None = None,
) -> tuple[int, dict[str, str], bytes]:
    raw = body if isinstance(body, bytes) else orjson.dumps(body)
    url = f"http://127.0.0.1:{sidecar.port}{path}"
    all_headers = {"Content-Type": "application/json", **(headers or {})}
    async with session.post(url, data=raw, headers=all_headers) as response:
        return response.status, dict(response.headers), await response.read()


def ledger_is_idle(sidecar: RunningSidecar) -> bool:
    ledger = sidecar.state.ledger
    return ledger.inflight_bytes == 0 and ledger.inflight_requests == 0 and ledger.queue_depth == 0


async def test_proxy_admits_and_forwards_the_original_bytes(
    make_sidecar: SidecarFactory, standin: StandinServer, session: aiohttp.ClientSession
) -> None:
    sidecar = await make_sidecar()
    raw = orjson.dumps(chat_body(jpeg_uri(1920, 1080), max_tokens=64))
    status, headers, body = await post(session, sidecar, raw)
    assert status == 200, body
    assert standin.requests[-1].body == raw
    assert headers["x-vlm-sidecar-decision"] == "admit"
    assert headers["x-vlm-sidecar-visual-tokens"] == "2691"
    assert int(headers["x-vlm-sidecar-kv-bytes"]) > 0
    assert orjson.loads(body)["usage"]["prompt_tokens"] > 0
    assert ledger_is_idle(sidecar)


async def test_proxy_rejects_an_image_over_the_token_budget_in_vllm_error_shape(
    make_sidecar: SidecarFactory, standin: StandinServer, session: aiohttp.ClientSession
) -> None:
    sidecar = await make_sidecar(max_image_tokens=4096)
    body = chat_body(jpeg_uri(64, 64), jpeg_uri(4032, 3024), jpeg_uri(64, 64), jpeg_uri(64, 64))
    status, headers, raw = await post(session, sidecar, body)
    assert status == 400
    assert orjson.loads(raw) == {
        "error": {
            "message": "image 2 of 4 (4032x3024) costs 15,552 tokens; "
            "SIDECAR_MAX_IMAGE_TOKENS is 4,096",
            "type": "BadRequestError",
            "param": None,
            "code": 400,
        }
    }
    assert headers["x-vlm-sidecar-decision"] == "reject"
    assert standin.requests == []


async def test_proxy_downscales_to_exactly_the_intended_tokens(
    make_sidecar: SidecarFactory, standin: StandinServer, session: aiohttp.ClientSession
) -> None:
    sidecar = await make_sidecar(max_image_tokens=4096, over_budget_action="downscale")
    icon = jpeg_uri(64, 64)
    body = chat_body(icon, jpeg_uri(4032, 3024))
    status, headers, raw = await post(session, sidecar, body)
    assert status == 200, raw
    assert headers["x-vlm-sidecar-decision"] == "downscale"
    forwarded = orjson.loads(standin.requests[-1].body)
    parts = forwarded["messages"][0]["content"]
    assert parts[0] == body["messages"][0]["content"][0]
    assert parts[1]["image_url"]["url"] == icon
    header = probe_data_uri(parts[2]["image_url"]["url"])
    tokens = PROFILE.vision.image_tokens(header.width_px, header.height_px).tokens
    assert tokens <= 4096
    assert int(headers["x-vlm-sidecar-visual-tokens"]) == tokens + 4
    assert ledger_is_idle(sidecar)


async def test_proxy_refuses_a_body_over_the_limit_with_413(
    make_sidecar: SidecarFactory, standin: StandinServer, session: aiohttp.ClientSession
) -> None:
    sidecar = await make_sidecar(max_body_bytes="100KiB")
    status, _, raw = await post(session, sidecar, chat_body(text="x" * 200_000))
    assert status == 413
    assert orjson.loads(raw)["error"]["code"] == 413
    assert standin.requests == []


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"not json", "JSON"),
        (b'{"messages": "hi"}', "messages"),
        (orjson.dumps(chat_body("data:image/png;base64,!!!!")), "base64"),
        (orjson.dumps(chat_body(data_uri(b"not an image at all, just text"))), "image"),
        (
            orjson.dumps({"messages": [{"role": "user", "content": [{"type": "nope"}]}]}),
            "Unsupported chat content part type",
        ),
    ],
    ids=["not-json", "wrong-type", "bad-base64", "not-an-image", "unknown-part"],
)
async def test_proxy_answers_bad_bodies_with_400_and_forwards_nothing(
    make_sidecar: SidecarFactory,
    standin: StandinServer,
    session: aiohttp.ClientSession,
    body: bytes,
    message: str,
) -> None:
    sidecar = await make_sidecar()
    status, _, raw = await post(session, sidecar, body)
    assert status == 400, raw
    error = orjson.loads(raw)["error"]
    assert message in error["message"]
    assert error["code"] == 400
    assert standin.requests == []
    assert ledger_is_idle(sidecar)


async def test_proxy_streams_sse_and_reads_the_usage_chunk(
    make_sidecar: SidecarFactory, standin: StandinServer, session: aiohttp.ClientSession
) -> None:
    sidecar = await make_sidecar()
    body = chat_body(
        jpeg_uri(640, 480), stream=True, stream_options={"include_usage": True}, max_tokens=8
    )
    with capture_logs() as logs:
        status, headers, raw = await post(session, sidecar, body)
    assert status == 200
    assert headers["Content-Type"].startswith("text/event-stream")
    assert raw.endswith(b"data: [DONE]\n\n")
    finished = [e for e in logs if e["event"] == "request.finished"]
    assert finished[0]["observed_prompt_tokens"] > 0
    assert ledger_is_idle(sidecar)


async def test_proxy_passes_other_paths_through_unchanged(
    make_sidecar: SidecarFactory, standin: StandinServer, session: aiohttp.ClientSession
) -> None:
    sidecar = await make_sidecar()
    payload = bytes(range(256)) * 4096
    url = f"http://127.0.0.1:{sidecar.port}/echo/x?y=1"
    async with session.post(url, data=payload, headers={"X-Custom": "1"}) as response:
        assert response.status == 200
        assert await response.read() == payload
    async with session.get(f"http://127.0.0.1:{sidecar.port}/v1/models") as response:
        models = await response.json()
    assert models["data"][0]["id"] == QWEN


async def test_proxy_releases_the_reservation_when_the_client_leaves_mid_stream(
    make_sidecar: SidecarFactory, standin: StandinServer, session: aiohttp.ClientSession
) -> None:
    sidecar = await make_sidecar(kv_budget_bytes="8GiB")
    body = orjson.dumps(chat_body(jpeg_uri(640, 480), stream=True, max_tokens=64))
    url = f"http://127.0.0.1:{sidecar.port}/v1/chat/completions"
    headers = {"Content-Type": "application/json", "x-standin-fault": "chunk-delay=0.2"}
    async with session.post(url, data=body, headers=headers) as response:
        await response.content.readany()
        assert sidecar.state.ledger.inflight_requests == 1
    for _ in range(100):
        if ledger_is_idle(sidecar):
            break
        await asyncio.sleep(0.02)
    assert ledger_is_idle(sidecar)


async def test_proxy_answers_502_when_vllm_is_unreachable(
    make_sidecar: SidecarFactory, session: aiohttp.ClientSession
) -> None:
    sidecar = await make_sidecar(upstream_url="http://127.0.0.1:9")
    status, _, raw = await post(session, sidecar, chat_body())
    assert status == 502
    assert orjson.loads(raw)["error"]["code"] == 502
    assert ledger_is_idle(sidecar)


async def test_proxy_answers_anthropic_errors_on_messages(
    make_sidecar: SidecarFactory, session: aiohttp.ClientSession
) -> None:
    sidecar = await make_sidecar(max_image_tokens=100)
    raw_image = image_bytes(640, 480)
    block = {
        "type": "image",
        "source": {"type": "base64", "media_type": "image/jpeg",
                   "data": base64.b64encode(raw_image).decode()},
    }  # fmt: skip
    body = {"model": "m", "max_tokens": 10, "messages": [{"role": "user", "content": [block]}]}
    status, _, raw = await post(session, sidecar, body, path="/v1/messages")
    assert status == 400
    error = orjson.loads(raw)
    assert error["type"] == "error"
    assert error["error"]["type"] == "invalid_request_error"
    assert "SIDECAR_MAX_IMAGE_TOKENS" in error["error"]["message"]
