"""vision.anyres: LLaVA-NeXT and LLaVA-OneVision's tile grids, on worked numbers that
transformers' processors give (``tests/oracle/test_vision_oracle_tiles.py`` checks every size)."""

from __future__ import annotations

from pathlib import Path

import pytest

from sidecar.profiles import load_profile
from sidecar.vision.anyres import AnyresRule, costliest_image, select_best_resolution
from tests.support.family_dirs import write_granite4_vision_dir
from tests.support.vision_rules import check_rule_contract

LLAVA_NEXT = load_profile("llava-hf/llava-v1.6-mistral-7b-hf").vision
ONEVISION = load_profile("llava-hf/llava-onevision-qwen2-7b-ov-hf").vision
NEXT_PINPOINTS = ((336, 672), (672, 336), (672, 672), (1008, 336), (336, 1008))


@pytest.mark.parametrize(
    ("height", "width", "pinpoint"),
    [(480, 640, (672, 672)), (1080, 1920, (672, 672)), (1000, 333, (1008, 336)),
     (100, 100, (336, 672))],
    ids=["vga", "full-hd", "tall", "tiny"],
)  # fmt: skip
def test_select_best_resolution_picks_the_pinpoint_transformers_picks(
    height: int, width: int, pinpoint: tuple[int, int]
) -> None:
    assert select_best_resolution(height, width, NEXT_PINPOINTS) == pinpoint


@pytest.mark.parametrize(
    ("rule", "size", "tokens"),
    [
        (LLAVA_NEXT, (640, 480), 2340),
        (LLAVA_NEXT, (1920, 1080), 1948),
        (LLAVA_NEXT, (333, 1000), 2376),
        (LLAVA_NEXT, (100, 100), 1176),
        (ONEVISION, (640, 480), 2929),
        (ONEVISION, (1920, 1080), 7269),
        (ONEVISION, (333, 1000), 2997),
        (ONEVISION, (100, 100), 1485),
    ],
    ids=lambda value: "x".join(map(str, value)) if isinstance(value, tuple) else None,
)
def test_anyres_rule_counts_what_the_processor_counts(
    rule: AnyresRule, size: tuple[int, int], tokens: int
) -> None:
    assert rule.image_tokens(*size).tokens == tokens


@pytest.mark.parametrize("rule", [LLAVA_NEXT, ONEVISION], ids=["llava-next", "onevision"])
def test_anyres_rule_keeps_the_vision_rule_contract(rule: AnyresRule) -> None:
    check_rule_contract(rule)


@pytest.mark.parametrize("rule", [LLAVA_NEXT, ONEVISION], ids=["llava-next", "onevision"])
def test_costliest_image_is_the_rules_maximum(rule: AnyresRule) -> None:
    tokens, (width, height) = costliest_image(rule)
    assert tokens == rule.max_image_tokens().tokens
    assert rule.image_tokens(width, height).tokens == tokens


# Granite 4 Vision: vLLM 0.33's figures (tests/renderer/test_new_families.py).
@pytest.mark.parametrize(
    ("rate", "size", "tokens"),
    [
        ("4/8", (1, 1), 300),  # 12 x 12 base + one 12 x 12 tile and its 12 newlines
        ("4/8", (640, 480), 594),
        ("4/8", (3, 900), 180),
        ("4/8", (900, 3), 144),
        ("4/8", (2000, 1000), 1320),
        ("1/4", (640, 480), 166),
    ],
)
def test_granite4_vision_counts_on_the_pooled_grid(
    tmp_path: Path, rate: str, size: tuple[int, int], tokens: int
) -> None:
    directory = write_granite4_vision_dir(tmp_path, downsample_rate=rate)
    assert load_profile(str(directory)).vision.image_tokens(*size).tokens == tokens
