"""images.data_uri: strict base64 as vLLM decodes it, and data URLs split without copying.

How the probe answers the same payloads: ``test_probe.py``.
"""

from __future__ import annotations

import pytest

from sidecar.errors import NotBase64Error
from sidecar.images.data_uri import split_data_uri, validate_base64
from tests.support.imaging import BAD_BASE64, PNG_PAYLOAD, base64_text


@pytest.mark.parametrize("payload", BAD_BASE64.values(), ids=BAD_BASE64.keys())
def test_validate_base64_rejects_the_payload_when_it_is_not_strict_base64(payload: str) -> None:
    with pytest.raises(NotBase64Error):
        validate_base64(payload)
    if payload.isascii():
        with pytest.raises(NotBase64Error):
            validate_base64(memoryview(payload.encode()))


@pytest.mark.parametrize(
    "payload",
    ["", "QQ==", "QUI=", "QUJD", PNG_PAYLOAD, base64_text(bytes(range(256)) * 5000)],
    ids=["empty", "two-pads", "one-pad", "no-pad", "png", "1.3-mb"],
)
def test_validate_base64_accepts_the_payload_when_it_is_strict_base64(payload: str) -> None:
    validate_base64(payload)
    validate_base64(payload.encode())
    validate_base64(memoryview(payload.encode()))


def test_validate_base64_names_the_position_when_a_character_is_stray() -> None:
    payload = base64_text(bytes(300_000))
    payload = payload[:262_200] + "\n" + payload[262_201:]
    with pytest.raises(NotBase64Error, match=r"character 262200 is '\\n'"):
        validate_base64(payload)


def test_split_data_uri_splits_without_copying_when_given_bytes() -> None:
    uri = f"data:image/png;base64,{PNG_PAYLOAD}".encode()
    media_type, payload = split_data_uri(uri)
    assert (media_type, bytes(payload), payload.obj) == ("image/png", PNG_PAYLOAD.encode(), uri)
    assert split_data_uri(uri.decode()) == ("image/png", PNG_PAYLOAD)
