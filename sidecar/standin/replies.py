"""What the stand-in answers: planned generations and the JSON or SSE bodies built from them.

Pure.  Shapes follow vLLM 0.33 (``vllm-facts.md`` §3, §10): compact JSON, ``{"error": {message,
type, param, code}}`` bodies (Anthropic's own shape on ``/v1/messages``), and on chat and
completions streams a final usage chunk with ``choices: []`` and nulls dropped, then
``data: [DONE]``.  Responses and Messages streams end with their own completion events instead.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any

import orjson

from sidecar.standin.config import StandinConfig

CHAT, COMPLETIONS, RESPONSES, MESSAGES = (
    "/v1/chat/completions",
    "/v1/completions",
    "/v1/responses",
    "/v1/messages",
)
ROUTES = (CHAT, COMPLETIONS, RESPONSES, MESSAGES)
DONE = b"data: [DONE]\n\n"
_ID_PREFIXES = {CHAT: "chatcmpl-", COMPLETIONS: "cmpl-", RESPONSES: "resp_", MESSAGES: "msg_"}
_WORDS = (" The", " image", " shows", " a", " small", " grey", " cat", " on", " a", " sofa", ".")
_LIMIT_KEYS = ("max_completion_tokens", "max_tokens", "max_output_tokens")


class StandinRequestError(Exception):
    """A request vLLM would refuse before generating anything."""

    def __init__(self, status: int, message: str, *, param: str | None = None) -> None:
        super().__init__(message)
        self.status, self.message, self.param = status, message, param


_ERROR_TYPES = {400: "BadRequestError", 404: "NotFoundError", 422: "UnprocessableEntityError"}
_ERROR_TYPES |= {500: "InternalServerError", 501: "NotImplementedError"}
_ANTHROPIC_TYPES = {400: "invalid_request_error", 404: "not_found_error", 413: "request_too_large"}
_ANTHROPIC_TYPES |= {429: "rate_limit_error", 503: "overloaded_error"}
_MESSAGES = {
    500: "The server had an error while processing your request.",
    503: "The engine is currently busy and cannot accept new requests. "
    "Please try again later or on a different instance.",
}


def error_body(
    status: int, message: str | None = None, *, param: str | None = None, anthropic: bool = False
) -> dict[str, Any]:
    """vLLM's error body for ``status`` (``code`` equals the HTTP status); Anthropic's if asked."""
    text = message or _MESSAGES.get(status, f"Stand-in fault: HTTP {status}.")
    if anthropic:
        kind = _ANTHROPIC_TYPES.get(
            status, "api_error" if status >= 500 else "invalid_request_error"
        )
        return {"type": "error", "error": {"type": kind, "message": text}}
    kind = _ERROR_TYPES.get(status, HTTPStatus(status).phrase)
    return {"error": {"message": text, "type": kind, "param": param, "code": status}}


@dataclass(frozen=True)
class Completion:
    """One planned generation: the numbers every body shape is built from."""

    route: str
    model: str
    request_id: str
    created: int
    prompt_tokens: int
    image_tokens: int
    words: tuple[str, ...]
    truncated: bool
    """Generation stopped at ``max_tokens`` or at the end of the context."""

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
        return _ID_PREFIXES[self.route] + self.request_id


def plan_completion(config: StandinConfig, route: str, body: Mapping[str, Any]) -> Completion:
    """Count tokens as vLLM would: refuse an over-long prompt, clamp ``max_tokens`` (§3a, §10)."""
    prompt_tokens = config.prompt_tokens_fn(body)
    if prompt_tokens > config.max_model_len:
        raise StandinRequestError(
            400,
            f"Input length ({prompt_tokens}) exceeds model's maximum context length "
            f"({config.max_model_len}).",
        )
    limit = next((body[key] for key in _LIMIT_KEYS if type(body.get(key)) is int), None)
    room = config.max_model_len - prompt_tokens
    count = min(
        config.completion_tokens, room, config.completion_tokens if limit is None else limit
    )
    model = body.get("model")
    return Completion(
        route=route,
        model=model if isinstance(model, str) else config.served_model_name,
        request_id=uuid.uuid4().hex,
        created=int(time.time()),
        prompt_tokens=prompt_tokens,
        image_tokens=config.image_tokens_fn(body),
        words=tuple(_WORDS[i % len(_WORDS)] for i in range(max(0, count))),
        truncated=count in (room, limit),
    )


def openai_usage(config: StandinConfig, c: Completion, *, streaming: bool) -> dict[str, Any]:
    """``usage`` as vLLM sends it: with nulls in a JSON answer, without in the final chunk."""
    usage: dict[str, Any] = {
        "prompt_tokens": c.prompt_tokens,
        "total_tokens": c.total_tokens,
        "completion_tokens": c.completion_tokens,
        "prompt_tokens_details": None,
    }
    if config.enable_prompt_tokens_details:
        usage["prompt_tokens_details"] = {
            "cached_tokens": 0,
            "multimodal_tokens": {"image": c.image_tokens},
        }
    if streaming:
        return {key: value for key, value in usage.items() if value is not None}
    return usage | {"completion_tokens_details": None}


def _head(c: Completion, kind: str) -> dict[str, Any]:
    return {"id": c.id, "object": kind, "created": c.created, "model": c.model}


def _response(c: Completion) -> dict[str, Any]:
    text = {"type": "output_text", "text": "".join(c.words), "annotations": []}
    return {
        "id": c.id,
        "object": "response",
        "created_at": c.created,
        "model": c.model,
        "status": "incomplete" if c.truncated else "completed",
        "incomplete_details": {"reason": "max_output_tokens"} if c.truncated else None,
        "output": [
            {
                "id": f"msg_{c.request_id}",
                "type": "message",
                "role": "assistant",
                "status": "completed",
                "content": [text],
            }
        ],
        "usage": {
            "input_tokens": c.prompt_tokens,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": c.completion_tokens,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": c.total_tokens,
        },
    }


def _message(c: Completion) -> dict[str, Any]:
    return {
        "id": c.id,
        "type": "message",
        "role": "assistant",
        "model": c.model,
        "content": [{"type": "text", "text": "".join(c.words)}],
        "stop_reason": "max_tokens" if c.truncated else "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": c.prompt_tokens, "output_tokens": c.completion_tokens},
    }


def json_answer(config: StandinConfig, c: Completion) -> dict[str, Any]:
    """The non-streaming answer for ``c.route``."""
    text = "".join(c.words)
    if c.route == RESPONSES:
        return _response(c)
    if c.route == MESSAGES:
        return _message(c)
    if c.route == CHAT:
        head = _head(c, "chat.completion")
        choice: dict[str, Any] = {
            "message": {"role": "assistant", "content": text, "tool_calls": []}
        }
    else:
        head = _head(c, "text_completion")
        choice = {"text": text}
    choice = {"index": 0, **choice, "logprobs": None, "finish_reason": c.finish_reason}
    usage = openai_usage(config, c, streaming=False)
    return {**head, "choices": [choice | {"stop_reason": None}], "usage": usage}


def _data(payload: object) -> bytes:
    return b"data: " + orjson.dumps(payload) + b"\n\n"


def _event(name: str, payload: dict[str, Any]) -> bytes:
    return f"event: {name}\n".encode() + _data({"type": name, **payload})


def stream_events(config: StandinConfig, c: Completion, *, include_usage: bool) -> list[bytes]:
    """Every SSE event of a streamed answer, framed and in order (one per generated token)."""
    if c.route == RESPONSES:
        final = _response(c)
        start = final | {"status": "in_progress", "incomplete_details": None}
        start |= {"output": [], "usage": None}
        deltas = [
            _event(
                "response.output_text.delta",
                {"sequence_number": n, "item_id": f"msg_{c.request_id}", "output_index": 0}
                | {"content_index": 0, "delta": word},
            )
            for n, word in enumerate(c.words, start=1)
        ]
        done = {"sequence_number": len(deltas) + 1, "response": final}
        created = _event("response.created", {"sequence_number": 0, "response": start})
        return [created, *deltas, _event("response.completed", done)]
    if c.route == MESSAGES:
        final = _message(c)
        usage = {"input_tokens": c.prompt_tokens, "output_tokens": 0}
        start = final | {"content": [], "stop_reason": None, "usage": usage}
        block = {"index": 0}
        return [
            _event("message_start", {"message": start}),
            _event("content_block_start", block | {"content_block": {"type": "text", "text": ""}}),
            *(
                _event("content_block_delta", block | {"delta": {"type": "text_delta", "text": w}})
                for w in c.words
            ),
            _event("content_block_stop", block),
            _event(
                "message_delta",
                {"delta": {"stop_reason": final["stop_reason"], "stop_sequence": None}}
                | {"usage": {"output_tokens": c.completion_tokens}},
            ),
            _event("message_stop", {}),
        ]
    chat = c.route == CHAT
    head = _head(c, "chat.completion.chunk" if chat else "text_completion")

    def chunk(part: dict[str, Any], finish_reason: str | None = None) -> bytes:
        choice = {"index": 0, **part, "logprobs": None, "finish_reason": finish_reason}
        return _data({**head, "choices": [choice]})

    def piece(word: str) -> dict[str, Any]:
        return {"delta": {"content": word}} if chat else {"text": word}

    events = [chunk({"delta": {"role": "assistant", "content": ""}})] if chat else []
    events += [chunk(piece(word)) for word in c.words]
    events.append(chunk(piece(""), c.finish_reason))
    if include_usage:
        usage = openai_usage(config, c, streaming=True)
        events.append(_data({**head, "choices": [], "usage": usage}))
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
    """``GET /v1/models``: one base-model card, as vLLM lists it (§5)."""
    created = int(time.time())
    permission = {
        "id": f"modelperm-{uuid.uuid4().hex}",
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
    card = {
        "id": config.served_model_name,
        "object": "model",
        "created": created,
        "owned_by": "vllm",
        "root": config.served_model_name,
        "parent": None,
        "max_model_len": config.max_model_len,
        "permission": [permission],
    }
    return {"object": "list", "data": [card]}
