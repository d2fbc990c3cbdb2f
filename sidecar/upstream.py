"""Forward a request to vLLM through the shared session and relay the answer as it comes.

Bytes are relayed untouched: the session never decompresses (``auto_decompress=False``),
hop-by-hop headers are dropped in both directions, and each chunk is written to the
client as soon as it arrives, so streaming adds no time to first token.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass
from typing import Protocol

import aiohttp
from aiohttp import web
from multidict import CIMultiDict, CIMultiDictProxy

from sidecar.errors import UpstreamError, UpstreamTimeoutError

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


class ChunkFilter(Protocol):
    """Rewrites the relayed body chunk by chunk (used only to hide a chunk we asked for)."""

    def feed(self, chunk: bytes) -> bytes:
        """Bytes to send for this chunk."""
        ...

    def flush(self) -> bytes:
        """Bytes held back at the end."""
        ...


@dataclass(slots=True)
class RelayResult:
    """How the relay ended, for the log line and metrics."""

    status: int = 0
    first_byte_seconds: float | None = None
    bytes_relayed: int = 0
    completed: bool = False
    error: str | None = None


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
        connector=aiohttp.TCPConnector(limit=0, ttl_dns_cache=60),
        skip_auto_headers=("User-Agent", "Accept-Encoding", "Content-Type"),
    )


async def forward_and_relay(
    request: web.Request,
    session: aiohttp.ClientSession,
    url: str,
    *,
    body: bytes | AsyncIterator[bytes] | None,
    request_headers: CIMultiDict[str],
    response_headers: Mapping[str, str],
    result: RelayResult,
    on_chunk: ChunkObserver | None = None,
    chunk_filter: ChunkFilter | None = None,
    clock: Callable[[], float],
    sent_at: float,
    anthropic: bool = False,
) -> web.StreamResponse:
    """Send to vLLM and stream its answer back; raises UpstreamError before the first byte."""
    data: bytes | AsyncIterator[bytes | memoryview] | None = body
    if isinstance(body, bytes) and len(body) > COALESCE_LIMIT_BYTES:
        request_headers["Content-Length"] = str(len(body))
        data = _in_two_writes(body)
    try:
        upstream = await session.request(
            request.method, url, data=data, headers=request_headers, allow_redirects=False
        )
    except (TimeoutError, aiohttp.ServerTimeoutError) as exc:
        raise UpstreamTimeoutError(f"vLLM did not answer in time: {exc!s}") from exc
    except aiohttp.ClientError as exc:
        raise UpstreamError(f"vLLM is unreachable: {exc!s}") from exc
    async with upstream:
        result.status = upstream.status
        response = web.StreamResponse(
            status=upstream.status,
            reason=upstream.reason,
            headers=forwardable_headers(upstream.headers, response_headers),
        )
        if (
            upstream.content_length is not None
            and chunk_filter is None
            and "chunked" not in upstream.headers.get("Transfer-Encoding", "")
        ):
            response.content_length = upstream.content_length
        try:
            await _relay_body(
                request, upstream, response, result, on_chunk, chunk_filter, clock, sent_at
            )
        except ConnectionResetError:
            raise  # writing to the client failed: the client left, vLLM is not at fault
        except (aiohttp.ClientError, TimeoutError) as exc:
            result.error = f"{type(exc).__name__}: {exc!s}"
            await _end_broken_stream(request, response, upstream, anthropic=anthropic)
    return response


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
    result: RelayResult,
    on_chunk: ChunkObserver | None,
    chunk_filter: ChunkFilter | None,
    clock: Callable[[], float],
    sent_at: float,
) -> None:
    prepared = False
    async for chunk in upstream.content.iter_any():
        if not prepared:
            result.first_byte_seconds = clock() - sent_at
            await response.prepare(request)
            prepared = True
        if on_chunk is not None:
            on_chunk(chunk)
        if chunk_filter is not None:
            chunk = chunk_filter.feed(chunk)
        await response.write(chunk)
        result.bytes_relayed += len(chunk)
    if not prepared:
        result.first_byte_seconds = clock() - sent_at
        await response.prepare(request)
    if chunk_filter is not None:
        await response.write(chunk_filter.flush())
    await response.write_eof()
    result.completed = True


# What vLLM itself sends when a stream fails after its 200: an error event, then the end.
BROKEN_STREAM_EVENT = (
    b'data: {"error": {"message": "vLLM closed the stream early", '
    b'"type": "Bad Gateway", "param": null, "code": 502}}\n\ndata: [DONE]\n\n'
)
# Anthropic's stream error event (its clients look for ``event: error``).
ANTHROPIC_BROKEN_STREAM_EVENT = (
    b'event: error\ndata: {"type": "error", "error": {"type": "api_error", '
    b'"message": "vLLM closed the stream early"}}\n\n'
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
