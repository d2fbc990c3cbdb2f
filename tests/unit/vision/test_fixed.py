"""vision.fixed: LLaVA-1.5, PaliGemma, Aria, BLIP-2 and OpenVLA cost the same for every image.

Every size against transformers' own processor: ``tests/oracle/test_vision_oracle.py``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sidecar.errors import ConfigurationError
from sidecar.profiles import load_profile
from tests.support.family_dirs import (
    write_aria_dir,
    write_blip2_dir,
    write_openvla_dir,
    write_paligemma_dir,
)

LLAVA_15_7B = "llava-hf/llava-1.5-7b-hf"


@pytest.mark.parametrize("size", [(1, 1), (336, 336), (4032, 3024), (100, 9000)], ids=str)
def test_llava_15_costs_576_tokens_for_any_image_size(size: tuple[int, int]) -> None:
    assert load_profile(LLAVA_15_7B).vision.image_tokens(*size).tokens == 576


# PaliGemma: vLLM 0.33's figures (tests/renderer/test_new_families.py).
@pytest.mark.parametrize(
    ("image_size_px", "version", "tokens"),
    [(224, 1, 257), (448, 2, 1025), (896, 2, 4097)],  # (side / 14)**2 <image> + <bos>
)
@pytest.mark.parametrize("size", [(1, 1), (640, 480), (3, 900), (16384, 2)], ids=str)
def test_paligemma_costs_its_siglip_grid_and_bos_for_any_size(
    tmp_path: Path, image_size_px: int, version: int, tokens: int, size: tuple[int, int]
) -> None:
    directory = write_paligemma_dir(tmp_path, image_size_px=image_size_px, version=version)
    cost = load_profile(str(directory)).vision.image_tokens(*size)
    # The newline vLLM appends to a prompt not already ending with one: never priced low.
    assert (cost.tokens, cost.wrapper_tokens) == (tokens, 1)


def test_paligemma_max_is_its_one_cost(tmp_path: Path) -> None:
    vision = load_profile(str(write_paligemma_dir(tmp_path))).vision
    assert vision.max_image_tokens().prompt_tokens == 258


# Aria: vLLM 0.33's figures (tests/renderer/test_new_families.py).
@pytest.mark.parametrize("size", [(1, 1), (640, 480), (900, 3), (16384, 2)], ids=str)
def test_aria_costs_its_projectors_most_queries_for_any_size(
    tmp_path: Path, size: tuple[int, int]
) -> None:
    assert load_profile(str(write_aria_dir(tmp_path))).vision.image_tokens(*size).tokens == 256


@pytest.mark.parametrize(
    ("values", "match"),
    [({"max_image_size": 490}, "max_image_size"), ({"split_image": True}, "split_image")],
)
def test_aria_refuses_crops_vllm_does_not_count(
    tmp_path: Path, values: dict[str, object], match: str
) -> None:
    directory = write_aria_dir(tmp_path)
    path = directory / "preprocessor_config.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), **values}))
    with pytest.raises(ConfigurationError, match=match):
        load_profile(str(directory))


# BLIP-2 and OpenVLA: vLLM 0.33's figures (tests/renderer/test_new_families.py).
@pytest.mark.parametrize("size", [(1, 1), (640, 480), (900, 3), (16384, 2)], ids=str)
@pytest.mark.parametrize("queries", [32, 64])
def test_blip2_costs_its_query_tokens_for_any_size(
    tmp_path: Path, queries: int, size: tuple[int, int]
) -> None:
    directory = write_blip2_dir(tmp_path, num_query_tokens=queries)
    cost = load_profile(str(directory)).vision.image_tokens(*size)
    assert (cost.tokens, cost.wrapper_tokens) == (queries, 0)


def test_blip2_without_num_query_tokens_takes_blip2_configs_default(tmp_path: Path) -> None:
    directory = write_blip2_dir(tmp_path, num_query_tokens=64)
    path = directory / "config.json"
    config = json.loads(path.read_text())
    del config["num_query_tokens"]
    path.write_text(json.dumps(config))
    assert load_profile(str(directory)).vision.max_image_tokens().tokens == 32


@pytest.mark.parametrize("size", [(1, 1), (224, 224), (900, 3), (16384, 2)], ids=str)
def test_openvla_costs_its_16_by_16_grid_for_any_size(
    tmp_path: Path, size: tuple[int, int]
) -> None:
    cost = load_profile(str(write_openvla_dir(tmp_path))).vision.image_tokens(*size)
    assert (cost.tokens, cost.wrapper_tokens) == (256, 0)


def test_openvla_refuses_image_sizes_vllms_backbone_refuses(tmp_path: Path) -> None:
    directory = write_openvla_dir(tmp_path)
    path = directory / "config.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), "image_sizes": [384, 384]}))
    with pytest.raises(ConfigurationError, match="image_sizes"):
        load_profile(str(directory))
