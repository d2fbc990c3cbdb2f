"""The form fields of ``/v1/audio/transcriptions`` and ``/translations`` that change a price.

vLLM reads these routes as ``multipart/form-data``: one ``file`` (the audio, up to 25 MB) and
text fields. The sidecar prices the audio at ``SIDECAR_AUDIO_TOKENS_PER_ITEM`` and reads the
``prompt``, ``max_completion_tokens``, ``model`` and ``stream`` fields; the file's bytes are
never decoded.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from sidecar.body.refs import MediaSource
from sidecar.errors import InvalidRequestError

_BOUNDARY = re.compile(r'boundary="?([^";]+)"?', re.IGNORECASE)
_FIELD_NAME = re.compile(rb'name="([^"]*)"', re.IGNORECASE)
MAX_FIELD_BYTES = 1 << 20  # text fields larger than this are not read (the prompt is short)


@dataclass(frozen=True, slots=True)
class AudioForm:
    """The fields of one audio request."""

    model: str | None
    prompt: str
    max_completion_tokens: int | None
    stream: bool
    source: MediaSource  # the file is always sent inline


def read_audio_form(body: bytes, content_type: str | None) -> AudioForm:
    """Read the form; InvalidRequestError when it is not one vLLM would accept."""
    match = _BOUNDARY.search(content_type or "")
    if not (content_type or "").lower().startswith("multipart/form-data") or match is None:
        raise InvalidRequestError(
            "audio requests must be sent as multipart/form-data with a boundary", param="file"
        )
    fields: dict[str, bytes] = {}
    delimiter = b"--" + match.group(1).encode("latin-1")
    for part in body.split(delimiter)[1:]:
        if part.startswith(b"--"):
            break
        head, _, content = part.partition(b"\r\n\r\n")
        name = _FIELD_NAME.search(head)
        if name is None:
            continue
        key = name.group(1).decode("utf-8", "replace")
        fields[key] = content.removesuffix(b"\r\n") if key != "file" else b""
    if "file" not in fields:
        raise InvalidRequestError("an audio request needs a 'file' field", param="file")
    return AudioForm(
        model=_text(fields, "model"),
        prompt=_text(fields, "prompt") or "",
        max_completion_tokens=_count(fields, "max_completion_tokens"),
        stream=(_text(fields, "stream") or "").strip().lower() == "true",
        source=MediaSource.DATA,
    )


def _text(fields: dict[str, bytes], key: str) -> str | None:
    value = fields.get(key)
    if value is None or len(value) > MAX_FIELD_BYTES:
        return None
    return value.decode("utf-8", "replace")


def _count(fields: dict[str, bytes], key: str) -> int | None:
    text = _text(fields, key)
    if text is None or not text.strip():
        return None
    try:
        value = int(text.strip())
    except ValueError:
        raise InvalidRequestError(f"'{key}' must be an integer", param=key) from None
    if value < 1:
        raise InvalidRequestError(f"{key} must be at least 1, got {value}.", param=key)
    return value
