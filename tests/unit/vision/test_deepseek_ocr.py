"""DeepSeek-OCR and OCR-2: a global view, plus 2 to 6 tiles once a side passes the tile side.

The figures are vLLM 0.33's (read from its processor in the renderer tier:
tests/renderer/test_new_families.py).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from sidecar.errors import ConfigurationError
from sidecar.profiles import ProfileOverrides, load_profile
from sidecar.vision.deepseek_ocr import DeepseekOCRRule
from tests.support.family_dirs import write_deepseek_ocr2_dir, write_deepseek_ocr_dir


@pytest.fixture(scope="module")
def ocr_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_deepseek_ocr_dir(tmp_path_factory.mktemp("deepseek-ocr"))


@pytest.fixture(scope="module")
def ocr2_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_deepseek_ocr2_dir(tmp_path_factory.mktemp("deepseek-ocr2"))


def rule(directory: Path, **kwargs: Any) -> DeepseekOCRRule:
    profile = load_profile(str(directory), ProfileOverrides(mm_processor_kwargs=kwargs))
    vision = profile.vision.rule
    assert isinstance(vision, DeepseekOCRRule)
    return vision


@pytest.mark.parametrize(
    ("size", "tokens"),
    [
        ((1, 1), 273),  # the global view alone: 16 x (16 + 1) + separator
        ((640, 640), 273),  # not past the tile side
        ((641, 640), 693),  # 2 x 2 tiles: 20 rows of 21, + 273
        ((1000, 800), 693),  # 1.25: a tie between 2 x 2 and 3 x 2, kept at 2 x 2
        ((3000, 400), 883),  # 6 x 1: 10 rows of 61
        ((900, 3), 883),  # 300:1 is not refused: 6 x 1
        ((3, 900), 933),  # 1 x 6: 60 rows of 11, the most
    ],
)
def test_ocr_counts_are_vllms(ocr_dir: Path, size: tuple[int, int], tokens: int) -> None:
    assert rule(ocr_dir).image_tokens(*size).tokens == tokens


@pytest.mark.parametrize(
    ("size", "tokens"),
    [
        ((768, 768), 257),  # 16 x 16 + separator, no newlines
        ((769, 768), 833),  # 2 x 2 tiles of 12 x 12 cells
        ((3000, 400), 1121),  # 6 x 1
    ],
)
def test_ocr2_counts_are_vllms(ocr2_dir: Path, size: tuple[int, int], tokens: int) -> None:
    assert rule(ocr2_dir).image_tokens(*size).tokens == tokens


def test_the_most_costly_image_is_six_tiles_in_a_column(ocr_dir: Path, ocr2_dir: Path) -> None:
    assert rule(ocr_dir).max_image_tokens().tokens == 933
    assert rule(ocr2_dir).max_image_tokens().tokens == 1121


def test_knobs_vllm_overrides_change_nothing(ocr_dir: Path) -> None:
    knobs = {"image_size": 1024, "base_size": 1280, "strategy": "v2", "crop_mode": True}
    assert rule(ocr_dir, **knobs, max_crops=6) == rule(ocr_dir)


@pytest.mark.parametrize(
    ("knob", "value"), [("crop_mode", False), ("max_crops", 9), ("max_crops", 6.0)]
)
def test_knobs_that_split_the_processor_from_the_count_are_refused(
    ocr_dir: Path, ocr2_dir: Path, knob: str, value: object
) -> None:
    for directory in (ocr_dir, ocr2_dir):
        with pytest.raises(ConfigurationError, match=knob):
            rule(directory, **{knob: value})


def test_an_unknown_knob_is_refused(ocr_dir: Path) -> None:
    with pytest.raises(ConfigurationError, match="min_crops"):
        rule(ocr_dir, min_crops=1)


def test_a_downscale_fits_the_cap_and_can_drop_the_tiles(ocr_dir: Path) -> None:
    ocr = rule(ocr_dir)
    size = ocr.downscale_size(4000, 3000, max_tokens=700, max_pixels=None)
    assert ocr.image_tokens(*size).tokens <= 700
    untiled = ocr.downscale_size(4000, 3000, max_tokens=300, max_pixels=None)
    assert untiled == (640, 480)
    assert ocr.image_tokens(*untiled).tokens == 273
