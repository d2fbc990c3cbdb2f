"""PaddleOCR-VL: vLLM's own smart_resize, which enlarges a short side before the aspect check.

The figures are vLLM 0.33's (read from its processor in the renderer tier:
tests/renderer/test_new_families.py).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from sidecar.errors import UnsupportedImageSizeError
from sidecar.profiles import ProfileOverrides, load_profile
from sidecar.vision.paddleocr_vl import PaddleOCRVLRule, paddle_smart_resize
from sidecar.vision.smart_resize import smart_resize
from tests.support.family_dirs import write_paddleocr_vl_dir


@pytest.fixture(scope="module")
def paddle(tmp_path_factory: pytest.TempPathFactory) -> PaddleOCRVLRule:
    rule = load_profile(str(write_paddleocr_vl_dir(tmp_path_factory.mktemp("p")))).vision.rule
    assert isinstance(rule, PaddleOCRVLRule)
    return rule


@pytest.mark.parametrize(("size", "tokens"), [((640, 480), 391), ((1, 1), 196), ((10000, 60), 714)])
def test_counts_are_vllms(paddle: PaddleOCRVLRule, size: tuple[int, int], tokens: int) -> None:
    assert paddle.image_tokens(*size).tokens == tokens
    assert paddle.image_tokens(*size).wrapper_tokens == 2


@pytest.mark.parametrize("size", [(3, 900), (1, 300), (10000, 20)])
def test_aspect_ratios_over_200_after_enlarging_are_refused(
    paddle: PaddleOCRVLRule, size: tuple[int, int]
) -> None:
    with pytest.raises(UnsupportedImageSizeError, match="aspect ratio"):
        paddle.image_tokens(*size)


def test_the_short_side_is_enlarged_before_the_aspect_check_unlike_qwen() -> None:
    # A 20 px side: Qwen rounds it to one factor and keeps the long side (28 x 2996, 107
    # tokens); PaddleOCR-VL scales the long side with it (28 x 4200, 150 tokens).
    assert paddle_smart_resize(20, 3000, factor=28, min_pixels=3136, max_pixels=10**7) == (
        28, 4200,
    )  # fmt: skip
    assert smart_resize(20, 3000, factor=28, min_pixels=3136, max_pixels=10**7) == (28, 2996)


def test_pixel_bounds_come_from_the_kwargs(tmp_path: Path) -> None:
    directory = write_paddleocr_vl_dir(tmp_path)
    overrides = ProfileOverrides(mm_processor_kwargs={"max_pixels": 1003520})
    capped = load_profile(str(directory), overrides)
    assert capped.vision.max_image_tokens().tokens == 1003520 // 784
