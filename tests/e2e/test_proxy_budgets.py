"""End to end, budgets and decisions: every ``SIDECAR_*`` budget, admit, downscale, wait, reject.

Expected figures come from ``tests.support.proxy_helpers.expected``: the vision rule and the KV
block arithmetic, written out apart from the sidecar. Downscaled images are read back out of the
body the stand-in received and re-probed, so the promised token count is checked against what
vLLM would really be sent.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from typing import Any

import aiohttp
import orjson
import pytest
from structlog.testing import capture_logs

from sidecar.serve.keys import BUDGETS, LEDGER
from sidecar.standin import StandinServer
from sidecar.text.text_estimate import overhead_for
from tests.support.imaging import (
    anthropic_base64,
    chat,
    data_uri,
    exif_rotated_jpeg,
    image_url_part,
    jpeg_uri,
    messages,
    png_uri,
    responses,
    webp_uri,
)
from tests.support.proxy_helpers import (
    BYTES_PER_TOKEN,
    CHAT,
    DECISION,
    MESSAGES,
    PROFILE,
    RESPONSES,
    RULE,
    Reply,
    expected,
    fault,
    image_uris_in,
    ledger_is_idle,
    mask_images,
    post,
    reprobe,
    sample,
    url_of,
)
from tests.support.sidecars import SidecarFactory
from tests.support.waiting import eventually

MIB = 2**20


def jpeg_parts(*sizes: tuple[int, int]) -> list[dict[str, Any]]:
    return [image_url_part(jpeg_uri(w, h)) for w, h in sizes]


# --- each per-image and per-request budget: admit under it, reject over it ---------------------

BUDGET_CASES = [
    pytest.param({"max_images_per_request": 2}, [(64, 64)] * 2, [(64, 64)] * 3, {},
                 "request carries 3 images; SIDECAR_MAX_IMAGES_PER_REQUEST is 2",
                 id="max-images-per-request"),
    pytest.param({"max_image_pixels": 1_000_000}, [(1000, 1000)], [(1920, 1080)], {},
                 "image 1 of 1 (1920x1080) has 2,073,600 pixels; "
                 "SIDECAR_MAX_IMAGE_PIXELS is 1,000,000", id="max-image-pixels"),
    pytest.param({"max_image_tokens": 1200}, [(1280, 720)], [(1920, 1080)], {},
                 "image 1 of 1 (1920x1080) costs 2,691 tokens; SIDECAR_MAX_IMAGE_TOKENS is 1,200",
                 id="max-image-tokens"),
    pytest.param({"max_request_visual_tokens": 2400}, [(1280, 720)] * 2, [(1280, 720)] * 3, {},
                 "request costs 3,588 visual tokens; SIDECAR_MAX_REQUEST_VISUAL_TOKENS is 2,400",
                 id="max-request-visual-tokens"),
    pytest.param({"max_request_prompt_tokens": 1300}, [(1280, 720)], [(1280, 720), (320, 240)],
                 {}, f"request costs {expected([(1280, 720), (320, 240)])[1]:,} prompt tokens; "
                 "SIDECAR_MAX_REQUEST_PROMPT_TOKENS is 1,300",
                 id="max-request-prompt-tokens"),
    pytest.param({"max_request_kv_bytes": 100 * MIB}, [(640, 480)], [(640, 480)],
                 {"max_tokens": 2048}, "SIDECAR_MAX_REQUEST_KV_BYTES is 100 MiB",
                 id="max-request-kv-bytes"),
]  # fmt: skip


@pytest.mark.parametrize(("settings", "under", "over", "fields", "message"), BUDGET_CASES)
async def test_proxy_admits_under_each_budget_and_rejects_over_it_naming_the_budget(
    make_sidecar: SidecarFactory,
    standin: StandinServer,
    session: aiohttp.ClientSession,
    settings: dict[str, Any],
    under: list[tuple[int, int]],
    over: list[tuple[int, int]],
    fields: dict[str, Any],
    message: str,
) -> None:
    sidecar = await make_sidecar(**settings)
    admitted = await post(session, sidecar, chat(*jpeg_parts(*under)))
    assert admitted.status == 200, admitted.body
    assert admitted.headers[DECISION] == "admit"
    assert admitted.prediction == expected(under)
    forwarded = len(standin.requests)

    rejected = await post(session, sidecar, chat(*jpeg_parts(*over), **fields))
    assert rejected.status == 400, rejected.body
    assert rejected.headers[DECISION] == "reject"
    output_tokens = fields.get("max_tokens", 1024)
    assert rejected.prediction == expected(over, output_tokens=output_tokens)
    error = rejected.json()["error"]
    assert message in error["message"]
    assert (error["type"], error["param"], error["code"]) == ("BadRequestError", None, 400)
    assert len(standin.requests) == forwarded
    assert ledger_is_idle(sidecar)


async def test_proxy_caps_prompt_tokens_at_the_models_context_by_default(
    make_sidecar: SidecarFactory, standin: StandinServer, session: aiohttp.ClientSession
) -> None:
    standin.set_cache_config(max_model_len=128_000)  # vLLM serving the model's full context
    sidecar = await make_sidecar()
    assert sidecar.app[BUDGETS].current.max_request_prompt_tokens == 128_000
    framing = overhead_for(
        PROFILE.architecture.prompt_family
    )  # the estimate's template framing, one message
    room = 128_000 - framing.fixed_tokens - framing.per_message_tokens
    fits = await post(session, sidecar, chat(text="x" * (3 * room)))
    assert fits.status == 200, fits.body
    assert fits.prediction[1] == 128_000
    over = await post(session, sidecar, chat(text="x" * (3 * room + 1)))
    assert over.status == 400
    assert over.json()["error"]["message"] == (
        "request costs 128,001 prompt tokens; SIDECAR_MAX_REQUEST_PROMPT_TOKENS is 128,000"
    )


async def test_proxy_rejects_over_max_images_even_when_downscaling(
    make_sidecar: SidecarFactory, standin: StandinServer, session: aiohttp.ClientSession
) -> None:
    sidecar = await make_sidecar(max_images_per_request=1, over_budget_action="downscale")
    reply = await post(session, sidecar, chat(*jpeg_parts((64, 64), (64, 64))))
    assert reply.status == 400
    assert "SIDECAR_MAX_IMAGES_PER_REQUEST" in reply.json()["error"]["message"]
    assert standin.requests == []


# --- downscale: every budget, every route, every format ----------------------------------------


def forwarded_sizes(standin: StandinServer) -> list[tuple[int, int, str]]:
    return [reprobe(uri) for uri in image_uris_in(orjson.loads(standin.requests[-1].body))]


def assert_costs_exactly_what_was_forwarded(
    reply: Reply, standin: StandinServer, sent: dict[str, Any], **expect: Any
) -> list[tuple[int, int, str]]:
    """The headers equal the cost of the images vLLM got; every other byte is as sent."""
    assert reply.status == 200, reply.body
    assert reply.headers[DECISION] == "downscale"
    sizes = forwarded_sizes(standin)
    tokens = [RULE.image_tokens(w, h).tokens for w, h, _ in sizes]
    assert int(reply.headers["x-vlm-sidecar-visual-tokens"]) == sum(tokens)
    assert reply.prediction == expected([(w, h) for w, h, _ in sizes], **expect)
    assert mask_images(orjson.loads(standin.requests[-1].body)) == mask_images(sent)
    return sizes


DOWNSCALE_CASES = [
    pytest.param({"max_image_pixels": 1_000_000}, [(1920, 1080)], {},
                 lambda p, s: all(w * h <= 1_000_000 for w, h, _ in s), id="max-image-pixels"),
    pytest.param({"max_image_tokens": 1000}, [(1920, 1080), (320, 240)], {},
                 lambda p, s: max(RULE.image_tokens(w, h).tokens for w, h, _ in s) <= 1000,
                 id="max-image-tokens"),
    pytest.param({"max_request_visual_tokens": 2000}, [(1920, 1080)] * 2, {},
                 lambda p, s: p[0] <= 2000, id="max-request-visual-tokens"),
    pytest.param({"max_request_prompt_tokens": 1500}, [(1920, 1080)], {},
                 lambda p, s: p[1] <= 1500, id="max-request-prompt-tokens"),
    pytest.param({"max_request_kv_bytes": 200 * MIB}, [(1920, 1080)], {},
                 lambda p, s: p[2] <= 200 * MIB, id="max-request-kv-bytes"),
]  # fmt: skip


@pytest.mark.parametrize(("settings", "sizes", "fields", "holds"), DOWNSCALE_CASES)
async def test_proxy_downscales_to_fit_each_budget_exactly(
    make_sidecar: SidecarFactory,
    standin: StandinServer,
    session: aiohttp.ClientSession,
    settings: dict[str, Any],
    sizes: list[tuple[int, int]],
    fields: dict[str, Any],
    holds: Any,
) -> None:
    sidecar = await make_sidecar(over_budget_action="downscale", **settings)
    body = chat(*jpeg_parts(*sizes), **fields)
    with capture_logs() as logs:
        reply = await post(session, sidecar, body)
    after = assert_costs_exactly_what_was_forwarded(reply, standin, body)
    assert holds(reply.prediction, after)
    assert sample(sidecar, "vlm_sidecar_downscaled_images_total") >= 1
    (line,) = [e for e in logs if e["event"] == "request.finished"]
    assert (line["decision"], line["reason"]) == ("downscale", next(iter(settings)))
    assert ledger_is_idle(sidecar)


async def test_proxy_downscales_every_format_to_exactly_the_tokens_it_reports(
    make_sidecar: SidecarFactory, standin: StandinServer, session: aiohttp.ClientSession
) -> None:
    sidecar = await make_sidecar(over_budget_action="downscale", max_image_tokens=1024)
    small = jpeg_uri(300, 200)
    rotated = data_uri(exif_rotated_jpeg(3000, 2000))
    body = chat(
        image_url_part(jpeg_uri(4032, 3024)),
        image_url_part(png_uri(1920, 1080)),
        image_url_part(webp_uri(1600, 1200)),
        image_url_part(rotated),
        image_url_part(small),
    )
    assert reprobe(rotated)[:2] == (2000, 3000)  # displayed portrait, as vLLM sees it
    reply = await post(session, sidecar, body)
    sizes = assert_costs_exactly_what_was_forwarded(reply, standin, body)
    assert [fmt for _, _, fmt in sizes] == ["JPEG", "PNG", "WEBP", "JPEG", "JPEG"]
    assert all(RULE.image_tokens(w, h).tokens <= 1024 for w, h, _ in sizes)
    assert sizes[3][0] < sizes[3][1]  # the rotated photo is still portrait
    uris = image_uris_in(orjson.loads(standin.requests[-1].body))
    assert uris[4] == small  # an image within budget is not touched
    assert (
        b"Exif"
        not in orjson.loads(standin.requests[-1].body)["messages"][0]["content"][4]["image_url"][
            "url"
        ].encode()
    )


@pytest.mark.parametrize(
    ("path", "body"),
    [
        (CHAT, chat({"image_url": jpeg_uri(1920, 1080)})),
        (CHAT, chat({"type": "input_image", "image_url": jpeg_uri(1920, 1080), "detail": "auto"})),
        (RESPONSES, responses({"type": "input_image", "image_url": jpeg_uri(1920, 1080)})),
        (MESSAGES, messages(anthropic_base64(1920, 1080), max_tokens=1024)),
        (MESSAGES, messages(anthropic_base64(1920, 1080, "PNG"), max_tokens=1024)),
    ],
    ids=[
        "chat-bare-string",
        "chat-input-image",
        "responses-input-image",
        "messages-base64",
        "messages-base64-labelled-png",
    ],
)
async def test_proxy_downscales_images_in_every_route_shape(
    make_sidecar: SidecarFactory,
    standin: StandinServer,
    session: aiohttp.ClientSession,
    path: str,
    body: dict[str, Any],
) -> None:
    sidecar = await make_sidecar(over_budget_action="downscale", max_image_tokens=1000)
    reply = await post(session, sidecar, body, path)
    sizes = assert_costs_exactly_what_was_forwarded(reply, standin, body)
    assert RULE.image_tokens(*sizes[0][:2]).tokens <= 1000


async def test_proxy_rejects_when_downscaling_cannot_help(
    make_sidecar: SidecarFactory, standin: StandinServer, session: aiohttp.ClientSession
) -> None:
    sidecar = await make_sidecar(over_budget_action="downscale", max_request_prompt_tokens=20)
    reply = await post(session, sidecar, chat(image_url_part(jpeg_uri(640, 480))))
    assert reply.status == 400
    assert (
        "cannot downscale" in reply.json()["error"]["message"]
        or "even downscaled" in (reply.json()["error"]["message"])
    )
    assert standin.requests == []


@pytest.mark.parametrize(
    "extra",
    [{}, {"mm_processor_kwargs": {"do_resize": True}}],
    ids=["new-field", "merged-into-existing"],
)
async def test_proxy_downscales_with_processor_kwargs_leaving_the_content_as_sent(
    make_sidecar: SidecarFactory,
    standin: StandinServer,
    session: aiohttp.ClientSession,
    extra: dict[str, Any],
) -> None:
    # This method needs vLLM's --trust-request-mm-kwargs: without it vLLM answers 400.
    standin.config = dataclasses.replace(standin.config, trust_request_mm_kwargs=True)
    sidecar = await make_sidecar(
        over_budget_action="downscale",
        downscale_method="processor_kwargs",
        max_request_visual_tokens=2000,
    )
    body = chat(*jpeg_parts((1920, 1080), (1280, 720)), **extra)
    raw = orjson.dumps(body)
    reply = await post(session, sidecar, raw)
    assert reply.status == 200, reply.body
    assert reply.headers[DECISION] == "downscale"
    forwarded = orjson.loads(standin.requests[-1].body)
    max_pixels = forwarded["mm_processor_kwargs"]["max_pixels"]
    rule = RULE.with_pixel_range(None, max_pixels)
    assert reply.prediction == expected([(1920, 1080), (1280, 720)], rule=rule)
    assert reply.prediction[0] <= 2000
    assert forwarded == {**body, "mm_processor_kwargs": {**extra.get("mm_processor_kwargs", {}),
                                                         "max_pixels": max_pixels}}  # fmt: skip
    if not extra:  # the field goes in front, every byte of the body follows as sent
        assert standin.requests[-1].body == (
            b'{"mm_processor_kwargs":{"max_pixels":%d},' % max_pixels + raw[1:]
        )


# --- settings that change the prediction --------------------------------------------------------

VIDEO = {"type": "video_url", "video_url": {"url": "https://example.test/clip.mp4"}}
AUDIO = {"type": "audio_url", "audio_url": {"url": "https://example.test/clip.wav"}}
FP8_BYTES_PER_TOKEN = BYTES_PER_TOKEN // 2

SETTING_CASES = [
    pytest.param({}, chat(*jpeg_parts((1920, 1080))),
                 expected([(1920, 1080)]), id="defaults"),
    pytest.param({"default_output_tokens": 100}, chat(*jpeg_parts((1920, 1080))),
                 expected([(1920, 1080)], output_tokens=100), id="default-output-tokens"),
    pytest.param({}, chat(VIDEO, AUDIO), expected(media_tokens=16_384 + 1_500),
                 id="media-defaults"),
    pytest.param({"video_tokens_per_item": 500, "audio_tokens_per_item": 70},
                 chat(VIDEO, VIDEO, AUDIO), expected(media_tokens=2 * 500 + 70),
                 id="video-and-audio-tokens-per-item"),
    pytest.param({"text_chars_per_token": 1.5}, chat(text="y" * 300),
                 expected(text="y" * 300, chars_per_token=1.5), id="text-chars-per-token"),
    pytest.param({"max_pixels": 200_704}, chat(*jpeg_parts((1920, 1080))),
                 expected([(1920, 1080)], rule=RULE.with_pixel_range(None, 200_704)),
                 id="model-max-pixels"),
    pytest.param({"min_pixels": 100_352}, chat(*jpeg_parts((64, 64))),
                 expected([(64, 64)], rule=RULE.with_pixel_range(100_352, None)),
                 id="model-min-pixels"),
    pytest.param({"kv_cache_dtype": "fp8"}, chat(*jpeg_parts((1920, 1080))),
                 expected([(1920, 1080)], bytes_per_token=FP8_BYTES_PER_TOKEN),
                 id="kv-cache-dtype-fp8"),
    pytest.param({"tensor_parallel_size": 2}, chat(*jpeg_parts((1920, 1080))),
                 expected([(1920, 1080)], bytes_per_token=BYTES_PER_TOKEN // 2),
                 id="tensor-parallel-size"),
    pytest.param({"block_size_tokens": 32}, chat(*jpeg_parts((640, 480)), max_tokens=1),
                 expected([(640, 480)], output_tokens=1, block_size=32),
                 id="block-size"),
]  # fmt: skip


@pytest.mark.parametrize(("settings", "body", "prediction"), SETTING_CASES)
async def test_proxy_headers_follow_each_setting_that_changes_the_prediction(
    make_sidecar: SidecarFactory,
    session: aiohttp.ClientSession,
    settings: dict[str, Any],
    body: dict[str, Any],
    prediction: tuple[int, int, int],
) -> None:
    sidecar = await make_sidecar(**settings)
    reply = await post(session, sidecar, body)
    assert reply.status == 200, reply.body
    assert reply.prediction == prediction


def test_setting_cases_differ_from_the_defaults() -> None:
    """Each case would fail if the sidecar ignored its setting."""
    defaults = {
        "default-output-tokens": expected([(1920, 1080)]),
        "video-and-audio-tokens-per-item": expected(media_tokens=2 * 16_384 + 1_500),
        "text-chars-per-token": expected(text="y" * 300),
        "model-max-pixels": expected([(1920, 1080)]),
        "model-min-pixels": expected([(64, 64)]),
        "kv-cache-dtype-fp8": expected([(1920, 1080)]),
        "tensor-parallel-size": expected([(1920, 1080)]),
        "block-size": expected([(640, 480)], output_tokens=1),
    }
    for case in SETTING_CASES:
        if case.id in defaults:
            assert case.values[2] != defaults[case.id], case.id


async def test_proxy_refuses_an_image_over_max_decode_pixels_without_decoding_it(
    make_sidecar: SidecarFactory, standin: StandinServer, session: aiohttp.ClientSession
) -> None:
    sidecar = await make_sidecar(max_decode_pixels=1_000_000, over_budget_action="downscale")
    reply = await post(session, sidecar, chat(*jpeg_parts((1920, 1080))))
    assert reply.status == 400
    assert "1,000,000" in reply.json()["error"]["message"]
    assert standin.requests == []


# --- the body limit ----------------------------------------------------------------------------


async def test_proxy_refuses_a_declared_body_over_max_body_bytes_with_413(
    make_sidecar: SidecarFactory, standin: StandinServer, session: aiohttp.ClientSession
) -> None:
    sidecar = await make_sidecar(max_body_bytes="100KiB")
    raw = orjson.dumps(chat(text="x" * 200_000))
    reply = await post(session, sidecar, raw)
    assert reply.status == 413
    assert reply.json()["error"] == {
        "message": f"request body of {len(raw):,} bytes exceeds SIDECAR_MAX_BODY_BYTES (102,400)",
        "type": "RequestTooLargeError",
        "param": None,
        "code": 413,
    }
    assert reply.headers[DECISION] == "reject"
    assert standin.requests == []


async def test_proxy_refuses_a_chunked_body_over_max_body_bytes_with_413(
    make_sidecar: SidecarFactory, standin: StandinServer, session: aiohttp.ClientSession
) -> None:
    sidecar = await make_sidecar(max_body_bytes="100KiB")
    sent: list[int] = []

    async def chunks() -> Any:
        yield b'{"model": "m", "messages": [{"role": "user", "content": "'
        for _ in range(40):
            sent.append(1)
            yield b"x" * 8192
        yield b'"}]}'

    headers = {"Content-Type": "application/json"}
    async with session.post(url_of(sidecar), data=chunks(), headers=headers) as response:
        assert "Content-Length" not in response.request_info.headers
        assert response.status == 413
        assert "SIDECAR_MAX_BODY_BYTES" in (await response.json())["error"]["message"]
    assert standin.requests == []
    assert ledger_is_idle(sidecar)


async def test_proxy_refuses_a_chunked_body_over_max_body_bytes_that_arrives_in_one_write(
    make_sidecar: SidecarFactory, standin: StandinServer
) -> None:
    # Head, every chunk and the last chunk in one packet: the whole body is there before the
    # handler runs, so it is read without waiting, and the limit must hold all the same.
    sidecar = await make_sidecar(max_body_bytes="1KiB")
    raw = orjson.dumps(chat(text="y" * 2_000))
    request = (
        b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        b"Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
        + f"{len(raw):x}\r\n".encode() + raw + b"\r\n0\r\n\r\n"
    )  # fmt: skip
    reader, writer = await asyncio.open_connection("127.0.0.1", sidecar.port)
    writer.write(request)
    await writer.drain()
    answer = await reader.read()
    writer.close()
    assert answer.startswith(b"HTTP/1.1 413"), answer[:200]
    assert b"SIDECAR_MAX_BODY_BYTES" in answer
    assert standin.requests == []
    assert ledger_is_idle(sidecar)


async def test_proxy_accepts_a_chunked_body_under_max_body_bytes(
    make_sidecar: SidecarFactory, standin: StandinServer, session: aiohttp.ClientSession
) -> None:
    sidecar = await make_sidecar(max_body_bytes="100KiB")
    raw = orjson.dumps(chat(text="z" * 50_000))

    async def chunks() -> Any:
        for start in range(0, len(raw), 4096):
            yield raw[start : start + 4096]

    headers = {"Content-Type": "application/json"}
    async with session.post(url_of(sidecar), data=chunks(), headers=headers) as response:
        assert response.status == 200
    assert standin.requests[-1].body == raw


# --- the in-flight KV budget: off, wait, timeout, too large, queue depth ------------------------

TEXT_ONLY = chat(max_tokens=64)
TEXT_ONLY_KV = expected(output_tokens=64)[2]  # 6 blocks of 16 tokens


def hold(
    session: aiohttp.ClientSession, sidecar: Any, how: str, body: dict[str, Any] = TEXT_ONLY
) -> asyncio.Task[Reply]:
    """A request in the background that the stand-in holds up with the fault ``how``."""
    return asyncio.create_task(post(session, sidecar, body, headers=fault(how)))


async def test_proxy_counts_but_never_queues_when_the_kv_budget_is_off(
    make_sidecar: SidecarFactory, session: aiohttp.ClientSession
) -> None:
    sidecar = await make_sidecar(kv_budget_bytes=0)
    held = [hold(session, sidecar, "delay=0.3") for _ in range(3)]
    ledger = sidecar.app[LEDGER]
    await eventually(lambda: ledger.inflight_requests == 3)
    assert (ledger.total_bytes, ledger.inflight_bytes, ledger.queue_depth) == (
        0, 3 * TEXT_ONLY_KV, 0,
    )  # fmt: skip
    replies = await asyncio.gather(*held)
    assert [r.headers[DECISION] for r in replies] == ["admit"] * 3
    assert ledger_is_idle(sidecar)


async def test_proxy_queues_a_request_for_the_kv_budget_then_admits_it_as_wait(
    make_sidecar: SidecarFactory, standin: StandinServer, session: aiohttp.ClientSession
) -> None:
    sidecar = await make_sidecar(kv_budget_bytes=TEXT_ONLY_KV, queue_timeout_seconds=5)
    first = hold(session, sidecar, "delay=0.4")
    ledger = sidecar.app[LEDGER]
    await eventually(lambda: ledger.inflight_requests == 1)
    with capture_logs() as logs:
        second = asyncio.create_task(post(session, sidecar, TEXT_ONLY))
        await eventually(lambda: ledger.queue_depth == 1)
        assert len(standin.requests) == 1
        replies = await asyncio.gather(first, second)
    assert [r.status for r in replies] == [200, 200]
    assert [r.headers[DECISION] for r in replies] == ["admit", "wait"]
    lines = [e for e in logs if e["event"] == "request.finished"]
    (line,) = [e for e in lines if e["request_id"] == replies[1].headers["x-request-id"]]
    assert (line["decision"], line["reason"]) == ("wait", "kv_budget_full")
    assert 0.1 < line["wait_seconds"] < 2
    assert sample(sidecar, "vlm_sidecar_queue_wait_seconds_count") == 1
    assert ledger_is_idle(sidecar)


async def test_proxy_answers_429_with_retry_after_when_the_budget_stays_full(
    make_sidecar: SidecarFactory, standin: StandinServer, session: aiohttp.ClientSession
) -> None:
    sidecar = await make_sidecar(kv_budget_bytes=TEXT_ONLY_KV, queue_timeout_seconds=1)
    holder = hold(session, sidecar, "hang")
    ledger = sidecar.app[LEDGER]
    await eventually(lambda: ledger.inflight_requests == 1)
    started = time.perf_counter()
    reply = await post(session, sidecar, TEXT_ONLY)
    waited = time.perf_counter() - started
    assert reply.status == 429
    assert reply.headers["Retry-After"] == "1"
    assert 0.9 < waited < 2.5
    error = reply.json()["error"]
    assert (error["type"], error["code"]) == ("RateLimitError", 429)
    assert "after waiting 1 s" in error["message"]
    assert len(standin.requests) == 1
    holder.cancel()
    await eventually(lambda: ledger_is_idle(sidecar))


async def test_proxy_answers_a_never_retryable_413_at_once_for_a_request_larger_than_the_budget(
    make_sidecar: SidecarFactory, standin: StandinServer, session: aiohttp.ClientSession
) -> None:
    sidecar = await make_sidecar(kv_budget_bytes=TEXT_ONLY_KV, queue_timeout_seconds=30)
    started = time.perf_counter()
    reply = await post(session, sidecar, chat(max_tokens=100))  # 8 blocks, not 6
    assert time.perf_counter() - started < 1
    assert reply.status == 413
    assert reply.headers["x-should-retry"] == "false"
    assert "Retry-After" not in reply.headers
    assert reply.json()["error"]["type"] == "RequestTooLargeError"
    assert (
        "more than the whole in-flight budget SIDECAR_KV_BUDGET_BYTES"
        in (reply.json()["error"]["message"])
    )
    assert standin.requests == []
    assert ledger_is_idle(sidecar)


async def test_proxy_answers_429_at_once_when_the_queue_is_at_max_queue_depth(
    make_sidecar: SidecarFactory, standin: StandinServer, session: aiohttp.ClientSession
) -> None:
    sidecar = await make_sidecar(
        kv_budget_bytes=TEXT_ONLY_KV, queue_timeout_seconds=30, max_queue_depth=1
    )
    holder = hold(session, sidecar, "hang")
    ledger = sidecar.app[LEDGER]
    await eventually(lambda: ledger.inflight_requests == 1)
    queued = asyncio.create_task(post(session, sidecar, TEXT_ONLY))
    await eventually(lambda: ledger.queue_depth == 1)
    reply = await post(session, sidecar, TEXT_ONLY)
    assert reply.status == 429
    assert "the queue is full (1 waiting)" in reply.json()["error"]["message"]
    assert int(reply.headers["Retry-After"]) >= 1
    full = {"route": "chat_completions", "decision": "reject", "reason": "queue_full"}
    assert sample(sidecar, "vlm_sidecar_requests_total", **full) == 1
    holder.cancel()  # the holder's client leaves: the queued request gets its place
    admitted = await queued
    assert (admitted.status, admitted.headers[DECISION]) == (200, "wait")
    assert ledger_is_idle(sidecar)


async def test_proxy_reports_the_queue_in_its_gauges(
    make_sidecar: SidecarFactory, session: aiohttp.ClientSession
) -> None:
    sidecar = await make_sidecar(kv_budget_bytes=TEXT_ONLY_KV, queue_timeout_seconds=30)
    holder = hold(session, sidecar, "hang")
    ledger = sidecar.app[LEDGER]
    await eventually(lambda: ledger.inflight_requests == 1)
    queued = asyncio.create_task(post(session, sidecar, TEXT_ONLY))
    await eventually(lambda: ledger.queue_depth == 1)
    assert sample(sidecar, "vlm_sidecar_queue_depth") == 1
    assert sample(sidecar, "vlm_sidecar_inflight_kv_bytes") == TEXT_ONLY_KV
    assert sample(sidecar, "vlm_sidecar_kv_budget_bytes") == TEXT_ONLY_KV
    holder.cancel()
    await queued
    assert sample(sidecar, "vlm_sidecar_inflight_requests") == 0
