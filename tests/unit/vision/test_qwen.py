"""vision.qwen: Qwen2-VL, Qwen2.5-VL and Qwen3-VL images, by the design brief's worked numbers.

Every size against transformers' own processor: ``tests/oracle/test_vision_oracle.py``;
Alpamayo 2 Super's against vLLM 0.33's: ``tests/renderer/test_new_families.py``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from sidecar.errors import ConfigurationError
from sidecar.profiles import ModelProfile, ProfileOverrides, load_profile
from tests.support.family_dirs import write_alpamayo2_super_dir

QWEN2_VL_7B = "Qwen/Qwen2-VL-7B-Instruct"
QWEN25_VL_7B = "Qwen/Qwen2.5-VL-7B-Instruct"
CAPPED = ProfileOverrides(max_pixels=1_003_520)


def test_qwen2_vl_costs_66_prompt_tokens_for_224_square_image() -> None:
    cost = load_profile(QWEN2_VL_7B).vision.image_tokens(224, 224)
    assert (cost.tokens, cost.prompt_tokens) == (64, 66)


@pytest.mark.parametrize(
    ("size", "overrides", "tokens"),
    [
        ((1024, 1024), ProfileOverrides(), 1_369),
        ((3840, 2160), ProfileOverrides(), 10_549),
        ((4032, 3024), ProfileOverrides(), 15_552),
        ((1920, 1080), ProfileOverrides(), 2_691),
        ((4032, 3024), CAPPED, 1_230),
        ((1920, 1080), CAPPED, 1_222),
        ((512, 512), CAPPED, 324),
    ],
    ids=["1024sq", "4k", "12mp", "1080p", "12mp-capped", "1080p-capped", "512sq-capped"],
)
def test_qwen25_vl_tokens_match_the_brief_table(
    size: tuple[int, int], overrides: ProfileOverrides, tokens: int
) -> None:
    assert load_profile(QWEN25_VL_7B, overrides).vision.image_tokens(*size).tokens == tokens


# -- Alpamayo 2 Super: Qwen3-VL's rule under its config class's bounds ----------------------


def _alpamayo(
    tmp_path: Path, overrides: ProfileOverrides | None = None, **bounds: Any
) -> ModelProfile:
    directory = write_alpamayo2_super_dir(tmp_path / "alpamayo", **bounds)
    return load_profile(str(directory), overrides)


def test_alpamayo2_super_prices_within_its_config_class_default_bounds(tmp_path: Path) -> None:
    # config.json without min_pixels / max_pixels: 163,840 to 196,608 px, not the Qwen3-VL
    # processor file's 65,536 to 16,777,216.
    vision = _alpamayo(tmp_path).vision
    assert (vision.min_pixels, vision.max_pixels) == (163_840, 196_608)
    assert [vision.image_tokens(*size).tokens for size in ((1, 1), (640, 480))] == [169, 192]


def test_alpamayo2_super_reads_the_bounds_config_json_sets(tmp_path: Path) -> None:
    vision = _alpamayo(tmp_path, min_pixels=50_000, max_pixels=400_000).vision
    assert [vision.image_tokens(*size).tokens for size in ((1, 1), (4000, 3000))] == [49, 374]


def test_a_null_bound_keeps_the_processors_own(tmp_path: Path) -> None:
    vision = _alpamayo(tmp_path, min_pixels=None).vision
    assert (vision.min_pixels, vision.max_pixels) == (65_536, 16_777_216)


def test_alpamayo2_super_takes_the_servers_bounds_over_its_own(tmp_path: Path) -> None:
    profile = _alpamayo(tmp_path, ProfileOverrides(mm_processor_kwargs={"max_pixels": 1_003_520}))
    assert profile.vision.image_tokens(640, 480).tokens == 300
    with pytest.raises(ConfigurationError, match="sets size"):
        _alpamayo(tmp_path, ProfileOverrides(mm_processor_kwargs={"size": {"longest_edge": 1}}))


def test_alpamayo2_super_reads_its_towers_under_vlm_config(tmp_path: Path) -> None:
    profile = _alpamayo(tmp_path)
    assert profile.max_position_embeddings == 262_144  # vlm_config.text_config's
    assert profile.kv.layer_groups[0].num_layers == 2
