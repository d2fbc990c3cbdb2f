"""Hypothesis strategies for the fuzz tests: request bodies of every route, and their mutations.

Bodies are grown from each route's grammar (the shapes ``body.refs`` walks), with any field
liable to be replaced by hostile JSON, then serialised and, often, mangled byte by byte: cut,
spliced, escaped, nested, given duplicate keys or invalid UTF-8. ``examples(n)`` is the number
of cases a fuzz test runs: ``n`` in ``make test``, ``FUZZ_EXAMPLES`` under ``make fuzz``.
"""

from __future__ import annotations

import base64
import json
import os
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from fuzz.images import seeds
from sidecar.body.refs import ANTHROPIC_BLOCK_TYPES, SUPPORTED_PART_TYPES
from sidecar.routes import BodyShape, Route


def examples(default: int) -> settings:
    """Hypothesis settings for a fuzz test: ``default`` cases, or ``FUZZ_EXAMPLES`` when set."""
    count = int(os.environ.get("FUZZ_EXAMPLES", default))
    return settings(
        max_examples=count,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )


SEED_IMAGES = seeds()
SMALL_PAYLOADS = [base64.b64encode(raw).decode() for raw in SEED_IMAGES.values()]
MEDIA_TYPES = ["image/png", "image/jpeg", "image/webp", "", "IMAGE/GIF", "text/plain", "image/x"]

TRICKY_STRINGS = [
    "", "data:", "data:,", "data:;base64,", "DATA:image/png;base64,iVBORw0KGgo=",
    "data:image/png,raw",
    "data:image/png;base64,!!!!", "data:image/png;base64,QUJD", "data:image/png;base64,QQ",
    "https://example.test/a.png", "http://169.254.169.254/", "file:///etc/passwd", "ftp://x/y",
    "\x00", "\x000", "\x00\x00", "\\", '"', '"data":', "data", "base64", "\u2028", "\ud7ff",
    "\U0001f600", "image_url", "input_image", "text", "image", "url", "tool_result",
]  # fmt: skip

KEYS = sorted(
    {
        "type", "text", "image_url", "url", "uuid", "data", "source", "content", "messages",
        "input_audio", "video_url", "audio_url", "input", "prompt", "role", "max_tokens", "n",
        "stream", "stream_options", "include_usage", "image_pil", "image_embeds", "prompt_embeds",
        "system", "tools", "tool_calls", "output", "media_type", "model", "max_completion_tokens",
        "max_output_tokens", "instructions", "name", "arguments", "thinking", "reasoning",
        "reasoning_content", "detail", "format", "refusal",
    }
)  # fmt: skip

TEXT = st.text(max_size=24) | st.sampled_from(TRICKY_STRINGS)
NUMBERS = (
    st.integers(-3, 3)
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.sampled_from([0, 1, 2**31, 2**63 - 1, 2**63, 2**64 - 1, 1e300, -0.0, 1.5])
)
LEAVES = st.none() | st.booleans() | NUMBERS | TEXT
JUNK = st.recursive(
    LEAVES,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.sampled_from(KEYS), inner),
    max_leaves=12,
)


def maybe(value: st.SearchStrategy[Any], junk_odds: int = 12) -> st.SearchStrategy[Any]:
    """``value``, or now and then hostile JSON in its place."""
    return st.integers(0, junk_odds - 1).flatmap(lambda roll: JUNK if roll == 0 else value)


@st.composite
def data_uris(draw: st.DrawFn) -> str:
    """A data URI holding a real small image, often damaged."""
    payload = draw(st.sampled_from(SMALL_PAYLOADS))
    kind = draw(st.integers(0, 9))
    if kind == 0:
        cut = draw(st.integers(0, len(payload)))
        payload = payload[:cut]
    elif kind == 1:
        at = draw(st.integers(0, len(payload)))
        payload = (
            payload[:at] + draw(st.sampled_from(["=", "\n", " ", "-", "_", "\\/"])) + payload[at:]
        )
    elif kind == 2:
        payload = payload.replace("/", "\\/")  # JSON-escaped slashes: the lifter's slow path
    media_type = draw(st.sampled_from(MEDIA_TYPES))
    params = draw(st.sampled_from([";base64", ";base64", ";charset=x;base64", "", ";BASE64"]))
    return f"data:{media_type}{params},{payload}"


IMAGE_VALUES = data_uris() | st.sampled_from(["https://example.test/cat.jpg", "http://x"]) | TEXT


def chat_part() -> st.SearchStrategy[Any]:
    typed = st.fixed_dictionaries(
        {"type": maybe(st.sampled_from([*SUPPORTED_PART_TYPES, "image", "bogus"]))},
        optional={
            "text": maybe(TEXT),
            "image_url": maybe(st.fixed_dictionaries({"url": IMAGE_VALUES}) | IMAGE_VALUES),
            "video_url": maybe(st.fixed_dictionaries({"url": IMAGE_VALUES})),
            "audio_url": maybe(st.fixed_dictionaries({"url": IMAGE_VALUES})),
            "input_audio": maybe(st.fixed_dictionaries({"data": TEXT, "format": TEXT})),
            "uuid": maybe(TEXT),
            "image_embeds": maybe(TEXT),
            "data": maybe(TEXT),
        },
    )
    typeless = st.fixed_dictionaries(
        {}, optional={"image_url": maybe(IMAGE_VALUES), "uuid": maybe(TEXT), "text": TEXT}
    )
    return typed | typeless | TEXT


def chat_message() -> st.SearchStrategy[Any]:
    return st.fixed_dictionaries(
        {"role": maybe(st.sampled_from(["user", "assistant", "system", "tool"]))},
        optional={
            "content": maybe(TEXT | st.lists(maybe(chat_part()), max_size=5) | st.none()),
            "reasoning_content": maybe(TEXT),
            "tool_calls": JUNK,
        },
    )


COMMON = {
    "model": maybe(TEXT),
    "stream": maybe(st.booleans()),
    "stream_options": maybe(st.fixed_dictionaries({"include_usage": maybe(st.booleans())})),
    "n": maybe(st.integers(1, 4)),
    "metadata": JUNK,
}


def chat_body() -> st.SearchStrategy[Any]:
    return st.fixed_dictionaries(
        {"messages": maybe(st.lists(maybe(chat_message()), max_size=4))},
        optional={
            **COMMON,
            **chat_options(),
            "max_tokens": maybe(st.integers(1, 4096)),
            "max_completion_tokens": maybe(st.integers(1, 4096)),
            "tools": JUNK,
        },
    )


def completions_body() -> st.SearchStrategy[Any]:
    prompt = (
        TEXT
        | st.lists(TEXT, max_size=4)
        | st.lists(st.integers(0, 50_000), max_size=8)
        | st.lists(st.lists(st.integers(0, 50_000), max_size=4), max_size=3)
    )
    return st.fixed_dictionaries(
        {"prompt": maybe(prompt)}, optional={**COMMON, "max_tokens": maybe(st.integers(1, 4096))}
    )


def responses_item() -> st.SearchStrategy[Any]:
    part = st.fixed_dictionaries(
        {"type": maybe(st.sampled_from(["input_text", "input_image", "output_text", "bogus"]))},
        optional={"text": maybe(TEXT), "image_url": maybe(IMAGE_VALUES), "detail": TEXT},
    )
    message = st.fixed_dictionaries(
        {"role": maybe(st.sampled_from(["user", "assistant"]))},
        optional={"content": maybe(TEXT | st.lists(maybe(part), max_size=4)), "type": TEXT},
    )
    call = st.fixed_dictionaries(
        {"type": st.sampled_from(["function_call", "function_call_output"])},
        optional={"name": maybe(TEXT), "arguments": maybe(TEXT), "output": maybe(TEXT)},
    )
    return message | call


def responses_body() -> st.SearchStrategy[Any]:
    return st.fixed_dictionaries(
        {"input": maybe(TEXT | st.lists(maybe(responses_item()), max_size=4))},
        optional={
            **COMMON,
            "instructions": maybe(TEXT),
            "max_output_tokens": maybe(st.integers(1, 4096)),
            "tools": JUNK,
        },
    )


def anthropic_block() -> st.SearchStrategy[Any]:
    source = st.fixed_dictionaries(
        {"type": maybe(st.sampled_from(["base64", "url"]))},
        optional={
            "media_type": maybe(st.sampled_from(MEDIA_TYPES)),
            "data": maybe(st.sampled_from(SMALL_PAYLOADS) | TEXT),
            "url": maybe(IMAGE_VALUES),
        },
    )
    return st.fixed_dictionaries(
        {"type": maybe(st.sampled_from([*ANTHROPIC_BLOCK_TYPES, "bogus"]))},
        optional={
            "text": maybe(TEXT),
            "source": maybe(source),
            "content": maybe(TEXT | st.lists(st.deferred(anthropic_block), max_size=2)),
            "name": maybe(TEXT),
            "input": JUNK,
            "thinking": maybe(TEXT),
        },
    )


def messages_body() -> st.SearchStrategy[Any]:
    message = st.fixed_dictionaries(
        {"role": maybe(st.sampled_from(["user", "assistant"]))},
        optional={"content": maybe(TEXT | st.lists(maybe(anthropic_block()), max_size=4))},
    )
    return st.fixed_dictionaries(
        {"messages": maybe(st.lists(maybe(message), max_size=4))},
        optional={
            **COMMON,
            "system": maybe(TEXT | st.lists(maybe(anthropic_block()), max_size=2)),
            "max_tokens": maybe(st.integers(1, 4096)),
            "tools": JUNK,
        },
    )


def chat_options() -> dict[str, st.SearchStrategy[Any]]:
    """The fields that change rendering or processing, in every wrong shape too."""
    return {
        "add_generation_prompt": maybe(st.booleans()),
        "continue_final_message": maybe(st.booleans()),
        "chat_template_kwargs": maybe(st.fixed_dictionaries({}, optional={"x": JUNK})),
        "mm_processor_kwargs": maybe(st.fixed_dictionaries({}, optional={"max_pixels": JUNK})),
        "documents": JUNK,
    }


def chat_batch_body() -> st.SearchStrategy[Any]:
    conversation = st.lists(maybe(chat_message()), max_size=3)
    return st.fixed_dictionaries(
        {"messages": maybe(st.lists(maybe(conversation), max_size=3))},
        optional={**COMMON, **chat_options(), "max_tokens": maybe(st.integers(1, 4096))},
    )


def tokenize_body() -> st.SearchStrategy[Any]:
    return chat_body() | st.fixed_dictionaries({"prompt": maybe(TEXT)}, optional=COMMON)


def score_input() -> st.SearchStrategy[Any]:
    return TEXT | st.fixed_dictionaries(
        {"content": maybe(st.lists(maybe(chat_part()), max_size=3))}
    )


def pooling_body() -> st.SearchStrategy[Any]:
    conversation = st.lists(maybe(chat_message()), max_size=3)
    value = (
        TEXT
        | st.lists(TEXT, max_size=3)
        | st.lists(st.integers(0, 50_000), max_size=6)
        | conversation
        | st.lists(conversation, max_size=2)
    )
    return st.fixed_dictionaries(
        {}, optional={**COMMON, "input": maybe(value), "messages": maybe(value), "data": JUNK}
    )


def score_body() -> st.SearchStrategy[Any]:
    side = maybe(score_input() | st.lists(maybe(score_input()), max_size=3))
    return st.fixed_dictionaries(
        {},
        optional={**COMMON, "queries": side, "documents": side, "items": side, "data_1": side,
                  "data_2": side, "text_1": side, "text_2": side, "query": side},
    )  # fmt: skip


def cohere_embed_body() -> st.SearchStrategy[Any]:
    return st.fixed_dictionaries(
        {},
        optional={
            "texts": maybe(st.lists(TEXT, max_size=3)),
            "images": maybe(st.lists(maybe(IMAGE_VALUES), max_size=3)),
            "inputs": maybe(st.lists(maybe(score_input()), max_size=3)),
        },
    )


def generate_body() -> st.SearchStrategy[Any]:
    part = st.fixed_dictionaries(
        {"type": maybe(st.sampled_from(["image_url", "video_url", "audio_url", "bogus"]))},
        optional={"url": maybe(IMAGE_VALUES)},
    )
    return st.fixed_dictionaries(
        {"token_ids": maybe(st.lists(st.integers(0, 50_000), max_size=8))},
        optional={
            "sampling_params": maybe(
                st.fixed_dictionaries({}, optional={"n": JUNK, "max_tokens": JUNK})
            ),
            "content_parts": maybe(st.lists(maybe(part), max_size=3)),
        },
    )


def decision_body() -> st.SearchStrategy[Any]:
    return st.fixed_dictionaries(
        {},
        optional={
            "state": maybe(TEXT),
            "input": maybe(TEXT | st.lists(maybe(chat_message()), max_size=2)),
            "questions": JUNK,
            "images": maybe(st.lists(maybe(IMAGE_VALUES), max_size=2)),
            "videos": maybe(st.lists(maybe(IMAGE_VALUES), max_size=2)),
        },
    )


def generative_scoring_body() -> st.SearchStrategy[Any]:
    prompt = TEXT | st.lists(st.integers(0, 50_000), max_size=4)
    return st.fixed_dictionaries(
        {"query": maybe(prompt), "items": maybe(st.lists(maybe(prompt), max_size=3))}
    )


SHAPE_BODIES: dict[BodyShape, st.SearchStrategy[Any]] = {
    BodyShape.CHAT: chat_body(),
    BodyShape.CHAT_BATCH: chat_batch_body(),
    BodyShape.COMPLETIONS: completions_body(),
    BodyShape.RESPONSES: responses_body(),
    BodyShape.MESSAGES: messages_body(),
    BodyShape.COHERE_CHAT: chat_body(),
    BodyShape.TOKENIZE: tokenize_body(),
    BodyShape.EMBEDDINGS: pooling_body(),
    BodyShape.COHERE_EMBED: cohere_embed_body(),
    BodyShape.POOLING: pooling_body(),
    BodyShape.SCORE: score_body(),
    BodyShape.RERANK: score_body(),
    BodyShape.GENERATIVE_SCORING: generative_scoring_body(),
    BodyShape.GENERATE: generate_body(),
    BodyShape.INVOCATIONS: chat_body() | completions_body() | pooling_body() | score_body(),
    BodyShape.STRUCTURED_DECISION: decision_body(),
    BodyShape.DECISIONS: decision_body(),
    BodyShape.AUDIO: st.just({}),  # multipart: the random bytes below stand for it
}
ROUTE_BODIES = {route: SHAPE_BODIES[route.shape] for route in Route}


@st.composite
def mutated(draw: st.DrawFn, raw: bytes) -> bytes:
    """``raw`` after zero to three byte-level mutations."""
    for _ in range(draw(st.integers(0, 3))):
        kind = draw(st.integers(0, 8))
        at = draw(st.integers(0, len(raw)))
        if kind == 0:
            raw = raw[:at]
        elif kind == 1:
            raw = raw[:at] + draw(st.binary(min_size=1, max_size=6)) + raw[at:]
        elif kind == 2:
            end = draw(st.integers(at, min(len(raw), at + 16)))
            raw = raw[:at] + raw[end:]
        elif kind == 3:
            raw = (
                raw[:at]
                + draw(st.sampled_from([b"\xff", b"\xc3(", b"\xed\xa0\x80", b"\x00"]))
                + raw[at:]
            )
        elif kind == 4:
            raw = raw.replace(b"/", b"\\/")
        elif kind == 5:
            key = draw(
                st.sampled_from([b'"messages": 1,', b'"model": [],', b'"data": "x",', b'"n": 0,'])
            )
            raw = raw.replace(b"{", b"{" + key, 1)
        elif kind == 6:
            depth = draw(st.integers(1, 80))
            raw = b'{"messages": ' + b"[" * depth + raw + b"]" * depth + b"}"
        elif kind == 7:
            raw = (
                raw[:at]
                + draw(st.sampled_from([b'"data:', b'"data": "', b"\\", b'"', b"\\u0000"]))
                + raw[at:]
            )
        else:
            raw = raw + raw[:at]
    return raw


@st.composite
def request_bytes(draw: st.DrawFn, route: Route) -> bytes:
    """A body for ``route``: from its grammar (often mangled), or plain random bytes."""
    if draw(st.integers(0, 19)) == 0:
        return draw(st.binary(max_size=200))
    raw = serialised(draw(ROUTE_BODIES[route]), draw(st.integers(0, 3)))
    return draw(mutated(raw)) if draw(st.booleans()) else raw


def serialised(value: Any, style: int) -> bytes:
    """JSON in one of four spellings: compact or spaced, raw UTF-8 or ``\\u`` escapes.

    Python's encoder, not orjson's: it writes integers past 64 bits, as a client may.
    """
    separators = (",", ":") if style & 1 else (", ", ": ")
    return json.dumps(value, ensure_ascii=bool(style & 2), separators=separators).encode()
