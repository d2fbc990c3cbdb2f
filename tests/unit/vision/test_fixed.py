"""vision.fixed: LLaVA-1.5 costs the same for every image, as the design brief says.

Every size against transformers' own processor: ``tests/oracle/test_vision_oracle.py``.
"""

from __future__ import annotations

import pytest

from sidecar.profiles import load_profile

LLAVA_15_7B = "llava-hf/llava-1.5-7b-hf"


@pytest.mark.parametrize("size", [(1, 1), (336, 336), (4032, 3024), (100, 9000)], ids=str)
def test_llava_15_costs_576_tokens_for_any_image_size(size: tuple[int, int]) -> None:
    assert load_profile(LLAVA_15_7B).vision.image_tokens(*size).tokens == 576
