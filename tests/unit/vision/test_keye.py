"""Keye-VL / 1.5: vLLM's copy of Keye's smart_resize (28 px) within the processor's bounds.

The figures are vLLM 0.33's count (read in the renderer tier over a stand-in for the remote
image processor: tests/renderer/test_new_families.py).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from sidecar.errors import ConfigurationError, UnsupportedImageSizeError
from sidecar.profiles import ProfileOverrides, load_profile
from sidecar.vision.keye import KeyeRule
from tests.support.family_dirs import write_keye_dir


@pytest.fixture(scope="module")
def keye_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_keye_dir(tmp_path_factory.mktemp("keye"))


def rule(directory: Path, overrides: ProfileOverrides | None = None) -> KeyeRule:
    vision = load_profile(str(directory), overrides).vision.rule
    assert isinstance(vision, KeyeRule)
    return vision


@pytest.mark.parametrize(
    ("size", "tokens"),
    [
        ((640, 480), 391),  # 644 x 476 px: 23 x 17 cells of 28 px
        ((1, 1), 144),  # enlarged to 28 x 28, then raised past the minimum: 12 x 12 cells
        ((4000, 4000), 1225),  # floored under 1,003,520 px: 35 x 35 cells
        ((3, 500), 167),  # enlarged to 28 x 4,667 first (167:1, passes): 1 x 167 cells
    ],
)
def test_counts_are_vllms(keye_dir: Path, size: tuple[int, int], tokens: int) -> None:
    assert rule(keye_dir).image_tokens(*size).tokens == tokens


def test_an_image_over_200_to_1_after_enlargement_is_refused(keye_dir: Path) -> None:
    with pytest.raises(UnsupportedImageSizeError, match="aspect ratio"):
        rule(keye_dir).image_tokens(3, 900)


def test_the_bounds_are_the_image_processors_own(tmp_path: Path) -> None:
    capped = rule(write_keye_dir(tmp_path, max_pixels=200704))
    assert capped.image_tokens(4000, 4000).tokens == 256
    assert capped.max_image_tokens().tokens == 256


def test_keye_vl_1_5_is_priced_as_keye(tmp_path: Path) -> None:
    directory = write_keye_dir(tmp_path, architecture="KeyeVL1_5ForConditionalGeneration")
    assert rule(directory).image_tokens(640, 480).tokens == 391


@pytest.mark.parametrize("kwargs", [{"max_pixels": 200704}, {"do_rescale": True}])
def test_no_kwarg_is_priced_since_each_reaches_the_remote_processor(
    keye_dir: Path, kwargs: dict[str, object]
) -> None:
    with pytest.raises(ConfigurationError, match="cannot price"):
        load_profile(str(keye_dir), ProfileOverrides(mm_processor_kwargs=kwargs))
