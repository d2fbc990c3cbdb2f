"""No spelling of a path reaches an inspected handler of a real uvicorn + Starlette server
uninspected.

vLLM serves on uvicorn (httptools) and Starlette: uvicorn percent-decodes the path before
Starlette routes it, keeps dot segments and double slashes, lets one trailing ``%0A`` match a
route, and redirects a trailing slash with 307. The upstream here is such a server, with
vLLM's inference paths, its ``/metrics`` mount and its trailing-slash redirect. Every path
variant is sent on a raw socket (no client normalises it) through the sidecar twice: with a
photo over the image budget, which must never reach an inspected handler, and with a small
image, which may, but only with the sidecar's decision header on the answer (so it was
priced).
"""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field

import orjson
import pytest
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Mount, Route

from sidecar.routes import ROUTES_BY_PATH
from tests.support.imaging import chat_with_images, jpeg_uri
from tests.support.raw_http import RawConnection
from tests.support.sidecars import SidecarFactory

PHOTO = chat_with_images(jpeg_uri(4032, 3024), max_tokens=8)  # 15,552 tokens
SMALL = chat_with_images(jpeg_uri(64, 64), max_tokens=8)
INSPECTED_VARIANTS = [
    "/v1/chat/completions",
    "/v1/chat%2Fcompletions",
    "/v1%2Fchat%2Fcompletions",
    "/v1%2fchat%2fcompletions",
    "/v1/./chat/completions",
    "/v1/x/../chat/completions",
    "/v1/x/%2e%2e/chat/completions",
    "/v1/%2e/chat/completions",
    "//v1/chat/completions",
    "/v1//chat/completions",
    "/v1/chat/%63ompletions",
    "/%76%31/chat/completions",
    "/v1/chat/completions%0A",
    "/v1/chat/completions%0a",
    "/v1/chat/completions/",
    "/v1/chat/completions//",
    "/v1/chat/completions?x=1",
    "/v1/chat/completions#top",
    "/v1/chat/completions;x=1",
    "/V1/chat/completions",
    "/v1/chat/completions%20",
    "/v1/chat/completions%00",
    "/v1/messages%0A",
    "/invocations%0A",
    "/v1/completions/../chat/completions",
    "http://vllm.internal/v1/chat/completions",
]


@dataclass
class Upstream:
    """A uvicorn + Starlette server with vLLM's inference paths; it notes what reached them."""

    port: int = 0
    inspected_hits: list[tuple[str, str, bool]] = field(default_factory=list)


def _app(upstream: Upstream) -> Starlette:
    async def inference(request: Request) -> Response:
        body = await request.body()
        photo = b"data:image/jpeg;base64," in body and len(body) > 100_000
        upstream.inspected_hits.append((request.url.path, request.scope["raw_path"], photo))
        usage = {"prompt_tokens": 10, "completion_tokens": 1, "total_tokens": 11}
        return JSONResponse({"id": "x", "object": "chat.completion", "usage": usage})

    async def metrics(request: Request) -> Response:
        return PlainTextResponse("vllm:num_requests_waiting 0\n")

    routes = [Route(path, inference, methods=["POST"]) for path in ROUTES_BY_PATH]
    return Starlette(routes=[*routes, Mount("/metrics", app=metrics)])


@pytest.fixture
def upstream() -> Iterator[Upstream]:
    state = Upstream()
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        state.port = probe.getsockname()[1]
    config = uvicorn.Config(
        _app(state), host="127.0.0.1", port=state.port, http="httptools", log_level="error"
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    for _ in range(500):
        if server.started:
            break
        threading.Event().wait(0.01)
    assert server.started
    yield state
    server.should_exit = True
    thread.join(5)


async def _send(port: int, target: str, body: bytes) -> tuple[int, dict[str, str]]:
    connection = await RawConnection.open(port)
    head = (
        f"POST {target} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    ).encode()
    await connection.send(head + body)
    try:
        reply = await connection.reply()
    except (asyncio.IncompleteReadError, ConnectionResetError):
        return 0, {}  # the server refused to parse the request line at all
    finally:
        await connection.close()
    return reply.status, dict(reply.headers)


@pytest.mark.parametrize("target", INSPECTED_VARIANTS)
async def test_paths_no_variant_brings_an_over_budget_image_to_an_inspected_handler(
    target: str, upstream: Upstream, make_sidecar: SidecarFactory
) -> None:
    sidecar = await make_sidecar(
        upstream_url=f"http://127.0.0.1:{upstream.port}", max_image_tokens=1024
    )
    status, headers = await _send(sidecar.port, target, orjson.dumps(PHOTO))
    assert [hit for hit in upstream.inspected_hits if hit[2]] == [], (target, status)
    assert status != 200 or "x-vlm-sidecar-decision" in headers


@pytest.mark.parametrize("target", INSPECTED_VARIANTS)
async def test_paths_whatever_reaches_an_inspected_handler_was_priced(
    target: str, upstream: Upstream, make_sidecar: SidecarFactory
) -> None:
    sidecar = await make_sidecar(upstream_url=f"http://127.0.0.1:{upstream.port}")
    status, headers = await _send(sidecar.port, target, orjson.dumps(SMALL))
    if upstream.inspected_hits:
        assert status == 200
        assert headers.get("x-vlm-sidecar-decision") == "admit", (target, headers)
    if status == 307:  # the sidecar answers a trailing slash itself, naming no host
        assert headers["Location"].startswith("/v1/")
