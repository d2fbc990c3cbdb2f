"""What the client gets through the sidecar is what vLLM sends: streams, errors, refusals.

Each request goes twice with the same ``x-request-id`` (vLLM derives chat and message ids from
it): straight to vLLM, then through the sidecar. Decoding is greedy (``temperature: 0``), so
the generated text repeats; ids vLLM draws at random and timestamps are zeroed on both sides
(``record.normalize``). Streams must then match byte for byte, including those for which the
sidecar asked vLLM for a usage chunk the client did not want and took it out again.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.real_vllm.cases import data_uri, user
from tests.real_vllm.client import Answer, coalesced, comparable, send
from tests.real_vllm.conftest import Stack
from tests.real_vllm.record import MODEL as RECORDED_MODEL
from tests.real_vllm.record import Exchange, exchanges

USAGE = {"include_usage": True}
CONTINUOUS = {"include_usage": True, "continuous_usage_stats": True}
TEXT = [{"role": "user", "content": "Describe the colour of the sky."}]


def _chat(**extra: Any) -> dict[str, Any]:
    return {"messages": TEXT, "max_tokens": 5, "temperature": 0, "stream": True} | extra


STREAMS: dict[str, tuple[str, dict[str, Any]]] = {
    "chat-no-usage": ("/v1/chat/completions", _chat()),
    "chat-usage": ("/v1/chat/completions", _chat(stream_options=USAGE)),
    "chat-continuous-usage": ("/v1/chat/completions", _chat(stream_options=CONTINUOUS)),
    "chat-image-usage": (
        "/v1/chat/completions",
        _chat(
            messages=[
                user(
                    {"type": "image_url", "image_url": {"url": data_uri(224, 224)}}, "What is this?"
                )
            ],
            stream_options=USAGE,
        ),
    ),
    # Greedy decoding refuses n > 1; a seed makes sampling repeat instead.
    "chat-n2-no-usage": ("/v1/chat/completions", _chat(n=2, temperature=1.0, seed=7)),
    "chat-continuous-without-include": (
        "/v1/chat/completions",
        _chat(stream_options={"continuous_usage_stats": True}),
    ),
    "completions-no-usage": (
        "/v1/completions",
        {"prompt": "Once upon a time", "max_tokens": 5, "temperature": 0, "stream": True},
    ),
    "completions-usage": (
        "/v1/completions",
        {
            "prompt": "Once upon a time",
            "max_tokens": 5,
            "temperature": 0,
            "stream": True,
            "stream_options": USAGE,
        },
    ),
    "responses": (
        "/v1/responses",
        {"input": "Say something.", "max_output_tokens": 5, "temperature": 0, "stream": True},
    ),
    "messages": (
        "/v1/messages",
        {"messages": TEXT, "max_tokens": 5, "temperature": 0, "stream": True},
    ),
}


def _twice(stack: Stack, name: str, method: str, path: str, body: Any) -> tuple[Answer, Answer]:
    """(vLLM's answer, the sidecar's) to one request sent both ways."""
    headers = {"x-request-id": f"relay-{stack.name}-{name}"}
    direct = send(stack.vllm.base_url, method, path, body, headers)
    relayed = send(stack.sidecar.base_url, method, path, body, headers)
    return direct, relayed


@pytest.mark.parametrize("name", list(STREAMS))
def test_streams_through_the_sidecar_are_vllms_byte_for_byte(stack: Stack, name: str) -> None:
    path, body = STREAMS[name]
    for _ in range(ATTEMPTS):
        direct, relayed = _twice(stack, name, "POST", path, {"model": stack.model, **body})
        assert direct.status == relayed.status == 200, relayed.body[:300]
        assert direct.streaming
        assert relayed.streaming
        assert relayed.headers["content-type"] == direct.headers["content-type"]
        ours, theirs = comparable(relayed.body), comparable(direct.body)
        if ours == theirs:
            return
    # vLLM split the same text into other chunks every time (``coalesced``): then the events,
    # with their fields in the order sent, must still be vLLM's.
    assert _ordered(coalesced(ours)) == _ordered(coalesced(theirs))


# How often to try for byte equality: vLLM's chunking of the same text depends on load.
ATTEMPTS = 3


def _ordered(events: list[tuple[str | None, Any]]) -> list[str]:
    return [f"{name} {json.dumps(data)}" for name, data in events]


# vLLM's refusals, as recorded in tests/data/vllm (record.py), plus one the smoke run found.
ERRORS = [exchange for exchange in exchanges() if exchange.name.startswith("error-")] + [
    Exchange(
        "error-input-image-without-detail",
        "POST",
        "/v1/chat/completions",
        {
            "model": RECORDED_MODEL,
            "max_tokens": 4,
            "messages": [user({"type": "input_image", "image_url": data_uri(64, 64)}, "x")],
        },
        note="vLLM 0.32's ResponseInputImageParam requires detail",
    ),
]


def _for(stack: Stack, exchange: Exchange) -> dict[str, Any] | bytes | None:
    if exchange.raw_body is not None:
        return exchange.raw_body
    if exchange.body is None:
        return None
    body = dict(exchange.body)
    if body.get("model") == RECORDED_MODEL:
        body["model"] = stack.model
    return body


# Requests the sidecar refuses itself, before vLLM would, in words of its own: the (type,
# param) of its answer. Status and shape are vLLM's. A refusal not listed here must be word
# for word vLLM's (the sidecar copies vLLM's message where it checks what vLLM checks).
SIDECAR_WORDS: dict[str, tuple[str, str | None]] = {
    # vLLM: "Non-base64 digit found" / "Failed to load image: ...", param null.
    "error-corrupt-base64": ("BadRequestError", "image_url"),
    "error-not-an-image": ("BadRequestError", "image_url"),
    # vLLM: "This model's maximum context length is 8192 tokens ...", param "input_tokens";
    # with the image expanded, "Input length (N) exceeds ...", param null. The sidecar's prompt
    # budget (vLLM's max_model_len) names its own setting.
    "error-text-over-context": ("BadRequestError", None),
    "error-text-over-context-chars": ("BadRequestError", None),
    "error-image-over-context": ("BadRequestError", None),
    # vLLM: FastAPI's validation error, type "Bad Request", param "body.10".
    "error-invalid-json": ("BadRequestError", None),
    # vLLM 0.32 adds "(parameter=type, value=hologram)" to the same sentence.
    "error-unknown-part-type": ("BadRequestError", "type"),
}


@pytest.mark.parametrize("exchange", ERRORS, ids=[exchange.name for exchange in ERRORS])
def test_vllms_errors_reach_the_client_unchanged(stack: Stack, exchange: Exchange) -> None:
    body = _for(stack, exchange)
    direct, relayed = _twice(stack, exchange.name, exchange.method, exchange.path, body)
    assert direct.status >= 400
    assert relayed.status == direct.status, relayed.body[:300]
    if relayed.forwarded:
        assert comparable(relayed.body) == comparable(direct.body)
        return
    ours, theirs = relayed.json(), direct.json()
    assert ours.keys() == theirs.keys() == {"error"}
    assert ours["error"].keys() == theirs["error"].keys()
    assert ours["error"]["code"] == direct.status
    words = SIDECAR_WORDS.get(exchange.name)
    if words is None:
        assert relayed.body == direct.body
    else:
        assert (ours["error"]["type"], ours["error"]["param"]) == words


NOT_SERVED: dict[str, dict[str, Any]] = {
    "/v1/embeddings": {"input": "hello"},
    "/pooling": {"input": "hello"},
    "/classify": {"input": "hello"},
    "/score": {"text_1": "a", "text_2": "b"},
    "/rerank": {"query": "a", "documents": ["b"]},
    "/v2/embed": {"texts": ["hello"], "input_type": "search_query"},
}


@pytest.mark.parametrize("path", list(NOT_SERVED))
def test_routes_a_generative_model_does_not_serve_answer_as_vllm_does(
    stack: Stack, path: str
) -> None:
    body = {"model": stack.model, **NOT_SERVED[path]}
    direct, relayed = _twice(stack, path.strip("/").replace("/", "-"), "POST", path, body)
    assert direct.status in (400, 404)
    assert (relayed.status, relayed.body) == (direct.status, direct.body)
