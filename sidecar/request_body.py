"""The request fields the sidecar prices, read fast, with the forwarded bytes left alone.

For each inspected route this reads the model, the images and other media, the prompt's
text, the output-token limit, ``n`` and the streaming flags into a frozen
:class:`RequestBody`. Nothing here changes the body; :func:`splice` writes new data URIs
in place, and only when the caller asks.

The fast path: a 5 MB body is nearly all one base64 payload, and parsing that costs far
more than everything else. So before ``orjson.loads``, the raw bytes are scanned for strings
that open with ``"data:`` (data URIs) and for string values under a ``"data"`` key
(Anthropic and ``input_audio`` base64). Each one's closing quote is found with a one-byte
``bytes.find`` (memchr speed), the string is *lifted*: a small copy of the body holding the
placeholder ``"\\u0000<n>"`` in its place is parsed instead, and the refs point back into
the original bytes. A lifted string whose bytes hold a backslash (JSON allows ``\\/`` in
base64) is decoded on its own with orjson: the slow path. The scan never searches inside a
payload for more than one byte, and it stops after ``2 * max_parts`` candidates; a string it
does not lift (``DATA:`` in capitals, past the cap) is parsed as usual, and its ref then
carries a copy of the payload and no spans.

Decisions:

* Duplicate keys: the last one wins, as in orjson and in the Python ``json`` behind vLLM's
  pydantic models. They are not rejected.
* A lifted string read as an image or media payload is checked for quotes and backslashes
  only: a control character or invalid UTF-8 in it is left to the probe's strict base64 and
  to vLLM. A lifted string read as anything else is validated when it is put back.
* Placeholders start with NUL; when the body sends NUL characters of its own, a random tag
  follows the NUL so that no client string can pass for a placeholder.
* Nesting deeper than ``max_depth`` and more than ``max_parts`` messages, items and content
  parts are rejected after the parse (orjson itself stops at 1024 levels).
* An integer field also accepts an integral float, as pydantic's lax mode does, up to
  ``MAX_INT64``: a larger count would overflow the float arithmetic of the metrics.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from types import MappingProxyType
from typing import Any

import orjson

from sidecar.errors import InvalidRequestError
from sidecar.images.refs import ImageRef, Lift, MediaItem, RefFinder

DEFAULT_MAX_PARTS = 10_000
DEFAULT_MAX_DEPTH = 64
MAX_INT64 = 2**63 - 1  # vLLM's engine carries counts as int64; more overflows our float metrics
COMPLETIONS_DEFAULT_MAX_TOKENS = 16  # vLLM's CompletionRequest default when the field is absent
_MARKER = b"\\u0000"
_JSON_SPACE = (0x20, 0x09, 0x0A, 0x0D)


class Route(StrEnum):
    """The inspected POST routes."""

    CHAT = "/v1/chat/completions"
    COMPLETIONS = "/v1/completions"
    RESPONSES = "/v1/responses"
    MESSAGES = "/v1/messages"


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
    small, lifts = _lift(body, max_parts)
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


def splice(body: bytes, replacements: Sequence[tuple[tuple[int, int], bytes]]) -> bytes:
    """``body`` with each ``[start, end)`` span replaced; every other byte is kept.

    Spans must not overlap. The new bytes go between JSON quotes as they are, so they must
    hold neither ``"`` nor a backslash (a data URI or base64 never does).
    """
    view, pos = memoryview(body), 0
    out: list[bytes | memoryview] = []
    for (start, end), new in sorted(replacements, key=lambda item: item[0]):
        if not pos <= start <= end <= len(body):
            raise ValueError(f"span [{start}, {end}) overlaps another or leaves the body")
        if b'"' in new or b"\\" in new:
            raise ValueError("a replacement must not contain a quote or a backslash")
        out += (view[pos:start], new)
        pos = end
    out.append(view[pos:])
    return b"".join(out)


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


def _lift(body: bytes, limit: int) -> tuple[bytes, dict[str, Lift]]:
    """The body with data-URI strings and ``"data"`` string values swapped for placeholders."""
    lifts: list[Lift] = []
    find, pos = body.find, 0
    for _ in range(2 * limit):
        quote = find(b'"data', pos)
        if quote < 0 or len(lifts) >= limit:
            break
        pos = quote + 5
        after = body[pos : pos + 1]
        if after not in (b":", b'"') or _escaped(body, quote):
            continue
        start = quote + 1
        if after == b'"':  # the key "data": lift its value if that is a string
            colon = _skip_space(body, pos + 1)
            start = _skip_space(body, colon + 1) + 1
            if body[colon : colon + 1] != b":" or body[start - 1 : start] != b'"':
                continue
        end = _string_end(body, start)
        if end < 0:
            break
        pos = end + 1
        follower = _skip_space(body, pos)
        if after == b":" and body[follower : follower + 1] == b":":
            continue  # a key that starts "data:", not a value
        lift = Lift(start, end)
        if find(b"\\", start, end) >= 0:
            lift.unescaped = _unescape(body, start, end)
            if lift.unescaped is None:
                continue  # left in place for the full parse to report
        lifts.append(lift)
    if not lifts:
        return body, {}
    tag = b""
    small = _with_placeholders(body, lifts, tag)
    if small.count(_MARKER) != len(lifts):  # the body carries NUL characters of its own
        tag = secrets.token_hex(8).encode()
        small = _with_placeholders(body, lifts, tag)
    prefix = "\x00" + tag.decode()
    return small, {f"{prefix}{k}": lift for k, lift in enumerate(lifts)}


def _with_placeholders(body: bytes, lifts: list[Lift], tag: bytes) -> bytes:
    view, pos = memoryview(body), 0
    out: list[bytes | memoryview] = []
    for k, lift in enumerate(lifts):
        out += (view[pos : lift.start], b"%s%s%d" % (_MARKER, tag, k))
        pos = lift.end
    out.append(view[pos:])
    return b"".join(out)


def _escaped(body: bytes, i: int) -> bool:
    """Whether the byte at ``i`` follows an odd run of backslashes."""
    k = i - 1
    while k >= 0 and body[k] == 0x5C:
        k -= 1
    return (i - 1 - k) % 2 == 1


def _skip_space(body: bytes, i: int) -> int:
    while i < len(body) and body[i] in _JSON_SPACE:
        i += 1
    return i


def _string_end(body: bytes, start: int) -> int:
    """The closing quote of the JSON string whose content starts at ``start``, or -1."""
    end = body.find(b'"', start)
    while end >= 0 and _escaped(body, end):
        end = body.find(b'"', end + 1)
    return end


def _unescape(body: bytes, start: int, end: int) -> bytes | None:
    """The UTF-8 of the JSON string ``body[start:end]`` that holds escapes, or None if invalid."""
    try:
        return str(orjson.loads(body[start - 1 : end + 1])).encode()
    except orjson.JSONDecodeError:
        return None
