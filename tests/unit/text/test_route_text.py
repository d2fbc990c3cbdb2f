"""text.route_text: which bodies are counted exactly, and how each route's prompts are found."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import orjson
import pytest

from sidecar.body.request_body import BodyPolicy, parse_request_body
from sidecar.routes import Route
from sidecar.text.route_text import exact_prompts
from sidecar.text.text_tokens import ChatTemplateError, PromptCounter
from tests.support.qwen_models import ensure_model


@pytest.fixture(scope="module")
def counter() -> PromptCounter:
    found = PromptCounter.from_model_dir(ensure_model("qwen2.5-vl-7b"), "qwen2_5_vl")
    assert found is not None
    return found


def prompts(
    counter: PromptCounter, route: Route, body: dict[str, Any], images: int = 0
) -> list[int]:
    parsed = parse_request_body(orjson.dumps(body), route, policy=BodyPolicy(
        trust_request_chat_template=True))  # fmt: skip
    return exact_prompts(counter, parsed, [10] * images)


def test_completions_count_each_text_prompt_and_leave_token_ids_to_the_ids(
    counter: PromptCounter,
) -> None:
    text = counter.text_tokens
    assert prompts(counter, Route.COMPLETIONS, {"prompt": "Once upon a time"}) == [
        text("Once upon a time", add_special_tokens=True)]  # fmt: skip
    assert prompts(counter, Route.COMPLETIONS, {"prompt": [1, 2, 3]}) == [0]
    assert prompts(counter, Route.COMPLETIONS_RENDER, {"prompt": ["a b", [4, 5], "c"]}) == [
        2, 0, 1]  # fmt: skip


@pytest.mark.parametrize(
    ("route", "body"),
    [
        (Route.CHAT, {"messages": [{"role": "user", "content": "hi"}]}),
        (Route.RESPONSES, {"input": "hi"}),
        (Route.MESSAGES_COUNT_TOKENS, {"messages": [{"role": "user", "content": "hi"}]}),
    ],
    ids=["chat", "responses", "messages"],
)
def test_chat_shaped_routes_render_one_conversation(
    counter: PromptCounter, route: Route, body: dict[str, Any]
) -> None:
    # Qwen2-VL's default system turn (11 tokens), <|im_start|>user\nhi<|im_end|>\n (6), and
    # the generation prompt <|im_start|>assistant\n (3).
    assert prompts(counter, route, {"model": "m", "max_tokens": 5, **body}) == [11 + 6 + 3]


def test_chat_adds_special_tokens_only_when_asked_and_video_placeholders_are_left_out(
    counter: PromptCounter,
) -> None:
    video = {"type": "video_url", "video_url": {"url": "https://x/v.mp4"}}
    body = {"messages": [{"role": "user", "content": [video, "hi"]}]}
    with_video = prompts(counter, Route.CHAT, body)
    without = prompts(counter, Route.CHAT, {"messages": [{"role": "user", "content": ["hi"]}]})
    assert with_video == without  # its three placeholder tokens give way to the video's price
    special = prompts(counter, Route.CHAT, {**body, "add_special_tokens": True})
    assert special == with_video  # Qwen's tokenizer adds none


def test_tokenize_counts_its_prompt_as_completions_and_its_messages_as_a_chat(
    counter: PromptCounter,
) -> None:
    assert prompts(counter, Route.TOKENIZE, {"prompt": "Once upon a time"}) == prompts(
        counter, Route.COMPLETIONS, {"prompt": "Once upon a time"}
    )
    chat = {"messages": [{"role": "user", "content": "hi"}]}
    assert prompts(counter, Route.TOKENIZE, chat) == prompts(counter, Route.CHAT, chat)


def test_chat_batch_renders_each_conversation_as_its_own_chat_without_tools(
    counter: PromptCounter,
) -> None:
    one = [{"role": "user", "content": "a"}]
    two = [{"role": "user", "content": "a much longer question about the weather"}]
    tools = [{"type": "function", "function": {"name": "f", "parameters": {}}}]
    batch = prompts(counter, Route.CHAT_BATCH, {"messages": [one, two], "tools": tools})
    assert batch == [
        *prompts(counter, Route.CHAT, {"messages": one}),
        *prompts(counter, Route.CHAT, {"messages": two}),
    ]


def test_generative_scoring_is_the_query_with_each_item_as_vllm_encodes_them(
    counter: PromptCounter,
) -> None:
    # Found by the differential tier: rare characters ran past the estimate. vLLM encodes the
    # query with add_special_tokens (default true) and each item without.
    text = counter.text_tokens
    rare = "\U00083e51!\x81\U00084a89^\x10\U000d340a\xfd"
    body = {"query": "Is it", "items": [rare, "yes"], "label_token_ids": [1, 2]}
    query = text("Is it", add_special_tokens=True)
    assert prompts(counter, Route.GENERATIVE_SCORING, body) == [
        query + text(rare, add_special_tokens=False), query + 1]  # fmt: skip
    plain = {**body, "add_special_tokens": False, "query": [5, 6], "items": [[7], [8, 9]]}
    assert prompts(counter, Route.GENERATIVE_SCORING, plain) == [0, 0]  # all token ids


@pytest.mark.parametrize(
    ("route", "body"),
    [(Route.RESPONSES, {"input": "x", "previous_response_id": "r"})],
    ids=["stored-history"],
)
def test_other_bodies_are_left_to_the_estimate(
    counter: PromptCounter, route: Route, body: dict[str, Any]
) -> None:
    with pytest.raises(ChatTemplateError):
        prompts(counter, route, body)


def test_bodies_whose_prompts_cannot_be_lined_up_are_left_to_the_estimate(
    counter: PromptCounter,
) -> None:
    parsed = parse_request_body(orjson.dumps({"prompt": "x"}), Route.COMPLETIONS)
    for broken in (
        replace(parsed, sequences=()),
        replace(parsed, skeleton={"prompt": None}),
        replace(parsed, route=Route.CHAT, skeleton={"messages": []}, sequences=()),
    ):
        with pytest.raises(ChatTemplateError):
            exact_prompts(counter, broken, [])


def test_a_tool_schemas_integer_past_64_bits_renders_whole_as_vllm_renders_it() -> None:
    # Found by the differential tier: orjson had read the integer as 1e+20, a shorter prompt
    # than the one vLLM's json renders; the count is of the digits. (Qwen3-VL's template
    # renders tools; Qwen2.5-VL's leaves them out.)
    counter = PromptCounter.from_model_dir(ensure_model("qwen3-vl-8b"), "qwen3_vl")
    assert counter is not None

    def chat(maximum: str) -> bytes:
        schema = {"type": "object", "properties": {"n": {"type": "integer", "maximum": 0}}}
        tool = {"type": "function", "function": {"name": "f", "parameters": schema}}
        body = orjson.dumps({"messages": [{"role": "user", "content": "hi"}], "tools": [tool]})
        return body.replace(b'"maximum":0', b'"maximum":' + maximum.encode())

    def count(body: bytes) -> int:
        (tokens,) = exact_prompts(counter, parse_request_body(body, Route.CHAT), [])
        return tokens

    digits = "100000000000000000000"
    wider = count(chat(digits)) - count(chat("1"))
    assert wider == counter.text_tokens(digits, add_special_tokens=False) - counter.text_tokens(
        "1", add_special_tokens=False
    )
    assert count(chat(digits)) != count(chat("1e+20"))
