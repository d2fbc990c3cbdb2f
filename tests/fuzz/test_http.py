"""Fuzzing the whole HTTP path: random bodies POSTed to every inspected route of a real sidecar.

A stand-in and a sidecar run on 127.0.0.1 in a background event loop for the whole module;
each case is one plain ``http.client`` request. Bodies come from the routes' grammars (often
mangled), and from raw bytes; some carry real images, which the sidecar (budget 64 tokens an
image, ``over_budget_action=downscale``) prices, downscales or refuses. For every case:

* the status is a 2xx relayed from the stand-in, or a 4xx; never a 5xx;
* every 4xx has vLLM's error body (Anthropic's on ``/v1/messages``);
* exactly one ``request.finished`` line is logged, and the ledger is back at zero.
"""

from __future__ import annotations

import asyncio
import http.client
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import AsyncExitStack
from dataclasses import dataclass

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry
from structlog.testing import capture_logs

from sidecar.routes import ApiShape, Route
from sidecar.serve.server import RunningSidecar, running_sidecar
from sidecar.settings import Settings
from sidecar.standin import StandinConfig, StandinServer, run_standin
from tests.support.fuzz_strategies import examples, request_bytes
from tests.support.proxy_helpers import ledger_is_idle
from tests.support.sidecars import MODEL_ALIAS, QWEN

ROUTES = list(Route)
SETTLE_SECONDS = 2.0


@dataclass
class Live:
    """The background loop and what runs on it."""

    loop: asyncio.AbstractEventLoop
    standin: StandinServer
    sidecar: RunningSidecar


@pytest.fixture(scope="module")
def live() -> Iterator[Live]:
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, name="fuzz-http", daemon=True)
    thread.start()
    stack = AsyncExitStack()

    async def start() -> tuple[StandinServer, RunningSidecar]:
        standin = await stack.enter_async_context(
            run_standin(
                StandinConfig(
                    served_model_name=QWEN, model_aliases=(MODEL_ALIAS,), record_requests=False
                )
            )
        )
        settings = Settings(
            model=QWEN,
            upstream_url=standin.url,
            listen_host="127.0.0.1",
            port=0,
            metrics_port=0,
            engine_poll_seconds=0,
            max_body_bytes=64 << 10,
            max_image_tokens=64,
            max_images_per_request=6,
            over_budget_action="downscale",
            kv_budget_bytes="4GiB",
            queue_timeout_seconds=0,
            client_read_timeout_seconds=5,
        )
        sidecar = await stack.enter_async_context(
            running_sidecar(settings, registry=CollectorRegistry())
        )
        return standin, sidecar

    standin, sidecar = asyncio.run_coroutine_threadsafe(start(), loop).result(60)
    try:
        yield Live(loop, standin, sidecar)
    finally:
        asyncio.run_coroutine_threadsafe(stack.aclose(), loop).result(60)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.run_until_complete(loop.shutdown_asyncgens())
        loop.close()


def post_blocking(
    port: int, path: str, body: bytes, *, chunked: bool
) -> tuple[int, dict[str, str], bytes]:
    """POST with ``http.client`` from the test's own thread (the sidecar runs in another);
    ``chunked`` sends the body in 997-byte chunks."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        headers = {"Content-Type": "application/json"}
        if chunked:
            pieces = [body[i : i + 997] for i in range(0, len(body), 997)] or [b""]
            connection.request(
                "POST", path, body=iter(pieces), headers=headers, encode_chunked=True
            )
        else:
            connection.request("POST", path, body=body, headers=headers)
        response = connection.getresponse()
        return response.status, dict(response.getheaders()), response.read()
    finally:
        connection.close()


def assert_error_shape(route: Route, status: int, body: bytes) -> None:
    document = orjson.loads(body)
    if route.api is ApiShape.ANTHROPIC:
        assert document["type"] == "error", document
        assert set(document["error"]) == {"type", "message"}
    elif route.api is ApiShape.COHERE:
        assert set(document) == {"message", "id"}, document
    else:
        assert set(document["error"]) == {"message", "type", "param", "code"}, document
        assert document["error"]["code"] == status


def settled(condition: Callable[[], bool]) -> bool:
    deadline = time.monotonic() + SETTLE_SECONDS
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.002)
    return condition()


@examples(120)
@given(data=st.data(), route=st.sampled_from(ROUTES), chunked=st.booleans())
def test_sidecar_answers_any_body_with_a_relayed_2xx_or_a_4xx_in_the_routes_shape(
    live: Live, data: st.DataObject, route: Route, *, chunked: bool
) -> None:
    body = data.draw(request_bytes(route))
    with capture_logs() as logs:
        status, headers, answer = post_blocking(
            live.sidecar.port, route.path, body, chunked=chunked
        )
        assert status < 500, (status, answer[:300])
        if status >= 400:
            assert_error_shape(route, status, answer)
        assert settled(lambda: ledger_is_idle(live.sidecar)), "the ledger kept a reservation"
        assert settled(lambda: [e["event"] for e in logs].count("request.finished") == 1), [
            e["event"] for e in logs
        ]
    assert settled(lambda: live.standin.counters.in_flight == 0)
    assert "x-vlm-sidecar-decision" in {key.lower() for key in headers}


def test_sidecar_relays_a_part_whose_type_is_a_list_without_a_5xx(live: Live) -> None:
    body = b'{"messages": [{"arguments": null, "type": []}]}'  # crashed the stand-in once
    status, _, answer = post_blocking(
        live.sidecar.port, "/v1/chat/completions", body, chunked=False
    )
    assert status == 200, answer
