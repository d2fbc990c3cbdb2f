"""End to end, faults that ``test_proxy_faults`` does not cover: vLLM going away and coming back,
streams breaking on every route, and clients leaving at every stage a request can be in.

Invariants: the client gets a clear error or a stream that ends cleanly; the ledger returns to
zero; when the client leaves, vLLM's request is cancelled (the stand-in's handler sees the
disconnect, its in-flight count drops); readiness follows vLLM and recovers without a restart.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import aiohttp
import orjson
import pytest
from structlog.testing import capture_logs

import sidecar.serve.rewrite
from sidecar.serve.keys import LEDGER, SATURATION
from sidecar.serve.server import RunningSidecar
from sidecar.standin import StandinConfig, StandinServer, start_standin
from tests.support.imaging import chat, image_url_part, jpeg_uri, messages, responses
from tests.support.proxy_helpers import (
    CHAT,
    COMPLETIONS,
    MESSAGES,
    RESPONSES,
    fault,
    finished,
    ledger_is_idle,
    post,
    sample,
    url_of,
)
from tests.support.sidecars import MODEL_ALIAS, QWEN, SidecarFactory
from tests.support.waiting import eventually


async def readiness(session: aiohttp.ClientSession, sidecar: RunningSidecar) -> int:
    async with session.get(f"http://127.0.0.1:{sidecar.metrics_port}/readyz") as response:
        return response.status


def body_for(path: str, **fields: Any) -> dict[str, Any]:
    if path == MESSAGES:
        return messages(**fields)
    if path == RESPONSES:
        return responses(**fields)
    if path == COMPLETIONS:
        return {"model": "m", "prompt": "Say something.", "max_tokens": 16, **fields}
    return chat(max_tokens=16, **fields)


ROUTES = [CHAT, COMPLETIONS, RESPONSES, MESSAGES]
ROUTE_IDS = ["chat", "completions", "responses", "messages"]


# --- vLLM goes away and comes back -------------------------------------------------------------


async def test_readiness_flips_when_vllm_stops_and_recovers_without_a_restart_when_it_returns(
    make_sidecar: SidecarFactory, session: aiohttp.ClientSession
) -> None:
    engine = await start_standin(
        StandinConfig(served_model_name=QWEN, model_aliases=(MODEL_ALIAS,))
    )
    port = engine.port
    sidecar = await make_sidecar(upstream_url=engine.url, kv_budget_bytes="1GiB")
    try:
        for _ in range(3):  # leaves keep-alive connections in the pool
            assert (await post(session, sidecar, chat(max_tokens=4))).status == 200
        assert await readiness(session, sidecar) == 200

        await engine.close()
        assert await readiness(session, sidecar) == 503
        reply = await post(session, sidecar, chat(max_tokens=4))
        assert reply.status == 502
        assert reply.json()["error"]["type"] == "BadGatewayError"
        assert ledger_is_idle(sidecar)

        engine = await start_standin(
            StandinConfig(served_model_name=QWEN, model_aliases=(MODEL_ALIAS,)), port=port
        )
        assert await readiness(session, sidecar) == 200
        for _ in range(3):  # the pool's stale connections are not reused for a failure
            assert (await post(session, sidecar, chat(max_tokens=4))).status == 200
        assert sample(sidecar, "vlm_sidecar_upstream_errors_total", kind="connect") == 1
        assert ledger_is_idle(sidecar)
    finally:
        await engine.close()


# --- streams that break, on every route --------------------------------------------------------


@pytest.mark.parametrize("path", ROUTES, ids=ROUTE_IDS)
async def test_proxy_ends_a_stream_reset_mid_way_cleanly_on_every_route(
    make_sidecar: SidecarFactory, session: aiohttp.ClientSession, path: str
) -> None:
    sidecar = await make_sidecar(kv_budget_bytes="1GiB")
    async with session.post(
        url_of(sidecar, path),
        data=orjson.dumps(body_for(path, stream=True)),
        headers=fault("reset-after=2"),
    ) as response:
        assert response.status == 200
        raw = await response.read()  # ends: no hang, no half-event
    if path == MESSAGES:  # Anthropic's clients look for its own error event
        last = raw.rstrip(b"\n").rsplit(b"\n\n", 1)[-1]
        assert last.startswith(b"event: error\ndata: ")
        assert orjson.loads(last.split(b"data: ", 1)[1])["type"] == "error"
    else:
        assert raw.endswith(b"data: [DONE]\n\n")
        error = raw.rsplit(b"\n\n", 3)[-3].removeprefix(b"data: ")
        assert set(orjson.loads(error)["error"]) == {"message", "type", "param", "code"}
    assert sample(sidecar, "vlm_sidecar_upstream_errors_total", kind="reset") == 1
    assert ledger_is_idle(sidecar)


@pytest.mark.parametrize("path", ROUTES, ids=ROUTE_IDS)
@pytest.mark.parametrize("force_usage", [False, True], ids=["as-asked", "forced-usage"])
async def test_proxy_relays_malformed_sse_and_ends_the_stream_on_every_route(
    make_sidecar: SidecarFactory,
    session: aiohttp.ClientSession,
    path: str,
    *,
    force_usage: bool,
) -> None:
    sidecar = await make_sidecar(kv_budget_bytes="1GiB", force_stream_usage=force_usage)
    with capture_logs() as logs:
        async with session.post(
            url_of(sidecar, path),
            data=orjson.dumps(body_for(path, stream=True)),
            headers=fault("malformed"),
        ) as response:
            raw = await response.read()
    assert response.status == 200
    assert b"no field\n\n" in raw  # relayed as it came: the sidecar does not judge the stream
    (line,) = finished(logs)
    assert line["upstream_completed"] is True
    assert ledger_is_idle(sidecar)


# --- clients that leave ------------------------------------------------------------------------


@pytest.mark.parametrize("hold", ["hang", "delay=10"], ids=["vllm-hangs", "vllm-is-slow"])
async def test_vllms_request_is_cancelled_when_the_client_leaves_before_the_answer(
    make_sidecar: SidecarFactory,
    standin: StandinServer,
    session: aiohttp.ClientSession,
    hold: str,
) -> None:
    sidecar = await make_sidecar(kv_budget_bytes="1GiB")
    with capture_logs() as logs:
        client = asyncio.create_task(
            post(session, sidecar, chat(max_tokens=4), headers=fault(hold))
        )
        await eventually(lambda: standin.counters.in_flight == 1)
        assert sidecar.app[LEDGER].inflight_requests == 1
        client.cancel()
        await eventually(lambda: standin.counters.in_flight == 0, timeout_seconds=2)
        await eventually(lambda: ledger_is_idle(sidecar))
        await eventually(lambda: len(finished(logs)) == 1)
    assert finished(logs)[0]["reason"] == "client_disconnect"


async def test_nothing_is_forwarded_when_the_client_leaves_while_vllm_is_saturated(
    make_sidecar: SidecarFactory, standin: StandinServer, session: aiohttp.ClientSession
) -> None:
    standin.set_load(kv_cache_usage_perc=0.99)
    sidecar = await make_sidecar(
        saturation_kv_usage=0.9, engine_poll_seconds=0.05, queue_timeout_seconds=30
    )
    await eventually(lambda: sidecar.app[SATURATION].saturated)
    with capture_logs() as logs:
        client = asyncio.create_task(post(session, sidecar, chat(max_tokens=4)))
        await asyncio.sleep(0.2)  # held in the sidecar, not forwarded
        assert standin.requests == []
        client.cancel()
        await eventually(lambda: len(finished(logs)) == 1)
    assert finished(logs)[0]["reason"] == "client_disconnect"
    standin.set_load(kv_cache_usage_perc=0.1)
    await eventually(lambda: not sidecar.app[SATURATION].saturated)
    assert standin.requests == []
    assert ledger_is_idle(sidecar)
    assert (await post(session, sidecar, chat(max_tokens=4))).status == 200


async def test_nothing_is_forwarded_when_the_client_leaves_while_its_image_is_downscaled(
    make_sidecar: SidecarFactory,
    standin: StandinServer,
    session: aiohttp.ClientSession,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    started, release = threading.Event(), threading.Event()
    resize = sidecar.serve.rewrite._resize

    def held_resize(*args: Any) -> Any:
        started.set()
        release.wait(timeout=5)
        return resize(*args)

    monkeypatch.setattr(sidecar.serve.rewrite, "_resize", held_resize)
    proxy = await make_sidecar(max_image_tokens=256, over_budget_action="downscale")
    try:
        with capture_logs() as logs:
            body = chat(image_url_part(jpeg_uri(1920, 1080)), max_tokens=4)
            client = asyncio.create_task(post(session, proxy, body))
            await eventually(started.is_set)
            client.cancel()
            await eventually(lambda: len(finished(logs)) == 1)
        assert finished(logs)[0]["reason"] == "client_disconnect"
    finally:
        release.set()
    await asyncio.sleep(0.1)  # the worker finishes; its result has nobody to go to
    assert standin.requests == []
    assert ledger_is_idle(proxy)
