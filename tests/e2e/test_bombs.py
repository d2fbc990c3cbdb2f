"""Image bombs end to end: a 400 whether the sidecar rejects or downscales, without a pixel
buffer; downscaling never allocates more than ``SIDECAR_MAX_DECODE_PIXELS``.

The probe's own proofs (under 1 ms, no pixel buffer, no payload decode) are in
``tests/unit/images/test_probe.py``; frame 0 only of a GIF in ``tests/unit/images/test_resize.py``.
"""

from __future__ import annotations

import base64
from typing import Any

import orjson
import pytest

from fuzz.images import encode, gradient, padded, png_bomb
from sidecar.standin import StandinServer
from tests.support.bombs import BOMB_BYTES, data_uri_bytes, forbid_pixels, record_pixel_buffers
from tests.support.imaging import chat, image_url_part, messages
from tests.support.proxy_helpers import (
    DECISION,
    MESSAGES,
    image_uris_in,
    ledger_is_idle,
    post,
    reprobe,
)
from tests.support.sidecars import SidecarFactory


@pytest.fixture
def no_pixels(monkeypatch: pytest.MonkeyPatch) -> None:
    """Any pixel allocation or decode raises ``PixelsAllocated``."""
    forbid_pixels(monkeypatch)


@pytest.fixture
def pixel_buffers(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, int]]:
    """The size of every pixel buffer Pillow allocates from Python while the test runs."""
    return record_pixel_buffers(monkeypatch)


@pytest.mark.usefixtures("no_pixels")
@pytest.mark.parametrize("action", ["reject", "downscale"], ids=["reject", "downscale"])
@pytest.mark.parametrize("bomb", BOMB_BYTES.values(), ids=BOMB_BYTES.keys())
async def test_proxy_refuses_a_bomb_with_400_without_allocating_pixels(
    make_sidecar: SidecarFactory,
    standin: StandinServer,
    session: Any,
    bomb: bytes,
    action: str,
) -> None:
    sidecar = await make_sidecar(over_budget_action=action, max_image_tokens=256)
    uri = data_uri_bytes(padded(bomb, 256 << 10)).decode()
    reply = await post(session, sidecar, chat(image_url_part(uri)))
    assert reply.status == 400, reply.body
    error = reply.json()["error"]
    assert error["message"].startswith("image 1 of 1: ")
    assert "pixels, more than the limit of 178,956,970" in error["message"]
    assert (error["type"], error["code"]) == ("BadRequestError", 400)
    assert standin.requests == []
    assert ledger_is_idle(sidecar)


@pytest.mark.usefixtures("no_pixels")
async def test_proxy_refuses_a_bomb_on_messages_in_anthropics_shape(
    make_sidecar: SidecarFactory, standin: StandinServer, session: Any
) -> None:
    sidecar = await make_sidecar(over_budget_action="downscale", max_image_tokens=256)
    data = base64.b64encode(BOMB_BYTES["png-100000x100000"]).decode()
    block = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": data}}
    reply = await post(session, sidecar, messages(block), MESSAGES)
    assert reply.status == 400
    assert reply.json()["error"]["type"] == "invalid_request_error"
    assert standin.requests == []


DECODE_LIMIT_PIXELS = 2_000_000
NEAR_THE_LIMIT = {  # (format, size): each at most DECODE_LIMIT_PIXELS, each over the token budget
    "jpeg-1632x1224": ("JPEG", (1632, 1224)),
    "png-1414x1414": ("PNG", (1414, 1414)),
    "webp-1600x1250": ("WEBP", (1600, 1250)),
    "gif-1400x1400": ("GIF", (1400, 1400)),
    "tiff-1000x2000": ("TIFF", (1000, 2000)),
}


@pytest.mark.parametrize(("image_format", "size"), NEAR_THE_LIMIT.values(), ids=NEAR_THE_LIMIT)
async def test_proxy_downscaling_never_allocates_more_pixels_than_max_decode_pixels(
    make_sidecar: SidecarFactory,
    standin: StandinServer,
    session: Any,
    pixel_buffers: list[tuple[int, int]],
    image_format: str,
    size: tuple[int, int],
) -> None:
    sidecar = await make_sidecar(
        over_budget_action="downscale",
        max_image_tokens=256,
        max_decode_pixels=DECODE_LIMIT_PIXELS,
    )
    options = {"compression": "tiff_deflate"} if image_format == "TIFF" else {}
    raw = encode(gradient(*size), image_format, **options)
    media_type = f"image/{image_format.lower()}"
    uri = data_uri_bytes(raw, media_type).decode()
    pixel_buffers.clear()  # only what the request allocates
    reply = await post(session, sidecar, chat(image_url_part(uri)))
    assert reply.status == 200, reply.body
    assert reply.headers[DECISION] == "downscale"
    (forwarded,) = image_uris_in(orjson.loads(standin.requests[-1].body))
    assert reprobe(forwarded)[:2] != size
    assert pixel_buffers, "the downscale decoded nothing"
    assert max(w * h for w, h in pixel_buffers) <= DECODE_LIMIT_PIXELS
    assert ledger_is_idle(sidecar)


ONE_ROW_OVER = png_bomb(1414, 1415)  # 2,000,810 pixels


@pytest.mark.usefixtures("no_pixels")
async def test_proxy_refuses_to_downscale_an_image_one_row_over_max_decode_pixels(
    make_sidecar: SidecarFactory, standin: StandinServer, session: Any
) -> None:
    sidecar = await make_sidecar(
        over_budget_action="downscale", max_image_tokens=256, max_decode_pixels=DECODE_LIMIT_PIXELS
    )
    reply = await post(
        session, sidecar, chat(image_url_part(data_uri_bytes(ONE_ROW_OVER).decode()))
    )
    assert reply.status == 400
    assert "1414x1415 = 2,000,810 pixels, more than the limit of 2,000,000" in reply.body.decode()
    assert standin.requests == []


OVER_VLLM_LIMIT_PNG = png_bomb(15_000, 12_000)  # built before the tripwire is set


@pytest.mark.usefixtures("no_pixels")
async def test_an_image_over_vllms_pixel_limit_is_refused_in_vllms_words_when_probing_allows_it(
    make_sidecar: SidecarFactory, standin: StandinServer, session: Any
) -> None:
    # SIDECAR_MAX_DECODE_PIXELS raised past vLLM's limit: the header probe lets 15000 x 12000
    # through, and the model's rule refuses it as vLLM will (vision.VLLM_MAX_IMAGE_PIXELS).
    sidecar = await make_sidecar(max_decode_pixels=10**9)
    uri = data_uri_bytes(OVER_VLLM_LIMIT_PNG).decode()
    reply = await post(session, sidecar, chat(image_url_part(uri)))
    assert reply.status == 400, reply.body
    error = reply.json()["error"]
    assert error["message"] == (
        "image 1 of 1: Image dimensions 15000x12000 (180000000 pixels) exceed the maximum of "
        "178956970 pixels. Set VLLM_MAX_IMAGE_PIXELS to increase this limit."
    )
    assert (error["type"], error["code"]) == ("BadRequestError", 400)
    assert standin.requests == []
    assert ledger_is_idle(sidecar)
