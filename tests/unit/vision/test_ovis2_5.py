"""Ovis 2.5: its processor's own smart_resize (32 px), which enlarges or cuts instead of refusing.

The figures are vLLM 0.33's (read from its processor in the renderer tier:
tests/renderer/test_new_families.py).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from sidecar.errors import UnsupportedImageSizeError
from sidecar.profiles import ProfileOverrides, load_profile
from sidecar.vision.ovis2_5 import Ovis2_5Rule
from tests.support.family_dirs import write_ovis2_5_dir


@pytest.fixture(scope="module")
def ovis_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_ovis2_5_dir(tmp_path_factory.mktemp("ovis"))


def rule(directory: Path, overrides: ProfileOverrides | None = None) -> Ovis2_5Rule:
    vision = load_profile(str(directory), overrides).vision.rule
    assert isinstance(vision, Ovis2_5Rule)
    return vision


@pytest.mark.parametrize(
    ("size", "tokens"),
    [
        ((640, 480), 302),  # raised to 200,704 px: 20 x 15 cells of 32 px, + 2
        ((1, 1), 198),  # 32 x 32, raised to the minimum: 14 x 14 cells
        ((3, 900), 302),  # enlarged to 32 x 9,600 and not refused: 300:1 passes
        ((10000, 20), 502),  # enlarged to 16,000 x 32
        ((4000, 4000), 3138),  # cut to 1,792 x 1,792: 56 x 56 cells
    ],
)
def test_counts_are_vllms(ovis_dir: Path, size: tuple[int, int], tokens: int) -> None:
    assert rule(ovis_dir).image_tokens(*size).tokens == tokens


def test_an_image_over_200_to_1_with_both_sides_over_a_cell_is_cut_not_refused(
    ovis_dir: Path,
) -> None:
    ovis = rule(ovis_dir)
    assert ovis.image_tokens(40, 12000).tokens == ovis.image_tokens(40, 8000).tokens


def test_pixel_kwargs_do_not_reach_the_processor(ovis_dir: Path) -> None:
    capped = rule(ovis_dir, ProfileOverrides(mm_processor_kwargs={"max_pixels": 200704}))
    assert capped == rule(ovis_dir)
    assert capped.max_image_tokens().tokens == 3138


def test_a_downscale_pays_the_two_frame_tokens(ovis_dir: Path) -> None:
    ovis = rule(ovis_dir)
    size = ovis.downscale_size(4000, 3000, max_tokens=1000, max_pixels=None)
    assert ovis.image_tokens(*size).tokens <= 1000


def test_a_size_that_resizes_to_no_columns_is_refused_as_the_processor_fails(
    ovis_dir: Path,
) -> None:
    with pytest.raises(UnsupportedImageSizeError, match="1x4000 resizes to 0x"):
        rule(ovis_dir).image_tokens(1, 4000)
