"""observe.otel: the SDK binding. Stage spans nest through the context (tasks included), the
upstream span's context is what gets injected, the sampler comes from OTEL_TRACES_SAMPLER,
and a span that is never exported is counted."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading
from collections.abc import Iterator, Sequence

import pytest
from multidict import CIMultiDict
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from sidecar.admission.decision import Reason
from sidecar.observe import tracing
from sidecar.observe.otel import CountingBatchSpanProcessor, CountingExporter, OtelTracer
from sidecar.observe.record import RequestRecord
from sidecar.routes import Route

CLIENT_TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
CLIENT_HEADERS = CIMultiDict(
    {
        "traceparent": f"00-{CLIENT_TRACE_ID}-00f067aa0ba902b7-01",
        "tracestate": "rojo=00f067aa0ba902b7",
        "baggage": "tenant=acme",
    }
)


def _ignore(event: str, **fields: object) -> None:
    pass


@pytest.fixture
def exported(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[OtelTracer, InMemorySpanExporter]]:
    monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "10")
    memory = InMemorySpanExporter()
    tracer = OtelTracer.from_environment(on_dropped=lambda _: None, warn=_ignore, exporter=memory)
    yield tracer, memory
    tracer.shutdown()


def _by_name(spans: Sequence[ReadableSpan]) -> dict[str, ReadableSpan]:
    return {span.name: span for span in spans}


async def test_stages_nest_through_the_context_into_tasks(
    exported: tuple[OtelTracer, InMemorySpanExporter],
) -> None:
    tracer, memory = exported
    request = tracer.request_span(CLIENT_HEADERS, Route.CHAT)

    async def fetch() -> None:  # as the pricer starts a remote fetch: a task inside a stage
        with tracing.stage(tracing.STAGE_REMOTE_FETCH):
            await asyncio.sleep(0)

    with tracing.stage(tracing.STAGE_PRICE):
        await asyncio.create_task(fetch())
    with tracing.stage(tracing.STAGE_UPSTREAM):
        pass
    request.end(RequestRecord("r1", Route.CHAT))
    assert tracing.current_span() is tracing.NO_SPAN  # the request's context is given back
    tracer.shutdown()
    spans = _by_name(memory.get_finished_spans())
    root = spans["POST /v1/chat/completions"]
    assert root.parent is not None
    assert format(root.parent.span_id, "016x") == "00f067aa0ba902b7"
    assert spans[tracing.STAGE_PRICE].parent == root.context
    assert spans[tracing.STAGE_UPSTREAM].parent == root.context
    assert spans[tracing.STAGE_REMOTE_FETCH].parent == spans[tracing.STAGE_PRICE].context
    assert {format(s.context.trace_id, "032x") for s in spans.values() if s.context} == {
        CLIENT_TRACE_ID
    }


def test_inject_names_the_upstream_span_and_keeps_the_clients_tracestate_and_baggage(
    exported: tuple[OtelTracer, InMemorySpanExporter],
) -> None:
    tracer, memory = exported
    request = tracer.request_span(CLIENT_HEADERS, Route.CHAT)
    headers = CIMultiDict(CLIENT_HEADERS)
    with tracing.stage(tracing.STAGE_UPSTREAM) as upstream:
        upstream.inject(headers)
    request.end(RequestRecord("r1", Route.CHAT))
    tracer.shutdown()
    span = _by_name(memory.get_finished_spans())[tracing.STAGE_UPSTREAM]
    assert span.context is not None
    assert headers.getall("traceparent") == [f"00-{CLIENT_TRACE_ID}-{span.context.span_id:016x}-01"]
    assert headers.getall("tracestate") == ["rojo=00f067aa0ba902b7"]
    assert headers.getall("baggage") == ["tenant=acme"]


def test_a_stage_that_raises_records_the_exception_and_the_refusal_ends_the_request(
    exported: tuple[OtelTracer, InMemorySpanExporter],
) -> None:
    tracer, memory = exported
    request = tracer.request_span(CIMultiDict(), Route.CHAT)
    with pytest.raises(ValueError, match="bad body"), tracing.stage(tracing.STAGE_PRICE):
        raise ValueError("bad body")
    record = RequestRecord("r1", Route.CHAT)
    record.reject(Reason.INVALID_BODY, "bad body", 400)
    request.end(record)
    tracer.shutdown()
    spans = _by_name(memory.get_finished_spans())
    price = spans[tracing.STAGE_PRICE]
    assert [event.name for event in price.events] == ["exception"]
    root = spans["POST /v1/chat/completions"]
    assert root.parent is None
    assert root.attributes is not None
    assert root.attributes["vlm_sidecar.reason"] == "invalid_body"
    assert root.attributes["http.response.status_code"] == 400
    assert not root.status.is_ok or root.status.status_code.name == "UNSET"  # 4xx: no error


def test_the_sampler_comes_from_the_standard_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_TRACES_SAMPLER", "always_off")
    memory = InMemorySpanExporter()
    tracer = OtelTracer.from_environment(on_dropped=lambda _: None, warn=_ignore, exporter=memory)
    request = tracer.request_span(CIMultiDict(), Route.CHAT)
    headers: CIMultiDict[str] = CIMultiDict()
    with tracing.stage(tracing.STAGE_UPSTREAM) as upstream:
        upstream.inject(headers)
    assert request.trace_id is None  # not sampled: no exemplar
    request.end(RequestRecord("r1", Route.CHAT))
    tracer.shutdown()
    assert memory.get_finished_spans() == ()
    flags = int(headers["traceparent"].rsplit("-", 1)[1], 16)
    assert flags & 1 == 0  # vLLM is told not to sample either


def test_the_service_is_named_vlm_sidecar_unless_the_environment_names_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    names = []
    for service in (None, "edge-sidecar"):
        if service is not None:
            monkeypatch.setenv("OTEL_SERVICE_NAME", service)
        memory = InMemorySpanExporter()
        tracer = OtelTracer.from_environment(
            on_dropped=lambda _: None, warn=_ignore, exporter=memory
        )
        tracer.request_span(CIMultiDict(), Route.CHAT).end(RequestRecord("r", Route.CHAT))
        tracer.shutdown()
        (span,) = memory.get_finished_spans()
        names.append(span.resource.attributes["service.name"])
    assert names == ["vlm-sidecar", "edge-sidecar"]


def test_grpc_is_refused_with_a_warning(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "grpc")
    events: list[str] = []

    def warn(event: str, **fields: object) -> None:
        events.append(event)

    tracer = OtelTracer.from_environment(
        on_dropped=lambda _: None, warn=warn, exporter=InMemorySpanExporter()
    )
    tracer.shutdown()
    assert events == ["tracing.protocol_unsupported"]


class _Failing(SpanExporter):
    def __init__(self, *, raises: bool) -> None:
        self.raises = raises

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        if self.raises:
            raise ConnectionError("collector gone")
        return SpanExportResult.FAILURE


@pytest.mark.parametrize("raises", [False, True], ids=["failure", "exception"])
def test_a_failed_export_counts_its_spans_as_dropped(raises: bool) -> None:
    dropped: list[int] = []
    exporter = CountingExporter(_Failing(raises=raises), dropped.append)
    spans = [ReadableSpan(name=f"s{i}") for i in range(3)]
    if raises:
        with pytest.raises(ConnectionError):
            exporter.export(spans)
    else:
        assert exporter.export(spans) is SpanExportResult.FAILURE
    assert dropped == [3]


class _Stuck(SpanExporter):
    """An exporter that holds its first batch until released: the collector hangs."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.release = threading.Event()
        self.exported = 0

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.entered.set()
        self.release.wait(10)
        self.exported += len(spans)
        return SpanExportResult.SUCCESS


def test_a_full_queue_counts_each_span_it_pushes_out(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_BSP_MAX_QUEUE_SIZE", "4")
    monkeypatch.setenv("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "1")
    monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "1")
    dropped: list[int] = []
    stuck = _Stuck()
    memory_tracer = OtelTracer.from_environment(
        on_dropped=dropped.append, warn=_ignore, exporter=stuck
    )
    try:
        for i in range(20):
            memory_tracer.request_span(CIMultiDict(), Route.CHAT).end(
                RequestRecord(f"r{i}", Route.CHAT)
            )
            if i == 0:  # the worker holds the first span in a hung export from now on
                assert stuck.entered.wait(10)
    finally:
        stuck.release.set()
        memory_tracer.shutdown()
    # One span in the hung export and four queued survive; the other fifteen are counted.
    assert (stuck.exported, sum(dropped)) == (5, 15)


def test_the_processor_counts_nothing_while_the_collector_keeps_up() -> None:
    dropped: list[int] = []
    memory = InMemorySpanExporter()
    processor = CountingBatchSpanProcessor(CountingExporter(memory, dropped.append), dropped.append)
    processor.shutdown()  # type: ignore[no-untyped-call]  # the SDK leaves it unannotated
    assert dropped == []


def test_the_sdks_own_warnings_become_events_once_a_minute_not_raw_stderr_lines() -> None:
    # A process of its own: pytest hooks its capture handlers into every logger.
    code = """
import logging
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from sidecar.observe.otel import OtelTracer

def warn(event, **fields):
    print("EVENT", event, fields["message"])

tracer = OtelTracer.from_environment(
    on_dropped=lambda _: None, warn=warn, exporter=InMemorySpanExporter()
)
sdk = logging.getLogger("opentelemetry.exporter.otlp.proto.http.trace_exporter")
for _ in range(3):
    sdk.warning("Failed to export spans batch due to timeout, max retries or shutdown.")
sdk.warning("Queue full, dropping %s.", "Span")
tracer.shutdown()
"""
    done = subprocess.run(  # noqa: S603 - this interpreter, our own code
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert done.stdout.splitlines() == [
        "EVENT tracing.sdk Failed to export spans batch due to timeout, max retries or shutdown.",
        "EVENT tracing.sdk Queue full, dropping Span.",
    ]
    assert done.stderr == ""  # nothing raw beside the sidecar's JSON lines
