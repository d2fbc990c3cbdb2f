"""End to end, the relay itself: streaming, headers, pass-through, health, drain and the log line.

SSE must reach the client chunk by chunk as vLLM sends it; every inspected answer carries the
``x-vlm-sidecar-*`` headers and a request id; hop-by-hop headers stop at the sidecar; any other
path passes through byte for byte; ``/readyz`` follows vLLM; a drain lets streams finish.
"""

from __future__ import annotations

import asyncio
import gzip
import hashlib
import io
import itertools
import re
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import orjson
import pytest
from aiohttp import web
from multidict import CIMultiDict
from structlog.testing import capture_logs

from sidecar.serve.keys import DRAIN
from sidecar.standin import StandinServer
from tests.support.imaging import chat, image_url_part, jpeg_uri, messages, responses
from tests.support.proxy_helpers import (
    CHAT,
    DECISION,
    KV,
    MESSAGES,
    PROMPT_TOKENS,
    RESPONSES,
    VISUAL,
    expected,
    fault,
    ledger_is_idle,
    post,
    url_of,
)
from tests.support.sidecars import SidecarFactory
from tests.support.waiting import eventually, eventually_refused

JSON_HEADERS = {"Content-Type": "application/json"}
PREDICTION_HEADERS = (VISUAL, PROMPT_TOKENS, KV)


# --- streaming ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "body"),
    [
        (CHAT, chat(stream=True, max_tokens=4)),
        (RESPONSES, responses(stream=True, max_output_tokens=4)),
        (MESSAGES, messages(stream=True, max_tokens=4)),
    ],
    ids=["chat", "responses", "messages"],
)
async def test_proxy_relays_sse_chunk_by_chunk_as_it_arrives(
    make_sidecar: SidecarFactory, session: aiohttp.ClientSession, path: str, body: dict[str, Any]
) -> None:
    sidecar = await make_sidecar()
    headers = fault("chunk-delay=0.1")
    arrivals: list[tuple[float, bytes]] = []
    started = time.perf_counter()
    async with session.post(url_of(sidecar, path), json=body, headers=headers) as response:
        assert response.headers["Content-Type"].startswith("text/event-stream")
        async for chunk in response.content.iter_any():
            arrivals.append((time.perf_counter() - started, chunk))
    first, last = arrivals[0][0], arrivals[-1][0]
    assert first < 0.3  # the first event reaches the client...
    assert last - first > 0.45  # ...long before the stream ends
    assert len(arrivals) >= 6  # one write per event: nothing was gathered up
    gaps = [b[0] - a[0] for a, b in itertools.pairwise(arrivals)]
    assert sum(gap > 0.05 for gap in gaps) >= 4
    assert ledger_is_idle(sidecar)


async def test_proxy_adds_no_wait_before_the_first_byte_of_a_delayed_stream(
    make_sidecar: SidecarFactory, session: aiohttp.ClientSession
) -> None:
    sidecar = await make_sidecar()
    headers = fault("delay=0.3, chunk-delay=0.1")
    body = chat(stream=True, max_tokens=4)
    started = time.perf_counter()
    async with session.post(url_of(sidecar), json=body, headers=headers) as response:
        await response.content.readany()
        first_byte = time.perf_counter() - started
        await response.read()
        last_byte = time.perf_counter() - started
    assert 0.3 <= first_byte < last_byte - 0.45  # vLLM's own first byte, not the stream's end


async def test_proxy_streams_usage_and_logs_it(
    make_sidecar: SidecarFactory, session: aiohttp.ClientSession
) -> None:
    sidecar = await make_sidecar()
    body = chat(image_url_part(jpeg_uri(640, 480)), stream=True, max_tokens=8,
                stream_options={"include_usage": True})  # fmt: skip
    with capture_logs() as logs:
        reply = await post(session, sidecar, body)
    assert reply.body.endswith(b"data: [DONE]\n\n")
    usage_event = reply.body.split(b"\n\n")[-3]
    usage = orjson.loads(usage_event.removeprefix(b"data: "))["usage"]
    (line,) = [e for e in logs if e["event"] == "request.finished"]
    assert line["observed_prompt_tokens"] == usage["prompt_tokens"]


@pytest.mark.parametrize("path", ["/v1/responses", "/v1/messages"], ids=["responses", "messages"])
async def test_sidecar_observes_usage_on_streamed_responses_and_messages(
    make_sidecar: SidecarFactory, session: aiohttp.ClientSession, path: str
) -> None:
    sidecar = await make_sidecar(engine_poll_seconds=0)
    if path == "/v1/responses":
        part = {"type": "input_image", "image_url": jpeg_uri(64, 64)}
        body = {"model": "m", "stream": True, "max_output_tokens": 4,
                "input": [{"role": "user", "content": [part]}]}  # fmt: skip
    else:
        body = {"model": "m", "stream": True, "max_tokens": 4,
                "messages": [{"role": "user", "content": "hello"}]}  # fmt: skip
    with capture_logs() as logs:
        async with session.post(f"http://127.0.0.1:{sidecar.port}{path}", json=body) as reply:
            assert reply.status == 200
            await reply.read()
    finished = next(e for e in logs if e["event"] == "request.finished")
    assert finished["observed_prompt_tokens"] > 0


# --- headers -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("settings", "body", "fault", "status", "decision", "priced"),
    [
        ({}, chat(), None, 200, "admit", True),
        ({}, chat(stream=True), None, 200, "admit", True),
        ({"max_image_tokens": 100, "over_budget_action": "downscale"},
         chat(image_url_part(jpeg_uri(640, 480))), None, 200, "downscale", True),
        ({"max_image_tokens": 100}, chat(image_url_part(jpeg_uri(640, 480))), None, 400,
         "reject", True),
        ({"kv_budget_bytes": 1024}, chat(), None, 413, "reject", True),
        ({}, chat(), "status=503", 503, "admit", True),
        ({"upstream_read_timeout_seconds": 0.2}, chat(), "hang", 504, "reject", True),
        ({}, b"{not json", None, 400, "reject", False),
        ({"max_body_bytes": 10}, chat(), None, 413, "reject", False),
    ],
    ids=["admit-json", "admit-sse", "downscale", "reject-budget", "reject-never-fits",
         "upstream-503", "upstream-504", "bad-json", "too-large"],
)  # fmt: skip
async def test_proxy_labels_every_inspected_answer_with_its_decision_and_prediction(
    make_sidecar: SidecarFactory,
    session: aiohttp.ClientSession,
    settings: dict[str, Any],
    body: dict[str, Any] | bytes,
    fault: str | None,
    status: int,
    decision: str,
    priced: bool,
) -> None:
    sidecar = await make_sidecar(**settings)
    headers = {"x-standin-fault": fault} if fault else {}
    reply = await post(session, sidecar, body, headers=headers)
    assert reply.status == status, reply.body
    assert reply.headers[DECISION] == decision
    assert re.fullmatch(r"[0-9a-f]{32}", reply.headers["x-request-id"])
    if priced:
        visual, prompt, kv = reply.prediction
        assert visual >= 0
        assert prompt > visual
        assert kv > 0
    else:  # nothing could be priced: no made-up figures
        assert not any(name in reply.headers for name in PREDICTION_HEADERS)


async def test_proxy_passes_the_clients_request_id_to_vllm_and_back(
    make_sidecar: SidecarFactory, standin: StandinServer, session: aiohttp.ClientSession
) -> None:
    sidecar = await make_sidecar()
    with capture_logs() as logs:
        reply = await post(session, sidecar, chat(), headers={"X-Request-Id": "trace-42"})
    assert standin.requests[-1].headers.getall("x-request-id") == ["trace-42"]
    assert reply.headers["x-request-id"] == "trace-42"
    assert [e["request_id"] for e in logs if e["event"] == "request.finished"] == ["trace-42"]


async def test_proxy_generates_a_request_id_when_the_client_sends_none(
    make_sidecar: SidecarFactory, standin: StandinServer, session: aiohttp.ClientSession
) -> None:
    sidecar = await make_sidecar()
    first = await post(session, sidecar, chat())
    second = await post(session, sidecar, chat())
    generated = [r.headers["x-request-id"] for r in (first, second)]
    assert all(re.fullmatch(r"[0-9a-f]{32}", g) for g in generated)
    assert generated[0] != generated[1]
    assert [r.headers["x-request-id"] for r in standin.requests] == generated


HOP_BY_HOP_REQUEST = {
    "Connection": "keep-alive, X-Hop-Named",
    "X-Hop-Named": "named by Connection",
    "Keep-Alive": "timeout=5",
    "Proxy-Authorization": "Basic c2VjcmV0",
    "Proxy-Connection": "keep-alive",
    "TE": "trailers",
    "Trailer": "X-Checksum",
    "X-End-To-End": "kept",
    "Authorization": "Bearer kept-too",
}


@pytest.mark.parametrize("path", [CHAT, "/echo/anything"], ids=["inspected", "pass-through"])
async def test_proxy_drops_hop_by_hop_request_headers(
    make_sidecar: SidecarFactory, standin: StandinServer, path: str
) -> None:
    sidecar = await make_sidecar(unknown_routes="pass")  # /echo is the stand-in's, not vLLM's
    async with (
        aiohttp.ClientSession(skip_auto_headers=("Accept-Encoding",)) as session,
        session.post(
            url_of(sidecar, path),
            data=orjson.dumps(chat()),
            headers={**JSON_HEADERS, **HOP_BY_HOP_REQUEST},
        ) as response,
    ):
        assert response.status == 200
    seen = standin.requests[-1].headers
    for name in ("X-Hop-Named", "Keep-Alive", "Proxy-Authorization", "Proxy-Connection", "TE",
                 "Trailer"):  # fmt: skip
        assert name not in seen, name
    assert "x-hop-named" not in seen.get("Connection", "").lower()
    assert (seen["X-End-To-End"], seen["Authorization"]) == ("kept", "Bearer kept-too")


# --- pass-through paths ------------------------------------------------------------------------


@dataclass
class Upstream:
    """A loopback upstream with odd answers, recording each request in full."""

    url: str = ""
    requests: list[tuple[str, str, CIMultiDict[str], bytes]] = field(default_factory=list)


GZIPPED = gzip.compress(b'{"answer": "compressed on purpose"}' * 100)


@pytest.fixture
async def odd_upstream() -> AsyncIterator[Upstream]:
    upstream = Upstream()

    async def anything(request: web.Request) -> web.StreamResponse:
        body = await request.read()
        upstream.requests.append(
            (request.method, request.path_qs, CIMultiDict(request.headers), body)
        )
        if request.path == "/gzip":
            return web.Response(
                body=GZIPPED,
                headers={"Content-Encoding": "gzip", "Content-Type": "application/json"},
            )
        if request.path == "/hop":
            return web.Response(
                text="hop",
                headers={
                    "Connection": "X-Upstream-Hop",
                    "X-Upstream-Hop": "1",
                    "Keep-Alive": "timeout=9",
                    "Proxy-Authenticate": "Basic",
                    "X-End-To-End": "kept",
                },
            )
        response = web.Response(
            status=418,
            reason="I'm a teapot",
            body=hashlib.sha256(body).digest() + bytes(range(256)),
            headers={"Content-Type": "application/x-teapot", "X-Teapot": "short and stout"},
        )
        response.headers.add("Set-Cookie", "a=1")
        response.headers.add("Set-Cookie", "b=2")
        return response

    app = web.Application(client_max_size=1 << 30)
    app.router.add_route("*", "/{tail:.*}", anything)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    upstream.url = f"http://127.0.0.1:{runner.addresses[0][1]}"
    yield upstream
    await runner.cleanup()


async def test_proxy_passes_other_paths_through_byte_for_byte(
    make_sidecar: SidecarFactory, odd_upstream: Upstream
) -> None:
    sidecar = await make_sidecar(upstream_url=odd_upstream.url, unknown_routes="pass")
    payload = bytes(range(256)) * 64
    async with (
        aiohttp.ClientSession(auto_decompress=False) as session,
        session.put(
            url_of(sidecar, "/v2/odd/path?b=2&a=1&a=%20x"),
            data=payload,
            headers={"Content-Type": "application/x-raw", "X-Client": "c"},
        ) as response,
    ):
        assert (response.status, response.reason) == (418, "I'm a teapot")
        assert response.headers["X-Teapot"] == "short and stout"
        assert response.headers.getall("Set-Cookie") == ["a=1", "b=2"]
        assert response.headers["Content-Type"] == "application/x-teapot"
        assert DECISION not in response.headers
        assert await response.read() == hashlib.sha256(payload).digest() + bytes(range(256))
    method, path_qs, headers, body = odd_upstream.requests[-1]
    assert (method, path_qs, body) == ("PUT", "/v2/odd/path?b=2&a=1&a=%20x", payload)
    assert (headers["X-Client"], headers["Content-Type"]) == ("c", "application/x-raw")
    assert headers["Content-Length"] == str(len(payload))


async def test_proxy_passes_compressed_answers_through_without_decompressing(
    make_sidecar: SidecarFactory, odd_upstream: Upstream
) -> None:
    sidecar = await make_sidecar(upstream_url=odd_upstream.url)
    async with (
        aiohttp.ClientSession(auto_decompress=False) as session,
        session.get(url_of(sidecar, "/gzip"), headers={"Accept-Encoding": "gzip"}) as response,
    ):
        assert response.headers["Content-Encoding"] == "gzip"
        assert await response.read() == GZIPPED
    assert odd_upstream.requests[-1][2]["Accept-Encoding"] == "gzip"


async def test_proxy_drops_hop_by_hop_response_headers(
    make_sidecar: SidecarFactory, odd_upstream: Upstream, session: aiohttp.ClientSession
) -> None:
    sidecar = await make_sidecar(upstream_url=odd_upstream.url)
    async with session.get(url_of(sidecar, "/hop")) as response:
        assert await response.text() == "hop"
        for name in ("X-Upstream-Hop", "Keep-Alive", "Proxy-Authenticate"):
            assert name not in response.headers, name
        assert response.headers["X-End-To-End"] == "kept"


@pytest.mark.parametrize("chunked", [False, True], ids=["content-length", "chunked"])
async def test_proxy_streams_a_large_body_through_both_ways(
    make_sidecar: SidecarFactory,
    standin: StandinServer,
    session: aiohttp.ClientSession,
    chunked: bool,
) -> None:
    # The inspected limit does not apply; /echo is the stand-in's own route, not vLLM's.
    sidecar = await make_sidecar(max_body_bytes="1MiB", unknown_routes="pass")
    block = hashlib.sha256(b"seed").digest() * 32768  # 1 MiB
    payload = block * 24

    async def pieces() -> AsyncIterator[bytes]:
        for _ in range(24):
            yield block

    data: Any = pieces() if chunked else io.BytesIO(payload)
    headers = {"Content-Type": "application/octet-stream"}
    async with session.post(url_of(sidecar, "/echo/big"), data=data, headers=headers) as response:
        assert response.status == 200
        digest, size = hashlib.sha256(), 0
        async for chunk in response.content.iter_chunked(1 << 20):
            digest.update(chunk)
            size += len(chunk)
    assert (size, digest.digest()) == (len(payload), hashlib.sha256(payload).digest())
    assert standin.requests[-1].body == payload


async def test_proxy_passes_get_requests_through_to_vllm(
    make_sidecar: SidecarFactory, session: aiohttp.ClientSession
) -> None:
    sidecar = await make_sidecar()
    async with session.get(url_of(sidecar, "/v1/models")) as response:
        models = await response.json()
    assert models["data"][0]["max_model_len"] == 32768


# --- health, readiness and drain ---------------------------------------------------------------


async def test_proxy_health_is_up_and_readiness_follows_vllm_without_a_restart(
    make_sidecar: SidecarFactory, standin: StandinServer, session: aiohttp.ClientSession
) -> None:
    sidecar = await make_sidecar()
    base = f"http://127.0.0.1:{sidecar.metrics_port}"

    async def get(path: str) -> tuple[int, dict[str, Any]]:
        async with session.get(base + path) as response:
            return response.status, await response.json()

    assert await get("/healthz") == (200, {"status": "ok"})
    assert (await get("/readyz"))[0] == 200
    standin.set_healthy(False)
    status, body = await get("/readyz")
    assert (status, body["status"]) == (503, "not ready")
    assert "503" in body["detail"]
    assert (await get("/healthz"))[0] == 200
    standin.set_healthy(True)
    assert (await get("/readyz"))[0] == 200


async def test_proxy_readiness_fails_when_vllm_is_unreachable(
    make_sidecar: SidecarFactory, session: aiohttp.ClientSession
) -> None:
    sidecar = await make_sidecar(upstream_url="http://127.0.0.1:9")
    async with session.get(f"http://127.0.0.1:{sidecar.metrics_port}/readyz") as response:
        assert response.status == 503


async def test_proxy_drain_finishes_streams_in_flight_and_refuses_new_connections(
    make_sidecar: SidecarFactory, session: aiohttp.ClientSession
) -> None:
    sidecar = await make_sidecar(kv_budget_bytes="1GiB")
    headers = fault("chunk-delay=0.1")
    body = chat(stream=True, max_tokens=4)
    async with session.post(url_of(sidecar), json=body, headers=headers) as response:
        first = await response.content.readany()
        drain = asyncio.create_task(sidecar.drain_and_stop())
        await eventually(lambda: sidecar.app[DRAIN].draining)
        await eventually_refused(sidecar.port, timeout_seconds=1)
        rest = await response.read()
    assert (first + rest).endswith(b"data: [DONE]\n\n")
    assert (first + rest).count(b"data: ") == 6  # role, 4 words (the last with the finish), [DONE]
    await asyncio.wait_for(drain, timeout=5)
    assert ledger_is_idle(sidecar)


# --- the log line ------------------------------------------------------------------------------


async def test_proxy_logs_one_line_per_request_with_the_whole_story(
    make_sidecar: SidecarFactory, session: aiohttp.ClientSession
) -> None:
    sidecar = await make_sidecar(max_image_tokens=1000, over_budget_action="downscale")
    body = chat(image_url_part(jpeg_uri(1920, 1080)), image_url_part(jpeg_uri(320, 240)),
                max_tokens=16)  # fmt: skip
    with capture_logs() as logs:
        reply = await post(session, sidecar, body, headers={"X-Request-Id": "story-1"})
        await post(session, sidecar, b"[]")
        await post(session, sidecar, chat(stream=True))
    lines = [e for e in logs if e["event"] == "request.finished"]
    assert len(lines) == 3
    assert len({line["request_id"] for line in lines}) == 3
    line = lines[0]
    assert line["log_level"] == "info"
    assert (line["request_id"], line["route"]) == ("story-1", "chat_completions")
    assert (line["decision"], line["reason"]) == ("downscale", "max_image_tokens")
    assert [(i["format"], i["source"]) for i in line["images"]] == [("JPEG", "data")] * 2
    assert line["images"][1]["size"] == "320x240"
    assert [i["size"] for i in line["images_before_downscale"]] == ["1920x1080", "320x240"]
    assert line["images_before_downscale"][0]["tokens"] == 2691
    assert line["images"][0]["tokens"] <= 1000  # what vLLM was sent
    assert line["predicted_prompt_tokens"] == int(reply.headers[PROMPT_TOKENS])
    assert line["predicted_kv_bytes"] == int(reply.headers[KV])
    assert line["wait_seconds"] == pytest.approx(0, abs=0.05)
    assert line["upstream_status"] == 200
    assert 0 < line["duration_seconds"] < 5
    assert line["observed_prompt_tokens"] > 0
    assert (lines[1]["decision"], lines[1]["reason"]) == ("reject", "invalid_body")
    assert lines[2]["predicted_prompt_tokens"] == expected()[1]
