"""MiniCPM-V 4.6 / 4.7: a source image and up to max_slice_nums slices, with numbered markup.

The figures are vLLM 0.33's (read from its processor in the renderer tier:
tests/renderer/test_new_families.py).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from sidecar.errors import ConfigurationError
from sidecar.profiles import ProfileOverrides, load_profile
from sidecar.settings import VLLM_MAX_IMAGE_PIXELS
from sidecar.vision import at_index
from sidecar.vision.minicpmv4_6 import MiniCPMV4_6Rule, sliced_grid
from tests.support.family_dirs import write_minicpmv4_6_dir, write_minicpmv4_7_dir


@pytest.fixture(scope="module")
def v46_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_minicpmv4_6_dir(tmp_path_factory.mktemp("minicpmv4_6"))


def rule(directory: Path, **kwargs: object) -> MiniCPMV4_6Rule:
    overrides = ProfileOverrides(mm_processor_kwargs=kwargs)
    vision = load_profile(str(directory), overrides).vision.rule
    assert isinstance(vision, MiniCPMV4_6Rule)
    return vision


@pytest.mark.parametrize(
    ("size", "tokens"),
    [
        ((640, 480), 212),  # 1 x 2 slices: 5 + 63 + 2 x (2 + 70)
        ((1, 1), 69),  # no slices: upscaled to one 448² part, 64 tokens
        ((448, 448), 69),
        ((3000, 1000), 652),  # 2 rows of 4: 5 + 70 + 8 x (2 + 70) + 1 newline
        ((2000, 3000), 598),  # 4 rows of 2: 5 + 70 + 8 x (2 + 63) + 3 newlines
    ],
)
def test_counts_are_vllms(v46_dir: Path, size: tuple[int, int], tokens: int) -> None:
    assert rule(v46_dir).image_tokens(*size).tokens == tokens


def test_the_knobs_reach_the_count_as_in_vllm(v46_dir: Path) -> None:
    assert rule(v46_dir, max_slice_nums=4).image_tokens(3000, 1000).tokens == 273
    assert rule(v46_dir, images_kwargs={"max_slice_nums": 2}).image_tokens(3000, 1000).tokens == 219
    assert rule(v46_dir, downsample_mode="4x").image_tokens(640, 480).tokens == 821
    assert rule(v46_dir, scale_resolution=336).image_tokens(640, 480).tokens == 189
    assert rule(v46_dir, use_image_id=False) == rule(v46_dir)  # vLLM writes the id anyway


@pytest.mark.parametrize("knob", ["slice_mode", "patch_size"])
def test_knobs_the_count_cannot_follow_stop_start_up(v46_dir: Path, knob: str) -> None:
    # slice_mode: vLLM counts the slices while its image processor drops them (the engine then
    # fails the request); patch_size no longer fits the vision tower.
    with pytest.raises(ConfigurationError, match=knob):
        rule(v46_dir, **{knob: 16 if knob == "patch_size" else False})


def test_pixel_bounds_do_not_reach_the_processor(v46_dir: Path) -> None:
    # MiniCPMV4_6ImageProcessor takes no pixel kwargs: transformers drops them, as vLLM does.
    assert rule(v46_dir, max_pixels=200704) == rule(v46_dir)


def test_the_image_id_costs_one_token_per_digit_of_the_images_place(v46_dir: Path) -> None:
    minicpm = rule(v46_dir)
    single = minicpm.image_tokens(640, 480)
    assert [at_index(single, minicpm, i).tokens for i in (0, 9, 10, 99, 100)] == [
        212, 212, 213, 213, 214
    ]  # fmt: skip


def test_the_grid_is_the_closest_aspect_ratio_with_ties_to_more_rows() -> None:
    assert sliced_grid(480, 640, 9, 448) == (1, 2)
    assert sliced_grid(448, 448, 9, 448) is None  # one slice's area: not sliced
    assert sliced_grid(896, 896, 9, 448) == (2, 2)
    assert sliced_grid(4000, 4000, 1, 448) is None  # max_slice_nums 1: never sliced


def test_the_largest_image_bounds_every_size_and_the_context_caps_it(v46_dir: Path) -> None:
    minicpm = rule(v46_dir)
    # A 1 px wide image keeps its height: one part runs far past a context.
    thin = minicpm.image_tokens(1, VLLM_MAX_IMAGE_PIXELS).tokens
    assert thin > 400_000
    assert minicpm.max_part_tokens() * 10 > thin
    assert minicpm.max_image_tokens().tokens == minicpm.context_tokens == 32768


def test_a_downscale_fits_the_budget(v46_dir: Path) -> None:
    minicpm = rule(v46_dir)
    size = minicpm.downscale_size(4032, 3024, max_tokens=300, max_pixels=None)
    assert minicpm.image_tokens(*size).tokens <= 300
    assert size[0] <= 4032
    assert size[1] <= 3024


def test_4_7_reads_max_slice_nums_from_config_json_not_the_processor_file(tmp_path: Path) -> None:
    directory = write_minicpmv4_7_dir(tmp_path, max_slice_nums=4)
    assert rule(directory).max_slice_nums == 9  # config.json has none: vLLM's default
    assert rule(directory, max_slice_nums=4).image_tokens(3000, 1000).tokens == 273
