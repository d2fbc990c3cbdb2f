"""engine.counts: an image's cost from vLLM's ``/tokenize``, as the count with it minus the
count without it; a 400 is vLLM refusing the size, anything else no answer."""

from __future__ import annotations

from collections.abc import AsyncIterator

import aiohttp
import pytest
from aiohttp import web

from sidecar.cost.engine_prices import EngineCount, EngineCountUnavailable
from sidecar.engine.counts import CALIBRATION_HEADER, TokenizeCounter
from sidecar.profiles import load_profile
from sidecar.standin import StandinConfig, StandinServer, run_standin
from tests.support.engine_counts import counting_images_by
from tests.support.sidecars import QWEN

RULE = load_profile(QWEN).vision


@pytest.fixture
async def engine() -> AsyncIterator[StandinServer]:
    async with run_standin(StandinConfig(prompt_tokens_fn=counting_images_by(RULE))) as server:
        yield server


@pytest.fixture
async def session() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as client:
        yield client


@pytest.mark.parametrize(("width", "height"), [(32, 32), (1920, 1080), (4032, 3024), (2048, 32)])
async def test_the_count_is_the_images_prompt_tokens(
    engine: StandinServer, session: aiohttp.ClientSession, width: int, height: int
) -> None:
    counter = TokenizeCounter(session, engine.url, timeout_seconds=5)
    count = await counter.count(width, height)
    assert count == EngineCount(RULE.image_tokens(width, height).prompt_tokens)


async def test_calls_say_they_are_the_sidecars_own(
    engine: StandinServer, session: aiohttp.ClientSession
) -> None:
    await TokenizeCounter(session, engine.url, timeout_seconds=5).count(640, 480)
    assert engine.requests == []
    assert [r.path for r in engine.calibrations] == ["/tokenize", "/tokenize"]
    assert all(r.headers[CALIBRATION_HEADER] == "1" for r in engine.calibrations)


async def test_the_chat_without_an_image_is_counted_once(
    engine: StandinServer, session: aiohttp.ClientSession
) -> None:
    counter = TokenizeCounter(session, engine.url, timeout_seconds=5)
    await counter.count(640, 480)
    await counter.count(800, 600)
    assert len(engine.calibrations) == 3
    counter.forget()
    await counter.count(800, 600)
    assert len(engine.calibrations) == 5


async def test_a_size_vllm_refuses_is_its_refusal_in_its_words(
    engine: StandinServer, session: aiohttp.ClientSession
) -> None:
    count = await TokenizeCounter(session, engine.url, timeout_seconds=5).count(20_000, 28)
    assert count.prompt_tokens is None
    assert count.refusal is not None
    assert "aspect ratio" in count.refusal


async def test_an_engine_without_tokenize_gives_no_answer(session: aiohttp.ClientSession) -> None:
    app = web.Application()
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        counter = TokenizeCounter(session, f"http://127.0.0.1:{port}", timeout_seconds=5)
        with pytest.raises(EngineCountUnavailable, match="404"):
            await counter.count(640, 480)
    finally:
        await runner.cleanup()


async def test_an_engine_that_is_down_gives_no_answer(session: aiohttp.ClientSession) -> None:
    counter = TokenizeCounter(session, "http://127.0.0.1:9", timeout_seconds=2)
    with pytest.raises(EngineCountUnavailable, match=r"Connect"):
        await counter.count(640, 480)
