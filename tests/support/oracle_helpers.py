"""What the vision oracle tests share: sampled sizes, outcomes and the mismatch checks.

Each ``test_vision_oracle*.py`` module holds families of (sidecar rule, transformers processor)
and checks, size by size, that the rule's outcome equals the processor's: a token count, or a
refusal. The sizes are drawn here so every module samples them alike, seeded per module; the
checks collect every disagreeing size before failing, so one run shows the whole pattern.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

from PIL import Image

MAX_SIDE_PX = 10_000  # the longest side any oracle test samples
REAL_IMAGE_MAX_PIXELS = 1_500_000  # random real images stay small; extremes add the big ones
REFUSED = "refused"

Size = tuple[int, int]  # (width, height), as the sidecar takes them
T = TypeVar("T")

# Every family is checked at these: tiny images, extreme aspect ratios, common photos.
COMMON_EXTREMES: tuple[Size, ...] = (
    (1, 1), (2, 2), (3, 3), (1, 2), (1, 3), (3, 1),
    (1, MAX_SIDE_PX), (MAX_SIDE_PX, 1), (MAX_SIDE_PX, MAX_SIDE_PX),
    (MAX_SIDE_PX, 50), (50, MAX_SIDE_PX),
    (4032, 3024), (3024, 4032), (3840, 2160), (2160, 3840), (1920, 1080),
    (1024, 1024), (512, 512), (640, 480),
)  # fmt: skip
# Around the aspect-ratio limit of 200 that Qwen-style processors refuse past.
ASPECT_LIMIT_EXTREMES: tuple[Size, ...] = (
    (199, 1), (200, 1), (201, 1), (1, 199), (1, 200), (1, 201),
    (MAX_SIDE_PX, 49), (49, MAX_SIDE_PX),
)  # fmt: skip


def log_uniform_sizes(
    rng: random.Random, count: int, *, max_pixels: int | None = None, max_aspect: float = math.inf
) -> Iterator[Size]:
    """Sides log-uniform in [1, MAX_SIDE_PX]; sizes over either bound are drawn again."""
    made = 0
    while made < count:
        width = min(MAX_SIDE_PX, round(10 ** rng.uniform(0, math.log10(MAX_SIDE_PX))))
        height = min(MAX_SIDE_PX, round(10 ** rng.uniform(0, math.log10(MAX_SIDE_PX))))
        if max_pixels is not None and width * height > max_pixels:
            continue
        if max(width, height) > max_aspect * min(width, height):
            continue
        made += 1
        yield width, height


def outcome(count: Callable[[], T], *refusals: type[Exception], named: bool = False) -> T | str:
    """``count()``, or ``REFUSED`` (the error's class name with ``named``) if it raises one of
    ``refusals``."""
    try:
        return count()
    except refusals as error:
        return type(error).__name__ if named else REFUSED


def check_size_only(
    sizes: list[Size], predicted: Callable[[Size], object], size_only: Callable[[Size], object]
) -> None:
    """Assert that the rule's outcome is the processor's size-only count at every size."""
    mismatches = []
    for size in sizes:
        expected = size_only(size)
        got = predicted(size)
        if got != expected:
            mismatches.append(f"{size[0]}x{size[1]}: sidecar {got}, processor {expected}")
    assert not mismatches, mismatch_report(mismatches, len(sizes))


def check_real_images(
    sizes: list[Size],
    predicted: Callable[[Size], object],
    size_only: Callable[[Size], object],
    processed: Callable[[Image.Image], object],
) -> None:
    """Assert that rule, size-only count and the processor run on a real image all agree."""
    mismatches = []
    for size in sizes:
        image = Image.new("RGB", size, (128, 64, 32))
        full = processed(image)
        cheap = size_only(size)
        got = predicted(size)
        if not got == cheap == full:
            mismatches.append(
                f"{size[0]}x{size[1]}: sidecar {got}, size-only {cheap}, processed {full}"
            )
    assert not mismatches, mismatch_report(mismatches, len(sizes))


def mismatch_report(mismatches: list[str], checked: int, *, shown: int = 50) -> str:
    """The failure message: how many sizes disagree, and the first ``shown`` of them."""
    return f"{len(mismatches)} of {checked} sizes disagree:\n" + "\n".join(mismatches[:shown])


def legal_grid_exists(
    width_px: int, height_px: int, *, factor: int, min_grid: int, grid_cap: int
) -> bool:
    """Brute force for Qwen-style downscales: is any grid of ``factor`` cells within the
    original's sides, ``[min_grid, grid_cap]`` cells and the aspect-ratio limit of 200?"""
    max_w, max_h = max(1, width_px // factor), max(1, height_px // factor)
    for grid_h in range(1, max_h + 1):
        low = max(1, -(-min_grid // grid_h), -(-grid_h // 200))
        if low <= min(max_w, grid_cap // grid_h, 200 * grid_h):
            return True
    return False


def without_video(processor_class: type[Any]) -> type[Any]:
    """The processor class minus its video processor, which needs torch."""

    class WithoutVideo(processor_class):  # type: ignore[misc]
        @classmethod
        def get_attributes(cls) -> list[str]:
            return [a for a in super().get_attributes() if a != "video_processor"]

    return WithoutVideo
