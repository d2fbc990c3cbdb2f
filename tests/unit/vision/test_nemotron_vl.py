"""Llama-Nemotron-Nano-VL: InternVL chat's replacement over its own size-weighted grid choice.

The figures are vLLM 0.33's (read from its processor in the renderer tier:
tests/renderer/test_new_families.py).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from sidecar.errors import ConfigurationError
from sidecar.profiles import ProfileOverrides, load_profile
from sidecar.vision.internvl_chat import closest_grid as internvl_grid
from sidecar.vision.internvl_chat import target_ratios
from sidecar.vision.nemotron_vl import NemotronVLRule, closest_grid
from tests.support.family_dirs import write_nemotron_vl_dir

TILE = 256  # (512 // 16)**2 / 4


def rule(directory: Path, overrides: ProfileOverrides | None = None) -> NemotronVLRule:
    vision = load_profile(str(directory), overrides).vision.rule
    assert isinstance(vision, NemotronVLRule)
    return vision


def knobs(**values: Any) -> ProfileOverrides:
    return ProfileOverrides(mm_processor_kwargs=values)


@pytest.fixture(scope="module")
def nemotron(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_nemotron_vl_dir(tmp_path_factory.mktemp("nemotron"))


@pytest.mark.parametrize(
    ("size", "tokens"),
    [
        ((1, 1), 2 + TILE),  # one tile, no thumbnail
        ((3, 900), 2 + TILE * 13),  # 1 x 12 + thumbnail: the size factor is capped at 0.6
        ((2669, 1555), 2 + TILE * 13),  # 4 x 3, where InternVL's aspect-only choice is 3 x 2
        ((640, 480), 2 + TILE * 13),  # 4 x 3 + thumbnail
    ],
)
def test_counts_are_vllms(nemotron: Path, size: tuple[int, int], tokens: int) -> None:
    assert rule(nemotron).image_tokens(*size).tokens == tokens


def test_the_grid_weighs_size_where_internvl_weighs_aspect_only() -> None:
    ratios = target_ratios(1, 12)
    assert internvl_grid(2669, 1555, ratios, 512) == (3, 2)
    assert closest_grid(2669, 1555, ratios, 512) == (4, 3)


@pytest.mark.parametrize(
    ("overrides", "size", "tokens"),
    [
        (knobs(max_num_tiles=6), (640, 480), 2 + TILE * 7),
        (knobs(use_thumbnail=False, image_size=448), (640, 480), 2 + 196 * 12),
        # the tiling call's kwargs reach the tiles the placeholder is built from
        (knobs(max_dynamic_patch=6), (640, 480), 2 + TILE * 7),
        (knobs(min_dynamic_patch=4), (1, 1), 2 + TILE * 5),
        (knobs(dynamic_image_size=False), (640, 480), 2 + TILE),
        (knobs(do_rescale=True), (640, 480), 2 + TILE * 13),  # count-neutral
    ],
)
def test_the_knobs(
    nemotron: Path, overrides: ProfileOverrides, size: tuple[int, int], tokens: int
) -> None:
    assert rule(nemotron, overrides).image_tokens(*size).tokens == tokens


def test_the_processor_files_values_are_read(tmp_path: Path) -> None:
    four = rule(write_nemotron_vl_dir(tmp_path, max_num_tiles=4))
    assert four.max_image_tokens().tokens == 2 + TILE * 5


def test_a_value_only_the_remote_class_knows_is_refused(tmp_path: Path) -> None:
    directory = write_nemotron_vl_dir(tmp_path)
    path = directory / "preprocessor_config.json"
    values = json.loads(path.read_text())
    del values["max_num_tiles"]
    path.write_text(json.dumps(values))
    with pytest.raises(ConfigurationError, match="has no max_num_tiles"):
        load_profile(str(directory))


def test_an_unpriced_knob_stops_start_up(nemotron: Path) -> None:
    with pytest.raises(ConfigurationError, match="sets max_patches"):
        load_profile(str(nemotron), knobs(max_patches=6))


def test_a_downscale_lands_on_a_smaller_grid(nemotron: Path) -> None:
    nemotron_rule = rule(nemotron)
    size = nemotron_rule.downscale_size(4032, 3024, max_tokens=2 + TILE * 7, max_pixels=None)
    assert nemotron_rule.image_tokens(*size).tokens <= 2 + TILE * 7
    assert size[0] <= 4032
    assert size[1] <= 3024
