"""What every vision rule promises, checked the same way for each family's unit tests.

The exact counts are the oracle tier's (``tests/oracle``: every size against transformers'
processors); these are the properties any pricing or downscale relies on.
"""

from __future__ import annotations

from sidecar.errors import UnsupportedImageSizeError
from sidecar.vision import VisionRule

SIZES = [(1, 1), (28, 28), (100, 100), (333, 1000), (640, 480), (1920, 1080), (4032, 3024)]


def check_rule_contract(rule: VisionRule, sizes: list[tuple[int, int]] = SIZES) -> None:
    """No size costs more than ``max_image_tokens``; a downscale keeps within the original
    and fits both caps; the rule names its family in its description."""
    most = rule.max_image_tokens().tokens
    for width, height in sizes:
        try:
            tokens = rule.image_tokens(width, height).tokens
        except UnsupportedImageSizeError:
            continue
        assert 0 < tokens <= most, (width, height, tokens, most)
        cap = max(1, tokens // 2)
        try:
            new_width, new_height = rule.downscale_size(
                width, height, max_tokens=cap, max_pixels=None
            )
        except UnsupportedImageSizeError:
            continue  # no smaller size of this family costs so little
        assert new_width <= width
        assert new_height <= height
        assert rule.image_tokens(new_width, new_height).tokens <= cap
        assert rule.downscale_size(width, height, max_tokens=None, max_pixels=None) == (
            width,
            height,
        )
    assert rule.describe()
