"""text.chat_request: the keyword arguments and tool list vLLM 0.33 passes to the template
for a chat body (``ChatCompletionRequest.build_chat_params``, ``ChatParams.with_defaults``,
``ChatCompletionToolsParam.model_dump``)."""

from __future__ import annotations

from typing import Any

import pytest

from sidecar.text.chat_request import chat_tools, from_chat_body, merge_kwargs
from sidecar.text.conversation import ChatTemplateError

HI = [{"role": "user", "content": "hi"}]


def test_the_fields_default_and_override_the_request_kwargs() -> None:
    request = from_chat_body(
        {
            "messages": HI,
            "chat_template_kwargs": {
                "add_generation_prompt": False,
                "add_vision_id": True,
                "skip": None,
                "auto": "auto",
            },
        }
    )
    assert request.kwargs == {
        "tokenize": False,
        "add_generation_prompt": True,
        "continue_final_message": False,
        "add_vision_id": True,
    }
    assert request.tools is None
    assert request.template is None


def test_reasoning_effort_turns_thinking_on_or_off_unless_the_request_says() -> None:
    low = from_chat_body({"messages": HI, "reasoning_effort": "low"}).kwargs
    none = from_chat_body({"messages": HI, "reasoning_effort": "none"}).kwargs
    own = from_chat_body({"messages": HI, "reasoning_effort": "low",
                          "chat_template_kwargs": {"enable_thinking": False}}).kwargs  # fmt: skip
    assert (low["enable_thinking"], none["enable_thinking"], own["enable_thinking"]) == (
        True, False, False)  # fmt: skip
    assert low["reasoning_effort"] == "low"


def test_request_kwargs_tools_replace_the_dumped_tools() -> None:
    tool = {"type": "function", "function": {"name": "f"}}
    request = from_chat_body({"messages": HI, "tools": [tool],
                              "chat_template_kwargs": {"tools": ["raw"]}})  # fmt: skip
    assert request.tools == ["raw"]


def test_the_own_template_field_is_kept_apart_from_the_kwargs_one() -> None:
    request = from_chat_body({"messages": HI, "chat_template": "A",
                              "chat_template_kwargs": {"chat_template": "B"}})  # fmt: skip
    assert request.template == "A"
    assert request.kwargs["chat_template"] == "B"


def test_tools_are_dumped_as_vllm_dumps_its_models() -> None:
    tools = [
        {"type": "function", "function": {"name": "a", "extra": 1}},
        {"function": {"name": "b", "description": "d", "parameters": {"p": 1}, "strict": True}},
        {"type": "function", "defer_loading": True, "function": {"name": "c"}},
    ]
    assert chat_tools(tools) == [
        {"type": "function", "function": {"name": "a", "description": None, "parameters": None}},
        {"type": "function", "function": {"name": "b", "description": "d",
                                          "parameters": {"p": 1}, "strict": True}},
        {"type": "function", "function": {"name": "c", "description": None, "parameters": None,
                                          "defer_loading": True}, "defer_loading": True},
    ]  # fmt: skip
    assert chat_tools(None) is None


@pytest.mark.parametrize(
    "tools",
    [{"type": "function"}, [{"type": "web_search"}], [{"type": "function"}], ["x"],
     [{"type": "function", "function": {"description": "no name"}}]],
    ids=["not-a-list", "not-a-function", "no-function", "not-an-object", "no-name"],
)  # fmt: skip
def test_tools_vllm_refuses_are_refused(tools: Any) -> None:
    with pytest.raises(ChatTemplateError):
        chat_tools(tools)


def test_messages_must_be_a_list() -> None:
    with pytest.raises(ChatTemplateError):
        from_chat_body({"messages": "hi"})


def test_merge_keeps_false_zero_and_empty_but_not_none_or_auto() -> None:
    merged = merge_kwargs({"a": 1, "b": 2, "c": 3}, {"a": None, "b": "auto", "c": 0, "d": []})
    assert merged == {"a": 1, "b": 2, "c": 0, "d": []}
