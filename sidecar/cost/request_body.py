"""The request fields the sidecar prices, read fast, with the forwarded bytes left alone.

For each inspected route this reads the model, the images and other media, the prompt's
text, the output-token limit, ``n`` and the streaming flags into a frozen
:class:`RequestBody`. Nothing here changes the body; :func:`splice` writes new data URIs
in place, and only when the caller asks.

The fast path: before ``orjson.loads``, ``body_lift`` swaps each data URI and ``"data"``
string value for a short placeholder, so the parse never walks a multi-megabyte payload;
the refs point back into the original bytes. A string the scan does not lift (``DATA:`` in
capitals, past its cap of ``2 * max_parts`` candidates) is parsed as usual, and its ref
then carries a copy of the payload and no spans.

Decisions:

* Duplicate keys: the last one wins, as in orjson and in the Python ``json`` behind vLLM's
  pydantic models. They are not rejected.
* A lifted string read as an image or media payload is checked for quotes and backslashes
  only: a control character or invalid UTF-8 in it is left to the probe's strict base64 and
  to vLLM. A lifted string read as anything else is validated when it is put back.
* Nesting deeper than ``max_depth`` and more than ``max_parts`` messages, items and content
  parts are rejected after the parse (orjson itself stops at 1024 levels).
* An integer field also accepts an integral float, as pydantic's lax mode does, up to
  ``MAX_INT64``: a larger count would overflow the float arithmetic of the metrics.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

import orjson

from sidecar.cost.body_lift import lift_strings
from sidecar.cost.body_lift import splice as splice
from sidecar.errors import InvalidRequestError
from sidecar.images.refs import ImageRef, MediaItem, RefFinder
from sidecar.routes import Route

DEFAULT_MAX_PARTS = 10_000
DEFAULT_MAX_DEPTH = 64
MAX_INT64 = 2**63 - 1  # vLLM's engine carries counts as int64; more overflows our float metrics
COMPLETIONS_DEFAULT_MAX_TOKENS = 16  # vLLM's CompletionRequest default when the field is absent


@dataclass(frozen=True, slots=True)
class RequestBody:
    """What pricing needs from one request body."""

    route: Route
    model: str | None
    images: tuple[ImageRef, ...]
    media: tuple[MediaItem, ...]
    text_chars: int  # message, system, tool and prompt text, in characters
    prompt_token_ids: int  # tokens sent as ids (completions), not as text
    prompt_count: int  # prompts in a completions batch; 1 otherwise
    max_output_tokens: int | None  # None: vLLM fills the rest of the context
    n: int
    stream: bool
    include_usage: bool  # the stream ends with a usage chunk (always, for Responses/Anthropic)
    skeleton: Mapping[str, Any]  # the parsed body, inline payloads as "<image N>"; read-only


def parse_request_body(
    body: bytes,
    route: Route,
    *,
    max_parts: int = DEFAULT_MAX_PARTS,
    max_depth: int = DEFAULT_MAX_DEPTH,
) -> RequestBody:
    """Read ``body`` for ``route``; raises ``InvalidRequestError`` for a body vLLM would refuse."""
    small, lifts = lift_strings(body, max_parts)
    try:
        root = orjson.loads(small)
    except orjson.JSONDecodeError:
        root, lifts = _loads(body), {}  # reports the error at its place in the body as sent
    if not isinstance(root, dict):
        raise InvalidRequestError("The request body must be a JSON object")
    _check_depth(root, max_depth)
    finder = RefFinder(body, lifts, max_parts=max_parts)
    max_output_tokens, prompt_token_ids, prompt_count = _READERS[route](root, finder)
    if not all(lift.consumed for lift in lifts.values()):
        finder.restore(root)
    model, stream = root.get("model"), root.get("stream")
    if model is not None and not isinstance(model, str):
        raise InvalidRequestError("'model' must be a string", param="model")
    if stream is not None and not isinstance(stream, bool):
        raise InvalidRequestError("'stream' must be a boolean", param="stream")
    n, include_usage = 1, bool(stream)
    if route in (Route.CHAT, Route.COMPLETIONS):
        n = _positive_int(root, "n") or 1
        options = root.get("stream_options")
        usage = options.get("include_usage") if isinstance(options, dict) else None
        if not isinstance(options, dict | None) or not isinstance(usage, bool | None):
            raise InvalidRequestError(
                "'stream_options' must be an object with a boolean 'include_usage'",
                param="stream_options",
            )
        include_usage = bool(stream and usage)
    return RequestBody(
        route=route,
        model=model,
        images=tuple(finder.images),
        media=tuple(finder.media),
        text_chars=finder.text_chars,
        prompt_token_ids=prompt_token_ids,
        prompt_count=prompt_count,
        max_output_tokens=max_output_tokens,
        n=n,
        stream=bool(stream),
        include_usage=include_usage,
        skeleton=MappingProxyType(root),
    )


def _chat(root: dict[str, Any], finder: RefFinder) -> tuple[int | None, int, int]:
    finder.chat_messages(_list(root, "messages"))
    finder.json_text(root.get("tools"))
    limit = _positive_int(root, "max_completion_tokens")
    return (limit if limit is not None else _positive_int(root, "max_tokens")), 0, 1


def _completions(root: dict[str, Any], finder: RefFinder) -> tuple[int | None, int, int]:
    prompt, token_ids, count = root.get("prompt"), 0, 1
    if isinstance(prompt, str):
        finder.text(root, "prompt", "prompt")
    elif isinstance(prompt, list) and prompt and _is_int(prompt[0]):
        token_ids = len(prompt)  # one prompt, as token ids
    elif isinstance(prompt, list):  # a batch: strings or lists of token ids
        finder.count_parts(len(prompt), "prompt")
        count = max(len(prompt), 1)
        for i, each in enumerate(prompt):
            if isinstance(each, list):
                token_ids += len(each)
            elif isinstance(each, str):
                finder.text(prompt, i, "prompt")
            else:
                raise InvalidRequestError(
                    "Each prompt must be a string or token ids", param="prompt"
                )
    elif prompt is not None:
        raise InvalidRequestError("'prompt' must be a string or a list", param="prompt")
    if "max_tokens" not in root:
        return COMPLETIONS_DEFAULT_MAX_TOKENS, token_ids, count
    return _positive_int(root, "max_tokens"), token_ids, count


def _responses(root: dict[str, Any], finder: RefFinder) -> tuple[int | None, int, int]:
    if isinstance(root.get("input"), list):
        finder.responses_input(root["input"])
    elif isinstance(root.get("input"), str):
        finder.text(root, "input", "input")
    else:
        raise InvalidRequestError("'input' must be a string or a list of items", param="input")
    finder.text(root, "instructions", "instructions")
    finder.json_text(root.get("tools"))
    return _positive_int(root, "max_output_tokens"), 0, 1


def _messages(root: dict[str, Any], finder: RefFinder) -> tuple[int | None, int, int]:
    messages = _list(root, "messages")
    finder.anthropic_blocks(root, "system", "system")
    finder.count_parts(len(messages), "messages")
    for message in messages:
        if not isinstance(message, dict):
            raise InvalidRequestError("Each message must be an object", param="messages")
        finder.anthropic_blocks(message, "content", "messages")
    finder.json_text(root.get("tools"))
    return _positive_int(root, "max_tokens"), 0, 1


_READERS: dict[Route, Callable[[dict[str, Any], RefFinder], tuple[int | None, int, int]]] = {
    Route.CHAT: _chat,
    Route.COMPLETIONS: _completions,
    Route.RESPONSES: _responses,
    Route.MESSAGES: _messages,
}


def _list(root: dict[str, Any], key: str) -> list[Any]:
    value = root.get(key)
    if not isinstance(value, list):
        raise InvalidRequestError(f"'{key}' must be a list", param=key)
    return value


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _positive_int(root: dict[str, Any], key: str) -> int | None:
    value = root.get(key)
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if value is not None and not _is_int(value):
        raise InvalidRequestError(f"'{key}' must be an integer", param=key)
    if value is not None and value < 1:
        raise InvalidRequestError(f"{key} must be at least 1, got {value}.", param=key)
    if value is not None and value > MAX_INT64:
        raise InvalidRequestError(f"{key} must be at most {MAX_INT64}.", param=key)
    return value


def _loads(body: bytes) -> Any:
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        if "not valid UTF-8" in str(exc):
            raise InvalidRequestError("The request body is not valid UTF-8") from None
        raise InvalidRequestError(f"The request body is not valid JSON: {exc}") from None


def _check_depth(root: dict[str, Any], max_depth: int) -> None:
    level: list[Any] = [root]
    for _ in range(max_depth):
        level = [
            child
            for node in level
            for child in (node.values() if type(node) is dict else node)
            if type(child) is dict or type(child) is list
        ]
        if not level:
            return
    raise InvalidRequestError(f"The request body is nested deeper than {max_depth} levels")
