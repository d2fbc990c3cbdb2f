"""End to end, ``SIDECAR_MODE=shadow``: predict, label and record, but never act.

The bytes vLLM receives are the client's, whatever the sidecar would have decided; the
headers and the log line say what that would have been; nothing ever waits in the queue.
"""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp
import orjson
import pytest
from structlog.testing import capture_logs

from sidecar.serve.keys import LEDGER
from sidecar.standin import StandinServer
from tests.support.imaging import chat, data_uri, image_url_part, jpeg_uri, messages
from tests.support.proxy_helpers import (
    DECISION,
    MESSAGES,
    expected,
    fault,
    ledger_is_idle,
    post,
    sample,
)
from tests.support.sidecars import SidecarFactory
from tests.support.waiting import eventually

TEXT_ONLY = chat(max_tokens=64)
TEXT_ONLY_KV = expected(output_tokens=64)[2]


@pytest.mark.parametrize(
    ("settings", "body", "decision", "reason"),
    [
        ({"max_image_tokens": 100}, chat(image_url_part(jpeg_uri(640, 480))), "reject",
         "max_image_tokens"),
        ({"max_images_per_request": 1}, chat(*[image_url_part(jpeg_uri(64, 64))] * 2), "reject",
         "max_images_per_request"),
        ({"max_image_tokens": 100, "over_budget_action": "downscale"},
         chat(image_url_part(jpeg_uri(640, 480))), "downscale", "max_image_tokens"),
        ({"max_request_visual_tokens": 100, "over_budget_action": "downscale",
          "downscale_method": "processor_kwargs"},
         chat(image_url_part(jpeg_uri(640, 480))), "downscale", "max_request_visual_tokens"),
        ({"kv_budget_bytes": 1024}, chat(), "reject", "larger_than_kv_budget"),
        ({"remote_images": "reject"}, chat(image_url_part("https://example.test/cat.jpg")),
         "reject", "remote_image"),
        ({}, chat(image_url_part(data_uri(b"not an image"))), "reject", "invalid_image"),
    ],
    ids=["would-reject-tokens", "would-reject-count", "would-downscale-resize",
         "would-downscale-processor-kwargs", "would-reject-never-fits", "would-reject-url",
         "would-reject-bad-image"],
)  # fmt: skip
async def test_shadow_forwards_the_same_bytes_and_labels_the_would_be_decision(
    make_sidecar: SidecarFactory,
    standin: StandinServer,
    session: aiohttp.ClientSession,
    settings: dict[str, Any],
    body: dict[str, Any],
    decision: str,
    reason: str,
) -> None:
    sidecar = await make_sidecar(mode="shadow", **settings)
    raw = orjson.dumps(body)
    with capture_logs() as logs:
        reply = await post(session, sidecar, raw)
    assert standin.requests[-1].body == raw
    if reason == "invalid_image":  # vLLM's own refusal of what it cannot decode, relayed
        assert reply.status == 400, reply.body
        assert reply.json()["error"]["message"].startswith("Failed to load image")
    else:
        assert reply.status == 200, reply.body
        assert "usage" in reply.json()  # vLLM's own answer
    assert reply.headers[DECISION] == decision
    assert reply.headers["x-vlm-sidecar-mode"] == "shadow"
    (line,) = [e for e in logs if e["event"] == "request.finished"]
    assert (line["decision"], line["reason"], line["mode"]) == (decision, reason, "shadow")
    assert line["upstream_status"] == reply.status
    requests = "vlm_sidecar_requests_total"
    assert sample(sidecar, requests, route="chat_completions", decision=decision,
                  reason=reason) == 1  # fmt: skip
    assert sample(sidecar, "vlm_sidecar_downscaled_images_total") == 0
    assert ledger_is_idle(sidecar)


async def test_shadow_prices_what_it_forwards_in_the_headers(
    make_sidecar: SidecarFactory, session: aiohttp.ClientSession
) -> None:
    sidecar = await make_sidecar(mode="shadow", max_image_tokens=100)
    reply = await post(session, sidecar, chat(image_url_part(jpeg_uri(640, 480))))
    assert reply.prediction == expected([(640, 480)])


async def test_shadow_never_queues_when_the_kv_budget_would_be_full(
    make_sidecar: SidecarFactory, standin: StandinServer, session: aiohttp.ClientSession
) -> None:
    sidecar = await make_sidecar(mode="shadow", kv_budget_bytes=TEXT_ONLY_KV)
    ledger = sidecar.app[LEDGER]
    first = asyncio.create_task(post(session, sidecar, TEXT_ONLY, headers=fault("delay=0.3")))
    await eventually(lambda: ledger.inflight_requests == 1)
    second = await post(session, sidecar, TEXT_ONLY)  # answered while the first is in flight
    assert not first.done()
    assert (second.status, second.headers[DECISION]) == (200, "wait")
    assert ledger.queue_depth == 0
    assert (await first).headers[DECISION] == "admit"
    assert len(standin.requests) == 2
    assert ledger_is_idle(sidecar)


async def test_shadow_keeps_vllms_anthropic_answers_on_messages(
    make_sidecar: SidecarFactory, standin: StandinServer, session: aiohttp.ClientSession
) -> None:
    sidecar = await make_sidecar(mode="shadow", max_request_visual_tokens=1)
    body = messages({"type": "image", "source": {"type": "url", "url": "https://x.test/a.png"}})
    reply = await post(session, sidecar, body, MESSAGES)
    assert reply.status == 200
    assert reply.json()["type"] == "message"
    assert reply.headers[DECISION] == "reject"
    assert standin.requests[-1].body == orjson.dumps(body)


async def test_shadow_still_refuses_a_body_over_max_body_bytes(
    make_sidecar: SidecarFactory, standin: StandinServer, session: aiohttp.ClientSession
) -> None:
    """The body limit protects the sidecar's own memory; it is not a prediction."""
    sidecar = await make_sidecar(mode="shadow", max_body_bytes=1024)
    reply = await post(session, sidecar, chat(text="x" * 2048))
    assert reply.status == 413
    assert standin.requests == []


async def test_shadow_headers_price_the_request_as_forwarded_not_the_would_be_downscale(
    make_sidecar: SidecarFactory, standin: StandinServer, session: aiohttp.ClientSession
) -> None:
    sidecar = await make_sidecar(
        mode="shadow", max_image_tokens=1000, over_budget_action="downscale"
    )
    reply = await post(session, sidecar, chat(image_url_part(jpeg_uri(4032, 3024))))
    assert reply.headers[DECISION] == "downscale"
    assert reply.headers["x-vlm-sidecar-visual-tokens"] == "15552"  # the original photo's cost


async def test_shadow_downscale_log_line_agrees_with_the_headers_and_the_metrics(
    make_sidecar: SidecarFactory, session: aiohttp.ClientSession
) -> None:
    sidecar = await make_sidecar(
        mode="shadow", max_image_tokens=1024, over_budget_action="downscale"
    )
    with capture_logs() as logs:
        reply = await post(session, sidecar, chat(image_url_part(jpeg_uri(4032, 3024))))
    assert reply.status == 200
    assert reply.headers[DECISION] == "downscale"
    (line,) = [e for e in logs if e["event"] == "request.finished"]
    sent = int(reply.headers["x-vlm-sidecar-prompt-tokens"])
    assert sent == expected([(4032, 3024)])[1]  # what vLLM got: the photo as sent
    assert line["predicted_prompt_tokens"] == sent
    assert line["predicted_kv_bytes"] == int(reply.headers["x-vlm-sidecar-kv-bytes"])
    assert line["images"][0]["size"] == "4032x3024"
    assert line["images_if_downscaled"][0]["tokens"] <= 1024
    assert line["prompt_tokens_error"] == line["observed_prompt_tokens"] - sent
    route = {"route": "chat_completions"}
    assert sample(sidecar, "vlm_sidecar_request_prompt_tokens_sum", **route) == sent
    assert sample(sidecar, "vlm_sidecar_usage_predicted_prompt_tokens_total", **route) == sent
