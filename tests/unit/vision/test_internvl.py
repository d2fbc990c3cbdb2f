"""vision.internvl: InternVL3 tiles, and the downscale that cannot go below one tile.

Every size against transformers' own processor: ``tests/oracle/test_vision_oracle_tiles.py``.
"""

from __future__ import annotations

import pytest

from sidecar.errors import UnsupportedImageSizeError
from sidecar.profiles import load_profile

INTERNVL = "OpenGVLab/InternVL3-8B-hf"


def test_downscale_size_refuses_a_cap_below_the_cheapest_grid() -> None:
    with pytest.raises(UnsupportedImageSizeError, match="cannot be downscaled to 256 tokens"):
        load_profile(INTERNVL).vision.downscale_size(800, 600, max_tokens=256, max_pixels=None)
