"""vision.llama4: Llama 4's canvases of tiles, on worked numbers that transformers' processor
gives (``tests/oracle/test_vision_oracle_tiles.py`` checks every size)."""

from __future__ import annotations

import pytest

from sidecar.profiles import load_profile
from sidecar.vision.llama4 import Llama4Rule, best_canvas, supported_canvases
from tests.support.vision_rules import check_rule_contract

SCOUT = load_profile("meta-llama/Llama-4-Scout-17B-16E-Instruct").vision


def test_supported_canvases_are_every_grid_of_at_most_the_tiles() -> None:
    canvases = supported_canvases(16, 336)
    grids = {(height // 336, width // 336) for height, width in canvases}
    assert all(height % 336 == 0 and width % 336 == 0 for height, width in canvases)
    assert grids == {(h, w) for h in range(1, 17) for w in range(1, 17) if h * w <= 16}
    assert len(canvases) == len(grids) == 50  # the divisor counts of 1..16, summed


def test_best_canvas_upscales_to_the_smallest_canvas_that_holds_the_image() -> None:
    canvases = supported_canvases(16, 336)
    assert best_canvas(300, 300, canvases, resize_to_max_canvas=False) == (336, 336)
    assert best_canvas(300, 600, canvases, resize_to_max_canvas=False) == (336, 672)
    # Too large for any canvas: the one that shrinks it least.
    height, width = best_canvas(10_000, 10_000, canvases, resize_to_max_canvas=False)
    assert (height, width) == (1344, 1344)


@pytest.mark.parametrize(
    ("size", "tokens"),
    [((640, 480), 727), ((1920, 1080), 2322), ((333, 1000), 582), ((100, 100), 147)],
    ids=["vga", "full-hd", "tall", "tiny"],
)
def test_llama4_rule_counts_what_the_processor_counts(size: tuple[int, int], tokens: int) -> None:
    assert SCOUT.image_tokens(*size).tokens == tokens


def test_llama4_rule_keeps_the_vision_rule_contract() -> None:
    assert isinstance(SCOUT.rule, Llama4Rule)  # behind vLLM's decode limit
    check_rule_contract(SCOUT)
