"""serve.proxy: one inspected request through the pipeline, with a real sidecar in front of
the stand-in on 127.0.0.1: the body read bounded, the price and decision on the answer, the
reservation released on every ending, and each failure's reason."""

from __future__ import annotations

import asyncio
import gzip
from collections.abc import AsyncIterator

import aiohttp
import orjson
import pytest

from sidecar.admission.decision import REASON_DECISIONS, Decision, Reason
from sidecar.errors import (
    BodyTooLargeError,
    EngineSaturatedError,
    ImageTooLargeError,
    InvalidRequestError,
    LargerThanBudgetError,
    OverloadedError,
    QueueFullError,
    SidecarError,
    UpstreamTimeoutError,
)
from sidecar.images.remote import RemoteImageFetchError, RemoteImageRefusedError
from sidecar.serve.proxy import reason_for
from sidecar.standin import StandinServer
from tests.support.imaging import chat_with_images, jpeg_uri
from tests.support.proxy_helpers import (
    DECISION,
    KV,
    fault,
    ledger_is_idle,
    post,
    url_of,
)
from tests.support.raw_http import RawConnection, request_head
from tests.support.sidecars import SidecarFactory
from tests.support.waiting import eventually


@pytest.mark.parametrize(
    ("error", "reason"),
    [
        (BodyTooLargeError("x"), Reason.BODY_TOO_LARGE),
        (EngineSaturatedError("x", retry_after_seconds=1), Reason.ENGINE_SATURATED),
        (QueueFullError("x", retry_after_seconds=1), Reason.QUEUE_FULL),
        (OverloadedError("x", retry_after_seconds=1), Reason.QUEUE_TIMEOUT),
        (LargerThanBudgetError("x"), Reason.LARGER_THAN_KV_BUDGET),
        (UpstreamTimeoutError("x"), Reason.UPSTREAM_ERROR),
        (RemoteImageRefusedError("x"), Reason.REMOTE_IMAGE),
        (RemoteImageFetchError("x"), Reason.REMOTE_IMAGE),
        (ImageTooLargeError("x"), Reason.INVALID_IMAGE),
        (InvalidRequestError("x"), Reason.INVALID_BODY),
    ],
    ids=lambda value: type(value).__name__ if isinstance(value, SidecarError) else str(value),
)
def test_reason_for_names_each_failure_as_the_log_and_metrics_count_it(
    error: SidecarError, reason: Reason
) -> None:
    assert reason_for(error) is reason


def _error_classes(root: type[SidecarError]) -> list[type[SidecarError]]:
    return [root, *[c for sub in root.__subclasses__() for c in _error_classes(sub)]]


def test_every_error_class_names_a_reason_a_refusal_may_carry() -> None:
    # Every module that raises one is loaded by the time the proxy serves (this file imports
    # it): a class whose reason is not a Reason would turn its 4xx into a 500.
    for error_class in _error_classes(SidecarError):
        reason = Reason(error_class.reason)
        assert Decision.REJECT in REASON_DECISIONS[reason], error_class


async def test_proxy_forwards_an_admitted_request_with_its_price_and_a_request_id(
    make_sidecar: SidecarFactory, session: aiohttp.ClientSession, standin: StandinServer
) -> None:
    sidecar = await make_sidecar()
    reply = await post(session, sidecar, chat_with_images(jpeg_uri(640, 480)))
    assert reply.status == 200
    assert reply.headers[DECISION] == "admit"
    assert int(reply.headers[KV]) > 0
    (forwarded,) = standin.requests
    assert forwarded.headers["x-request-id"]
    assert orjson.loads(forwarded.body)["messages"][0]["content"][1]["image_url"]["url"] == (
        jpeg_uri(640, 480)
    )
    assert ledger_is_idle(sidecar)


async def test_proxy_refuses_a_compressed_body_with_400(
    make_sidecar: SidecarFactory, session: aiohttp.ClientSession, standin: StandinServer
) -> None:
    sidecar = await make_sidecar()
    body = gzip.compress(orjson.dumps(chat_with_images(jpeg_uri(32, 32))))
    headers = {"Content-Type": "application/json", "Content-Encoding": "gzip"}
    async with session.post(url_of(sidecar), data=body, headers=headers) as response:
        assert response.status == 400
        error = (await response.json())["error"]
    assert "uncompressed" in error["message"]
    assert standin.requests == []


async def test_proxy_refuses_a_body_over_the_limit_with_413_whether_declared_or_streamed(
    make_sidecar: SidecarFactory, session: aiohttp.ClientSession, standin: StandinServer
) -> None:
    sidecar = await make_sidecar(max_body_bytes=1000)
    declared = await post(session, sidecar, chat_with_images(jpeg_uri(64, 64)))
    assert declared.status == 413

    async def chunks() -> AsyncIterator[bytes]:
        for _ in range(20):
            yield b" " * 100

    async with session.post(url_of(sidecar), data=chunks()) as response:  # chunked: no length
        assert response.status == 413
        assert "SIDECAR_MAX_BODY_BYTES" in (await response.json())["error"]["message"]
    assert standin.requests == []
    assert ledger_is_idle(sidecar)


async def test_proxy_answers_408_when_the_body_does_not_arrive_in_time(
    make_sidecar: SidecarFactory,
) -> None:
    sidecar = await make_sidecar(client_read_timeout_seconds=0.2)
    connection = await RawConnection.open(sidecar.port)
    try:
        await connection.send(request_head("/v1/chat/completions", content_length=100) + b"{")
        reply = await connection.reply(timeout_seconds=3)
    finally:
        await connection.close()
    assert reply.status == 408
    assert "SIDECAR_CLIENT_READ_TIMEOUT_SECONDS" in reply.json()["error"]["message"]


async def test_proxy_releases_the_reservation_when_the_client_leaves_mid_answer(
    make_sidecar: SidecarFactory, session: aiohttp.ClientSession
) -> None:
    sidecar = await make_sidecar(kv_budget_bytes="1GiB")
    body = chat_with_images(jpeg_uri(64, 64), stream=True)
    async with session.post(url_of(sidecar), json=body, headers=fault("chunk-delay=0.2")) as r:
        assert r.status == 200
        await r.content.readline()
        assert not ledger_is_idle(sidecar)
    await eventually(lambda: ledger_is_idle(sidecar))


async def test_proxy_makes_a_request_wait_for_budget_and_then_serves_it(
    make_sidecar: SidecarFactory, session: aiohttp.ClientSession
) -> None:
    probe = await make_sidecar()
    one_request = int((await post(session, probe, chat_with_images(jpeg_uri(64, 64)))).headers[KV])
    sidecar = await make_sidecar(kv_budget_bytes=one_request, queue_timeout_seconds=5)
    body = chat_with_images(jpeg_uri(64, 64))
    first = asyncio.ensure_future(post(session, sidecar, body, headers=fault("delay=0.3")))
    await eventually(lambda: not ledger_is_idle(sidecar))
    second = await post(session, sidecar, body)
    assert ((await first).status, second.status) == (200, 200)
    assert second.headers[DECISION] == "wait"
    assert ledger_is_idle(sidecar)
