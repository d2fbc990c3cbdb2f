"""A chat template compiled once, and rendered as transformers 5 renders it for vLLM 0.33.

``compiled(source)`` parses and compiles a template in transformers' sandboxed environment
(``tojson`` without HTML escaping, ``raise_exception``, ``strftime_now``, loop controls and the
``{% generation %}`` tag) and reads what vLLM reads from it (``template_format``). It is a
bounded LRU: a server's own template stays in it, and a trusted request's own template costs
a compile only the first time it is seen.

``render`` applies vLLM's keyword filtering (``resolve_chat_template_kwargs``: a request's
``chat_template_kwargs`` reach the template only when the template reads that variable) and
transformers' ``continue_final_message`` (a tag after the last message's text, the output cut
there). Any failure is ``ChatTemplateError``: the request is estimated instead, never a 500.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import jinja2
import jinja2.ext
from jinja2 import nodes
from jinja2.sandbox import ImmutableSandboxedEnvironment

from sidecar.text.conversation import ChatTemplateError
from sidecar.text.template_format import (
    ContentFormat,
    content_format,
    supports_developer,
    template_variables,
)

TEMPLATE_CACHE_SIZE = 32  # distinct templates kept compiled (vLLM bounds its own cache at 32)
# transformers' apply_chat_template parameters: consumed by it, never template variables.
_APPLY_PARAMETERS = frozenset(("self", "conversation", "tools", "documents", "chat_template",
    "add_generation_prompt", "continue_final_message", "tokenize", "sanitize_control_tokens",
    "padding", "truncation", "max_length", "return_tensors", "return_dict",
    "return_assistant_tokens_mask", "tokenizer_kwargs"))  # fmt: skip
_CONTINUE_TAG = "CONTINUE_FINAL_MESSAGE_TAG "


@dataclass(frozen=True, slots=True)
class CompiledTemplate:
    """One template and what vLLM reads from its syntax tree."""

    source: str
    template: jinja2.Template
    content_format: ContentFormat
    variables: frozenset[str]
    developer_role: bool


@functools.lru_cache(maxsize=TEMPLATE_CACHE_SIZE)
def compiled(source: str) -> CompiledTemplate:
    """The template compiled; ``ChatTemplateError`` when it does not compile."""
    environment = _environment()
    try:
        ast = environment.parse(source)
        template = environment.from_string(source)
    except jinja2.TemplateError as exc:
        raise ChatTemplateError(f"the chat template does not compile: {exc}") from None
    return CompiledTemplate(
        source, template, content_format(ast), template_variables(ast), supports_developer(source)
    )


def render(
    template: CompiledTemplate,
    messages: Sequence[dict[str, Any]],
    *,
    tools: list[Any] | None,
    kwargs: Mapping[str, Any],
    special_tokens: Mapping[str, str],
) -> str:
    """The prompt text vLLM renders: ``kwargs`` are the request's merged template kwargs."""
    if not messages:
        raise ChatTemplateError("an empty conversation")
    if kwargs.get("sanitize_control_tokens") or kwargs.get("return_assistant_tokens_mask"):
        raise ChatTemplateError("transformers refuses these without tokenizing")
    generation = bool(kwargs.get("add_generation_prompt", False))
    continuing = bool(kwargs.get("continue_final_message", False))
    if generation and continuing:
        raise ChatTemplateError("continue_final_message with add_generation_prompt")
    passed = {
        k: v for k, v in kwargs.items() if k in template.variables and k not in _APPLY_PARAMETERS
    }
    chat = list(messages)
    final_text = ""
    if continuing:
        chat[-1], final_text = _tagged(chat[-1])
    try:
        rendered = template.template.render(
            **{**special_tokens, **passed},
            messages=chat,
            tools=tools,
            documents=kwargs.get("documents"),
            add_generation_prompt=generation,
        )
    except Exception as exc:  # a template meets shapes it never expected: estimate instead
        raise ChatTemplateError(f"{type(exc).__name__}: {exc}") from exc
    if not continuing:
        return rendered
    if final_text.strip() not in rendered or _CONTINUE_TAG.strip() not in rendered:
        raise ChatTemplateError("the template dropped the final message it should continue")
    cut = rendered.rindex(_CONTINUE_TAG.strip())
    if rendered[cut : cut + len(_CONTINUE_TAG)] == _CONTINUE_TAG:
        return rendered[:cut]
    return rendered[:cut].rstrip()  # the template trimmed the tag's trailing space


def _tagged(message: dict[str, Any]) -> tuple[dict[str, Any], str]:
    """The final message with transformers' tag after its (last) text, and that text."""
    content = message.get("content")
    if content is None:
        raise ChatTemplateError("the final message has no content to continue")
    if isinstance(content, list):
        blocks = [dict(block) if isinstance(block, dict) else block for block in content]
        for block in reversed(blocks):
            if isinstance(block, dict) and "text" in block:
                text = block["text"]
                block["text"] = text + _CONTINUE_TAG
                return {**message, "content": blocks}, text
        raise ChatTemplateError("no text to continue in the final message")
    return {**message, "content": content + _CONTINUE_TAG}, content


class _GenerationTag(jinja2.ext.Extension):
    """``{% generation %}...{% endgeneration %}``: transformers marks assistant text with it;
    rendering only needs its body."""

    tags = {"generation"}  # noqa: RUF012 - jinja2's own class attribute

    def parse(self, parser: Any) -> nodes.Node:
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
        call = self.call_method("_body")
        return nodes.CallBlock(call, [], [], body).set_lineno(lineno)

    def _body(self, caller: Any) -> str:
        return str(caller())


def _environment() -> ImmutableSandboxedEnvironment:
    """The sandboxed environment transformers renders chat templates in."""
    environment = ImmutableSandboxedEnvironment(
        trim_blocks=True,
        lstrip_blocks=True,
        extensions=[_GenerationTag, jinja2.ext.loopcontrols],
    )

    def tojson(
        value: Any,
        ensure_ascii: bool = False,
        indent: int | None = None,
        separators: tuple[str, str] | None = None,
        sort_keys: bool = False,
    ) -> str:
        return json.dumps(
            value, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
            sort_keys=sort_keys,
        )  # fmt: skip

    def raise_exception(message: str) -> None:
        raise jinja2.exceptions.TemplateError(message)

    def strftime_now(date_format: str) -> str:
        # Templates print "today" in the server's local time, as transformers does.
        return datetime.now().strftime(date_format)

    environment.filters["tojson"] = tojson
    environment.globals["raise_exception"] = raise_exception
    environment.globals["strftime_now"] = strftime_now
    return environment
