"""NVLM-D: InternVL chat's tiles, each tagged <tile_k>, the tags counted by the tokenizer.

The figures are vLLM 0.33's (read from its processor in the renderer tier:
tests/renderer/test_new_families.py). The test tokenizer splits the tags into pieces:
<Image> 3 tokens, </Image> 4, <tile_k> 5 (k < 10), <tile_global_thumbnail> 7, "\\n" 1.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from sidecar.errors import ConfigurationError
from sidecar.profiles import ProfileOverrides, load_profile
from sidecar.vision.nvlm_d import NVLMRule, replacement_text
from tests.support.family_dirs import write_nvlm_d_dir

FRAME = 3 + 4 + 1  # <Image>, </Image> and the newline after them
THUMBNAIL = 7 + 256
TILE = 5 + 256  # <tile_k> with a one-digit k


def rule(directory: Path, overrides: ProfileOverrides | None = None) -> NVLMRule:
    vision = load_profile(str(directory), overrides).vision.rule
    assert isinstance(vision, NVLMRule)
    return vision


def knobs(**values: Any) -> ProfileOverrides:
    return ProfileOverrides(mm_processor_kwargs=values)


@pytest.fixture(scope="module")
def nvlm(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_nvlm_d_dir(tmp_path_factory.mktemp("nvlm"))


@pytest.mark.parametrize(
    ("size", "tokens"),
    [
        ((1, 1), FRAME + THUMBNAIL),  # one tile: only the thumbnail tag
        ((640, 480), FRAME + 6 * TILE + THUMBNAIL),  # 3 x 2 (1-6 tiles) and the thumbnail
        ((896, 448), FRAME + 2 * TILE + THUMBNAIL),
    ],
)
def test_counts_are_vllms(nvlm: Path, size: tuple[int, int], tokens: int) -> None:
    assert rule(nvlm).image_tokens(*size).tokens == tokens


def test_a_two_digit_tile_tag_costs_what_the_tokenizer_says(nvlm: Path) -> None:
    twelve = rule(nvlm, knobs(max_dynamic_patch=12))
    # <tile_1>..<tile_9>: 5 tokens each; <tile_10>..<tile_12>: 6.
    assert twelve.image_tokens(4000, 300).tokens == FRAME + 9 * TILE + 3 * (TILE + 1) + THUMBNAIL
    assert twelve.max_image_tokens().tokens == twelve.image_tokens(4000, 300).tokens


def test_without_the_thumbnail_the_last_tile_has_no_tag_and_no_context(nvlm: Path) -> None:
    bare = rule(nvlm, knobs(use_thumbnail=False))
    assert bare.image_tokens(1, 1).tokens == FRAME  # vLLM's <Image></Image> and newline only
    assert bare.image_tokens(640, 480).tokens == FRAME + 5 * TILE
    assert replacement_text(1, 256, use_thumbnail=False) == "<Image></Image>"


def test_any_other_kwarg_fails_vllms_constructor_so_start_up_stops(nvlm: Path) -> None:
    with pytest.raises(ConfigurationError, match="sets do_rescale"):
        load_profile(str(nvlm), knobs(do_rescale=True))


def test_a_directory_without_its_tokenizer_is_refused(tmp_path: Path, nvlm: Path) -> None:
    shutil.copytree(nvlm, tmp_path / "nvlm")
    (tmp_path / "nvlm" / "tokenizer.json").unlink()
    with pytest.raises(ConfigurationError, match=r"tokenizer\.json"):
        load_profile(str(tmp_path / "nvlm"))


def test_a_downscale_lands_on_a_smaller_grid(nvlm: Path) -> None:
    nvlm_rule = rule(nvlm)
    budget = FRAME + 3 * TILE + THUMBNAIL
    size = nvlm_rule.downscale_size(4032, 3024, max_tokens=budget, max_pixels=None)
    assert nvlm_rule.image_tokens(*size).tokens <= budget
    assert size[0] <= 4032
    assert size[1] <= 3024
