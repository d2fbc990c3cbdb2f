"""Debian's real Prometheus scrapes a real sidecar and the stand-in vLLM on 127.0.0.1, while a
mixed workload runs; then every dashboard query, variable and rule is evaluated through
Prometheus' HTTP API and must return data, and the totals must match what the client saw.

One Prometheus, sidecar and stand-in serve the whole module (about 15 s). The scrape config
adds ``namespace`` and ``pod`` target labels to both jobs, as the Prometheus Operator does
for a pod's ServiceMonitor, so the dashboard's variables can be set to concrete values.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import socket
import time
from collections import Counter
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import pytest
import pytest_asyncio
import yaml
from prometheus_client import CollectorRegistry

from dashboards import generate, rules
from sidecar.profiles import load_profile
from sidecar.serve.keys import LEDGER, METRICS
from sidecar.serve.server import RunningSidecar, running_sidecar
from sidecar.settings import Settings
from sidecar.standin import StandinConfig, run_standin
from tests.support.imaging import chat_with_images, data_uri, jpeg_uri
from tests.support.otlp import receiving
from tests.support.paths import ROOT
from tests.support.prometheus_tools import require_binary, substitute_grafana
from tests.support.sidecars import MODEL_ALIAS, QWEN

pytestmark = [pytest.mark.slow, pytest.mark.asyncio(loop_scope="module")]

DASHBOARD: dict[str, Any] = orjson.loads((ROOT / generate.DASHBOARD).read_bytes())
RULES: dict[str, Any] = yaml.safe_load((ROOT / generate.RULES).read_text())
NAMESPACE, POD = "vlm-test", "vlm-0"
PROFILE = load_profile(QWEN)
KV_BUDGET_BYTES = 256 * 2**20  # one 1920x1080 request fits, two do not
QUEUE_TIMEOUT_SECONDS = 2
SCRAPE_DEADLINE_SECONDS = 20.0

PANEL_TARGETS = [
    (panel["title"], target)
    for panel in DASHBOARD["panels"]
    if panel["type"] != "row"
    for target in panel["targets"]
]
VARIABLES = [v for v in DASHBOARD["templating"]["list"] if v["type"] == "query"]
RECORDS = [r for group in RULES["groups"] for r in group["rules"] if "record" in r]
ALERTS_BY_NAME = {alert.name: alert for alert in rules.ALERTS}


@dataclass(frozen=True)
class Step:
    """One request of the workload and the outcome it is built to cause."""

    name: str
    images: tuple[tuple[int, int], ...]
    decision: str
    reason: str
    max_tokens: int = 8
    stream: bool = False
    fault: str | None = None
    raw: bytes | None = None

    def body(self) -> bytes:
        if self.raw is not None:
            return self.raw
        extra: dict[str, Any] = {"max_tokens": self.max_tokens}
        if self.stream:
            extra |= {"stream": True, "stream_options": {"include_usage": True}}
        return orjson.dumps(chat_with_images(*(jpeg_uri(w, h) for w, h in self.images), **extra))


HD = ((1920, 1080),)
SEQUENTIAL = (
    Step("admit-hd", HD, "admit", "within_budget"),
    Step("admit-two-images", ((640, 480), (64, 64)), "admit", "within_budget"),
    Step("stream-with-usage", ((640, 480),), "admit", "within_budget", stream=True),
    Step("downscale", ((4032, 3024), (64, 64)), "downscale", "max_image_tokens"),
    Step("too-many-images", ((64, 64),) * 4, "reject", "max_images_per_request"),
    Step("larger-than-budget", ((640, 480),), "reject", "larger_than_kv_budget", max_tokens=6000),
    Step("not-json", (), "reject", "invalid_body", raw=b"not json"),
    Step(
        "not-an-image",
        (),
        "reject",
        "invalid_image",
        raw=orjson.dumps(chat_with_images(data_uri(b"not an image at all, just text"))),
    ),
    Step("upstream-500", ((64, 64),), "admit", "within_budget", fault="status=500"),
    Step("upstream-closes", ((64, 64),), "reject", "upstream_error", fault="close"),
)
# (holder, waiter): the waiter queues behind the holder's KV reservation.
CONCURRENT = (
    (
        Step("holds-budget-briefly", HD, "admit", "within_budget", fault="delay=0.6"),
        Step("waits-for-budget", HD, "wait", "kv_budget_full"),
    ),
    (
        Step("holds-budget-too-long", HD, "admit", "within_budget", fault="delay=2.6"),
        Step("times-out-waiting", HD, "reject", "queue_timeout"),
    ),
)


@dataclass
class Seen:
    """What the workload's client received, summed."""

    decisions: Counter[str] = field(default_factory=Counter)
    reject_reasons: Counter[str] = field(default_factory=Counter)
    requests: int = 0
    visual_tokens: int = 0
    observed_prompt_tokens: int = 0
    predicted_prompt_tokens_answered: int = 0
    answered_with_usage: int = 0
    downscaled_images: int = 0
    queue_waits: int = 0

    def add(self, step: Step, status: int, headers: dict[str, str], body: bytes) -> None:
        decision = headers["x-vlm-sidecar-decision"]
        assert decision == step.decision, (step.name, status, body[:300])
        self.requests += 1
        self.decisions[decision] += 1
        if decision == "reject":
            self.reject_reasons[step.reason] += 1
        self.queue_waits += step.decision == "wait" or step.reason == "queue_timeout"
        if "x-vlm-sidecar-visual-tokens" in headers:
            as_sent = sum(PROFILE.vision.image_tokens(w, h).tokens for w, h in step.images)
            if decision == "downscale":
                self.downscaled_images += 1
            else:
                assert int(headers["x-vlm-sidecar-visual-tokens"]) == as_sent, step.name
            self.visual_tokens += as_sent
        usage = _usage(body, streaming=step.stream) if status == 200 else None
        if usage is not None:
            self.answered_with_usage += 1
            self.observed_prompt_tokens += usage
            self.predicted_prompt_tokens_answered += int(headers["x-vlm-sidecar-prompt-tokens"])


def _usage(body: bytes, *, streaming: bool) -> int | None:
    if not streaming:
        prompt_tokens: int = orjson.loads(body)["usage"]["prompt_tokens"]
        return prompt_tokens
    for line in body.splitlines():
        if line.startswith(b"data: {") and b'"usage"' in line:
            usage = orjson.loads(line[6:]).get("usage")
            if usage:
                return int(usage["prompt_tokens"])
    return None


async def _send(
    session: aiohttp.ClientSession, sidecar: RunningSidecar, step: Step
) -> tuple[int, dict[str, str], bytes]:
    url = f"http://127.0.0.1:{sidecar.port}/v1/chat/completions"
    headers = {"Content-Type": "application/json"}
    if step.fault is not None:
        headers["x-standin-fault"] = step.fault
    async with session.post(url, data=step.body(), headers=headers) as response:
        return response.status, dict(response.headers), await response.read()


async def run_workload(session: aiohttp.ClientSession, sidecar: RunningSidecar) -> Seen:
    seen = Seen()
    for step in SEQUENTIAL:
        status, headers, body = await _send(session, sidecar, step)
        seen.add(step, status, headers, body)
        if step.name == "admit-hd":
            kv_bytes = int(headers["x-vlm-sidecar-kv-bytes"])
            assert kv_bytes <= KV_BUDGET_BYTES < 2 * kv_bytes, (
                "the budget no longer splits HD pairs"
            )
    ledger = sidecar.app[LEDGER]
    for holder, waiter in CONCURRENT:
        held = asyncio.create_task(_send(session, sidecar, holder))
        for _ in range(300):
            if ledger.inflight_requests:
                break
            await asyncio.sleep(0.01)
        seen.add(waiter, *await _send(session, sidecar, waiter))
        seen.add(holder, *await held)
    return seen


class PrometheusApi:
    """Prometheus' HTTP API on loopback."""

    def __init__(self, session: aiohttp.ClientSession, port: int) -> None:
        self.session, self.url = session, f"http://127.0.0.1:{port}"

    async def get(self, path: str, **params: str) -> Any:
        async with self.session.get(self.url + path, params=params) as response:
            payload = await response.json()
        assert payload["status"] == "success", payload
        return payload["data"]

    async def query(self, expr: str) -> list[dict[str, Any]]:
        data = await self.get("/api/v1/query", query=expr)
        assert data["resultType"] == "vector", (expr, data["resultType"])
        result: list[dict[str, Any]] = data["result"]
        return result

    async def value(self, expr: str) -> float:
        result = await self.query(expr)
        assert len(result) == 1, (expr, result)
        return float(result[0]["value"][1])

    async def wait_until(self, what: str, check: Any, deadline_seconds: float) -> None:
        deadline = time.monotonic() + deadline_seconds
        while not await check():
            if time.monotonic() > deadline:
                targets = await self.get("/api/v1/targets")
                pytest.fail(f"Prometheus: {what} did not happen; targets: {targets}")
            await asyncio.sleep(0.25)


@dataclass
class Harness:
    api: PrometheusApi
    sidecar: RunningSidecar
    seen: Seen
    variables: dict[str, str]


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _config(rules_file: Path, sidecar_port: int, vllm_port: int) -> dict[str, Any]:
    def job(name: str, port: int, container: str) -> dict[str, Any]:
        labels = {"namespace": NAMESPACE, "pod": POD, "container": container}
        return {
            "job_name": name,
            "static_configs": [{"targets": [f"127.0.0.1:{port}"], "labels": labels}],
        }

    return {
        "global": {"scrape_interval": "1s", "scrape_timeout": "1s", "evaluation_interval": "1s"},
        "rule_files": [str(rules_file)],
        "scrape_configs": [
            job("vlm-sidecar", sidecar_port, "sidecar"),
            job("vllm", vllm_port, "vllm"),
        ],
    }


@contextlib.asynccontextmanager
async def prometheus_process(
    config: dict[str, Any],
    directory: Path,
    session: aiohttp.ClientSession,
    flags: tuple[str, ...] = (),
) -> AsyncIterator[int]:
    """Start Prometheus on a free loopback port with tmp storage, ready; stop it on exit."""
    binary = require_binary("prometheus")
    config_file = directory / "prometheus.yml"
    config_file.write_text(yaml.safe_dump(config))
    port = _free_port()
    process = await asyncio.create_subprocess_exec(
        binary,
        f"--config.file={config_file}",
        f"--storage.tsdb.path={directory / 'data'}",
        f"--web.listen-address=127.0.0.1:{port}",
        "--log.level=warn",
        *flags,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    assert process.stdout is not None
    log = asyncio.create_task(process.stdout.read())  # drains the pipe while it runs
    try:
        for _ in range(100):
            if process.returncode is not None:
                output = (await log).decode(errors="replace")
                pytest.fail(f"prometheus exited with {process.returncode}:\n{output[-4000:]}")
            with contextlib.suppress(aiohttp.ClientError):
                async with session.get(f"http://127.0.0.1:{port}/-/ready") as response:
                    if response.status == 200:
                        break
            await asyncio.sleep(0.1)
        else:
            pytest.fail("prometheus did not become ready within 10 s")
        yield port
    finally:
        if process.returncode is None:
            process.terminate()
            try:
                await asyncio.wait_for(process.wait(), 10)
            except TimeoutError:
                process.kill()
                await process.wait()
        await log


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def harness(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Harness]:
    require_binary("prometheus")
    directory = tmp_path_factory.mktemp("prometheus")
    async with contextlib.AsyncExitStack() as stack:
        standin = await stack.enter_async_context(
            run_standin(
                # Image-token details, as vLLM's --enable-prompt-tokens-details, feed the
                # "Rule against vLLM" panel.
                StandinConfig(
                    served_model_name=QWEN,
                    model_aliases=(MODEL_ALIAS,),
                    enable_prompt_tokens_details=True,
                )
            )
        )
        settings = Settings(
            model=QWEN,
            upstream_url=standin.url,
            listen_host="127.0.0.1",
            port=0,
            metrics_port=0,
            max_images_per_request=3,
            max_image_pixels=20_000_000,
            max_image_tokens=4096,
            max_request_visual_tokens=8192,
            max_request_kv_bytes=2**30,
            kv_budget_bytes=KV_BUDGET_BYTES,
            queue_timeout_seconds=QUEUE_TIMEOUT_SECONDS,
            over_budget_action="downscale",
        )
        sidecar = await stack.enter_async_context(
            running_sidecar(settings, registry=CollectorRegistry())
        )
        session = await stack.enter_async_context(aiohttp.ClientSession())
        config = _config(ROOT / generate.RULES, sidecar.metrics_port, standin.port)
        port = await stack.enter_async_context(prometheus_process(config, directory, session))
        api = PrometheusApi(session, port)

        async def both_targets_up() -> bool:
            with contextlib.suppress(aiohttp.ClientError, AssertionError):
                targets = (await api.get("/api/v1/targets"))["activeTargets"]
                return len(targets) == 2 and all(t["health"] == "up" for t in targets)
            return False

        # The first scrape lands ~5-6 s after start; counters must be scraped at zero first,
        # or rate() would see no increase.
        await api.wait_until(
            "the first scrape of both targets", both_targets_up, SCRAPE_DEADLINE_SECONDS
        )
        seen = await run_workload(session, sidecar)
        done = time.time()

        async def scraped_after_workload() -> bool:
            stamps = await api.query("timestamp(up)")
            return len(stamps) == 2 and all(float(s["value"][1]) > done for s in stamps)

        await api.wait_until(
            "a scrape after the workload", scraped_after_workload, SCRAPE_DEADLINE_SECONDS
        )
        variables = {"namespace": NAMESPACE, "pod": POD, "model": sidecar.app[METRICS].model}
        yield Harness(api, sidecar, seen, variables)


async def test_prometheus_scrapes_sidecar_and_vllm_with_namespace_and_pod_labels(
    harness: Harness,
) -> None:
    up = await harness.api.query("up")
    assert {(s["metric"]["job"], s["value"][1]) for s in up} == {
        ("vlm-sidecar", "1"),
        ("vllm", "1"),
    }
    assert all(s["metric"]["namespace"] == NAMESPACE and s["metric"]["pod"] == POD for s in up)


async def test_prometheus_counts_each_decision_the_client_received(harness: Harness) -> None:
    result = await harness.api.query(
        f'sum by (decision) (vlm_sidecar_requests_total{{namespace="{NAMESPACE}"}})'
    )
    counted = {s["metric"]["decision"]: float(s["value"][1]) for s in result}
    expected = dict.fromkeys(("admit", "downscale", "wait", "reject"), 0.0)
    expected |= {decision: float(n) for decision, n in harness.seen.decisions.items()}
    assert counted == expected
    assert sum(counted.values()) == harness.seen.requests == len(SEQUENTIAL) + 2 * len(CONCURRENT)


async def test_prometheus_counts_rejections_by_reason(harness: Harness) -> None:
    result = await harness.api.query(
        'sum by (reason) (vlm_sidecar_requests_total{decision="reject"}) > 0'
    )
    counted = {s["metric"]["reason"]: float(s["value"][1]) for s in result}
    assert counted == {reason: float(n) for reason, n in harness.seen.reject_reasons.items()}
    assert len(counted) >= 5


async def test_prometheus_sums_the_predicted_visual_tokens_of_the_headers(
    harness: Harness,
) -> None:
    total = await harness.api.value("sum(vlm_sidecar_request_visual_tokens_sum)")
    assert total == harness.seen.visual_tokens


async def test_prometheus_sums_observed_and_predicted_prompt_tokens_of_answered_requests(
    harness: Harness,
) -> None:
    api, seen = harness.api, harness.seen
    assert seen.answered_with_usage >= 5  # JSON answers and the stream's usage chunk
    assert await api.value("sum(vlm_sidecar_observed_prompt_tokens_count)") == (
        seen.answered_with_usage
    )
    assert await api.value("sum(vlm_sidecar_observed_prompt_tokens_sum)") == (
        seen.observed_prompt_tokens
    )
    assert await api.value("sum(vlm_sidecar_usage_predicted_prompt_tokens_total)") == (
        seen.predicted_prompt_tokens_answered
    )


async def test_prometheus_sees_downscales_waits_and_upstream_errors(harness: Harness) -> None:
    api, seen = harness.api, harness.seen
    assert await api.value("sum(vlm_sidecar_downscaled_images_total)") == seen.downscaled_images
    assert await api.value("sum(vlm_sidecar_queue_wait_seconds_count)") == seen.queue_waits
    result = await api.query("sum by (kind) (vlm_sidecar_upstream_errors_total) > 0")
    assert {s["metric"]["kind"]: s["value"][1] for s in result} == {
        "connect": "1",
        "status_5xx": "1",
    }


@pytest.mark.parametrize(
    ("title", "target"),
    PANEL_TARGETS,
    ids=[f"{title}/{target['refId']}" for title, target in PANEL_TARGETS],
)
async def test_dashboard_query_returns_finite_data(
    harness: Harness, title: str, target: dict[str, Any]
) -> None:
    expr = substitute_grafana(target["expr"], harness.variables)
    result = await harness.api.query(expr)
    assert result, f"{title}: no data for {expr}"
    values = [float(sample["value"][1]) for sample in result]
    assert all(math.isfinite(v) for v in values), f"{title}: {expr} -> {values}"


@pytest.mark.parametrize("variable", VARIABLES, ids=[v["name"] for v in VARIABLES])
async def test_dashboard_variable_finds_the_scraped_value(
    harness: Harness, variable: dict[str, Any]
) -> None:
    query = substitute_grafana(variable["query"], harness.variables)
    selector, _, label = query.removeprefix("label_values(").removesuffix(")").rpartition(", ")
    result = await harness.api.query(f"group by ({label}) ({selector})")
    assert [s["metric"][label] for s in result] == [harness.variables[variable["name"]]]


@pytest.mark.parametrize("record", RECORDS, ids=[r["record"] for r in RECORDS])
async def test_recording_rule_returns_data(harness: Harness, record: dict[str, Any]) -> None:
    assert await harness.api.query(record["expr"]), record["expr"]


@pytest.mark.parametrize("alert", rules.ALERTS, ids=[a.name for a in rules.ALERTS])
async def test_alert_signal_returns_data(harness: Harness, alert: rules.Alert) -> None:
    async def evaluated() -> bool:
        return bool(await harness.api.query(alert.signal))

    await harness.api.wait_until(f"{alert.signal} evaluated", evaluated, 10)


@pytest.mark.parametrize(
    "name",
    [
        "VlmSidecarHighRejectionRatio",
        "VlmSidecarUpstreamErrors",
        "VlmSidecarPromptTokensOverPredicted",
    ],
)
async def test_alert_the_workload_breaks_turns_pending(harness: Harness, name: str) -> None:
    assert await harness.api.query(ALERTS_BY_NAME[name].expr)

    async def active() -> bool:
        alerts = (await harness.api.get("/api/v1/alerts"))["alerts"]
        return any(a["labels"]["alertname"] == name for a in alerts)

    await harness.api.wait_until(f"{name} pending", active, 10)


async def test_rules_load_and_evaluate_without_errors(harness: Harness) -> None:
    groups = (await harness.api.get("/api/v1/rules"))["groups"]
    loaded = [rule for group in groups for rule in group["rules"]]
    assert len(loaded) == len(RECORDS) + len(rules.ALERTS)
    assert all(rule["health"] in ("ok", "unknown") for rule in loaded), loaded


async def test_prometheus_stores_the_trace_ids_of_a_traced_sidecar_as_exemplars(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With exemplar storage on, Prometheus scrapes OpenMetrics and keeps the trace id a
    latency and a KV bucket carry, so a Grafana panel can jump to the trace."""
    trace_id = "4bf92f3577b34da6a3ce929d0e0e4736"
    async with contextlib.AsyncExitStack() as stack:
        receiver = await stack.enter_async_context(receiving())
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", receiver.endpoint)
        standin = await stack.enter_async_context(
            run_standin(StandinConfig(served_model_name=QWEN, model_aliases=(MODEL_ALIAS,)))
        )
        settings = Settings(
            model=QWEN, upstream_url=standin.url, listen_host="127.0.0.1", port=0, metrics_port=0
        )
        sidecar = await stack.enter_async_context(
            running_sidecar(settings, registry=CollectorRegistry())
        )
        session = await stack.enter_async_context(aiohttp.ClientSession())
        config = _config(ROOT / generate.RULES, sidecar.metrics_port, standin.port)
        port = await stack.enter_async_context(
            prometheus_process(
                config, tmp_path, session, flags=("--enable-feature=exemplar-storage",)
            )
        )
        api = PrometheusApi(session, port)
        body = orjson.dumps(chat_with_images(jpeg_uri(640, 480), max_tokens=8))
        headers = {
            "Content-Type": "application/json",
            "traceparent": f"00-{trace_id}-00f067aa0ba902b7-01",
        }
        async with session.post(
            f"http://127.0.0.1:{sidecar.port}/v1/chat/completions", data=body, headers=headers
        ) as response:
            assert response.status == 200, await response.text()
        found: dict[str, set[str]] = {}

        async def exemplars_stored() -> bool:
            for name in ("request_duration_seconds", "request_kv_bytes"):
                data = await api.get(
                    "/api/v1/query_exemplars",
                    query=f"vlm_sidecar_{name}_bucket",
                    start=str(time.time() - 600),
                    end=str(time.time() + 60),
                )
                found[name] = {
                    exemplar["labels"].get("trace_id", "")
                    for series in data
                    for exemplar in series["exemplars"]
                }
            return all(trace_id in ids for ids in found.values())

        await api.wait_until(
            "exemplars with the trace id", exemplars_stored, SCRAPE_DEADLINE_SECONDS
        )
