"""DeepSeek-VL2: the global view plus the best candidate resolution's local views, as cropped.

The figures are vLLM 0.33's for a prompt of one or two images (read from its processor in the
renderer tier: tests/renderer/test_new_families.py, which also holds the three-image prompt
the rule prices above vLLM's count).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from sidecar.errors import ConfigurationError
from sidecar.profiles import ProfileOverrides, load_profile
from sidecar.vision.deepseek_vl2 import DeepseekVL2Rule, select_best_resolution
from tests.support.family_dirs import DEEPSEEK_VL2_RESOLUTIONS, write_deepseek_vl2_dir


@pytest.fixture(scope="module")
def vl2_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_deepseek_vl2_dir(tmp_path_factory.mktemp("deepseek-vl2"))


def rule(directory: Path, **kwargs: Any) -> DeepseekVL2Rule:
    profile = load_profile(str(directory), ProfileOverrides(mm_processor_kwargs=kwargs))
    vision = profile.vision.rule
    assert isinstance(vision, DeepseekVL2Rule)
    return vision


@pytest.mark.parametrize(
    ("size", "tokens"),
    [
        ((1, 1), 421),  # 14 x 15 global + separator + one 384 px local view, 14 x 15
        ((800, 600), 1415),  # 3 x 2 tiles of 384 px: 28 rows of 43
        ((3000, 400), 1793),  # 8 x 1: 14 rows of 113
        ((1152, 1152), 2017),  # 3 x 3: 42 rows of 43
        ((384, 3456), 2101),  # 1 x 9: 126 rows of 15, the most
    ],
)
def test_counts_are_vllms_for_a_prompt_of_at_most_two_images(
    vl2_dir: Path, size: tuple[int, int], tokens: int
) -> None:
    assert rule(vl2_dir).image_tokens(*size).tokens == tokens


def test_a_prompt_of_three_images_is_priced_above_vllms_uncropped_count(vl2_dir: Path) -> None:
    vl2 = rule(vl2_dir)
    assert vl2.uncropped_tokens() == 421  # vLLM's count for each of three or more
    assert vl2.image_tokens(800, 600).tokens >= vl2.uncropped_tokens()
    assert vl2.max_image_tokens().tokens == 2101


def test_the_best_resolution_prefers_less_waste_on_equal_effect() -> None:
    # A 1 x 1 image fits every candidate at full effect: the 384 x 384 one wastes least.
    candidates = [(w, h) for w, h in DEEPSEEK_VL2_RESOLUTIONS]
    assert select_best_resolution(1, 1, candidates) == (384, 384)
    assert select_best_resolution(2000, 500, candidates) == (1536, 384)


@pytest.mark.parametrize(
    ("knob", "value"),
    [("candidate_resolutions", [[384, 384]]), ("patch_size", 16), ("downsample_ratio", 1)],
)
def test_knobs_are_refused(vl2_dir: Path, knob: str, value: object) -> None:
    with pytest.raises(ConfigurationError, match=knob):
        rule(vl2_dir, **{knob: value})


def test_count_neutral_knobs_pass(vl2_dir: Path) -> None:
    assert rule(vl2_dir, image_mean=[0.4, 0.4, 0.4]) == rule(vl2_dir)


def test_a_downscale_fits_the_cap(vl2_dir: Path) -> None:
    vl2 = rule(vl2_dir)
    size = vl2.downscale_size(4000, 3000, max_tokens=1000, max_pixels=None)
    assert vl2.image_tokens(*size).tokens <= 1000
