"""text.responses_input: Responses bodies as the chat requests vLLM 0.33 builds
(``responses/utils.py`` ``construct_input_messages``)."""

from __future__ import annotations

from typing import Any

import pytest

from sidecar.text.conversation import ChatTemplateError
from sidecar.text.responses_input import from_responses_body

CALL = {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"}
OUTPUT = {"type": "function_call_output", "call_id": "c1", "output": "r"}
TOOL_CALL = {"id": "c1", "function": {"name": "f", "arguments": "{}"}, "type": "function"}


def said(text: str, **extra: Any) -> dict[str, Any]:
    return {
        "type": "message",
        "role": "assistant",
        "content": [
            {"type": "output_text", "text": text},
            {"type": "output_text", "text": "dropped"},
        ],
        **extra,
    }


def test_responses_instructions_and_string_input() -> None:
    request = from_responses_body({"input": "hi", "instructions": "be brief"})
    assert request.messages == [{"role": "system", "content": "be brief"},
                                {"role": "user", "content": "hi"}]  # fmt: skip
    assert request.kwargs["add_generation_prompt"] is True
    assert request.tools is None


def test_responses_items_become_chat_messages() -> None:
    image = {"type": "input_image", "image_url": "u"}
    request = from_responses_body({"input": [
        {"role": "user", "content": [image]},
        {"type": "reasoning", "summary": [{"text": "S"}], "content": [{"text": "R"}]},
        said("A"), CALL, {**CALL, "call_id": "c2", "namespace": "ns"}, OUTPUT,
        {"role": "assistant", "content": "plain"},
        {"type": "custom_tool_call", "call_id": "c3", "name": "g", "input": "x"},
    ]})  # fmt: skip
    assert request.messages == [
        {"role": "user", "content": [{**image, "detail": "auto"}]},
        {"role": "assistant", "reasoning": "R", "content": "A",
         "tool_calls": [TOOL_CALL, {**TOOL_CALL, "id": "c2",
                                    "function": {"name": "ns__f", "arguments": "{}"}}]},
        {"role": "tool", "content": "r", "tool_call_id": "c1"},
        {"role": "assistant", "content": "plain", "tool_calls": [{"id": "c3", "type": "function",
            "function": {"name": "g", "arguments": '{"input": "x"}'}}]},
    ]  # fmt: skip


def test_calls_and_reasoning_open_a_new_assistant_message_when_needed() -> None:
    reasoning = {"type": "reasoning", "summary": [{"text": "S"}]}
    request = from_responses_body({"input": [CALL, reasoning, reasoning]})
    assert request.messages == [
        {"role": "assistant", "tool_calls": [TOOL_CALL], "reasoning": "S"},
        {"role": "assistant", "reasoning": "S"},
    ]


def test_a_partial_last_message_is_continued() -> None:
    request = from_responses_body({"input": [{"role": "user", "content": "q"},
                                             said("Part", status="incomplete")]})  # fmt: skip
    assert request.kwargs["continue_final_message"] is True
    assert request.kwargs["add_generation_prompt"] is False
    assert request.messages[-1] == {"role": "assistant", "content": "Part"}


def test_responses_tools_are_function_tools_with_namespaces_flattened() -> None:
    tool = {"type": "function", "name": "f", "parameters": {"type": "object"}, "strict": None}
    request = from_responses_body({"input": "x", "tools": [
        tool, {"type": "namespace", "name": "ns", "tools": [{**tool, "name": "g"}]},
        {"type": "web_search"}]})  # fmt: skip
    assert request.tools == [
        {"type": "function", "function": {"name": "f", "description": None,
                                          "parameters": {"type": "object"}}},
        {"type": "function", "function": {"name": "ns__g", "description": None,
                                          "parameters": {"type": "object"}}},
    ]  # fmt: skip


@pytest.mark.parametrize(
    "body",
    [
        {"input": "x", "previous_response_id": "r1"},
        {"input": 5},
        {"input": ["x"]},
        {"input": [{"type": "reasoning", "encrypted_content": "e", "summary": []}]},
        {"input": [{"type": "function_call", "call_id": "c"}]},
        {"input": [{"type": "item_reference", "id": "i"}]},
        {"input": "x", "tools": [{"type": "custom", "name": "c"}]},
        {"input": "x", "tools": "all"},
        {"input": "x", "tools": ["f"]},
    ],
    ids=["stored-history", "number", "string-item", "encrypted", "call-without-name",
         "unknown-item", "custom-tool", "tools-not-a-list", "tool-not-an-object"],
)  # fmt: skip
def test_responses_shapes_not_rendered_exactly(body: dict[str, Any]) -> None:
    with pytest.raises(ChatTemplateError):
        from_responses_body(body)
