"""One trace from the client through the sidecar into vLLM, as a collector receives it.

vLLM runs with ``--otlp-traces-endpoint`` and the sidecar with
``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``, both at the session's OTLP/HTTP receiver
(``conftest.otlp``, decoded with ``opentelemetry-proto``). A chat with an image must come
back as one trace: the client's span, the sidecar's request span, its stages, and vLLM's
``llm_request`` as the child of the sidecar's upstream span. A request the sidecar refuses
is the sidecar's span alone, with the reason.
"""

from __future__ import annotations

import base64
import secrets

from tests.real_vllm.cases import chat, image_part, user
from tests.real_vllm.client import DECISION_HEADER, PREDICTED_HEADER, send
from tests.real_vllm.conftest import Stack
from tests.support.otlp import SPAN_KIND_SERVER, ReceivedSpan, Receiver, wait_for_spans

CHAT = "/v1/chat/completions"
REQUEST_SPAN = f"POST {CHAT}"
CLOCK_SLACK_NANOS = 1_000_000  # both processes read the same clock; allow rounding


def _trace_headers() -> tuple[str, str, dict[str, str]]:
    trace_id, parent_id = secrets.token_hex(16), secrets.token_hex(8)
    headers = {"traceparent": f"00-{trace_id}-{parent_id}-01", "tracestate": "tier=engine"}
    return trace_id, parent_id, headers


def _names(spans: list[ReceivedSpan], trace_id: str) -> set[str]:
    return {span.name for span in spans if span.trace_id == trace_id}


def test_vllms_span_is_the_child_of_the_sidecars_upstream_span(
    stack: Stack, otlp: Receiver
) -> None:
    trace_id, parent_id, headers = _trace_headers()
    body = chat(stack.model, [user(image_part(640, 480, 11), "Describe it.")], max_tokens=8)
    answer = send(stack.sidecar.base_url, "POST", CHAT, body, headers)
    assert answer.status == 200, answer.body
    spans = wait_for_spans(otlp, lambda got: {"llm_request", REQUEST_SPAN} <= _names(got, trace_id))
    trace = [span for span in spans if span.trace_id == trace_id]
    by_name = {span.name: span for span in trace}
    request_span, upstream, engine = (
        by_name[REQUEST_SPAN],
        by_name["vlm_sidecar.upstream"],
        by_name["llm_request"],
    )
    assert request_span.kind == SPAN_KIND_SERVER
    assert request_span.parent_span_id == parent_id
    assert request_span.service == f"vlm-sidecar-{stack.name}"
    for stage in ("read_body", "price", "kv_wait", "upstream"):
        assert by_name[f"vlm_sidecar.{stage}"].parent_span_id == request_span.span_id
    assert engine.parent_span_id == upstream.span_id
    # vLLM's time lies inside the sidecar's upstream call.
    assert upstream.start_unix_nano <= engine.start_unix_nano + CLOCK_SLACK_NANOS
    assert engine.end_unix_nano <= upstream.end_unix_nano + CLOCK_SLACK_NANOS
    attributes = request_span.attributes
    assert attributes["vlm_sidecar.decision"] == answer.headers[DECISION_HEADER] == "admit"
    assert attributes["vlm_sidecar.reason"] == "within_budget"
    assert attributes["vlm_sidecar.images"] == 1
    assert attributes["vlm_sidecar.predicted.visual_tokens"] > 0
    assert attributes["vlm_sidecar.predicted.prompt_tokens"] == answer.predicted_prompt_tokens
    assert attributes["vlm_sidecar.predicted.kv_bytes"] > 0
    assert attributes["gen_ai.request.model"] == stack.model
    # What vLLM counted, as the sidecar read it from the answer and as vLLM's span says.
    prompt_tokens = answer.json()["usage"]["prompt_tokens"]
    assert attributes["gen_ai.usage.input_tokens"] == prompt_tokens
    assert engine.attributes["gen_ai.usage.prompt_tokens"] == prompt_tokens
    assert PREDICTED_HEADER in answer.headers


def test_a_refused_request_is_the_sidecars_span_alone_with_the_reason(
    stack: Stack, otlp: Receiver
) -> None:
    trace_id, _, headers = _trace_headers()
    broken = {"type": "image_url", "image_url": {"url": "data:image/png;base64,"
              + base64.b64encode(b"not a png at all").decode()}}  # fmt: skip
    refused = send(
        stack.sidecar.base_url, "POST", CHAT, chat(stack.model, [user(broken, "?")]), headers
    )
    assert refused.status == 400, refused.body
    assert refused.headers[DECISION_HEADER] == "reject"
    # A request vLLM does serve, traced: once its llm_request is in, anything vLLM made
    # before it (one export queue, in order) is in too.
    after_id, _, after_headers = _trace_headers()
    answered = send(
        stack.sidecar.base_url,
        "POST",
        CHAT,
        chat(stack.model, [user("Say hi.")], max_tokens=4),
        after_headers,
    )
    assert answered.status == 200, answered.body
    spans = wait_for_spans(
        otlp,
        lambda got: (
            "llm_request" in _names(got, after_id) and REQUEST_SPAN in _names(got, trace_id)
        ),
    )
    assert _names(spans, trace_id) == {REQUEST_SPAN, "vlm_sidecar.read_body", "vlm_sidecar.price"}
    (request_span,) = [s for s in spans if s.trace_id == trace_id and s.name == REQUEST_SPAN]
    attributes = request_span.attributes
    assert attributes["vlm_sidecar.decision"] == "reject"
    assert attributes["vlm_sidecar.reason"] == "invalid_image"
    assert attributes["http.response.status_code"] == 400
    assert attributes["vlm_sidecar.refusal.message"] == refused.json()["error"]["message"]
