"""Image bombs: refused from the header, fast, without a pixel buffer; downscaling stays bounded.

Each bomb (``fuzz.images.BOMBS``) is a real file whose header was patched to claim gigapixels:
a decoder that trusted it would allocate gigabytes. The proofs:

* time: the probe's median over many repetitions is under 1 ms (the real figure is in
  ``docs/reliability.md``; the bound is loose so a busy machine does not fail the test);
* no pixel buffer: Pillow's allocators (``Image.core.new``, ``Image.core.fill``) and every
  ``load`` are replaced by tripwires that raise a ``BaseException`` nothing may swallow;
* no payload decode: the bomb carries 8 MiB of junk after its end, and the Python memory the
  probe allocates (``tracemalloc`` peak) stays under 64 KiB;
* end to end, with ``over_budget_action=downscale``, every pixel buffer Pillow allocates is at
  most ``SIDECAR_MAX_DECODE_PIXELS``.
"""

from __future__ import annotations

import base64
import statistics
import time
import tracemalloc
from collections.abc import Callable
from typing import Any

import orjson
import pytest
from PIL import GifImagePlugin, Image, ImageFile

from fuzz.images import BOMBS, animated_gif, encode, gradient, padded, png_bomb
from sidecar.errors import ImageTooLargeError
from sidecar.images.probe import probe_data_uri
from sidecar.images.resize import downscale_image
from sidecar.standin import StandinServer
from tests.conftest import SidecarFactory
from tests.proxy_helpers import (
    DECISION,
    MESSAGES,
    chat,
    image_uris_in,
    image_url_part,
    ledger_is_idle,
    messages,
    post,
    reprobe,
)

JUNK_BYTES = 8 << 20
BOMB_BYTES = {name: make() for name, make in BOMBS.items()}  # built before any tripwire is set
REPETITIONS = 300
MEDIAN_BOUND_SECONDS = 1e-3
PEAK_BOUND_BYTES = 64 << 10


class PixelsAllocated(BaseException):
    """Raised by a tripwire: something asked Pillow for pixels. Not an ``Exception``, so no
    ``except Exception`` on the way can turn it into an image error."""


def data_uri_bytes(raw: bytes, media_type: str = "image/png") -> bytes:
    """A data URI as bytes, the form the proxy hands the probe (a slice of the body)."""
    return b"data:%s;base64,%s" % (media_type.encode(), base64.b64encode(raw))


@pytest.fixture
def no_pixels(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make any pixel allocation or decode raise ``PixelsAllocated``."""

    def tripwire(*args: Any, **kwargs: Any) -> Any:
        raise PixelsAllocated(args[:2])

    monkeypatch.setattr(Image.core, "new", tripwire)
    monkeypatch.setattr(Image.core, "fill", tripwire)
    monkeypatch.setattr(Image.Image, "load", tripwire)
    monkeypatch.setattr(ImageFile.ImageFile, "load", tripwire)


@pytest.fixture
def pixel_buffers(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, int]]:
    """The size of every pixel buffer Pillow allocates from Python while the test runs."""
    sizes: list[tuple[int, int]] = []
    new, fill = Image.core.new, Image.core.fill

    def recording(allocate: Callable[..., Any]) -> Callable[..., Any]:
        def allocate_and_record(mode: str, size: tuple[int, int], *args: Any) -> Any:
            sizes.append(tuple(size))  # type: ignore[arg-type]
            return allocate(mode, size, *args)

        return allocate_and_record

    monkeypatch.setattr(Image.core, "new", recording(new))
    monkeypatch.setattr(Image.core, "fill", recording(fill))
    return sizes


# --- the probe ---------------------------------------------------------------------------------


@pytest.mark.parametrize("bomb", BOMB_BYTES.values(), ids=BOMB_BYTES.keys())
def test_probe_refuses_a_bomb_from_its_header_in_under_a_millisecond(bomb: bytes) -> None:
    uri = memoryview(data_uri_bytes(padded(bomb, JUNK_BYTES)))
    elapsed: list[float] = []
    for _ in range(REPETITIONS):
        started = time.perf_counter()
        with pytest.raises(ImageTooLargeError, match="more than the limit"):
            probe_data_uri(uri)
        elapsed.append(time.perf_counter() - started)
    assert statistics.median(elapsed) < MEDIAN_BOUND_SECONDS


@pytest.mark.usefixtures("no_pixels")
@pytest.mark.parametrize("bomb", BOMB_BYTES.values(), ids=BOMB_BYTES.keys())
def test_probe_refuses_a_bomb_without_a_pixel_buffer_or_decoding_its_payload(
    bomb: bytes,
) -> None:
    uri = data_uri_bytes(padded(bomb, JUNK_BYTES))
    assert len(uri) > 10 << 20
    tracemalloc.start()
    try:
        with pytest.raises(ImageTooLargeError):
            probe_data_uri(memoryview(uri))
        _, peak_bytes = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak_bytes < PEAK_BOUND_BYTES


@pytest.mark.parametrize("frames", [1, 5000], ids=["one-frame", "5000-frames"])
def test_probe_reads_only_frame_0_of_an_animated_gif_in_under_a_millisecond(frames: int) -> None:
    uri = memoryview(data_uri_bytes(animated_gif(frames, (640, 480)), "image/gif"))
    elapsed: list[float] = []
    for _ in range(REPETITIONS):
        started = time.perf_counter()
        header = probe_data_uri(uri)
        elapsed.append(time.perf_counter() - started)
    assert (header.width_px, header.height_px, header.frame_count) == (640, 480, None)
    assert statistics.median(elapsed) < MEDIAN_BOUND_SECONDS


def test_downscale_decodes_only_frame_0_of_a_gif_with_thousands_of_frames(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    frames_seen: list[int] = []
    seek = GifImagePlugin.GifImageFile.seek

    def recording_seek(self: GifImagePlugin.GifImageFile, frame: int) -> None:
        frames_seen.append(frame)
        seek(self, frame)

    monkeypatch.setattr(GifImagePlugin.GifImageFile, "seek", recording_seek)
    started = time.perf_counter()
    out = downscale_image(animated_gif(5000, (640, 480)), (320, 240))
    assert time.perf_counter() - started < 1.0
    assert (out.width_px, out.height_px) == (320, 240)
    assert set(frames_seen) <= {0}


# --- end to end --------------------------------------------------------------------------------


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
