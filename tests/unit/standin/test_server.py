"""standin.server: the stand-in vLLM, driven over real HTTP on 127.0.0.1 with a real aiohttp
client: answers and streams per route, faults, health, models, recording and echo."""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import io
import time

import aiohttp
import orjson
import pytest
from pytest_aiohttp import AiohttpClient

from sidecar.standin import (
    STATE,
    Fault,
    StandinConfig,
    StandinServer,
    make_standin_app,
    run_standin,
    start_standin,
)
from tests.support.imaging import png_uri
from tests.support.proxy_helpers import CHAT, COMPLETIONS, MESSAGES, RESPONSES, fault, post_json
from tests.support.standin_helpers import (
    BODIES,
    CONFIG,
    IMAGE_TOKENS,
    PROMPT_TOKENS,
    STREAM_WITH_USAGE,
    fixed_image_tokens,
    fixed_prompt_tokens,
)
from tests.support.waiting import eventually


def sse_data(raw: bytes) -> list[bytes]:
    """The ``data:`` payloads of an SSE body, in order."""
    return [
        line.removeprefix(b"data: ")
        for event in raw.split(b"\n\n")
        for line in event.split(b"\n")
        if line.startswith(b"data: ")
    ]


@pytest.mark.parametrize(
    ("route", "prompt_key", "completion_key"),
    [
        (CHAT, "prompt_tokens", "completion_tokens"),
        (COMPLETIONS, "prompt_tokens", "completion_tokens"),
        (RESPONSES, "input_tokens", "output_tokens"),
        (MESSAGES, "input_tokens", "output_tokens"),
    ],
    ids=["chat", "completions", "responses", "messages"],
)
async def test_standin_answers_json_with_usage_on_every_route(
    standin: StandinServer,
    session: aiohttp.ClientSession,
    route: str,
    prompt_key: str,
    completion_key: str,
) -> None:
    reply = await post_json(session, standin.url + route, BODIES[route])
    usage = reply.json()["usage"]
    assert reply.status == 200
    assert (usage[prompt_key], usage[completion_key]) == (PROMPT_TOKENS, 4)


@pytest.mark.parametrize(
    ("route", "kind", "text_at"),
    [
        (CHAT, "chat.completion", ("choices", 0, "message", "content")),
        (COMPLETIONS, "text_completion", ("choices", 0, "text")),
        (RESPONSES, "response", ("output", 0, "content", 0, "text")),
    ],
    ids=["chat", "completions", "responses"],
)
async def test_standin_answers_the_openai_shape_of_each_route(
    standin: StandinServer,
    session: aiohttp.ClientSession,
    route: str,
    kind: str,
    text_at: tuple[str | int, ...],
) -> None:
    answer = (await post_json(session, standin.url + route, BODIES[route])).json()
    node = answer
    for step in text_at:
        node = node[step]
    assert answer["object"] == kind
    assert isinstance(node, str)
    assert len(node.split()) == 4


async def test_standin_answers_an_anthropic_message_on_messages(
    standin: StandinServer, session: aiohttp.ClientSession
) -> None:
    answer = (await post_json(session, standin.url + MESSAGES, BODIES[MESSAGES])).json()
    assert (answer["type"], answer["role"], answer["stop_reason"]) == (
        "message",
        "assistant",
        "max_tokens",
    )
    assert answer["content"][0]["type"] == "text"


@pytest.mark.parametrize(
    ("route", "object_kind"),
    [(CHAT, "chat.completion.chunk"), (COMPLETIONS, "text_completion")],
    ids=["chat", "completions"],
)
async def test_standin_streams_the_vllm_usage_chunk_then_done_when_include_usage(
    standin: StandinServer, session: aiohttp.ClientSession, route: str, object_kind: str
) -> None:
    async with session.post(standin.url + route, json=BODIES[route] | STREAM_WITH_USAGE) as resp:
        content_type = resp.headers["Content-Type"]
        raw = await resp.read()
    *chunks, usage_chunk, done = sse_data(raw)
    final = orjson.loads(usage_chunk)
    assert content_type == "text/event-stream; charset=utf-8"
    assert raw.endswith(b"\n\ndata: [DONE]\n\n")
    assert done == b"[DONE]"
    assert list(final) == [
        "id",
        "object",
        "created",
        "model",
        "choices",
        "usage",
        "system_fingerprint",
    ]
    assert (final["object"], final["choices"]) == (object_kind, [])
    assert final["usage"] == {
        "prompt_tokens": PROMPT_TOKENS,
        "total_tokens": PROMPT_TOKENS + 4,
        "completion_tokens": 4,
    }
    assert all(orjson.loads(chunk)["choices"] for chunk in chunks)
    # The fingerprint moves to the usage chunk when there is one.
    assert all("system_fingerprint" not in orjson.loads(chunk) for chunk in chunks)


@pytest.mark.parametrize(
    "stream_options",
    [None, {"include_usage": False}],
    ids=["no-stream-options", "include-usage-false"],
)
async def test_standin_streams_no_usage_chunk_without_include_usage(
    standin: StandinServer, session: aiohttp.ClientSession, stream_options: object
) -> None:
    body = BODIES[CHAT] | {"stream": True, "stream_options": stream_options}
    raw = (await post_json(session, standin.url + CHAT, body)).body
    *chunks, done = sse_data(raw)
    assert done == b"[DONE]"
    assert len(chunks) == 1 + 4  # role, one per token: the finish rides on the last token's
    assert all("usage" not in orjson.loads(chunk) for chunk in chunks)
    terminal = orjson.loads(chunks[-1])
    assert terminal["choices"][0]["finish_reason"] == "length"
    assert terminal["choices"][0]["delta"]["content"]
    assert terminal["system_fingerprint"].startswith("vllm-")


@pytest.mark.parametrize(
    ("route", "final_event", "usage_at"),
    [
        (RESPONSES, "response.completed", ("response", "usage", "output_tokens")),
        (MESSAGES, "message_delta", ("usage", "output_tokens")),
    ],
    ids=["responses", "messages"],
)
async def test_standin_streams_usage_in_the_closing_event_of_responses_and_messages(
    standin: StandinServer,
    session: aiohttp.ClientSession,
    route: str,
    final_event: str,
    usage_at: tuple[str, ...],
) -> None:
    raw = (await post_json(session, standin.url + route, BODIES[route] | {"stream": True})).body
    events = {orjson.loads(data)["type"]: orjson.loads(data) for data in sse_data(raw)}
    node = events[final_event]
    for step in usage_at:
        node = node[step]
    assert node == 4
    assert f"event: {final_event}\n".encode() in raw


async def test_standin_reports_prompt_tokens_details_when_enabled(
    session: aiohttp.ClientSession,
) -> None:
    config = StandinConfig(
        prompt_tokens_fn=fixed_prompt_tokens,
        image_tokens_fn=fixed_image_tokens,
        enable_prompt_tokens_details=True,
    )
    image = {"type": "image_url", "image_url": {"url": png_uri(32, 32)}}
    text = {"type": "text", "text": "hi"}
    with_image = BODIES[CHAT] | {"messages": [{"role": "user", "content": [image, text]}]}
    full_blocks = PROMPT_TOKENS // 16 * 16  # 16-token blocks
    async with run_standin(config) as server:
        first = await post_json(session, server.url + CHAT, with_image)
        again = await post_json(session, server.url + CHAT, with_image | STREAM_WITH_USAGE)
        text_only = await post_json(session, server.url + CHAT, BODIES[CHAT])
    assert first.json()["usage"]["prompt_tokens_details"] == {
        "cached_tokens": 0,
        "created_cache_tokens": full_blocks,
        "multimodal_tokens": {"image": IMAGE_TOKENS},
    }
    # The same prompt again hits the prefix cache; the stream's usage chunk drops nulls.
    assert orjson.loads(sse_data(again.body)[-2])["usage"]["prompt_tokens_details"] == {
        "cached_tokens": full_blocks,
        "created_cache_tokens": 0,
        "multimodal_tokens": {"image": IMAGE_TOKENS},
    }
    # No image: multimodal_tokens is null.
    assert text_only.json()["usage"]["prompt_tokens_details"]["multimodal_tokens"] is None


async def test_standin_keeps_usage_nulls_in_json_answers(
    standin: StandinServer, session: aiohttp.ClientSession
) -> None:
    usage = (await post_json(session, standin.url + CHAT, BODIES[CHAT])).json()["usage"]
    assert usage["prompt_tokens_details"] is None
    assert usage["completion_tokens_details"] is None


async def test_standin_answers_vllm_400_when_the_prompt_exceeds_the_context(
    standin: StandinServer, session: aiohttp.ClientSession
) -> None:
    standin.set_cache_config(max_model_len=PROMPT_TOKENS - 1)
    reply = await post_json(session, standin.url + CHAT, BODIES[CHAT])
    error = reply.json()["error"]
    assert reply.status == 400
    # Text alone over the context: vLLM says so while tokenizing, naming input_tokens.
    assert (error["type"], error["code"], error["param"]) == (
        "BadRequestError",
        400,
        "input_tokens",
    )
    assert f"at least {PROMPT_TOKENS} input tokens" in error["message"]


@pytest.mark.parametrize(
    ("raw", "error_type", "param"),
    [(b"{not json", "Bad Request", "body.1"), (b"[1, 2]", "BadRequestError", "body")],
    ids=["not-json", "not-an-object"],
)
async def test_standin_answers_400_for_a_body_that_is_not_a_json_object(
    standin: StandinServer,
    session: aiohttp.ClientSession,
    raw: bytes,
    error_type: str,
    param: str,
) -> None:
    headers = {"Content-Type": "application/json"}
    async with session.post(standin.url + CHAT, data=raw, headers=headers) as response:
        error = (await response.json())["error"]
    assert (response.status, error["type"], error["param"]) == (400, error_type, param)


@pytest.mark.parametrize(
    ("route", "status", "error_type"),
    [
        (CHAT, 503, "Service Unavailable"),
        (CHAT, 400, "BadRequestError"),
        (COMPLETIONS, 500, "InternalServerError"),
        (RESPONSES, 429, "Too Many Requests"),
    ],
    ids=["503", "400", "500", "429"],
)
async def test_standin_answers_a_vllm_error_body_for_a_status_fault(
    standin: StandinServer,
    session: aiohttp.ClientSession,
    route: str,
    status: int,
    error_type: str,
) -> None:
    reply = await post_json(
        session, standin.url + route, BODIES[route], headers=fault(f"status={status}")
    )
    body = reply.json()
    assert reply.status == status
    assert list(body) == ["error"]
    assert list(body["error"]) == ["message", "type", "param", "code"]
    assert (body["error"]["type"], body["error"]["code"]) == (error_type, status)


async def test_standin_answers_an_anthropic_error_body_on_messages(
    standin: StandinServer, session: aiohttp.ClientSession
) -> None:
    reply = await post_json(
        session, standin.url + MESSAGES, BODIES[MESSAGES], headers=fault("status=503")
    )
    body = reply.json()
    assert reply.status == 503
    # vLLM 0.32 wraps its own error type in Anthropic's envelope (tests/data/vllm).
    assert (body["type"], body["error"]["type"]) == ("error", "Service Unavailable")
    assert list(body["error"]) == ["type", "message"]


async def test_standin_answers_400_naming_the_header_for_an_unknown_fault(
    standin: StandinServer, session: aiohttp.ClientSession
) -> None:
    reply = await post_json(session, standin.url + CHAT, BODIES[CHAT], headers=fault("explode"))
    assert reply.status == 400
    assert reply.json()["error"]["param"] == "x-standin-fault"


async def test_standin_waits_before_the_first_byte_for_a_delay_fault(
    standin: StandinServer, session: aiohttp.ClientSession
) -> None:
    started = time.monotonic()
    reply = await post_json(session, standin.url + CHAT, BODIES[CHAT], headers=fault("delay=0.2"))
    assert reply.status == 200
    assert time.monotonic() - started >= 0.2


async def test_standin_spaces_sse_events_by_the_chunk_delay(
    standin: StandinServer, session: aiohttp.ClientSession
) -> None:
    started = time.monotonic()
    body = BODIES[CHAT] | {"stream": True}
    reply = await post_json(session, standin.url + CHAT, body, headers=fault("chunk-delay=0.02"))
    events = len(sse_data(reply.body))
    assert time.monotonic() - started >= (events - 1) * 0.02


async def test_standin_holds_streams_open_after_their_first_event_until_released(
    standin: StandinServer, session: aiohttp.ClientSession
) -> None:
    standin.hold_streams()
    body = BODIES[CHAT] | {"stream": True}
    async with session.post(standin.url + CHAT, json=body) as response:
        first = await response.content.readuntil(b"\n\n")
        assert sse_data(first)
        rest = asyncio.ensure_future(response.content.read())
        await asyncio.sleep(0.1)
        assert not rest.done()  # held open, nothing more sent
        standin.release_streams()
        tail = await asyncio.wait_for(rest, 5)
    assert sse_data(tail)[-1] == b"[DONE]"


@pytest.mark.parametrize("stream", [True, False], ids=["sse", "json"])
async def test_standin_resets_the_connection_mid_answer_for_a_reset_fault(
    standin: StandinServer, session: aiohttp.ClientSession, stream: bool
) -> None:
    body = BODIES[CHAT] | {"stream": stream}
    headers = {"x-standin-fault": "reset-after=2"}
    async with session.post(standin.url + CHAT, json=body, headers=headers) as response:
        assert response.status == 200
        with pytest.raises(aiohttp.ClientPayloadError):
            await response.read()


async def read_until_reset(response: aiohttp.ClientResponse) -> bytes:
    received = b""
    try:
        async for chunk in response.content.iter_any():
            received += chunk
    except aiohttp.ClientPayloadError:
        return received
    raise AssertionError("the stream ended without a reset")


async def test_standin_sends_exactly_k_events_before_a_reset(
    standin: StandinServer, session: aiohttp.ClientSession
) -> None:
    headers = {"x-standin-fault": "reset-after=3"}
    body = BODIES[CHAT] | {"stream": True}
    async with session.post(standin.url + CHAT, json=body, headers=headers) as response:
        received = await read_until_reset(response)
    assert len(sse_data(received)) == 3


async def test_standin_closes_before_the_headers_for_a_close_fault(
    standin: StandinServer, session: aiohttp.ClientSession
) -> None:
    with pytest.raises(aiohttp.ServerDisconnectedError):
        await post_json(session, standin.url + CHAT, BODIES[CHAT], headers=fault("close"))


async def test_standin_hangs_until_the_client_gives_up_for_a_hang_fault(
    standin: StandinServer, session: aiohttp.ClientSession
) -> None:
    with pytest.raises(TimeoutError):
        async with session.post(
            standin.url + CHAT,
            json=BODIES[CHAT],
            headers={"x-standin-fault": "hang"},
            timeout=aiohttp.ClientTimeout(total=0.2),
        ):
            pass
    await eventually(lambda: standin.counters.in_flight == 0, timeout_seconds=1)


@pytest.mark.parametrize("stream", [True, False], ids=["sse", "json"])
async def test_standin_sends_unparseable_data_for_a_malformed_fault(
    standin: StandinServer, session: aiohttp.ClientSession, stream: bool
) -> None:
    body = BODIES[CHAT] | {"stream": stream}
    reply = await post_json(session, standin.url + CHAT, body, headers=fault("malformed"))
    raw = reply.body
    assert reply.status == 200
    if stream:
        assert b"\n\nno field\n\n" in raw
        with pytest.raises(orjson.JSONDecodeError):
            orjson.loads(sse_data(raw)[1])
    else:
        with pytest.raises(orjson.JSONDecodeError):
            orjson.loads(raw)


async def test_standin_applies_the_configured_fault_unless_a_header_replaces_it(
    session: aiohttp.ClientSession,
) -> None:
    async with run_standin(StandinConfig(fault=Fault(status=503))) as server:
        configured = await post_json(session, server.url + CHAT, BODIES[CHAT])
        replaced = await post_json(
            session, server.url + CHAT, BODIES[CHAT], headers=fault("delay=0")
        )
    assert (configured.status, replaced.status) == (503, 200)


async def test_standin_health_follows_set_healthy(
    standin: StandinServer, session: aiohttp.ClientSession
) -> None:
    statuses = []
    for healthy in (True, False, True):
        standin.set_healthy(healthy)
        async with session.get(f"{standin.url}/health") as response:
            statuses.append((response.status, await response.read()))
    assert statuses == [(200, b""), (503, b""), (200, b"")]


async def test_standin_lists_the_served_model_with_max_model_len(
    standin: StandinServer, session: aiohttp.ClientSession
) -> None:
    async with session.get(f"{standin.url}/v1/models") as response:
        listing = await response.json()
    (card,) = listing["data"]
    assert listing["object"] == "list"
    assert (card["id"], card["object"], card["owned_by"]) == (
        CONFIG.served_model_name,
        "model",
        "vllm",
    )
    assert (card["max_model_len"], card["parent"]) == (4096, None)
    assert {"root", "created", "permission"} <= set(card)


async def test_standin_records_each_request_byte_for_byte(
    standin: StandinServer, session: aiohttp.ClientSession
) -> None:
    raw = b'{"model" : "m",\n  "messages": [{"role":"user","content":"h\\u00e9"}] }'
    headers = {"Content-Type": "application/json", "X-Trace": "abc"}
    async with session.post(f"{standin.url}{CHAT}?debug=1", data=raw, headers=headers):
        pass
    (recorded,) = standin.requests
    assert (recorded.method, recorded.path, recorded.query_string) == ("POST", CHAT, "debug=1")
    assert recorded.body == raw
    assert recorded.headers["X-Trace"] == "abc"


async def test_standin_records_nothing_when_recording_is_off(
    session: aiohttp.ClientSession,
) -> None:
    async with run_standin(StandinConfig(record_requests=False)) as server:
        await post_json(session, server.url + CHAT, BODIES[CHAT])
    assert server.requests == []


async def test_standin_echoes_other_requests_as_json(
    standin: StandinServer, session: aiohttp.ClientSession
) -> None:
    async with session.delete(
        f"{standin.url}/v2/anything?a=1&a=2", headers={"X-Custom": "yes"}
    ) as response:
        echo = await response.json()
    assert (echo["method"], echo["path"], echo["query_string"]) == (
        "DELETE",
        "/v2/anything",
        "a=1&a=2",
    )
    assert echo["query"] == [["a", "1"], ["a", "2"]]
    assert ["X-Custom", "yes"] in echo["headers"]


async def test_standin_echoes_a_large_body_back_unchanged(
    standin: StandinServer, session: aiohttp.ClientSession
) -> None:
    payload = bytes(range(256)) * (12 * 1024)  # 3 MiB, above aiohttp's default 1 MiB limit
    async with session.post(f"{standin.url}/echo/upload", data=io.BytesIO(payload)) as response:
        echoed = await response.read()
    assert echoed == payload
    assert standin.requests[-1].body == payload


async def test_make_standin_app_serves_under_the_aiohttp_test_client(
    aiohttp_client: AiohttpClient,
) -> None:
    app = make_standin_app(CONFIG)
    client = await aiohttp_client(app)
    response = await client.post(CHAT, json=BODIES[CHAT])
    assert (await response.json())["usage"]["prompt_tokens"] == PROMPT_TOKENS
    assert len(app[STATE].requests) == 1


async def test_standin_close_is_quick_with_a_hung_request_and_idempotent(
    session: aiohttp.ClientSession,
) -> None:
    server = await start_standin(CONFIG)
    hung = asyncio.create_task(
        post_json(session, server.url + CHAT, BODIES[CHAT], headers=fault("hang"))
    )
    await eventually(lambda: server.counters.in_flight == 1, timeout_seconds=1)
    started = time.monotonic()
    await server.close()
    await server.close()
    assert (await hung).status == 503
    assert time.monotonic() - started < 1.0


async def test_make_standin_app_ends_a_hung_request_when_the_client_leaves(
    aiohttp_client: AiohttpClient,
) -> None:
    app = make_standin_app(CONFIG)
    client = await aiohttp_client(app)
    with pytest.raises(TimeoutError):
        await client.post(
            CHAT,
            json=BODIES[CHAT],
            headers={"x-standin-fault": "hang"},
            timeout=aiohttp.ClientTimeout(total=0.1),
        )
    await eventually(lambda: app[STATE].counters.in_flight == 0, timeout_seconds=1)


async def test_standin_serves_the_model_under_its_aliases_and_refuses_other_names(
    session: aiohttp.ClientSession,
) -> None:
    config = dataclasses.replace(CONFIG, model_aliases=("m",))
    body = BODIES[CHAT]
    async with run_standin(config) as server:
        alias = await post_json(session, server.url + CHAT, body | {"model": "m"})
        unnamed = await post_json(session, server.url + CHAT, {**body, "model": None})
        other = await post_json(session, server.url + CHAT, body | {"model": "gpt-9"})
        anthropic = await post_json(
            session, server.url + MESSAGES, BODIES[MESSAGES] | {"model": "x"}
        )
        async with session.get(server.url + "/v1/models") as response:
            cards = (await response.json())["data"]
    assert (alias.status, unnamed.status) == (200, 200)
    assert other.status == 404
    assert other.json()["error"]["param"] == "model"
    assert other.json()["error"]["message"] == (
        f"The model `gpt-9` does not exist. Valid aliases: {config.served_model_name}, m."
    )
    message = f"The model `x` does not exist. Valid aliases: {config.served_model_name}, m."
    error = {"type": "NotFoundError", "message": message}
    assert anthropic.json() == {"type": "error", "error": error}
    assert [card["id"] for card in cards] == [config.served_model_name, "m"]


@pytest.mark.parametrize("load_images", [True, False], ids=["decoded", "not-decoded"])
async def test_standin_refuses_an_image_it_cannot_decode_unless_told_not_to_decode(
    session: aiohttp.ClientSession, load_images: bool
) -> None:
    config = dataclasses.replace(CONFIG, load_images=load_images)
    broken = "data:image/png;base64," + base64.b64encode(b"not an image").decode()
    content = [{"type": "image_url", "image_url": {"url": broken}}, {"type": "text", "text": "?"}]
    body = BODIES[CHAT] | {"messages": [{"role": "user", "content": content}]}
    async with run_standin(config) as server:
        reply = await post_json(session, server.url + CHAT, body)
    if load_images:
        assert reply.status == 400
        assert reply.json()["error"]["message"].startswith("Failed to load image: cannot identify")
    else:
        assert reply.status == 200
