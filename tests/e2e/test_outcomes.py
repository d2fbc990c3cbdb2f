"""Every outcome a request can get, produced for real, and each one's series at zero before.

Each scenario below drives a real sidecar (in front of the stand-in) into one outcome, the way
that outcome happens in production: a budget broken, a queue held, vLLM saturated or failing,
a client that leaves. The test reads the outcome from the request's own log line, then checks
that its ``vlm_sidecar_requests_total`` series existed at zero before the request (dashboards
and alerts see a 0, not a missing series) and counts 1 after. A last test checks that the
scenarios and the outcomes the metrics declare (``VALID_OUTCOMES``) are the same set, so an
outcome the code can produce but the metrics forgot fails here, and so does a declared one
that nothing produces.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import orjson
import pytest
from structlog.testing import capture_logs

from sidecar.admission.decision import Decision, Reason
from sidecar.observe.labels import VALID_OUTCOMES
from sidecar.routes import Route
from sidecar.serve.keys import LEDGER, METRICS, SATURATION
from sidecar.serve.server import RunningSidecar
from sidecar.standin import StandinServer
from tests.support.imaging import chat, chat_with_images, data_uri, image_url_part, jpeg_uri
from tests.support.proxy_helpers import expected, fault, post
from tests.support.raw_http import RawConnection, request_head
from tests.support.sidecars import SidecarFactory
from tests.support.waiting import eventually

CHAT = Route.CHAT.label
TEXT = chat(max_tokens=64)
TEXT_KV = expected(output_tokens=64)[2]
PHOTO = jpeg_uri(1600, 1200)
Drive = Callable[[RunningSidecar, StandinServer, aiohttp.ClientSession], Awaitable[None]]


@dataclass(frozen=True)
class Scenario:
    decision: Decision
    reason: Reason
    settings: dict[str, Any] = field(default_factory=dict)
    body: dict[str, Any] | None = None  # None: the scenario drives the requests itself
    drive: Drive | None = None


async def _hold_budget_then_release(
    sidecar: RunningSidecar, standin: StandinServer, session: aiohttp.ClientSession
) -> None:
    holder = asyncio.create_task(post(session, sidecar, TEXT, headers=fault("delay=0.6")))
    await eventually(lambda: sidecar.app[LEDGER].inflight_requests == 1)
    await post(session, sidecar, TEXT)  # waits for the holder, then goes
    await holder


async def _saturated_then_free(
    sidecar: RunningSidecar, standin: StandinServer, session: aiohttp.ClientSession
) -> None:
    await eventually(lambda: sidecar.app[SATURATION].saturated)
    pending = asyncio.create_task(post(session, sidecar, TEXT))
    await asyncio.sleep(0.2)
    standin.set_load(kv_cache_usage_perc=0.1)
    await pending


async def _saturated_throughout(
    sidecar: RunningSidecar, standin: StandinServer, session: aiohttp.ClientSession
) -> None:
    await eventually(lambda: sidecar.app[SATURATION].saturated)
    await post(session, sidecar, TEXT)


async def _queue_times_out(
    sidecar: RunningSidecar, standin: StandinServer, session: aiohttp.ClientSession
) -> None:
    holder = asyncio.create_task(post(session, sidecar, TEXT, headers=fault("delay=2")))
    await eventually(lambda: sidecar.app[LEDGER].inflight_requests == 1)
    await post(session, sidecar, TEXT)  # the queue timeout is 1 s
    await holder


async def _queue_full(
    sidecar: RunningSidecar, standin: StandinServer, session: aiohttp.ClientSession
) -> None:
    holder = asyncio.create_task(post(session, sidecar, TEXT, headers=fault("delay=1")))
    ledger = sidecar.app[LEDGER]
    await eventually(lambda: ledger.inflight_requests == 1)
    queued = asyncio.create_task(post(session, sidecar, TEXT))
    await eventually(lambda: ledger.queue_depth == 1)
    await post(session, sidecar, TEXT)  # the queue holds one
    await asyncio.gather(holder, queued)


async def _shed(
    sidecar: RunningSidecar, standin: StandinServer, session: aiohttp.ClientSession
) -> None:
    holder = asyncio.create_task(post(session, sidecar, TEXT, headers=fault("delay=0.5")))
    await eventually(lambda: sidecar.app[LEDGER].inflight_requests == 1)
    await post(session, sidecar, TEXT, headers={"x-gateway-inference-objective": "batch"})
    await holder


def _leaves_after(body: dict[str, Any], *, queued: bool = False) -> Drive:
    """A client that sends ``body`` and leaves while vLLM (or the queue) holds it."""

    async def drive(
        sidecar: RunningSidecar, standin: StandinServer, session: aiohttp.ClientSession
    ) -> None:
        ledger = sidecar.app[LEDGER]
        holder = None
        if queued:
            holder = asyncio.create_task(post(session, sidecar, TEXT, headers=fault("delay=1")))
            await eventually(lambda: ledger.inflight_requests == 1)
        task = asyncio.create_task(post(session, sidecar, body, headers=fault("hang")))
        if queued:
            await eventually(lambda: ledger.queue_depth == 1)
        else:
            await eventually(lambda: ledger.inflight_requests == 1)
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        await eventually(lambda: ledger.inflight_requests == (1 if queued else 0))
        if holder is not None:
            await holder

    return drive


async def _leaves_mid_upload(
    sidecar: RunningSidecar, standin: StandinServer, session: aiohttp.ClientSession
) -> None:
    connection = await RawConnection.open(sidecar.port)
    body = orjson.dumps(TEXT)
    await connection.send(request_head("/v1/chat/completions", content_length=len(body) + 100))
    await connection.send(body)
    await asyncio.sleep(0.1)
    await connection.close()
    await asyncio.sleep(0.2)


DOWNSCALE = {"over_budget_action": "downscale"}
SCENARIOS: dict[str, Scenario] = {
    "admit": Scenario(Decision.ADMIT, Reason.WITHIN_BUDGET, body=TEXT),
    "wait-for-kv": Scenario(
        Decision.WAIT, Reason.KV_BUDGET_FULL, {"kv_budget_bytes": TEXT_KV},
        drive=_hold_budget_then_release,
    ),
    "wait-for-engine": Scenario(
        Decision.WAIT, Reason.ENGINE_SATURATED,
        {"saturation_kv_usage": 0.9, "engine_poll_seconds": 0.05}, drive=_saturated_then_free,
    ),
    **{
        f"{verb}-{reason.value}": Scenario(
            Decision.DOWNSCALE if verb == "downscale" else Decision.REJECT,
            reason,
            {setting: value, **(DOWNSCALE if verb == "downscale" else {})},
            body=chat_with_images(PHOTO, max_tokens=64),
        )
        for verb in ("downscale", "reject")
        for reason, setting, value in (
            (Reason.MAX_IMAGE_PIXELS, "max_image_pixels", 1_000_000),
            (Reason.MAX_IMAGE_TOKENS, "max_image_tokens", 1_000),
            (Reason.MAX_REQUEST_VISUAL_TOKENS, "max_request_visual_tokens", 1_000),
            (Reason.MAX_REQUEST_PROMPT_TOKENS, "max_request_prompt_tokens", 1_200),
            (Reason.MAX_REQUEST_KV_BYTES, "max_request_kv_bytes", "64MiB"),
        )
    },
    "reject-max_images_per_request": Scenario(
        Decision.REJECT, Reason.MAX_IMAGES_PER_REQUEST, {"max_images_per_request": 1},
        body=chat_with_images(PHOTO, PHOTO),
    ),
    "reject-larger_than_kv_budget": Scenario(
        Decision.REJECT, Reason.LARGER_THAN_KV_BUDGET, {"kv_budget_bytes": 1024}, body=TEXT
    ),
    "reject-queue_timeout": Scenario(
        Decision.REJECT, Reason.QUEUE_TIMEOUT,
        {"kv_budget_bytes": TEXT_KV, "queue_timeout_seconds": 1}, drive=_queue_times_out,
    ),
    "reject-queue_full": Scenario(
        Decision.REJECT, Reason.QUEUE_FULL,
        {"kv_budget_bytes": TEXT_KV, "max_queue_depth": 1}, drive=_queue_full,
    ),
    "reject-shed": Scenario(
        Decision.REJECT, Reason.SHED,
        {"kv_budget_bytes": TEXT_KV, "objective_priorities": "batch=-1"}, drive=_shed,
    ),
    "reject-engine_saturated": Scenario(
        Decision.REJECT, Reason.ENGINE_SATURATED,
        {"saturation_kv_usage": 0.9, "engine_poll_seconds": 0.05, "queue_timeout_seconds": 1},
        drive=_saturated_throughout,
    ),
    "reject-invalid_body": Scenario(Decision.REJECT, Reason.INVALID_BODY, body={"messages": 3}),
    "reject-invalid_image": Scenario(
        Decision.REJECT, Reason.INVALID_IMAGE,
        body=chat(image_url_part(data_uri(b"not an image at all"))),
    ),
    "reject-remote_image": Scenario(
        Decision.REJECT, Reason.REMOTE_IMAGE, {"remote_images": "reject"},
        body=chat_with_images("https://example.test/cat.jpg"),
    ),
    "reject-body_too_large": Scenario(
        Decision.REJECT, Reason.BODY_TOO_LARGE, {"max_body_bytes": 100}, body=TEXT
    ),
    "reject-upstream_error": Scenario(
        Decision.REJECT, Reason.UPSTREAM_ERROR, {"upstream_url": "http://127.0.0.1:9"}, body=TEXT
    ),
    "admit-then-client-leaves": Scenario(
        Decision.ADMIT, Reason.CLIENT_DISCONNECT, drive=_leaves_after(TEXT)
    ),
    "wait-then-client-leaves": Scenario(
        Decision.WAIT, Reason.CLIENT_DISCONNECT, {"kv_budget_bytes": TEXT_KV},
        drive=_leaves_after(TEXT, queued=True),
    ),
    "downscale-then-client-leaves": Scenario(
        Decision.DOWNSCALE, Reason.CLIENT_DISCONNECT, {"max_image_tokens": 1_000, **DOWNSCALE},
        drive=_leaves_after(chat_with_images(PHOTO, max_tokens=64)),
    ),
    "reject-client-leaves-mid-upload": Scenario(
        Decision.REJECT, Reason.CLIENT_DISCONNECT, drive=_leaves_mid_upload
    ),
}  # fmt: skip


def _outcomes_at_zero(sidecar: RunningSidecar) -> set[tuple[str, str]]:
    """(decision, reason) of every chat requests_total series that exists, all at zero."""
    found = set()
    for family in sidecar.registry.collect():
        for sample in family.samples:
            if sample.name == "vlm_sidecar_requests_total" and sample.labels["route"] == CHAT:
                assert sample.value == 0
                found.add((sample.labels["decision"], sample.labels["reason"]))
    return found


@pytest.mark.parametrize("name", list(SCENARIOS))
async def test_outcome_is_recorded_on_a_series_that_existed_at_zero(
    name: str,
    make_sidecar: SidecarFactory,
    standin: StandinServer,
    session: aiohttp.ClientSession,
) -> None:
    scenario = SCENARIOS[name]
    if "saturation_kv_usage" in scenario.settings:
        standin.set_load(kv_cache_usage_perc=0.99)
    sidecar = await make_sidecar(**scenario.settings)
    at_zero = _outcomes_at_zero(sidecar)
    with capture_logs() as logs:
        if scenario.drive is not None:
            await scenario.drive(sidecar, standin, session)
        else:
            assert scenario.body is not None
            await post(session, sidecar, scenario.body)
        await asyncio.sleep(0.05)
    outcomes = [
        (line["decision"], line["reason"])
        for line in logs
        if line.get("event") == "request.finished"
    ]
    wanted = (scenario.decision.value, scenario.reason.value)
    assert wanted in outcomes, outcomes
    assert wanted in at_zero, f"{wanted} had no series before its first request"
    labels = {"model": sidecar.app[METRICS].model, "route": CHAT}
    count = sidecar.registry.get_sample_value(
        "vlm_sidecar_requests_total",
        {**labels, "decision": wanted[0], "reason": wanted[1]},
    )
    assert count == outcomes.count(wanted)


def test_outcome_scenarios_cover_exactly_the_outcomes_the_metrics_declare() -> None:
    produced = {(s.decision, s.reason) for s in SCENARIOS.values()}
    assert produced == set(VALID_OUTCOMES)
