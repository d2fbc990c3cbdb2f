"""vision.idefics3: Idefics3 and SmolVLM's longest-edge resize and crops, on worked numbers
that transformers' processors give (``tests/oracle/test_vision_oracle_tiles.py`` checks every
size)."""

from __future__ import annotations

import pytest

from sidecar.profiles import load_profile
from sidecar.vision.idefics3 import SplitImageRule, resize_to_longest_edge
from tests.support.vision_rules import check_rule_contract

IDEFICS3 = load_profile("HuggingFaceM4/Idefics3-8B-Llama3").vision
SMOLVLM = load_profile("HuggingFaceTB/SmolVLM2-2.2B-Instruct").vision


@pytest.mark.parametrize(
    ("height", "width", "longest", "resized"),
    [(480, 640, 1456, (1092, 1456)), (1000, 333, 1456, (1456, 484)),
     (100, 100, 1456, (1456, 1456)), (3, 9000, 5000, (1, 4096))],
    ids=["landscape", "portrait", "grown", "capped-at-4096"],
)  # fmt: skip
def test_resize_to_longest_edge_gives_transformers_size(
    height: int, width: int, longest: int, resized: tuple[int, int]
) -> None:
    assert resize_to_longest_edge(height, width, longest) == resized


@pytest.mark.parametrize(
    ("rule", "size", "tokens"),
    [
        (IDEFICS3, (640, 480), 2227),
        (IDEFICS3, (1920, 1080), 2227),
        (IDEFICS3, (333, 1000), 1544),
        (IDEFICS3, (100, 100), 2912),
        (SMOLVLM, (640, 480), 1083),
        (SMOLVLM, (333, 1000), 752),
        (SMOLVLM, (100, 100), 1416),
    ],
    ids=lambda value: "x".join(map(str, value)) if isinstance(value, tuple) else None,
)
def test_split_image_rule_counts_what_the_processor_counts(
    rule: SplitImageRule, size: tuple[int, int], tokens: int
) -> None:
    assert rule.image_tokens(*size).tokens == tokens


@pytest.mark.parametrize("rule", [IDEFICS3, SMOLVLM], ids=["idefics3", "smolvlm"])
def test_split_image_rule_keeps_the_vision_rule_contract(rule: SplitImageRule) -> None:
    check_rule_contract(rule)
