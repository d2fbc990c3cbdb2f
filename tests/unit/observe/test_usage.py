"""Reading vLLM's usage from JSON answers and from every route's stream."""

from __future__ import annotations

import pytest

from sidecar.observe.usage import Usage, UsageChunkStripper, UsageTap

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
