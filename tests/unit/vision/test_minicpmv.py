"""MiniCPM-V 2.6 / 4.0 / 4.5, MiniCPM-o 2.6: a source image and up to max_slice_nums slices.

The figures are vLLM 0.33's (its prompt update over a stand-in for the checkpoint's remote
image processor, read in the renderer tier: tests/renderer/test_new_families.py).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sidecar.errors import ConfigurationError
from sidecar.profiles import ProfileOverrides, load_profile
from sidecar.profiles.architectures import Support
from sidecar.vision import at_index
from sidecar.vision.engine_only import EngineOnlyRule
from sidecar.vision.minicpmv import MiniCPMVRule
from sidecar.vision.minicpmv4_6 import sliced_grid
from tests.support.family_dirs import write_json, write_minicpmv_dir


@pytest.fixture(scope="module")
def v26_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_minicpmv_dir(tmp_path_factory.mktemp("minicpmv2_6"))


def rule(directory: Path, **kwargs: object) -> MiniCPMVRule:
    overrides = ProfileOverrides(mm_processor_kwargs=kwargs)
    vision = load_profile(str(directory), overrides).vision.rule
    assert isinstance(vision, MiniCPMVRule)
    return vision


@pytest.mark.parametrize(
    ("size", "tokens"),
    [
        ((1, 1), 69),  # no slices: 5 markup tokens + 64
        ((448, 448), 69),
        ((640, 480), 201),  # 1 column of 2 rows: 69 + 2 x (2 + 64) + 1 newline
        ((3000, 1000), 598),  # 2 rows of 4: 69 + 8 x 66 + 1
        ((2000, 3000), 600),  # 4 rows of 2: 69 + 8 x 66 + 3
        ((1, 4000), 69),  # under 448² px: unsliced, whatever its shape
    ],
)
def test_counts_are_vllms(v26_dir: Path, size: tuple[int, int], tokens: int) -> None:
    assert rule(v26_dir).image_tokens(*size).tokens == tokens


def test_grids_are_rows_by_columns_of_least_log_error() -> None:
    # A square image of 2 slices: 1 x 2 and 2 x 1 are equally far off; the first, 2 rows.
    assert sliced_grid(600, 600, 9, 448, first_on_tie=True) == (2, 1)
    assert sliced_grid(400, 800, 9, 448, first_on_tie=True) == (1, 2)
    assert sliced_grid(1000, 3000, 9, 448, first_on_tie=True) == (2, 4)
    assert sliced_grid(400, 400, 9, 448, first_on_tie=True) is None


def test_the_image_id_adds_its_digits_from_the_11th_image(v26_dir: Path) -> None:
    base = rule(v26_dir).image_tokens(640, 480)
    assert at_index(base, rule(v26_dir), 9).tokens == 201
    assert at_index(base, rule(v26_dir), 10).tokens == 202


def test_the_knobs_reach_the_count_as_in_vllm(v26_dir: Path) -> None:
    assert rule(v26_dir, max_slice_nums=4).image_tokens(3000, 1000).tokens == 267
    assert rule(v26_dir, scale_resolution=336).image_tokens(640, 480).tokens == 334
    assert rule(v26_dir, use_image_id=False) == rule(v26_dir)  # vLLM writes the id anyway
    assert rule(v26_dir).max_image_tokens().tokens == 69 + 9 * 66 + 8
    assert rule(v26_dir, max_slice_nums=1).max_image_tokens().tokens == 69


@pytest.mark.parametrize(
    "kwargs",
    [
        {"slice_mode": False},
        {"image_feature_size": 96},
        {"patch_size": 16},
        {"max_pixels": 200704},
        {"images_kwargs": {"max_slice_nums": 4}},
        {"max_slice_nums": 0},
    ],
)
def test_kwargs_the_rule_cannot_price_stop_start_up(
    v26_dir: Path, kwargs: dict[str, object]
) -> None:
    with pytest.raises(ConfigurationError):
        rule(v26_dir, **kwargs)


def test_the_checkpoint_file_sets_the_grid(tmp_path: Path) -> None:
    directory = write_minicpmv_dir(tmp_path, version=4.5, max_slice_nums=2, scale_resolution=560)
    assert rule(directory).image_tokens(3000, 1000).tokens == 69 + 2 * 66


@pytest.mark.parametrize("version", [None, 2.5])
def test_versions_before_2_6_are_left_to_the_engine(tmp_path: Path, version: float | None) -> None:
    directory = write_minicpmv_dir(tmp_path)
    values = json.loads((directory / "config.json").read_text())
    values.pop("version")
    if version is not None:
        values["version"] = version
    write_json(directory, "config.json", values)
    with pytest.raises(ConfigurationError, match="SIDECAR_PRICING=engine"):
        load_profile(str(directory))
    profile = load_profile(str(directory), engine_only=True)
    assert profile.architecture.support is Support.NEEDS_ENGINE
    assert isinstance(profile.vision.rule, EngineOnlyRule)


def test_a_downscale_lands_within_the_budget(v26_dir: Path) -> None:
    minicpm = rule(v26_dir)
    size = minicpm.downscale_size(4000, 3000, max_tokens=300, max_pixels=None)
    assert minicpm.image_tokens(*size).tokens <= 300


def test_minicpm_o_2_6_images_are_minicpm_v_2_6s(tmp_path: Path, v26_dir: Path) -> None:
    omni = write_minicpmv_dir(tmp_path / "o2_6", omni=True)
    assert rule(omni) == MiniCPMVRule("minicpmo", 448, 9, 64)
    assert rule(omni).image_tokens(3000, 1000) == rule(v26_dir).image_tokens(3000, 1000)


def test_minicpm_o_4_5_is_left_to_the_engine(tmp_path: Path) -> None:
    directory = write_minicpmv_dir(tmp_path, version=4.5, omni=True)
    with pytest.raises(ConfigurationError, match=r"version \(4, 5\)"):
        load_profile(str(directory))
    assert load_profile(str(directory), engine_only=True).architecture.support is (
        Support.NEEDS_ENGINE
    )
