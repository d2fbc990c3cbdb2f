"""Read vLLM's ``usage`` from a response as it is relayed, without slowing the relay.

Non-streaming answers carry ``usage`` in the JSON body; streams carry it in the final
``data:`` event when ``stream_options.include_usage`` is set (``choices: []``). The tap
sees each chunk once: it keeps a bounded copy of a JSON body, and for SSE only the
current partial line plus the last event that mentions ``"usage"``.

The prompt count is the whole prompt on every API. Anthropic's ``input_tokens`` leaves out
the cached prefix: vLLM's ``/v1/messages`` reports it apart as ``cache_read_input_tokens``
and ``cache_creation_input_tokens`` (with ``--enable-prompt-tokens-details``), so those are
added back. Responses' ``input_tokens`` already includes its ``cached_tokens``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import orjson

_COUNTS_PROMPT = re.compile(rb'"(prompt|input)_tokens"')
# Anthropic's usage splits the prompt: input_tokens + these = vLLM's prompt_tokens.
ANTHROPIC_CACHE_FIELDS = ("cache_read_input_tokens", "cache_creation_input_tokens")

MAX_JSON_BODY_BYTES = 4 << 20  # usage sits at the end of bodies far smaller than this


@dataclass(frozen=True, slots=True)
class Usage:
    """Token counts vLLM reported for one request."""

    prompt_tokens: int
    completion_tokens: int | None
    image_tokens: int | None  # prompt_tokens_details.multimodal_tokens.image, when enabled


class UsageTap:
    """Feed it every relayed chunk; read ``usage`` at the end."""

    def __init__(self, *, streaming: bool) -> None:
        self._streaming = streaming
        self._json_parts: list[bytes] = []
        self._json_bytes = 0
        self._partial_line = b""
        self._last_usage_event: bytes | None = None

    def feed(self, chunk: bytes) -> None:
        """Look at one chunk of the response body."""
        if not self._streaming:
            if self._json_bytes + len(chunk) <= MAX_JSON_BODY_BYTES:
                self._json_parts.append(chunk)
            self._json_bytes += len(chunk)
            return
        data = self._partial_line + chunk
        if b'"usage"' not in data:
            self._partial_line = data[data.rfind(b"\n") + 1 :]
            return
        lines = data.split(b"\n")
        self._partial_line = lines.pop()
        for line in lines:
            # Anthropic's closing message_delta carries only output tokens: keep the event that
            # counted the prompt (chat's final chunk, Responses' response.completed,
            # Anthropic's message_start).
            if line.startswith(b"data:") and b'"usage"' in line and _COUNTS_PROMPT.search(line):
                self._last_usage_event = line[5:].strip()

    @property
    def usage(self) -> Usage | None:
        """The reported usage, or None when the answer carried none."""
        if self._streaming:
            return _parse_usage(self._last_usage_event)
        if self._json_bytes > MAX_JSON_BODY_BYTES:
            return None
        return _parse_usage(b"".join(self._json_parts))


def _parse_usage(raw: bytes | None) -> Usage | None:
    if not raw:
        return None
    try:
        document = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(document, dict):
        return None
    # Responses nests usage under "response", Anthropic's message_start under "message".
    holder = next(
        (document[key] for key in ("response", "message") if isinstance(document.get(key), dict)),
        document,
    )
    usage = holder.get("usage") or document.get("usage")
    if not isinstance(usage, dict):
        return None
    prompt = usage.get("prompt_tokens", usage.get("input_tokens"))
    if not isinstance(prompt, int):
        return None
    if "prompt_tokens" not in usage:
        prompt += sum(
            count for key in ANTHROPIC_CACHE_FIELDS if isinstance(count := usage.get(key), int)
        )
    completion = usage.get("completion_tokens", usage.get("output_tokens"))
    details = usage.get("prompt_tokens_details") or {}
    multimodal = details.get("multimodal_tokens") if isinstance(details, dict) else None
    image = multimodal.get("image") if isinstance(multimodal, dict) else None
    return Usage(
        prompt_tokens=prompt,
        completion_tokens=completion if isinstance(completion, int) else None,
        image_tokens=image if isinstance(image, int) else None,
    )


class UsageChunkStripper:
    """Removes the usage-only SSE event the sidecar asked for, so the client gets the stream
    vLLM sends when no usage is asked for, byte for byte.

    One more difference is undone: without ``include_usage`` vLLM puts ``system_fingerprint``
    on each choice's terminal chunk (the one with a ``finish_reason``), with it only on the
    usage chunk. So terminal chunks, and whatever follows them, wait for the usage chunk and
    get its fingerprint back; for one choice that is no wait, vLLM sends the two together.
    Only whole events are judged, so the tail of a chunk that ends inside an event waits for
    the next chunk; SSE clients act on whole events anyway.
    """

    def __init__(self, tap: UsageTap) -> None:
        self._tap = tap
        self._pending = b""
        self._held: list[bytes] = []  # from the first terminal chunk on, until the usage one

    def feed(self, chunk: bytes) -> bytes:
        """The bytes to send on for this chunk."""
        data = self._pending + chunk
        end = data.rfind(b"\n\n")
        if end < 0:
            self._pending = data
            return b""
        complete, self._pending = data[: end + 2], data[end + 2 :]
        if not self._held and _TERMINAL not in complete and b'"usage"' not in complete:
            return complete
        kept = []
        for event in complete.split(b"\n\n")[:-1]:
            if _is_usage_only_event(event):
                self._tap.feed(event + b"\n\n")
                fingerprint = _fingerprint(event)
                kept += [_stamped(held, fingerprint) for held in self._held]
                self._held = []
            elif self._held or _TERMINAL in event:
                self._held.append(event + b"\n\n")
            else:
                kept.append(event + b"\n\n")
        return b"".join(kept)

    def flush(self) -> bytes:
        """Whatever is left at the end of the stream."""
        rest, self._pending = b"".join(self._held) + self._pending, b""
        self._held = []
        return rest


# A choice's finish_reason is null until its last chunk.
_TERMINAL = b'"finish_reason":"'


def _fingerprint(event: bytes) -> bytes | None:
    """``"system_fingerprint":"..."`` of a usage-only event, as JSON, or None."""
    try:
        document = orjson.loads(event[5:].strip())
    except orjson.JSONDecodeError:
        return None
    value = document.get("system_fingerprint") if isinstance(document, dict) else None
    return b'"system_fingerprint":' + orjson.dumps(value) if isinstance(value, str) else None


def _stamped(event: bytes, fingerprint: bytes | None) -> bytes:
    """A terminal chunk as vLLM sends it without include_usage: the fingerprint is the last
    field it sets (after ``choices``; the fields after it are only set on the first chunk)."""
    body = event.rstrip(b"\n")
    if fingerprint is None or _TERMINAL not in body or b'"system_fingerprint"' in body:
        return event
    if not body.startswith(b"data:") or not body.endswith(b"}"):
        return event
    return body[:-1] + b"," + fingerprint + b"}" + event[len(body) :]


def _is_usage_only_event(event: bytes) -> bool:
    return event.startswith(b"data:") and b'"choices":[]' in event and b'"usage"' in event
