"""Phi-3-Vision / Phi-3.5-Vision: a global view and HD crops of 336 px, 144 tokens each.

The figures are vLLM 0.33's (its count is the remote processor's, read in the renderer tier
over a stand-in written from its public source: tests/renderer/test_new_families.py).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from sidecar.errors import ConfigurationError, UnsupportedImageSizeError
from sidecar.profiles import ProfileOverrides, load_profile
from sidecar.vision.phi3v import Phi3VRule
from tests.support.family_dirs import write_phi3v_dir


@pytest.fixture(scope="module")
def phi_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_phi3v_dir(tmp_path_factory.mktemp("phi3v"))  # num_crops 4, as 3.5 ships


def rule(directory: Path, overrides: ProfileOverrides | None = None) -> Phi3VRule:
    vision = load_profile(str(directory), overrides).vision.rule
    assert isinstance(vision, Phi3VRule)
    return vision


@pytest.mark.parametrize(
    ("size", "tokens"),
    [
        ((1300, 876), 757),  # 2 x 2 crops: what vLLM's own test expects at 4
        ((1, 1), 757),  # square: scaled up to 2 x 2 crops
        ((900, 3), 745),  # 4 x 1 crops: one row
        ((3, 900), 781),  # 1 x 4 crops: a row of newlines each
        ((640, 480), 757),
    ],
)
def test_counts_are_the_processors(phi_dir: Path, size: tuple[int, int], tokens: int) -> None:
    assert rule(phi_dir).image_tokens(*size).tokens == tokens


def test_a_side_resized_to_0_px_is_refused_as_the_processor_refuses_it(phi_dir: Path) -> None:
    with pytest.raises(UnsupportedImageSizeError, match="must be > 0"):
        rule(phi_dir).image_tokens(4000, 1)  # 1,344 px long: 0.336 px short
    sixteen = rule(phi_dir, ProfileOverrides(mm_processor_kwargs={"num_crops": 16}))
    assert sixteen.image_tokens(4000, 1).tokens == 2473  # 5,376 px long: 1 px short


def test_num_crops_is_the_knob(phi_dir: Path, tmp_path: Path) -> None:
    sixteen = rule(phi_dir, ProfileOverrides(mm_processor_kwargs={"num_crops": 16}))
    assert sixteen.image_tokens(1300, 876).tokens == 1921  # 4 x 3 crops: vLLM's test's figure
    assert sixteen.max_image_tokens().tokens == 17 * 144 + 1 + 17 * 12  # 1 x 16 crops
    assert rule(phi_dir).max_image_tokens().tokens == 781
    assert rule(write_phi3v_dir(tmp_path, num_crops=16)).image_tokens(1300, 876).tokens == 1921


@pytest.mark.parametrize(
    "kwargs",
    [{"num_crops": 0}, {"max_pixels": 200704}, {"images_kwargs": {"num_crops": 16}}],
)
def test_other_kwargs_are_refused(phi_dir: Path, kwargs: dict[str, object]) -> None:
    with pytest.raises(ConfigurationError):
        rule(phi_dir, ProfileOverrides(mm_processor_kwargs=kwargs))


def test_only_another_shape_costs_less(phi_dir: Path) -> None:
    # The count follows the aspect ratio alone: a square is 4 x 4 crops at any size.
    phi = rule(phi_dir, ProfileOverrides(mm_processor_kwargs={"num_crops": 16}))
    assert phi.image_tokens(3000, 3000) == phi.image_tokens(300, 300)
    size = phi.downscale_size(3000, 3000, max_tokens=2300, max_pixels=None)
    assert phi.image_tokens(*size).tokens <= 2300 < phi.image_tokens(3000, 3000).tokens
    assert max(size) <= 3000
