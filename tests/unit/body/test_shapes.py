"""body.shapes: the generating and tokenize body shapes: prompts, media, output limits, refusals."""

from __future__ import annotations

from typing import Any

import pytest

from sidecar.body.refs import MediaSource
from sidecar.errors import InvalidRequestError
from sidecar.routes import Route, Work
from tests.support.bodies import IMAGE, URI, URL_IMAGE, parse, user


def test_shapes_chat_is_one_sequence_with_its_images_and_n() -> None:
    body = parse(Route.CHAT, messages=[user(IMAGE, URL_IMAGE)], n=3, max_completion_tokens=7)
    (sequence,) = body.sequences
    assert sequence.images == (0, 1)
    assert sequence.messages == 1
    assert [ref.source for ref in body.images] == [MediaSource.DATA, MediaSource.URL]
    assert (body.n, body.max_output_tokens, body.work) == (3, 7, Work.GENERATE)


def test_shapes_chat_batch_is_one_sequence_per_conversation() -> None:
    body = parse(
        Route.CHAT_BATCH, messages=[[user(IMAGE)], [user()], [user(IMAGE, IMAGE)]], max_tokens=5
    )
    assert [s.images for s in body.sequences] == [(0,), (), (1, 2)]
    assert body.max_output_tokens == 5


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"messages": []}, "at least one conversation"),
        ({"messages": [[]]}, "non-empty list"),
        ({"messages": [[{"role": "user", "content": "x"}]], "n": 2}, "n must be 1"),
    ],
    ids=["empty", "empty-conversation", "n"],
)
def test_shapes_chat_batch_refuses_what_vllm_refuses(fields: dict[str, Any], message: str) -> None:
    with pytest.raises(InvalidRequestError, match=message):
        parse(Route.CHAT_BATCH, **fields)


def test_shapes_completions_list_is_one_sequence_per_prompt() -> None:
    body = parse(Route.COMPLETIONS, prompt=["one two", [1, 2, 3], "three"])
    assert [s.token_ids for s in body.sequences] == [0, 3, 0]
    assert [s.text_chars for s in body.sequences] == [7, 0, 5]
    assert body.max_output_tokens == 16  # vLLM's default for completions


def test_shapes_count_tokens_and_render_hold_no_kv() -> None:
    count = parse(
        Route.MESSAGES_COUNT_TOKENS, model="m", messages=[{"role": "user", "content": "x"}]
    )
    render = parse(Route.CHAT_RENDER, messages=[user(IMAGE)])
    assert count.work is Work.RENDER
    assert render.work is Work.RENDER
    assert len(render.images) == 1


def test_shapes_tokenize_reads_chat_messages_and_their_images() -> None:
    assert len(parse(Route.TOKENIZE, messages=[user(IMAGE)]).images) == 1
    assert parse(Route.TOKENIZE, prompt="some text").sequences[0].text_chars == 9


def test_shapes_structured_decision_reads_its_media_url_lists() -> None:
    body = parse(
        Route.STRUCTURED_DECISION,
        state="s",
        questions=[{"q": 1}],
        images=[URI],
        videos=["https://example.com/v.mp4"],
    )
    assert len(body.images) == 1
    assert [item.kind for item in body.media] == ["video"]


@pytest.mark.parametrize("role", ["user", "system", "developer", "tool", ["function"], None])
def test_shapes_null_content_is_refused_except_on_an_assistant_turn(role: Any) -> None:
    with pytest.raises(InvalidRequestError, match="not null"):
        parse(Route.CHAT, messages=[{"role": role, "content": None}])


def test_shapes_a_function_turn_may_have_null_content_as_vllm_takes_it() -> None:
    # Found by the differential tier: vLLM renders OpenAI's function message with null
    # content (its type is Optional[str]) where the sidecar had refused it.
    body = parse(Route.CHAT_RENDER, messages=[{"role": "function", "name": "f", "content": None}])
    assert body.sequences[0].messages == 1


def test_shapes_an_assistant_turn_of_tool_calls_alone_is_read() -> None:
    call = {"id": "1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    body = parse(
        Route.CHAT,
        messages=[
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "1", "content": "ok"},
        ],
    )
    assert body.sequences[0].messages == 3


def test_shapes_token_ids_may_be_integral_floats_as_vllm_reads_them() -> None:
    # Found by the differential tier: vLLM's lax int fields render [1, 2.0, 3] as three ids
    # where the sidecar had refused the prompt.
    body = parse(Route.COMPLETIONS_RENDER, prompt=[14436392764, 3525843303.0, 457.0])
    assert [s.token_ids for s in body.sequences] == [3]
    with pytest.raises(InvalidRequestError, match="string or token ids"):
        parse(Route.COMPLETIONS, prompt=[[1, 2.5]])
