"""vision.smart_resize: transformers' Qwen2-VL and Qwen3-VL/GLM-4.1V resizes, refusals included.

Every expected size is what transformers' own ``smart_resize`` (the PIL processors') returns.
"""

from __future__ import annotations

import pytest

from sidecar.errors import UnsupportedImageSizeError
from sidecar.vision.smart_resize import MAX_ASPECT_RATIO, clip_smart_resize, smart_resize

QWEN = {"factor": 28, "min_pixels": 56 * 56, "max_pixels": 28 * 28 * 1280}


@pytest.mark.parametrize(
    ("height", "width", "resized"),
    [
        (480, 640, (476, 644)),  # rounded to the factor
        (3024, 4032, (840, 1148)),  # shrunk under max_pixels, floored to the factor
        (10, 10, (56, 56)),  # grown over min_pixels, ceiled to the factor
        (28, 28 * 200, (28, 5600)),  # at the aspect limit, still served
    ],
    ids=["round", "shrink", "grow", "aspect-limit"],
)
def test_smart_resize_gives_the_size_the_processor_feeds_the_vit(
    height: int, width: int, resized: tuple[int, int]
) -> None:
    assert smart_resize(height, width, **QWEN) == resized
    h, w = resized
    assert h % 28 == 0
    assert w % 28 == 0


def test_smart_resize_refuses_an_aspect_ratio_above_the_limit_naming_the_image() -> None:
    with pytest.raises(UnsupportedImageSizeError, match=r"image 5629x28 .* above 200"):
        smart_resize(28, 28 * MAX_ASPECT_RATIO + 29, **QWEN)


def test_clip_smart_resize_scales_the_whole_clip_into_the_pixel_range() -> None:
    clip = {"temporal_factor": 2, "factor": 28, "min_pixels": 1}
    assert clip_smart_resize(2, 480, 640, **clip, max_pixels=10**9) == (476, 644)
    # Four frames against the pixels of two: each frame gets about half.
    assert clip_smart_resize(4, 480, 640, **clip, max_pixels=2 * 476 * 644) == (336, 448)


def test_clip_smart_resize_first_grows_a_side_below_the_factor() -> None:
    clip = {"temporal_factor": 2, "factor": 28, "min_pixels": 1, "max_pixels": 10**9}
    assert clip_smart_resize(2, 10, 300, **clip) == (28, 840)
