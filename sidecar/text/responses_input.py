"""A ``/v1/responses`` body as the chat request vLLM 0.33 turns it into
(``entrypoints/openai/responses/utils.py``, ``construct_input_messages``).

``instructions`` become a leading system message; input items with a ``role`` pass through
(``input_image`` parts get ``detail: "auto"``); ``function_call`` items become tool calls on
the assistant message before them; ``reasoning`` items and assistant output messages fill that
message's reasoning and content (an output message keeps only its first part's text);
``function_call_output`` items become tool messages. A last message or reasoning item that is
``in_progress`` or ``incomplete`` is continued instead of answered. Tools are the function
tools, namespaces flattened to ``<namespace>__<name>``. Stored history
(``previous_response_id``) is not in the body, so such a request is estimated.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from sidecar.text.chat_request import ChatRequest, function_definition, template_kwargs
from sidecar.text.conversation import ChatTemplateError

_PARTIAL = ("in_progress", "incomplete")


def from_responses_body(root: Mapping[str, Any]) -> ChatRequest:
    """A ``/v1/responses`` body (or its ``/render`` twin)."""
    if root.get("previous_response_id") is not None:
        raise ChatTemplateError("stored history is not in the body")
    messages: list[dict[str, Any]] = []
    if root.get("instructions"):
        messages.append({"role": "system", "content": root["instructions"]})
    value = root.get("input")
    if isinstance(value, str):
        messages.append({"role": "user", "content": value})
    elif isinstance(value, list):
        for item in value:
            _response_item(item, messages)
    else:
        raise ChatTemplateError("input is neither text nor items")
    continuing = _continues(value)
    reasoning = root.get("reasoning")
    fields = {
        "add_generation_prompt": not continuing,
        "continue_final_message": continuing,
        "reasoning_effort": reasoning.get("effort") if isinstance(reasoning, dict) else None,
    }
    tools = _response_tools(root.get("tools"))
    kwargs = template_kwargs(root.get("chat_template_kwargs"), fields, tools)
    return ChatRequest(messages, kwargs.pop("tools", None), kwargs)


def _continues(value: Any) -> bool:
    if not isinstance(value, list) or not value or not isinstance(value[-1], dict):
        return False
    last = value[-1]
    return (
        last.get("type", "message") in ("message", "reasoning") and last.get("status") in _PARTIAL
    )


def _response_item(item: Any, messages: list[dict[str, Any]]) -> None:
    if not isinstance(item, dict):
        raise ChatTemplateError("an input item that is not an object")
    kind = item.get("type")
    previous = messages[-1] if messages and messages[-1].get("role") == "assistant" else None
    if kind in ("function_call", "custom_tool_call"):
        name, call_id = item.get("name"), item.get("call_id")
        if not isinstance(name, str) or not isinstance(call_id, str):
            raise ChatTemplateError("a function call vLLM refuses")
        if isinstance(item.get("namespace"), str):
            name = f"{item['namespace']}__{name}"
        arguments = item.get("arguments")
        if kind == "custom_tool_call":
            arguments = json.dumps({"input": item.get("input") or ""}, ensure_ascii=False)
        call = {"id": call_id, "function": {"name": name, "arguments": arguments},
                "type": "function"}  # fmt: skip
        if previous is not None and isinstance(previous.get("tool_calls", []), list):
            previous.setdefault("tool_calls", []).append(call)
        else:
            messages.append({"role": "assistant", "tool_calls": [call]})
    elif kind == "reasoning":
        if item.get("encrypted_content"):
            raise ChatTemplateError("encrypted reasoning is refused")
        texts = [*(item.get("content") or []), *(item.get("summary") or [])]
        text = texts[0].get("text", "") if texts and isinstance(texts[0], dict) else ""
        if previous is not None and previous.get("reasoning") is None:
            previous["reasoning"] = text
        else:
            messages.append({"role": "assistant", "reasoning": text})
    elif kind in ("function_call_output", "custom_tool_call_output"):
        messages.append({"role": "tool", "content": item.get("output"),
                         "tool_call_id": item.get("call_id")})  # fmt: skip
    elif item.get("role") == "assistant" and _assistant_text(item) is not None:
        text = _assistant_text(item)
        if previous is not None and previous.get("content") is None:
            previous["content"] = text
        else:
            messages.append({"role": "assistant", "content": text})
    elif "role" in item:
        messages.append(_with_image_detail(item))
    else:
        raise ChatTemplateError(f"input item type {kind!r} is refused by vLLM")


def _assistant_text(item: dict[str, Any]) -> str | None:
    """An assistant item keeps only its text, or its first part's text."""
    content = item.get("content")
    if isinstance(content, list) and content and isinstance(content[0], dict):
        content = content[0].get("text")
    return content if isinstance(content, str) else None


def _with_image_detail(item: dict[str, Any]) -> dict[str, Any]:
    content = item.get("content")
    if not isinstance(content, list):
        return item
    parts = [
        {**p, "detail": "auto"}
        if isinstance(p, dict) and p.get("type") == "input_image" and "detail" not in p
        else p
        for p in content
    ]
    return {**item, "content": parts}


def _response_tools(tools: Any) -> list[dict[str, Any]] | None:
    """Function tools, and namespaced ones flattened, in the chat tool shape."""
    if not tools:
        return None
    if not isinstance(tools, list):
        raise ChatTemplateError("tools is not a list")
    dumped = []
    for tool in tools:
        if not isinstance(tool, dict):
            raise ChatTemplateError("a tool that is not an object")
        if tool.get("type") == "function":
            dumped.append(tool)
        elif tool.get("type") == "namespace":
            dumped += [
                {**inner, "name": f"{tool.get('name')}__{inner.get('name')}"}
                for inner in tool.get("tools") or []
                if isinstance(inner, dict) and inner.get("type") == "function"
            ]
        elif tool.get("type") == "custom":
            raise ChatTemplateError("custom tools render as a shim the sidecar does not copy")
    return [{"type": "function", "function": function_definition(t)} for t in dumped]
