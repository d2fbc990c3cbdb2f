"""Images, media and text found in each route's content shapes, as vLLM 0.33 reads them."""

from __future__ import annotations

import base64
from typing import Any

import orjson
import pytest

from sidecar.body.refs import SUPPORTED_PART_TYPES, ImageRef, MediaSource
from sidecar.body.request_body import RequestBody, parse_request_body
from sidecar.errors import InvalidRequestError
from sidecar.routes import Route
from sidecar.text.messages_input import from_messages_body

PAYLOAD = base64.b64encode(bytes(range(256)) * 3).decode()  # holds "+" and "/"
DATA_URI = f"data:image/png;base64,{PAYLOAD}"
URL = "https://example.com/cat.jpg"
DATA, LINK, CACHED = MediaSource.DATA, MediaSource.URL, MediaSource.CACHED


def raw_chat(*parts: Any, **fields: Any) -> bytes:
    message = {"role": "user", "content": list(parts)}
    return orjson.dumps({"model": "m", "messages": [message], **fields})


def raw_messages(*blocks: Any, **fields: Any) -> bytes:
    message = {"role": "user", "content": list(blocks)}
    return orjson.dumps({"model": "m", "max_tokens": 5, "messages": [message], **fields})


def parsed(body: bytes, route: Route = Route.CHAT) -> RequestBody:
    return parse_request_body(body, route)


def summary(ref: ImageRef, body: bytes) -> tuple[Any, ...]:
    """Source, URL, media type, uuid, the value at uri_span, and the payload."""
    span = None if ref.uri_span is None else body[ref.uri_span[0] : ref.uri_span[1]].decode()
    payload = None if ref.source is not DATA else bytes(ref.payload(body)).decode()
    return ref.source, ref.url, ref.media_type, ref.uuid, span, payload


INLINE = (DATA, None, "image/png", None, DATA_URI, PAYLOAD)
CHAT_IMAGES = [
    ({"type": "image_url", "image_url": {"url": DATA_URI}}, INLINE, "typed data URI"),
    ({"type": "image_url", "image_url": {"url": URL}}, (LINK, URL, None, None, None, None), "url"),
    ({"image_url": URL}, (LINK, URL, None, None, None, None), "type-less string"),
    ({"image_url": DATA_URI}, INLINE, "type-less data URI"),
    ({"image_url": {"url": DATA_URI}}, INLINE, "type-less object"),
    (
        {"type": "input_image", "image_url": DATA_URI, "detail": "auto"},
        INLINE,
        "input_image data URI",
    ),
    (
        {"type": "input_image", "image_url": URL, "detail": "low"},
        (LINK, URL, None, None, None, None),
        "input_image",
    ),
    ({"uuid": "u1", "image_url": None}, (CACHED, None, None, "u1", None, None), "uuid cached"),
    (
        {"type": "image_url", "image_url": None, "uuid": "u2"},
        (CACHED, None, None, "u2", None, None),
        "typed uuid cached",
    ),
    ({"uuid": 7, "image_url": {"url": None}}, (CACHED, None, None, "7", None, None), "uuid int"),
    ({"uuid": "p", "image_pil": None}, (CACHED, None, None, "p", None, None), "image_pil cached"),
    (
        {"type": "image_url", "image_url": {"url": URL}, "uuid": "u3"},
        (LINK, URL, None, "u3", None, None),
        "url with uuid",
    ),
    (
        {"type": "image_url", "image_url": {"url": DATA_URI, "detail": "low"}, "detail": "high"},
        INLINE,
        "detail ignored",
    ),
    (
        {"type": "image_url", "image_url": {"url": "file:///tmp/a.png"}},
        (LINK, "file:///tmp/a.png", None, None, None, None),
        "other scheme kept",
    ),
    (
        {"type": "image_url", "image_url": {"url": "DATA:image/png;base64," + PAYLOAD}},
        (DATA, None, "image/png", None, None, PAYLOAD),
        "upper-case data URI is not lifted",
    ),
]


@pytest.mark.parametrize(
    ("part", "expected"), [c[:2] for c in CHAT_IMAGES], ids=[c[2] for c in CHAT_IMAGES]
)
def test_parse_request_body_finds_the_image_when_a_chat_part_has_each_vllm_shape(
    part: dict[str, Any], expected: tuple[Any, ...]
) -> None:
    body = raw_chat({"type": "text", "text": "look"}, part)
    result = parsed(body)
    assert [summary(ref, body) for ref in result.images] == [expected]
    assert result.media == ()


def test_parse_request_body_numbers_images_in_order_of_appearance_across_messages() -> None:
    first = {"role": "user", "content": [{"image_url": URL}, {"image_url": DATA_URI}]}
    second = {
        "role": "user",
        "content": [{"type": "input_image", "image_url": URL + "?2", "detail": "high"}],
    }
    result = parsed(orjson.dumps({"messages": [first, second]}))
    assert [(ref.index, ref.source) for ref in result.images] == [(0, LINK), (1, DATA), (2, LINK)]
    assert result.images[2].url == URL + "?2"


MEDIA = [
    ({"type": "video_url", "video_url": {"url": URL}}, ("video", LINK, URL), "video url"),
    ({"video_url": URL}, ("video", LINK, URL), "type-less video"),
    ({"type": "video_url", "video_url": {"url": DATA_URI}}, ("video", DATA, None), "video data"),
    ({"type": "audio_url", "audio_url": {"url": URL}}, ("audio", LINK, URL), "audio url"),
    ({"audio_url": URL}, ("audio", LINK, URL), "type-less audio"),
    (
        {"type": "input_audio", "input_audio": {"data": PAYLOAD, "format": "wav"}},
        ("audio", DATA, None),
        "input_audio",
    ),
    ({"type": "image_embeds", "image_embeds": PAYLOAD}, ("embeds", DATA, None), "embeds string"),
    ({"type": "image_embeds", "image_embeds": {"a": "b"}}, ("embeds", DATA, None), "embeds dict"),
    ({"type": "prompt_embeds", "data": PAYLOAD}, ("embeds", DATA, None), "prompt embeds"),
    ({"uuid": "v", "video_embeds": None}, ("embeds", CACHED, None), "cached embeds"),
    ({"uuid": "v", "video_url": None}, ("video", CACHED, None), "cached video"),
]


@pytest.mark.parametrize(("part", "expected"), [c[:2] for c in MEDIA], ids=[c[2] for c in MEDIA])
def test_parse_request_body_records_a_media_item_when_a_part_is_video_audio_or_embeds(
    part: dict[str, Any], expected: tuple[Any, ...]
) -> None:
    result = parsed(raw_chat(part))
    assert [(item.kind, item.source, item.url) for item in result.media] == [expected]
    assert result.images == ()


def test_parse_request_body_points_media_spans_at_the_payload_when_audio_is_inline() -> None:
    body = raw_chat({"type": "input_audio", "input_audio": {"data": PAYLOAD, "format": "wav"}})
    item = parsed(body).media[0]
    assert item.uri_span is not None
    assert body[item.uri_span[0] : item.uri_span[1]].decode() == PAYLOAD


TEXT_PARTS = [
    ({"type": "text", "text": "abcd"}, 4, "text"),
    ({"type": "input_text", "text": "abcd"}, 4, "input_text"),
    ({"type": "output_text", "text": "abc"}, 3, "output_text"),
    ({"type": "refusal", "refusal": "no"}, 2, "refusal"),
    ({"type": "thinking", "thinking": "hmm"}, 3, "thinking"),
    ({"type": "tool_reference", "name": "search"}, 6, "tool_reference"),
    ("plain", 5, "string part"),
    ({"type": "text", "text": None}, 0, "null text skipped"),
    ({"type": "text", "text": "h\u00e9llo \u2603"}, 7, "non-ASCII counted in characters"),
    ({"type": "text", "text": DATA_URI}, len(DATA_URI), "data URI in text"),
]


@pytest.mark.parametrize(
    ("part", "chars"), [c[:2] for c in TEXT_PARTS], ids=[c[2] for c in TEXT_PARTS]
)
def test_parse_request_body_counts_characters_when_a_part_carries_text(
    part: Any, chars: int
) -> None:
    result = parsed(raw_chat(part))
    assert result.text_chars == chars
    assert result.images == ()


def test_parse_request_body_treats_a_data_uri_as_text_when_it_is_not_in_an_image_part() -> None:
    body = orjson.dumps(
        {
            "messages": [
                {"role": "user", "content": DATA_URI},
                {"role": "assistant", "content": None},
            ],
            "metadata": {"note": DATA_URI, "data": PAYLOAD, "list": [DATA_URI]},
        }
    )
    result = parsed(body)
    assert result.images == ()
    assert result.text_chars == len(DATA_URI)
    assert dict(result.skeleton) == orjson.loads(body)


def test_parse_request_body_counts_message_extras_when_assistant_reasons_and_calls_tools() -> None:
    call = [{"id": "1", "type": "function", "function": {"name": "f", "arguments": '{"a":1}'}}]
    tools = [{"type": "function", "function": {"name": "f", "parameters": {"data": "xyz"}}}]
    message = {"role": "assistant", "content": "ok", "reasoning_content": "why", "tool_calls": call}
    result = parsed(orjson.dumps({"messages": [message], "tools": tools}))
    assert result.text_chars == 2 + 3 + len(orjson.dumps(call)) + len(orjson.dumps(tools))
    assert result.skeleton["tools"] == tools


def test_parse_request_body_puts_numbered_placeholders_in_the_skeleton_for_inline_payloads() -> (
    None
):
    body = raw_chat({"image_url": URL}, {"image_url": DATA_URI}, {"video_url": DATA_URI})
    content = parsed(body).skeleton["messages"][0]["content"]
    assert content == [{"image_url": URL}, {"image_url": "<image 1>"}, {"video_url": "<video 0>"}]


ANTHROPIC_IMAGES = [
    (
        {"type": "base64", "media_type": "image/png", "data": PAYLOAD},
        (DATA, None, "image/png", None, PAYLOAD, PAYLOAD),
        "base64",
    ),
    (
        {"type": "base64", "data": PAYLOAD},
        (DATA, None, "image/jpeg", None, PAYLOAD, PAYLOAD),
        "base64 default media type",
    ),
    ({"type": "url", "url": URL}, (LINK, URL, None, None, None, None), "url"),
    ({"type": "url", "url": DATA_URI}, INLINE, "url holding a data URI"),
]


@pytest.mark.parametrize(
    ("source", "expected"), [c[:2] for c in ANTHROPIC_IMAGES], ids=[c[2] for c in ANTHROPIC_IMAGES]
)
def test_parse_request_body_finds_the_image_when_an_anthropic_block_has_each_source(
    source: dict[str, Any], expected: tuple[Any, ...]
) -> None:
    body = raw_messages({"type": "text", "text": "look"}, {"type": "image", "source": source})
    result = parsed(body, Route.MESSAGES)
    assert [summary(ref, body) for ref in result.images] == [expected]
    assert result.images[0].bare_base64 is (source["type"] == "base64")


def test_parse_request_body_finds_images_when_they_are_nested_in_an_anthropic_tool_result() -> None:
    image = {
        "type": "image",
        "source": {"type": "base64", "media_type": "image/png", "data": PAYLOAD},
    }
    result_block = {
        "type": "tool_result",
        "tool_use_id": "t",
        "content": [{"type": "text", "text": "shot"}, image],
    }
    use = {"type": "tool_use", "id": "t", "name": "snap", "input": {"q": 1}}
    body = orjson.dumps(
        {
            "max_tokens": 9,
            "system": [{"type": "text", "text": "sys"}],
            "messages": [
                {"role": "assistant", "content": [use]},
                {
                    "role": "user",
                    "content": [result_block, {"type": "tool_result", "content": "ok"}],
                },
                {
                    "role": "user",
                    "content": [{"type": "image", "source": {"type": "url", "url": URL}}],
                },
            ],
        }
    )
    result = parsed(body, Route.MESSAGES)
    assert [(ref.index, ref.source) for ref in result.images] == [(0, DATA), (1, LINK)]
    # A tool_use block is counted as its whole JSON: the template frames it as a tool call.
    assert result.text_chars == len("sys") + len(orjson.dumps(use)) + len("shot") + 2


def test_parse_request_body_ignores_anthropic_blocks_when_they_carry_no_prompt_text() -> None:
    blocks = [
        {"type": "document", "source": {"type": "base64", "data": PAYLOAD}},
        {"type": "redacted_thinking", "data": PAYLOAD},
        {"type": "container_upload", "file_id": "f"},
    ]
    result = parsed(raw_messages(*blocks), Route.MESSAGES)
    assert (result.images, result.text_chars) == ((), 0)
    assert result.skeleton["messages"][0]["content"] == blocks


def test_parse_request_body_counts_the_anthropic_system_when_it_is_a_string() -> None:
    body = orjson.dumps({"system": "be brief", "messages": [{"role": "user", "content": "hi"}]})
    assert parsed(body, Route.MESSAGES).text_chars == len("be brief") + 2


def test_parse_request_body_finds_images_when_responses_input_is_a_list_of_items() -> None:
    items = [
        {"role": "system", "content": "rules"},
        {
            "type": "message",
            "role": "user",
            "content": [
                {"type": "input_text", "text": "what"},
                {"type": "input_image", "image_url": DATA_URI, "detail": "auto"},
                {"type": "input_image", "image_url": URL},
            ],
        },
        {"type": "function_call", "name": "f", "arguments": "{}", "call_id": "c"},
        {"type": "function_call_output", "call_id": "c", "output": "done"},
        {"type": "reasoning", "summary": []},
    ]
    body = orjson.dumps({"input": items, "instructions": "be kind", "max_output_tokens": 7})
    result = parsed(body, Route.RESPONSES)
    assert [summary(ref, body) for ref in result.images] == [
        INLINE,
        (LINK, URL, None, None, None, None),
    ]
    # A function call is counted as its whole JSON: the template frames it as a tool call.
    call_chars = len(orjson.dumps(items[2]))
    assert result.text_chars == len("rules") + 4 + call_chars + 4 + len("be kind")


def test_parse_request_body_counts_text_when_responses_input_is_a_string() -> None:
    result = parsed(orjson.dumps({"input": "hello there"}), Route.RESPONSES)
    assert (result.text_chars, result.images) == (11, ())


PART_ERRORS = [
    (
        {"type": "file", "file": {}},
        "type",
        "Unsupported chat content part type: 'file'. Supported types: "
        + ", ".join(SUPPORTED_PART_TYPES),
        "unknown type",
    ),
    ({"type": 5}, "type", "Invalid 'type' field in multimodal part.", "type not a string"),
    ({"foo": 1}, "type", "Missing 'type' field in multimodal part.", "no type"),
    (
        {"type": "text", "text": "x", "uuid": "u"},
        "type",
        "Missing 'type' field in multimodal part.",
        "uuid on a text part",
    ),
    ({"type": "image_url", "image_url": URL}, "image_url", "object", "typed image_url string"),
    ({"type": "image_url", "image_url": {}}, "image_url", "'url' must be", "image_url no url"),
    ({"type": "image_url", "image_url": {"url": 5}}, "image_url", "'url' must", "url number"),
    ({"image_url": ["x"]}, "image_url", "must be a string", "type-less image_url list"),
    (
        {"type": "input_image", "image_url": None, "detail": "auto"},
        "image_url",
        "must be",
        "input_image null",
    ),
    ({"type": "image_pil", "image_pil": "x"}, "image_pil", "JSON", "image_pil value"),
    ({"type": "input_audio", "input_audio": "x"}, "input_audio", "object", "input_audio string"),
    ({"type": "text", "text": 5}, "text", "'text' must be a string", "text number"),
    (
        {"type": "image_url", "image_url": {"url": "data:image/png;base64"}},
        "image_url",
        "Invalid data URL: missing ',' separator.",
        "data URI without comma",
    ),
    (
        {"image_url": "data:image/svg+xml;utf8,<svg/>"},
        "image_url",
        "Only base64 data URLs are supported for now.",
        "data URI not base64",
    ),
    (
        {"image_url": "DATA:image/png"},
        "image_url",
        "Invalid data URL: missing ',' separator.",
        "unlifted data URI without comma",
    ),
    (7, "messages", "object or a string", "part a number"),
]


@pytest.mark.parametrize(
    ("part", "param", "message"), [c[:3] for c in PART_ERRORS], ids=[c[3] for c in PART_ERRORS]
)
def test_parse_request_body_rejects_the_part_when_vllm_would_refuse_it(
    part: Any, param: str, message: str
) -> None:
    with pytest.raises(InvalidRequestError) as caught:
        parsed(raw_chat(part))
    assert caught.value.status == 400
    assert caught.value.param == param
    assert message in caught.value.message


ANTHROPIC_ERRORS = [
    ({"type": "video"}, "type", "Unsupported content block type: 'video'", "unknown block"),
    ({"type": "image", "source": "x"}, "source", "'source' must be an object", "source a string"),
    ({"type": "image", "source": {"type": "base64", "data": 5}}, "source", "'data'", "data number"),
    ({"type": "image", "source": {"type": "url"}}, "source", "'url'", "url missing"),
    (3, "messages", "must be an object", "block a number"),
    ({"type": "text", "text": ["x"]}, "text", "must be a string", "text a list"),
]


@pytest.mark.parametrize(
    ("block", "param", "message"),
    [c[:3] for c in ANTHROPIC_ERRORS],
    ids=[c[3] for c in ANTHROPIC_ERRORS],
)
def test_parse_request_body_rejects_the_anthropic_block_when_it_is_malformed(
    block: Any, param: str, message: str
) -> None:
    with pytest.raises(InvalidRequestError) as caught:
        parsed(raw_messages(block), Route.MESSAGES)
    assert (caught.value.param, message in caught.value.message) == (param, True)


BASE64_SOURCE = {"type": "base64", "media_type": "image/png", "data": PAYLOAD}
URL_SOURCE = {"type": "url", "url": URL}
# Found by the differential tier: vLLM's Anthropic conversion skips these images, so refusing
# them (or pricing them) was wrong.
SKIPPED_ANTHROPIC_IMAGES = {
    "no source": {"role": "user", "content": [{"type": "image"}]},
    "null source": {"role": "user", "content": [{"type": "image", "source": None}]},
    "empty source": {"role": "user", "content": [{"type": "image", "source": {}}]},
    "in a system turn": {
        "role": "system",
        "content": [{"type": "image", "source": BASE64_SOURCE}, {"type": "text", "text": "s"}],
    },
    "in an assistant's tool result": {
        "role": "assistant",
        "content": [{"type": "tool_result", "content": [{"type": "image", "source": URL_SOURCE}]}],
    },
    "a URL source without a URL in a tool result": {
        "role": "user",
        "content": [
            {"type": "tool_result", "content": [{"type": "image", "source": {"type": "url"}}]}
        ],
    },
    "items vLLM ignores in a tool result": {
        "role": "user",
        "content": [{"type": "tool_result", "content": [3, {"type": "video"}, {"x": 1}]}],
    },
}
LOADED_ANTHROPIC_IMAGES = {
    "an assistant's image": {
        "role": "assistant",
        "content": [{"type": "image", "source": URL_SOURCE}],
    },
    "a user's tool result": {
        "role": "user",
        "content": [
            {"type": "tool_result", "content": [{"type": "image", "source": BASE64_SOURCE}]},
            {"type": "tool_result", "content": [{"type": "image", "source": URL_SOURCE}]},
        ],
    },
}


def _messages_body(message: dict[str, Any], **fields: Any) -> bytes:
    return orjson.dumps({"model": "m", "max_tokens": 5, "messages": [message], **fields})


@pytest.mark.parametrize("message", SKIPPED_ANTHROPIC_IMAGES.values(), ids=SKIPPED_ANTHROPIC_IMAGES)
def test_parse_request_body_skips_the_anthropic_images_vllm_skips(message: Any) -> None:
    assert parsed(_messages_body(message), Route.MESSAGES).images == ()


def test_parse_request_body_skips_images_in_the_anthropic_system_field() -> None:
    system = [{"type": "image", "source": BASE64_SOURCE}, {"type": "text", "text": "be brief"}]
    body = parsed(_messages_body({"role": "user", "content": "hi"}, system=system), Route.MESSAGES)
    assert body.images == ()
    assert body.text_chars == len("be brief") + len("hi")


@pytest.mark.parametrize("message", LOADED_ANTHROPIC_IMAGES.values(), ids=LOADED_ANTHROPIC_IMAGES)
def test_parse_request_body_finds_the_anthropic_images_vllm_loads(message: Any) -> None:
    images = parsed(_messages_body(message), Route.MESSAGES).images
    sources = [ref.source for ref in images]
    assert sources == ([DATA, LINK] if len(message["content"]) == 2 else [LINK])


# Exact text counting does not render an image printed as text: it estimates that body.
CONVERTED_ANTHROPIC_IMAGES = {
    name: message
    for name, message in {**SKIPPED_ANTHROPIC_IMAGES, **LOADED_ANTHROPIC_IMAGES}.items()
    if name != "in an assistant's tool result"
}


@pytest.mark.parametrize(
    "message", CONVERTED_ANTHROPIC_IMAGES.values(), ids=CONVERTED_ANTHROPIC_IMAGES
)
def test_the_images_found_are_those_of_the_chat_request_vllm_builds(message: Any) -> None:
    # The image finder and the conversion exact text counting renders read one body alike.
    chat = from_messages_body({"messages": [message]}, merge_inline_system=False)
    converted = sum(
        1
        for turn in chat.messages
        if isinstance(turn.get("content"), list)
        for part in turn["content"]
        if part.get("type") == "image_url"
    )
    assert len(parsed(_messages_body(message), Route.MESSAGES).images) == converted


def test_image_ref_payload_raises_when_the_image_is_not_inline() -> None:
    with pytest.raises(ValueError, match="no inline payload"):
        ImageRef(0, LINK, url=URL).payload(b"")
    with pytest.raises(ValueError, match="cannot be rewritten"):
        ImageRef(0, LINK, url=URL).replacement("image/png", b"AAAA")


def test_parse_request_body_reads_the_tool_change_blocks_vllm_takes() -> None:
    # Found by the differential tier: vLLM 0.33's Anthropic blocks include tool_reference,
    # tool_addition and tool_removal, which the sidecar had refused.
    bare = parsed(raw_messages({"type": "tool_reference", "tool_name": "search"}), Route.MESSAGES)
    assert bare.sequences[0].text_chars == 0  # vLLM renders a bare reference as nothing
    tool = {"type": "custom", "name": "search", "input_schema": {"type": "object"}}
    added = parsed(raw_messages({"type": "tool_addition", "tool": tool}), Route.MESSAGES)
    assert added.sequences[0].text_chars == len(orjson.dumps(tool))  # its definition joins
    removed = parsed(raw_messages({"type": "tool_removal", "tool": {"name": "s"}}), Route.MESSAGES)
    assert removed.sequences[0].text_chars == 0
