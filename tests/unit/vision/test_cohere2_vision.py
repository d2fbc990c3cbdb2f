"""Cohere2Vision (Command A Vision): a grid of 512 px tiles of least upscale, plus a thumbnail.

The figures are vLLM 0.33's (its count over transformers' Cohere2VisionImageProcessor, read in
the renderer tier: tests/renderer/test_new_families.py).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from sidecar.errors import ConfigurationError
from sidecar.profiles import ProfileOverrides, load_profile
from sidecar.vision.cohere2_vision import Cohere2VisionRule, optimal_grid
from tests.support.family_dirs import write_cohere2_vision_dir


@pytest.fixture(scope="module")
def cohere_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_cohere2_vision_dir(tmp_path_factory.mktemp("cohere2_vision"))


def rule(directory: Path, overrides: ProfileOverrides | None = None) -> Cohere2VisionRule:
    vision = load_profile(str(directory), overrides).vision.rule
    assert isinstance(vision, Cohere2VisionRule)
    return vision


@pytest.mark.parametrize(
    ("size", "tokens"),
    [
        ((1, 1), 259),  # one tile, upscaled: 2 + 256 + 1
        ((512, 512), 259),  # one tile at scale 1
        ((513, 512), 773),  # 2 x 1 at scale 1: two tiles + thumbnail
        ((640, 480), 773),  # 2 x 1, the least upscale (3 x 1 ties it later)
        ((1024, 512), 773),  # 2 x 1 and 2 x 2 both at scale 1: the first, fewer tiles
        ((6144, 512), 3343),  # 12 x 1 at scale 1
        ((3000, 3000), 2572),  # every grid downscales: 3 x 3, the least
        ((4000, 1000), 3343),  # every grid downscales: 6 x 2, the least
    ],
)
def test_counts_are_vllms(cohere_dir: Path, size: tuple[int, int], tokens: int) -> None:
    assert rule(cohere_dir).image_tokens(*size).tokens == tokens


def test_the_grid_follows_the_least_upscale_not_the_closest_aspect_ratio() -> None:
    # A 2:1 image of 1,100 x 550 px: 2 x 1, its aspect ratio, would need a downscale, so the
    # first grid that holds it without one wins: 3 x 2.
    assert optimal_grid(1100, 550, 512, 12) == (3, 2)
    assert optimal_grid(1024, 512, 512, 12) == (2, 1)


def test_the_template_adds_nothing_and_the_most_is_12_tiles_and_a_thumbnail(
    cohere_dir: Path,
) -> None:
    cohere = rule(cohere_dir)
    assert cohere.image_tokens(640, 480).wrapper_tokens == 0
    assert cohere.max_image_tokens().tokens == 2 + 13 * 257


def test_max_patches_and_crop_to_patches_are_the_knobs(cohere_dir: Path) -> None:
    six = rule(cohere_dir, ProfileOverrides(mm_processor_kwargs={"max_patches": 6}))
    # Every grid downscales; 4 x 1 as little as 5 x 1 and 6 x 1, and first: + thumbnail.
    assert six.image_tokens(4000, 1000).tokens == 2 + 5 * 257
    assert six.max_image_tokens().tokens == 2 + 7 * 257
    whole = rule(cohere_dir, ProfileOverrides(mm_processor_kwargs={"crop_to_patches": False}))
    assert whole.image_tokens(4000, 3000).tokens == whole.max_image_tokens().tokens == 259
    assert whole.downscale_candidates(4000, 3000) == []


def test_min_patches_is_accepted_and_changes_nothing(cohere_dir: Path) -> None:
    four = rule(cohere_dir, ProfileOverrides(mm_processor_kwargs={"min_patches": 4}))
    assert four.image_tokens(1, 1).tokens == 259


def test_the_checkpoints_max_patches_is_read(tmp_path: Path) -> None:
    cohere = rule(write_cohere2_vision_dir(tmp_path, max_patches=4))
    assert cohere.image_tokens(4000, 1000).tokens == 2 + 5 * 257  # 4 x 1 + thumbnail


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"images_kwargs": {"max_patches": 6}}, "images_kwargs"),  # vLLM's count ignores it
        ({"size": {"height": 384, "width": 384}}, "size"),
        ({"patch_size": 8}, "patch_size"),  # vLLM's own count fails on it
        ({"max_patches": 0}, "max_patches"),  # the processor then has no grid
        ({"max_patches": "6"}, "max_patches"),
        ({"crop_to_patches": "yes"}, "crop_to_patches"),
    ],
)
def test_what_is_not_priced_stops_start_up(
    cohere_dir: Path, kwargs: dict[str, object], match: str
) -> None:
    with pytest.raises(ConfigurationError, match=match):
        rule(cohere_dir, ProfileOverrides(mm_processor_kwargs=kwargs))


def test_a_count_neutral_knob_passes(cohere_dir: Path) -> None:
    assert rule(cohere_dir, ProfileOverrides(mm_processor_kwargs={"do_rescale": True}))


def test_a_non_square_tile_is_refused(tmp_path: Path) -> None:
    directory = write_cohere2_vision_dir(tmp_path, size={"height": 512, "width": 384})
    with pytest.raises(ConfigurationError, match="square"):
        load_profile(str(directory))


def test_a_downscale_lands_within_the_budget(cohere_dir: Path) -> None:
    cohere = rule(cohere_dir)
    size = cohere.downscale_size(4000, 3000, max_tokens=1500, max_pixels=None)
    assert cohere.image_tokens(*size).tokens <= 1500
    assert size[0] <= 4000
    assert size[1] <= 3000
