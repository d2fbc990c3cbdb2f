"""The OpenTelemetry SDK behind ``sidecar.observe.tracing`` (the ``otel`` extra).

Imported only when the ``OTEL_*`` variables ask for traces. Configuration is the SDK's own:
the OTLP/HTTP exporter reads ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` (or
``OTEL_EXPORTER_OTLP_ENDPOINT`` plus ``/v1/traces``), headers and timeout; the tracer
provider reads ``OTEL_TRACES_SAMPLER``/``_ARG`` (default ``parentbased_always_on``), the
resource ``OTEL_SERVICE_NAME`` and ``OTEL_RESOURCE_ATTRIBUTES``; the batch processor
``OTEL_BSP_*``. The provider is the sidecar's own, never the global one.

Export never touches the event loop: ending a span appends it to the batch processor's
queue, and its worker thread sends batches. A collector that is down or slow costs spans,
never requests: a failed export and a span that finds the queue full are both counted
(``vlm_sidecar_trace_spans_dropped_total``).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Sequence
from types import TracebackType

from multidict import CIMultiDict
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.trace import SpanKind, Status, StatusCode
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from sidecar.observe.record import RequestRecord
from sidecar.observe.tracing import (
    STAGE_UPSTREAM,
    DroppedSpans,
    Headers,
    RequestSpan,
    Span,
    Tracer,
    Warn,
    request_attributes,
    span_context_var,
)
from sidecar.routes import Route

DEFAULT_SERVICE_NAME = "vlm-sidecar"
INSTRUMENTATION_NAME = "vlm_sidecar"
SDK_LOG_INTERVAL_SECONDS = 60.0  # one event per distinct SDK message per interval

_PROPAGATOR = TraceContextTextMapPropagator()  # traceparent and tracestate; baggage passes as is
_CURRENT = span_context_var()


class CountingExporter(SpanExporter):
    """An exporter that reports the spans of every failed export as dropped."""

    def __init__(self, inner: SpanExporter, on_dropped: DroppedSpans) -> None:
        self._inner = inner
        self._on_dropped = on_dropped

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        try:
            result = self._inner.export(spans)
        except Exception:
            self._on_dropped(len(spans))
            raise
        if result is not SpanExportResult.SUCCESS:
            self._on_dropped(len(spans))
        return result

    def shutdown(self) -> None:
        self._inner.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self._inner.force_flush(timeout_millis)


class CountingBatchSpanProcessor(BatchSpanProcessor):
    """``BatchSpanProcessor`` that also reports the span it drops when its queue is full.

    The SDK only logs that drop; its queue is a bounded deque that pushes the oldest span out,
    so a full queue at ``on_end`` means one span lost (or, if the worker takes a batch at that
    very moment, a near miss counted as one).
    """

    def __init__(self, exporter: SpanExporter, on_dropped: DroppedSpans) -> None:
        super().__init__(exporter)
        self._on_dropped = on_dropped
        # The SDK's queue (private; absent in another SDK version, then only failed exports count).
        self._queue = getattr(self._batch_processor, "_queue", None)

    def on_end(self, span: ReadableSpan) -> None:
        queue = self._queue
        context = span.context
        if (
            queue is not None
            and context is not None
            and context.trace_flags.sampled
            and queue.maxlen is not None
            and len(queue) >= queue.maxlen
        ):
            self._on_dropped(1)
        super().on_end(span)


class SdkLogBridge(logging.Handler):
    """The SDK's own log records (``opentelemetry.*``: "Failed to export spans batch", "Queue
    full, dropping Span") as the sidecar's structured events, so the JSON log stays JSON.

    A dead collector repeats the same message for every batch; each distinct message is
    passed on at most once a minute (the dropped spans themselves are counted exactly).
    """

    def __init__(self, warn: Warn, interval_seconds: float = SDK_LOG_INTERVAL_SECONDS) -> None:
        super().__init__(logging.WARNING)
        self._warn = warn
        self._interval = interval_seconds
        self._last: dict[str, float] = {}
        self._guard = threading.Lock()  # the batch worker thread logs too

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        now = time.monotonic()
        with self._guard:
            if now - self._last.get(message, -self._interval) < self._interval:
                return
            self._last[message] = now
        self._warn(
            "tracing.sdk", logger=record.name, level=record.levelname.lower(), message=message
        )


def bridge_sdk_logs(warn: Warn) -> SdkLogBridge:
    """Send the ``opentelemetry`` loggers' records to ``warn`` instead of stderr."""
    bridge = SdkLogBridge(warn)
    sdk_logger = logging.getLogger("opentelemetry")
    for handler in [h for h in sdk_logger.handlers if isinstance(h, SdkLogBridge)]:
        sdk_logger.removeHandler(handler)  # one bridge per process: the latest tracer's
    sdk_logger.addHandler(bridge)
    sdk_logger.propagate = False
    return bridge


class OtelTracer(Tracer):
    """Request spans from the SDK, exported over OTLP/HTTP in the background."""

    enabled = True

    def __init__(self, provider: TracerProvider) -> None:
        self._provider = provider
        self._tracer = provider.get_tracer(INSTRUMENTATION_NAME)

    @classmethod
    def from_environment(
        cls, *, on_dropped: DroppedSpans, warn: Warn, exporter: SpanExporter | None = None
    ) -> OtelTracer:
        """The tracer the ``OTEL_*`` variables describe (read from ``os.environ``, as the SDK
        reads them); ``exporter`` replaces the OTLP one (tests)."""
        environ = os.environ
        bridge_sdk_logs(warn)
        protocol = environ.get(
            "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", environ.get("OTEL_EXPORTER_OTLP_PROTOCOL", "")
        ).strip()
        if protocol not in ("", "http/protobuf"):
            warn(
                "tracing.protocol_unsupported",
                protocol=protocol,
                hint="the sidecar exports OTLP over HTTP (http/protobuf) only",
            )
        named = bool(environ.get("OTEL_SERVICE_NAME")) or "service.name=" in environ.get(
            "OTEL_RESOURCE_ATTRIBUTES", ""
        )
        resource = Resource.create({} if named else {SERVICE_NAME: DEFAULT_SERVICE_NAME})
        provider = TracerProvider(resource=resource)  # the sampler comes from OTEL_TRACES_*
        inner = exporter if exporter is not None else OTLPSpanExporter()
        provider.add_span_processor(
            CountingBatchSpanProcessor(CountingExporter(inner, on_dropped), on_dropped)
        )
        return cls(provider)

    def request_span(self, headers: Headers, route: Route) -> RequestSpan:
        parent = _PROPAGATOR.extract(headers)
        span = self._tracer.start_span(
            f"POST {route.path}",
            context=parent,
            kind=SpanKind.SERVER,
            attributes={"http.request.method": "POST", "http.route": route.path},
        )
        return _OtelRequestSpan(self._tracer, span)

    def shutdown(self) -> None:
        self._provider.shutdown()


class _OtelSpan(Span):
    __slots__ = ("_span", "_tracer")

    def __init__(self, tracer: trace.Tracer, span: trace.Span) -> None:
        self._tracer = tracer
        self._span = span

    @property
    def trace_id(self) -> str | None:
        context = self._span.get_span_context()
        if not context.trace_flags.sampled:
            return None
        return format(context.trace_id, "032x")

    def stage(self, name: str) -> _OtelStage:
        return _OtelStage(self, name)

    def set(self, key: str, value: str | bool | int | float) -> None:
        self._span.set_attribute(key, value)

    def inject(self, headers: CIMultiDict[str]) -> None:
        # The client's tracestate travels in the span context; a sidecar span that is not
        # sampled still passes its flags on, so vLLM samples as the sidecar did.
        carrier: dict[str, str] = {}
        _PROPAGATOR.inject(carrier, context=trace.set_span_in_context(self._span))
        headers.popall("traceparent", None)
        headers.popall("tracestate", None)
        headers.update(carrier)


class _OtelStage:
    __slots__ = ("_child", "_name", "_parent", "_token")

    def __init__(self, parent: _OtelSpan, name: str) -> None:
        self._parent = parent
        self._name = name

    def __enter__(self) -> _OtelSpan:
        parent = self._parent
        kind = SpanKind.CLIENT if self._name == STAGE_UPSTREAM else SpanKind.INTERNAL
        span = parent._tracer.start_span(
            self._name, context=trace.set_span_in_context(parent._span), kind=kind
        )
        child = self._child = _OtelSpan(parent._tracer, span)
        self._token = _CURRENT.set(child)
        return child

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        span = self._child._span
        if exc is not None:
            span.record_exception(exc)
            span.set_status(Status(StatusCode.ERROR, f"{type(exc).__name__}: {exc}"))
        span.end()
        _CURRENT.reset(self._token)


class _OtelRequestSpan(RequestSpan, _OtelSpan):
    __slots__ = ("_token",)

    def __init__(self, tracer: trace.Tracer, span: trace.Span) -> None:
        _OtelSpan.__init__(self, tracer, span)
        self._token = _CURRENT.set(self)

    def end(self, record: RequestRecord) -> None:
        span = self._span
        attributes = request_attributes(record)
        span.set_attributes(attributes)
        status = attributes.get("http.response.status_code")
        if isinstance(status, int) and status >= 500:
            span.set_status(Status(StatusCode.ERROR, record.message or f"HTTP {status}"))
        span.end()
        _CURRENT.reset(self._token)
