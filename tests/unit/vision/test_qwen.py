"""vision.qwen: Qwen2-VL, Qwen2.5-VL and Qwen3-VL images, by the design brief's worked numbers.

Every size against transformers' own processor: ``tests/oracle/test_vision_oracle.py``.
"""

from __future__ import annotations

import pytest

from sidecar.profiles import ProfileOverrides, load_profile

QWEN2_VL_7B = "Qwen/Qwen2-VL-7B-Instruct"
QWEN25_VL_7B = "Qwen/Qwen2.5-VL-7B-Instruct"
CAPPED = ProfileOverrides(max_pixels=1_003_520)


def test_qwen2_vl_costs_66_prompt_tokens_for_224_square_image() -> None:
    cost = load_profile(QWEN2_VL_7B).vision.image_tokens(224, 224)
    assert (cost.tokens, cost.prompt_tokens) == (64, 66)


@pytest.mark.parametrize(
    ("size", "overrides", "tokens"),
    [
        ((1024, 1024), ProfileOverrides(), 1_369),
        ((3840, 2160), ProfileOverrides(), 10_549),
        ((4032, 3024), ProfileOverrides(), 15_552),
        ((1920, 1080), ProfileOverrides(), 2_691),
        ((4032, 3024), CAPPED, 1_230),
        ((1920, 1080), CAPPED, 1_222),
        ((512, 512), CAPPED, 324),
    ],
    ids=["1024sq", "4k", "12mp", "1080p", "12mp-capped", "1080p-capped", "512sq-capped"],
)
def test_qwen25_vl_tokens_match_the_brief_table(
    size: tuple[int, int], overrides: ProfileOverrides, tokens: int
) -> None:
    assert load_profile(QWEN25_VL_7B, overrides).vision.image_tokens(*size).tokens == tokens
