"""LFM2-VL: a smart_resize thumbnail, and 512 px tiles for a large image.

The figures are vLLM 0.33's (its get_image_repl over transformers' processor, in the renderer
tier: tests/renderer/test_new_families.py).
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from sidecar.errors import ConfigurationError, UnsupportedImageSizeError
from sidecar.profiles import ProfileOverrides, load_profile
from sidecar.vision.lfm2_vl import Lfm2VlRule
from tests.support.family_dirs import write_lfm2_vl_dir

KNOBS = {"min_image_tokens": 32, "max_image_tokens": 128, "max_tiles": 4}


@pytest.fixture(scope="module")
def lfm2_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_lfm2_vl_dir(tmp_path_factory.mktemp("lfm2_vl"))


def rule(directory: Path, knobs: dict[str, object] | None = None) -> Lfm2VlRule:
    vision = load_profile(str(directory), ProfileOverrides(mm_processor_kwargs=knobs or {}))
    assert isinstance(vision.vision.rule, Lfm2VlRule)
    return vision.vision.rule


@pytest.mark.parametrize(
    ("size", "tokens"),
    [
        ((1, 1), 66),  # raised to the 64-token minimum: 2 + 64
        ((640, 480), 236),  # kept whole, scaled under 256 tokens to 576 x 416: 2 + 18 x 13
        ((1024, 1024), 1287),  # 2 x 2 tiles: 3 + 4 x 257 + 256
        ((4000, 3000), 1779),  # 3 x 2 tiles (closest to 4:3 within 10) and the thumbnail
        ((1, 4000), 127),  # kept whole: its thumbnail raised to 32 px wide, 125 tokens
        ((1, 32784), 2899),  # the costliest: the thinnest image still kept whole
        ((178956, 1000), 2787),  # 10 x 1 tiles
    ],
)
def test_counts_are_vllms(lfm2_dir: Path, size: tuple[int, int], tokens: int) -> None:
    assert rule(lfm2_dir).image_tokens(*size).tokens == tokens


@pytest.mark.parametrize("size", [(20, 30000), (1, 32785)])
def test_a_tiled_image_whose_thumbnail_outgrows_a_tile_is_refused(
    lfm2_dir: Path, size: tuple[int, int]
) -> None:
    with pytest.raises(UnsupportedImageSizeError, match="cannot stack"):
        rule(lfm2_dir).image_tokens(*size)


def test_the_maximum_bounds_every_size(lfm2_dir: Path) -> None:
    lfm2 = rule(lfm2_dir)
    rng = random.Random(7)
    accepted = []
    for _ in range(5000):
        size = (round(16384 ** rng.random()), round(16384 ** rng.random()))
        try:
            accepted.append(lfm2.image_tokens(*size).tokens)
        except UnsupportedImageSizeError:
            continue
    assert max(accepted) <= lfm2.max_image_tokens().tokens == 2899


def test_the_knobs_reach_the_count(lfm2_dir: Path) -> None:
    lfm2 = rule(lfm2_dir, KNOBS)
    assert lfm2.image_tokens(640, 480).tokens == 1148  # now over 2 x 128 tokens: 2 x 2 tiles
    assert lfm2.image_tokens(1, 1).tokens == 38
    assert lfm2.max_image_tokens().tokens == 1450


@pytest.mark.parametrize(
    "knobs",
    [
        {"do_image_splitting": False},
        {"use_thumbnail": False},
        {"encoder_patch_size": 14},
        {"downsample_factor": 4},
    ],
)
def test_knobs_vllms_grid_ignores_are_not_priced(lfm2_dir: Path, knobs: dict[str, object]) -> None:
    with pytest.raises(ConfigurationError, match="cannot price"):
        load_profile(str(lfm2_dir), ProfileOverrides(mm_processor_kwargs=knobs))


def test_a_knob_under_images_kwargs_is_refused_as_vllms_count_misses_it(lfm2_dir: Path) -> None:
    knobs = {"images_kwargs": {"tile_size": 384}}
    with pytest.raises(ConfigurationError, match="tile_size under images_kwargs"):
        load_profile(str(lfm2_dir), ProfileOverrides(mm_processor_kwargs=knobs))
    assert rule(lfm2_dir, {"tile_size": 384}).tile_tokens == 144


def test_a_checkpoint_without_splitting_is_not_priced(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="do_image_splitting"):
        load_profile(str(write_lfm2_vl_dir(tmp_path, do_image_splitting=False)))


def test_a_downscale_fits_the_budget(lfm2_dir: Path) -> None:
    lfm2 = rule(lfm2_dir)
    for budget in (300, 1000):
        width, height = lfm2.downscale_size(4000, 3000, max_tokens=budget, max_pixels=None)
        assert lfm2.image_tokens(width, height).tokens <= budget
