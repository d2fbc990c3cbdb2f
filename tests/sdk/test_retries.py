"""The SDKs' retries against the sidecar's two kinds of refusal.

- A request larger than the whole KV budget can never be admitted: 413 with
  ``x-should-retry: false``. Each SDK must send it once and raise, although it may retry.
- A request that waited ``SIDECAR_QUEUE_TIMEOUT_SECONDS`` for budget another request held: 429
  with ``Retry-After``. Each SDK retries it: ``max_retries=2`` is three attempts.

Attempts are counted where they arrive, in the sidecar's ``vlm_sidecar_requests_total``.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable

import aiohttp
import anthropic
import openai
import pytest

from sidecar.serve.keys import LEDGER
from sidecar.serve.server import RunningSidecar
from sidecar.standin import StandinServer
from tests.support.sidecars import QWEN, SidecarFactory
from tests.support.waiting import eventually

# Qwen2.5-VL-7B holds 57,344 KV bytes per token: one request of about 1,050 tokens (60 MB) fits
# in 100 MiB, a second one does not, and one of 4,050 tokens never does.
BUDGET = "100MiB"
FITS_ALONE = 1_000  # max_tokens
NEVER_FITS = 4_000
QUEUE_TIMEOUT_SECONDS = 1
HOLD_SECONDS = 8  # the stand-in's first byte to the request holding the budget
TEXT = "Describe the sky."

Call = Callable[[int], Awaitable[object]]


@pytest.fixture
async def sidecar(make_sidecar: SidecarFactory) -> RunningSidecar:
    return await make_sidecar(
        kv_budget_bytes=BUDGET, queue_timeout_seconds=QUEUE_TIMEOUT_SECONDS, engine_poll_seconds=0
    )


@pytest.fixture
async def calls(sidecar: RunningSidecar) -> AsyncIterator[dict[str, tuple[str, Call]]]:
    """Per SDK: (the route label its requests count under, a call with ``max_tokens``)."""
    base = f"http://127.0.0.1:{sidecar.port}"
    async with (
        openai.AsyncOpenAI(base_url=base + "/v1", api_key="unused", max_retries=2) as oai,
        anthropic.AsyncAnthropic(base_url=base, api_key="unused", max_retries=2) as claude,
    ):

        async def chat(max_tokens: int) -> object:
            return await oai.chat.completions.create(
                model=QWEN, messages=[{"role": "user", "content": TEXT}], max_tokens=max_tokens
            )

        async def responses(max_tokens: int) -> object:
            return await oai.responses.create(model=QWEN, input=TEXT, max_output_tokens=max_tokens)

        async def messages(max_tokens: int) -> object:
            return await claude.messages.create(
                model=QWEN, messages=[{"role": "user", "content": TEXT}], max_tokens=max_tokens
            )

        yield {
            "openai-chat": ("chat_completions", chat),
            "openai-responses": ("responses", responses),
            "anthropic-messages": ("messages", messages),
        }


def _requests(sidecar: RunningSidecar, route: str, decision: str, reason: str) -> float:
    labels = {"model": QWEN, "route": route, "decision": decision, "reason": reason}
    return sidecar.registry.get_sample_value("vlm_sidecar_requests_total", labels) or 0.0


StatusError = type[openai.APIStatusError] | type[anthropic.APIStatusError]
ERRORS: dict[str, tuple[StatusError, StatusError]] = {
    "openai-chat": (openai.APIStatusError, openai.RateLimitError),
    "openai-responses": (openai.APIStatusError, openai.RateLimitError),
    "anthropic-messages": (anthropic.RequestTooLargeError, anthropic.RateLimitError),
}


@pytest.mark.parametrize("sdk", list(ERRORS))
async def test_a_request_that_never_fits_is_sent_once(
    sidecar: RunningSidecar,
    standin: StandinServer,
    calls: dict[str, tuple[str, Call]],
    sdk: str,
) -> None:
    route, call = calls[sdk]
    with pytest.raises(ERRORS[sdk][0]) as caught:
        await call(NEVER_FITS)
    error = caught.value
    assert isinstance(error, openai.APIStatusError | anthropic.APIStatusError)
    assert error.status_code == 413
    assert error.response.headers["x-should-retry"] == "false"
    assert _requests(sidecar, route, "reject", "larger_than_kv_budget") == 1
    assert standin.requests == []


@pytest.mark.parametrize("sdk", list(ERRORS))
async def test_a_request_that_waited_too_long_is_retried(
    sidecar: RunningSidecar,
    standin: StandinServer,
    calls: dict[str, tuple[str, Call]],
    session: aiohttp.ClientSession,
    sdk: str,
) -> None:
    route, call = calls[sdk]
    holder = asyncio.create_task(_hold_the_budget(session, sidecar))
    try:
        await eventually(lambda: sidecar.app[LEDGER].inflight_requests == 1, timeout_seconds=5)
        with pytest.raises(ERRORS[sdk][1]) as caught:
            await call(FITS_ALONE)
        error = caught.value
        assert isinstance(error, openai.APIStatusError | anthropic.APIStatusError)
        assert error.status_code == 429
        assert error.response.headers["Retry-After"] == str(QUEUE_TIMEOUT_SECONDS)
        assert error.response.headers["x-should-retry"] == "true"
        assert _requests(sidecar, route, "reject", "queue_timeout") == 3  # max_retries=2
        assert not holder.done()  # the budget was held all along
    finally:
        holder.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await holder


async def _hold_the_budget(session: aiohttp.ClientSession, sidecar: RunningSidecar) -> None:
    """A request that fits alone and holds its KV while the stand-in delays its answer."""
    body = {
        "model": QWEN,
        "messages": [{"role": "user", "content": TEXT}],
        "max_tokens": FITS_ALONE,
    }
    headers = {"x-standin-fault": f"delay={HOLD_SECONDS}"}
    url = f"http://127.0.0.1:{sidecar.port}/v1/chat/completions"
    async with session.post(url, json=body, headers=headers) as response:
        await response.read()


async def test_a_shed_request_is_retried_after_retry_after_by_the_openai_sdk(
    make_sidecar: SidecarFactory, standin: StandinServer, session: aiohttp.ClientSession
) -> None:
    sidecar = await make_sidecar(
        kv_budget_bytes=BUDGET,
        queue_timeout_seconds=QUEUE_TIMEOUT_SECONDS,
        engine_poll_seconds=0,
        objective_priorities="batch=-1",
    )
    base = f"http://127.0.0.1:{sidecar.port}/v1"
    holder = asyncio.create_task(_hold_the_budget(session, sidecar))
    try:
        await eventually(lambda: sidecar.app[LEDGER].inflight_requests == 1, timeout_seconds=5)
        async with openai.AsyncOpenAI(base_url=base, api_key="unused", max_retries=2) as oai:
            started = asyncio.get_running_loop().time()
            with pytest.raises(openai.RateLimitError) as caught:
                await oai.chat.completions.create(
                    model=QWEN,
                    messages=[{"role": "user", "content": TEXT}],
                    max_tokens=FITS_ALONE,
                    extra_headers={"x-gateway-inference-objective": "batch"},
                )
            elapsed = asyncio.get_running_loop().time() - started
        assert caught.value.response.headers["Retry-After"] == str(QUEUE_TIMEOUT_SECONDS)
        assert caught.value.response.headers["x-should-retry"] == "true"
        assert _requests(sidecar, "chat_completions", "reject", "shed") == 3  # max_retries=2
        # Each attempt is refused at once; the SDK slept Retry-After between them.
        assert elapsed >= 2 * QUEUE_TIMEOUT_SECONDS
        forwarded = [r.headers.get("x-gateway-inference-objective") for r in standin.requests]
        assert "batch" not in forwarded
        assert not holder.done()
    finally:
        holder.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await holder
