"""Three replicas behind a least-loaded router: with the sidecar's router gauges no pod queues
while another idles; with vLLM's own metrics alone, queues build on one pod beside idle ones.

Each replica is a stand-in vLLM with a sidecar in front (an in-flight KV budget of three
requests). The router written here does what an endpoint picker does with the two scorers the
shipped EndpointPickerConfig uses: it scrapes every pod's serving-port ``/metrics`` before each
request, scores queue depth (normalised, shortest 1) and KV usage (1 - usage) with equal
weights, and sends the request to the best pod, rotating among ties. Read from vLLM's series
(``vllm:num_requests_waiting``, ``vllm:kv_cache_usage_perc``), every pod looks the same: the
sidecar holds its queue in front of vLLM, and the engine reports nothing waiting.

The work is uneven the way a periodic heavy client makes it: every third request is held
1.2 s by the stand-in (``x-standin-fault: delay=1.2``), the others 0.1 s.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field

import aiohttp
import pytest
from prometheus_client.parser import text_string_to_metric_families

from sidecar.serve.keys import LEDGER
from sidecar.serve.server import RunningSidecar
from sidecar.standin import StandinServer, run_standin
from tests.support.imaging import chat
from tests.support.proxy_helpers import fault, post
from tests.support.sidecars import QWEN, SidecarFactory
from tests.support.waiting import eventually

REQUEST_KV_BYTES = 8 * 16 * 57_344  # 26 prompt + 100 output tokens: 8 blocks of Qwen2.5-VL-7B
REQUESTS = 30
ARRIVAL_SECONDS = 0.1
LONG, SHORT = "delay=1.2", "delay=0.1"
SAMPLE_SECONDS = 0.02

SIDECAR_GAUGES = ("vlm_sidecar_effective_requests_waiting", "vlm_sidecar_effective_kv_usage")
VLLM_ONLY = ("vllm:num_requests_waiting", "vllm:kv_cache_usage_perc")


@dataclass
class Imbalance:
    """What the sampler saw: how often a pod queued while another sat idle."""

    samples: int = 0
    queued_beside_idle: int = 0
    max_queue: int = 0
    per_pod_requests: list[int] = field(default_factory=lambda: [0, 0, 0])

    @property
    def fraction(self) -> float:
        return self.queued_beside_idle / max(1, self.samples)


def read_load(text: str, names: tuple[str, str]) -> tuple[float, float]:
    """(waiting, KV usage) from one pod's exposition: waiting summed, usage the largest."""
    waiting, usage = 0.0, 0.0
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == names[0]:
                waiting += sample.value
            elif sample.name == names[1]:
                usage = max(usage, sample.value)
    return waiting, usage


def pick(loads: list[tuple[float, float]], turn: int) -> int:
    """queue-scorer plus kv-cache-utilization-scorer, equal weights; ties rotate."""
    queues = [waiting for waiting, _ in loads]
    low, high = min(queues), max(queues)
    scores = [
        (1.0 if high == low else (high - waiting) / (high - low)) + (1.0 - usage)
        for waiting, usage in loads
    ]
    best = max(scores)
    tied = [index for index, score in enumerate(scores) if score >= best - 1e-9]
    return tied[turn % len(tied)]


async def sample_ledgers(
    sidecars: list[RunningSidecar], seen: Imbalance, stop: asyncio.Event
) -> None:
    while not stop.is_set():
        ledgers = [sidecar.app[LEDGER] for sidecar in sidecars]
        queues = [ledger.queue_depth for ledger in ledgers]
        idle = [ledger.queue_depth == 0 and ledger.inflight_requests == 0 for ledger in ledgers]
        seen.samples += 1
        seen.max_queue = max(seen.max_queue, *queues)
        if any(queues) and any(idle):
            seen.queued_beside_idle += 1
        await asyncio.sleep(SAMPLE_SECONDS)


async def run_workload(
    session: aiohttp.ClientSession, sidecars: list[RunningSidecar], names: tuple[str, str]
) -> Imbalance:
    seen = Imbalance()
    stop = asyncio.Event()
    sampler = asyncio.create_task(sample_ledgers(sidecars, seen, stop))
    sent: list[asyncio.Task[object]] = []
    body = chat(text="x" * 30, max_tokens=100, model=QWEN)
    for turn in range(REQUESTS):
        loads = []
        for sidecar in sidecars:
            async with session.get(f"http://127.0.0.1:{sidecar.port}/metrics") as response:
                loads.append(read_load(await response.text(), names))
        chosen = pick(loads, turn)
        seen.per_pod_requests[chosen] += 1
        headers = fault(LONG if turn % 3 == 0 else SHORT)
        sent.append(asyncio.create_task(post(session, sidecars[chosen], body, headers=headers)))
        await asyncio.sleep(ARRIVAL_SECONDS)
    replies = await asyncio.gather(*sent)
    stop.set()
    await sampler
    assert all(getattr(reply, "status", None) == 200 for reply in replies)
    return seen


@contextlib.asynccontextmanager
async def two_more_standins() -> AsyncIterator[list[StandinServer]]:
    async with run_standin() as second, run_standin() as third:
        yield [second, third]


@pytest.fixture
async def replicas(
    make_sidecar: SidecarFactory, standin: StandinServer
) -> AsyncIterator[Callable[[], list[RunningSidecar]]]:
    async with two_more_standins() as others:
        sidecars = [
            await make_sidecar(
                upstream_url=engine.url,
                kv_budget_bytes=str(3 * REQUEST_KV_BYTES),
                queue_timeout_seconds=30,
                engine_poll_seconds=0.05,
            )
            for engine in (standin, *others)
        ]
        yield lambda: sidecars


def idle(sidecars: list[RunningSidecar]) -> bool:
    return all(s.app[LEDGER].inflight_requests == 0 for s in sidecars)


async def test_router_on_sidecar_gauges_never_leaves_a_pod_queueing_beside_an_idle_one(
    replicas: Callable[[], list[RunningSidecar]], session: aiohttp.ClientSession
) -> None:
    sidecars = replicas()
    with_gauges = await run_workload(session, sidecars, SIDECAR_GAUGES)
    await eventually(lambda: idle(sidecars), timeout_seconds=5)
    vllm_only = await run_workload(session, sidecars, VLLM_ONLY)
    print(  # the measured imbalance, for the record (pytest -s)
        f"\nsidecar gauges: {with_gauges}, fraction {with_gauges.fraction:.3f}"
        f"\nvLLM metrics only: {vllm_only}, fraction {vllm_only.fraction:.3f}"
    )
    assert with_gauges.queued_beside_idle == 0
    assert with_gauges.max_queue == 0
    # vLLM's numbers do not move (nothing waits inside vLLM), so the router rotates, every
    # long request lands on one pod, and it queues there while the others idle.
    assert vllm_only.per_pod_requests == [10, 10, 10]
    assert vllm_only.max_queue >= 1
    assert vllm_only.fraction > 0.1
