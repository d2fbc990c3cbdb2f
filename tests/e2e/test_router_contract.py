"""The router contract end to end: what an endpoint picker scraping the serving port sees, what
a gateway is told when this replica is busy, and a data-parallel pod's budget.

The picker scrapes ``GET /metrics`` on the port it routes to, which is the sidecar's traffic
port; there vLLM's exposition arrives unchanged with the two router gauges after it.
"""

from __future__ import annotations

import asyncio

import aiohttp
from prometheus_client.parser import text_string_to_metric_families

from sidecar.serve.keys import BUDGETS, ENGINE, LEDGER
from sidecar.standin import StandinServer
from tests.support.imaging import chat
from tests.support.proxy_helpers import fault, post
from tests.support.sidecars import QWEN, SidecarFactory
from tests.support.waiting import eventually

WAITING = "vlm_sidecar_effective_requests_waiting"
KV_USAGE = "vlm_sidecar_effective_kv_usage"
QWEN_KV_BYTES_PER_TOKEN = 57_344
BLOCK_BYTES = 16 * QWEN_KV_BYTES_PER_TOKEN


def gauges(text: str) -> dict[str, float]:
    """The router gauges' values in an exposition (each has exactly one series)."""
    found: dict[str, list[float]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name in (WAITING, KV_USAGE):
                found.setdefault(sample.name, []).append(sample.value)
    assert all(len(values) == 1 for values in found.values()), found
    return {name: values[0] for name, values in found.items()}


async def scrape(session: aiohttp.ClientSession, port: int) -> str:
    async with session.get(f"http://127.0.0.1:{port}/metrics") as response:
        assert response.status == 200
        return await response.text()


async def test_serving_port_metrics_are_vllms_bytes_then_only_the_two_router_gauges(
    make_sidecar: SidecarFactory, standin: StandinServer, session: aiohttp.ClientSession
) -> None:
    standin.set_load(num_requests_waiting=2, kv_cache_usage_perc=0.25)
    sidecar = await make_sidecar(engine_poll_seconds=0.05)
    await eventually(lambda: sidecar.app[ENGINE].facts is not None, timeout_seconds=5)
    async with session.get(f"{standin.url}/metrics") as response:
        vllm = await response.text()
    served = await scrape(session, sidecar.port)
    assert served.startswith(vllm)
    added = [family.name for family in text_string_to_metric_families(served[len(vllm) :])]
    assert added == [WAITING, KV_USAGE]
    assert gauges(served) == {WAITING: 2.0, KV_USAGE: 0.25}
    assert 'model_name="Qwen/Qwen2.5-VL-7B-Instruct"' in served.splitlines()[-1]
    # The metrics port carries the same two gauges beside the sidecar's own series.
    assert gauges(await scrape(session, sidecar.metrics_port)) == {WAITING: 2.0, KV_USAGE: 0.25}


async def test_other_metrics_paths_and_methods_pass_through_unchanged(
    make_sidecar: SidecarFactory, session: aiohttp.ClientSession
) -> None:
    sidecar = await make_sidecar()
    async with session.head(f"http://127.0.0.1:{sidecar.port}/metrics") as response:
        assert response.status in {200, 405}
    async with session.get(f"http://127.0.0.1:{sidecar.port}/metrics/extra") as response:
        assert WAITING not in await response.text()


async def test_the_sidecars_queue_shows_in_the_gauges_while_vllm_reports_nothing_waiting(
    make_sidecar: SidecarFactory, standin: StandinServer, session: aiohttp.ClientSession
) -> None:
    body = chat(text="x" * 30, max_tokens=100, model=QWEN)
    sidecar = await make_sidecar(
        engine_poll_seconds=0.05, kv_budget_bytes=str(10 * BLOCK_BYTES), queue_timeout_seconds=5
    )
    held = [
        asyncio.create_task(post(session, sidecar, body, headers=fault("hang"))) for _ in range(3)
    ]
    await eventually(lambda: sidecar.app[LEDGER].queue_depth == 2, timeout_seconds=5)
    seen = gauges(await scrape(session, sidecar.port))
    ledger = sidecar.app[LEDGER]
    assert seen[WAITING] == 2  # vLLM's own num_requests_waiting is 0
    assert seen[KV_USAGE] == ledger.inflight_bytes / ledger.total_bytes > 0.5
    for task in held:
        task.cancel()
    await asyncio.gather(*held, return_exceptions=True)


async def test_a_busy_replica_answers_429_that_a_gateway_may_retry_on_another(
    make_sidecar: SidecarFactory, session: aiohttp.ClientSession
) -> None:
    body = chat(text="x" * 30, max_tokens=100, model=QWEN)
    sidecar = await make_sidecar(kv_budget_bytes=str(10 * BLOCK_BYTES), queue_timeout_seconds=1)
    holder = asyncio.create_task(post(session, sidecar, body, headers=fault("hang")))
    await eventually(lambda: sidecar.app[LEDGER].inflight_requests == 1, timeout_seconds=5)
    reply = await post(session, sidecar, body)
    assert reply.status == 429
    assert reply.headers["Retry-After"] == "1"
    assert reply.headers["x-should-retry"] == "true"
    assert reply.headers["x-vlm-sidecar-retry-scope"] == "other-replica"
    assert "another replica may serve it now" in reply.json()["error"]["message"]
    holder.cancel()
    await asyncio.gather(holder, return_exceptions=True)


async def test_data_parallel_pool_is_summed_and_one_request_must_fit_one_engine(
    make_sidecar: SidecarFactory, standin: StandinServer, session: aiohttp.ClientSession
) -> None:
    standin.set_cache_config(num_gpu_blocks=100, data_parallel_size=2)  # 1,600 tokens each
    sidecar = await make_sidecar(
        kv_budget_bytes="auto", engine_poll_seconds=0.05, data_parallel_size=2
    )
    await eventually(lambda: sidecar.app[LEDGER].total_bytes > 0, timeout_seconds=5)
    budgets = sidecar.app[BUDGETS].current
    assert budgets.kv_budget_bytes == 2 * 100 * BLOCK_BYTES
    assert (budgets.kv_budget_engines, budgets.kv_budget_bytes_per_engine) == (2, 100 * BLOCK_BYTES)
    # 2,000 tokens fit the pod's 3,200 but no engine's 1,600: no replica will ever serve it.
    never = await post(session, sidecar, chat(text="x" * 30, max_tokens=2000, model=QWEN))
    assert never.status == 413
    assert never.headers["x-should-retry"] == "false"
    assert never.headers["x-vlm-sidecar-retry-scope"] == "none"
    assert "one data-parallel engine's share" in never.json()["error"]["message"]
    fits = await post(session, sidecar, chat(text="x" * 30, max_tokens=1000, model=QWEN))
    assert fits.status == 200
