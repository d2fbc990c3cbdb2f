"""End to end, routes and image shapes: client -> sidecar -> stand-in vLLM, all on 127.0.0.1.

Every inspected route, every way a body can carry an image, every ``SIDECAR_REMOTE_IMAGES``
mode, the output-token fields and ``n``, and the bodies that must get a 400 (never a 500) with
nothing forwarded.
"""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from ipaddress import IPv4Address, IPv6Address, ip_address
from typing import Any

import aiohttp
import orjson
import pytest
from aiohttp import web
from prometheus_client import CollectorRegistry

from sidecar.serve.app import make_remote_prober
from sidecar.serve.server import RunningSidecar, running_sidecar
from sidecar.settings import Settings
from sidecar.standin import StandinServer
from tests.support.imaging import (
    PROMPT,
    anthropic_base64,
    chat,
    data_uri,
    image_bytes,
    image_url_part,
    jpeg_uri,
    messages,
    png_header,
    responses,
)
from tests.support.proxy_helpers import (
    CHAT,
    COMPLETIONS,
    DECISION,
    MESSAGES,
    RESPONSES,
    RULE,
    expected,
    ledger_is_idle,
    post,
)
from tests.support.sidecars import QWEN, SidecarFactory

LOOPBACK = ip_address("127.0.0.1")

# --- every route --------------------------------------------------------------------------------


def _completions(**fields: Any) -> dict[str, Any]:
    return {"model": "m", "prompt": "Once upon a time", **fields}


ROUTE_CASES = [
    (CHAT, chat(image_url_part(jpeg_uri(640, 480)), max_tokens=32),
     expected([(640, 480)], output_tokens=32)),
    (COMPLETIONS, _completions(max_tokens=32),
     expected([], text="Once upon a time", output_tokens=32, template=False)),
    (RESPONSES, responses({"type": "input_image", "image_url": jpeg_uri(800, 600)},
                          max_output_tokens=32),
     expected([(800, 600)], output_tokens=32)),
    (MESSAGES, messages(anthropic_base64(1024, 768), max_tokens=32),
     expected([(1024, 768)], output_tokens=32)),
]  # fmt: skip


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
@pytest.mark.parametrize(
    ("path", "body", "prediction"),
    ROUTE_CASES,
    ids=["chat-completions", "completions", "responses-input-image", "messages-base64"],
)
async def test_proxy_forwards_every_route_unchanged_with_the_predicted_cost(
    make_sidecar: SidecarFactory,
    standin: StandinServer,
    session: aiohttp.ClientSession,
    path: str,
    body: dict[str, Any],
    prediction: tuple[int, int, int],
    stream: bool,
) -> None:
    sidecar = await make_sidecar()
    raw = orjson.dumps({**body, "stream": stream})
    reply = await post(session, sidecar, raw, path)
    assert reply.status == 200, reply.body
    assert standin.requests[-1].path == path
    assert standin.requests[-1].body == raw
    assert reply.headers[DECISION] == "admit"
    assert reply.prediction == prediction
    if stream:
        assert reply.headers["Content-Type"].startswith("text/event-stream")
        assert reply.body.count(b"data:") > 3
    else:
        assert "usage" in reply.json()
    assert ledger_is_idle(sidecar)


# --- every image shape --------------------------------------------------------------------------

JPEG_640 = jpeg_uri(640, 480)
TOKENS_640 = RULE.image_tokens(640, 480).tokens

SHAPE_CASES = [
    pytest.param(CHAT, chat(image_url_part(JPEG_640)), id="chat-image-url-object"),
    pytest.param(CHAT, chat({"image_url": JPEG_640}), id="chat-bare-string-image-url"),
    pytest.param(CHAT, chat({"type": "input_image", "image_url": JPEG_640, "detail": "low"}),
                 id="chat-input-image"),
    pytest.param(CHAT, chat({"image_url": {"url": JPEG_640}, "uuid": "cat-1"}),
                 id="chat-typeless-with-uuid"),
    pytest.param(RESPONSES, responses({"type": "input_image", "image_url": JPEG_640}),
                 id="responses-input-image"),
    pytest.param(MESSAGES, messages({"type": "image", "source": {
        "type": "base64", "media_type": "image/jpeg",
        "data": JPEG_640.split(",", 1)[1]}}, max_tokens=None), id="messages-base64"),
    pytest.param(CHAT, chat(image_url_part(data_uri(image_bytes(640, 480, "PNG"), "image/png"))),
                 id="chat-png-data-uri"),
    pytest.param(CHAT, chat(image_url_part(data_uri(image_bytes(640, 480, "WEBP"),
                                                    "image/webp"))), id="chat-webp-data-uri"),
    pytest.param(CHAT, chat(image_url_part(data_uri(image_bytes(640, 480, "GIF"),
                                                    "image/gif"))), id="chat-gif-data-uri"),
    pytest.param(CHAT, chat(image_url_part(data_uri(image_bytes(640, 480), "image/png"))),
                 id="chat-jpeg-labelled-png"),
]  # fmt: skip


@pytest.mark.parametrize(("path", "body"), SHAPE_CASES)
async def test_proxy_prices_every_inline_image_shape_by_its_header(
    make_sidecar: SidecarFactory,
    standin: StandinServer,
    session: aiohttp.ClientSession,
    path: str,
    body: dict[str, Any],
) -> None:
    sidecar = await make_sidecar()
    if body.get("max_tokens", 0) is None:
        body = {**body, "max_tokens": 1024}
    reply = await post(session, sidecar, body, path)
    assert reply.status == 200, reply.body
    assert reply.prediction == expected(image_tokens=[TOKENS_640])
    assert standin.requests[-1].body == orjson.dumps(body)


async def test_proxy_prices_images_in_every_message_and_the_system_prompt(
    make_sidecar: SidecarFactory, session: aiohttp.ClientSession
) -> None:
    sidecar = await make_sidecar()
    system = "You are terse."
    body = {
        "model": "m",
        "max_tokens": 10,
        "messages": [
            {"role": "system", "content": system},
            {"role": "user", "content": [image_url_part(jpeg_uri(320, 240))]},
            {"role": "assistant", "content": "A cat."},
            {"role": "user", "content": [{"type": "text", "text": PROMPT},
                                         {"image_url": jpeg_uri(1280, 720)}]},
        ],
    }  # fmt: skip
    reply = await post(session, sidecar, body)
    texts = [system, "A cat.", PROMPT]
    assert reply.prediction == expected(
        [(320, 240), (1280, 720)], text=texts, messages=4, output_tokens=10
    )


# --- URL images under each SIDECAR_REMOTE_IMAGES mode ------------------------------------------


@dataclass
class ImageSite:
    """A loopback image server that records what it was asked."""

    port: int = 0
    requests: list[tuple[str, str | None]] = field(default_factory=list)
    files: dict[str, bytes] = field(default_factory=dict)

    def url(self, host: str, path: str) -> str:
        return f"http://{host}:{self.port}{path}"


@pytest.fixture
async def image_site() -> AsyncIterator[ImageSite]:
    site = ImageSite(files={"/photo.jpg": image_bytes(1600, 1200), "/icon.png": image_bytes(
        96, 64, "PNG")})  # fmt: skip

    async def serve(request: web.Request) -> web.Response:
        site.requests.append((request.path, request.headers.get("Range")))
        body = site.files.get(request.path)
        if body is None:
            return web.Response(status=404)
        return web.Response(body=body, content_type="application/octet-stream")

    app = web.Application()
    app.router.add_get("/{name}", serve)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    site.port = int(runner.addresses[0][1])
    yield site
    await runner.cleanup()


class StubResolver:
    """Every name resolves to 127.0.0.1: the image site stands in for the internet."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    async def __call__(self, host: str, port: int) -> list[str]:
        self.calls.append(host)
        return ["127.0.0.1"]


def only_loopback(ip: IPv4Address | IPv6Address) -> bool:
    return ip == LOOPBACK


@pytest.fixture
async def probing_sidecar(standin: StandinServer) -> AsyncIterator[RunningSidecar]:
    """A sidecar in probe mode whose prober reaches the loopback image site by name."""
    settings = Settings(
        model=QWEN,
        upstream_url=standin.url,
        listen_host="127.0.0.1",
        port=0,
        metrics_port=0,
        remote_images="probe",
        remote_image_allowed_domains="images.test",
        remote_image_timeout_seconds=2,
    )
    prober = make_remote_prober(settings, resolver=StubResolver(), address_allowed=only_loopback)
    assert prober is not None
    assert prober.policy.allowed_domains == ("images.test",)
    assert prober.policy.timeout_seconds == 2
    async with running_sidecar(settings, registry=CollectorRegistry(), remote_prober=prober) as s:
        yield s


URL_SHAPES = [
    pytest.param(CHAT, lambda url: chat(image_url_part(url)), id="chat-image-url-object"),
    pytest.param(CHAT, lambda url: chat({"image_url": url}), id="chat-bare-string"),
    pytest.param(RESPONSES, lambda url: responses({"type": "input_image", "image_url": url}),
                 id="responses-input-image"),
    pytest.param(MESSAGES, lambda url: messages({"type": "image",
                                                  "source": {"type": "url", "url": url}},
                                                 max_tokens=1024), id="messages-url-source"),
]  # fmt: skip


@pytest.mark.parametrize(("path", "make_body"), URL_SHAPES)
async def test_proxy_prices_url_images_at_the_model_max_without_fetching_when_assume_max(
    make_sidecar: SidecarFactory,
    standin: StandinServer,
    session: aiohttp.ClientSession,
    image_site: ImageSite,
    path: str,
    make_body: Any,
) -> None:
    sidecar = await make_sidecar(remote_images="assume_max")
    body = make_body(image_site.url("127.0.0.1", "/photo.jpg"))
    reply = await post(session, sidecar, body, path)
    assert reply.status == 200, reply.body
    assert reply.prediction == expected(image_tokens=[RULE.max_image_tokens().tokens])
    assert image_site.requests == []
    assert standin.requests[-1].body == orjson.dumps(body)


async def test_proxy_prices_https_url_images_at_the_model_max_by_default(
    make_sidecar: SidecarFactory, standin: StandinServer, session: aiohttp.ClientSession
) -> None:
    standin.set_cache_config(max_model_len=128_000)  # room for three of the largest images
    sidecar = await make_sidecar()  # SIDECAR_REMOTE_IMAGES defaults to assume_max
    body = chat(
        image_url_part("https://images.test/photo.jpg"),
        {"image_url": "HTTPS://images.test/icon.png"},
        {
            "type": "input_image",
            "image_url": "https://images.test/cat.webp?size=large",
            "detail": "auto",
        },
    )
    reply = await post(session, sidecar, body)
    assert reply.status == 200, reply.body
    assert reply.prediction == expected(image_tokens=[RULE.max_image_tokens().tokens] * 3)
    assert standin.requests[-1].body == orjson.dumps(body)


@pytest.mark.parametrize(("path", "make_body"), URL_SHAPES)
async def test_proxy_probes_url_images_for_their_real_size_when_probe(
    probing_sidecar: RunningSidecar,
    standin: StandinServer,
    session: aiohttp.ClientSession,
    image_site: ImageSite,
    path: str,
    make_body: Any,
) -> None:
    body = make_body(image_site.url("images.test", "/photo.jpg"))
    reply = await post(session, probing_sidecar, body, path)
    assert reply.status == 200, reply.body
    assert reply.prediction == expected([(1600, 1200)])
    assert [p for p, _ in image_site.requests] == ["/photo.jpg"]
    assert image_site.requests[0][1] is not None  # a Range request, not the whole file
    assert standin.requests[-1].body == orjson.dumps(body)


async def test_proxy_probes_several_url_images_and_inline_ones_together_when_probe(
    probing_sidecar: RunningSidecar, session: aiohttp.ClientSession, image_site: ImageSite
) -> None:
    body = chat(
        image_url_part(image_site.url("images.test", "/photo.jpg")),
        image_url_part(jpeg_uri(300, 200)),
        {"image_url": image_site.url("images.test", "/icon.png")},
    )
    reply = await post(session, probing_sidecar, body)
    assert reply.status == 200, reply.body
    assert reply.prediction == expected([(1600, 1200), (300, 200), (96, 64)])


@pytest.mark.parametrize(
    ("host", "path", "message"),
    [
        ("images.test", "/missing.jpg", "HTTP 404"),
        ("elsewhere.test", "/photo.jpg", "not in SIDECAR_REMOTE_IMAGE_ALLOWED_DOMAINS"),
    ],
    ids=["not-found", "host-not-allowed"],
)
async def test_proxy_answers_400_when_a_url_image_cannot_be_probed(
    probing_sidecar: RunningSidecar,
    standin: StandinServer,
    session: aiohttp.ClientSession,
    image_site: ImageSite,
    host: str,
    path: str,
    message: str,
) -> None:
    reply = await post(session, probing_sidecar, chat(image_url_part(image_site.url(host, path))))
    assert reply.status == 400, reply.body
    error = reply.json()["error"]
    assert message in error["message"]
    assert error["message"].startswith("image 1 of 1: remote image ")
    assert standin.requests == []
    assert ledger_is_idle(probing_sidecar)


@pytest.mark.parametrize(("path", "make_body"), URL_SHAPES)
async def test_proxy_refuses_url_images_with_400_when_reject(
    make_sidecar: SidecarFactory,
    standin: StandinServer,
    session: aiohttp.ClientSession,
    image_site: ImageSite,
    path: str,
    make_body: Any,
) -> None:
    sidecar = await make_sidecar(remote_images="reject")
    reply = await post(session, sidecar, make_body(image_site.url("127.0.0.1", "/photo.jpg")), path)
    assert reply.status == 400
    message = "accepts inline (data: URI) images only"
    if path == MESSAGES:
        assert reply.json()["type"] == "error"
        assert reply.json()["error"]["type"] == "invalid_request_error"
        assert message in reply.json()["error"]["message"]
    else:
        assert message in reply.json()["error"]["message"]
    assert reply.headers[DECISION] == "reject"
    assert (standin.requests, image_site.requests) == ([], [])


# --- output tokens and n -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "fields", "output_tokens", "n"),
    [
        (CHAT, {"max_tokens": 100}, 100, 1),
        (CHAT, {"max_completion_tokens": 200}, 200, 1),
        (CHAT, {"max_tokens": 100, "max_completion_tokens": 300}, 300, 1),
        (CHAT, {}, 1024, 1),
        (CHAT, {"max_tokens": 100, "n": 3}, 100, 3),
        (COMPLETIONS, {}, 16, 1),
        (COMPLETIONS, {"max_tokens": 50, "n": 4}, 50, 4),
        (RESPONSES, {"max_output_tokens": 400}, 400, 1),
        (RESPONSES, {"max_tokens": 400}, 1024, 1),
        (MESSAGES, {"max_tokens": 77}, 77, 1),
    ],
    ids=[
        "chat-max-tokens",
        "chat-max-completion-tokens",
        "chat-max-completion-tokens-wins",
        "chat-default-output-tokens",
        "chat-n-multiplies-output",
        "completions-vllm-default-16",
        "completions-n-multiplies-output",
        "responses-max-output-tokens",
        "responses-ignores-max-tokens",
        "messages-max-tokens",
    ],
)
async def test_proxy_reserves_kv_for_the_output_limit_of_each_route_times_n(
    make_sidecar: SidecarFactory,
    session: aiohttp.ClientSession,
    path: str,
    fields: dict[str, Any],
    output_tokens: int,
    n: int,
) -> None:
    sidecar = await make_sidecar()
    if path == COMPLETIONS:
        body, text = _completions(**fields), "Once upon a time"
    elif path == RESPONSES:
        body, text = responses(**fields), PROMPT
    elif path == MESSAGES:
        body, text = messages(**fields), PROMPT
    else:
        body, text = chat(**fields), PROMPT
    reply = await post(session, sidecar, body, path)
    assert reply.status == 200, reply.body
    assert reply.prediction == expected(
        [], text=text, output_tokens=output_tokens, n=n, template=path != COMPLETIONS
    )


# --- bad bodies ---------------------------------------------------------------------------------


def nested(depth: int) -> bytes:
    return b'{"model": "m", "messages": [' + b"[" * depth + b"]" * depth + b"]}"


BAD_BODIES = [
    pytest.param(b"not json", "not valid JSON", id="not-json"),
    pytest.param(b"", "not valid JSON", id="empty"),
    pytest.param(b'["a", "list"]', "must be a JSON object", id="not-an-object"),
    pytest.param(b'{"model": "m", "messages": "hi"}', "'messages' must be a list",
                 id="messages-not-a-list"),
    pytest.param(orjson.dumps(chat(max_tokens="ten")), "'max_tokens' must be an integer",
                 id="max-tokens-a-string"),
    pytest.param(orjson.dumps(chat(n=0)), "n must be at least 1", id="n-zero"),
    pytest.param(orjson.dumps(chat(stream="maybe")), "'stream' must be a boolean",
                 id="stream-not-boolean"),
    pytest.param(orjson.dumps(chat({"type": "nope"})), "Unsupported chat content part type",
                 id="unknown-part-type"),
    pytest.param(orjson.dumps(chat({"type": "image_url", "image_url": 7})),
                 "must be an object with a 'url'", id="image-url-a-number"),
    pytest.param(orjson.dumps(chat(image_url_part("data:image/png;base64,!!!!"))), "base64",
                 id="bad-base64"),
    pytest.param(orjson.dumps(chat(image_url_part("data:image/png,rawbytes"))),
                 "Only base64 data URLs", id="data-uri-not-base64"),
    pytest.param(orjson.dumps(chat(image_url_part(data_uri(b"just some text, not pixels")))),
                 "not an image", id="not-an-image"),
    pytest.param(b'{"model": "m", "messages": [{"role": "user", "content": "caf\xe9"}]}',
                 "not valid UTF-8", id="invalid-utf8"),
    pytest.param(nested(100), "nested deeper than", id="nested-100-levels"),
    pytest.param(nested(5000), "not valid JSON", id="nested-5000-levels"),
    pytest.param(orjson.dumps(chat(image_url_part(data_uri(png_header(0, 480), "image/png")))),
                 "size of 0x480 pixels", id="zero-size-image-header"),
    pytest.param(orjson.dumps(chat(image_url_part(data_uri(image_bytes(4100, 20, "PNG"),
                                                           "image/png")))),
                 "aspect ratio", id="aspect-ratio-refused"),
    pytest.param(orjson.dumps(chat(image_url_part(data_uri(image_bytes(64, 64)[:40])))),
                 "image", id="truncated-image"),
]  # fmt: skip


@pytest.mark.parametrize(("raw", "message"), BAD_BODIES)
async def test_proxy_answers_bad_bodies_with_400_in_vllm_shape_and_forwards_nothing(
    make_sidecar: SidecarFactory,
    standin: StandinServer,
    session: aiohttp.ClientSession,
    raw: bytes,
    message: str,
) -> None:
    sidecar = await make_sidecar()
    reply = await post(session, sidecar, raw)
    assert reply.status == 400, reply.body
    error = reply.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert message in error["message"]
    assert (error["type"], error["code"]) == ("BadRequestError", 400)
    assert reply.headers[DECISION] == "reject"
    assert standin.requests == []
    assert ledger_is_idle(sidecar)


ANTHROPIC_BAD_BODIES = [
    pytest.param(b"{", "not valid JSON", id="not-json"),
    pytest.param(orjson.dumps(messages({"type": "image", "source": {
        "type": "base64", "media_type": "image/png", "data": "%%%%"}})), "base64",
        id="bad-base64"),
    pytest.param(orjson.dumps(messages({"type": "image", "source": {
        "type": "base64", "media_type": "image/png",
        "data": base64.b64encode(b"GIF-less text").decode()}})), "not an image",
        id="not-an-image"),
    pytest.param(orjson.dumps(messages({"type": "video"})), "Unsupported content block type",
                 id="unknown-block-type"),
]  # fmt: skip


@pytest.mark.parametrize(("raw", "message"), ANTHROPIC_BAD_BODIES)
async def test_proxy_answers_bad_messages_bodies_with_400_in_anthropic_shape(
    make_sidecar: SidecarFactory,
    standin: StandinServer,
    session: aiohttp.ClientSession,
    raw: bytes,
    message: str,
) -> None:
    sidecar = await make_sidecar()
    reply = await post(session, sidecar, raw, MESSAGES)
    assert reply.status == 400, reply.body
    document = reply.json()
    assert document["type"] == "error"
    assert document["error"]["type"] == "invalid_request_error"
    assert message in document["error"]["message"]
    assert standin.requests == []


@pytest.mark.parametrize(
    ("settings", "body", "status", "kind", "text"),
    [
        (
            {"max_image_tokens": 100},
            messages(anthropic_base64(640, 480)),
            400,
            "invalid_request_error",
            "SIDECAR_MAX_IMAGE_TOKENS",
        ),
        (
            {"max_body_bytes": 1024},
            messages(anthropic_base64(640, 480)),
            413,
            "request_too_large",
            "SIDECAR_MAX_BODY_BYTES",
        ),
        (
            {"kv_budget_bytes": 1024},
            messages(anthropic_base64(640, 480)),
            413,
            "request_too_large",
            "SIDECAR_KV_BUDGET_BYTES",
        ),
        ({"upstream_url": "http://127.0.0.1:9"}, messages(), 502, "api_error", "unreachable"),
    ],
    ids=["budget-400", "too-large-413", "larger-than-kv-budget-413", "unreachable-502"],
)
async def test_proxy_answers_sidecar_errors_on_messages_in_anthropic_shape(
    make_sidecar: SidecarFactory,
    session: aiohttp.ClientSession,
    settings: dict[str, Any],
    body: dict[str, Any],
    status: int,
    kind: str,
    text: str,
) -> None:
    sidecar = await make_sidecar(**settings)
    reply = await post(session, sidecar, body, MESSAGES)
    assert reply.status == status, reply.body
    document = reply.json()
    assert set(document) == {"type", "error"}
    assert document["type"] == "error"
    assert document["error"]["type"] == kind
    assert text in document["error"]["message"]


TOOL_CALL = {"id": "call_1", "type": "function", "function": {"name": "f", "arguments": "{}"}}


@pytest.mark.parametrize("mode", ["enforce", "shadow"])
async def test_proxy_prices_an_assistant_turn_with_null_content_and_tool_calls(
    mode: str, make_sidecar: SidecarFactory, session: aiohttp.ClientSession
) -> None:
    sidecar = await make_sidecar(mode=mode)
    body = {
        "model": "m",
        "messages": [
            {"role": "user", "content": "call f"},
            {"role": "assistant", "content": None, "tool_calls": [TOOL_CALL]},
            {"role": "tool", "tool_call_id": "call_1", "content": "done"},
        ],
    }
    reply = await post(session, sidecar, body)
    assert reply.status == 200, reply.body
    assert reply.headers["x-vlm-sidecar-decision"] == "admit"


async def test_proxy_answers_vllms_400_for_a_user_turn_with_null_content_and_shadow_forwards_it(
    make_sidecar: SidecarFactory, standin: StandinServer, session: aiohttp.ClientSession
) -> None:
    body = {"model": "m", "messages": [{"role": "user", "content": None}]}
    enforcing = await make_sidecar()
    reply = await post(session, enforcing, body)
    assert reply.status == 400
    assert reply.json()["error"]["type"] == "BadRequestError"
    assert standin.requests == []
    shadow = await make_sidecar(mode="shadow")
    await post(session, shadow, body)
    assert len(standin.requests) == 1  # shadow mode never answers for vLLM
