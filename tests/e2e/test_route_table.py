"""Every route of the table through a real sidecar: inspected ones priced before anything is
forwarded, admin and unknown ones refused (or passed when the operator says so), read-only ones
passed; and the answers a client can act on (100-continue, redirects, never-fit)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import orjson
import pytest
from aiohttp import web

from sidecar.routes import ADMIN, PASSED, Route, Work
from sidecar.standin import StandinServer
from tests.support.imaging import image_url_part, jpeg_uri
from tests.support.proxy_helpers import existing_sample, post, sample
from tests.support.raw_http import RawConnection, request_head
from tests.support.sidecars import SidecarFactory

PHOTO = jpeg_uri(4032, 3024)  # 15,552 tokens on Qwen2.5-VL's checkpoint defaults
PHOTO_PART = image_url_part(PHOTO)
MESSAGE = {"role": "user", "content": [{"type": "text", "text": "what is this?"}, PHOTO_PART]}
ANTHROPIC = {
    "role": "user",
    "content": [
        {"type": "text", "text": "what is this?"},
        {"type": "image", "source": {"type": "url", "url": "https://example.test/big.jpg"}},
    ],
}
MULTIPART_BOUNDARY = "sidecar-test-boundary"

# A body of each inspected route's shape carrying the photo (or, where the shape has no
# images, enough text to break a small prompt budget).
BODIES: dict[Route, dict[str, Any]] = {
    Route.CHAT: {"model": "m", "messages": [MESSAGE]},
    Route.CHAT_BATCH: {"model": "m", "messages": [[MESSAGE], [MESSAGE]]},
    Route.COMPLETIONS: {"model": "m", "prompt": "word " * 3000},
    Route.RESPONSES: {
        "model": "m",
        "input": [{"role": "user", "content": [{"type": "input_image", "image_url": PHOTO}]}],
    },
    Route.MESSAGES: {"model": "m", "max_tokens": 8, "messages": [ANTHROPIC]},
    Route.MESSAGES_COUNT_TOKENS: {"model": "m", "messages": [ANTHROPIC]},
    Route.COHERE_CHAT: {"model": "m", "messages": [MESSAGE]},
    Route.GENERATE: {
        "token_ids": [1, 2, 3],
        "content_parts": [{"type": "image_url", "url": "https://example.test/big.jpg"}],
    },
    Route.GENERATIVE_SCORING: {"query": "word " * 3000, "items": ["a", "b"]},
    Route.INVOCATIONS: {"messages": [MESSAGE]},
    Route.STRUCTURED_DECISION: {"state": "s", "questions": [], "images": [PHOTO]},
    Route.DECISIONS: {"input": "word " * 3000, "questions": ["q"]},
    Route.EMBEDDINGS: {"model": "m", "input": [MESSAGE]},
    Route.COHERE_EMBED: {"model": "m", "images": [PHOTO]},
    Route.POOLING: {"model": "m", "messages": [MESSAGE]},
    Route.CLASSIFY: {"model": "m", "messages": [MESSAGE]},
    Route.SCORE: {"queries": "q", "documents": [{"content": [PHOTO_PART]}]},
    Route.SCORE_V1: {"text_1": "q", "text_2": [{"content": [PHOTO_PART]}]},
    Route.RERANK: {"query": "q", "documents": [{"content": [PHOTO_PART]}]},
    Route.RERANK_V1: {"query": {"content": [PHOTO_PART]}, "documents": ["a"]},
    Route.RERANK_V2: {"query": "q", "documents": [{"content": [PHOTO_PART]}, "b"]},
    Route.TOKENIZE: {"messages": [MESSAGE]},
    Route.CHAT_RENDER: {"model": "m", "messages": [MESSAGE]},
    Route.COMPLETIONS_RENDER: {"model": "m", "prompt": "word " * 3000},
    Route.RESPONSES_RENDER: {"model": "m", "input": [{"role": "user", "content": "x"}],
                             "instructions": "word " * 3000},
    Route.MESSAGES_RENDER: {"model": "m", "max_tokens": 8, "messages": [ANTHROPIC]},
    Route.COHERE_CHAT_RENDER: {"model": "m", "messages": [MESSAGE]},
}  # fmt: skip


def _audio_form() -> bytes:
    fields = [("model", b"whisper"), ("prompt", b"word " * 3000), ("file", b"RIFF....WAVE")]
    return b"".join(
        b'--%s\r\nContent-Disposition: form-data; name="%s"\r\n\r\n%s\r\n'
        % (MULTIPART_BOUNDARY.encode(), name.encode(), value)
        for name, value in fields
    ) + (b"--%s--\r\n" % MULTIPART_BOUNDARY.encode())


def test_route_table_every_inspected_route_has_a_test_body() -> None:
    audio = {Route.AUDIO_TRANSCRIPTIONS, Route.AUDIO_TRANSLATIONS}
    assert set(BODIES) | audio == set(Route)


@pytest.mark.parametrize("route", list(Route), ids=lambda route: route.path)
async def test_route_table_every_inspected_route_is_priced_before_anything_is_forwarded(
    route: Route,
    make_sidecar: SidecarFactory,
    standin: StandinServer,
    session: aiohttp.ClientSession,
) -> None:
    # A tight image budget for the photo, a prompt budget the long texts break (the
    # audio routes price their file at SIDECAR_AUDIO_TOKENS_PER_ITEM, over it too).
    sidecar = await make_sidecar(max_image_tokens=1024, max_request_prompt_tokens=1000)
    if route in (Route.AUDIO_TRANSCRIPTIONS, Route.AUDIO_TRANSLATIONS):
        content_type = f"multipart/form-data; boundary={MULTIPART_BOUNDARY}"
        body = _audio_form()
    else:
        content_type, body = "application/json", orjson.dumps(BODIES[route])
    url = f"http://127.0.0.1:{sidecar.port}{route.path}"
    async with session.post(url, data=body, headers={"Content-Type": content_type}) as reply:
        answer = await reply.read()
        assert reply.status == 400, answer
        assert reply.headers["x-vlm-sidecar-decision"] == "reject"
    assert standin.requests == [], "nothing may reach vLLM before it is priced"
    reasons = ("max_image_tokens", "max_request_prompt_tokens")
    counted = sum(
        sample(
            sidecar,
            "vlm_sidecar_requests_total",
            route=route.label,
            decision="reject",
            reason=reason,
        )
        for reason in reasons
    )
    assert counted == 1


@pytest.mark.parametrize("path", ADMIN, ids=str)
async def test_route_table_admin_routes_are_refused_unless_passed(
    path: str,
    make_sidecar: SidecarFactory,
    standin: StandinServer,
    session: aiohttp.ClientSession,
) -> None:
    concrete = path.replace("{adapter_name}", "lora-1")
    refusing = await make_sidecar()
    reply = await post(session, refusing, {}, concrete)
    assert reply.status == 403
    assert reply.json()["error"]["type"] == "PermissionDeniedError"
    assert "SIDECAR_ADMIN_ROUTES" in reply.json()["error"]["message"]
    assert standin.requests == []
    refused = existing_sample(
        refusing, "vlm_sidecar_uninspected_requests_total", kind="admin", action="refused"
    )
    assert refused == 1
    passing = await make_sidecar(admin_routes="pass")
    await post(session, passing, {}, concrete)
    assert [recorded.path for recorded in standin.requests] == [concrete]


async def test_route_table_unknown_post_routes_follow_the_unknown_routes_setting(
    make_sidecar: SidecarFactory, standin: StandinServer, session: aiohttp.ClientSession
) -> None:
    refusing = await make_sidecar()
    reply = await post(session, refusing, {"messages": []}, "/v1/plugin/do-work")
    assert reply.status == 404
    assert "SIDECAR_UNKNOWN_ROUTES" in reply.json()["error"]["message"]
    assert standin.requests == []
    passing = await make_sidecar(unknown_routes="pass")
    await post(session, passing, {"messages": []}, "/v1/plugin/do-work")
    assert [recorded.path for recorded in standin.requests] == ["/v1/plugin/do-work"]


@pytest.mark.parametrize("path", [p for p in PASSED if "{" not in p], ids=str)
async def test_route_table_read_only_routes_pass_through(
    path: str,
    make_sidecar: SidecarFactory,
    standin: StandinServer,
    session: aiohttp.ClientSession,
) -> None:
    sidecar = await make_sidecar(engine_poll_seconds=0)
    async with session.get(f"http://127.0.0.1:{sidecar.port}{path}") as reply:
        await reply.read()
        assert "x-vlm-sidecar-decision" not in reply.headers
    forwarded = existing_sample(
        sidecar, "vlm_sidecar_uninspected_requests_total", kind="passed", action="forwarded"
    )
    assert forwarded == 1


async def test_route_table_an_oversized_expect_continue_body_is_refused_before_any_upload(
    make_sidecar: SidecarFactory, standin: StandinServer
) -> None:
    sidecar = await make_sidecar(max_body_bytes="1MiB")
    connection = await RawConnection.open(sidecar.port)
    await connection.send(
        request_head("/v1/chat/completions", content_length=50 << 20, Expect="100-continue")
    )
    reply = await connection.reply()  # no byte of the body has been sent
    await connection.close()
    assert reply.status == 413
    assert reply.json()["error"]["type"] == "RequestTooLargeError"
    assert standin.requests == []


async def test_route_table_an_expect_continue_body_within_limits_is_invited_and_served(
    make_sidecar: SidecarFactory,
) -> None:
    sidecar = await make_sidecar()
    body = orjson.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}]})
    connection = await RawConnection.open(sidecar.port)
    await connection.send(
        request_head("/v1/chat/completions", content_length=len(body), Expect="100-continue")
    )
    interim = await asyncio.wait_for(connection.reader.readuntil(b"\r\n\r\n"), 5)
    assert interim.startswith(b"HTTP/1.1 100 Continue")
    await connection.send(body)
    reply = await connection.reply()
    await connection.close()
    assert reply.status == 200


@pytest.fixture
async def redirecting_upstream() -> AsyncIterator[str]:
    async def moved(request: web.Request) -> web.Response:
        own = f"http://{request.host}"
        return web.Response(status=307, headers={"Location": own + "/v1/models?x=1"})

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", moved)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    yield f"http://127.0.0.1:{port}"
    await runner.cleanup()


async def test_route_table_a_redirect_from_vllm_never_names_its_internal_address(
    make_sidecar: SidecarFactory, redirecting_upstream: str, session: aiohttp.ClientSession
) -> None:
    sidecar = await make_sidecar(upstream_url=redirecting_upstream)
    async with session.get(
        f"http://127.0.0.1:{sidecar.port}/v1/models", allow_redirects=False
    ) as reply:
        assert reply.status == 307
        assert reply.headers["Location"] == "/v1/models?x=1"


async def test_route_table_render_routes_hold_no_kv_budget(
    make_sidecar: SidecarFactory, session: aiohttp.ClientSession
) -> None:
    sidecar = await make_sidecar(kv_budget_bytes="1MiB")
    body = {"model": "m", "messages": [{"role": "user", "content": "hello " * 200}]}
    reply = await post(session, sidecar, body, Route.CHAT_RENDER.path)
    assert Route.CHAT_RENDER.work is Work.RENDER
    assert reply.headers["x-vlm-sidecar-kv-bytes"] == "0"
    assert reply.headers["x-vlm-sidecar-decision"] == "admit"
