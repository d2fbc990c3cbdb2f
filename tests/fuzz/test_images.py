"""Fuzzing the header probe and the downscaler with mangled real files and arbitrary sizes.

Properties:

* the probe answers any bytes with a size or an ``ImageError`` (a 400), and its three entry
  points (raw bytes, base64, data URI) agree;
* for every width and height a header can hold, the probe reports exactly that size, or refuses
  it for the right reason (zero side: ``EmptyImageError``; over the limit: ``ImageTooLargeError``);
* the downscaler turns any small image of any format and mode into exactly the target size, and
  answers mangled bytes with an ``ImageError``, never allocating a pixel buffer over its limit.
"""

from __future__ import annotations

import base64
import contextlib
import io
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from PIL import Image

from fuzz.images import (
    encode,
    gif_bomb,
    gradient,
    jpeg_bomb,
    png_bomb,
    webp_extended_bomb,
)
from sidecar.errors import EmptyImageError, ImageError, ImageTooLargeError
from sidecar.images.probe import ImageHeader, probe_base64, probe_bytes, probe_data_uri
from sidecar.images.resize import downscale_image
from tests.support.fuzz_strategies import SEED_IMAGES, examples

FIELDS = [b"\x00\x00", b"\xff\xff", b"\x00\x00\x00\x00", b"\xff\xff\xff\xff", b"\x7f\xff\xff\xff"]


@st.composite
def mangled_images(draw: st.DrawFn) -> bytes:
    """A real small file after a few mutations, most of them inside its header."""
    raw = draw(st.sampled_from(sorted(SEED_IMAGES.values())))
    for _ in range(draw(st.integers(0, 4))):
        at = draw(st.integers(0, min(len(raw), 96)) | st.integers(0, len(raw)))
        kind = draw(st.integers(0, 5))
        if kind == 0:
            raw = raw[:at] + bytes([draw(st.integers(0, 255))]) + raw[at + 1 :]
        elif kind == 1:
            field = draw(st.sampled_from(FIELDS))
            raw = raw[:at] + field + raw[at + len(field) :]
        elif kind == 2:
            raw = raw[:at]
        elif kind == 3:
            raw = raw[:at] + draw(st.binary(max_size=8)) + raw[at:]
        elif kind == 4:
            end = draw(st.integers(at, len(raw)))
            raw = raw[:at] + raw[end:]
        else:
            raw = raw[:at] + raw[at : at + 64] * draw(st.integers(2, 40)) + raw[at:]
    return raw


def outcome(probe: Callable[[], ImageHeader]) -> ImageHeader | type[ImageError]:
    """The header, or the class of the ``ImageError``; anything else fails the test."""
    try:
        return probe()
    except ImageError as exc:
        return type(exc)


@examples(150)
@given(raw=mangled_images(), limit=st.sampled_from([178_956_970, 10_000, 64]))
def test_probe_answers_any_mangled_image_the_same_way_by_every_entry_point(
    raw: bytes, limit: int
) -> None:
    encoded = base64.b64encode(raw)
    results = [
        outcome(lambda: probe_bytes(raw, max_image_pixels=limit)),
        outcome(lambda: probe_base64(encoded, max_image_pixels=limit)),
        outcome(
            lambda: probe_data_uri(b"data:image/png;base64," + encoded, max_image_pixels=limit)
        ),
    ]
    assert results.count(results[0]) == 3, results
    header = results[0]
    if isinstance(header, ImageHeader):
        assert min(header.width_px, header.height_px) >= 1
        assert header.pixels <= limit
        assert header.exif_orientation in range(1, 9)


SIZE_FIELDS: dict[str, tuple[Callable[[int, int], bytes], int, int]] = {
    # format: (builder, smallest and largest side the header can state)
    "png": (png_bomb, 0, 2**31 - 1),
    "jpeg": (jpeg_bomb, 0, 65_535),
    "gif": (lambda w, h: gif_bomb(w, h), 0, 65_535),
    "webp-vp8x": (webp_extended_bomb, 1, 2**24),
}


@pytest.mark.parametrize(("build", "low", "high"), SIZE_FIELDS.values(), ids=SIZE_FIELDS.keys())
@examples(40)
@given(data=st.data())
def test_probe_reads_exactly_the_size_a_header_claims_or_refuses_it_for_the_right_reason(
    build: Callable[[int, int], bytes], low: int, high: int, data: st.DataObject
) -> None:
    side = st.integers(low, high) | st.integers(low, min(high, 20_000))
    width, height = data.draw(side), data.draw(side)
    limit = data.draw(st.sampled_from([178_956_970, 1_000_000]))
    if build is SIZE_FIELDS["gif"][0]:  # frame 0 (8x8 at the origin) widens a smaller screen
        width, height = max(width, 8), max(height, 8)
    try:
        header = probe_bytes(build(width, height), max_image_pixels=limit)
    except EmptyImageError:
        assert 0 in (width, height)
    except ImageTooLargeError:
        assert width * height > limit
    else:
        assert (header.width_px, header.height_px) == (width, height)


FORMATS_AND_MODES = [
    ("JPEG", "RGB"), ("JPEG", "L"), ("JPEG", "CMYK"),
    ("PNG", "RGB"), ("PNG", "RGBA"), ("PNG", "L"), ("PNG", "LA"), ("PNG", "P"), ("PNG", "1"),
    ("WEBP", "RGB"), ("WEBP", "RGBA"), ("GIF", "P"), ("BMP", "RGB"), ("TIFF", "CMYK"),
    ("TIFF", "RGBA"),
]  # fmt: skip


@examples(60)
@given(
    format_and_mode=st.sampled_from(FORMATS_AND_MODES),
    size=st.tuples(st.integers(1, 48), st.integers(1, 48)),
    data=st.data(),
)
def test_downscale_gives_exactly_the_target_size_for_any_small_image(
    format_and_mode: tuple[str, str], size: tuple[int, int], data: st.DataObject
) -> None:
    image_format, mode = format_and_mode
    target = (data.draw(st.integers(1, size[0])), data.draw(st.integers(1, size[1])))
    raw = encode(gradient(*size, mode=mode), image_format)
    out = downscale_image(raw, target)
    assert (out.width_px, out.height_px) == target
    with Image.open(io.BytesIO(out.data)) as reread:
        assert reread.size == target


@contextlib.contextmanager
def pixel_buffers() -> Iterator[list[tuple[int, int]]]:
    """The size of every pixel buffer Pillow allocates from Python inside the block."""
    sizes: list[tuple[int, int]] = []
    new = Image.core.new

    def recording(mode: str, size: tuple[int, int], *args: Any) -> Any:
        sizes.append(tuple(size))  # type: ignore[arg-type]
        return new(mode, size, *args)

    Image.core.new = recording
    try:
        yield sizes
    finally:
        Image.core.new = new


@examples(150)
@given(raw=mangled_images(), limit=st.integers(64, 2_000))
def test_downscale_answers_any_mangled_image_with_an_image_or_an_image_error_within_its_limit(
    raw: bytes, limit: int
) -> None:
    with pixel_buffers() as sizes:
        try:
            out = downscale_image(raw, (8, 8), max_decode_pixels=limit)
        except ImageError:
            pass
        else:
            assert (out.width_px, out.height_px) == (8, 8)
    assert all(width * height <= limit for width, height in sizes), sizes
