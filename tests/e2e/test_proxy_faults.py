"""End to end, failures: the ledger returns to zero however a request ends.

Clients that leave (before admission, while queued, mid-stream) and a vLLM that fails (refused
connection, 5xx, hang, reset mid-stream, malformed SSE). Faults come from the stand-in's
``x-standin-fault`` header; every connection is on 127.0.0.1.
"""

from __future__ import annotations

import asyncio
import socket
import time

import aiohttp
import orjson
import pytest
from structlog.testing import capture_logs

from sidecar.serve.keys import LEDGER
from sidecar.serve.server import RunningSidecar
from sidecar.standin import StandinServer
from sidecar.standin.replies import error_body
from tests.support.imaging import chat, image_url_part, jpeg_uri, messages
from tests.support.proxy_helpers import (
    CHAT,
    DECISION,
    MESSAGES,
    expected,
    fault,
    finished,
    ledger_is_idle,
    post,
    sample,
    url_of,
)
from tests.support.sidecars import SidecarFactory
from tests.support.waiting import eventually

STREAM = chat(image_url_part(jpeg_uri(640, 480)), stream=True, max_tokens=64)
TEXT_ONLY_KV = expected(output_tokens=64)[2]


def upstream_errors(sidecar: RunningSidecar, kind: str) -> float:
    return sample(sidecar, "vlm_sidecar_upstream_errors_total", kind=kind)


def sse_events(raw: bytes) -> list[bytes]:
    return [event for event in raw.split(b"\n\n") if event]


@pytest.fixture
def refused_port() -> int:
    """A loopback port that nothing listens on (bound, then closed)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = int(probe.getsockname()[1])
    return port


# --- clients that leave ------------------------------------------------------------------------


async def test_ledger_is_untouched_when_the_client_leaves_before_sending_its_whole_body(
    make_sidecar: SidecarFactory, standin: StandinServer
) -> None:
    sidecar = await make_sidecar(kv_budget_bytes="1GiB")
    with capture_logs() as logs:
        _, writer = await asyncio.open_connection("127.0.0.1", sidecar.port)
        writer.write(
            b"POST /v1/chat/completions HTTP/1.1\r\nHost: sidecar\r\n"
            b"Content-Type: application/json\r\nContent-Length: 5000\r\n\r\n"
            b'{"model": "m", "messages": ['
        )
        await writer.drain()
        await asyncio.sleep(0.05)
        writer.close()
        await writer.wait_closed()
        await eventually(lambda: len(finished(logs)) == 1)
    (line,) = finished(logs)
    assert line["reason"] == "client_disconnect"
    assert standin.requests == []
    assert ledger_is_idle(sidecar)


async def test_ledger_gives_back_a_queued_place_at_once_when_its_client_leaves(
    make_sidecar: SidecarFactory, standin: StandinServer, session: aiohttp.ClientSession
) -> None:
    sidecar = await make_sidecar(kv_budget_bytes=TEXT_ONLY_KV, queue_timeout_seconds=30)
    ledger = sidecar.app[LEDGER]
    holder = asyncio.create_task(post(session, sidecar, chat(max_tokens=64), headers=fault("hang")))
    await eventually(lambda: ledger.inflight_requests == 1)
    with capture_logs() as logs:
        queued = asyncio.create_task(post(session, sidecar, chat(max_tokens=64)))
        await eventually(lambda: ledger.queue_depth == 1)
        queued.cancel()
        await eventually(lambda: ledger.queue_depth == 0, timeout_seconds=1)
        assert ledger.inflight_requests == 1  # the holder still holds its bytes
        await eventually(lambda: len(finished(logs)) == 1)
    assert finished(logs)[0]["reason"] == "client_disconnect"
    holder.cancel()
    await eventually(lambda: ledger_is_idle(sidecar))
    assert len(standin.requests) == 1  # the request that left was never forwarded


async def test_ledger_returns_to_zero_when_the_client_leaves_mid_stream(
    make_sidecar: SidecarFactory, standin: StandinServer, session: aiohttp.ClientSession
) -> None:
    sidecar = await make_sidecar(kv_budget_bytes="8GiB")
    with capture_logs() as logs:
        async with session.post(
            url_of(sidecar), data=orjson.dumps(STREAM), headers=fault("chunk-delay=0.2")
        ) as response:
            assert response.status == 200
            await response.content.readany()
            assert sidecar.app[LEDGER].inflight_requests == 1
        await eventually(lambda: ledger_is_idle(sidecar))
        await eventually(lambda: len(finished(logs)) == 1)
    (line,) = finished(logs)
    assert line["reason"] == "client_disconnect"
    assert upstream_errors(sidecar, "reset") == 0  # the client left; vLLM did nothing wrong
    await eventually(lambda: standin.counters.in_flight == 0)  # vLLM can stop generating


# --- a vLLM that fails -------------------------------------------------------------------------


@pytest.mark.parametrize("path", [CHAT, MESSAGES], ids=["openai-shape", "anthropic-shape"])
async def test_proxy_answers_502_when_the_upstream_refuses_connections(
    make_sidecar: SidecarFactory, session: aiohttp.ClientSession, refused_port: int, path: str
) -> None:
    sidecar = await make_sidecar(upstream_url=f"http://127.0.0.1:{refused_port}")
    body = messages() if path == MESSAGES else chat()
    reply = await post(session, sidecar, body, path)
    assert reply.status == 502
    document = reply.json()
    if path == MESSAGES:
        assert document["error"]["type"] == "api_error"
    else:
        assert (document["error"]["type"], document["error"]["code"]) == ("BadGatewayError", 502)
    assert "unreachable" in reply.body.decode()
    assert reply.prediction == expected(output_tokens=64 if path == MESSAGES else 1024)
    assert upstream_errors(sidecar, "connect") == 1
    assert ledger_is_idle(sidecar)


async def test_proxy_answers_502_when_the_upstream_closes_before_answering(
    make_sidecar: SidecarFactory, session: aiohttp.ClientSession
) -> None:
    sidecar = await make_sidecar()
    reply = await post(session, sidecar, chat(), headers=fault("close"))
    assert reply.status == 502
    assert reply.json()["error"]["code"] == 502
    assert ledger_is_idle(sidecar)


@pytest.mark.parametrize(
    ("status", "path", "stream"),
    [(503, CHAT, False), (500, CHAT, True), (529, MESSAGES, False)],
    ids=["503-json", "500-on-a-stream-request", "529-anthropic"],
)
async def test_proxy_passes_upstream_5xx_through_with_its_body(
    make_sidecar: SidecarFactory,
    session: aiohttp.ClientSession,
    status: int,
    path: str,
    stream: bool,
) -> None:
    sidecar = await make_sidecar()
    body = messages() if path == MESSAGES else chat(stream=stream)
    reply = await post(session, sidecar, body, path, headers=fault(f"status={status}"))
    assert reply.status == status
    assert reply.json() == error_body(status, anthropic=path == MESSAGES)
    assert reply.headers[DECISION] == "admit"
    assert upstream_errors(sidecar, "status_5xx") == 1
    assert ledger_is_idle(sidecar)


async def test_proxy_passes_upstream_4xx_through_unchanged(
    make_sidecar: SidecarFactory, session: aiohttp.ClientSession
) -> None:
    sidecar = await make_sidecar()
    reply = await post(session, sidecar, chat(), headers=fault("status=404"))
    assert reply.status == 404
    assert reply.json() == error_body(404)
    assert upstream_errors(sidecar, "status_5xx") == 0


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
async def test_proxy_answers_504_when_the_upstream_hangs_past_the_read_timeout(
    make_sidecar: SidecarFactory,
    standin: StandinServer,
    session: aiohttp.ClientSession,
    stream: bool,
) -> None:
    sidecar = await make_sidecar(upstream_read_timeout_seconds=0.3)
    started = time.perf_counter()
    reply = await post(session, sidecar, chat(stream=stream), headers=fault("hang"))
    assert 0.3 <= time.perf_counter() - started < 2
    assert reply.status == 504
    assert reply.json()["error"]["type"] == "GatewayTimeoutError"
    assert upstream_errors(sidecar, "timeout") == 1
    assert ledger_is_idle(sidecar)
    await eventually(lambda: standin.counters.in_flight == 0)


async def test_proxy_ends_a_stream_that_stalls_past_the_read_timeout_with_an_error_event(
    make_sidecar: SidecarFactory, session: aiohttp.ClientSession
) -> None:
    sidecar = await make_sidecar(upstream_read_timeout_seconds=0.3)
    reply = await post(session, sidecar, STREAM, headers=fault("chunk-delay=1"))
    assert reply.status == 200
    events = sse_events(reply.body)
    assert events[-1] == b"data: [DONE]"
    assert orjson.loads(events[-2].removeprefix(b"data: "))["error"]["code"] == 502
    assert ledger_is_idle(sidecar)


async def test_proxy_ends_a_stream_reset_mid_way_cleanly_with_vllms_error_event(
    make_sidecar: SidecarFactory, session: aiohttp.ClientSession
) -> None:
    sidecar = await make_sidecar(kv_budget_bytes="8GiB")
    with capture_logs() as logs:
        reply = await post(session, sidecar, STREAM, headers=fault("reset-after=3"))
    assert reply.status == 200
    events = sse_events(reply.body)
    assert len(events) == 3 + 2
    for event in events[:3]:
        assert orjson.loads(event.removeprefix(b"data: "))["object"] == "chat.completion.chunk"
    error = orjson.loads(events[3].removeprefix(b"data: "))["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert events[4] == b"data: [DONE]"
    assert reply.body.endswith(b"\n\n")
    (line,) = finished(logs)
    assert line["upstream_completed"] is False
    assert "upstream_error" in line
    assert upstream_errors(sidecar, "reset") == 1
    assert ledger_is_idle(sidecar)


async def test_proxy_ends_an_anthropic_stream_reset_mid_way_with_anthropics_error_event(
    make_sidecar: SidecarFactory, session: aiohttp.ClientSession
) -> None:
    sidecar = await make_sidecar(kv_budget_bytes="8GiB")
    body = {**messages(), "stream": True}
    reply = await post(session, sidecar, body, path=MESSAGES, headers=fault("reset-after=2"))
    assert reply.status == 200
    before, _, event = reply.body.rpartition(b"event: error\ndata: ")
    assert before
    assert event.endswith(b"\n\n")
    assert orjson.loads(event) == {
        "type": "error",
        "error": {"type": "api_error", "message": "vLLM closed the stream early"},
    }
    assert ledger_is_idle(sidecar)


async def test_proxy_drops_the_connection_when_a_json_answer_is_cut_off(
    make_sidecar: SidecarFactory, session: aiohttp.ClientSession
) -> None:
    sidecar = await make_sidecar(kv_budget_bytes="8GiB")
    with pytest.raises(aiohttp.ClientPayloadError):
        await post(session, sidecar, chat(), headers=fault("reset-after=1"))
    await eventually(lambda: ledger_is_idle(sidecar))
    assert upstream_errors(sidecar, "reset") == 1


async def test_proxy_relays_malformed_sse_as_it_came(
    make_sidecar: SidecarFactory, session: aiohttp.ClientSession
) -> None:
    sidecar = await make_sidecar()
    reply = await post(session, sidecar, STREAM, headers=fault("malformed"))
    assert reply.status == 200
    events = sse_events(reply.body)
    assert events[1:] == [
        b'data: {"id": "broken", "choices": [{"delta": ',
        b"no field",
        b"data: [DONE]",
    ]
    assert ledger_is_idle(sidecar)


async def test_proxy_relays_a_malformed_json_answer_as_it_came(
    make_sidecar: SidecarFactory, session: aiohttp.ClientSession
) -> None:
    sidecar = await make_sidecar()
    with capture_logs() as logs:
        reply = await post(session, sidecar, chat(), headers=fault("malformed"))
    assert reply.status == 200
    assert reply.body.startswith(b'{"id":"chatcmpl-')
    with pytest.raises(orjson.JSONDecodeError):
        orjson.loads(reply.body)
    (line,) = finished(logs)
    assert "observed_prompt_tokens" not in line  # no usage in half a body, and no crash
    assert ledger_is_idle(sidecar)


async def test_ledger_returns_to_zero_after_a_mixed_burst_of_failures(
    make_sidecar: SidecarFactory, session: aiohttp.ClientSession
) -> None:
    sidecar = await make_sidecar(kv_budget_bytes="1GiB", upstream_read_timeout_seconds=0.3)
    faults = ["", "status=503", "hang", "reset-after=2", "malformed", "close", "delay=0.05"]
    replies = await asyncio.gather(
        *(post(session, sidecar, STREAM, headers=fault(f)) for f in faults for _ in range(3)),
        return_exceptions=True,
    )
    assert not [r for r in replies if isinstance(r, BaseException)]
    assert ledger_is_idle(sidecar)
