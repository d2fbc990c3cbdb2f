"""End to end, abusive clients: oversized and slow bodies, slow headers, hostile JSON.

Each test talks to a real sidecar in front of the stand-in over a bare loopback socket
(``tests.support.raw_http``), so it controls every byte and when it is sent. The invariants: every
refusal is a 4xx in the route's error shape (vLLM's, Anthropic's on ``/v1/messages``), nothing
reaches vLLM, the connection is not held open longer than SIDECAR_CLIENT_READ_TIMEOUT_SECONDS,
and the ledger is back at zero.
"""

from __future__ import annotations

import gzip
import json
import time
from typing import Any

import orjson
import pytest
from structlog.testing import capture_logs

from sidecar.serve.server import RunningSidecar
from sidecar.standin import StandinServer
from tests.support.imaging import chat, image_url_part, jpeg_uri
from tests.support.proxy_helpers import (
    CHAT,
    MESSAGES,
    RESPONSES,
    expected,
    finished,
    ledger_is_idle,
)
from tests.support.raw_http import RawConnection, RawReply, chunk, request_head
from tests.support.sidecars import SidecarFactory
from tests.support.waiting import eventually

LIMIT_BYTES = 64 * 1024
SLOW_SECONDS = 0.4


def assert_error_shape(reply: RawReply, status: int, *, anthropic: bool = False) -> str:
    """The reply is ``status`` in the route's error shape; returns the message."""
    assert reply.status == status, reply.body
    document = reply.json()
    if anthropic:
        assert document["type"] == "error"
        assert set(document["error"]) == {"type", "message"}
    else:
        assert set(document["error"]) == {"message", "type", "param", "code"}
        assert document["error"]["code"] == status
    return str(document["error"]["message"])


async def post_raw(sidecar: RunningSidecar, body: bytes, path: str = CHAT) -> RawReply:
    connection = await RawConnection.open(sidecar.port)
    try:
        await connection.send(request_head(path, content_length=len(body)) + body)
        return await connection.reply()
    finally:
        await connection.close()


# --- the body limit is enforced while the body is read -----------------------------------------


async def test_proxy_refuses_a_chunked_body_over_the_limit_before_the_client_has_sent_it_all(
    make_sidecar: SidecarFactory, standin: StandinServer
) -> None:
    sidecar = await make_sidecar(max_body_bytes=LIMIT_BYTES)
    connection = await RawConnection.open(sidecar.port)
    await connection.send(request_head(CHAT, chunked=True))
    await connection.send(chunk(b'{"model": "m", "messages": [{"role": "user", "content": "'))
    piece, planned_bytes = b"x" * 8192, 64 * LIMIT_BYTES  # the client means to send 4 MiB
    answered = False
    for _ in range(planned_bytes // len(piece)):
        await connection.send(chunk(piece))
        if await connection.answer_waiting(0.02):
            answered = True
            break
    assert answered
    # The answer came while the client was still writing: its side is open, most unsent.
    assert not connection.writer.is_closing()
    assert connection.sent_bytes < LIMIT_BYTES + 8 * len(piece) < planned_bytes
    message = assert_error_shape(await connection.reply(), 413)
    assert "SIDECAR_MAX_BODY_BYTES" in message
    await connection.close()
    assert standin.requests == []
    assert ledger_is_idle(sidecar)


@pytest.mark.parametrize("path", [CHAT, MESSAGES], ids=["openai-shape", "anthropic-shape"])
async def test_proxy_refuses_a_declared_body_over_the_limit_before_reading_a_byte_of_it(
    make_sidecar: SidecarFactory, standin: StandinServer, path: str
) -> None:
    sidecar = await make_sidecar(max_body_bytes=LIMIT_BYTES)
    connection = await RawConnection.open(sidecar.port)
    await connection.send(request_head(path, content_length=1 << 30))  # 1 GiB, none of it sent
    reply = await connection.reply(timeout_seconds=2)
    assert "1,073,741,824 bytes" in assert_error_shape(reply, 413, anthropic=path == MESSAGES)
    await connection.close()
    assert standin.requests == []


# --- slow clients are cut off (slowloris) ------------------------------------------------------


async def test_proxy_closes_a_connection_whose_headers_trickle_in_slower_than_the_timeout(
    make_sidecar: SidecarFactory, standin: StandinServer
) -> None:
    sidecar = await make_sidecar(client_read_timeout_seconds=SLOW_SECONDS)
    with capture_logs() as logs:
        connection = await RawConnection.open(sidecar.port)
        started = time.perf_counter()
        await connection.send(b"POST /v1/chat/completions HTTP/1.1\r\nHost: sidecar\r\n")
        for n in range(40):  # one header line every 50 ms, never the blank line that ends them
            await connection.send(b"X-Slow-%d: a\r\n" % n)
            if await connection.answer_waiting(0.05):
                break
        assert await connection.closed_by_server(timeout_seconds=2)
        elapsed = time.perf_counter() - started
        await connection.close()
    assert SLOW_SECONDS <= elapsed < SLOW_SECONDS + 1.0
    assert finished(logs) == []  # no request ever reached a handler
    assert standin.requests == []


async def test_proxy_closes_an_idle_connection_that_never_sends_a_request(
    make_sidecar: SidecarFactory,
) -> None:
    sidecar = await make_sidecar(client_read_timeout_seconds=SLOW_SECONDS)
    connection = await RawConnection.open(sidecar.port)
    started = time.perf_counter()
    assert await connection.closed_by_server(timeout_seconds=2)
    assert SLOW_SECONDS <= time.perf_counter() - started < SLOW_SECONDS + 1.0
    await connection.close()


@pytest.mark.parametrize(
    ("path", "chunked"),
    [(CHAT, False), (CHAT, True), (MESSAGES, False)],
    ids=["content-length", "chunked", "anthropic-shape"],
)
async def test_proxy_answers_408_and_closes_when_the_body_trickles_in_slower_than_the_timeout(
    make_sidecar: SidecarFactory, standin: StandinServer, path: str, *, chunked: bool
) -> None:
    sidecar = await make_sidecar(client_read_timeout_seconds=SLOW_SECONDS)
    connection = await RawConnection.open(sidecar.port)
    head = request_head(path, chunked=chunked, content_length=None if chunked else 10_000)
    await connection.send(head)
    started = time.perf_counter()
    for _ in range(100):  # 4 bytes every 20 ms: alive, but never done
        await connection.send(chunk(b"[[[[") if chunked else b"[[[[")
        if await connection.answer_waiting(0.02):
            break
    reply = await connection.reply()
    elapsed = time.perf_counter() - started
    message = assert_error_shape(reply, 408, anthropic=path == MESSAGES)
    assert "SIDECAR_CLIENT_READ_TIMEOUT_SECONDS" in message
    assert reply.headers["Connection"] == "close"
    assert SLOW_SECONDS <= elapsed < SLOW_SECONDS + 1.0
    assert await connection.closed_by_server(timeout_seconds=SLOW_SECONDS + 1.0)
    await connection.close()
    assert standin.requests == []
    assert ledger_is_idle(sidecar)


# --- HTTP framing the server refuses before any handler runs -----------------------------------

FRAMING = {
    "header-line-over-8190-bytes": request_head(CHAT, content_length=2, X_Big="a" * 9000) + b"{}",
    "more-than-128-headers": request_head(
        CHAT, content_length=2, **{f"X_H{n}": "a" for n in range(200)}
    )
    + b"{}",
    "content-length-and-chunked": request_head(CHAT, content_length=2, chunked=True) + chunk(b"{}"),
    "negative-content-length": request_head(CHAT, content_length=-1) + b"{}",
    "bad-chunk-size": request_head(CHAT, chunked=True) + b"zz\r\n{}\r\n",
}


@pytest.mark.parametrize("raw", FRAMING.values(), ids=FRAMING.keys())
async def test_proxy_refuses_broken_http_framing_with_400_before_any_handler_runs(
    make_sidecar: SidecarFactory, standin: StandinServer, raw: bytes
) -> None:
    sidecar = await make_sidecar()
    with capture_logs() as logs:
        connection = await RawConnection.open(sidecar.port)
        await connection.send(raw)
        reply = await connection.reply()
        assert await connection.closed_by_server(timeout_seconds=2)
        await connection.close()
    assert reply.status == 400  # aiohttp's own plain-text answer: no route was reached
    assert finished(logs) == []
    assert standin.requests == []


# --- hostile JSON ------------------------------------------------------------------------------


def nested(depth: int) -> bytes:
    return b'{"model": "m", "messages": ' + b"[" * depth + b"]" * depth + b"}"


def many_parts(count: int) -> bytes:
    parts = [{"type": "text", "text": "a"}] * count
    return orjson.dumps({"model": "m", "messages": [{"role": "user", "content": parts}]})


HOSTILE = {
    "nested-past-orjsons-limit": (nested(100_000), "not valid JSON"),
    "nested-past-the-sidecars-limit": (nested(100), "nested deeper than 64 levels"),
    "10001-content-parts": (many_parts(10_000), "Too many messages and content parts"),
    "invalid-utf8-in-text": (
        b'{"model": "m", "messages": [{"role": "user", "content": "\xff\xfe"}]}',
        "not valid UTF-8",
    ),
    "invalid-utf8-in-a-key": (b'{"model": "m", "\xc3\x28": 1, "messages": []}', "not valid UTF-8"),
    "lone-surrogate-escape": (
        b'{"model": "m", "messages": [{"role": "user", "content": "\\ud800"}]}',
        "not valid JSON",
    ),
    "invalid-utf8-in-a-data-uri": (
        orjson.dumps(chat(image_url_part(jpeg_uri(8, 8)))).replace(b",/9j/", b",\xff\xfe\xfd\xfc"),
        "not strict base64",
    ),
    "count-past-64-bits": (
        b'{"model": "m", "max_tokens": 123456789012345678901234567890, "messages": []}',
        "max_tokens must be at most 9223372036854775807",
    ),
    "counts-whose-product-overflows-a-float": (
        b'{"model": "m", "n": 1e300, "max_tokens": 1e300, "messages": []}',
        "must be at most 9223372036854775807",
    ),
    "duplicate-key-whose-last-value-is-invalid": (
        b'{"model": "m", "messages": [], "messages": 7}',
        "'messages' must be a list",
    ),
    "not-an-object": (b"[1, 2, 3]", "must be a JSON object"),
    "empty-body": (b"", "not valid JSON"),
    "compressed-body": (gzip.compress(orjson.dumps(chat())), "Content-Encoding 'gzip'"),
}


@pytest.mark.parametrize(("body", "says"), HOSTILE.values(), ids=HOSTILE.keys())
async def test_proxy_answers_hostile_json_with_a_clear_400_and_forwards_nothing(
    make_sidecar: SidecarFactory, standin: StandinServer, body: bytes, says: str
) -> None:
    sidecar = await make_sidecar()
    connection = await RawConnection.open(sidecar.port)
    encoding = {"Content_Encoding": "gzip"} if body[:2] == b"\x1f\x8b" else {}
    await connection.send(request_head(CHAT, content_length=len(body), **encoding) + body)
    reply = await connection.reply()
    await connection.close()
    assert says in assert_error_shape(reply, 400)
    assert standin.requests == []
    assert ledger_is_idle(sidecar)


async def test_proxy_answers_hostile_json_on_messages_in_anthropics_shape(
    make_sidecar: SidecarFactory, standin: StandinServer
) -> None:
    sidecar = await make_sidecar()
    reply = await post_raw(sidecar, nested(100_000), MESSAGES)
    assert "not valid JSON" in assert_error_shape(reply, 400, anthropic=True)
    assert standin.requests == []


BIG_IMAGE = image_url_part(jpeg_uri(1920, 1080))
TEXT_ONLY = {"role": "user", "content": "hi"}
WITH_IMAGE = {"role": "user", "content": [{"type": "text", "text": "hi"}, BIG_IMAGE]}


@pytest.mark.parametrize(
    ("first", "last"),
    [(WITH_IMAGE, TEXT_ONLY), (TEXT_ONLY, WITH_IMAGE)],
    ids=["image-then-text", "text-then-image"],
)
async def test_proxy_prices_duplicate_keys_as_vllm_reads_them_last_one_wins(
    make_sidecar: SidecarFactory, standin: StandinServer, first: Any, last: Any
) -> None:
    sidecar = await make_sidecar()
    body = b'{"model": "m", "messages": [%s], "max_tokens": 8, "messages": [%s]}' % (
        orjson.dumps(first),
        orjson.dumps(last),
    )
    reply = await post_raw(sidecar, body)
    assert reply.status == 200, reply.body
    seen_by_vllm = json.loads(body)["messages"]  # Python's json, behind vLLM's pydantic models
    sizes = [(1920, 1080)] if seen_by_vllm == [WITH_IMAGE] else []
    assert int(reply.headers["x-vlm-sidecar-visual-tokens"]) == expected(sizes)[0]
    assert standin.requests[-1].body == body  # forwarded byte for byte, duplicates and all


# --- compressed bodies ---------------------------------------------------------------------------


async def test_proxy_passes_a_compressed_body_through_other_paths_as_sent(
    make_sidecar: SidecarFactory, standin: StandinServer
) -> None:
    sidecar = await make_sidecar(unknown_routes="pass")  # /echo is the stand-in's route
    compressed = gzip.compress(b"hello, vLLM" * 100)
    connection = await RawConnection.open(sidecar.port)
    head = request_head("/echo/tokenize", content_length=len(compressed), Content_Encoding="gzip")
    await connection.send(head + compressed)
    reply = await connection.reply()
    await connection.close()
    assert reply.status == 200
    assert reply.body == b"hello, vLLM" * 100  # the stand-in decompressed what it was sent
    (recorded,) = standin.requests
    assert recorded.headers["Content-Length"] == str(len(compressed))
    assert recorded.headers["Content-Encoding"] == "gzip"


async def test_proxy_never_inflates_a_gzip_bomb(
    make_sidecar: SidecarFactory, standin: StandinServer
) -> None:
    sidecar = await make_sidecar(max_body_bytes=LIMIT_BYTES)
    bomb = gzip.compress(b"[" * (64 << 20))  # 64 MiB of JSON-ish bytes in ~64 KiB
    assert len(bomb) < LIMIT_BYTES
    connection = await RawConnection.open(sidecar.port)
    head = request_head(RESPONSES, content_length=len(bomb), Content_Encoding="gzip")
    started = time.perf_counter()
    await connection.send(head + bomb)
    assert "uncompressed" in assert_error_shape(await connection.reply(), 400)
    assert time.perf_counter() - started < 0.5  # inflating 64 MiB would take longer
    await connection.close()
    assert standin.requests == []
    await eventually(lambda: ledger_is_idle(sidecar))
