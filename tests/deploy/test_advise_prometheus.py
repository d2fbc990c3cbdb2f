"""``replay`` and ``advise --prometheus``: Debian's real Prometheus scrapes a real sidecar in
front of the stand-in; the synthetic traffic built from its histograms has the requests and
images the client sent, at bucket level, and says it is an estimate."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator

import aiohttp
import orjson
import pytest
import pytest_asyncio
from prometheus_client import CollectorRegistry

from sidecar.serve.server import running_sidecar
from sidecar.settings import Settings
from sidecar.standin import StandinConfig, run_standin
from tests.deploy.test_prometheus_integration import PrometheusApi, prometheus_process
from tests.support.cli import run_cli
from tests.support.imaging import chat_with_images, jpeg_uri
from tests.support.prometheus_tools import require_binary
from tests.support.sidecars import MODEL_ALIAS, QWEN

pytestmark = [pytest.mark.slow, pytest.mark.asyncio(loop_scope="module")]

SENT = [((1920, 1080),)] * 3 + [((4032, 3024),)] * 2 + [((640, 480), (64, 64))]


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def prometheus_url(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[str]:
    require_binary("prometheus")
    async with contextlib.AsyncExitStack() as stack:
        standin = await stack.enter_async_context(
            run_standin(StandinConfig(served_model_name=QWEN, model_aliases=(MODEL_ALIAS,)))
        )
        settings = Settings(
            model=QWEN,
            upstream_url=standin.url,  # type: ignore[arg-type]
            listen_host="127.0.0.1",
            port=0,
            metrics_port=0,
        )
        sidecar = await stack.enter_async_context(
            running_sidecar(settings, registry=CollectorRegistry())
        )
        session = await stack.enter_async_context(aiohttp.ClientSession())
        config = {
            "global": {"scrape_interval": "1s", "scrape_timeout": "1s"},
            "scrape_configs": [
                {
                    "job_name": "vlm-sidecar",
                    "static_configs": [{"targets": [f"127.0.0.1:{sidecar.metrics_port}"]}],
                }
            ],
        }
        directory = tmp_path_factory.mktemp("prometheus-advise")
        port = await stack.enter_async_context(prometheus_process(config, directory, session))
        api = PrometheusApi(session, port)

        async def scraped_at(after: float) -> bool:
            stamps = await api.query("timestamp(up)")
            return len(stamps) == 1 and float(stamps[0]["value"][1]) > after

        await api.wait_until("a first scrape", lambda: scraped_at(0), 20)
        for images in SENT:
            uris = (jpeg_uri(w, h) for w, h in images)
            body = chat_with_images(*uris, max_tokens=64, model=QWEN)
            url = f"http://127.0.0.1:{sidecar.port}/v1/chat/completions"
            async with session.post(url, json=body) as response:
                assert response.status == 200
        done = time.time()
        await asyncio.sleep(3)  # a few scrapes after the traffic
        await api.wait_until("a scrape after the traffic", lambda: scraped_at(done + 2), 20)
        yield f"http://127.0.0.1:{port}"


async def cli(*argv: str) -> dict[str, object]:
    status, output = await asyncio.to_thread(run_cli, *argv)
    assert status == 0, output
    result: dict[str, object] = orjson.loads(output)
    return result


async def test_replay_from_prometheus_rebuilds_the_traffic(prometheus_url: str) -> None:
    summary = await cli("replay", "--prometheus", prometheus_url, "--window", "10m", "--json")
    assert summary["requests"] == len(SENT)
    assert summary["images"] == {"total": 7, "downscaled": 0}
    assert summary["decisions"] == {"admit": len(SENT), "downscale": 0, "wait": 0, "reject": 0}
    notes = summary["notes"]
    assert isinstance(notes, list)
    assert notes[0].startswith("ESTIMATE")


async def test_a_pixel_cap_lowers_the_synthetic_traffics_kv(prometheus_url: str) -> None:
    capped = await cli(
        "replay",
        "--prometheus",
        prometheus_url,
        "--window",
        "10m",
        "--json",
        "--set",
        "SIDECAR_MAX_PIXELS=1003520",
    )
    before, after = capped["before"], capped["kv_bytes_per_request"]
    assert isinstance(before, dict)
    assert isinstance(after, dict)
    assert after["p99"] < before["kv_bytes"]["p99"]


async def test_advise_from_prometheus_recommends(prometheus_url: str) -> None:
    advice = await cli(
        "advise",
        "--prometheus",
        prometheus_url,
        "--window",
        "10m",
        "--gpu-memory-gib",
        "80",
        "--json",
    )
    recommended = advice["recommended"]
    assert isinstance(recommended, dict)
    assert recommended["rejected"] == 0
    assert "SIDECAR_KV_BUDGET_BYTES" in advice["env"]  # type: ignore[operator]
