"""vision.glm4v: GLM-4.1V prices one image as a clip of two frames, on worked numbers that
transformers' processor gives (``tests/oracle/test_vision_oracle_families.py`` checks every
size)."""

from __future__ import annotations

import pytest

from sidecar.profiles import load_profile
from sidecar.vision.glm4v import Glm4vSmartResizeRule
from sidecar.vision.smart_resize import clip_smart_resize
from tests.support.vision_rules import check_rule_contract

GLM = load_profile("zai-org/GLM-4.1V-9B-Thinking").vision


@pytest.mark.parametrize(
    ("size", "tokens"),
    [((640, 480), 391), ((1920, 1080), 2691), ((333, 1000), 432), ((100, 100), 16)],
    ids=["vga", "full-hd", "tall", "tiny"],
)
def test_glm4v_rule_counts_what_the_processor_counts(size: tuple[int, int], tokens: int) -> None:
    assert GLM.image_tokens(*size).tokens == tokens
    assert GLM.image_tokens(*size).wrapper_tokens == 2


def test_glm4v_rule_resizes_an_image_as_a_clip_of_two_frames() -> None:
    assert isinstance(GLM.rule, Glm4vSmartResizeRule)  # behind vLLM's decode limit
    height, width = clip_smart_resize(
        2, 1080, 1920, temporal_factor=2, factor=28,
        min_pixels=GLM.min_pixels, max_pixels=GLM.max_pixels,
    )  # fmt: skip
    assert GLM.resized_size(1920, 1080) == (width, height)
    assert "2 frames" in GLM.describe()


def test_glm4v_rule_keeps_the_vision_rule_contract() -> None:
    check_rule_contract(GLM)
