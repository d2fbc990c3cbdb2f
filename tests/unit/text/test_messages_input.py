"""text.messages_input: Anthropic Messages bodies as the chat requests vLLM 0.33 builds
(``anthropic/serving.py``)."""

from __future__ import annotations

from typing import Any

import pytest

from sidecar.text.conversation import ChatTemplateError
from sidecar.text.messages_input import from_messages_body


def anthropic(turns: list[dict[str, Any]], **extra: Any) -> list[dict[str, Any]]:
    return from_messages_body({"messages": turns, **extra}, merge_inline_system=False).messages


def test_anthropic_system_blocks_join_without_separator_and_drop_the_billing_block() -> None:
    system = [
        {"type": "text", "text": "A. "},
        {"type": "text", "text": "x-anthropic-billing-header: c"},
        {"type": "text", "text": "B."},
        {"type": "text", "text": ""},
    ]
    assert anthropic([{"role": "user", "content": "hi"}], system=system)[0] == {
        "role": "system", "content": "A. B."}  # fmt: skip


def test_anthropic_blocks_become_parts_calls_and_reasoning() -> None:
    image = {"type": "image", "source": {"type": "base64", "data": "<image 0>"}}
    use = {"type": "tool_use", "id": "t1", "name": "f", "input": {"a": 1}}
    messages = anthropic([
        {"role": "user", "content": [{"type": "text", "text": "one"}]},
        {"role": "user", "content": [image, {"type": "text", "text": ""},
                                     {"type": "text", "text": "two"}]},
        {"role": "assistant", "content": [{"type": "thinking", "thinking": "T"},
                                          {"type": "redacted_thinking", "data": "x"}, use]},
    ])  # fmt: skip
    assert messages == [
        {"role": "user", "content": "one"},
        {"role": "user", "content": [{"type": "image_url", "image_url": {"url": "<image>"}},
                                     {"type": "text", "text": "two"}]},
        {"role": "assistant", "reasoning": "T", "tool_calls": [{"id": "t1", "type": "function",
            "function": {"name": "f", "arguments": '{"a": 1}'}}]},
    ]  # fmt: skip


def test_anthropic_tool_results() -> None:
    image = {"type": "image", "source": {"data": "<image 0>"}}
    result = {"type": "tool_result", "tool_use_id": "t1", "content": [
        {"type": "text", "text": "a"}, image, {"type": "text", "text": "b"},
        {"type": "tool_reference", "tool_name": "search"}, "skipped"]}  # fmt: skip
    messages = anthropic([
        {"role": "user", "content": [result]},
        {"role": "assistant", "content": [{"type": "tool_result", "content": "odd"}]},
        {"role": "assistant", "content": [{"type": "tool_result", "content": [{"k": 1}]}]},
    ])  # fmt: skip
    assert messages == [
        {"role": "tool", "tool_call_id": "t1", "content": "a\nb"},
        {"role": "user", "content": [{"type": "image_url", "image_url": {"url": "<image>"}}]},
        {"role": "tool", "tool_call_id": "t1",
         "content": [{"type": "tool_reference", "name": "search"}]},
        {"role": "assistant", "content": "Tool result: odd"},
        {"role": "assistant", "content": "Tool result: [{'k': 1}]"},
    ]  # fmt: skip


def test_anthropic_inline_system_turns_stay_or_merge_as_the_template_needs() -> None:
    turns = [{"role": "user", "content": "u"},
             {"role": "system", "content": [{"type": "text", "text": "S1"},
                                            {"type": "text", "text": "S2"}]}]  # fmt: skip
    kept = from_messages_body({"messages": turns, "system": "Top"}, merge_inline_system=False)
    merged = from_messages_body({"messages": turns, "system": "Top"}, merge_inline_system=True)
    assert kept.messages == [{"role": "system", "content": "Top"},
                             {"role": "user", "content": "u"},
                             {"role": "system", "content": "S1S2"}]  # fmt: skip
    assert merged.messages == [{"role": "system", "content": "TopS1S2"},
                               {"role": "user", "content": "u"}]  # fmt: skip


def test_anthropic_billing_system_turns_and_empty_results_leave_nothing() -> None:
    turns = [{"role": "user", "content": "u"},
             {"role": "system", "content": "x-anthropic-billing-header: c"},
             {"role": "assistant", "content": [{"type": "tool_result"}]}]  # fmt: skip
    assert anthropic(turns) == [{"role": "user", "content": "u"},
                                {"role": "assistant", "content": "Tool result: "}]  # fmt: skip


def test_anthropic_tools_and_thinking() -> None:
    tool = {"name": "f", "input_schema": {"properties": {}}}
    request = from_messages_body(
        {
            "messages": [{"role": "user", "content": "x"}],
            "tools": [tool],
            "thinking": {"type": "disabled"},
        },
        merge_inline_system=False,
    )
    assert request.tools == [
        {
            "type": "function",
            "function": {
                "name": "f",
                "description": None,
                "parameters": {"properties": {}, "type": "object"},
            },
        }
    ]
    assert request.kwargs["enable_thinking"] is False  # fmt: skip


@pytest.mark.parametrize(
    "turns",
    [
        "hi",
        [{"role": "robot", "content": "x"}],
        [{"role": "user", "content": 5}],
        [{"role": "user", "content": ["x"]}],
        [{"role": "assistant", "content": [{"type": "tool_result", "content": [
            {"type": "image", "source": {}}]}]}],
        [{"role": "user", "content": [{"type": "tool_addition", "tool": {}}]}],
    ],
    ids=["not-a-list", "role", "number", "string-block", "printed-image", "tool-change"],
)  # fmt: skip
def test_anthropic_shapes_not_rendered_exactly(turns: Any) -> None:
    with pytest.raises(ChatTemplateError):
        from_messages_body({"messages": turns}, merge_inline_system=False)


@pytest.mark.parametrize("tools", ["x", [{"name": "f"}]], ids=["not-a-list", "no-schema"])
def test_anthropic_tools_vllm_refuses(tools: Any) -> None:
    with pytest.raises(ChatTemplateError):
        from_messages_body({"messages": [], "tools": tools}, merge_inline_system=False)
