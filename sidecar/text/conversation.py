"""Chat messages as vLLM 0.33 hands them to the chat template (``renderers/chat_utils``).

:func:`conversation` turns a request's OpenAI-style messages into what the template sees:

* every text-like part (``text``, ``input_text``, ``output_text``, ``refusal``, ``thinking``)
  becomes ``{"type": "text", "text": ...}`` and every media part ``{"type": "image"}`` (or
  video, audio), keeping keys vLLM does not know, for templates that loop over parts
  (``"openai"`` format); for the others (``"string"``) the texts are joined by newlines and
  the media placeholders put in front, unless the text already holds them;
* a system message loses a first line that starts with ``x-anthropic-billing-header``;
* a tool message's all-text list becomes one newline-joined string;
* an assistant's null content is empty, its tool-call arguments are decoded into objects
  (invalid JSON becomes ``{}``), and an empty ``tool_calls`` is dropped;
* ``developer`` messages become ``system`` when the template does not name that role, and
  then all system messages are merged into one at the start.

Shapes vLLM refuses raise ``ChatTemplateError``: the caller falls back to the estimate and
vLLM gives the client its own answer.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from sidecar.text.template_format import ContentFormat

TEXT_PARTS = {"text": "text", "input_text": "text", "output_text": "text", "refusal": "refusal",
    "thinking": "thinking"}  # fmt: skip
_MEDIA_PARTS = {"image_url": "image", "input_image": "image", "image_pil": "image",
    "image_embeds": "image", "video_url": "video", "video_embeds": "video", "audio_url": "audio",
    "input_audio": "audio", "audio_embeds": "audio"}  # fmt: skip
# vLLM's order for a part without "type" (or with a "uuid").
_TYPELESS = ("image_url", "image_pil", "image_embeds", "audio_embeds", "video_embeds",
    "prompt_embeds", "audio_url", "input_audio", "video_url", "tool_reference")  # fmt: skip
# Every key of vLLM's content-part types; any other key of a part reaches the template.
_KNOWN_PART_KEYS = frozenset(("audio_embeds", "audio_url", "closed", "data", "file",
    "image_embeds", "image_pil", "image_url", "input_audio", "name", "prompt_cache_breakpoint",
    "refusal", "text", "thinking", "type", "uuid", "video_embeds", "video_url"))  # fmt: skip
_BILLING_HEADER = "x-anthropic-billing-header"


class ChatTemplateError(Exception):
    """The request cannot be rendered exactly; the estimate is used instead."""


def conversation(
    messages: Sequence[Any],
    content_format: ContentFormat,
    placeholders: Mapping[str, str],
    *,
    developer_role: bool,
) -> list[dict[str, Any]]:
    """The messages the template renders. ``placeholders`` maps a modality to the model's
    placeholder string (string format only)."""
    result = [_message(m, content_format, placeholders) for m in messages]
    if not developer_role and any(m["role"] == "developer" for m in result):
        for message in result:
            if message["role"] == "developer":
                message["role"] = "system"
                message.pop("tools", None)
        result = _merge_system(result)
    return result


def _message(
    message: Any, content_format: ContentFormat, placeholders: Mapping[str, str]
) -> dict[str, Any]:
    if not isinstance(message, dict) or not isinstance(message.get("role"), str):
        raise ChatTemplateError("a message without a role")
    role = message["role"]
    content = message.get("content")
    parts = (
        []
        if content is None
        else [{"type": "text", "text": content}]
        if isinstance(content, str)
        else content
    )
    if not isinstance(parts, list):
        raise ChatTemplateError("content is neither text nor a list of parts")
    if role == "system":
        parts = _strip_billing_header(parts)
    wrapped = [p for p in (_part(part, content_format) for part in parts) if p is not None]
    result: dict[str, Any] = {"role": role}
    if content_format == "openai":
        result["content"] = [p for p in wrapped if isinstance(p, dict)]
    else:
        result["content"] = _string_content(wrapped, placeholders)
    if role == "assistant":
        _assistant(message, result)
    elif role == "tool":
        if "tool_call_id" in message:
            result["tool_call_id"] = message["tool_call_id"]
        if isinstance(result["content"], list) and all(
            isinstance(p, dict) and p.get("type") == "text" for p in result["content"]
        ):
            result["content"] = "\n".join(p.get("text", "") for p in result["content"])
    for key in ("name", "task"):
        if isinstance(message.get(key), str):
            result[key] = message[key]
    if role == "developer":
        result["tools"] = message.get("tools")
    return result


def _strip_billing_header(parts: list[Any]) -> list[Any]:
    """Claude Code's per-request header line changes every time; vLLM drops it."""
    kept = []
    for part in parts:
        text = part if isinstance(part, str) else None
        if isinstance(part, dict) and part.get("type") == "text":
            text = part.get("text")
        if not (isinstance(text, str) and text.startswith(_BILLING_HEADER)):
            kept.append(part)
            continue
        rest = text.partition("\n")[2]
        if rest:
            kept.append(rest if isinstance(part, str) else {**part, "text": rest})
    return kept


def _part(part: Any, content_format: ContentFormat) -> dict[str, Any] | str | None:
    """One part as the template sees it; a media part in string format is a ``("media",
    modality)`` marker dict that ``_string_content`` turns into a placeholder."""
    if isinstance(part, str):
        return {"type": "text", "text": part} if content_format == "openai" else part
    if not isinstance(part, dict):
        raise ChatTemplateError("a content part that is not an object")
    kind, value = _kind_and_value(part)
    if kind in ("text", "refusal") and value is None:
        return None  # vLLM skips it with a warning
    extra = {k: v for k, v in part.items() if k not in _KNOWN_PART_KEYS}
    if kind in TEXT_PARTS:
        if content_format == "openai":
            return {"type": "text", "text": value, **extra}
        return value if isinstance(value, str) else str(value)
    if kind == "tool_reference":
        if content_format == "openai":
            return {"type": "tool_reference", "name": value}
        return value if isinstance(value, str) else str(value)
    if kind not in _MEDIA_PARTS:
        raise ChatTemplateError(f"part type {kind!r} is not rendered")
    if content_format == "openai":
        return {"type": _MEDIA_PARTS[kind], **extra}
    return {"media": _MEDIA_PARTS[kind]}


def _kind_and_value(part: dict[str, Any]) -> tuple[str, Any]:
    kind = part.get("type")
    if isinstance(kind, str) and part.get("uuid") is None and (kind in TEXT_PARTS or kind in
            _MEDIA_PARTS or kind == "tool_reference"):  # fmt: skip
        field = TEXT_PARTS.get(kind, "name" if kind == "tool_reference" else kind)
        return kind, part.get(field)
    if kind is None or part.get("uuid") is not None:
        for key in _TYPELESS:
            if key in part and not (key == "audio_embeds" and kind == "video_embeds"):
                return key, part.get("name" if key == "tool_reference" else key)
    raise ChatTemplateError(f"part type {kind!r} is refused by vLLM")


def _string_content(parts: list[dict[str, Any] | str], placeholders: Mapping[str, str]) -> str:
    """vLLM's string format: texts joined by newlines, missing placeholders in front."""
    texts = [p for p in parts if isinstance(p, str)]
    media = [placeholders.get(p["media"]) for p in parts if isinstance(p, dict)]
    if any(placeholder is None for placeholder in media):
        raise ChatTemplateError("no placeholder string for a media part")
    text = "\n".join(texts)
    missing: list[str] = []
    for placeholder, count in Counter(p for p in media if p is not None).items():
        left = count - text.count(placeholder)
        if left < 0:
            raise ChatTemplateError(f"more {placeholder!r} in the text than media items")
        missing += [placeholder] * left
    return "\n".join([*missing, text] if text else missing)


def _assistant(message: dict[str, Any], result: dict[str, Any]) -> None:
    calls = message.get("tool_calls")
    if calls is not None:
        if not isinstance(calls, list) or not all(
            isinstance(c, dict) and c.get("type", "function") == "function"
            and isinstance(c.get("function"), dict) for c in calls
        ):  # fmt: skip
            raise ChatTemplateError("tool_calls that vLLM refuses")
        if calls:
            result["tool_calls"] = [
                {**c, "function": {**c["function"], "arguments": _arguments(c["function"])}}
                for c in calls
            ]
    reasoning = message.get("reasoning")
    if reasoning is None:
        reasoning = message.get("reasoning_content")
    if reasoning is not None:
        result["reasoning"] = result["reasoning_content"] = reasoning


def _arguments(function: dict[str, Any]) -> Any:
    """Decoded arguments: chat templates expect a mapping; vLLM coerces anything else to {}."""
    arguments = function.get("arguments")
    if not arguments:
        return {}
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except json.JSONDecodeError:
            return {}
    return arguments if isinstance(arguments, dict) else {}


def _merge_system(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """All system messages as one at the start, joined by blank lines (vLLM's
    ``_consolidate_system_messages``); image parts of a system message are dropped."""
    texts: list[str] = []
    others: list[dict[str, Any]] = []
    needed = False
    for i, message in enumerate(messages):
        if message["role"] != "system":
            others.append(message)
            continue
        needed = needed or i > 0 or bool(texts)
        content = message.get("content", "")
        if isinstance(content, list):
            content = "\n".join(
                p["text"] if isinstance(p, dict) else p
                for p in content
                if (isinstance(p, dict) and "text" in p) or isinstance(p, str)
            )
        if content:
            texts.append(content)
    if not needed:
        return messages
    return [{"role": "system", "content": "\n\n".join(texts)}, *others]
