"""serve.app: the tracer the process environment asks for (``tracer_from_environment``)."""

from __future__ import annotations

import subprocess
import sys

import pytest
from multidict import CIMultiDict

from sidecar.observe import tracing
from sidecar.observe.record import RequestRecord
from sidecar.routes import Route
from sidecar.serve.app import tracer_from_environment

TRACEPARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


def _never_dropped(count: int) -> None:
    raise AssertionError(f"{count} spans dropped")


def _warnings() -> tuple[list[str], tracing.Warn]:
    events: list[str] = []

    def warn(event: str, **fields: object) -> None:
        events.append(event)

    return events, warn


def test_no_endpoint_means_no_tracer_and_no_sdk_import() -> None:
    events, warn = _warnings()
    assert tracer_from_environment({}, on_dropped=_never_dropped, warn=warn) is tracing.NO_TRACING
    assert events == []


def test_an_endpoint_without_the_otel_extra_warns_and_serves_untraced(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "sidecar.observe.otel", None)  # import fails, as uninstalled
    events, warn = _warnings()
    environ = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9"}
    tracer = tracer_from_environment(environ, on_dropped=_never_dropped, warn=warn)
    assert tracer is tracing.NO_TRACING
    assert events == ["tracing.unavailable"]


def test_an_endpoint_with_the_extra_gives_a_tracer_that_records(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "0.1")  # nobody listens: give up
    _, warn = _warnings()
    environ = {"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:9/v1/traces"}
    tracer = tracer_from_environment(environ, on_dropped=lambda _: None, warn=warn)
    try:
        assert tracer.enabled
        span = tracer.request_span(CIMultiDict({"traceparent": TRACEPARENT}), Route.CHAT)
        assert span.trace_id == "4bf92f3577b34da6a3ce929d0e0e4736"
        span.end(RequestRecord("r1", Route.CHAT))
    finally:
        tracer.shutdown()


def test_serving_untraced_never_imports_the_sdk() -> None:
    # The otel extra is optional: the serving path must not need it when tracing is off.
    code = (
        "import sys, sidecar.serve.server, sidecar.cli.commands\n"
        "loaded = sorted(m for m in sys.modules if m.startswith('opentelemetry'))\n"
        "assert not loaded, loaded"
    )
    subprocess.run([sys.executable, "-c", code], check=True)  # noqa: S603 - our own code
