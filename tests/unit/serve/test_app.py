"""serve.app: what ``make_app`` builds, the metrics port's health routes, and what one round
of engine discovery changes, with a real sidecar in front of the stand-in on 127.0.0.1."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import aiohttp
import pytest
from multidict import CIMultiDict
from prometheus_client import generate_latest

from sidecar.engine import EngineFacts, parse_engine_metrics
from sidecar.observe import tracing
from sidecar.observe.record import RequestRecord
from sidecar.profiles import load_profile
from sidecar.routes import Route
from sidecar.serve.app import (
    apply_engine_facts,
    make_remote_prober,
    model_label,
    tracer_from_environment,
)
from sidecar.serve.keys import DRAIN, ENGINE, LEDGER
from sidecar.settings import Settings
from sidecar.standin import StandinServer
from tests.support.sidecars import QWEN, SidecarFactory
from tests.support.videos import qwen3_directory


def test_model_label_is_the_builtin_id_or_the_model_directorys_name(tmp_path: Path) -> None:
    assert model_label(Settings(model=QWEN), load_profile(QWEN)) == QWEN
    directory = qwen3_directory(tmp_path / "my-finetune")
    settings = Settings(model=str(directory))
    assert model_label(settings, load_profile(str(directory))) == "my-finetune"


def test_make_remote_prober_exists_only_under_probe_and_carries_the_settings() -> None:
    assert make_remote_prober(Settings(model=QWEN)) is None
    assert make_remote_prober(Settings(model=QWEN, remote_images="reject")) is None
    prober = make_remote_prober(
        Settings(
            model=QWEN,
            remote_images="probe",
            remote_image_allowed_domains="cdn.example",
            remote_image_max_bytes="64KiB",
            remote_image_timeout_seconds=1.5,
            max_decode_pixels=1_000_000,
        )
    )
    assert prober is not None
    policy = prober.policy
    assert (policy.allowed_domains, policy.max_bytes, policy.timeout_seconds) == (
        ("cdn.example",), 65536, 1.5,
    )  # fmt: skip
    assert policy.max_image_pixels == 1_000_000


async def _get(session: aiohttp.ClientSession, port: int, path: str) -> tuple[int, object]:
    async with session.get(f"http://127.0.0.1:{port}{path}") as response:
        return response.status, await response.json()


async def test_metrics_port_answers_health_readiness_and_draining(
    make_sidecar: SidecarFactory, session: aiohttp.ClientSession, standin: StandinServer
) -> None:
    sidecar = await make_sidecar()
    port = sidecar.metrics_port
    assert await _get(session, port, "/healthz") == (200, {"status": "ok"})
    status, body = await _get(session, port, "/readyz")
    assert (status, body) == (200, {"status": "ready", "detail": "vLLM /health answered 200"})
    standin.set_healthy(False)
    status, body = await _get(session, port, "/readyz")
    assert (status, body) == (503, {"status": "not ready", "detail": "vLLM /health answered 503"})
    standin.set_healthy(True)
    sidecar.app[DRAIN].draining = True
    assert await _get(session, port, "/readyz") == (503, {"status": "draining"})
    assert (await _get(session, port, "/healthz"))[0] == 200  # the process is still up


async def test_metrics_port_serves_the_sidecars_own_registry(
    make_sidecar: SidecarFactory, session: aiohttp.ClientSession
) -> None:
    sidecar = await make_sidecar()
    async with session.get(f"http://127.0.0.1:{sidecar.metrics_port}/metrics") as response:
        assert response.headers["Content-Type"].startswith("text/plain")
        text = await response.text()
    assert "vlm_sidecar_" in text
    assert "\nvllm:" not in text  # vLLM's own series are on the traffic port only


def _facts(standin: StandinServer) -> EngineFacts:
    """What the stand-in's ``/metrics`` tells the sidecar now."""
    return parse_engine_metrics(generate_latest(standin.registry).decode())


@pytest.mark.parametrize("mode", ["enforce", "shadow"])
async def test_apply_engine_facts_takes_the_auto_budget_and_block_size_from_vllm(
    make_sidecar: SidecarFactory, standin: StandinServer, mode: str
) -> None:
    sidecar = await make_sidecar(kv_budget_bytes="auto:0.5", engine_poll_seconds=0, mode=mode)
    standin.set_cache_config(num_gpu_blocks=1000, block_size=32)
    facts = _facts(standin)
    apply_engine_facts(sidecar.app, facts)
    engine = sidecar.app[ENGINE]
    assert engine.kv.block_size_tokens == 32
    assert engine.facts is facts
    expected = int(1000 * 32 * load_profile(QWEN).kv.bytes_per_token * 0.5)
    # Shadow mode holds nothing back, so its ledger keeps no budget.
    assert sidecar.app[LEDGER].total_bytes == (expected if mode == "enforce" else 0)


async def test_apply_engine_facts_keeps_the_operators_block_size(
    make_sidecar: SidecarFactory, standin: StandinServer
) -> None:
    sidecar = await make_sidecar(block_size_tokens=16, engine_poll_seconds=0)
    standin.set_cache_config(block_size=32)
    apply_engine_facts(
        sidecar.app, parse_engine_metrics(generate_latest(standin.registry).decode())
    )
    assert sidecar.app[ENGINE].kv.block_size_tokens == 16


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
