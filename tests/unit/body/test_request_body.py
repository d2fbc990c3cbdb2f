"""body.request_body: fields per route, validation, and the lifting fast path (splicing:
``test_body_lift.py``)."""

from __future__ import annotations

import base64
import contextlib
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sidecar.body import request_body
from sidecar.body.refs import MediaSource
from sidecar.body.request_body import (
    COMPLETIONS_DEFAULT_MAX_TOKENS,
    BodyPolicy,
    PixelRange,
    parse_request_body,
)
from sidecar.errors import InvalidRequestError
from sidecar.routes import Route
from tests.support.bodies import parse, user

PAYLOAD = base64.b64encode(bytes(range(256)) * 3).decode()  # holds "+" and "/"
DATA_URI = f"data:image/png;base64,{PAYLOAD}"
USER = [{"role": "user", "content": "hi"}]


def body_of(**fields: Any) -> bytes:
    return orjson.dumps(fields)


def image_chat(*urls: str, **fields: Any) -> bytes:
    parts = [{"type": "image_url", "image_url": {"url": url}} for url in urls]
    return body_of(model="m", messages=[{"role": "user", "content": parts}], **fields)


FIELDS = [
    (Route.CHAT, {"messages": USER}, (None, None, 1, False, False), "chat defaults"),
    (
        Route.CHAT,
        {"model": "q", "messages": USER, "max_tokens": 9, "max_completion_tokens": 7, "n": 3},
        ("q", 7, 3, False, False),
        "chat max_completion_tokens wins",
    ),
    (Route.CHAT, {"messages": USER, "max_tokens": 9}, (None, 9, 1, False, False), "chat max"),
    (Route.CHAT, {"messages": USER, "max_tokens": 9.0}, (None, 9, 1, False, False), "float 9.0"),
    (
        Route.CHAT,
        {"messages": USER, "max_completion_tokens": None, "max_tokens": 4, "n": None},
        (None, 4, 1, False, False),
        "chat nulls",
    ),
    (
        Route.CHAT,
        {"messages": USER, "stream": True, "stream_options": {"include_usage": True}},
        (None, None, 1, True, True),
        "chat stream with usage",
    ),
    (Route.CHAT, {"messages": USER, "stream": True}, (None, None, 1, True, False), "no usage"),
    (
        Route.CHAT,
        {"messages": USER, "stream": False, "stream_options": {"include_usage": True}},
        (None, None, 1, False, False),
        "usage without stream",
    ),
    (
        Route.COMPLETIONS,
        {"prompt": "hi"},
        (None, COMPLETIONS_DEFAULT_MAX_TOKENS, 1, False, False),
        "completions default 16",
    ),
    (
        Route.COMPLETIONS,
        {"prompt": "hi", "max_tokens": None, "n": 2},
        (None, None, 2, False, False),
        "completions explicit null",
    ),
    (
        Route.COMPLETIONS,
        {
            "prompt": "hi",
            "max_tokens": 30,
            "stream": True,
            "stream_options": {"include_usage": 1 == 1},
        },
        (None, 30, 1, True, True),
        "completions stream",
    ),
    (
        Route.RESPONSES,
        {"input": "hi", "max_output_tokens": 11, "stream": True, "n": 5},
        (None, 11, 1, True, True),
        "responses",
    ),
    (
        Route.MESSAGES,
        {"model": "c", "messages": USER, "max_tokens": 12, "stream": True},
        ("c", 12, 1, True, True),
        "messages",
    ),
    (Route.MESSAGES, {"messages": USER}, (None, None, 1, False, False), "messages no max"),
]


@pytest.mark.parametrize(
    ("route", "fields", "expected"), [c[:3] for c in FIELDS], ids=[c[3] for c in FIELDS]
)
def test_parse_request_body_reads_the_pricing_fields_when_each_route_sends_them(
    route: Route, fields: dict[str, Any], expected: tuple[Any, ...]
) -> None:
    result = parse_request_body(body_of(**fields), route)
    assert result.route is route
    got = (result.model, result.max_output_tokens, result.n, result.stream, result.include_usage)
    assert got == expected


PROMPTS = [
    ("hello", (5, 0, 1), "string"),
    (["ab", "cde"], (5, 0, 2), "list of strings"),
    ([1, 2, 3], (0, 3, 1), "token ids"),
    ([[1, 2], [3]], (0, 3, 2), "lists of token ids"),
]


@pytest.mark.parametrize(
    ("prompt", "expected"), [c[:2] for c in PROMPTS], ids=[c[2] for c in PROMPTS]
)
def test_parse_request_body_counts_prompt_text_and_token_ids_when_completions_sends_each_form(
    prompt: Any, expected: tuple[int, int, int]
) -> None:
    result = parse_request_body(body_of(prompt=prompt), Route.COMPLETIONS)
    assert (result.text_chars, result.prompt_token_ids, len(result.sequences)) == expected
    assert result.images == ()


ERRORS: list[tuple[Route, bytes, str | None, str, str]] = [
    (Route.CHAT, b"{", None, "not valid JSON", "not JSON"),
    (Route.CHAT, b"", None, "not valid JSON", "empty"),
    (Route.CHAT, b'{"messages": [], "x": "\xff"}', None, "not valid UTF-8", "invalid UTF-8"),
    (Route.CHAT, b"[1]", None, "JSON object", "not an object"),
    (Route.CHAT, b'{"messages": "hi"}', "messages", "must be a list", "messages a string"),
    (Route.CHAT, b"{}", "messages", "must be a list", "messages missing"),
    (Route.CHAT, b'{"messages": [1]}', "messages", "must be an object", "message a number"),
    (Route.CHAT, b'{"messages": [{"content": 5}]}', "messages", "string", "content number"),
    (Route.CHAT, body_of(messages=USER, max_tokens=0), "max_tokens", "at least 1, got 0", "0"),
    (Route.CHAT, body_of(messages=USER, max_tokens="nine"), "max_tokens", "integer", "string"),
    (Route.CHAT, body_of(messages=USER, max_tokens=[9]), "max_tokens", "integer", "list"),
    (Route.CHAT, body_of(messages=USER, max_tokens=2.5), "max_tokens", "integer", "fraction"),
    (
        Route.CHAT,
        body_of(messages=USER, max_completion_tokens=-1),
        "max_completion_tokens",
        "at least 1",
        "negative",
    ),
    (Route.CHAT, body_of(messages=USER, n=0), "n", "n must be at least 1, got 0.", "n zero"),
    (Route.CHAT, body_of(messages=USER, n=[1]), "n", "integer", "n a list"),
    (Route.CHAT, body_of(messages=USER, stream="maybe"), "stream", "boolean", "stream string"),
    (Route.CHAT, body_of(messages=USER, stream_options=5), "stream_options", "object", "options"),
    (
        Route.CHAT,
        body_of(messages=USER, stream=True, stream_options={"include_usage": "maybe"}),
        "stream_options",
        "boolean",
        "include_usage string",
    ),
    (Route.CHAT, body_of(messages=USER, model=5), "model", "string", "model number"),
    (Route.COMPLETIONS, body_of(prompt=5), "prompt", "string or a list", "prompt number"),
    (Route.COMPLETIONS, body_of(prompt=[{}]), "prompt", "token ids", "prompt list of objects"),
    (Route.COMPLETIONS, body_of(prompt="x", max_tokens=0), "max_tokens", "at least 1", "max 0"),
    (Route.RESPONSES, body_of(), "input", "string or a list", "input missing"),
    (Route.RESPONSES, body_of(input=[3]), "input", "object", "input item number"),
    (Route.RESPONSES, body_of(input=[{"role": "user", "content": 3}]), "input", "string", "c"),
    (
        Route.RESPONSES,
        body_of(input="x", max_output_tokens=0),
        "max_output_tokens",
        "at least 1",
        "max_output_tokens 0",
    ),
    (Route.MESSAGES, body_of(messages=USER, system=5), "system", "string", "system number"),
    (Route.MESSAGES, body_of(messages=[2]), "messages", "object", "anthropic message number"),
    (Route.MESSAGES, body_of(messages={}), "messages", "must be a list", "anthropic messages"),
    (Route.MESSAGES, body_of(messages=USER, max_tokens=-5), "max_tokens", "at least 1", "max"),
    (Route.CHAT, b'{"messages": [{"content": "data:abc', None, "not valid JSON", "unterminated"),
    (Route.CHAT, b'{"messages": [], "a": "data:\\x"}', None, "not valid JSON", "bad escape"),
    (Route.CHAT, b'{"messages": [], "a": "data:\x01"}', None, "not valid JSON", "control"),
    (Route.CHAT, b'{"messages":[]}' + b" x", None, "not valid JSON", "trailing bytes"),
]


@pytest.mark.parametrize(
    ("route", "body", "param", "message"), [c[:4] for c in ERRORS], ids=[c[4] for c in ERRORS]
)
def test_parse_request_body_raises_a_400_with_vllms_param_when_the_body_is_invalid(
    route: Route, body: bytes, param: str | None, message: str
) -> None:
    with pytest.raises(InvalidRequestError) as caught:
        parse_request_body(body, route)
    assert caught.value.status == 400
    assert caught.value.param == param
    assert message in caught.value.message


def nested(depth: int) -> bytes:
    return b'{"messages": [], "x": ' + b"[" * (depth - 1) + b"]" * (depth - 1) + b"}"


@pytest.mark.parametrize(("depth", "ok"), [(64, True), (65, False), (2000, False)], ids=str)
def test_parse_request_body_rejects_the_body_when_it_nests_deeper_than_the_cap(
    depth: int, ok: bool
) -> None:
    if ok:
        assert parse_request_body(nested(depth), Route.CHAT).images == ()
        return
    with pytest.raises(InvalidRequestError, match=r"nested deeper|not valid JSON"):
        parse_request_body(nested(depth), Route.CHAT)


@pytest.mark.parametrize(
    ("route", "body"),
    [
        (Route.CHAT, image_chat("https://a", "https://b", "https://c")),
        (Route.CHAT, body_of(messages=[{"role": "user", "content": "x"}] * 4)),
        (Route.COMPLETIONS, body_of(prompt=["a", "b", "c", "d"])),
        (Route.RESPONSES, body_of(input=[{"role": "user", "content": "x"}] * 4)),
        (Route.MESSAGES, body_of(messages=USER, system=[{"type": "text", "text": "s"}] * 4)),
    ],
    ids=["chat parts", "chat messages", "completions batch", "responses items", "system blocks"],
)
def test_parse_request_body_rejects_the_body_when_it_carries_more_parts_than_the_cap(
    route: Route, body: bytes
) -> None:
    with pytest.raises(InvalidRequestError, match="Too many messages and content parts"):
        parse_request_body(body, route, policy=BodyPolicy(max_parts=3))


def test_parse_request_body_gives_the_same_result_when_payloads_carry_escaped_slashes() -> None:
    plain = image_chat(DATA_URI, "https://x/y.png")
    escaped = plain.replace(b"/", b"\\/")
    fast, slow = (parse_request_body(body, Route.CHAT) for body in (plain, escaped))
    assert bytes(fast.images[0].payload(plain)) == PAYLOAD.encode()
    assert bytes(slow.images[0].payload(escaped)) == PAYLOAD.encode()
    assert slow.images[0].payload_copy is not None
    span = slow.images[0].uri_span
    assert span is not None
    assert orjson.loads(b'"' + escaped[span[0] : span[1]] + b'"') == DATA_URI
    assert [(r.source, r.url, r.media_type) for r in slow.images] == [
        (r.source, r.url, r.media_type) for r in fast.images
    ]
    assert dict(slow.skeleton) == dict(fast.skeleton)


def test_parse_request_body_reads_anthropic_base64_when_it_carries_escaped_slashes() -> None:
    source = {"type": "base64", "media_type": "image/png", "data": PAYLOAD}
    message = {"role": "user", "content": [{"type": "image", "source": source}]}
    body = body_of(messages=[message]).replace(b"/", b"\\/")
    ref = parse_request_body(body, Route.MESSAGES).images[0]
    assert (ref.source, ref.bare_base64, bytes(ref.payload(body))) == (
        MediaSource.DATA,
        True,
        PAYLOAD.encode(),
    )


@pytest.mark.parametrize(
    "body",
    [
        b'{"messages": [{"role": "user", "content": "say \\"data:image/png;base64,AAAA\\" ok"}]}',
        b'{"messages": [{"role": "user", "content": "\\\\"}], "data:x": "data:y"}',
        b'{"messages": [], "data": {"data": 1}, "x": ["data", "data:"]}',
        b'{"messages": [], "data" : \t"abc", "data":\n[1]}',
        b'{"messages": [], "data"}',
        b'{"messages": [], "a": "data:a\\"b,c\\\\", "b": "data:"}',
        b'{"messages": [], "a": "data:\\u00e9,x", "b": ["data:\\ud800"]}',
    ],
    ids=[
        "escaped quote",
        "data key",
        "data not a string",
        "spaced data",
        "dangling data key",
        "quotes escaped inside",
        "unicode escapes",
    ],
)
def test_parse_request_body_matches_a_plain_parse_when_data_strings_sit_in_odd_places(
    body: bytes,
) -> None:
    try:
        expected = orjson.loads(body)
    except orjson.JSONDecodeError:
        with pytest.raises(InvalidRequestError):
            parse_request_body(body, Route.CHAT)
        return
    result = parse_request_body(body, Route.CHAT)
    assert (result.images, dict(result.skeleton)) == ((), expected)


def test_parse_request_body_keeps_user_nul_text_when_it_looks_like_a_placeholder() -> None:
    text = [{"type": "text", "text": "\x000"}, {"type": "text", "text": "\x00"}]
    parts = [*text, {"type": "image_url", "image_url": {"url": DATA_URI}}]
    result = parse_request_body(body_of(messages=[{"role": "user", "content": parts}]), Route.CHAT)
    assert len(result.images) == 1
    assert result.skeleton["messages"][0]["content"][:2] == text
    assert result.text_chars == 3


def test_parse_request_body_falls_back_to_a_full_parse_when_lifting_breaks_the_json(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(request_body, "lift_strings", lambda body, limit: (b"{", {}))
    result = parse_request_body(image_chat(DATA_URI), Route.CHAT)
    assert (result.images[0].source, result.images[0].uri_span) == (MediaSource.DATA, None)


def test_parse_request_body_stops_lifting_when_candidates_exceed_the_cap() -> None:
    image = {"type": "image_url", "image_url": {"url": DATA_URI}}
    messages = [{"role": "user", "content": [image]}]
    body = body_of(metadata=[DATA_URI, {"data": "x"}], messages=messages)
    result = parse_request_body(body, Route.CHAT, policy=BodyPolicy(max_parts=2))
    ref = result.images[0]
    assert (ref.uri_span, bytes(ref.payload(body))) == (None, PAYLOAD.encode())
    assert result.skeleton["metadata"] == [DATA_URI, {"data": "x"}]


def test_parse_request_body_stops_scanning_when_data_keys_without_strings_exceed_the_cap() -> None:
    messages = [{"role": "user", "content": [{"image_url": DATA_URI}]}]
    body = body_of(metadata=[{"data": 1}] * 5, messages=messages)
    ref = parse_request_body(body, Route.CHAT, policy=BodyPolicy(max_parts=2)).images[0]
    assert (ref.uri_span, bytes(ref.payload(body))) == (None, PAYLOAD.encode())


def test_parse_request_body_returns_a_read_only_skeleton() -> None:
    skeleton = parse_request_body(image_chat("https://x"), Route.CHAT).skeleton
    with pytest.raises(TypeError):
        skeleton["model"] = "other"  # type: ignore[index]


# Cases the fuzzers found (tests/fuzz/test_body.py), kept as plain tests.


def test_parse_request_body_keeps_a_uuid_that_starts_like_a_data_uri() -> None:
    part = {"type": "image_url", "image_url": None, "uuid": "data:cat"}
    body = orjson.dumps({"messages": [{"role": "user", "content": [part]}]})
    (ref,) = parse_request_body(body, Route.CHAT).images
    assert (ref.source, ref.uuid) == (MediaSource.CACHED, "data:cat")


@pytest.mark.parametrize(
    ("field", "value"),
    [("max_tokens", 2**63), ("n", 1e300), ("max_tokens", 123456789012345678901234567890)],
    ids=["max-tokens-past-int64", "n-1e300", "max-tokens-30-digits"],
)
def test_parse_request_body_refuses_a_count_past_int64_with_a_400(field: str, value: float) -> None:
    body = b'{"messages": [], "%s": %s}' % (field.encode(), str(value).encode())
    with pytest.raises(InvalidRequestError, match=f"{field} must be at most 9223372036854775807"):
        parse_request_body(body, Route.CHAT)


# Property tests ------------------------------------------------------------------------------

KEYS = ["type", "text", "image_url", "url", "uuid", "data", "source", "content", "messages"]
KEYS += ["input_audio", "video_url", "input", "prompt", "role", "max_tokens", "n", "stream"]
KEYS += ["image_pil", "image_embeds", "prompt_embeds", "system", "tools", "tool_calls", "output"]
SCALAR_VALUES = [DATA_URI, "data:", "data:,", "https://x", "\x00", "\x000", "data:a;base64,QUJD",
    "image_url", "input_image", "text", "image", "base64", "url", "tool_result", "input_audio",
    "video_url", "function_call", "function_call_output", "message", "tool_use",
    "thinking"]  # fmt: skip
SCALARS = st.sampled_from(SCALAR_VALUES)
LEAVES = st.none() | st.booleans() | st.integers(-3, 3) | st.floats(allow_nan=False) | st.text()
JSONISH = st.recursive(
    LEAVES | SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.sampled_from(KEYS), inner),
    max_leaves=25,
)
PARTISH = st.dictionaries(st.sampled_from(KEYS), JSONISH | SCALARS, max_size=4)
BODYISH = st.fixed_dictionaries(
    {
        "messages": st.lists(st.fixed_dictionaries({"content": st.lists(PARTISH)}), max_size=3),
        "input": st.lists(st.fixed_dictionaries({"role": SCALARS, "content": st.lists(PARTISH)})),
    }
) | st.dictionaries(st.sampled_from(KEYS), JSONISH)


@settings(max_examples=100, deadline=None)
@given(
    value=BODYISH,
    route=st.sampled_from(list(Route)),
    escape=st.booleans(),
    cut=st.integers(0, 400),
    byte=st.integers(0, 255),
)
def test_parse_request_body_raises_only_invalid_request_errors_when_bodies_are_random(
    value: dict[str, Any], route: Route, escape: bool, cut: int, byte: int
) -> None:
    body = orjson.dumps(value)
    if escape:
        body = body.replace(b"/", b"\\/")
    for candidate in (body, body[:cut], body[cut:], body[:cut] + bytes([byte]) + body[cut + 1 :]):
        with contextlib.suppress(InvalidRequestError):
            parse_request_body(candidate, route, policy=BodyPolicy(max_depth=8))


IMAGE_PARTS = st.sampled_from(
    [
        {"type": "image_url", "image_url": {"url": DATA_URI}},
        {"type": "image_url", "image_url": {"url": "https://x/a.png"}},
        {"image_url": DATA_URI},
        {"type": "input_image", "image_url": DATA_URI, "detail": "auto"},
        {"uuid": "u", "image_url": None},
    ]
)
OTHER_PARTS = st.sampled_from(
    [
        {"type": "text", "text": DATA_URI},
        {"type": "text", "text": "plain"},
        {"type": "video_url", "video_url": {"url": DATA_URI}},
        {"type": "input_audio", "input_audio": {"data": PAYLOAD, "format": "wav"}},
        DATA_URI,
    ]
)
CHAT_MESSAGES = st.lists(
    st.fixed_dictionaries(
        {"role": st.just("user"), "content": st.lists(IMAGE_PARTS | OTHER_PARTS, max_size=5)}
    ),
    min_size=1,
    max_size=4,
)


def naive_image_count(body: bytes) -> int:
    """Count image parts on a plain full parse, the slow way."""
    count = 0
    for message in orjson.loads(body)["messages"]:
        for part in message["content"]:
            is_dict = isinstance(part, dict)
            count += is_dict and ("image_url" in part or part.get("type") == "input_image")
    return count


@settings(max_examples=100, deadline=None)
@given(messages=CHAT_MESSAGES, escape=st.booleans(), metadata=JSONISH)
def test_parse_request_body_counts_images_like_a_full_parse_when_chat_bodies_are_valid(
    messages: list[dict[str, Any]], escape: bool, metadata: Any
) -> None:
    body = body_of(messages=messages, metadata=metadata)
    if escape:
        body = body.replace(b"/", b"\\/")
    result = parse_request_body(body, Route.CHAT)
    assert len(result.images) == naive_image_count(body)
    inline = [ref for ref in result.images if ref.source is MediaSource.DATA]
    assert all(bytes(ref.payload(body)) == PAYLOAD.encode() for ref in inline)
    assert result.skeleton["metadata"] == orjson.loads(body)["metadata"]


@pytest.mark.parametrize(
    "kwargs",
    [{"max_pixels": 0}, {"min_pixels": 0, "max_pixels": 0}, {"max_pixels": -5},
     {"size": {"longest_edge": 0}}, {"min_pixels": 1.5}, {"max_pixels": True}],
    ids=["max-zero", "both-zero", "negative", "size-edge-zero", "float", "bool"],
)  # fmt: skip
def test_trusted_pixel_bounds_that_are_not_positive_integers_are_a_400(
    kwargs: dict[str, Any],
) -> None:
    body = body_of(model="m", messages=USER, mm_processor_kwargs=kwargs)
    with pytest.raises(InvalidRequestError, match="positive integers") as refused:
        parse_request_body(body, Route.CHAT, policy=BodyPolicy(trust_request_mm_kwargs=True))
    assert refused.value.param == "mm_processor_kwargs"


def test_request_body_audio_form_is_read_without_decoding_the_file() -> None:
    boundary = "XyZ"
    parts = [
        ("model", b"whisper"),
        ("prompt", b"names: Ada"),
        ("max_completion_tokens", b"40"),
        ("file", b"\x00RIFF....WAVE" * 100),
    ]
    body = (
        b"".join(
            b'--%s\r\nContent-Disposition: form-data; name="%s"\r\n\r\n%s\r\n'
            % (boundary.encode(), name.encode(), value)
            for name, value in parts
        )
        + b"--%s--\r\n" % boundary.encode()
    )
    parsed = parse_request_body(
        body, Route.AUDIO_TRANSCRIPTIONS, content_type=f"multipart/form-data; boundary={boundary}"
    )
    assert parsed.model == "whisper"
    assert parsed.max_output_tokens == 40
    assert [item.kind for item in parsed.media] == ["audio"]
    assert parsed.sequences[0].text_chars == len("names: Ada")


def test_request_body_audio_needs_a_file() -> None:
    with pytest.raises(InvalidRequestError, match="multipart"):
        parse_request_body(b"{}", Route.AUDIO_TRANSLATIONS, content_type="application/json")


@pytest.mark.parametrize(
    ("field", "value"),
    [("mm_processor_kwargs", {"max_pixels": 4_000_000}), ("media_io_kwargs", {"video": {}})],
    ids=["processor", "media-io"],
)
def test_request_body_request_kwargs_are_refused_as_vllm_refuses_them_without_the_flag(
    field: str, value: dict[str, Any]
) -> None:
    with pytest.raises(InvalidRequestError, match="--trust-request-mm-kwargs") as caught:
        parse(Route.CHAT, messages=[user()], **{field: value})
    assert caught.value.param == field


def test_request_body_trusted_request_kwargs_set_the_request_pixel_range() -> None:
    trusted = BodyPolicy(trust_request_mm_kwargs=True)
    body = parse(
        Route.CHAT,
        trusted,
        messages=[user()],
        mm_processor_kwargs={"size": {"longest_edge": 4_000_000}, "min_pixels": 3136},
    )
    assert body.pixel_range == PixelRange(3136, 4_000_000)


def test_request_body_anthropic_ignores_request_kwargs_as_vllm_does() -> None:
    body = parse(
        Route.MESSAGES,
        model="m",
        max_tokens=4,
        messages=[{"role": "user", "content": "x"}],
        mm_processor_kwargs={"max_pixels": 1},
    )
    assert body.pixel_range is None


@pytest.mark.parametrize(
    "fields",
    [
        {"chat_template": "{{ messages }}"},
        {"chat_template_kwargs": {"chat_template": "{{ messages }}"}},
    ],
    ids=["field", "kwargs"],
)
def test_request_body_a_request_template_is_refused_unless_trusted(fields: dict[str, Any]) -> None:
    with pytest.raises(InvalidRequestError, match="--trust-request-chat-template"):
        parse(Route.CHAT, messages=[user()], **fields)
    trusted = BodyPolicy(trust_request_chat_template=True)
    assert parse(Route.CHAT, trusted, messages=[user()], **fields).chat_template is not None


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"continue_final_message": True}, "not compatible"),
        ({"continue_final_message": True, "add_generation_prompt": True}, "Cannot set both"),
    ],
    ids=["default-generation-prompt", "both"],
)
def test_request_body_continue_final_message_needs_add_generation_prompt_false(
    fields: dict[str, Any], message: str
) -> None:
    with pytest.raises(InvalidRequestError, match=message):
        parse(Route.CHAT, messages=[user()], **fields)
    ok = parse(
        Route.CHAT, messages=[user()], continue_final_message=True, add_generation_prompt=False
    )
    assert len(ok.sequences) == 1
