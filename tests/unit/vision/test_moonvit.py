"""MoonViT's resizes: Kimi-K2.5 (a patch budget and a side limit) and Kimi-VL (a patch budget,
a side of 512 patches refused), both padded to 28 px cells.

The figures are vLLM 0.33's (read from its fused processor, and from Kimi-VL's count over a
stand-in processor, in the renderer tier: tests/renderer/test_new_families.py).
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from sidecar.errors import ConfigurationError, UnsupportedImageSizeError
from sidecar.profiles import ProfileOverrides, load_profile
from sidecar.vision.moonvit import KimiK25Rule, KimiVLRule
from tests.support.family_dirs import write_kimi_k25_dir, write_kimi_vl_dir


@pytest.fixture(scope="module")
def kimi_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_kimi_k25_dir(tmp_path_factory.mktemp("kimi_k25"))


def rule(directory: Path, overrides: ProfileOverrides | None = None) -> KimiK25Rule:
    vision = load_profile(str(directory), overrides).vision.rule
    assert isinstance(vision, KimiK25Rule)
    return vision


@pytest.mark.parametrize(
    ("size", "tokens"),
    [
        ((1, 1), 1),  # never scaled up: one padded cell
        ((640, 480), 414),  # unscaled, padded to 23 x 18 cells
        ((4000, 3000), 4200),  # scaled by sqrt(16,384 / (285 x 214)) to 2,073 x 1,554
        ((1, 16384), 256),  # the long side cut to 512 patches: 1 x 256 cells
        ((178956, 1000), 512),  # cut to 7,168 x 40: 256 x 2 cells
        ((489, 7081), 4464),  # the costliest size: both sides just under a cell boundary
    ],
)
def test_counts_are_vllms(kimi_dir: Path, size: tuple[int, int], tokens: int) -> None:
    kimi = rule(kimi_dir)
    assert kimi.image_tokens(*size).tokens == tokens
    assert kimi.image_tokens(*size).wrapper_tokens == 4


def test_the_maximum_bounds_every_size(kimi_dir: Path) -> None:
    kimi = rule(kimi_dir)
    rng = random.Random(3)
    sizes = [(round(16384 ** rng.random()), round(16384 ** rng.random())) for _ in range(5000)]
    assert max(kimi.image_tokens(*size).tokens for size in sizes) <= 4464
    assert kimi.max_image_tokens().tokens == 4464


def test_values_come_from_media_proc_cfg(tmp_path: Path) -> None:
    small = rule(write_kimi_k25_dir(tmp_path, in_patch_limit=4096, patch_limit_on_one_side=256))
    assert small.image_tokens(4000, 3000).tokens == 1036  # 1,036 x 777 px: 37 x 28 cells
    assert small.image_tokens(1, 16384).tokens == 128


def test_media_proc_cfg_kwargs_are_ignored_as_vllm_ignores_them(kimi_dir: Path) -> None:
    knobs = {"in_patch_limit": 1024, "patch_limit_on_one_side": 64, "max_pixels": 200704}
    assert rule(kimi_dir, ProfileOverrides(mm_processor_kwargs=knobs)) == rule(kimi_dir)


def test_an_unknown_knob_or_a_media_proc_cfg_object_stops_start_up(kimi_dir: Path) -> None:
    for knobs in ({"media_proc_cfg": {"in_patch_limit": 1024}}, {"max_num_tiles": 4}):
        with pytest.raises(ConfigurationError, match="cannot price"):
            load_profile(str(kimi_dir), ProfileOverrides(mm_processor_kwargs=knobs))


def test_fixed_output_tokens_is_not_priced(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="fixed_output_tokens"):
        load_profile(str(write_kimi_k25_dir(tmp_path, fixed_output_tokens=64)))


@pytest.mark.parametrize("max_tokens", [1, 100, 1000, 4000])
def test_a_downscale_fits_the_budget(kimi_dir: Path, max_tokens: int) -> None:
    kimi = rule(kimi_dir)
    width, height = kimi.downscale_size(4000, 3000, max_tokens=max_tokens, max_pixels=None)
    assert width <= 4000
    assert height <= 3000
    assert kimi.image_tokens(width, height).tokens <= max_tokens
    assert kimi.downscale_size(640, 480, max_tokens=414, max_pixels=None) == (640, 480)


# -- Kimi-VL --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def kimi_vl_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_kimi_vl_dir(tmp_path_factory.mktemp("kimi_vl"))


def vl_rule(directory: Path) -> KimiVLRule:
    vision = load_profile(str(directory)).vision.rule
    assert isinstance(vision, KimiVLRule)
    return vision


@pytest.mark.parametrize(
    ("size", "tokens"),
    [
        ((1, 1), 1),
        ((640, 480), 414),  # 2,142 patches: unscaled
        ((4000, 3000), 1036),  # scaled by sqrt(4,096 / 60,990) to 1,036 x 777: 37 x 28 cells
        ((1, 7000), 250),  # 13 px wide is no whole patch: never scaled, 500 patches tall
        ((153, 6731), 1338),  # the costliest size
    ],
)
def test_kimi_vl_counts_are_vllms(kimi_vl_dir: Path, size: tuple[int, int], tokens: int) -> None:
    assert vl_rule(kimi_vl_dir).image_tokens(*size).tokens == tokens


@pytest.mark.parametrize("size", [(1, 7200), (1, 16384), (178956, 1000), (7168, 100)])
def test_kimi_vl_refuses_a_padded_side_of_512_patches(
    kimi_vl_dir: Path, size: tuple[int, int]
) -> None:
    with pytest.raises(UnsupportedImageSizeError, match="Exceed pos emb"):
        vl_rule(kimi_vl_dir).image_tokens(*size)


def test_kimi_vl_maximum_bounds_every_accepted_size(kimi_vl_dir: Path) -> None:
    kimi = vl_rule(kimi_vl_dir)
    rng = random.Random(5)
    accepted = []
    for _ in range(5000):
        size = (round(16384 ** rng.random()), round(16384 ** rng.random()))
        try:
            accepted.append(kimi.image_tokens(*size).tokens)
        except UnsupportedImageSizeError:
            continue
    assert max(accepted) <= kimi.max_image_tokens().tokens == 1338


def test_kimi_vl_thinking_2506_reads_its_larger_limit(tmp_path: Path) -> None:
    kimi = vl_rule(write_kimi_vl_dir(tmp_path, in_token_limit=16384))
    assert kimi.image_tokens(4000, 3000).tokens == 4200
    assert kimi.max_image_tokens().tokens == 4464


@pytest.mark.parametrize(
    "knobs", [{"in_token_limit": 1024}, {"max_pixels": 200704}, {"do_rescale": True}]
)
def test_kimi_vl_prices_no_knob(kimi_vl_dir: Path, knobs: dict[str, object]) -> None:
    with pytest.raises(ConfigurationError, match="knobs it prices: none"):
        load_profile(str(kimi_vl_dir), ProfileOverrides(mm_processor_kwargs=knobs))


def test_kimi_vl_without_padding_is_not_priced(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="pad_input"):
        load_profile(str(write_kimi_vl_dir(tmp_path, pad_input=False)))


def test_kimi_vl_downscale_fits_the_budget(kimi_vl_dir: Path) -> None:
    kimi = vl_rule(kimi_vl_dir)
    width, height = kimi.downscale_size(4000, 3000, max_tokens=500, max_pixels=None)
    assert kimi.image_tokens(width, height).tokens <= 500
