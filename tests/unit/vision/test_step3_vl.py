"""Step3-VL (StepVL, Step3p7): a 728 px global view plus ImagePatcher's windows of up to 504 px.

The figures are vLLM 0.33's (its own Step3VLProcessor, read in the renderer tier:
tests/renderer/test_new_families.py).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from sidecar.errors import ConfigurationError, UnsupportedImageSizeError
from sidecar.profiles import ProfileOverrides, load_profile
from sidecar.vision.step3_vl import Step3VLRule
from tests.support.family_dirs import write_step3_vl_dir


@pytest.fixture(scope="module")
def step3_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_step3_vl_dir(tmp_path_factory.mktemp("step3_vl"))


def rule(directory: Path, overrides: ProfileOverrides | None = None) -> Step3VLRule:
    vision = load_profile(str(directory), overrides).vision.rule
    assert isinstance(vision, Step3VLRule)
    return vision


@pytest.mark.parametrize(
    ("size", "tokens"),
    [
        ((1, 1), 171),  # the global view alone: 169 + <im_start> + <im_end>
        ((640, 480), 171),  # a long side under 728 px at a ratio within 1.5: no windows
        ((700, 400), 337),  # ratio 1.75: two 400 px windows in one row
        ((728, 728), 504),  # 1.44 windows of 504 px a side round up: 2 x 2, one newline
        ((604, 1000), 338),  # 1.198 windows round down: one column of two
        ((605, 1000), 504),  # 1.2004 rounds up: 2 x 2
        ((4032, 3024), 2665),  # capped to 3024 x 2268: 6 x 5 windows, 4 newlines
        ((3000, 100), 2661),  # thin: 100 px windows, 30 in one row
        ((100, 3000), 2690),  # 30 rows of one: 29 newlines
        ((31, 2000), 1502),  # a short side under 32 px padded to a 2000 px square: 4 x 4
        ((32, 96768), 254_186),  # capped to 1 x 3024: 3024 rows of 1 px windows
    ],
)
def test_tokens_are_vllms(step3_dir: Path, size: tuple[int, int], tokens: int) -> None:
    assert rule(step3_dir).image_tokens(*size).tokens == tokens
    assert rule(step3_dir).image_tokens(*size).wrapper_tokens == 0


def test_the_costliest_image_is_the_rules_maximum(step3_dir: Path) -> None:
    step3 = rule(step3_dir)
    assert step3.max_image_tokens().tokens == step3.image_tokens(32, 96768).tokens


def test_a_side_shrunk_to_no_pixels_is_refused_as_vllm_fails(step3_dir: Path) -> None:
    with pytest.raises(UnsupportedImageSizeError, match="32x200000"):
        rule(step3_dir).image_tokens(32, 200000)


def test_config_enable_patch_false_leaves_the_global_view(tmp_path: Path) -> None:
    step3 = rule(write_step3_vl_dir(tmp_path, enable_patch=False))
    assert step3.image_tokens(4032, 3024).tokens == 171
    assert step3.max_image_tokens().tokens == 171
    with pytest.raises(UnsupportedImageSizeError):
        step3.image_tokens(200000, 32)  # vLLM's patcher still divides by the 0 px side


def test_server_kwargs_are_accepted_and_change_nothing(step3_dir: Path) -> None:
    # vLLM builds the image processor from the request's kwargs alone.
    overrides = ProfileOverrides(mm_processor_kwargs={"enable_patch": False, "patch_size": 252})
    assert rule(step3_dir, overrides).image_tokens(4032, 3024).tokens == 2665


def test_a_kwarg_outside_the_image_processor_is_refused_at_start(step3_dir: Path) -> None:
    with pytest.raises(ConfigurationError, match="max_crops"):
        load_profile(str(step3_dir), ProfileOverrides(mm_processor_kwargs={"max_crops": 4}))


def test_a_non_boolean_enable_patch_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="enable_patch"):
        Step3VLRule.from_configs("step3_vl", {"vision_config": {"enable_patch": "yes"}}, {})


@pytest.mark.parametrize(
    "architecture", ["StepVLForConditionalGeneration", "Step3p7ForConditionalGeneration"]
)
def test_stepvl_and_step3p7_share_the_rule(tmp_path: Path, architecture: str) -> None:
    step3 = rule(write_step3_vl_dir(tmp_path, architecture=architecture))
    assert step3.image_tokens(4032, 3024).tokens == 2665


@pytest.mark.parametrize("max_tokens", [171, 338, 1000])
def test_downscale_fits_the_token_cap(step3_dir: Path, max_tokens: int) -> None:
    step3 = rule(step3_dir)
    width, height = step3.downscale_size(4032, 3024, max_tokens=max_tokens, max_pixels=None)
    assert (width, height) != (4032, 3024)
    assert step3.image_tokens(width, height).tokens <= max_tokens


def test_a_thin_image_downscales_to_the_padded_square(step3_dir: Path) -> None:
    # Its windows follow its aspect ratio at any size, until a short side under 32 px pads it.
    step3 = rule(step3_dir)
    width, height = step3.downscale_size(100, 3000, max_tokens=171, max_pixels=None)
    assert step3.image_tokens(width, height).tokens == 171
    assert width < 32
