"""The stand-in vLLM, driven over real HTTP on 127.0.0.1 with a real aiohttp client."""

from __future__ import annotations

import asyncio
import io
import time
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any

import aiohttp
import orjson
import pytest
from prometheus_client.parser import text_string_to_metric_families
from pytest_aiohttp import AiohttpClient

from sidecar.standin import (
    STATE,
    Fault,
    StandinConfig,
    StandinServer,
    crude_prompt_tokens,
    make_standin_app,
    run_standin,
    start_standin,
)
from sidecar.standin.config import CRUDE_TOKENS_PER_IMAGE
from sidecar.standin.replies import StandinRequestError, plan_completion

PROMPT_TOKENS = 321
IMAGE_TOKENS = 64
CHAT, COMPLETIONS, RESPONSES, MESSAGES = (
    "/v1/chat/completions",
    "/v1/completions",
    "/v1/responses",
    "/v1/messages",
)
BODIES: dict[str, dict[str, Any]] = {
    CHAT: {"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4},
    COMPLETIONS: {"model": "m", "prompt": "hi", "max_tokens": 4},
    RESPONSES: {"model": "m", "input": "hi", "max_output_tokens": 4},
    MESSAGES: {"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4},
}
STREAM_WITH_USAGE = {"stream": True, "stream_options": {"include_usage": True}}


def fixed_prompt_tokens(body: Mapping[str, Any]) -> int:
    return PROMPT_TOKENS


def fixed_image_tokens(body: Mapping[str, Any]) -> int:
    return IMAGE_TOKENS


CONFIG = StandinConfig(
    prompt_tokens_fn=fixed_prompt_tokens,
    image_tokens_fn=fixed_image_tokens,
    completion_tokens=6,
    max_model_len=4096,
)


@pytest.fixture
async def standin() -> AsyncIterator[StandinServer]:
    async with run_standin(CONFIG) as server:
        yield server


@pytest.fixture
async def session() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as client:
        yield client


async def post(
    session: aiohttp.ClientSession, url: str, body: dict[str, Any], fault: str | None = None
) -> tuple[int, bytes]:
    headers = {} if fault is None else {"x-standin-fault": fault}
    async with session.post(url, json=body, headers=headers) as response:
        return response.status, await response.read()


async def eventually(condition: Callable[[], bool], seconds: float = 1.0) -> bool:
    """Poll ``condition`` until it holds or ``seconds`` pass."""
    for _ in range(int(seconds / 0.01)):
        if condition():
            return True
        await asyncio.sleep(0.01)
    return condition()


def sse_data(raw: bytes) -> list[bytes]:
    """The ``data:`` payloads of an SSE body, in order."""
    return [
        line.removeprefix(b"data: ")
        for event in raw.split(b"\n\n")
        for line in event.split(b"\n")
        if line.startswith(b"data: ")
    ]


async def scrape(session: aiohttp.ClientSession, server: StandinServer) -> dict[str, Any]:
    """Every sample on ``/metrics``, keyed by name and sorted labels."""
    async with session.get(f"{server.url}/metrics") as response:
        text = await response.text()
    return {
        sample.name + str(sorted(sample.labels.items())): sample
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def sample_value(samples: dict[str, Any], name: str, **labels: str) -> float:
    labels = {"engine": "0", "model_name": CONFIG.served_model_name} | labels
    value: float = samples[name + str(sorted(labels.items()))].value
    return value


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
    status, raw = await post(session, standin.url + route, BODIES[route])
    usage = orjson.loads(raw)["usage"]
    assert status == 200
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
    _, raw = await post(session, standin.url + route, BODIES[route])
    answer = orjson.loads(raw)
    node = answer
    for step in text_at:
        node = node[step]
    assert answer["object"] == kind
    assert isinstance(node, str)
    assert len(node.split()) == 4


async def test_standin_answers_an_anthropic_message_on_messages(
    standin: StandinServer, session: aiohttp.ClientSession
) -> None:
    _, raw = await post(session, standin.url + MESSAGES, BODIES[MESSAGES])
    answer = orjson.loads(raw)
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
    assert list(final) == ["id", "object", "created", "model", "choices", "usage"]
    assert (final["object"], final["choices"]) == (object_kind, [])
    assert final["usage"] == {
        "prompt_tokens": PROMPT_TOKENS,
        "total_tokens": PROMPT_TOKENS + 4,
        "completion_tokens": 4,
    }
    assert all(orjson.loads(chunk)["choices"] for chunk in chunks)


@pytest.mark.parametrize(
    "stream_options",
    [None, {"include_usage": False}],
    ids=["no-stream-options", "include-usage-false"],
)
async def test_standin_streams_no_usage_chunk_without_include_usage(
    standin: StandinServer, session: aiohttp.ClientSession, stream_options: object
) -> None:
    body = BODIES[CHAT] | {"stream": True, "stream_options": stream_options}
    _, raw = await post(session, standin.url + CHAT, body)
    *chunks, done = sse_data(raw)
    assert done == b"[DONE]"
    assert len(chunks) == 1 + 4 + 1  # role, one per token, finish
    assert all("usage" not in orjson.loads(chunk) for chunk in chunks)
    assert orjson.loads(chunks[-1])["choices"][0]["finish_reason"] == "length"


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
    _, raw = await post(session, standin.url + route, BODIES[route] | {"stream": True})
    events = {orjson.loads(data)["type"]: orjson.loads(data) for data in sse_data(raw)}
    node = events[final_event]
    for step in usage_at:
        node = node[step]
    assert node == 4
    assert f"event: {final_event}\n".encode() in raw


async def test_standin_reports_prompt_tokens_details_when_enabled(
    session: aiohttp.ClientSession,
) -> None:
    details = {"cached_tokens": 0, "multimodal_tokens": {"image": IMAGE_TOKENS}}
    config = StandinConfig(
        prompt_tokens_fn=fixed_prompt_tokens,
        image_tokens_fn=fixed_image_tokens,
        enable_prompt_tokens_details=True,
    )
    async with run_standin(config) as server:
        _, raw = await post(session, server.url + CHAT, BODIES[CHAT])
        _, streamed = await post(session, server.url + CHAT, BODIES[CHAT] | STREAM_WITH_USAGE)
    assert orjson.loads(raw)["usage"]["prompt_tokens_details"] == details
    assert orjson.loads(sse_data(streamed)[-2])["usage"]["prompt_tokens_details"] == details


async def test_standin_keeps_usage_nulls_in_json_answers(
    standin: StandinServer, session: aiohttp.ClientSession
) -> None:
    _, raw = await post(session, standin.url + CHAT, BODIES[CHAT])
    usage = orjson.loads(raw)["usage"]
    assert usage["prompt_tokens_details"] is None
    assert usage["completion_tokens_details"] is None


@pytest.mark.parametrize(
    ("limits", "prompt_tokens", "expected_tokens", "finish_reason"),
    [
        ({}, 100, 6, "stop"),
        ({"max_tokens": 3}, 100, 3, "length"),
        ({"max_completion_tokens": 2, "max_tokens": 5}, 100, 2, "length"),
        ({"max_output_tokens": 20}, 100, 6, "stop"),
        ({"max_tokens": 50}, 4094, 2, "length"),
    ],
    ids=["configured", "max-tokens", "max-completion-tokens-first", "limit-above", "context"],
)
def test_plan_completion_clamps_completion_tokens_like_vllm(
    limits: dict[str, int], prompt_tokens: int, expected_tokens: int, finish_reason: str
) -> None:
    config = StandinConfig(
        prompt_tokens_fn=lambda body: prompt_tokens, completion_tokens=6, max_model_len=4096
    )
    completion = plan_completion(config, CHAT, limits)
    assert completion.completion_tokens == expected_tokens
    assert completion.finish_reason == finish_reason


def test_plan_completion_refuses_a_prompt_longer_than_max_model_len() -> None:
    config = StandinConfig(prompt_tokens_fn=lambda body: 5000, max_model_len=4096)
    with pytest.raises(StandinRequestError, match=r"Input length \(5000\) exceeds .* \(4096\)"):
        plan_completion(config, CHAT, {})


async def test_standin_answers_vllm_400_when_the_prompt_exceeds_the_context(
    standin: StandinServer, session: aiohttp.ClientSession
) -> None:
    standin.set_cache_config(max_model_len=PROMPT_TOKENS - 1)
    status, raw = await post(session, standin.url + CHAT, BODIES[CHAT])
    error = orjson.loads(raw)["error"]
    assert status == 400
    assert (error["type"], error["code"], error["param"]) == ("BadRequestError", 400, None)


@pytest.mark.parametrize("raw", [b"{not json", b"[1, 2]"], ids=["not-json", "not-an-object"])
async def test_standin_answers_400_for_a_body_that_is_not_a_json_object(
    standin: StandinServer, session: aiohttp.ClientSession, raw: bytes
) -> None:
    headers = {"Content-Type": "application/json"}
    async with session.post(standin.url + CHAT, data=raw, headers=headers) as response:
        error = (await response.json())["error"]
    assert (response.status, error["type"]) == (400, "BadRequestError")


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ({"messages": [{"role": "user", "content": "abcdefgh"}]}, 2),
        (
            {
                "messages": [
                    {
                        "role": "user",
                        "content": [
                            {"type": "text", "text": "abcd"},
                            {"type": "image_url", "image_url": {"url": "data:image/png;base64,AA"}},
                            {"image_url": "https://example.invalid/cat.png"},
                        ],
                    }
                ]
            },
            1 + 2 * CRUDE_TOKENS_PER_IMAGE,
        ),
        (
            {"input": [{"role": "user", "content": [{"type": "input_image", "image_url": "x"}]}]},
            CRUDE_TOKENS_PER_IMAGE,
        ),
        (
            {"messages": [{"content": [{"type": "image", "source": {"data": "A" * 400}}]}]},
            CRUDE_TOKENS_PER_IMAGE,
        ),
        ({}, 1),
    ],
    ids=["text", "chat-images", "responses-image", "anthropic-image", "empty"],
)
def test_crude_prompt_tokens_counts_text_and_images(body: dict[str, Any], expected: int) -> None:
    assert crude_prompt_tokens(body) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", Fault()),
        ("delay=0.5", Fault(first_byte_delay_seconds=0.5)),
        ("status=503, chunk-delay=0.1", Fault(status=503, chunk_delay_seconds=0.1)),
        ("reset-after=2,malformed", Fault(reset_after_chunks=2, malformed=True)),
        (" hang ", Fault(hang=True)),
        ("close", Fault(close_before_headers=True)),
    ],
    ids=["empty", "delay", "status-and-chunk-delay", "reset-and-malformed", "hang", "close"],
)
def test_fault_parse_reads_the_header_vocabulary(text: str, expected: Fault) -> None:
    assert Fault.parse(text) == expected


@pytest.mark.parametrize(
    "text",
    ["explode", "status=200", "status=abc", "delay=-1", "hang=1", "delay"],
    ids=["unknown", "status-not-error", "status-not-number", "negative", "flag-value", "no-value"],
)
def test_fault_parse_refuses_bad_tokens(text: str) -> None:
    with pytest.raises(ValueError, match=r"fault"):
        Fault.parse(text)


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
    answer_status, raw = await post(session, standin.url + route, BODIES[route], f"status={status}")
    body = orjson.loads(raw)
    assert answer_status == status
    assert list(body) == ["error"]
    assert list(body["error"]) == ["message", "type", "param", "code"]
    assert (body["error"]["type"], body["error"]["code"]) == (error_type, status)


async def test_standin_answers_an_anthropic_error_body_on_messages(
    standin: StandinServer, session: aiohttp.ClientSession
) -> None:
    status, raw = await post(session, standin.url + MESSAGES, BODIES[MESSAGES], "status=503")
    body = orjson.loads(raw)
    assert status == 503
    assert (body["type"], body["error"]["type"]) == ("error", "overloaded_error")


async def test_standin_answers_400_naming_the_header_for_an_unknown_fault(
    standin: StandinServer, session: aiohttp.ClientSession
) -> None:
    status, raw = await post(session, standin.url + CHAT, BODIES[CHAT], "explode")
    assert status == 400
    assert orjson.loads(raw)["error"]["param"] == "x-standin-fault"


async def test_standin_waits_before_the_first_byte_for_a_delay_fault(
    standin: StandinServer, session: aiohttp.ClientSession
) -> None:
    started = time.monotonic()
    status, _ = await post(session, standin.url + CHAT, BODIES[CHAT], "delay=0.2")
    assert status == 200
    assert time.monotonic() - started >= 0.2


async def test_standin_spaces_sse_events_by_the_chunk_delay(
    standin: StandinServer, session: aiohttp.ClientSession
) -> None:
    started = time.monotonic()
    _, raw = await post(
        session, standin.url + CHAT, BODIES[CHAT] | {"stream": True}, "chunk-delay=0.02"
    )
    events = len(sse_data(raw))
    assert time.monotonic() - started >= (events - 1) * 0.02


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
        await post(session, standin.url + CHAT, BODIES[CHAT], "close")


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
    assert await eventually(lambda: standin.counters.in_flight == 0)


@pytest.mark.parametrize("stream", [True, False], ids=["sse", "json"])
async def test_standin_sends_unparseable_data_for_a_malformed_fault(
    standin: StandinServer, session: aiohttp.ClientSession, stream: bool
) -> None:
    body = BODIES[CHAT] | {"stream": stream}
    status, raw = await post(session, standin.url + CHAT, body, "malformed")
    assert status == 200
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
        configured, _ = await post(session, server.url + CHAT, BODIES[CHAT])
        replaced, _ = await post(session, server.url + CHAT, BODIES[CHAT], "delay=0")
    assert (configured, replaced) == (503, 200)


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


async def test_standin_metrics_show_the_cache_config_without_a_model_name(
    standin: StandinServer, session: aiohttp.ClientSession
) -> None:
    samples = await scrape(session, standin)
    (info,) = [s for s in samples.values() if s.name == "vllm:cache_config_info"]
    assert info.value == 1.0
    assert "model_name" not in info.labels
    assert {
        key: info.labels[key]
        for key in (
            "block_size",
            "num_gpu_blocks",
            "cache_dtype",
            "gpu_memory_utilization",
            "enable_prefix_caching",
            "engine",
        )
    } == {
        "block_size": "16",
        "num_gpu_blocks": "8192",
        "cache_dtype": "auto",
        "gpu_memory_utilization": "0.92",
        "enable_prefix_caching": "True",
        "engine": "0",
    }


async def test_standin_metrics_reflect_changes_made_at_run_time(
    standin: StandinServer, session: aiohttp.ClientSession
) -> None:
    standin.set_cache_config(num_gpu_blocks=1000, block_size=32)
    standin.set_load(kv_cache_usage_perc=0.75, num_requests_waiting=3, num_requests_running=2)
    standin.add_preemptions(5)
    samples = await scrape(session, standin)
    (info,) = [s for s in samples.values() if s.name == "vllm:cache_config_info"]
    assert (info.labels["num_gpu_blocks"], info.labels["block_size"]) == ("1000", "32")
    assert info.labels["kv_cache_size_tokens"] == "32000"
    assert sample_value(samples, "vllm:kv_cache_usage_perc") == 0.75
    assert sample_value(samples, "vllm:num_requests_waiting") == 3
    assert sample_value(samples, "vllm:num_requests_running") == 2
    assert sample_value(samples, "vllm:num_preemptions_total") == 5


async def test_standin_metrics_histogram_counts_the_prompt_tokens_it_served(
    standin: StandinServer, session: aiohttp.ClientSession
) -> None:
    for _ in range(3):
        await post(session, standin.url + CHAT, BODIES[CHAT])
    samples = await scrape(session, standin)
    name = "vllm:request_prompt_tokens"
    assert sample_value(samples, f"{name}_count") == 3
    assert sample_value(samples, f"{name}_sum") == 3 * PROMPT_TOKENS
    assert sample_value(samples, f"{name}_bucket", le="200.0") == 0
    assert sample_value(samples, f"{name}_bucket", le="500.0") == 3
    assert sample_value(samples, f"{name}_bucket", le="+Inf") == 3
    assert f"{name}_bucket" + str(sorted({"engine": "0", "le": "5000.0"}.items())) not in samples


async def test_standin_metrics_count_requests_in_flight_as_running(
    standin: StandinServer, session: aiohttp.ClientSession
) -> None:
    hung = asyncio.create_task(post(session, standin.url + CHAT, BODIES[CHAT], "hang"))
    assert await eventually(lambda: standin.counters.in_flight == 1)
    samples = await scrape(session, standin)
    hung.cancel()
    with pytest.raises(asyncio.CancelledError):
        await hung
    assert sample_value(samples, "vllm:num_requests_running") == 1


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
        await post(session, server.url + CHAT, BODIES[CHAT])
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
    hung = asyncio.create_task(post(session, server.url + CHAT, BODIES[CHAT], "hang"))
    assert await eventually(lambda: server.counters.in_flight == 1)
    started = time.monotonic()
    await server.close()
    await server.close()
    status, _ = await hung
    assert status == 503
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
    assert await eventually(lambda: app[STATE].counters.in_flight == 0)
