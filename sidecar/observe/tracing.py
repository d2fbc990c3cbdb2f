"""Tracing as the serving path sees it: one span per inspected request, a child per stage.

The pipeline calls this interface whether tracing is on or not. Off (the default, and
always without the ``otel`` extra) every call lands on one shared no-op object: starting a
request span, entering a stage and injecting context cost an attribute lookup each, nothing
is allocated, and the client's ``traceparent``, ``tracestate`` and ``baggage`` reach vLLM
exactly as sent because nothing touches the headers. On, ``sidecar.observe.otel`` supplies
the spans (``make_tracer``).

A stage opened anywhere below the request (the pricer's remote fetch, a downscale in the
pool) finds its parent through a context variable, so no span is passed down the call
chain; tasks and threads started inside a stage inherit it the way asyncio copies contexts.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from contextvars import ContextVar
from types import TracebackType
from typing import TYPE_CHECKING, Protocol

from multidict import CIMultiDict, CIMultiDictProxy

if TYPE_CHECKING:
    from sidecar.observe.record import RequestRecord
    from sidecar.routes import Route

AttributeValue = str | bool | int | float
Headers = CIMultiDictProxy[str] | CIMultiDict[str]
DroppedSpans = Callable[[int], None]  # told how many spans never reached the collector

# The stage spans' names (children of the request span), in pipeline order.
STAGE_READ_BODY = "vlm_sidecar.read_body"
STAGE_PRICE = "vlm_sidecar.price"
STAGE_REMOTE_FETCH = "vlm_sidecar.remote_fetch"
STAGE_SATURATION_WAIT = "vlm_sidecar.saturation_wait"
STAGE_KV_WAIT = "vlm_sidecar.kv_wait"
STAGE_DOWNSCALE = "vlm_sidecar.downscale"
STAGE_UPSTREAM = "vlm_sidecar.upstream"
STAGES = (
    STAGE_READ_BODY,
    STAGE_PRICE,
    STAGE_REMOTE_FETCH,
    STAGE_SATURATION_WAIT,
    STAGE_KV_WAIT,
    STAGE_DOWNSCALE,
    STAGE_UPSTREAM,
)


class Span:
    """A span the pipeline writes to; this base class is the no-op used when tracing is off."""

    __slots__ = ()

    @property
    def trace_id(self) -> str | None:
        """The 32-hex-digit trace id of a span being recorded, else None (for exemplars)."""
        return None

    def stage(self, name: str) -> Stage:
        """A child span for one stage, current while the ``with`` block runs."""
        return NO_STAGE

    def set(self, key: str, value: AttributeValue) -> None:
        """One attribute."""

    def inject(self, headers: CIMultiDict[str]) -> None:
        """Write this span's context as ``traceparent``/``tracestate`` into ``headers``."""


class Stage(Protocol):
    """Context manager returned by ``Span.stage``."""

    def __enter__(self) -> Span: ...

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None: ...


class _NoStage:
    __slots__ = ()

    def __enter__(self) -> Span:
        return NO_SPAN

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        return None


class RequestSpan(Span):
    """The server span of one inspected request; ``end`` turns its record into attributes."""

    __slots__ = ()

    def end(self, record: RequestRecord) -> None:
        """Close the span with what happened to the request (called exactly once)."""


class Tracer:
    """Makes request spans; this base class is the tracer used when tracing is off."""

    enabled = False

    def request_span(self, headers: Headers, route: Route) -> RequestSpan:
        """The span of one inspected request, its parent read from the client's headers."""
        return NO_REQUEST_SPAN

    def shutdown(self) -> None:
        """Export what is queued and stop (blocking: run it off the event loop)."""


NO_SPAN = Span()
NO_STAGE = _NoStage()
NO_REQUEST_SPAN = RequestSpan()
NO_TRACING = Tracer()

_current: ContextVar[Span] = ContextVar("vlm_sidecar_span", default=NO_SPAN)


def current_span() -> Span:
    """The innermost span open in this context (the no-op one outside any request)."""
    return _current.get()


def stage(name: str) -> Stage:
    """A child span of the current one, for code that is not handed a span."""
    return _current.get().stage(name)


def span_context_var() -> ContextVar[Span]:
    """The context variable an implementation sets while its span is current."""
    return _current


def set_attributes(span: Span, attributes: Mapping[str, AttributeValue]) -> None:
    """Several attributes at once."""
    for key, value in attributes.items():
        span.set(key, value)


# gen_ai.operation.name for routes the GenAI semantic conventions name; others carry none.
_GEN_AI_OPERATIONS = {
    "chat_completions": "chat",
    "chat_completions_batch": "chat",
    "messages": "chat",
    "responses": "chat",
    "completions": "text_completion",
    "embeddings": "embeddings",
    "cohere_embed": "embeddings",
}


def request_attributes(record: RequestRecord) -> dict[str, AttributeValue]:
    """The request span's attributes at its end: the same facts as its log line."""
    route = record.route
    attributes: dict[str, AttributeValue] = {
        "vlm_sidecar.route": route.label,
        "vlm_sidecar.request_id": record.request_id,
        "vlm_sidecar.decision": record.decision.value,
        "vlm_sidecar.reason": record.reason.value,
        "vlm_sidecar.queue_wait_seconds": record.waited_seconds,
    }
    operation = _GEN_AI_OPERATIONS.get(route.label)
    if operation is not None:
        attributes["gen_ai.operation.name"] = operation
    if record.shadow:
        attributes["vlm_sidecar.mode"] = "shadow"
    if record.message is not None:
        attributes["vlm_sidecar.refusal.message"] = record.message
    status = record.status if record.upstream is None else record.upstream.status
    if status is not None:
        attributes["http.response.status_code"] = status
    parsed = record.parsed
    if parsed is not None and parsed.model is not None:
        attributes["gen_ai.request.model"] = parsed.model
    forwarded = record.forwarded
    if forwarded is not None:
        attributes["vlm_sidecar.predicted.visual_tokens"] = forwarded.visual_tokens
        attributes["vlm_sidecar.predicted.prompt_tokens"] = forwarded.prompt_tokens
        attributes["vlm_sidecar.predicted.kv_bytes"] = forwarded.kv_bytes
        attributes["vlm_sidecar.images"] = len(forwarded.images)
        if forwarded.videos:
            attributes["vlm_sidecar.videos"] = len(forwarded.videos)
    if record.original is not None and record.prediction is not None and not record.shadow:
        attributes["vlm_sidecar.original.visual_tokens"] = record.original.visual_tokens
    if record.downscale_seconds:
        attributes["vlm_sidecar.downscaled_images"] = len(record.downscale_seconds)
    if record.upstream_error_kind is not None:
        attributes["vlm_sidecar.upstream_error"] = record.upstream_error_kind
    usage = record.usage
    if usage is not None:
        attributes["gen_ai.usage.input_tokens"] = usage.prompt_tokens
        if usage.completion_tokens is not None:
            attributes["gen_ai.usage.output_tokens"] = usage.completion_tokens
    return attributes


def tracing_requested(environ: Mapping[str, str]) -> bool:
    """True when an OTLP endpoint is configured and neither the SDK nor trace export is
    switched off (``OTEL_SDK_DISABLED``, ``OTEL_TRACES_EXPORTER=none``)."""
    if environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    if environ.get("OTEL_TRACES_EXPORTER", "").strip().lower() == "none":
        return False
    return bool(
        environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "").strip()
        or environ.get("OTEL_EXPORTER_OTLP_ENDPOINT", "").strip()
    )


class Warn(Protocol):
    """A structlog-style warning: an event name and fields."""

    def __call__(self, event: str, **fields: object) -> None: ...
