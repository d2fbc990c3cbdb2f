"""vision.tiling: fitting a size into a box or a pixel cap, and picking a priced downscale."""

from __future__ import annotations

import pytest

from sidecar.errors import UnsupportedImageSizeError
from sidecar.profiles import load_profile
from sidecar.vision.tiling import (
    already_fits,
    cap_pixels,
    distortion,
    fit_inside,
    pick_downscale,
    within_caps,
)

QWEN = load_profile("Qwen/Qwen2.5-VL-7B-Instruct").vision


@pytest.mark.parametrize(
    ("size", "box", "fitted"),
    [((4032, 3024), (672, 672), (672, 504)), ((300, 600), (672, 336), (168, 336)),
     ((100, 50), (672, 672), (100, 50)), ((10_000, 3), (336, 336), (336, 1))],
    ids=["landscape", "portrait", "never-enlarged", "side-at-least-1"],
)  # fmt: skip
def test_fit_inside_keeps_the_aspect_ratio_and_lands_on_the_box_side(
    size: tuple[int, int], box: tuple[int, int], fitted: tuple[int, int]
) -> None:
    assert fit_inside(*size, *box) == fitted


@pytest.mark.parametrize(
    ("size", "cap"),
    [((4032, 3024), 1_000_000), ((7, 10_000), 5000), ((1, 1), 1), ((640, 480), 10**7)],
    ids=["photo", "thin", "one-pixel", "under-the-cap"],
)
def test_cap_pixels_scales_down_to_at_most_the_cap(size: tuple[int, int], cap: int) -> None:
    width, height = cap_pixels(*size, cap)
    assert width * height <= cap
    assert width <= size[0]
    assert height <= size[1]
    if size[0] * size[1] <= cap:
        assert (width, height) == size


def test_cap_pixels_keeps_a_photos_aspect_ratio() -> None:
    assert cap_pixels(4032, 3024, 1_000_000) == (1154, 866)
    assert distortion((1154, 866), 4032, 3024) < 0.001


def test_cap_pixels_refuses_a_cap_below_one_pixel() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        cap_pixels(10, 10, 0)


def test_within_caps_and_already_fits_honour_both_caps() -> None:
    assert within_caps(100, 10, 10, max_tokens=100, max_pixels=100)
    assert not within_caps(101, 10, 10, max_tokens=100, max_pixels=None)
    assert not within_caps(1, 11, 10, max_tokens=None, max_pixels=100)
    tokens = QWEN.image_tokens(640, 480).tokens
    assert already_fits(QWEN, 640, 480, max_tokens=tokens, max_pixels=None)
    assert not already_fits(QWEN, 640, 480, max_tokens=tokens - 1, max_pixels=None)


def test_already_fits_raises_for_a_size_the_processor_refuses() -> None:
    with pytest.raises(UnsupportedImageSizeError):
        already_fits(QWEN, 10_000, 10, max_tokens=None, max_pixels=None)


def _tiles(width: int, height: int) -> int:
    """A tile family's price: one token per started 100 x 100 tile."""
    return -(-width // 100) * -(-height // 100)


def test_pick_downscale_keeps_the_original_when_it_fits() -> None:
    candidates = [(100, 100), (200, 100)]
    assert pick_downscale(_tiles, 200, 100, candidates, max_tokens=2, max_pixels=None) == (200, 100)


def test_pick_downscale_prefers_the_least_distorted_then_the_largest_fitting_candidate() -> None:
    candidates = [(100, 100), (300, 150), (200, 100), (390, 100)]
    assert pick_downscale(_tiles, 400, 200, candidates, max_tokens=4, max_pixels=None) == (200, 100)
    assert pick_downscale(_tiles, 400, 200, candidates, max_tokens=6, max_pixels=None) == (300, 150)


def test_pick_downscale_refuses_when_no_candidate_fits() -> None:
    with pytest.raises(UnsupportedImageSizeError, match="cannot be downscaled to 0 tokens"):
        pick_downscale(_tiles, 400, 200, [(100, 100)], max_tokens=0, max_pixels=None)
