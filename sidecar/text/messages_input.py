"""An Anthropic ``/v1/messages`` body (``count_tokens`` and ``/render`` too) as the chat request
vLLM 0.33 turns it into (``entrypoints/anthropic/serving.py``).

The system text blocks are joined with no separator, a block that starts with
``x-anthropic-billing-header`` dropped whole; text and image blocks become chat parts (one
text part alone becomes a string); ``thinking`` becomes reasoning; ``tool_use`` a tool call
with ``json.dumps`` arguments; a user turn's ``tool_result`` a tool message, then a user
message with its images; an assistant turn's ``tool_result`` the text ``Tool result: <str of
its content>``. In-message system turns stay where they are unless the template refuses a
system message after the first (vLLM probes that at start-up), then they join the leading one.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from sidecar.body.refs import tool_result_image_is_loaded
from sidecar.text.chat_request import ChatRequest, chat_tools, template_kwargs
from sidecar.text.conversation import ChatTemplateError

_BILLING_HEADER = "x-anthropic-billing-header"


def from_messages_body(root: Mapping[str, Any], *, merge_inline_system: bool) -> ChatRequest:
    """A ``/v1/messages`` body (also ``count_tokens`` and ``/render``). ``merge_inline_system``:
    the template refuses a system message after the first (vLLM probes it at start-up), so
    in-message system turns join the leading system text."""
    turns = root.get("messages")
    if not isinstance(turns, list):
        raise ChatTemplateError("no messages")
    system = root.get("system")
    texts: list[str | None] = [system] if isinstance(system, str) else [*_system_texts(system)]
    if merge_inline_system:
        texts += [
            _system_text(t) for t in turns if isinstance(t, dict) and t.get("role") == "system"
        ]
    messages: list[dict[str, Any]] = []
    if any(texts):
        messages.append({"role": "system", "content": "".join(t for t in texts if t)})
    for turn in turns:
        if isinstance(turn, dict) and turn.get("role") == "system":
            text = None if merge_inline_system else _system_text(turn)
            if text:
                messages.append({"role": "system", "content": text})
            continue
        _anthropic_turn(turn, messages)
    tools = root.get("tools")
    if tools is not None and not isinstance(tools, list):
        raise ChatTemplateError("tools is not a list")
    chat_tool_list = None if tools is None else chat_tools([_anthropic_tool(t) for t in tools])
    output = root.get("output_config")
    thinking = root.get("thinking")
    effort = output.get("effort") if isinstance(output, dict) else None
    if isinstance(thinking, dict) and thinking.get("type") == "disabled":
        effort = "none"
    fields = {"add_generation_prompt": True, "continue_final_message": False,
              "reasoning_effort": effort}  # fmt: skip
    kwargs = template_kwargs(root.get("chat_template_kwargs"), fields, chat_tool_list)
    return ChatRequest(messages, kwargs.pop("tools", None), kwargs)


def _system_texts(blocks: Any) -> list[str]:
    """Text blocks of a system list, Claude Code's per-request header block dropped."""
    if not isinstance(blocks, list):
        return []
    return [
        b["text"]
        for b in blocks
        if isinstance(b, dict) and b.get("type") == "text" and isinstance(b.get("text"), str)
        and b["text"] and not b["text"].startswith(_BILLING_HEADER)
    ]  # fmt: skip


def _system_text(turn: dict[str, Any]) -> str | None:
    content = turn.get("content")
    if isinstance(content, str):
        return None if content.startswith(_BILLING_HEADER) else content
    return "".join(_system_texts(content)) or None


def _anthropic_tool(tool: Any) -> dict[str, Any]:
    if not isinstance(tool, dict) or not isinstance(tool.get("input_schema"), dict):
        raise ChatTemplateError("a tool vLLM refuses")
    schema = tool["input_schema"]
    schema = schema if "type" in schema else {**schema, "type": "object"}
    function = {"name": tool.get("name"), "description": tool.get("description"),
        "parameters": schema, "strict": tool.get("strict"),
        "defer_loading": tool.get("defer_loading")}  # fmt: skip
    return {"type": "function", "function": function}


def _anthropic_turn(turn: Any, messages: list[dict[str, Any]]) -> None:
    if not isinstance(turn, dict) or turn.get("role") not in ("user", "assistant", "system"):
        raise ChatTemplateError("a message vLLM refuses")
    role, content = turn["role"], turn.get("content")
    if isinstance(content, str):
        messages.append({"role": role, "content": content})
        return
    if not isinstance(content, list):
        raise ChatTemplateError("content is neither text nor blocks")
    parts: list[dict[str, Any]] = []
    calls: list[dict[str, Any]] = []
    reasoning: list[str] = []
    for block in content:
        if not isinstance(block, dict):
            raise ChatTemplateError("a block that is not an object")
        kind = block.get("type")
        if kind == "text" and block.get("text"):
            parts.append({"type": "text", "text": block["text"]})
        elif kind == "image" and block.get("source"):
            parts.append({"type": "image_url", "image_url": {"url": "<image>"}})
        elif kind == "thinking" and block.get("thinking") is not None:
            reasoning.append(block["thinking"])
        elif kind == "tool_use":
            arguments = json.dumps(block.get("input") or {})
            calls.append({"id": block.get("id") or "call_0", "type": "function",
                "function": {"name": block.get("name") or "", "arguments": arguments}})  # fmt: skip
        elif kind == "tool_result" and role == "user":
            messages.extend(_tool_result(block))
        elif kind == "tool_result":
            parts.append({"type": "text", "text": f"Tool result: {_printed(block)}"})
        elif kind in ("tool_addition", "tool_removal"):
            raise ChatTemplateError("tool changes rewrite the tool list")
    message: dict[str, Any] = {"role": role}
    if reasoning:
        message["reasoning"] = "".join(reasoning)
    if calls:
        message["tool_calls"] = calls
    if parts:
        single = len(parts) == 1 and parts[0]["type"] == "text"
        message["content"] = parts[0]["text"] if single else parts
    if not (role == "user" and "content" not in message):
        messages.append(message)


def _printed(block: dict[str, Any]) -> str:
    """vLLM prints an assistant's tool result with Python's ``str``: a block list as its
    repr. An inline image in it is lifted out of the parsed body, so it cannot be printed."""
    content = block.get("content")
    if not content:
        return ""
    if isinstance(content, list) and any(
        isinstance(b, dict) and b.get("type") == "image" for b in content
    ):
        raise ChatTemplateError("an image printed as text")
    return str(content)


def _tool_result(block: dict[str, Any]) -> list[dict[str, Any]]:
    """A user turn's ``tool_result``: a tool message, then a user message with its images."""
    content = block.get("content")
    texts: list[str] = []
    images = 0
    references: list[dict[str, Any]] = []
    if isinstance(content, list):
        for item in content:
            if not isinstance(item, dict):
                continue
            if item.get("type") == "text":
                texts.append(item.get("text", ""))
            elif item.get("type") == "image":
                source = item.get("source", {})
                images += isinstance(source, dict) and tool_result_image_is_loaded(source)
            elif item.get("type") == "tool_reference":
                name = item.get("tool_name") or item.get("name")
                if name:
                    references.append({"type": "tool_reference", "name": name})
    text = content if isinstance(content, str) else "\n".join(texts)
    call_id = block.get("tool_use_id") or ""
    out: list[dict[str, Any]] = [{"role": "tool", "tool_call_id": call_id, "content": text or ""}]
    if images:
        image = {"type": "image_url", "image_url": {"url": "<image>"}}
        out.append({"role": "user", "content": [image] * images})
    if references:
        out.append({"role": "tool", "tool_call_id": call_id, "content": references})
    return out
