"""An OTLP/HTTP trace receiver on 127.0.0.1 for the tests: what a collector would be sent.

``POST /v1/traces`` bodies are decoded with ``opentelemetry-proto`` (the wire format, not the
SDK that made them), so a test reads the spans exactly as a collector would, from the sidecar
and from vLLM alike. ``receiving()`` runs it on the test's event loop; ``ThreadedReceiver`` on
a thread of its own, for the synchronous real-engine tier.
"""

from __future__ import annotations

import asyncio
import contextlib
import gzip
import threading
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

from aiohttp import web
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue

SPAN_KIND_SERVER = 2
SPAN_KIND_CLIENT = 3
STATUS_CODE_ERROR = 2


@dataclass(frozen=True)
class ReceivedSpan:
    """One span as the collector got it; ids in lowercase hex, no parent: ``""``."""

    service: str
    name: str
    trace_id: str
    span_id: str
    parent_span_id: str
    kind: int
    attributes: dict[str, Any]
    status_code: int
    start_unix_nano: int
    end_unix_nano: int
    events: tuple[str, ...] = ()


@dataclass
class Received:
    """Everything posted so far (the handler appends; tests read)."""

    spans: list[ReceivedSpan] = field(default_factory=list)
    posts: int = 0

    def trace(self, trace_id: str) -> list[ReceivedSpan]:
        return [span for span in self.spans if span.trace_id == trace_id]

    def named(self, name: str) -> list[ReceivedSpan]:
        return [span for span in self.spans if span.name == name]


def _value(value: AnyValue) -> Any:
    kind = value.WhichOneof("value")
    if kind == "array_value":
        return [_value(item) for item in value.array_value.values]
    return None if kind is None else getattr(value, kind)


def decode(body: bytes) -> list[ReceivedSpan]:
    """The spans of one ``ExportTraceServiceRequest``."""
    request = ExportTraceServiceRequest()
    request.ParseFromString(body)
    spans: list[ReceivedSpan] = []
    for resource_spans in request.resource_spans:
        resource = {a.key: _value(a.value) for a in resource_spans.resource.attributes}
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                spans.append(
                    ReceivedSpan(
                        service=str(resource.get("service.name", "")),
                        name=span.name,
                        trace_id=span.trace_id.hex(),
                        span_id=span.span_id.hex(),
                        parent_span_id=span.parent_span_id.hex(),
                        kind=span.kind,
                        attributes={a.key: _value(a.value) for a in span.attributes},
                        status_code=span.status.code,
                        start_unix_nano=span.start_time_unix_nano,
                        end_unix_nano=span.end_time_unix_nano,
                        events=tuple(event.name for event in span.events),
                    )
                )
    return spans


def receiver_app(received: Received) -> web.Application:
    async def traces(request: web.Request) -> web.Response:
        body = await request.read()
        if request.headers.get("Content-Encoding") == "gzip":
            body = gzip.decompress(body)
        received.spans.extend(decode(body))
        received.posts += 1
        return web.Response(
            body=ExportTraceServiceResponse().SerializeToString(),
            content_type="application/x-protobuf",
        )

    app = web.Application(client_max_size=64 << 20)
    app.router.add_post("/v1/traces", traces)
    return app


@dataclass
class Receiver:
    """A running receiver: ``endpoint`` is what ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` names."""

    port: int
    received: Received

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1/traces"

    @property
    def base_url(self) -> str:
        """For ``OTEL_EXPORTER_OTLP_ENDPOINT`` (the exporter appends ``/v1/traces``)."""
        return f"http://127.0.0.1:{self.port}"


@contextlib.asynccontextmanager
async def receiving() -> AsyncIterator[Receiver]:
    """A receiver on the running loop, on a free port."""
    received = Received()
    runner = web.AppRunner(receiver_app(received), access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    address = runner.addresses[0]
    try:
        yield Receiver(int(address[1]), received)
    finally:
        await runner.cleanup()


async def spans_where(
    receiver: Receiver,
    ready: Callable[[list[ReceivedSpan]], bool],
    *,
    timeout_seconds: float = 10.0,
) -> list[ReceivedSpan]:
    """The received spans once ``ready`` says they are all there (export is batched)."""
    deadline = time.monotonic() + timeout_seconds
    while not ready(receiver.received.spans):
        if time.monotonic() > deadline:
            names = sorted({s.name for s in receiver.received.spans})
            raise AssertionError(f"spans never arrived; got {names}")
        await asyncio.sleep(0.02)
    return list(receiver.received.spans)


class ThreadedReceiver:
    """``receiving()`` on a thread of its own, for tests without an event loop."""

    def __init__(self) -> None:
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._stop: asyncio.Event | None = None
        self._receiver: Receiver | None = None
        self._thread = threading.Thread(target=self._run, name="otlp-receiver", daemon=True)

    def _run(self) -> None:
        self._loop.run_until_complete(self._serve())

    async def _serve(self) -> None:
        self._stop = asyncio.Event()
        async with receiving() as receiver:
            self._receiver = receiver
            self._ready.set()
            await self._stop.wait()

    def __enter__(self) -> Receiver:
        self._thread.start()
        if not self._ready.wait(10) or self._receiver is None:
            raise RuntimeError("the OTLP receiver did not start")
        return self._receiver

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(10)
        self._loop.close()


def wait_for_spans(
    receiver: Receiver,
    ready: Callable[[list[ReceivedSpan]], bool],
    *,
    timeout_seconds: float = 30.0,
) -> list[ReceivedSpan]:
    """``spans_where`` for a test without an event loop (a ``ThreadedReceiver``'s)."""
    deadline = time.monotonic() + timeout_seconds
    while True:
        spans = list(receiver.received.spans)  # a copy: the receiver's thread appends
        if ready(spans):
            return spans
        if time.monotonic() > deadline:
            names = sorted({s.name for s in spans})
            raise AssertionError(f"spans never arrived; got {names}")
        time.sleep(0.05)
