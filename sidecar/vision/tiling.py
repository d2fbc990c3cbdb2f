"""Shared downscale geometry: fitting a size into a box or a pixel cap, picking a downscale.

Tile processors (LLaVA-NeXT, LLaVA-OneVision, InternVL, Idefics3, SmolVLM, Llama 4) charge
per tile of a grid they choose from the image's size. Their costs are step functions, so a
downscale is chosen among a few candidate sizes that land exactly on a grid: each family
proposes its candidates (``TiledDownscale.downscale_candidates``), and ``pick_downscale``
prices every one with the family's own exact rule and keeps the best that fits. No candidate
is trusted without being priced. ``cap_pixels``, ``within_caps`` and ``already_fits`` also
serve the families whose cost does not follow tiles (fixed-cost, Qwen, Pixtral).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from fractions import Fraction
from typing import Protocol

from sidecar.errors import UnsupportedImageSizeError
from sidecar.vision import ImageTokens, NoPixelRange, VisionRule

Size = tuple[int, int]  # (width, height) in pixels

# Pixel rounding moves a size's aspect ratio by well under this (log-ratio, about 1 %), so
# candidates this close to the least distorted one count as undistorted and compete on area.
_SAME_ASPECT = 0.01


def fit_inside(width_px: int, height_px: int, box_width_px: int, box_height_px: int) -> Size:
    """Largest size with the image's aspect ratio inside the box, never above the image.

    Exact rational arithmetic: the limiting side lands on the box side itself, so a size
    meant to fill a tile grid fills it. Sides are at least 1 px.
    """
    scale = min(Fraction(1), Fraction(box_width_px, width_px), Fraction(box_height_px, height_px))
    return max(1, math.floor(width_px * scale)), max(1, math.floor(height_px * scale))


def within_caps(
    tokens: int, width_px: int, height_px: int, *, max_tokens: int | None, max_pixels: int | None
) -> bool:
    """Whether a size that costs ``tokens`` honours both caps (None: no cap)."""
    return (max_tokens is None or tokens <= max_tokens) and (
        max_pixels is None or width_px * height_px <= max_pixels
    )


def already_fits(
    rule: VisionRule,
    width_px: int,
    height_px: int,
    *,
    max_tokens: int | None,
    max_pixels: int | None,
) -> bool:
    """Whether the original size honours both caps as it is.

    The size is priced first, so one the processor refuses raises UnsupportedImageSizeError
    whatever the caps.
    """
    tokens = rule.image_tokens(width_px, height_px).tokens
    return within_caps(tokens, width_px, height_px, max_tokens=max_tokens, max_pixels=max_pixels)


def cap_pixels(width_px: int, height_px: int, max_pixels: int | None) -> Size:
    """The size scaled down, aspect ratio kept, to at most ``max_pixels`` (>= 1) pixels."""
    if max_pixels is None or width_px * height_px <= max_pixels:
        return width_px, height_px
    if max_pixels < 1:
        raise ValueError(f"max_pixels must be at least 1, got {max_pixels}")
    scale = math.sqrt(max_pixels / (width_px * height_px))
    width = max(1, math.floor(width_px * scale))
    height = max(1, math.floor(height_px * scale))
    # Float rounding or a side clamped up to 1 px can overshoot: trim the longer side.
    while width * height > max_pixels:
        if width >= height:
            width = max(1, max_pixels // height)
        else:
            height = max(1, max_pixels // width)
    return width, height


def distortion(size: Size, width_px: int, height_px: int) -> float:
    """How far a size's aspect ratio is from the original's, as an absolute log-ratio."""
    return abs(math.log((size[0] * height_px) / (size[1] * width_px)))


def pick_downscale(
    tokens: Callable[[int, int], int],
    width_px: int,
    height_px: int,
    candidates: Iterable[Size],
    *,
    max_tokens: int | None,
    max_pixels: int | None,
) -> Size:
    """The best candidate within the original's sides and both caps.

    Each candidate is first scaled down to ``max_pixels``, then priced with ``tokens``.
    The original wins when it fits; otherwise the least distorted fitting candidate, and
    among those equally distorted the largest. Raises UnsupportedImageSizeError when none
    fits.
    """
    fitting: list[Size] = []
    for candidate in [(width_px, height_px), *candidates]:
        width = min(candidate[0], width_px)
        height = min(candidate[1], height_px)
        size = cap_pixels(width, height, max_pixels)
        if max_tokens is None or tokens(*size) <= max_tokens:
            if size == (width_px, height_px):
                return size
            fitting.append(size)
    if not fitting:
        raise UnsupportedImageSizeError(
            f"image {width_px}x{height_px} cannot be downscaled to {max_tokens:,} tokens: "
            f"even this model's smallest tile grid costs more"
        )
    least = min(distortion(s, width_px, height_px) for s in fitting)
    close = [s for s in fitting if distortion(s, width_px, height_px) <= least + _SAME_ASPECT]
    return max(close, key=lambda s: (s[0] * s[1], -distortion(s, width_px, height_px)))


class _TiledRule(Protocol):
    """What ``TiledDownscale`` needs of the rule it is mixed into."""

    def image_tokens(self, width_px: int, height_px: int) -> ImageTokens: ...

    def downscale_candidates(self, width_px: int, height_px: int) -> Iterable[Size]: ...


class TiledDownscale(NoPixelRange):
    """Mixin for the tile families: ``downscale_size`` picks among the family's candidates.

    The rule supplies ``downscale_candidates``: sizes that land exactly on a smaller grid.
    Tile processors have no pixel range, so vLLM's pixel bounds leave the rule unchanged.
    """

    __slots__ = ()

    def downscale_size(
        self: _TiledRule,
        width_px: int,
        height_px: int,
        *,
        max_tokens: int | None,
        max_pixels: int | None,
    ) -> Size:
        """The best priced candidate within both caps; see ``pick_downscale``."""
        return pick_downscale(
            lambda w, h: self.image_tokens(w, h).tokens,
            width_px,
            height_px,
            self.downscale_candidates(width_px, height_px),
            max_tokens=max_tokens,
            max_pixels=max_pixels,
        )
