"""Phi-4-multimodal: a global view and HD crops of 448 px, padding left out of the count.

The figures are vLLM 0.33's (its own count, read in the renderer tier over a stand-in for the
checkpoint's remote processor: tests/renderer/test_new_families.py).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from sidecar.errors import ConfigurationError, UnsupportedImageSizeError
from sidecar.profiles import ProfileOverrides, load_profile
from sidecar.vision.phi4mm import Phi4MMRule
from tests.support.family_dirs import write_phi4mm_dir


@pytest.fixture(scope="module")
def phi_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_phi4mm_dir(tmp_path_factory.mktemp("phi4mm"))


def rule(directory: Path, overrides: ProfileOverrides | None = None) -> Phi4MMRule:
    vision = load_profile(str(directory), overrides).vision.rule
    assert isinstance(vision, Phi4MMRule)
    return vision


@pytest.mark.parametrize(
    ("size", "tokens"),
    [
        ((448, 448), 545),  # one crop: 272 global + 1 + 16 x 16 + 16
        ((1, 1), 545),  # one crop, fitted to 448 x 448
        ((640, 480), 1065),  # 2 x 2 crops, the bottom padding left out
        ((20, 3000), 497),  # 1 x 7 crops, the side padding left out
        ((4000, 4000), 9585),  # 6 x 6 crops: the closest grid within 36
    ],
)
def test_counts_are_vllms(phi_dir: Path, size: tuple[int, int], tokens: int) -> None:
    assert rule(phi_dir).image_tokens(*size).tokens == tokens


def test_a_fitted_side_under_10_px_is_refused_as_the_processor_refuses_it(
    phi_dir: Path,
) -> None:
    with pytest.raises(UnsupportedImageSizeError, match="very extreme"):
        rule(phi_dir).image_tokens(5, 4000)


def test_dynamic_hd_is_the_knob(phi_dir: Path) -> None:
    few = rule(phi_dir, ProfileOverrides(mm_processor_kwargs={"dynamic_hd": 4}))
    assert few.image_tokens(4000, 4000).tokens == 1329  # 2 x 2 crops
    assert few.max_image_tokens().tokens == 273 + 4 * 256 + 4 * 16  # 1 x 4, unpadded
    assert rule(phi_dir).max_image_tokens().tokens == 10065


@pytest.mark.parametrize(
    "kwargs",
    [{"num_crops": 4}, {"max_pixels": 200704}, {"images_kwargs": {"dynamic_hd": 4}}],
)
def test_other_kwargs_are_refused(phi_dir: Path, kwargs: dict[str, object]) -> None:
    with pytest.raises(ConfigurationError):
        rule(phi_dir, ProfileOverrides(mm_processor_kwargs=kwargs))


def test_a_downscale_lands_within_the_budget(phi_dir: Path) -> None:
    phi = rule(phi_dir)
    size = phi.downscale_size(4000, 3000, max_tokens=2000, max_pixels=None)
    assert phi.image_tokens(*size).tokens <= 2000
