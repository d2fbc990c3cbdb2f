"""Nemotron Nano VL v2 / Nemotron-H Omni V3: InternVL's tiles, or the dynamic resolution priced
at the most any request can give an image.

The figures are vLLM 0.33's (read from its processor in the renderer tier:
tests/renderer/test_new_families.py).
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from sidecar.errors import ConfigurationError
from sidecar.profiles import ProfileOverrides, load_profile
from sidecar.vision.internvl_chat import InternVLChatRule
from sidecar.vision.nano_nemotron_vl import NanoNemotronDynamicRule
from tests.support.family_dirs import NANO_NEMOTRON_DYNAMIC_ARGS, write_nano_nemotron_vl_dir


def knobs(**values: object) -> ProfileOverrides:
    return ProfileOverrides(mm_processor_kwargs=values)


@pytest.fixture(scope="module")
def tiled(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_nano_nemotron_vl_dir(tmp_path_factory.mktemp("nano"))


@pytest.fixture(scope="module")
def dynamic(tmp_path_factory: pytest.TempPathFactory) -> NanoNemotronDynamicRule:
    directory = write_nano_nemotron_vl_dir(
        tmp_path_factory.mktemp("omni"),
        architecture="NemotronH_Nano_Omni_Reasoning_V3",
        vision_args=NANO_NEMOTRON_DYNAMIC_ARGS,
        context_tokens=32768,
    )
    rule = load_profile(str(directory)).vision.rule
    assert isinstance(rule, NanoNemotronDynamicRule)
    return rule


@pytest.mark.parametrize(
    ("overrides", "size", "tokens"),
    [
        (None, (1, 1), 2 + 256),
        (None, (640, 480), 2 + 256 * 13),  # 4 x 3 tiles of 512 px + thumbnail
        (knobs(max_num_tiles=4), (640, 480), 2 + 256),  # 1 x 1 is as close as 2 x 2
        (knobs(max_num_tiles=4), (900, 3), 2 + 256 * 5),
    ],
)
def test_the_tiles_are_internvls(
    tiled: Path, overrides: ProfileOverrides | None, size: tuple[int, int], tokens: int
) -> None:
    rule = load_profile(str(tiled), overrides).vision.rule
    assert isinstance(rule, InternVLChatRule)
    assert rule.image_tokens(*size).tokens == tokens


def test_any_other_kwarg_fails_vllms_constructor_so_start_up_stops(tiled: Path) -> None:
    with pytest.raises(ConfigurationError, match="sets do_rescale"):
        load_profile(str(tiled), knobs(do_rescale=True))


@pytest.mark.parametrize(
    ("size", "tokens"),
    [
        ((1, 1), 2 + 1024 // 4),  # raised to min_num_patches
        ((640, 480), 2 + 40 * 30 // 4),  # its own 40 x 30 patches, rounded to even sides
        ((4000, 3000), 2 + 13200 // 4),  # cut to the 13,312-patch share: 132 x 100
    ],
)
def test_the_dynamic_resolution_counts(
    dynamic: NanoNemotronDynamicRule, size: tuple[int, int], tokens: int
) -> None:
    assert dynamic.image_tokens(*size).tokens == tokens


def test_the_price_is_the_most_any_budget_gives(dynamic: NanoNemotronDynamicRule) -> None:
    # Every budget a request can hand an image, tried one by one, against the shortcut.
    rng = random.Random(3)
    for _ in range(40):
        width, height = round(16384 ** rng.random()), round(16384 ** rng.random())
        if width * height > 178_956_970:
            continue
        tried = []
        for budget in range(dynamic.min_num_patches, dynamic.share_patches() + 1):
            columns, rows = dynamic.grid(width, height, budget)
            tried.append(columns * rows)
        assert dynamic.most_patches(width, height) == max(tried)
        assert dynamic.most_patches(width, height) >= dynamic.patches_alone(width, height)


def test_a_smaller_budget_can_give_more_so_the_price_is_the_larger(
    dynamic: NanoNemotronDynamicRule,
) -> None:
    # 1427 x 3114: 2,304 patches at a budget of 2,346, 2,240 at 2,370 (sides rounded to even).
    assert dynamic.grid(1427, 3114, 2346) == (32, 72)
    assert dynamic.grid(1427, 3114, 2370) == (32, 70)


def test_the_most_an_image_costs_bounds_every_size(dynamic: NanoNemotronDynamicRule) -> None:
    most = dynamic.max_image_tokens().tokens
    for size in ((16384, 16), (16, 16384), (4000, 3000), (13377, 13377)):
        assert dynamic.image_tokens(*size).tokens <= most


def test_a_downscale_fits_the_budget(dynamic: NanoNemotronDynamicRule) -> None:
    size = dynamic.downscale_size(4000, 3000, max_tokens=1000, max_pixels=None)
    assert dynamic.image_tokens(*size).tokens <= 1000
