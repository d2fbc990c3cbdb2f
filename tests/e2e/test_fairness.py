"""Priority bands and KV-fair queueing through a real sidecar in front of the stand-in.

The flood: tenant ``scans`` keeps ``HEAVY_CLIENTS`` requests of one 12 MP scan each in the
sidecar (each holds ``HEAVY_HOLD_SECONDS`` in vLLM); the KV budget holds two of them. Tenant
``chat`` sends ``LIGHT_REQUESTS`` small text requests one after another.

The bound: with fair queueing a light request's start tag is the band's virtual time, never
later than the next scan's (the scans' tags are one scan's KV bytes apart), so it is the head
of the queue as soon as it arrives. It waits only until the budget frees its bytes: the next
scan to finish, at most one scan's hold away (the stand-in's ``HEAVY_HOLD_SECONDS`` plus
relaying; measured per run from the scans' log lines). So every light wait, p95 included,
is at most the longest scan hold plus the sidecar's own scheduling (``SLACK_SECONDS``). In
FIFO order (``SIDECAR_FAIRNESS=false``) it waits behind the scans queued before it, about
``(HEAVY_CLIENTS - 2) / 2`` scan holds.
"""

from __future__ import annotations

import asyncio
import contextlib
import statistics
import time
from typing import Any

import aiohttp
import orjson
import pytest
from structlog.testing import capture_logs

from sidecar.serve.keys import LEDGER, SATURATION
from sidecar.serve.server import RunningSidecar
from sidecar.standin import StandinServer
from tests.support.imaging import chat, chat_with_images, jpeg_uri
from tests.support.proxy_helpers import KV, fault, finished, post, sample
from tests.support.sidecars import SidecarFactory
from tests.support.waiting import eventually

SCAN = chat_with_images(jpeg_uri(3000, 4000), max_tokens=256)
TEXT = chat(max_tokens=64)
HEAVY_CLIENTS = 8
HEAVY_HOLD_SECONDS = 0.4
LIGHT_REQUESTS = 6
SLACK_SECONDS = 0.15
OBJECTIVE = "x-gateway-inference-objective"
TENANT = "x-gateway-inference-fairness-id"
MAPPING = "chat=10,default=0,batch=-1"


async def kv_of(session: aiohttp.ClientSession, sidecar: RunningSidecar, body: Any) -> int:
    """The predicted KV bytes of ``body``, from the sidecar's header."""
    return int((await post(session, sidecar, body)).headers[KV])


async def flood(
    session: aiohttp.ClientSession, sidecar: RunningSidecar, *, fairness: bool
) -> tuple[list[float], list[float]]:
    """Under the flood: the light tenant's waits, and each scan's time from its grant to its
    end (its hold), in seconds, as the sidecar's log lines say."""
    stop = asyncio.Event()
    heavy_headers = {TENANT: "scans", **fault(f"delay={HEAVY_HOLD_SECONDS}")}

    async def heavy() -> None:
        while not stop.is_set():
            await post(session, sidecar, SCAN, headers=heavy_headers)

    ledger = sidecar.app[LEDGER]
    light_ids = [f"light-{fairness}-{number}" for number in range(LIGHT_REQUESTS)]
    with capture_logs() as logs:
        scans = [asyncio.create_task(heavy()) for _ in range(HEAVY_CLIENTS)]
        await eventually(lambda: ledger.queue_depth == HEAVY_CLIENTS - 2, timeout_seconds=10)
        for request_id in light_ids:
            headers = {TENANT: "chat", "x-request-id": request_id}
            assert (await post(session, sidecar, TEXT, headers=headers)).status == 200
        stop.set()
        await asyncio.gather(*scans)
    lines = {line["request_id"]: line for line in finished(logs)}
    holds = [
        line["duration_seconds"] - line["wait_seconds"]
        for request_id, line in lines.items()
        if request_id not in light_ids
    ]
    return [lines[request_id]["wait_seconds"] for request_id in light_ids], holds


def p95(values: list[float]) -> float:
    return statistics.quantiles(values, n=20, method="inclusive")[-1]


@pytest.mark.slow  # about 25 s: two floods of 12 MP scans
async def test_fairness_keeps_a_light_tenant_waiting_at_most_one_scan_behind_a_flood(
    make_sidecar: SidecarFactory, session: aiohttp.ClientSession
) -> None:
    probe = await make_sidecar(engine_poll_seconds=0)
    scan_kv, text_kv = await kv_of(session, probe, SCAN), await kv_of(session, probe, TEXT)
    assert scan_kv > 20 * text_kv  # a scan is the flood: hundreds of MiB against a few
    budget = {"kv_budget_bytes": 2 * scan_kv, "queue_timeout_seconds": 30}
    fair = await make_sidecar(engine_poll_seconds=0, **budget)
    fifo = await make_sidecar(engine_poll_seconds=0, fairness=False, **budget)
    fair_waits, fair_holds = await flood(session, fair, fairness=True)
    fifo_waits, fifo_holds = await flood(session, fifo, fairness=False)
    bound = max(fair_holds) + SLACK_SECONDS
    fifo_expected = (HEAVY_CLIENTS - 2) / 2 * statistics.median(fifo_holds)
    print(  # the figures docs/priority-and-fairness.md quotes
        f"\nscan hold: median {statistics.median(fair_holds):.3f} s, max {max(fair_holds):.3f} s"
        f"\nlight wait, fair: p95 {p95(fair_waits):.3f} s, max {max(fair_waits):.3f} s, "
        f"bound {bound:.3f} s\nlight wait, FIFO: p95 {p95(fifo_waits):.3f} s, median "
        f"{statistics.median(fifo_waits):.3f} s, expected about {fifo_expected:.3f} s"
    )
    assert p95(fair_waits) <= max(fair_waits) <= bound
    assert statistics.median(fifo_waits) >= 0.6 * fifo_expected
    assert p95(fifo_waits) > 2 * p95(fair_waits)


async def test_bands_are_served_strictly_in_order_and_forwarded_unchanged(
    make_sidecar: SidecarFactory, standin: StandinServer, session: aiohttp.ClientSession
) -> None:
    text_kv = await kv_of(session, await make_sidecar(engine_poll_seconds=0), TEXT)
    sidecar = await make_sidecar(
        engine_poll_seconds=0,
        kv_budget_bytes=text_kv,
        objective_priorities=MAPPING,
        trust_request_priority=True,
    )
    ledger = sidecar.app[LEDGER]
    holder = asyncio.create_task(post(session, sidecar, TEXT, headers=fault("delay=0.3")))
    await eventually(lambda: ledger.inflight_requests == 1)
    standin.requests.clear()
    sent: list[tuple[str, dict[str, str], dict[str, Any]]] = [
        ("default-1", {OBJECTIVE: "default", TENANT: "a"}, TEXT),
        ("default-2", {OBJECTIVE: "default", TENANT: "b"}, TEXT),
        ("unnamed-later", {}, {**TEXT, "priority": 5}),  # vLLM's sign: later than default
        ("chat-1", {OBJECTIVE: "chat", TENANT: "a"}, TEXT),
        ("chat-2", {"x-llm-d-inference-objective": "chat"}, TEXT),
        ("unnamed-sooner", {}, {**TEXT, "priority": -20}),  # sooner than chat's band 10
    ]
    tasks = []
    for request_id, headers, body in sent:
        tasks.append(
            asyncio.create_task(
                post(session, sidecar, body, headers={**headers, "x-request-id": request_id})
            )
        )
        depth = len(tasks)
        await eventually(lambda depth=depth: ledger.queue_depth == depth)
    await holder
    replies = await asyncio.gather(*tasks)
    assert [reply.status for reply in replies] == [200] * len(sent)
    ids = {request_id for request_id, _, _ in sent}
    order = [
        r.headers["x-request-id"] for r in standin.requests if r.headers["x-request-id"] in ids
    ]
    assert order == [
        "unnamed-sooner",
        "chat-1",
        "chat-2",
        "default-1",
        "default-2",
        "unnamed-later",
    ]
    by_id = {request.headers["x-request-id"]: request for request in standin.requests}
    for request_id, headers, body in sent:
        forwarded = by_id[request_id]
        for name, value in headers.items():
            assert forwarded.headers[name] == value
        assert orjson.loads(forwarded.body) == body  # priority included, unchanged
    for band in ("10", "0", "other"):
        assert sample(sidecar, "vlm_sidecar_band_queue_wait_seconds_count", band=band) >= 1


async def test_sheddable_requests_are_shed_at_once_and_never_queued(
    make_sidecar: SidecarFactory, standin: StandinServer, session: aiohttp.ClientSession
) -> None:
    text_kv = await kv_of(session, await make_sidecar(engine_poll_seconds=0), TEXT)
    sidecar = await make_sidecar(
        engine_poll_seconds=0,
        kv_budget_bytes=text_kv,
        objective_priorities=MAPPING,
        queue_timeout_seconds=5,
    )
    ledger = sidecar.app[LEDGER]
    holder = asyncio.create_task(post(session, sidecar, TEXT, headers=fault("delay=1")))
    await eventually(lambda: ledger.inflight_requests == 1)
    queued = asyncio.create_task(post(session, sidecar, TEXT, headers={OBJECTIVE: "default"}))
    await eventually(lambda: ledger.queue_depth == 1)
    standin.requests.clear()
    started = time.perf_counter()
    shed = await post(session, sidecar, TEXT, headers={OBJECTIVE: "batch", "x-request-id": "b"})
    elapsed = time.perf_counter() - started
    assert shed.status == 429
    assert elapsed < 0.5, "a sheddable request waited"
    assert shed.headers["Retry-After"] == "5"
    assert shed.headers["x-should-retry"] == "true"
    error = shed.json()["error"]
    assert error["type"] == "RateLimitError"
    assert "sheddable" in error["message"]
    assert ledger.queue_depth == 1  # the default-band request still waits; batch never joined
    assert sample(sidecar, "vlm_sidecar_band_refusals_total", band="-1", reason="shed") == 1
    with contextlib.suppress(Exception):
        await holder
    assert (await queued).status == 200
    assert [r.headers.get("x-request-id") for r in standin.requests].count("b") == 0
    # With the budget free and nobody waiting, a sheddable request is served.
    assert (await post(session, sidecar, TEXT, headers={OBJECTIVE: "batch"})).status == 200


async def test_sheddable_requests_are_shed_first_while_vllm_is_saturated(
    make_sidecar: SidecarFactory, standin: StandinServer, session: aiohttp.ClientSession
) -> None:
    standin.set_load(kv_cache_usage_perc=0.99)
    sidecar = await make_sidecar(
        saturation_kv_usage=0.9,
        engine_poll_seconds=0.05,
        queue_timeout_seconds=5,
        objective_priorities=MAPPING,
    )
    await eventually(lambda: sidecar.app[SATURATION].saturated)
    held = asyncio.create_task(post(session, sidecar, TEXT, headers={OBJECTIVE: "chat"}))
    started = time.perf_counter()
    shed = await post(session, sidecar, TEXT, headers={OBJECTIVE: "batch"})
    assert shed.status == 429
    assert time.perf_counter() - started < 0.5
    assert "saturated" in shed.json()["error"]["message"]
    assert not held.done()
    standin.set_load(kv_cache_usage_perc=0.1)
    assert (await held).status == 200
    assert sample(sidecar, "vlm_sidecar_band_refusals_total", band="-1", reason="shed") == 1


@pytest.mark.parametrize("header", ["x-gateway-inference-fairness-id", "x-team"])
async def test_tenant_queue_depth_bounds_one_tenant_and_not_the_others(
    make_sidecar: SidecarFactory, session: aiohttp.ClientSession, header: str
) -> None:
    text_kv = await kv_of(session, await make_sidecar(engine_poll_seconds=0), TEXT)
    named = {"fairness_id_header": header} if header == "x-team" else {}
    sidecar = await make_sidecar(
        engine_poll_seconds=0, kv_budget_bytes=text_kv, max_tenant_queue_depth=1, **named
    )
    ledger = sidecar.app[LEDGER]
    holder = asyncio.create_task(post(session, sidecar, TEXT, headers=fault("delay=0.5")))
    await eventually(lambda: ledger.inflight_requests == 1)
    first = asyncio.create_task(post(session, sidecar, TEXT, headers={header: "a"}))
    await eventually(lambda: ledger.queue_depth == 1)
    refused = await post(session, sidecar, TEXT, headers={header: "a"})
    assert refused.status == 429
    assert "SIDECAR_MAX_TENANT_QUEUE_DEPTH" in refused.json()["error"]["message"]
    other = asyncio.create_task(post(session, sidecar, TEXT, headers={header: "b"}))
    await eventually(lambda: ledger.queue_depth == 2)
    for task in (holder, first, other):
        assert (await task).status == 200
