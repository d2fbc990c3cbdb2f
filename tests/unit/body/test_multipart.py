"""body.multipart: the priced fields of an audio form, as a real client encodes it."""

from __future__ import annotations

import aiohttp
import pytest

from sidecar.body.multipart import MAX_FIELD_BYTES, read_audio_form
from sidecar.body.refs import MediaSource
from sidecar.errors import InvalidRequestError

AUDIO = b"RIFF\x24\x00\x00\x00WAVEfmt " + bytes(range(256)) * 8


class _Sink:
    """Collects what aiohttp's multipart writer writes."""

    def __init__(self) -> None:
        self.data = bytearray()

    async def write(self, chunk: bytes) -> None:
        self.data += chunk


async def encoded(**fields: str) -> tuple[bytes, str]:
    """A form as aiohttp's client sends it: the audio ``file`` and the text ``fields``."""
    form = aiohttp.FormData()
    form.add_field("file", AUDIO, filename="speech.wav", content_type="audio/wav")
    for name, value in fields.items():
        form.add_field(name, value)
    payload = form()
    sink = _Sink()
    await payload.write(sink)  # type: ignore[arg-type]
    return bytes(sink.data), str(payload.content_type)


async def test_read_audio_form_reads_the_priced_fields_and_never_the_file() -> None:
    body, content_type = await encoded(
        model="whisper", prompt="names: Zoë", max_completion_tokens="64", stream="True"
    )
    form = read_audio_form(body, content_type)
    assert (form.model, form.prompt, form.max_completion_tokens, form.stream) == (
        "whisper", "names: Zoë", 64, True,
    )  # fmt: skip
    assert form.source is MediaSource.DATA


async def test_read_audio_form_defaults_what_is_not_sent() -> None:
    body, content_type = await encoded()
    form = read_audio_form(body, content_type)
    assert (form.model, form.prompt, form.max_completion_tokens, form.stream) == (
        None, "", None, False,
    )  # fmt: skip


def test_read_audio_form_skips_a_text_field_too_large_to_be_a_prompt() -> None:
    field = b'--b\r\nContent-Disposition: form-data; name="%s"\r\n\r\n%s\r\n'
    body = field % (b"file", b"") + field % (b"prompt", b"x" * (MAX_FIELD_BYTES + 1)) + b"--b--"
    assert read_audio_form(body, "multipart/form-data; boundary=b").prompt == ""


@pytest.mark.parametrize(
    ("value", "message"),
    [("many", "'max_completion_tokens' must be an integer"), ("0", "must be at least 1, got 0")],
    ids=["not-a-number", "zero"],
)
async def test_read_audio_form_refuses_a_bad_token_count_naming_the_field(
    value: str, message: str
) -> None:
    body, content_type = await encoded(max_completion_tokens=value)
    with pytest.raises(InvalidRequestError, match=message) as refused:
        read_audio_form(body, content_type)
    assert refused.value.param == "max_completion_tokens"


@pytest.mark.parametrize("content_type", [None, "application/json", "multipart/form-data"], ids=str)
def test_read_audio_form_refuses_a_body_that_is_not_a_form(content_type: str | None) -> None:
    with pytest.raises(InvalidRequestError, match="multipart/form-data with a boundary"):
        read_audio_form(b"{}", content_type)


def test_read_audio_form_refuses_a_form_without_a_file() -> None:
    body = b'--b\r\nContent-Disposition: form-data; name="model"\r\n\r\nwhisper\r\n--b--\r\n'
    with pytest.raises(InvalidRequestError, match="needs a 'file' field"):
        read_audio_form(body, 'multipart/form-data; boundary="b"')
