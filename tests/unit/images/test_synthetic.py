"""images.synthetic: the one-grey PNG a calibration sends is a real PNG of exactly the size."""

from __future__ import annotations

import base64
import io

import pytest
from PIL import Image

from sidecar.images.probe import probe_base64
from sidecar.images.synthetic import solid_png, solid_png_data_uri


@pytest.mark.parametrize(("width", "height"), [(1, 1), (32, 2048), (1920, 1080), (4032, 3024)])
def test_solid_png_decodes_fully_at_its_size(width: int, height: int) -> None:
    with Image.open(io.BytesIO(solid_png(width, height))) as image:
        image.load()  # every row decodes, as vLLM decodes it
        assert image.size == (width, height)
        assert image.getextrema() == (127, 127)


def test_solid_png_is_small_even_for_a_phone_photo() -> None:
    assert len(solid_png(4032, 3024)) < 100_000


def test_the_data_uri_is_read_by_the_sidecars_own_probe() -> None:
    payload = solid_png_data_uri(640, 480).removeprefix("data:image/png;base64,")
    header = probe_base64(payload.encode(), max_image_pixels=10**9)
    assert (header.width_px, header.height_px, header.format) == (640, 480, "PNG")
    assert base64.b64decode(payload) == solid_png(640, 480)


@pytest.mark.parametrize(("width", "height"), [(0, 10), (10, 0), (-1, 5)])
def test_solid_png_refuses_an_empty_side(width: int, height: int) -> None:
    with pytest.raises(ValueError, match="sides"):
        solid_png(width, height)
