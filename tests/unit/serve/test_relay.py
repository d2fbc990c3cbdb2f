"""serve.relay: a front aiohttp server relays to an upstream one, both real on 127.0.0.1, so
each test sees exactly the bytes, headers and timing a client would."""

from __future__ import annotations

import asyncio
import gzip
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

import aiohttp
import orjson
import pytest
from aiohttp import web
from multidict import CIMultiDict, CIMultiDictProxy

from sidecar.errors import UpstreamError
from sidecar.serve.relay import (
    ANTHROPIC_BROKEN_STREAM_EVENT,
    BROKEN_STREAM_EVENT,
    Forward,
    Relayed,
    Upstream,
    forwardable_headers,
    make_session,
    relay,
    stream_request_body,
)

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@asynccontextmanager
async def serving(handler: Handler) -> AsyncIterator[str]:
    """``handler`` on every path of a server on a free loopback port; yields its origin."""
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handler)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    try:
        yield f"http://127.0.0.1:{runner.addresses[0][1]}"
    finally:
        await runner.cleanup()


@dataclass
class Front:
    """The relaying server: each request relayed to ``upstream`` under ``options``."""

    upstream: str
    origin: str = ""
    relayed: list[Relayed] = field(default_factory=list)
    errors: list[UpstreamError] = field(default_factory=list)


@asynccontextmanager
async def front(
    upstream: str, *, streamed: bool = False, **options: object
) -> AsyncIterator[Front]:
    """The relay, each client body read whole first, or passed on as it arrives if ``streamed``."""
    state = Front(upstream)
    session = make_session(connect_timeout_seconds=2, read_timeout_seconds=2)

    async def handle(request: web.Request) -> web.StreamResponse:
        forward = Forward(
            url=Upstream(upstream, connect_timeout_seconds=2, read_timeout_seconds=2).url(
                request.path_qs
            ),
            body=stream_request_body(request) if streamed else await request.read(),
            headers=forwardable_headers(request.headers),
            response_headers={"x-relayed": "yes"},
            **options,  # type: ignore[arg-type]
        )
        try:
            relayed = await relay(request, session, forward)
        except UpstreamError as exc:
            state.errors.append(exc)
            return web.json_response({"error": exc.message}, status=exc.status)
        state.relayed.append(relayed)
        return relayed.response

    async with serving(handle) as origin:
        state.origin = origin
        try:
            yield state
        finally:
            await session.close()


async def answer(
    client: aiohttp.ClientSession, method: str, url: str, data: bytes = b"{}"
) -> tuple[int, CIMultiDictProxy[str], bytes]:
    """Status, headers and body of one request, read whole; redirects are not followed."""
    async with client.request(method, url, data=data, allow_redirects=False) as response:
        return response.status, response.headers, await response.read()


@pytest.fixture
async def client() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession(auto_decompress=False) as session:
        yield session


def test_forwardable_headers_drop_hop_by_hop_and_connection_named_headers() -> None:
    headers = CIMultiDict(
        [
            ("Connection", "keep-alive, X-Private"),
            ("X-Private", "secret"),
            ("Transfer-Encoding", "chunked"),
            ("Host", "sidecar:8080"),
            ("Authorization", "Bearer t"),
            ("Accept", "a"),
            ("Accept", "b"),
        ]
    )
    copied = forwardable_headers(headers, {"x-request-id": "r1"})
    assert list(copied.items()) == [
        ("Authorization", "Bearer t"),
        ("Accept", "a"),
        ("Accept", "b"),
        ("x-request-id", "r1"),
    ]


def test_upstream_url_keeps_the_path_and_query_exactly_as_sent() -> None:
    upstream = Upstream("http://vllm:8000/", connect_timeout_seconds=1, read_timeout_seconds=1)
    assert (
        str(upstream.url("/v1/a%2Fb/../c?q=a%20b&x")) == "http://vllm:8000/v1/a%2Fb/../c?q=a%20b&x"
    )


def test_upstream_session_is_refused_outside_serving() -> None:
    upstream = Upstream("http://vllm:8000", connect_timeout_seconds=1, read_timeout_seconds=1)
    with pytest.raises(RuntimeError, match="not open"):
        _ = upstream.session


async def test_relay_passes_a_compressed_answer_through_byte_for_byte(
    client: aiohttp.ClientSession,
) -> None:
    packed = gzip.compress(b'{"answer": "' + b"x" * 5000 + b'"}')

    async def compressed(request: web.Request) -> web.Response:
        return web.Response(
            body=packed, headers={"Content-Encoding": "gzip", "Content-Type": "application/json"}
        )

    async with serving(compressed) as upstream, front(upstream) as relaying:
        _, headers, body = await answer(client, "POST", relaying.origin + "/v1/chat/completions")
    assert (headers["Content-Encoding"], headers["x-relayed"]) == ("gzip", "yes")
    assert body == packed
    (relayed,) = relaying.relayed
    assert relayed.outcome.completed
    assert relayed.outcome.bytes_relayed == len(packed)


async def test_relay_sends_a_large_body_to_vllm_intact(client: aiohttp.ClientSession) -> None:
    received: list[bytes] = []

    async def echo_size(request: web.Request) -> web.Response:
        received.append(await request.read())
        return web.Response(text=request.headers["Content-Length"])

    body = bytes(range(256)) * 1000  # past the size sent in two writes
    async with serving(echo_size) as upstream, front(upstream) as relaying:
        _, _, length = await answer(client, "POST", relaying.origin + "/v1/x", body)
    assert length == str(len(body)).encode()
    assert received == [body]


async def test_relay_writes_each_chunk_as_soon_as_vllm_sends_it(
    client: aiohttp.ClientSession,
) -> None:
    async def slow_second_chunk(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        await response.write(b"data: 1\n\n")
        await asyncio.sleep(0.5)
        await response.write(b"data: 2\n\n")
        await response.write_eof()
        return response

    async with serving(slow_second_chunk) as upstream, front(upstream) as relaying:
        started = time.perf_counter()
        async with client.post(relaying.origin + "/v1/chat/completions", data=b"{}") as response:
            assert await response.content.readline() == b"data: 1\n"
            assert time.perf_counter() - started < 0.4
            assert (await response.read()).endswith(b"data: 2\n\n")
    assert relaying.relayed[0].outcome.first_byte_seconds is not None


async def _sse_then_reset(request: web.Request) -> web.StreamResponse:
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await response.prepare(request)
    await response.write(b'data: {"choices": []}\n\n')
    await asyncio.sleep(0.05)
    assert request.transport is not None
    request.transport.abort()
    return response


@pytest.mark.parametrize(
    ("anthropic", "ending"),
    [(False, BROKEN_STREAM_EVENT), (True, ANTHROPIC_BROKEN_STREAM_EVENT)],
    ids=["openai", "anthropic"],
)
async def test_relay_ends_a_stream_vllm_broke_off_with_an_error_event(
    client: aiohttp.ClientSession, anthropic: bool, ending: bytes
) -> None:
    async with (
        serving(_sse_then_reset) as upstream,
        front(upstream, anthropic=anthropic) as relaying,
    ):
        _, _, body = await answer(client, "POST", relaying.origin + "/v1/chat/completions")
    assert body == b'data: {"choices": []}\n\n' + ending
    (relayed,) = relaying.relayed
    assert relayed.outcome.error is not None
    assert not relayed.outcome.completed


async def test_relay_raises_upstream_error_when_vllm_cannot_be_reached(
    client: aiohttp.ClientSession,
) -> None:
    async with serving(_sse_then_reset) as gone:
        pass  # the port is closed again
    async with front(gone) as relaying:
        status, _, _ = await answer(client, "POST", relaying.origin + "/v1/chat/completions")
    assert status == 502
    (error,) = relaying.errors
    assert "unreachable" in error.message


@dataclass
class DroppingUpstream:
    """What a raw keep-alive HTTP/1.1 upstream read: every request body, in arrival order."""

    origin: str = ""
    read: list[bytes] = field(default_factory=list)


@asynccontextmanager
async def dropping_upstream(drop: Callable[[int, int], bool]) -> AsyncIterator[DroppingUpstream]:
    """An upstream that echoes each body on a kept-alive connection, except that it closes the
    connection unanswered where ``drop(connection_index, request_index_on_it)``: what a server
    closing an idle connection as the next request arrives looks like to the client."""
    state = DroppingUpstream()
    connections = 0

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal connections
        connection, connections = connections, connections + 1
        try:
            for request_index in range(1000):
                body = await _read_request_body(reader)
                state.read.append(body)
                if drop(connection, request_index):
                    return
                head = b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(body)
                writer.write(head + body)
                await writer.drain()
        except asyncio.IncompleteReadError:
            pass  # the client closed the connection
        finally:
            writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    state.origin = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"
    async with server:
        yield state


async def _read_request_body(reader: asyncio.StreamReader) -> bytes:
    """One request's body, sent with a Content-Length or chunked."""
    head = await reader.readuntil(b"\r\n\r\n")
    fields = dict(line.lower().split(b":", 1) for line in head.split(b"\r\n")[1:] if b":" in line)
    if b"content-length" in fields:
        return await reader.readexactly(int(fields[b"content-length"]))
    body = b""
    while size := int((await reader.readuntil(b"\r\n")).strip(), 16):
        body += await reader.readexactly(size)
        await reader.readexactly(2)
    await reader.readexactly(2)
    return body


def _second_request_on_the_first_connection(connection: int, request_index: int) -> bool:
    return (connection, request_index) == (0, 1)


@pytest.mark.parametrize("size", [10, 200_000], ids=["small", "past-two-writes"])
async def test_relay_sends_again_on_a_fresh_connection_when_a_pooled_one_was_dead(
    client: aiohttp.ClientSession, size: int
) -> None:
    first, second = b"a" * size, b"b" * size
    async with (
        dropping_upstream(_second_request_on_the_first_connection) as upstream,
        front(upstream.origin) as relaying,
    ):
        answers = [
            await answer(client, "POST", relaying.origin + "/v1/completions", body)
            for body in (first, second)
        ]
    assert [(status, body) for status, _, body in answers] == [(200, first), (200, second)]
    assert upstream.read == [first, second, second]  # the dropped try, then the one answered
    assert relaying.errors == []


async def test_relay_never_sends_a_streamed_body_twice(client: aiohttp.ClientSession) -> None:
    async with (
        dropping_upstream(_second_request_on_the_first_connection) as upstream,
        front(upstream.origin, streamed=True) as relaying,
    ):
        statuses = [
            (await answer(client, "POST", relaying.origin + "/v1/x", body))[0]
            for body in (b"one", b"two")
        ]
    assert statuses == [200, 502]
    assert upstream.read == [b"one", b"two"]


async def test_relay_tries_a_dropping_upstream_only_twice(client: aiohttp.ClientSession) -> None:
    async with (
        dropping_upstream(lambda connection, request_index: True) as upstream,
        front(upstream.origin) as relaying,
    ):
        status, _, _ = await answer(client, "POST", relaying.origin + "/v1/x", b"once")
    assert status == 502
    assert upstream.read == [b"once", b"once"]
    (error,) = relaying.errors
    assert "unreachable" in error.message


async def test_relay_passes_vllms_status_and_makes_its_own_redirects_relative(
    client: aiohttp.ClientSession,
) -> None:
    origin: list[str] = []

    async def redirect(request: web.Request) -> web.Response:
        return web.Response(status=307, headers={"Location": origin[0] + "/v1/models"})

    async with serving(redirect) as upstream, front(upstream, upstream_origin=upstream) as relaying:
        origin.append(upstream)
        status, headers, _ = await answer(client, "GET", relaying.origin + "/v1/models/", b"")
    assert (status, headers["Location"]) == (307, "/v1/models")


TRACE_HEADERS = [
    ("traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"),
    ("tracestate", "rojo=00f067aa0ba902b7"),
    ("tracestate", "congo=t61rcWkgMzE"),  # a second line is legal; both go on, in order
    ("baggage", "tenant=acme,user.id=42;hidden"),
]


def test_trace_context_and_baggage_go_on_exactly_as_sent() -> None:
    sent = CIMultiDict([("Connection", "keep-alive"), ("Host", "sidecar"), *TRACE_HEADERS])
    forwarded = forwardable_headers(sent, {"x-request-id": "r1"})
    assert [(k, v) for k, v in forwarded.items() if k != "x-request-id"] == TRACE_HEADERS


def test_a_connection_header_naming_trace_context_drops_it_as_hop_by_hop() -> None:
    # RFC 9110: what Connection lists belongs to this hop only, trace headers included.
    sent = CIMultiDict([("Connection", "baggage"), *TRACE_HEADERS])
    assert "baggage" not in forwardable_headers(sent)
    assert forwardable_headers(sent).getall("tracestate") == [v for k, v in TRACE_HEADERS[1:3]]


def test_a_broken_stream_ends_as_vllms_own_stream_error_and_anthropics_error_event() -> None:
    error, done = BROKEN_STREAM_EVENT.split(b"\n\n")[:2]
    assert error.startswith(b"data: ")
    assert done == b"data: [DONE]"
    assert orjson.loads(error.removeprefix(b"data: ")) == {
        "error": {
            "message": "vLLM closed the stream early",
            "type": "Bad Gateway",  # vLLM types its stream errors by the status's phrase
            "param": None,
            "code": 502,
        }
    }
    name, data = ANTHROPIC_BROKEN_STREAM_EVENT.removesuffix(b"\n\n").split(b"\n")
    assert name == b"event: error"
    assert orjson.loads(data.removeprefix(b"data: ")) == {
        "type": "error",
        "error": {"type": "api_error", "message": "vLLM closed the stream early"},
    }
