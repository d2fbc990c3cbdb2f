"""What a chat-shaped request asks the chat template to render, as vLLM 0.33 builds it.

A :class:`ChatRequest` holds the messages, the tool list the template sees and the keyword
arguments vLLM passes to ``apply_chat_template``. ``from_chat_body`` reads a
``/v1/chat/completions`` body; ``responses_input`` and ``messages_input`` build one from a
Responses or Anthropic body. The keyword arguments follow
``ChatCompletionRequest.build_chat_params`` and ``ChatParams.with_defaults``: the request's
``chat_template_kwargs``, overridden by the fields (``add_generation_prompt`` true unless
sent, ``continue_final_message``, ``documents``, ``reasoning_effort`` and the
``enable_thinking`` it implies), over the server's ``tools`` and ``tokenize``; a value of
``None`` or ``"auto"`` never overrides.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from sidecar.body.lax_values import lax_bool
from sidecar.text.conversation import ChatTemplateError


@dataclass(frozen=True, slots=True)
class ChatRequest:
    """One conversation to render."""

    messages: list[Any]
    tools: list[dict[str, Any]] | None = None
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    # The request's own (trusted) ``chat_template`` field. vLLM reads the content format from
    # it (else from the server's template), while a template sent in ``chat_template_kwargs``
    # only renders: its parts arrive in the server template's format.
    template: str | None = None


def merge_kwargs(defaults: Mapping[str, Any], overrides: Mapping[str, Any]) -> dict[str, Any]:
    """vLLM's ``merge_kwargs``: overrides win unless they are None or "auto"."""
    return {**defaults, **{k: v for k, v in overrides.items() if not _unset(v)}}


def _unset(value: Any) -> bool:
    # vLLM tests ``value in (None, "auto")``: equality, so only None and the string match.
    return value is None or (isinstance(value, str) and value == "auto")


def template_kwargs(
    request_kwargs: Any, fields: Mapping[str, Any], tools: list[dict[str, Any]] | None
) -> dict[str, Any]:
    """The keyword arguments vLLM hands to ``apply_chat_template`` (tools included)."""
    user = dict(request_kwargs) if isinstance(request_kwargs, dict) else {}
    effort = fields.get("reasoning_effort")
    extra = dict(fields)
    if effort is not None and "enable_thinking" not in user:
        extra["enable_thinking"] = effort != "none"
    defaults: dict[str, Any] = {"tokenize": False} if tools is None else {"tools": tools,
        "tokenize": False}  # fmt: skip
    return merge_kwargs(defaults, merge_kwargs(user, extra))


def from_chat_body(root: Mapping[str, Any]) -> ChatRequest:
    """A ``/v1/chat/completions`` body (or its ``/render`` twin)."""
    messages = root.get("messages")
    if not isinstance(messages, list):
        raise ChatTemplateError("no messages")
    tools = chat_tools(root.get("tools"))
    fields = {
        "add_generation_prompt": lax_bool(root.get("add_generation_prompt"), True),
        "continue_final_message": lax_bool(root.get("continue_final_message"), False),
        "documents": root.get("documents"),
        "reasoning_effort": root.get("reasoning_effort"),
    }
    kwargs = template_kwargs(root.get("chat_template_kwargs"), fields, tools)
    template = root.get("chat_template")
    template = template if isinstance(template, str) else None
    return ChatRequest(messages, kwargs.pop("tools", None), kwargs, template)


def chat_tools(tools: Any) -> list[dict[str, Any]] | None:
    """``tools`` as vLLM dumps its ``ChatCompletionToolsParam`` models for the template."""
    if tools is None:
        return None
    if not isinstance(tools, list):
        raise ChatTemplateError("tools is not a list")
    dumped = []
    for tool in tools:
        if not isinstance(tool, dict) or tool.get("type", "function") != "function":
            raise ChatTemplateError("a tool vLLM refuses")
        function = tool.get("function")
        if not isinstance(function, dict):
            raise ChatTemplateError("a tool without a function")
        defer = tool.get("defer_loading")
        if defer is not None and function.get("defer_loading") is None:
            function = {**function, "defer_loading": defer}
        entry: dict[str, Any] = {"type": "function", "function": function_definition(function)}
        if defer is not None:
            entry["defer_loading"] = defer
        dumped.append(entry)
    return dumped


def function_definition(function: Mapping[str, Any]) -> dict[str, Any]:
    """vLLM's ``FunctionDefinition`` dumped: its own fields in order, the optional two only
    when set."""
    if not isinstance(function.get("name"), str):
        raise ChatTemplateError("a function without a name")
    dumped = {
        "name": function["name"],
        "description": function.get("description"),
        "parameters": function.get("parameters"),
    }
    for key in ("strict", "defer_loading"):
        if function.get(key) is not None:
            dumped[key] = function[key]
    return dumped
