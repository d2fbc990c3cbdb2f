"""Gemma 4: images scaled to a soft-token budget, framed by <boi> and <eoi>.

The figures are vLLM 0.33's (``Gemma4ProcessingInfo._compute_num_soft_tokens`` + 2, read
from its processor in the renderer tier: tests/renderer/test_new_families.py).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sidecar.errors import ConfigurationError
from sidecar.profiles import ProfileOverrides, load_profile
from sidecar.vision.gemma4 import Gemma4Rule
from tests.support.family_dirs import (
    write_diffusion_gemma_dir,
    write_gemma4_dir,
    write_gemma4_unified_dir,
)


@pytest.fixture(scope="module")
def gemma4_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_gemma4_dir(tmp_path_factory.mktemp("gemma4"))


def rule(directory: Path, **kwargs: object) -> Gemma4Rule:
    vision = load_profile(str(directory), ProfileOverrides(mm_processor_kwargs=kwargs)).vision.rule
    assert isinstance(vision, Gemma4Rule)
    return vision


@pytest.mark.parametrize(
    ("size", "tokens"),
    [
        ((640, 480), 268),  # scaled to 912 x 672 px: 19 x 14 units of 48 px = 266 soft tokens
        ((1, 1), 258),  # scaled up to 768 x 768: 16 x 16 units
        ((3, 900), 282),  # one side clamped to a unit, the other overshoots: capped at 280
        ((500, 3), 218),
    ],
)
def test_counts_are_vllms(gemma4_dir: Path, size: tuple[int, int], tokens: int) -> None:
    assert rule(gemma4_dir).image_tokens(*size).tokens == tokens


def test_the_most_an_image_costs_is_the_budget_and_its_frame(gemma4_dir: Path) -> None:
    assert rule(gemma4_dir).max_image_tokens().tokens == 282
    assert rule(gemma4_dir, max_soft_tokens=1120).max_image_tokens().tokens == 1122


@given(st.integers(1, 4000), st.integers(1, 4000), st.sampled_from([70, 140, 280, 560, 1120]))
def test_no_image_costs_more_than_the_budget(width: int, height: int, budget: int) -> None:
    gemma = Gemma4Rule("gemma4", 16, 3, budget)
    assert 2 < gemma.image_tokens(width, height).tokens <= gemma.max_image_tokens().tokens


def test_the_knob_sets_the_budget_and_config_json_the_default(tmp_path: Path) -> None:
    shipped = write_gemma4_dir(tmp_path / "a", default_output_length=140)
    assert rule(shipped).max_soft_tokens == 140
    assert rule(shipped, max_soft_tokens=560).max_soft_tokens == 560
    assert rule(shipped, images_kwargs={"max_soft_tokens": 70}).max_soft_tokens == 70


def test_a_budget_vllm_refuses_stops_start_up(gemma4_dir: Path) -> None:
    with pytest.raises(ConfigurationError, match=r"Unsupported max_soft_tokens value: 300"):
        rule(gemma4_dir, max_soft_tokens=300)


def test_another_knob_stops_start_up(gemma4_dir: Path) -> None:
    with pytest.raises(ConfigurationError, match="max_dynamic_patch"):
        rule(gemma4_dir, max_dynamic_patch=6)


def test_shrinking_cannot_lower_the_count_so_a_downscale_honours_only_the_pixel_cap(
    gemma4_dir: Path,
) -> None:
    gemma = rule(gemma4_dir)
    assert gemma.image_tokens(4000, 3000) == gemma.image_tokens(400, 300)
    assert gemma.downscale_size(4000, 3000, max_tokens=100, max_pixels=1_200_000) == (1264, 948)


def test_diffusion_gemma_is_gemma4_under_its_own_config_class(
    tmp_path: Path, gemma4_dir: Path
) -> None:
    diffusion = load_profile(str(write_diffusion_gemma_dir(tmp_path)))
    assert diffusion.architecture.name == "DiffusionGemmaForBlockDiffusion"
    assert rule(tmp_path) == rule(gemma4_dir)
    assert rule(tmp_path, max_soft_tokens=70).max_image_tokens().tokens == 72


def test_gemma4_unified_reads_its_budget_from_num_soft_tokens(tmp_path: Path) -> None:
    unified = write_gemma4_unified_dir(tmp_path / "a", num_soft_tokens=560)
    assert rule(unified).max_image_tokens().tokens == 562
    assert rule(unified).image_tokens(640, 480).tokens == 542  # vLLM 0.33's figure
    assert rule(unified, max_soft_tokens=70).max_image_tokens().tokens == 72


def test_gemma4_unified_without_num_soft_tokens_stops_start_up(tmp_path: Path) -> None:
    # Gemma4UnifiedVisionConfig has no default for it: vLLM's count fails on every image.
    directory = write_gemma4_unified_dir(tmp_path)
    path = directory / "config.json"
    config = json.loads(path.read_text())
    del config["vision_config"]["num_soft_tokens"]
    path.write_text(json.dumps(config))
    with pytest.raises(ConfigurationError, match="num_soft_tokens"):
        load_profile(str(directory))
