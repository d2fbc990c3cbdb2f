"""End to end, trace context and spans: the stand-in vLLM sees the headers, a real OTLP/HTTP
receiver (``tests.support.otlp``) sees what a collector would.

Off (no ``OTEL_*`` endpoint), ``traceparent``, ``tracestate`` and ``baggage`` reach vLLM
exactly as the client sent them. On, the sidecar's upstream span is what vLLM is told is its
parent, in the client's trace, and the request span carries the decision and predictions.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator

import aiohttp
import orjson
import pytest
from aiohttp import web
from prometheus_client import CollectorRegistry
from structlog.testing import capture_logs

from sidecar.serve.app import make_remote_prober
from sidecar.serve.server import running_sidecar
from sidecar.settings import Settings
from sidecar.standin import StandinServer
from tests.support.imaging import chat, image_bytes, image_url_part, jpeg_uri
from tests.support.otlp import (
    SPAN_KIND_CLIENT,
    SPAN_KIND_SERVER,
    ReceivedSpan,
    Receiver,
    receiving,
    spans_where,
)
from tests.support.proxy_helpers import DECISION, VISUAL, post
from tests.support.sidecars import QWEN, SidecarFactory

CLIENT_TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
CLIENT_PARENT_ID = "00f067aa0ba902b7"
TRACE_HEADERS = {
    "traceparent": f"00-{CLIENT_TRACE_ID}-{CLIENT_PARENT_ID}-01",
    "tracestate": "rojo=00f067aa0ba902b7,congo=t61rcWkgMzE",
    "baggage": "tenant=acme,user.id=42;hidden",
}
TRACEPARENT = re.compile(r"^00-([0-9a-f]{32})-([0-9a-f]{16})-[0-9a-f]{2}$")
IMAGE_CHAT = orjson.dumps(chat(image_url_part(jpeg_uri(640, 480)), max_tokens=16))


@pytest.fixture
async def receiver(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Receiver]:
    """An OTLP receiver, and the standard variables that point sidecars made next at it."""
    async with receiving() as running:
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", running.endpoint)
        monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "20")  # ms: the test waits less
        monkeypatch.setenv("OTEL_SERVICE_NAME", "sidecar-under-test")
        yield running


async def _one_request(receiver: Receiver) -> list[ReceivedSpan]:
    """The spans received once the request span (ended last) is among them."""
    return await spans_where(receiver, lambda got: any(s.kind == SPAN_KIND_SERVER for s in got))


def _request_span(spans: list[ReceivedSpan]) -> ReceivedSpan:
    (span,) = [s for s in spans if s.kind == SPAN_KIND_SERVER]
    return span


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [("POST", "/v1/chat/completions", IMAGE_CHAT), ("GET", "/load", None)],
    ids=["inspected", "passed-through"],
)
async def test_trace_headers_reach_vllm_as_sent_when_tracing_is_off(
    make_sidecar: SidecarFactory,
    standin: StandinServer,
    session: aiohttp.ClientSession,
    monkeypatch: pytest.MonkeyPatch,
    method: str,
    path: str,
    body: bytes | None,
) -> None:
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", raising=False)
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_ENDPOINT", raising=False)
    sidecar = await make_sidecar()
    headers = {**TRACE_HEADERS, "Content-Type": "application/json"}
    async with session.request(
        method, f"http://127.0.0.1:{sidecar.port}{path}", data=body, headers=headers
    ) as response:
        assert response.status == 200, await response.text()
    sent = standin.requests[-1].headers
    for name, value in TRACE_HEADERS.items():
        assert sent.getall(name) == [value]


async def test_vllm_is_told_the_upstream_span_is_its_parent(
    receiver: Receiver,
    make_sidecar: SidecarFactory,
    standin: StandinServer,
    session: aiohttp.ClientSession,
) -> None:
    sidecar = await make_sidecar()
    reply = await post(session, sidecar, IMAGE_CHAT, headers=TRACE_HEADERS)
    assert reply.status == 200, reply.body
    spans = await _one_request(receiver)
    request_span = _request_span(spans)
    by_name = {s.name: s for s in spans}
    upstream = by_name["vlm_sidecar.upstream"]
    # One trace: the client's; the request span is the client's child, stages are its own.
    assert {s.trace_id for s in spans} == {CLIENT_TRACE_ID}
    assert request_span.parent_span_id == CLIENT_PARENT_ID
    assert request_span.service == "sidecar-under-test"
    for stage in ("read_body", "price", "kv_wait", "upstream"):
        assert by_name[f"vlm_sidecar.{stage}"].parent_span_id == request_span.span_id
    assert upstream.kind == SPAN_KIND_CLIENT
    assert upstream.attributes["http.response.status_code"] == 200
    # What vLLM was sent: the upstream span as parent, the client's tracestate and baggage.
    sent = standin.requests[-1].headers
    match = TRACEPARENT.match(sent["traceparent"])
    assert match is not None, sent["traceparent"]
    assert match.groups() == (CLIENT_TRACE_ID, upstream.span_id)
    assert sent["tracestate"] == TRACE_HEADERS["tracestate"]
    assert sent["baggage"] == TRACE_HEADERS["baggage"]
    attributes = request_span.attributes
    assert attributes["vlm_sidecar.decision"] == reply.headers[DECISION] == "admit"
    assert attributes["vlm_sidecar.reason"] == "within_budget"
    assert attributes["vlm_sidecar.predicted.visual_tokens"] == int(reply.headers[VISUAL])
    assert attributes["vlm_sidecar.images"] == 1
    assert attributes["vlm_sidecar.route"] == "chat_completions"
    assert attributes["gen_ai.request.model"] == "m"
    assert attributes["gen_ai.operation.name"] == "chat"
    assert attributes["gen_ai.usage.input_tokens"] == reply.json()["usage"]["prompt_tokens"]
    assert attributes["http.response.status_code"] == 200
    # Each stage lies inside the request span.
    for span in spans:
        assert request_span.start_unix_nano <= span.start_unix_nano
        assert span.end_unix_nano <= request_span.end_unix_nano


async def test_a_request_without_trace_context_starts_a_trace(
    receiver: Receiver,
    make_sidecar: SidecarFactory,
    standin: StandinServer,
    session: aiohttp.ClientSession,
) -> None:
    sidecar = await make_sidecar()
    reply = await post(session, sidecar, IMAGE_CHAT)
    assert reply.status == 200, reply.body
    spans = await _one_request(receiver)
    request_span = _request_span(spans)
    assert request_span.parent_span_id == ""
    sent = standin.requests[-1].headers["traceparent"]
    match = TRACEPARENT.match(sent)
    assert match is not None, sent
    assert match.group(1) == request_span.trace_id
    assert "tracestate" not in standin.requests[-1].headers


async def test_a_refused_request_has_its_span_alone_with_the_reason(
    receiver: Receiver,
    make_sidecar: SidecarFactory,
    standin: StandinServer,
    session: aiohttp.ClientSession,
) -> None:
    sidecar = await make_sidecar(max_image_tokens=100)
    reply = await post(session, sidecar, IMAGE_CHAT, headers=TRACE_HEADERS)
    assert reply.status == 400, reply.body
    spans = await _one_request(receiver)
    request_span = _request_span(spans)
    assert not standin.requests
    assert {s.name for s in spans} == {
        request_span.name,
        "vlm_sidecar.read_body",
        "vlm_sidecar.price",
    }
    attributes = request_span.attributes
    assert attributes["vlm_sidecar.decision"] == "reject"
    assert attributes["vlm_sidecar.reason"] == "max_image_tokens"
    assert attributes["http.response.status_code"] == 400
    assert attributes["vlm_sidecar.refusal.message"] == reply.json()["error"]["message"]


async def test_an_unreadable_body_is_refused_in_the_stage_that_read_it(
    receiver: Receiver, make_sidecar: SidecarFactory, session: aiohttp.ClientSession
) -> None:
    sidecar = await make_sidecar()
    reply = await post(session, sidecar, b'{"messages": [')
    assert reply.status == 400
    spans = await _one_request(receiver)
    assert _request_span(spans).attributes["vlm_sidecar.reason"] == "invalid_body"
    (price,) = [s for s in spans if s.name == "vlm_sidecar.price"]
    assert "exception" in price.events


async def test_a_downscale_has_its_own_span(
    receiver: Receiver,
    make_sidecar: SidecarFactory,
    session: aiohttp.ClientSession,
) -> None:
    sidecar = await make_sidecar(max_image_tokens=100, over_budget_action="downscale")
    reply = await post(session, sidecar, IMAGE_CHAT)
    assert reply.status == 200, reply.body
    spans = await _one_request(receiver)
    request_span = _request_span(spans)
    (downscale,) = [s for s in spans if s.name == "vlm_sidecar.downscale"]
    assert downscale.parent_span_id == request_span.span_id
    assert request_span.attributes["vlm_sidecar.decision"] == "downscale"
    assert request_span.attributes["vlm_sidecar.downscaled_images"] == 1
    assert (
        request_span.attributes["vlm_sidecar.original.visual_tokens"]
        > request_span.attributes["vlm_sidecar.predicted.visual_tokens"]
    )


async def test_openmetrics_exposition_carries_the_trace_id_as_exemplar(
    receiver: Receiver, make_sidecar: SidecarFactory, session: aiohttp.ClientSession
) -> None:
    sidecar = await make_sidecar()
    reply = await post(session, sidecar, IMAGE_CHAT, headers=TRACE_HEADERS)
    assert reply.status == 200
    metrics_url = f"http://127.0.0.1:{sidecar.metrics_port}/metrics"
    accept = {"Accept": "application/openmetrics-text; version=1.0.0,text/plain;q=0.5"}
    async with session.get(metrics_url, headers=accept) as response:
        assert response.headers["Content-Type"].startswith("application/openmetrics-text")
        text = await response.text()
    exemplar = f'# {{trace_id="{CLIENT_TRACE_ID}"}}'
    for histogram in ("request_duration_seconds", "request_kv_bytes", "overhead_seconds"):
        lines = [
            line
            for line in text.splitlines()
            if line.startswith(f"vlm_sidecar_{histogram}_bucket{{") and exemplar in line
        ]
        assert lines, histogram
    assert text.rstrip().endswith("# EOF")
    async with session.get(metrics_url) as response:  # the classic format: no exemplars
        assert response.headers["Content-Type"].startswith("text/plain")
        assert CLIENT_TRACE_ID not in await response.text()


async def test_a_dead_collector_costs_spans_never_requests(
    make_sidecar: SidecarFactory,
    session: aiohttp.ClientSession,
    monkeypatch: pytest.MonkeyPatch,
    unused_tcp_port: int,
) -> None:
    monkeypatch.setenv(
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", f"http://127.0.0.1:{unused_tcp_port}/v1/traces"
    )
    monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "20")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "0.5")
    sidecar = await make_sidecar()
    with capture_logs() as logs:
        for _ in range(3):
            reply = await post(session, sidecar, IMAGE_CHAT)
            assert reply.status == 200, reply.body
        metrics_url = f"http://127.0.0.1:{sidecar.metrics_port}/metrics"
        deadline = asyncio.get_running_loop().time() + 15
        # Five spans a request (itself, read_body, price, kv_wait, upstream), all lost.
        while (dropped := await _dropped_spans(session, metrics_url)) < 15:
            assert asyncio.get_running_loop().time() < deadline, f"{dropped} spans counted"
            await asyncio.sleep(0.05)
    assert dropped == 15
    sdk = [line for line in logs if line["event"] == "tracing.sdk"]
    assert sdk, "the SDK's export failure is a structured event"
    assert "Failed to export" in str(sdk[0]["message"])


async def _dropped_spans(session: aiohttp.ClientSession, metrics_url: str) -> float:
    async with session.get(metrics_url) as response:
        text = await response.text()
    (line,) = [
        line
        for line in text.splitlines()
        if line.startswith("vlm_sidecar_trace_spans_dropped_total{")
    ]
    return float(line.split()[-1])


async def test_a_remote_image_fetch_is_a_child_of_pricing(
    receiver: Receiver, standin: StandinServer, session: aiohttp.ClientSession
) -> None:
    photo = image_bytes(800, 600)

    async def serve_photo(_: web.Request) -> web.Response:
        return web.Response(body=photo, content_type="image/jpeg")

    site = web.Application()
    site.router.add_get("/cat.jpg", serve_photo)
    runner = web.AppRunner(site, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    port = int(runner.addresses[0][1])
    settings = Settings(
        model=QWEN,
        upstream_url=standin.url,
        listen_host="127.0.0.1",
        port=0,
        metrics_port=0,
        remote_images="probe",
        engine_poll_seconds=0,
    )

    async def resolve(host: str, port: int) -> list[str]:
        return ["127.0.0.1"] if host == "images.test" else []

    prober = make_remote_prober(settings, resolver=resolve, address_allowed=lambda _: True)
    try:
        async with running_sidecar(
            settings, registry=CollectorRegistry(), remote_prober=prober
        ) as sidecar:
            body = chat(image_url_part(f"http://images.test:{port}/cat.jpg"), max_tokens=8)
            reply = await post(session, sidecar, body)
            assert reply.status == 200, reply.body
            spans = await _one_request(receiver)
    finally:
        await runner.cleanup()
    (price,) = [s for s in spans if s.name == "vlm_sidecar.price"]
    (fetch,) = [s for s in spans if s.name == "vlm_sidecar.remote_fetch"]
    assert fetch.parent_span_id == price.span_id
    assert _request_span(spans).attributes["vlm_sidecar.images"] == 1


async def test_a_client_that_samples_out_is_followed_and_vllm_is_told_so(
    receiver: Receiver,
    make_sidecar: SidecarFactory,
    standin: StandinServer,
    session: aiohttp.ClientSession,
) -> None:
    sidecar = await make_sidecar()
    unsampled = {"traceparent": f"00-{CLIENT_TRACE_ID}-{CLIENT_PARENT_ID}-00"}
    reply = await post(session, sidecar, IMAGE_CHAT, headers=unsampled)
    assert reply.status == 200, reply.body
    sent = standin.requests[-1].headers["traceparent"]
    match = TRACEPARENT.match(sent)
    assert match is not None, sent
    assert match.group(1) == CLIENT_TRACE_ID
    assert int(sent.rsplit("-", 1)[1], 16) & 1 == 0  # not sampled, as the client said
    # The next, sampled request's spans arrive alone: nothing was recorded for this one.
    reply = await post(session, sidecar, IMAGE_CHAT, headers=TRACE_HEADERS)
    assert reply.status == 200, reply.body
    spans = await _one_request(receiver)
    assert len([s for s in spans if s.kind == SPAN_KIND_SERVER]) == 1


async def test_shadow_mode_traces_what_it_would_have_done(
    receiver: Receiver, make_sidecar: SidecarFactory, session: aiohttp.ClientSession
) -> None:
    sidecar = await make_sidecar(mode="shadow", max_image_tokens=100)
    reply = await post(session, sidecar, IMAGE_CHAT, headers=TRACE_HEADERS)
    assert reply.status == 200, reply.body
    spans = await _one_request(receiver)
    attributes = _request_span(spans).attributes
    assert attributes["vlm_sidecar.mode"] == "shadow"
    assert attributes["vlm_sidecar.decision"] == "reject"  # would have been
    assert attributes["http.response.status_code"] == 200  # what the client got
    assert "vlm_sidecar.upstream" in {s.name for s in spans}
