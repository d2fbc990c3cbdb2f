"""Molmo 2: a low-res view and overlapping crops, pooled, with column and frame tokens.

The figures are vLLM 0.33's (its get_image_replacement_molmo2 over transformers' Molmo2
processor, read in the renderer tier: tests/renderer/test_new_families.py).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from sidecar.errors import ConfigurationError
from sidecar.profiles import ProfileOverrides, load_profile
from sidecar.vision.molmo2 import Molmo2Rule, MolmoRule, candidate_tilings, select_tiling
from tests.support.family_dirs import write_molmo2_dir, write_molmo_dir


@pytest.fixture(scope="module")
def molmo_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_molmo2_dir(tmp_path_factory.mktemp("molmo2"))


def rule(directory: Path, **kwargs: Any) -> Molmo2Rule:
    vision = load_profile(str(directory), ProfileOverrides(mm_processor_kwargs=kwargs)).vision.rule
    assert isinstance(vision, Molmo2Rule)
    return vision


@pytest.mark.parametrize(
    ("size", "tokens"),
    [
        ((1, 1), 424),  # one crop: 2 + 14 x 15 for each view
        ((900, 3), 424),  # still one crop: every grid needs a downscale of the margins' side
        ((640, 480), 766),  # 2 x 3 crops
        ((113, 400), 559),
        ((4032, 3024), 996),  # 2 x 4 crops
    ],
)
def test_counts_are_vllms(molmo_dir: Path, size: tuple[int, int], tokens: int) -> None:
    counted = rule(molmo_dir).image_tokens(*size)
    assert (counted.tokens, counted.wrapper_tokens) == (tokens, 0)


@pytest.mark.parametrize(
    ("kwargs", "size", "tokens"),
    [
        ({"max_crops": 4}, (4032, 3024), 766),
        ({"overlap_margins": [2, 2]}, (640, 480), 864),
        ({"overlap_margins": [2, 2]}, (4032, 3024), 1164),
        ({"image_use_col_tokens": False}, (640, 480), 729),  # no column token in either view
        ({"use_single_crop_col_tokens": False}, (640, 480), 752),  # none in the low-res view
        ({"use_single_crop_start_token": False}, (640, 480), 766),  # another id, as many
        ({"pooling_size": [3, 3]}, (640, 480), 366),
    ],
)
def test_the_knobs_change_the_count_as_in_vllm(
    molmo_dir: Path, kwargs: dict[str, Any], size: tuple[int, int], tokens: int
) -> None:
    assert rule(molmo_dir, **kwargs).image_tokens(*size).tokens == tokens


def test_the_costliest_image_is_a_column_of_crops(molmo_dir: Path) -> None:
    molmo = rule(molmo_dir)
    assert molmo.max_image_tokens().tokens == 1414  # 8 rows x 1 column of crops
    assert molmo.image_tokens(378, 8 * 266 + 112).tokens == 1414
    assert rule(molmo_dir, max_crops=4).max_image_tokens().tokens == 844


def test_the_processor_config_sets_the_column_tokens(tmp_path: Path) -> None:
    directory = write_molmo2_dir(tmp_path, processor={"use_single_crop_col_tokens": False})
    assert rule(directory).image_tokens(640, 480).tokens == 752


def test_ties_go_to_the_fewest_crops_then_rows() -> None:
    tilings = candidate_tilings(8)
    assert tilings[:3] == [(1, 1), (1, 2), (2, 1)]
    # The margins' side exactly: one crop needs no scaling, and neither do the wider grids'.
    assert select_tiling(266, 266, 266, tilings) == (1, 1)
    assert select_tiling(0, 0, 266, tilings) == (1, 1)  # no side left: every scale infinite
    assert select_tiling(266, 532, 266, tilings) == (1, 2)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"images_kwargs": {"max_crops": 4}},  # vLLM's count reads the top level only
        {"size": {"height": 336, "width": 336}},  # reaches the processor's call alone
        {"patch_size": 16},
        {"do_resize": False},
        {"max_crops": 0},
        {"overlap_margins": [14, 13]},  # no window left in a crop of 27 patches
    ],
)
def test_what_is_not_priced_is_refused_at_start(molmo_dir: Path, kwargs: dict[str, Any]) -> None:
    with pytest.raises(ConfigurationError):
        rule(molmo_dir, **kwargs)


def test_a_downscale_lands_within_the_budget(molmo_dir: Path) -> None:
    molmo = rule(molmo_dir)
    size = molmo.downscale_size(4032, 3024, max_tokens=600, max_pixels=None)
    assert molmo.image_tokens(*size).tokens <= 600
    assert size[0] <= 4032
    assert size[1] <= 3024


# -- Molmo ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def molmo1_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_molmo_dir(tmp_path_factory.mktemp("molmo"))


def molmo1(directory: Path, **kwargs: Any) -> MolmoRule:
    vision = load_profile(str(directory), ProfileOverrides(mm_processor_kwargs=kwargs)).vision.rule
    assert isinstance(vision, MolmoRule)
    return vision


@pytest.mark.parametrize(
    ("size", "tokens"),
    [
        ((1, 1), 316),  # one crop: 2 + 13 x 12 for each view
        ((900, 3), 316),
        ((640, 480), 740),
        ((113, 400), 420),
        ((4032, 3024), 1196),
    ],
)
def test_molmo_counts_are_vllms(molmo1_dir: Path, size: tuple[int, int], tokens: int) -> None:
    counted = molmo1(molmo1_dir).image_tokens(*size)
    assert (counted.tokens, counted.wrapper_tokens) == (tokens, 0)
    assert molmo1(molmo1_dir).max_image_tokens().tokens == 1460


def test_molmo_reads_the_image_processor_file(tmp_path: Path) -> None:
    directory = write_molmo_dir(tmp_path, max_crops=1)
    assert molmo1(directory).image_tokens(4032, 3024).tokens == 316


@pytest.mark.parametrize(
    "kwargs", [{"max_crops": 4}, {"do_rescale": False}, {"max_pixels": 200704}]
)
def test_molmo_refuses_every_kwarg(molmo1_dir: Path, kwargs: dict[str, Any]) -> None:
    with pytest.raises(ConfigurationError):
        molmo1(molmo1_dir, **kwargs)
