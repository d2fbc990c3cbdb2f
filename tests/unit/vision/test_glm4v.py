"""vision.glm4v: GLM-4.1V prices one image as a clip of two frames, on worked numbers that
transformers' processor gives (``tests/oracle/test_vision_oracle_families.py`` checks every
size); Cosmos 3 Edge as a clip of one, on numbers vLLM 0.33's processor gives
(``tests/renderer/test_new_families.py`` checks every size)."""

from __future__ import annotations

from pathlib import Path

import pytest

from sidecar.errors import ConfigurationError
from sidecar.profiles import ProfileOverrides, load_profile
from sidecar.vision.glm4v import Glm4vSmartResizeRule
from sidecar.vision.qwen import QwenSmartResizeRule
from sidecar.vision.smart_resize import clip_smart_resize
from tests.support.family_dirs import write_cosmos3_edge_dir
from tests.support.vision_rules import check_rule_contract

GLM = load_profile("zai-org/GLM-4.1V-9B-Thinking").vision


@pytest.mark.parametrize(
    ("size", "tokens"),
    [((640, 480), 391), ((1920, 1080), 2691), ((333, 1000), 432), ((100, 100), 16)],
    ids=["vga", "full-hd", "tall", "tiny"],
)
def test_glm4v_rule_counts_what_the_processor_counts(size: tuple[int, int], tokens: int) -> None:
    assert GLM.image_tokens(*size).tokens == tokens
    assert GLM.image_tokens(*size).wrapper_tokens == 2


def test_glm4v_rule_resizes_an_image_as_a_clip_of_two_frames() -> None:
    assert isinstance(GLM.rule, Glm4vSmartResizeRule)  # behind vLLM's decode limit
    height, width = clip_smart_resize(
        2, 1080, 1920, temporal_factor=2, factor=28,
        min_pixels=GLM.min_pixels, max_pixels=GLM.max_pixels,
    )  # fmt: skip
    assert GLM.resized_size(1920, 1080) == (width, height)
    assert "2 frames" in GLM.describe()


def test_glm4v_rule_keeps_the_vision_rule_contract() -> None:
    check_rule_contract(GLM)


# -- Cosmos 3 Edge: the same clip resize at one frame (tests/renderer proves every size) -----


def _edge(tmp_path: Path, **kwargs: object) -> Glm4vSmartResizeRule:
    directory = write_cosmos3_edge_dir(tmp_path / "edge")
    rule = load_profile(str(directory), ProfileOverrides(mm_processor_kwargs=kwargs)).vision.rule
    assert isinstance(rule, Glm4vSmartResizeRule)
    return rule


@pytest.mark.parametrize(
    ("size", "tokens"),
    [((640, 480), 300), ((1, 1), 64), ((4000, 3000), 11_750), ((20, 3000), 150)],
    ids=["vga", "tiny", "12mp", "thin"],
)
def test_cosmos3_edge_counts_what_vllms_processor_counts(
    tmp_path: Path, size: tuple[int, int], tokens: int
) -> None:
    edge = _edge(tmp_path)
    assert edge.image_tokens(*size).tokens == tokens
    assert edge.image_tokens(*size).wrapper_tokens == 2


def test_cosmos3_edge_enlarges_a_thin_side_first_where_qwen3_vl_would_not(
    tmp_path: Path,
) -> None:
    # 20 px is under one 32 px cell: the clip resize scales 20 x 3000 up to 32 x 4800 before
    # rounding (150 cells); Qwen3-VL's image resize rounds 20 up to 32 and keeps 3008 (94).
    edge = _edge(tmp_path)
    qwen3 = QwenSmartResizeRule("qwen3_vl", 16, 2, edge.min_pixels, edge.max_pixels)
    assert (edge.image_tokens(20, 3000).tokens, qwen3.image_tokens(20, 3000).tokens) == (150, 94)
    assert "one frame" in edge.describe()


def test_cosmos3_edge_prices_the_size_kwarg_in_either_scope(tmp_path: Path) -> None:
    size = {"shortest_edge": 65_536, "longest_edge": 200_704}
    assert _edge(tmp_path, size=size).image_tokens(640, 480).tokens == 192
    scoped = _edge(tmp_path, images_kwargs={"size": size})
    assert scoped.image_tokens(640, 480).tokens == 192


@pytest.mark.parametrize(
    "overrides",
    [
        ProfileOverrides(mm_processor_kwargs={"max_pixels": 200_704}),
        ProfileOverrides(mm_processor_kwargs={"images_kwargs": {"min_pixels": 802_816}}),
        ProfileOverrides(max_pixels=200_704),
    ],
    ids=["kwarg", "images_kwargs", "setting"],
)
def test_cosmos3_edge_refuses_pixel_bounds_vllm_does_not_apply(
    tmp_path: Path, overrides: ProfileOverrides
) -> None:
    directory = write_cosmos3_edge_dir(tmp_path / "edge")
    with pytest.raises(ConfigurationError, match=r"min_pixels / max_pixels.*set size"):
        load_profile(str(directory), overrides)


def test_cosmos3_edge_refuses_what_it_cannot_price(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="needs both shortest_edge and longest_edge"):
        _edge(tmp_path, size={"longest_edge": 200_704})
    with pytest.raises(ConfigurationError, match="patch_size"):
        _edge(tmp_path, patch_size=14)  # reaches the processor, not vLLM's count
    other_patch = write_cosmos3_edge_dir(tmp_path / "patch14", patch_size=14)
    with pytest.raises(ConfigurationError, match=r"differ from the vision tower's \(16, 2, 1\)"):
        load_profile(str(other_patch))


def test_cosmos3_edge_rule_keeps_the_vision_rule_contract(tmp_path: Path) -> None:
    check_rule_contract(_edge(tmp_path))
