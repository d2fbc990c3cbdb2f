"""The request fields the sidecar prices, read fast, with the forwarded bytes left alone.

For each inspected route this reads the model, the images and other media, the prompts
(``shapes`` has one reader per body shape), the output-token limit, ``n``, the streaming
flags and the fields that change how vLLM processes media or renders the template, into a
frozen :class:`RequestBody`. Nothing here changes the body; :func:`splice` writes new data
URIs in place, and only when the caller asks.

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
* Fields that vLLM refuses unless a server flag is set (``mm_processor_kwargs``,
  ``media_io_kwargs``, ``chat_template``) are refused with vLLM's message unless the same
  flag is mirrored in ``BodyPolicy``; when trusted, the pixel range and template they carry
  are read so that the price follows them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

import orjson

from sidecar.body import body_json
from sidecar.body.body_lift import lift_strings
from sidecar.body.body_lift import splice as splice
from sidecar.body.lax_values import lax_bool
from sidecar.body.multipart import read_audio_form
from sidecar.body.readers import READERS
from sidecar.body.refs import ImageRef, MediaItem, RefFinder, SequenceRef
from sidecar.body.shapes import COMPLETIONS_DEFAULT_MAX_TOKENS as COMPLETIONS_DEFAULT_MAX_TOKENS
from sidecar.body.shapes import MAX_INT64 as MAX_INT64
from sidecar.body.shapes import Reading
from sidecar.errors import InvalidRequestError
from sidecar.routes import BodyShape, Route, Work

DEFAULT_MAX_PARTS = 10_000
DEFAULT_MAX_DEPTH = 64
_STREAMING_SHAPES = frozenset((BodyShape.CHAT, BodyShape.COMPLETIONS))
# Shapes whose request model has a chat_template field of its own (the others read it only
# from chat_template_kwargs), and whose add_generation_prompt defaults to true.
_TEMPLATE_FIELD_SHAPES = frozenset((BodyShape.CHAT, BodyShape.CHAT_BATCH, BodyShape.TOKENIZE,
    BodyShape.EMBEDDINGS, BodyShape.POOLING, BodyShape.INVOCATIONS))  # fmt: skip
_GENERATION_PROMPT_SHAPES = frozenset((BodyShape.CHAT, BodyShape.CHAT_BATCH, BodyShape.TOKENIZE,
    BodyShape.INVOCATIONS))  # fmt: skip
# Anthropic's request model ignores fields it does not declare, mm_processor_kwargs included.
_IGNORES_MM_KWARGS = frozenset((BodyShape.MESSAGES, BodyShape.COHERE_CHAT))


@dataclass(frozen=True, slots=True)
class BodyPolicy:
    """The server flags that decide which request fields vLLM accepts, and the part cap."""

    trust_request_mm_kwargs: bool = False
    trust_request_chat_template: bool = False
    max_parts: int = DEFAULT_MAX_PARTS
    max_depth: int = DEFAULT_MAX_DEPTH


@dataclass(frozen=True, slots=True)
class PixelRange:
    """A request's own ``mm_processor_kwargs`` pixel bounds (trusted requests only)."""

    min_pixels: int | None
    max_pixels: int | None


@dataclass(frozen=True, slots=True)
class RequestBody:
    """What pricing needs from one request body."""

    route: Route
    work: Work
    model: str | None
    images: tuple[ImageRef, ...]
    media: tuple[MediaItem, ...]
    sequences: tuple[SequenceRef, ...]  # each prompt vLLM runs on its own
    max_output_tokens: int | None  # None: vLLM fills the rest of the context
    n: int
    stream: bool
    include_usage: bool  # the stream ends with a usage chunk (always, for Responses/Anthropic)
    skeleton: Mapping[str, Any]  # the parsed body, inline payloads as "<image N>"; read-only
    pixel_range: PixelRange | None = None  # the request's trusted mm_processor_kwargs
    chat_template: str | None = None  # the request's trusted template
    truncate_prompt_tokens: int | None = None  # vLLM keeps each prompt this long (-1: context)

    @property
    def text_chars(self) -> int:
        """Characters of prompt text over all sequences."""
        return sum(sequence.text_chars for sequence in self.sequences)

    @property
    def prompt_token_ids(self) -> int:
        """Tokens sent as ids rather than text, over all sequences."""
        return sum(sequence.token_ids for sequence in self.sequences)


def parse_request_body(
    body: bytes,
    route: Route,
    *,
    policy: BodyPolicy | None = None,
    content_type: str | None = None,
) -> RequestBody:
    """Read ``body`` for ``route``; raises ``InvalidRequestError`` for a body vLLM would refuse."""
    policy = policy or BodyPolicy()
    if route.shape is BodyShape.AUDIO:
        return _audio(body, route, content_type)
    small, lifts = lift_strings(body, policy.max_parts)
    try:
        root = body_json.loads(small)
    except orjson.JSONDecodeError:
        root, lifts = _loads(body), {}  # reports the error at its place in the body as sent
    if not isinstance(root, dict):
        raise InvalidRequestError("The request body must be a JSON object")
    _check_depth(root, policy.max_depth)
    finder = RefFinder(body, lifts, max_parts=policy.max_parts)
    reading: Reading = READERS[route.shape](root, finder)
    if not all(lift.consumed for lift in lifts.values()):
        finder.restore(root)
    model, stream = root.get("model"), lax_bool(root.get("stream"), None)
    if model is not None and not isinstance(model, str):
        raise InvalidRequestError("'model' must be a string", param="model")
    if stream is None and root.get("stream") is not None:
        raise InvalidRequestError("'stream' must be a boolean", param="stream")
    include_usage = bool(stream)
    if route.shape in _STREAMING_SHAPES:
        options = root.get("stream_options")
        sent = options.get("include_usage") if isinstance(options, dict) else None
        usage = lax_bool(sent, None)
        if not isinstance(options, dict | None) or (usage is None and sent is not None):
            raise InvalidRequestError(
                "'stream_options' must be an object with a boolean 'include_usage'",
                param="stream_options",
            )
        include_usage = bool(stream and usage)
    if route.shape in _GENERATION_PROMPT_SHAPES and "messages" in root:
        _check_generation_prompt(root)
    return RequestBody(
        route=route,
        work=reading.work or route.work,
        model=model,
        images=tuple(finder.images),
        media=tuple(finder.media),
        sequences=reading.sequences,
        max_output_tokens=reading.max_output_tokens,
        n=reading.n,
        stream=bool(stream),
        include_usage=include_usage,
        skeleton=MappingProxyType(root),
        pixel_range=None if route.shape in _IGNORES_MM_KWARGS else _pixel_range(root, policy),
        chat_template=_chat_template(root, policy, own_field=route.shape in _TEMPLATE_FIELD_SHAPES),
        truncate_prompt_tokens=reading.truncate_prompt_tokens,
    )


def _audio(body: bytes, route: Route, content_type: str | None) -> RequestBody:
    form = read_audio_form(body, content_type)
    sequence = SequenceRef(
        text_chars=len(form.prompt),
        text_bytes=len(form.prompt.encode("utf-8", "replace")),
        messages=1,
        media=(0,),
    )
    audio = MediaItem("audio", 0, form.source)
    return RequestBody(
        route=route,
        work=route.work,
        model=form.model,
        images=(),
        media=(audio,),
        sequences=(sequence,),
        max_output_tokens=form.max_completion_tokens,
        n=1,
        stream=form.stream,
        include_usage=form.stream,
        skeleton=MappingProxyType({}),
    )


_MM_KWARGS_REFUSED = (
    "Per-request {field} are disabled by default because they can change multimodal "
    "{what} resource usage. Start the server with --trust-request-mm-kwargs only when "
    "clients are trusted. (parameter={field})"
)


def _pixel_range(root: dict[str, Any], policy: BodyPolicy) -> PixelRange | None:
    """vLLM's ``validate_request_mm_kwargs``, then the pixel bounds a trusted request sets."""
    kwargs, media_io = root.get("mm_processor_kwargs"), root.get("media_io_kwargs")
    if not policy.trust_request_mm_kwargs:
        for field, value, what in (
            ("mm_processor_kwargs", kwargs, "preprocessing"),
            ("media_io_kwargs", media_io, "media loading"),
        ):
            if value:
                raise InvalidRequestError(
                    _MM_KWARGS_REFUSED.format(field=field, what=what), param=field
                )
        return None
    if not isinstance(kwargs, dict) or not kwargs:
        return None
    size = kwargs.get("size")
    size = size if isinstance(size, dict) else {}
    bounds = [kwargs.get("min_pixels", size.get("shortest_edge")),
              kwargs.get("max_pixels", size.get("longest_edge"))]  # fmt: skip
    for bound in bounds:
        # Zero or fewer pixels has no resize: the processor's arithmetic divides by it.
        if bound is not None and (
            not isinstance(bound, int) or isinstance(bound, bool) or bound < 1
        ):
            raise InvalidRequestError(
                "mm_processor_kwargs pixel bounds must be positive integers",
                param="mm_processor_kwargs",
            )
    if bounds == [None, None]:
        return None
    return PixelRange(bounds[0], bounds[1])


def _chat_template(root: dict[str, Any], policy: BodyPolicy, *, own_field: bool) -> str | None:
    """The request's own template, refused as vLLM refuses it without the flag."""
    kwargs = root.get("chat_template_kwargs")
    template = root.get("chat_template") if own_field else None
    if template is None and isinstance(kwargs, dict):
        template = kwargs.get("chat_template")
    if template is None:
        return None
    if not policy.trust_request_chat_template:
        raise InvalidRequestError(
            "Chat template is passed with request, but --trust-request-chat-template is not "
            "set. Refused request with untrusted chat template."
        )
    if not isinstance(template, str):
        raise InvalidRequestError("'chat_template' must be a string", param="chat_template")
    return template


_BOTH_PROMPTS = "Cannot set both `continue_final_message` and `add_generation_prompt` to True."
_INCOMPATIBLE_PROMPTS = (
    "continue_final_message and add_generation_prompt are not compatible. Use "
    "continue_final_message when you want the model to continue the final message, and "
    "add_generation_prompt when you want to add a header that will prompt it to start a new "
    "assistant message instead."
)


def _check_generation_prompt(root: dict[str, Any]) -> None:
    """vLLM's check, then transformers' (``add_generation_prompt`` defaults to true)."""
    if not lax_bool(root.get("continue_final_message"), False):
        return
    if lax_bool(root.get("add_generation_prompt"), False):
        raise InvalidRequestError(_BOTH_PROMPTS)
    if "add_generation_prompt" not in root:
        raise InvalidRequestError(_INCOMPATIBLE_PROMPTS)


def _loads(body: bytes) -> Any:
    try:
        return body_json.loads(body)
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
