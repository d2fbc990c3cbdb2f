"""serve.relay: which headers go on to vLLM; trace context always does, untouched."""

from __future__ import annotations

from multidict import CIMultiDict

from sidecar.serve.relay import forwardable_headers

TRACE_HEADERS = [
    ("traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"),
    ("tracestate", "rojo=00f067aa0ba902b7"),
    ("tracestate", "congo=t61rcWkgMzE"),  # a second line is legal; both go on, in order
    ("baggage", "tenant=acme,user.id=42;hidden"),
]


def test_trace_context_and_baggage_go_on_exactly_as_sent() -> None:
    sent = CIMultiDict([("Connection", "keep-alive"), ("Host", "sidecar"), *TRACE_HEADERS])
    forwarded = forwardable_headers(sent, {"x-request-id": "r1"})
    assert [(k, v) for k, v in forwarded.items() if k != "x-request-id"] == TRACE_HEADERS


def test_a_connection_header_naming_trace_context_drops_it_as_hop_by_hop() -> None:
    # RFC 9110: what Connection lists belongs to this hop only, trace headers included.
    sent = CIMultiDict([("Connection", "baggage"), *TRACE_HEADERS])
    assert "baggage" not in forwardable_headers(sent)
    assert forwardable_headers(sent).getall("tracestate") == [v for k, v in TRACE_HEADERS[1:3]]
