"""Forward a request to vLLM through the shared session and relay the answer as it comes.

Bytes are relayed untouched: the session never decompresses (``auto_decompress=False``),
hop-by-hop headers are dropped in both directions, and each chunk is written to the
client as soon as it arrives, so streaming adds no time to first token.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass
from http import HTTPStatus
from typing import Protocol

import aiohttp
from aiohttp import web
from multidict import CIMultiDict, CIMultiDictProxy
from yarl import URL

from sidecar.errors import UpstreamError, UpstreamTimeoutError
from sidecar.observe.record import UpstreamOutcome
from sidecar.routes import ApiShape
from sidecar.serve.responses import error_body

# RFC 9110 section 7.6.1, plus the framing headers aiohttp recomputes for us.
HOP_BY_HOP_HEADERS = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "proxy-connection",
        "te",
        "trailer",
        "trailers",
        "transfer-encoding",
        "upgrade",
        "host",
        "content-length",
    }
)

ChunkObserver = Callable[[bytes], None]
COALESCE_LIMIT_BYTES = 1 << 16
# The first try and one more on a fresh connection (see ``_send``).
STALE_CONNECTION_ATTEMPTS = 2
# An idle pooled connection is dropped before vLLM's server drops it (its
# VLLM_HTTP_TIMEOUT_KEEP_ALIVE default), so few are ever found dead.
UPSTREAM_IDLE_CONNECTION_SECONDS = 4.0


class ChunkFilter(Protocol):
    """Rewrites the relayed body chunk by chunk (used only to hide a chunk we asked for)."""

    def feed(self, chunk: bytes) -> bytes:
        """Bytes to send for this chunk."""
        ...

    def flush(self) -> bytes:
        """Bytes held back at the end."""
        ...


@dataclass(frozen=True, slots=True)
class Forward:
    """One request to send to vLLM, and how to relay its answer."""

    url: URL
    body: bytes | AsyncIterator[bytes] | None
    headers: CIMultiDict[str]
    response_headers: Mapping[str, str]
    observe: ChunkObserver | None = None  # sees each chunk as vLLM sent it
    chunk_filter: ChunkFilter | None = None  # rewrites what the client gets
    anthropic: bool = False  # a broken stream ends with Anthropic's error event
    upstream_origin: str | None = None  # a Location under it is made relative


@dataclass(frozen=True, slots=True)
class Relayed:
    """The answer sent to the client, and how relaying it went."""

    response: web.StreamResponse
    outcome: UpstreamOutcome


class Upstream:
    """vLLM's base URL and the one pooled keep-alive session to it (open while serving)."""

    def __init__(
        self, base_url: str, *, connect_timeout_seconds: float, read_timeout_seconds: float
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self._timeouts = (connect_timeout_seconds, read_timeout_seconds)
        self._session: aiohttp.ClientSession | None = None

    @property
    def session(self) -> aiohttp.ClientSession:
        """The shared session; RuntimeError outside start-up and shutdown."""
        if self._session is None:
            raise RuntimeError("the upstream session is not open")
        return self._session

    def url(self, path_qs: str) -> URL:
        """vLLM's URL for the path and query, sent exactly as given (never re-normalised)."""
        return URL(self.base_url + path_qs, encoded=True)

    def open(self) -> None:
        """Open the session (inside the running event loop)."""
        self._session = make_session(*self._timeouts)

    async def close(self) -> None:
        """Close the session and its connections."""
        if self._session is not None:
            await self._session.close()


def forwardable_headers(
    headers: CIMultiDictProxy[str] | CIMultiDict[str], extra: Mapping[str, str] | None = None
) -> CIMultiDict[str]:
    """Copy headers without hop-by-hop ones (and those the Connection header names)."""
    dropped = HOP_BY_HOP_HEADERS.union(
        token.strip().lower()
        for value in headers.getall("Connection", [])
        for token in value.split(",")
    )
    copied = CIMultiDict((k, v) for k, v in headers.items() if k.lower() not in dropped)
    for key, value in (extra or {}).items():
        copied[key] = value
    return copied


def make_session(
    connect_timeout_seconds: float, read_timeout_seconds: float
) -> aiohttp.ClientSession:
    """The one pooled keep-alive session to vLLM."""
    return aiohttp.ClientSession(
        auto_decompress=False,
        timeout=aiohttp.ClientTimeout(
            total=None, connect=connect_timeout_seconds, sock_read=read_timeout_seconds
        ),
        connector=aiohttp.TCPConnector(
            limit=0, ttl_dns_cache=60, keepalive_timeout=UPSTREAM_IDLE_CONNECTION_SECONDS
        ),
        skip_auto_headers=("User-Agent", "Accept-Encoding", "Content-Type"),
    )


async def relay(request: web.Request, session: aiohttp.ClientSession, forward: Forward) -> Relayed:
    """Send to vLLM and stream its answer back; raises UpstreamError before the first byte."""
    sent_at = time.perf_counter()
    try:
        upstream = await _send(session, request.method, forward)
    except (TimeoutError, aiohttp.ServerTimeoutError) as exc:
        raise UpstreamTimeoutError(f"vLLM did not answer in time: {exc!s}") from exc
    except aiohttp.ClientError as exc:
        raise UpstreamError(f"vLLM is unreachable: {exc!s}") from exc
    async with upstream:
        headers = forwardable_headers(upstream.headers, forward.response_headers)
        if forward.upstream_origin is not None:
            _hide_origin(headers, forward.upstream_origin)
        response = web.StreamResponse(
            status=upstream.status, reason=upstream.reason, headers=headers
        )
        if (
            upstream.content_length is not None
            and forward.chunk_filter is None
            and "chunked" not in upstream.headers.get("Transfer-Encoding", "")
        ):
            response.content_length = upstream.content_length
        progress = _Progress(sent_at)
        error: str | None = None
        try:
            await _relay_body(request, upstream, response, forward, progress)
        except ConnectionResetError:
            raise  # writing to the client failed: the client left, vLLM is not at fault
        except (aiohttp.ClientError, TimeoutError) as exc:
            error = f"{type(exc).__name__}: {exc!s}"
            await _end_broken_stream(request, response, upstream, anthropic=forward.anthropic)
    outcome = UpstreamOutcome(
        status=upstream.status,
        first_byte_seconds=progress.first_byte_seconds,
        bytes_relayed=progress.bytes_relayed,
        completed=progress.completed,
        error=error,
    )
    return Relayed(response, outcome)


async def _send(
    session: aiohttp.ClientSession, method: str, forward: Forward
) -> aiohttp.ClientResponse:
    """vLLM's answer head, trying once more on a fresh connection if a pooled one was dead.

    vLLM's server closes an idle keep-alive connection after a few seconds, and one that
    closes as we pick it from the pool fails the write, or ends before any answer, although
    vLLM is healthy and never read the request (aiohttp retries that itself only for
    idempotent methods). A body the sidecar holds whole can be sent again; one streamed from
    the client cannot, and a refused connection means vLLM is down, so neither is retried.
    """
    replayable = forward.body is None or isinstance(forward.body, bytes)
    for attempt in range(STALE_CONNECTION_ATTEMPTS):
        headers = forward.headers
        data: bytes | AsyncIterator[bytes | memoryview] | AsyncIterator[bytes] | None
        data = forward.body
        if isinstance(forward.body, bytes) and len(forward.body) > COALESCE_LIMIT_BYTES:
            headers = CIMultiDict(headers)
            headers["Content-Length"] = str(len(forward.body))
            data = _in_two_writes(forward.body)
        try:
            return await session.request(
                method, forward.url, data=data, headers=headers, allow_redirects=False
            )
        except aiohttp.ClientConnectorError:
            raise
        except (aiohttp.ServerDisconnectedError, aiohttp.ClientOSError):
            if not replayable or attempt + 1 == STALE_CONNECTION_ATTEMPTS:
                raise
    raise AssertionError("unreachable: the last attempt returns or raises")


def _hide_origin(headers: CIMultiDict[str], origin: str) -> None:
    """A redirect vLLM builds from the Host it was sent names the pod-internal address:
    answer with the same path, relative, so a client follows it back through the sidecar."""
    location = headers.get("Location")
    if location is not None and location.startswith(origin + "/"):
        headers["Location"] = location[len(origin) :]


@dataclass(slots=True)
class _Progress:
    """How far one relay got; private to it, read once at its end."""

    sent_at: float
    first_byte_seconds: float | None = None
    bytes_relayed: int = 0
    completed: bool = False

    def first_byte(self) -> None:
        self.first_byte_seconds = time.perf_counter() - self.sent_at


async def _in_two_writes(body: bytes) -> AsyncIterator[bytes | memoryview]:
    """A large body as a small first write and the rest, without a copy.

    aiohttp coalesces the headers with the first write of the body, and on Python before
    3.12.9 it does so by joining them: for a 4 MB image that is a 4 MB copy per request.
    """
    view = memoryview(body)
    yield view[:COALESCE_LIMIT_BYTES]
    yield view[COALESCE_LIMIT_BYTES:]


async def _relay_body(
    request: web.Request,
    upstream: aiohttp.ClientResponse,
    response: web.StreamResponse,
    forward: Forward,
    progress: _Progress,
) -> None:
    observe, chunk_filter = forward.observe, forward.chunk_filter
    async for chunk in upstream.content.iter_any():
        if not response.prepared:
            progress.first_byte()
            await response.prepare(request)
        if observe is not None:
            observe(chunk)
        if chunk_filter is not None:
            chunk = chunk_filter.feed(chunk)
        await response.write(chunk)
        progress.bytes_relayed += len(chunk)
    if not response.prepared:
        progress.first_byte()
        await response.prepare(request)
    if chunk_filter is not None:
        await response.write(chunk_filter.flush())
    await response.write_eof()
    progress.completed = True


BROKEN_STREAM_MESSAGE = "vLLM closed the stream early"
# What vLLM itself sends when a stream fails after its 200: an error event, typed by the
# status's phrase as vLLM's stream errors are, then the end.
BROKEN_STREAM_EVENT = (
    b"data: "
    + error_body(
        HTTPStatus.BAD_GATEWAY,
        BROKEN_STREAM_MESSAGE,
        error_type=HTTPStatus.BAD_GATEWAY.phrase,
        param=None,
    )
    + b"\n\ndata: [DONE]\n\n"
)
# Anthropic's stream error event (its clients look for ``event: error``), in the body an
# Anthropic route's 502 would carry.
ANTHROPIC_BROKEN_STREAM_EVENT = (
    b"event: error\ndata: "
    + error_body(
        HTTPStatus.BAD_GATEWAY,
        BROKEN_STREAM_MESSAGE,
        error_type=HTTPStatus.BAD_GATEWAY.phrase,
        param=None,
        api=ApiShape.ANTHROPIC,
    )
    + b"\n\n"
)


async def _end_broken_stream(
    request: web.Request,
    response: web.StreamResponse,
    upstream: aiohttp.ClientResponse,
    *,
    anthropic: bool,
) -> None:
    """vLLM broke off mid-answer: end an SSE stream with an error event, else drop the socket."""
    if not response.prepared:
        raise UpstreamError("vLLM closed the connection before answering")
    if upstream.headers.get("Content-Type", "").startswith("text/event-stream"):
        event = ANTHROPIC_BROKEN_STREAM_EVENT if anthropic else BROKEN_STREAM_EVENT
        try:
            await response.write(event)
            await response.write_eof()
            return
        except (ConnectionResetError, RuntimeError):
            pass
    if request.transport is not None:
        request.transport.close()


async def stream_request_body(request: web.Request) -> AsyncIterator[bytes]:
    """The client's body as it arrives, for routes the sidecar does not inspect."""
    async for chunk in request.content.iter_any():
        yield chunk
