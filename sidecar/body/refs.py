"""Finding images, other media and prompt text in a parsed request body.

``request_body`` parses a body with some strings *lifted* out: where a data URI or a
``"data"`` value stood, the parsed tree holds a placeholder, and a :class:`Lift` records
where the string's bytes lie in the body as sent. :class:`RefFinder` walks each route's
content shapes the way vLLM 0.33 reads them (chat parts, Responses items, Anthropic
blocks) and turns every image into an :class:`ImageRef` that points into those bytes.

Invariants:

* ``index`` numbers images, and separately media items, in order of appearance.
* Only the positions vLLM reads as media become refs; a data URI in text is text.
* In the tree, each inline payload read as media becomes ``"<image N>"`` (or ``"<video N>"``,
  ``"<audio N>"``, ``"<embeds N>"``); every other lifted string is put back.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Literal, cast

import orjson

from sidecar.body import body_json
from sidecar.body.input_image import check_input_image
from sidecar.errors import InvalidRequestError

SUPPORTED_PART_TYPES = ("audio_embeds", "audio_url", "image_embeds", "image_pil", "image_url",
    "input_audio", "input_image", "input_text", "output_text", "prompt_embeds", "refusal", "text",
    "thinking", "tool_reference", "video_embeds", "video_url")  # fmt: skip
ANTHROPIC_BLOCK_TYPES = ("container_upload", "document", "image", "redacted_thinking", "text",
    "thinking", "tool_addition", "tool_reference", "tool_removal", "tool_result",
    "tool_use")  # fmt: skip
# vLLM's order of keys for a part without "type" (or with a "uuid").
_TYPELESS_KEYS = ("image_url", "image_pil", "image_embeds", "audio_embeds", "video_embeds",
    "prompt_embeds", "audio_url", "input_audio", "video_url", "tool_reference")  # fmt: skip
_TEXT_FIELDS = {"text": "text", "input_text": "text", "output_text": "text", "refusal": "refusal",
    "thinking": "thinking", "tool_reference": "name"}  # fmt: skip
_MODALITY = {"image_url": "image", "input_image": "image", "image_pil": "image",
    "video_url": "video", "audio_url": "audio"}  # fmt: skip
MediaKind = Literal["video", "audio", "embeds"]
_DIGITS = b"0123456789"
# ASCII capitals and punctuation: Qwen merges them poorly (ALLCAPS names, operators, quotes).
_MARKS = b"ABCDEFGHIJKLMNOPQRSTUVWXYZ!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~"

# Roles whose message vLLM's request model lets carry ``"content": null`` (OpenAI's assistant
# and function message types, as vllm/entrypoints/chat_utils.py takes them).
NULL_CONTENT_ROLES = frozenset({"assistant", "function"})


class MediaSource(StrEnum):
    """Where a media item (an image, video, audio clip or embeddings) comes from."""

    DATA = "data"  # inline base64: a data URI, or an Anthropic / input_audio base64 value
    URL = "url"  # fetched by vLLM; any scheme, kept as sent for the caller to judge
    CACHED = "cached"  # a uuid with a null url: vLLM reuses an item of unknown size


@dataclass(frozen=True, slots=True)
class ImageRef:
    """One image of the request; spans are byte offsets ``[start, end)`` in the body as sent."""

    index: int
    source: MediaSource
    url: str | None = None
    uri_span: tuple[int, int] | None = None  # the JSON string value, without its quotes
    payload_span: tuple[int, int] | None = None  # the base64 payload (after the comma)
    media_type: str | None = None
    uuid: str | None = None
    bare_base64: bool = False  # the value is base64 alone (Anthropic), not a data URI
    payload_copy: bytes | None = None  # when the body bytes carry escapes or were not lifted

    def payload(self, body: bytes) -> bytes | memoryview:
        """The base64 payload as ASCII bytes, sliced from ``body`` without a copy when it can."""
        if self.payload_copy is not None:
            return self.payload_copy
        if self.payload_span is None:
            raise ValueError(f"image {self.index} has no inline payload")
        return memoryview(body)[self.payload_span[0] : self.payload_span[1]]

    def replacement(self, media_type: str, payload_base64: bytes) -> tuple[tuple[int, int], bytes]:
        """The ``splice`` entry that puts a new image here (Anthropic keeps its media_type:
        vLLM sniffs the format and ignores it)."""
        if self.uri_span is None:
            raise ValueError(f"image {self.index} cannot be rewritten in place")
        if self.bare_base64:
            return self.uri_span, payload_base64
        return self.uri_span, b"data:%s;base64,%s" % (media_type.encode("ascii"), payload_base64)


@dataclass(frozen=True, slots=True)
class MediaItem:
    """One video, audio or embeddings item, priced with an allowance per item."""

    kind: MediaKind
    index: int
    source: MediaSource
    url: str | None = None
    uri_span: tuple[int, int] | None = None
    payload_span: tuple[int, int] | None = None
    media_type: str | None = None
    uuid: str | None = None


@dataclass(frozen=True, slots=True)
class SequenceRef:
    """One prompt vLLM runs on its own (a conversation, a batch prompt, a scored pair):
    its text and message counts, token ids sent as ids, and which images and media it holds."""

    text_chars: int = 0
    text_bytes: int = 0  # UTF-8 bytes: non-Latin scripts take more tokens per character
    messages: int = 0
    token_ids: int = 0
    images: tuple[int, ...] = ()
    media: tuple[int, ...] = ()
    text_digits: int = 0  # ASCII digits: Qwen's pre-tokenizer makes each one a token
    text_marks: int = 0  # ASCII capitals and punctuation: they merge poorly into tokens

    @classmethod
    def of_text(cls, value: str, *, messages: int = 0) -> SequenceRef:
        """The counts of one piece of text, as the body reader keeps them."""
        encoded = value.encode("utf-8", "replace")
        # bytes.translate deletes in one C pass: each count costs a scan, not a Python loop.
        return cls(
            text_chars=len(value),
            text_bytes=len(encoded),
            messages=messages,
            text_digits=len(encoded) - len(encoded.translate(None, _DIGITS)),
            text_marks=len(encoded) - len(encoded.translate(None, _MARKS)),
        )

    def __add__(self, other: SequenceRef) -> SequenceRef:
        """One prompt made of both (a query and one document it is scored with)."""
        return SequenceRef(
            self.text_chars + other.text_chars,
            self.text_bytes + other.text_bytes,
            self.messages + other.messages,
            self.token_ids + other.token_ids,
            self.images + other.images,
            self.media + other.media,
            self.text_digits + other.text_digits,
            self.text_marks + other.text_marks,
        )


@dataclass(frozen=True, slots=True)
class _Mark:
    text_chars: int
    text_bytes: int
    messages: int
    images: int
    media: int
    text_digits: int
    text_marks: int


@dataclass(slots=True)
class Lift:
    """A JSON string taken out of the body before parsing: its content is ``body[start:end]``."""

    start: int
    end: int
    unescaped: bytes | None = None  # the string's UTF-8, kept only when the bytes hold escapes
    consumed: bool = False

    def text(self, body: bytes) -> str:
        """The string itself, validated as JSON string content."""
        try:
            return str(orjson.loads(body[self.start - 1 : self.end + 1]))
        except orjson.JSONDecodeError as exc:
            raise InvalidRequestError(f"The request body is not valid JSON: {exc.msg}") from None


def tool_result_image_is_loaded(source: dict[str, Any]) -> bool:
    """Whether vLLM loads an image of a user's Anthropic ``tool_result``: it drops only a URL
    source without a URL; any other source becomes a data URI, loaded (or refused) as sent."""
    return source.get("type") != "url" or bool(source.get("url"))


class RefFinder:
    """Walks one parsed body, collecting images, media and the prompt's text characters."""

    def __init__(self, body: bytes, lifts: dict[str, Lift], *, max_parts: int) -> None:
        self._body = body
        self._lifts = lifts
        self._max_parts = max_parts
        self._parts = 0
        self.images: list[ImageRef] = []
        self.media: list[MediaItem] = []
        self.text_chars = 0
        self.text_bytes = 0
        self.text_digits = 0
        self.text_marks = 0
        self.messages = 0

    def mark(self) -> _Mark:
        """Where the next sequence starts."""
        return _Mark(
            self.text_chars,
            self.text_bytes,
            self.messages,
            len(self.images),
            len(self.media),
            self.text_digits,
            self.text_marks,
        )

    def since(self, mark: _Mark, *, token_ids: int = 0) -> SequenceRef:
        """Everything found since ``mark``, as one sequence."""
        return SequenceRef(
            text_chars=self.text_chars - mark.text_chars,
            text_bytes=self.text_bytes - mark.text_bytes,
            messages=self.messages - mark.messages,
            token_ids=token_ids,
            images=tuple(range(mark.images, len(self.images))),
            media=tuple(range(mark.media, len(self.media))),
            text_digits=self.text_digits - mark.text_digits,
            text_marks=self.text_marks - mark.text_marks,
        )

    def chat_messages(self, messages: list[Any], param: str = "messages") -> None:
        self.count_parts(len(messages), param)
        self.messages += len(messages)
        for message in messages:
            if not isinstance(message, dict):
                raise InvalidRequestError("Each message must be an object", param=param)
            role = message.get("role")
            nullable = isinstance(role, str) and role in NULL_CONTENT_ROLES  # any JSON may come
            if message.get("content", "") is None and not nullable:
                # vLLM renders an assistant's or a function's null content as empty; for every
                # other role its request model has no null content, and it answers 400.
                raise InvalidRequestError(
                    f"a {message.get('role')!s} message's 'content' must be a string or a list "
                    "of parts, not null (only assistant and function messages may have null "
                    "content)",
                    param=param,
                )
            self.content(message, param)
            reasoning = "reasoning" if message.get("reasoning") else "reasoning_content"
            self.text(message, reasoning, param)
            self.json_text(message.get("tool_calls"))

    def content(
        self, holder: dict[str, Any], param: str, key: str = "content", *, detail_set: bool = False
    ) -> None:
        """A chat-style content value: a string, a list of parts, or null. ``detail_set``: the
        route fills in a missing ``input_image`` detail (Responses) before vLLM checks it."""
        content = holder.get(key)
        if isinstance(content, list):
            self.count_parts(len(content), param)
            for i in range(len(content)):
                self._chat_part(content, i, param, detail_set=detail_set)
        elif content is not None:
            self.text(holder, key, param)

    def responses_input(self, items: list[Any]) -> None:
        self.count_parts(len(items), "input")
        for item in items:
            if not isinstance(item, dict):
                raise InvalidRequestError("Each input item must be an object", param="input")
            kind = item.get("type")
            if "role" in item or kind == "message":
                self.messages += 1
                self.content(item, "input", detail_set=True)
            elif kind == "function_call":
                # A call renders as a tool-call block of the assistant turn, framing and all:
                # the whole item's JSON is a fair size for it, and it may open a turn.
                self.json_text(item)
                self.messages += 1
            elif kind == "function_call_output":
                self.messages += 2  # a tool turn, and the template's wrapper around the result
                self.content(item, "input", key="output")

    def anthropic_blocks(
        self, holder: dict[str, Any], key: str, param: str, *, role: Any = "user"
    ) -> None:
        """An Anthropic content value (or ``system``, ``role="system"``): a string or a list of
        blocks, read as vLLM's conversion (``entrypoints/anthropic/serving.py``) reads them."""
        blocks = holder.get(key)
        if not isinstance(blocks, list):
            self.text(holder, key, param)
            return
        self.count_parts(len(blocks), param)
        for block in blocks:
            if not isinstance(block, dict):
                raise InvalidRequestError("Each content block must be an object", param=param)
            kind = block.get("type", "text")
            if kind in ("text", "thinking"):
                self.text(block, kind, kind)
            elif kind == "image":
                source = block.get("source")
                if source is not None and not isinstance(source, dict):
                    raise InvalidRequestError("An image block's 'source' must be an object",
                        param="source")  # fmt: skip
                # vLLM keeps only the text of a system turn, and skips an image with no source.
                if source and role != "system":
                    self._anthropic_image(source)
            elif kind == "tool_use":
                self.json_text(block)  # a tool-call block with its framing, as above
            elif kind == "tool_result":
                self._anthropic_tool_result(block, role)
            elif kind == "tool_addition":
                # A deferred tool's definition joins the prompt's tool list (a removal only
                # shortens it, and a bare tool_reference renders as nothing).
                self.json_text(block.get("tool"))
            elif kind not in ANTHROPIC_BLOCK_TYPES:
                raise InvalidRequestError(
                    f"Unsupported content block type: {kind!r}. "
                    f"Supported types: {', '.join(ANTHROPIC_BLOCK_TYPES)}",
                    param="type",
                )

    def _anthropic_tool_result(self, block: dict[str, Any], role: Any) -> None:
        """A user turn's result becomes a tool turn (and a user turn for its images); its list
        holds plain objects, of which vLLM reads text, images and nothing else. An assistant
        turn's result is printed into the turn as text, images and all."""
        content = block.get("content")
        if role != "user":
            if isinstance(content, str):
                self.text(block, "content", "content")
            else:
                self.json_text(content)
            return
        self.messages += 2
        if not isinstance(content, list):
            self.text(block, "content", "content")
            return
        for item in content:
            if not isinstance(item, dict):
                continue
            kind = item.get("type")
            if kind == "text":
                self.text(item, "text", "text")
            elif kind == "image":
                source = item.get("source", {})
                if not isinstance(source, dict):
                    raise InvalidRequestError("An image block's 'source' must be an object",
                        param="source")  # fmt: skip
                if tool_result_image_is_loaded(source):
                    self._anthropic_image(source)

    def text(self, holder: Any, key: Any, param: str) -> None:
        """Count the text at ``holder[key]`` (a string or null), putting back a lifted one."""
        value = holder.get(key) if isinstance(holder, dict) else holder[key]
        if value is None:
            return
        if not isinstance(value, str):
            raise InvalidRequestError(f"'{key}' must be a string", param=param)
        lift = self._lift_of(value)
        if lift is not None:
            lift.consumed = True
            holder[key] = value = lift.text(self._body)
        self._count_text(value)

    def _count_text(self, value: str) -> None:
        counts = SequenceRef.of_text(value)
        self.text_chars += counts.text_chars
        self.text_bytes += counts.text_bytes
        self.text_digits += counts.text_digits
        self.text_marks += counts.text_marks

    def json_text(self, value: Any) -> None:
        """Count structured text (tool definitions, tool calls) by its JSON length."""
        if isinstance(value, dict | list):
            self.restore(value)
            self._count_text(body_json.dumps(value).decode())

    def media_value(
        self, holder: dict[str, Any] | list[Any], key: Any, modality: str, param: str
    ) -> None:
        """A bare URL or data URI at ``holder[key]`` (a Cohere ``images`` list, a flat
        ``content_parts`` entry, a SageMaker-style media URL list)."""
        value = holder.get(key) if isinstance(holder, dict) else holder[key]
        if not isinstance(value, str):
            raise InvalidRequestError(f"'{param}' must hold URL strings", param=param)
        if isinstance(holder, list):
            box = {"url": value}
            self._add(modality, box, "url", None, param=param)
            holder[key] = box["url"]
        else:
            self._add(modality, holder, key, None, param=param)

    def restore(self, node: dict[str, Any] | list[Any]) -> None:
        """Put back every lifted string under ``node`` (depth is already bounded)."""
        for key, child in node.items() if isinstance(node, dict) else enumerate(node):
            if isinstance(child, str):
                lift = self._lift_of(child)
                if lift is not None:
                    lift.consumed = True
                    node[key] = lift.text(self._body)  # type: ignore[index]  # key fits node
            elif isinstance(child, dict | list):
                self.restore(child)

    def count_parts(self, parts: int, param: str) -> None:
        self._parts += parts
        if self._parts > self._max_parts:
            raise InvalidRequestError(
                f"Too many messages and content parts (more than {self._max_parts})", param=param
            )

    def as_sent(self, value: Any) -> Any:
        """``value`` as the client wrote it: a lifted string is read back, the tree untouched."""
        lift = self._lift_of(value) if isinstance(value, str) else None
        return value if lift is None else lift.text(self._body)

    def _lift_of(self, value: str) -> Lift | None:
        return self._lifts.get(value) if value[:1] == "\x00" else None

    def _chat_part(self, parts: list[Any], i: int, param: str, *, detail_set: bool) -> None:
        part = parts[i]
        if isinstance(part, str):
            self.text(parts, i, param)
            return
        if not isinstance(part, dict):
            raise InvalidRequestError(
                "Each content part must be an object or a string", param=param
            )
        kind, uuid = part.get("type"), part.get("uuid")
        typeless = kind is None or uuid is not None
        if isinstance(kind, str) and kind in SUPPORTED_PART_TYPES and not typeless:
            pass
        elif typeless:
            kind = next((k for k in _TYPELESS_KEYS if _has(part, k)), None)
            if kind is None:
                raise InvalidRequestError("Missing 'type' field in multimodal part.", param="type")
        elif not isinstance(kind, str):
            raise InvalidRequestError("Invalid 'type' field in multimodal part.", param="type")
        else:
            raise InvalidRequestError(
                f"Unsupported chat content part type: {kind!r}. "
                f"Supported types: {', '.join(SUPPORTED_PART_TYPES)}",
                param="type",
            )
        if kind == "input_image" and not typeless and not detail_set:
            check_input_image(part, self.as_sent)
        uuid = None if uuid is None else str(self.as_sent(uuid))
        value = part.get("image_url" if kind == "input_image" else kind)
        if kind in _TEXT_FIELDS:
            self.text(part, _TEXT_FIELDS[kind], _TEXT_FIELDS[kind])
        elif kind.endswith("_embeds"):
            key = "data" if kind == "prompt_embeds" else kind
            if isinstance(part.get(key), str) or part.get(key) is None:
                self._add("embeds", part, key, uuid, param=kind, bare=True)
            else:
                self._record("embeds", MediaSource.DATA, uuid=uuid)
        elif kind == "input_audio":
            if not isinstance(value, dict):
                raise InvalidRequestError("'input_audio' must be an object", param=kind)
            self._add("audio", value, "data", uuid, param=kind, bare=True)
        elif isinstance(value, dict) and kind.endswith("_url"):
            self._add(_MODALITY[kind], value, "url", uuid, param=kind)
        elif kind == "image_pil" and value is not None:
            raise InvalidRequestError("'image_pil' cannot be sent as JSON", param=kind)
        elif typeless or not kind.endswith("_url"):  # a string shortcut, input_image, image_pil
            key = "image_url" if kind == "input_image" else kind
            self._add(_MODALITY[kind], part, key, uuid, param=key)
        else:
            raise InvalidRequestError(f"'{kind}' must be an object with a 'url'", param=kind)

    def _anthropic_image(self, source: dict[str, Any]) -> None:
        if source.get("type") == "url":
            self._add("image", source, "url", None, param="source")
            return
        media_type = source.get("media_type")
        media_type = media_type.lower() if isinstance(media_type, str) else "image/jpeg"
        self._add("image", source, "data", None, param="source", bare=True, media_type=media_type)

    def _add(
        self,
        modality: str,
        holder: dict[str, Any],
        key: str,
        uuid: str | None,
        *,
        param: str,
        bare: bool = False,
        media_type: str | None = None,
    ) -> None:
        """Record the item whose URL, data URI or bare base64 is ``holder[key]``."""
        value = holder.get(key)
        if value is None and uuid is not None:
            self._record(modality, MediaSource.CACHED, uuid=uuid)
            return
        if not isinstance(value, str):
            raise InvalidRequestError(
                f"'{key}' must be a string (or null with a 'uuid')", param=param
            )
        lift = self._lift_of(value)
        if not bare and lift is None and value[:5].lower() != "data:":
            self._record(modality, MediaSource.URL, uuid=uuid, url=value)
            return
        span = None if lift is None else (lift.start, lift.end)
        # None: the payload is sliced from the body when asked, never copied
        payload = lift.unescaped if lift else value.encode() if modality == "image" else None
        fields: dict[str, Any] = {
            "uuid": uuid,
            "uri_span": span,
            "payload_span": span,
            "media_type": media_type,
        }
        if not bare:
            spec, has_comma, payload, fields["payload_span"] = self._data_uri(payload, lift)
            params = spec[5:].split(";")
            if modality == "image" and not has_comma:
                raise InvalidRequestError("Invalid data URL: missing ',' separator.", param=param)
            if modality == "image" and params[-1] != "base64":
                raise InvalidRequestError(
                    "Only base64 data URLs are supported for now.", param=param
                )
            fields["media_type"] = params[0].strip().lower() or None
        if lift is not None:
            lift.consumed = True
        holder[key] = f"<{modality} {len(self.images if modality == 'image' else self.media)}>"
        if modality == "image":
            fields["bare_base64"] = bare
            fields["payload_copy"] = payload
        self._record(modality, MediaSource.DATA, **fields)

    def _data_uri(
        self, text: bytes | None, lift: Lift | None
    ) -> tuple[str, bool, bytes | None, tuple[int, int] | None]:
        """The ``data:...`` spec, whether a comma ends it, the payload unless it is sliced from
        the body, and the payload span (raw bytes: they keep any JSON escapes)."""
        comma = -1 if lift is None else self._body.find(b",", lift.start, lift.end)
        span = None if lift is None or comma < 0 else (comma + 1, lift.end)
        if text is not None or lift is None:
            spec, sep, payload = (text or b"").partition(b",")
            return spec.decode("utf-8", "replace"), bool(sep), payload, span
        spec = self._body[lift.start : comma] if comma >= 0 else b""
        return spec.decode("utf-8", "replace"), comma >= 0, None, span

    def _record(self, modality: str, source: MediaSource, **fields: Any) -> None:
        if modality == "image":
            self.images.append(ImageRef(len(self.images), source, **fields))
        else:
            kind = cast(MediaKind, modality)
            self.media.append(MediaItem(kind, len(self.media), source, **fields))


def _has(part: dict[str, Any], key: str) -> bool:
    return part.get(key) is not None if key == "input_audio" else key in part
