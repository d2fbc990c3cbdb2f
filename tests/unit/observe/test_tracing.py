"""observe.tracing: off means no-op and untouched headers; when the OTEL_* variables ask for
traces; the request span's attributes from its record."""

from __future__ import annotations

import pytest
from multidict import CIMultiDict

from sidecar.admission.decision import Admit, Reason
from sidecar.observe import tracing
from sidecar.observe.record import RequestRecord
from sidecar.observe.usage import Usage
from sidecar.routes import Route
from tests.support.predictions import HD, ICON, predict

TRACE_HEADERS = {
    "traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
    "tracestate": "rojo=00f067aa0ba902b7",
    "baggage": "tenant=acme",
}


def _never_dropped(count: int) -> None:
    raise AssertionError(f"{count} spans dropped")


def _warnings() -> tuple[list[str], tracing.Warn]:
    events: list[str] = []

    def warn(event: str, **fields: object) -> None:
        events.append(event)

    return events, warn


def test_tracing_off_is_one_shared_no_op_that_leaves_headers_alone() -> None:
    tracer = tracing.NO_TRACING
    span = tracer.request_span(CIMultiDict(TRACE_HEADERS), Route.CHAT)
    headers = CIMultiDict(TRACE_HEADERS)
    with tracing.stage(tracing.STAGE_UPSTREAM) as stage:
        stage.inject(headers)
        stage.set("key", 1)
        assert stage is tracing.NO_SPAN
    assert span is tracing.NO_REQUEST_SPAN
    assert span.trace_id is None
    assert dict(headers) == TRACE_HEADERS
    assert tracing.stage(tracing.STAGE_PRICE) is tracing.NO_STAGE
    assert tracing.current_span() is tracing.NO_SPAN


@pytest.mark.parametrize(
    ("environ", "requested"),
    [
        ({}, False),
        ({"OTEL_SERVICE_NAME": "x"}, False),
        ({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://c:4318/v1/traces"}, True),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}, True),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "  "}, False),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_SDK_DISABLED": "true"}, False),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_SDK_DISABLED": "false"}, True),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_TRACES_EXPORTER": "none"}, False),
    ],
)
def test_traces_are_asked_for_by_an_otlp_endpoint(environ: dict[str, str], requested: bool) -> None:
    assert tracing.tracing_requested(environ) is requested


def test_request_attributes_name_the_decision_predictions_and_usage() -> None:
    prediction = predict([HD, ICON], text_tokens=100)
    record = RequestRecord("r1", Route.CHAT)
    record.apply(Admit(prediction))
    record.waited_seconds = 0.25
    record.usage = Usage(prompt_tokens=prediction.prompt_tokens + 3, completion_tokens=7,
                         image_tokens=None)  # fmt: skip
    attributes = tracing.request_attributes(record)
    assert attributes == {
        "vlm_sidecar.route": "chat_completions",
        "vlm_sidecar.request_id": "r1",
        "vlm_sidecar.decision": "admit",
        "vlm_sidecar.reason": "within_budget",
        "vlm_sidecar.queue_wait_seconds": 0.25,
        "gen_ai.operation.name": "chat",
        "vlm_sidecar.predicted.visual_tokens": prediction.visual_tokens,
        "vlm_sidecar.predicted.prompt_tokens": prediction.prompt_tokens,
        "vlm_sidecar.predicted.kv_bytes": prediction.kv_bytes,
        "vlm_sidecar.images": 2,
        "gen_ai.usage.input_tokens": prediction.prompt_tokens + 3,
        "gen_ai.usage.output_tokens": 7,
    }


def test_a_refusal_is_in_the_request_attributes() -> None:
    record = RequestRecord("r2", Route.EMBEDDINGS)
    record.reject(Reason.BODY_TOO_LARGE, "request body exceeds SIDECAR_MAX_BODY_BYTES", 413)
    attributes = tracing.request_attributes(record)
    assert attributes["vlm_sidecar.decision"] == "reject"
    assert attributes["vlm_sidecar.reason"] == "body_too_large"
    assert str(attributes["vlm_sidecar.refusal.message"]).startswith("request body exceeds")
    assert attributes["http.response.status_code"] == 413
    assert attributes["gen_ai.operation.name"] == "embeddings"
    assert "vlm_sidecar.predicted.kv_bytes" not in attributes
