"""H2OVL: InternVL chat's tiles, or MSAC's two passes for a lone image, priced at the larger.

The figures are vLLM 0.33's (read from its processor in the renderer tier:
tests/renderer/test_new_families.py).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from sidecar.errors import ConfigurationError
from sidecar.profiles import ProfileOverrides, load_profile
from sidecar.vision.h2ovl import H2OVLRule, second_pass_ratios
from sidecar.vision.internvl_chat import InternVLChatRule
from tests.support.family_dirs import write_h2ovl_dir

TILE = 256


def rule(directory: Path, overrides: ProfileOverrides | None = None) -> H2OVLRule:
    vision = load_profile(str(directory), overrides).vision.rule
    assert isinstance(vision, H2OVLRule)
    return vision


def knobs(**values: Any) -> ProfileOverrides:
    return ProfileOverrides(mm_processor_kwargs=values)


@pytest.fixture(scope="module")
def h2ovl(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_h2ovl_dir(tmp_path_factory.mktemp("h2ovl"))


@pytest.mark.parametrize(
    ("size", "tokens"),
    [
        ((1, 1), 2 + TILE * 5),  # 1 x 1, then 2 x 2 + thumbnail: 1 + 5 - 1
        ((640, 480), 2 + TILE * 13),  # 3 x 2 + thumbnail, then 2 x 3 + thumbnail: 7 + 7 - 1
        ((2000, 500), 2 + TILE * 11),  # vLLM's count for a lone image
    ],
)
def test_a_lone_images_count_is_vllms(h2ovl: Path, size: tuple[int, int], tokens: int) -> None:
    assert rule(h2ovl).image_tokens(*size).tokens == tokens


def test_beside_other_images_vllm_tiles_once_and_the_price_is_not_lower(h2ovl: Path) -> None:
    h2o = rule(h2ovl)
    assert InternVLChatRule.tiles(h2o, 640, 480) == 7  # vLLM's count beside other images
    assert h2o.tiles(640, 480) == 13


def test_the_second_pass_skips_the_first_passs_divisors() -> None:
    assert second_pass_ratios((1, 1), 6) == [(2, 2), (2, 3), (3, 2)]
    assert (3, 2) not in second_pass_ratios((3, 2), 6)


@pytest.mark.parametrize(
    ("overrides", "size", "tokens"),
    [
        (knobs(use_msac=False), (640, 480), 2 + TILE * 7),
        (knobs(use_msac=False), (1, 1), 2 + TILE),
        (knobs(max_dynamic_patch=12, use_thumbnail=False), (640, 480), 2 + TILE * 19),
        (knobs(min_dynamic_patch=4), (1, 1), 2 + TILE * 5),
    ],
)
def test_the_knobs(
    h2ovl: Path, overrides: ProfileOverrides, size: tuple[int, int], tokens: int
) -> None:
    assert rule(h2ovl, overrides).image_tokens(*size).tokens == tokens


def test_any_other_kwarg_fails_vllms_constructor_so_start_up_stops(h2ovl: Path) -> None:
    with pytest.raises(ConfigurationError, match="sets do_rescale"):
        load_profile(str(h2ovl), knobs(do_rescale=True))


def test_the_most_an_image_costs_bounds_every_size(h2ovl: Path) -> None:
    h2o = rule(h2ovl)
    most = h2o.max_image_tokens().tokens
    for size in ((1, 1), (640, 480), (4000, 300), (300, 4000), (2000, 500), (13377, 13377)):
        assert h2o.image_tokens(*size).tokens <= most


def test_a_downscale_lands_on_a_smaller_grid(h2ovl: Path) -> None:
    h2o = rule(h2ovl)
    size = h2o.downscale_size(4032, 3024, max_tokens=2 + TILE * 9, max_pixels=None)
    assert h2o.image_tokens(*size).tokens <= 2 + TILE * 9
