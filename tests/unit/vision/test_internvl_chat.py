"""InternVL's chat format: vLLM's own tiler, <img><IMG_CONTEXT>...</img>, and its knobs.

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
from sidecar.vision.internvl_chat import InternVLChatRule, target_ratios
from tests.support.family_dirs import (
    write_eagle2_5_dir,
    write_internvl_chat_dir,
    write_qianfan_ocr_dir,
    write_skywork_r1v_dir,
)


def rule(directory: Path, overrides: ProfileOverrides | None = None) -> InternVLChatRule:
    vision = load_profile(str(directory), overrides).vision.rule
    assert isinstance(vision, InternVLChatRule)
    return vision


def knobs(**values: Any) -> ProfileOverrides:
    return ProfileOverrides(mm_processor_kwargs=values)


@pytest.fixture(scope="module")
def internvl3(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_internvl_chat_dir(tmp_path_factory.mktemp("internvl3"))


@pytest.mark.parametrize(
    ("size", "tokens"),
    [
        ((640, 480), 2 + 256 * (4 * 3 + 1)),  # a 4 x 3 grid and the thumbnail
        ((1, 1), 2 + 256),  # one tile, no thumbnail
        ((4000, 300), 2 + 256 * (12 + 1)),  # 12 x 1
        ((448, 448), 2 + 256),
        ((897, 448), 2 + 256 * 3),  # 2 x 1 + thumbnail
    ],
)
def test_counts_are_vllms(internvl3: Path, size: tuple[int, int], tokens: int) -> None:
    assert rule(internvl3).image_tokens(*size).tokens == tokens


def test_the_grids_are_tried_in_vllms_order() -> None:
    ratios = target_ratios(1, 12)
    assert [c * r for c, r in ratios] == sorted(c * r for c, r in ratios)
    assert len(ratios) == len(set(ratios)) == 35


@pytest.mark.parametrize(
    ("overrides", "size", "tokens"),
    [
        (knobs(max_dynamic_patch=6), (4000, 300), 2 + 256 * (6 + 1)),
        (knobs(min_dynamic_patch=4, max_dynamic_patch=8), (1, 1), 2 + 256 * (4 + 1)),
        (knobs(dynamic_image_size=False), (640, 480), 2 + 256),
        (knobs(use_thumbnail=False), (640, 480), 2 + 256 * 12),
        (knobs(image_size=224), (640, 480), 2 + 64 * (4 * 3 + 1)),  # (224 // 14)**2 / 4
    ],
)
def test_the_knobs_are_the_image_processors_arguments(
    internvl3: Path, overrides: ProfileOverrides, size: tuple[int, int], tokens: int
) -> None:
    assert rule(internvl3, overrides).image_tokens(*size).tokens == tokens


@pytest.mark.parametrize(
    ("overrides", "named"),
    [
        (knobs(do_rescale=True), "do_rescale"),
        (knobs(max_pixels=1_003_520), "max_pixels"),
        (ProfileOverrides(max_pixels=1_003_520), "max_pixels"),
    ],
)
def test_any_other_kwarg_fails_vllms_constructor_so_start_up_stops(
    internvl3: Path, overrides: ProfileOverrides, named: str
) -> None:
    with pytest.raises(ConfigurationError, match=f"sets {named}.*knobs it prices: dynamic"):
        load_profile(str(internvl3), overrides)


def test_the_language_model_is_read_from_llm_config(internvl3: Path) -> None:
    profile = load_profile(str(internvl3))
    assert profile.kv.bytes_per_token == 2 * 2 * 1 * 32 * 2  # K+V, 2 layers, 1 head of 32, bf16
    assert profile.max_position_embeddings == 32768


def test_the_most_an_image_costs(internvl3: Path) -> None:
    assert rule(internvl3).max_image_tokens().tokens == 2 + 256 * 13


def test_eagle_tiles_at_force_image_size(tmp_path: Path) -> None:
    assert rule(write_eagle2_5_dir(tmp_path / "a")).tokens_per_tile == 256
    forced = rule(write_eagle2_5_dir(tmp_path / "b", force_image_size=512))
    assert (forced.image_size_px, forced.tokens_per_tile) == (512, 324)  # (512 // 14)**2 / 4


def test_skywork_r1v_is_internvl_chat(tmp_path: Path, internvl3: Path) -> None:
    assert rule(write_skywork_r1v_dir(tmp_path)) == rule(internvl3)


def test_qianfan_ocr_is_internvl_chat_with_its_vision_sizes_as_pairs(
    tmp_path: Path, internvl3: Path
) -> None:
    qianfan = rule(write_qianfan_ocr_dir(tmp_path))
    assert (qianfan.image_size_px, qianfan.tokens_per_tile) == (448, 256)
    for size in [(640, 480), (1, 1), (4000, 300), (897, 448)]:
        assert qianfan.image_tokens(*size) == rule(internvl3).image_tokens(*size)


def test_qianfan_ocr_takes_its_config_classs_defaults(tmp_path: Path) -> None:
    # QianfanOCRConfig: 448 px tiles of 14 px patches, downsample_ratio 0.5, when absent.
    directory = write_qianfan_ocr_dir(tmp_path, vision_config={"model_type": "qianfan_ocr_vision"})
    path = directory / "config.json"
    config = json.loads(path.read_text())
    del config["downsample_ratio"]
    path.write_text(json.dumps(config))
    qianfan = rule(directory)
    assert (qianfan.image_size_px, qianfan.tokens_per_tile) == (448, 256)


def test_qianfan_ocr_knobs_and_refusals_are_internvl_chats(tmp_path: Path) -> None:
    directory = write_qianfan_ocr_dir(tmp_path)
    assert rule(directory, knobs(max_dynamic_patch=6)).max_image_tokens().tokens == 2 + 256 * 7
    with pytest.raises(ConfigurationError, match="do_rescale"):
        load_profile(str(directory), knobs(do_rescale=True))


def test_a_downscale_lands_on_a_smaller_grid(internvl3: Path) -> None:
    internvl = rule(internvl3)
    size = internvl.downscale_size(4032, 3024, max_tokens=2 + 256 * 7, max_pixels=None)
    assert internvl.image_tokens(*size).tokens <= 2 + 256 * 7
    assert size <= (4032, 3024)
    assert size[1] <= 3024
