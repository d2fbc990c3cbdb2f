"""ERNIE-4.5-VL: Qwen2-VL's smart_resize (28 px) within the remote processor's image bounds.

The figures are vLLM 0.33's prompt count (read in the renderer tier over a stand-in for the
remote processor: tests/renderer/test_new_families.py).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from sidecar.errors import ConfigurationError, UnsupportedImageSizeError
from sidecar.profiles import ProfileOverrides, load_profile
from sidecar.vision.ernie45_vl import Ernie45VLRule
from tests.support.family_dirs import write_ernie45_vl_dir


@pytest.fixture(scope="module")
def ernie_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_ernie45_vl_dir(tmp_path_factory.mktemp("ernie45_vl"))


def rule(directory: Path, overrides: ProfileOverrides | None = None) -> Ernie45VLRule:
    vision = load_profile(str(directory), overrides).vision.rule
    assert isinstance(vision, Ernie45VLRule)
    return vision


@pytest.mark.parametrize(
    ("size", "tokens"),
    [
        ((640, 480), 391),  # 644 x 476 px: 23 x 17 cells of 28 px
        ((1, 1), 4),  # raised to the 3,136 px minimum: 2 x 2 cells
        ((3, 500), 26),  # a side rounded to no cells, then raised: 1 x 26 cells
        ((4000, 4000), 6084),  # floored under 4,842,768 px: 78 x 78 cells
    ],
)
def test_counts_are_vllms(ernie_dir: Path, size: tuple[int, int], tokens: int) -> None:
    priced = rule(ernie_dir).image_tokens(*size)
    assert (priced.tokens, priced.wrapper_tokens) == (tokens, 2)


def test_an_image_over_200_to_1_is_refused(ernie_dir: Path) -> None:
    # vLLM's own profiling count clamps such an image; the remote processor raises.
    with pytest.raises(UnsupportedImageSizeError, match="aspect ratio"):
        rule(ernie_dir).image_tokens(10, 5000)


def test_the_most_an_image_costs_is_the_maximum_in_cells(ernie_dir: Path) -> None:
    assert rule(ernie_dir).max_image_tokens().tokens == 6177


@pytest.mark.parametrize(
    ("kwargs", "tokens"),
    [
        ({"image_max_pixels": 200704}, 256),
        ({"image_min_pixels": 200704, "image_max_pixels": 1003520}, 1225),
    ],
)
def test_the_processors_image_bounds_are_priced_from_the_kwargs(
    ernie_dir: Path, kwargs: dict[str, object], tokens: int
) -> None:
    priced = rule(ernie_dir, ProfileOverrides(mm_processor_kwargs=kwargs))
    assert priced.image_tokens(4000, 4000).tokens == tokens


def test_the_bounds_in_processor_config_json_are_read(tmp_path: Path) -> None:
    directory = write_ernie45_vl_dir(tmp_path, processor={"image_max_pixels": 200704})
    assert rule(directory).image_tokens(4000, 4000).tokens == 256


def test_bounds_in_preprocessor_config_json_do_not_reach_the_processor(tmp_path: Path) -> None:
    directory = write_ernie45_vl_dir(tmp_path, image_max_pixels=200704, max_pixels=200704)
    assert rule(directory).image_tokens(4000, 4000).tokens == 6084


@pytest.mark.parametrize(
    "kwargs",
    [
        {"max_pixels": 200704},
        {"do_rescale": True},
        {"spatial_conv_size": 1},
        {"images_kwargs": {"image_max_pixels": 200704}},
    ],
)
def test_other_kwargs_are_refused_at_start_up(ernie_dir: Path, kwargs: dict[str, object]) -> None:
    with pytest.raises(ConfigurationError, match="ernie45_vl"):
        load_profile(str(ernie_dir), ProfileOverrides(mm_processor_kwargs=kwargs))


def test_a_merge_size_other_than_the_resamplers_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="spatial_conv_size"):
        load_profile(str(write_ernie45_vl_dir(tmp_path, merge_size=1)))
