"""Closing the loop with vLLM: discovery, the auto budget, saturation, forced stream usage."""

from __future__ import annotations

import asyncio
import socket

import aiohttp
import orjson
from aiohttp import web
from structlog.testing import capture_logs

from sidecar.serve.keys import BUDGETS, ENGINE, LEDGER, SATURATION
from sidecar.serve.server import RunningSidecar
from sidecar.standin import StandinConfig, StandinServer, run_standin, start_standin
from tests.support.imaging import chat_with_images, jpeg_uri
from tests.support.sidecars import MODEL_ALIAS, QWEN, SidecarFactory
from tests.support.waiting import eventually

QWEN_KV_BYTES_PER_TOKEN = 57_344  # Qwen2.5-VL-7B, bf16


async def test_auto_budget_follows_the_engines_pool_and_its_restart(
    make_sidecar: SidecarFactory, standin: StandinServer
) -> None:
    standin.set_cache_config(num_gpu_blocks=1000, block_size=16)
    sidecar = await make_sidecar(kv_budget_bytes="auto:0.5", engine_poll_seconds=0.05)
    expected = int(1000 * 16 * QWEN_KV_BYTES_PER_TOKEN * 0.5)
    await eventually(lambda: sidecar.app[LEDGER].total_bytes == expected, timeout_seconds=5)
    standin.set_cache_config(num_gpu_blocks=3000)
    await eventually(lambda: sidecar.app[LEDGER].total_bytes == 3 * expected, timeout_seconds=5)
    assert sidecar.app[BUDGETS].current.kv_budget_bytes == 3 * expected


async def test_discovery_waits_for_an_engine_that_starts_late(make_sidecar: SidecarFactory) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    sidecar = await make_sidecar(
        upstream_url=f"http://127.0.0.1:{port}", kv_budget_bytes="auto", engine_poll_seconds=0.05
    )
    await asyncio.sleep(0.3)
    assert sidecar.app[LEDGER].total_bytes == 0
    late = await start_standin(StandinConfig(num_gpu_blocks=500), port=port)
    try:
        await eventually(
            lambda: sidecar.app[LEDGER].total_bytes == 500 * 16 * 57_344, timeout_seconds=5
        )
    finally:
        await late.close()


async def test_context_length_from_vllm_becomes_the_default_prompt_budget(
    make_sidecar: SidecarFactory, standin: StandinServer, session: aiohttp.ClientSession
) -> None:
    standin.set_cache_config(max_model_len=4096)
    sidecar = await make_sidecar(engine_poll_seconds=0.05)
    await eventually(
        lambda: sidecar.app[BUDGETS].current.max_request_prompt_tokens == 4096, timeout_seconds=5
    )
    url = f"http://127.0.0.1:{sidecar.port}/v1/chat/completions"
    async with session.post(
        url, json=chat_with_images(jpeg_uri(1920, 1080), jpeg_uri(1920, 1080))
    ) as r:
        assert r.status == 400
        assert "SIDECAR_MAX_REQUEST_PROMPT_TOKENS is 4,096" in (await r.json())["error"]["message"]
    assert standin.requests == []


async def _post_chat(
    session: aiohttp.ClientSession, sidecar: RunningSidecar
) -> aiohttp.ClientResponse:
    url = f"http://127.0.0.1:{sidecar.port}/v1/chat/completions"
    response = await session.post(url, json=chat_with_images(jpeg_uri(64, 64), max_tokens=4))
    await response.read()
    return response


async def test_saturated_engine_holds_new_requests_until_it_has_room(
    make_sidecar: SidecarFactory, standin: StandinServer, session: aiohttp.ClientSession
) -> None:
    standin.set_load(kv_cache_usage_perc=0.99)
    sidecar = await make_sidecar(saturation_kv_usage=0.95, engine_poll_seconds=0.05)
    await eventually(lambda: sidecar.app[SATURATION].saturated, timeout_seconds=5)
    pending = asyncio.create_task(_post_chat(session, sidecar))
    await asyncio.sleep(0.2)
    assert not pending.done()
    assert standin.requests == []
    standin.set_load(kv_cache_usage_perc=0.5)
    response = await asyncio.wait_for(pending, 5)
    assert response.status == 200
    assert response.headers["x-vlm-sidecar-decision"] == "wait"


async def test_saturated_engine_answers_429_after_the_queue_timeout(
    make_sidecar: SidecarFactory, standin: StandinServer, session: aiohttp.ClientSession
) -> None:
    standin.set_load(num_requests_waiting=50)
    sidecar = await make_sidecar(
        saturation_waiting_requests=10, engine_poll_seconds=0.05, queue_timeout_seconds=0
    )
    await eventually(lambda: sidecar.app[SATURATION].saturated, timeout_seconds=5)
    response = await _post_chat(session, sidecar)
    assert response.status == 429
    assert "Retry-After" in response.headers
    assert standin.requests == []


FIXED_EVENTS = [
    b'data: {"id":"c1","choices":[{"index":0,"delta":{"content":"Hi"}}]}\n\n',
    b'data: {"id":"c1","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\n',
]
USAGE_EVENT = (
    b'data: {"id":"c1","choices":[],"usage":{"prompt_tokens":77,"total_tokens":78,'
    b'"completion_tokens":1}}\n\n'
)
DONE_EVENT = b"data: [DONE]\n\n"


async def test_forced_stream_usage_is_read_then_hidden_from_the_client(
    make_sidecar: SidecarFactory, session: aiohttp.ClientSession
) -> None:
    received: list[dict[str, object]] = []

    async def chat(request: web.Request) -> web.StreamResponse:
        body = await request.json()
        received.append(body)
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        events = [*FIXED_EVENTS]
        if body.get("stream_options", {}).get("include_usage"):
            events.append(USAGE_EVENT)
        for event in [*events, DONE_EVENT]:
            await response.write(event[:10])
            await response.write(event[10:])
        await response.write_eof()
        return response

    app = web.Application()
    app.router.add_post("/v1/chat/completions", chat)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    try:
        sidecar = await make_sidecar(
            upstream_url=f"http://127.0.0.1:{port}", force_stream_usage=True, engine_poll_seconds=0
        )
        url = f"http://127.0.0.1:{sidecar.port}/v1/chat/completions"
        with capture_logs() as logs:
            async with session.post(
                url, json=chat_with_images(stream=True, max_tokens=5)
            ) as response:
                client_bytes = await response.read()
        assert received[0]["stream_options"] == {"include_usage": True}
        assert client_bytes == b"".join([*FIXED_EVENTS, DONE_EVENT])
        finished = next(e for e in logs if e["event"] == "request.finished")
        assert finished["observed_prompt_tokens"] == 77
    finally:
        await runner.cleanup()


async def test_stream_usage_the_client_asked_for_is_left_alone(
    make_sidecar: SidecarFactory, standin: StandinServer, session: aiohttp.ClientSession
) -> None:
    sidecar = await make_sidecar(force_stream_usage=True)
    body = chat_with_images(stream=True, stream_options={"include_usage": True}, max_tokens=3)
    raw = orjson.dumps(body)
    url = f"http://127.0.0.1:{sidecar.port}/v1/chat/completions"
    headers = {"Content-Type": "application/json"}
    async with session.post(url, data=raw, headers=headers) as response:
        text = await response.read()
    assert standin.requests[-1].body == raw
    assert b'"choices":[],"usage"' in text


async def test_discovered_engine_facts_are_exported(
    make_sidecar: SidecarFactory, standin: StandinServer
) -> None:
    standin.set_cache_config(num_gpu_blocks=1000, block_size=16, max_model_len=8192)
    standin.set_load(kv_cache_usage_perc=0.5, num_requests_waiting=3)
    sidecar = await make_sidecar(engine_poll_seconds=0.05)
    await eventually(lambda: sidecar.app[ENGINE].facts is not None, timeout_seconds=5)
    registry = sidecar.registry
    labels = {"model": QWEN}
    assert registry.get_sample_value("vlm_sidecar_engine_kv_capacity_tokens", labels) == 16_000
    assert registry.get_sample_value("vlm_sidecar_engine_max_model_len", labels) == 8192
    assert registry.get_sample_value("vlm_sidecar_engine_kv_cache_usage", labels) == 0.5
    assert registry.get_sample_value("vlm_sidecar_engine_requests_waiting", labels) == 3
    assert registry.get_sample_value("vlm_sidecar_engine_saturated", labels) == 0


async def test_prediction_error_is_split_into_image_and_text_parts(
    make_sidecar: SidecarFactory, session: aiohttp.ClientSession
) -> None:
    image_tokens = 391  # what vLLM would report for the 640x480 image below
    config = StandinConfig(
        model_aliases=(MODEL_ALIAS,),
        enable_prompt_tokens_details=True,
        image_tokens_fn=lambda body: image_tokens + 10,
        prompt_tokens_fn=lambda body: 500,
    )
    async with run_standin(config) as upstream:
        sidecar = await make_sidecar(upstream_url=upstream.url, engine_poll_seconds=0)
        url = f"http://127.0.0.1:{sidecar.port}/v1/chat/completions"
        with capture_logs() as logs:
            async with session.post(
                url, json=chat_with_images(jpeg_uri(640, 480), max_tokens=4)
            ) as r:
                predicted = int(r.headers["x-vlm-sidecar-prompt-tokens"])
    finished = next(e for e in logs if e["event"] == "request.finished")
    assert finished["image_tokens_error"] == 10
    assert finished["text_tokens_error"] == 500 - predicted - 10
    registry = sidecar.registry
    labels = {"model": QWEN, "route": "chat_completions"}
    # Histograms with negative buckets have no _sum: the 10 lands in the (8, 16] bucket.
    name = "vlm_sidecar_image_tokens_prediction_error"
    assert registry.get_sample_value(f"{name}_bucket", {**labels, "le": "8.0"}) == 0
    assert registry.get_sample_value(f"{name}_bucket", {**labels, "le": "16.0"}) == 1
    text_name = "vlm_sidecar_text_tokens_prediction_error"
    assert registry.get_sample_value(f"{text_name}_count", labels) == 1


async def test_kv_is_priced_in_vllms_block_size_unless_the_operator_set_one(
    make_sidecar: SidecarFactory, standin: StandinServer, session: aiohttp.ClientSession
) -> None:
    standin.set_cache_config(block_size=128)  # vLLM's CPU backend chooses 128
    with capture_logs() as logs:
        sidecar = await make_sidecar(engine_poll_seconds=0.05)
        await eventually(lambda: sidecar.app[ENGINE].kv.block_size_tokens == 128, timeout_seconds=5)
    changed = next(e for e in logs if e["event"] == "engine.block_size")
    assert (changed["block_size_tokens"], changed["previous_block_size_tokens"]) == (128, 16)
    labels = {"model": QWEN}
    assert sidecar.registry.get_sample_value("vlm_sidecar_kv_block_size_tokens", labels) == 128
    response = await _post_chat(session, sidecar)
    prompt_tokens = int(response.headers["x-vlm-sidecar-prompt-tokens"])
    held_blocks = -(-(prompt_tokens + 4) // 128)
    assert int(response.headers["x-vlm-sidecar-kv-bytes"]) == (
        held_blocks * 128 * QWEN_KV_BYTES_PER_TOKEN
    )
    pinned = await make_sidecar(engine_poll_seconds=0.05, block_size_tokens=32)
    await eventually(lambda: pinned.app[ENGINE].facts is not None, timeout_seconds=5)
    assert pinned.app[ENGINE].kv.block_size_tokens == 32
    assert pinned.registry.get_sample_value("vlm_sidecar_kv_block_size_tokens", labels) == 32


async def test_output_is_held_only_up_to_vllms_context(
    make_sidecar: SidecarFactory, standin: StandinServer, session: aiohttp.ClientSession
) -> None:
    standin.set_cache_config(max_model_len=1024)
    sidecar = await make_sidecar(engine_poll_seconds=0.05, default_output_tokens=4096)
    await eventually(lambda: sidecar.app[ENGINE].context_tokens == 1024, timeout_seconds=5)
    url = f"http://127.0.0.1:{sidecar.port}/v1/chat/completions"
    # No max_tokens: vLLM generates up to the end of its context, not the 4,096 assumed.
    async with session.post(url, json=chat_with_images(jpeg_uri(64, 64))) as response:
        assert response.status == 200
        kv_bytes = int(response.headers["x-vlm-sidecar-kv-bytes"])
    assert kv_bytes == 1024 * QWEN_KV_BYTES_PER_TOKEN
