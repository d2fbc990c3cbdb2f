"""vision.fixed: LLaVA-1.5 and PaliGemma cost the same for every image, as the design brief says.

Every size against transformers' own processor: ``tests/oracle/test_vision_oracle.py``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from sidecar.profiles import load_profile
from tests.support.family_dirs import write_paligemma_dir

LLAVA_15_7B = "llava-hf/llava-1.5-7b-hf"


@pytest.mark.parametrize("size", [(1, 1), (336, 336), (4032, 3024), (100, 9000)], ids=str)
def test_llava_15_costs_576_tokens_for_any_image_size(size: tuple[int, int]) -> None:
    assert load_profile(LLAVA_15_7B).vision.image_tokens(*size).tokens == 576


# PaliGemma: vLLM 0.33's figures (tests/renderer/test_new_families.py).
@pytest.mark.parametrize(
    ("image_size_px", "version", "tokens"),
    [(224, 1, 257), (448, 2, 1025), (896, 2, 4097)],  # (side / 14)**2 <image> + <bos>
)
@pytest.mark.parametrize("size", [(1, 1), (640, 480), (3, 900), (16384, 2)], ids=str)
def test_paligemma_costs_its_siglip_grid_and_bos_for_any_size(
    tmp_path: Path, image_size_px: int, version: int, tokens: int, size: tuple[int, int]
) -> None:
    directory = write_paligemma_dir(tmp_path, image_size_px=image_size_px, version=version)
    cost = load_profile(str(directory)).vision.image_tokens(*size)
    # The newline vLLM appends to a prompt not already ending with one: never priced low.
    assert (cost.tokens, cost.wrapper_tokens) == (tokens, 1)


def test_paligemma_max_is_its_one_cost(tmp_path: Path) -> None:
    vision = load_profile(str(write_paligemma_dir(tmp_path))).vision
    assert vision.max_image_tokens().prompt_tokens == 258
