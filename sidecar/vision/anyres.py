"""LLaVA-NeXT and LLaVA-OneVision: "anyres" grids of base tiles, unpadded, one newline a row.

The processor picks the grid pinpoint (a canvas of whole tiles) that keeps the most of the
image's resolution and wastes the least, resizes the image into it without distortion and
pads the rest. The model then drops the padding's features ("unpadding") and adds one
newline feature per feature row, plus the features of one base tile of the whole image.
LLaVA-OneVision's ``anyres_max_N`` shrinks the unpadded grid when it exceeds N tiles' worth.

``tokens`` is the number of ``<image>`` tokens the processor expands the placeholder into:
``LlavaNextProcessor._get_number_of_features`` and its OneVision twin, line for line, the
``round(..., 7)`` and the float floor divisions included. Granite 4 Vision
(``granite4_vision.py``) is LLaVA-NeXT's count on its Window Q-Former's pooled grid.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from sidecar.vision import ImageTokens
from sidecar.vision.tiling import Size, TiledDownscale, fit_inside

Pinpoint = tuple[int, int]  # (height, width) in pixels, as image_grid_pinpoints lists them


def select_best_resolution(
    height_px: int, width_px: int, pinpoints: tuple[Pinpoint, ...]
) -> Pinpoint:
    """transformers' ``select_best_resolution``: most effective pixels, then least waste."""
    best = pinpoints[0]
    max_effective, min_wasted = 0, math.inf
    for height, width in pinpoints:
        scale = min(width / width_px, height / height_px)
        downscaled = int(width_px * scale) * int(height_px * scale)
        effective = min(downscaled, width_px * height_px)
        wasted = width * height - effective
        if effective > max_effective or (effective == max_effective and wasted < min_wasted):
            max_effective, min_wasted, best = effective, wasted, (height, width)
    return best


@dataclass(frozen=True, slots=True)
class AnyresRule(TiledDownscale):
    """Base tile + unpadded grid features + one newline per feature row."""

    family: str
    tile_px: int  # side of one base tile
    grid_side: int  # features along one side of a tile
    pinpoints: tuple[Pinpoint, ...]
    base_tokens: int  # the whole-image tile, with CLS kept or dropped by the select strategy
    max_num_patches: int | None = None  # OneVision's anyres_max_N; None for LLaVA-NeXT
    wrapper_tokens: int = 0  # the template's "<image>\n": the newline merges with text

    @classmethod
    def from_llava_next_configs(
        cls, family: str, config: dict[str, Any], preprocessor: dict[str, Any]
    ) -> AnyresRule:
        """LLaVA-NeXT: CLIP tiles; the base tile keeps CLS unless the strategy is "default"."""
        vision = config.get("vision_config") or {}
        tile = _tile_side(preprocessor) or int(vision.get("image_size") or 336)
        patch = int(preprocessor.get("patch_size") or vision.get("patch_size") or 14)
        grid_side = tile // patch
        # llava-hf's processor_config.json sets 1 for CLIP's CLS token, which the model keeps.
        extra = int(preprocessor.get("num_additional_image_tokens", 1))
        base = grid_side**2 + extra - _dropped_cls(config, preprocessor, "default")
        return cls(family, tile, grid_side, _pinpoints(config, preprocessor), base)

    @classmethod
    def from_llava_onevision_configs(
        cls, family: str, config: dict[str, Any], preprocessor: dict[str, Any]
    ) -> AnyresRule:
        """LLaVA-OneVision: SigLIP tiles without CLS, and the anyres_max reduction."""
        vision = config.get("vision_config") or {}
        tile = _tile_side(preprocessor) or int(vision.get("image_size") or 384)
        tile_tokens = int(
            preprocessor.get("num_image_tokens")
            or (int(vision.get("image_size") or tile) // int(vision.get("patch_size") or 14)) ** 2
        )
        aspect = str(
            preprocessor.get("vision_aspect_ratio")
            or config.get("vision_aspect_ratio")
            or "anyres_max_9"
        )
        max_num_patches = int(aspect.strip("anyres_max_"))  # noqa: B005 - as the processor does
        base = tile_tokens - _dropped_cls(config, preprocessor, "full")
        return cls(
            family,
            tile,
            math.isqrt(tile_tokens),
            _pinpoints(config, preprocessor),
            base,
            max_num_patches,
        )

    @classmethod
    def from_granite4_vision_configs(
        cls, family: str, config: dict[str, Any], preprocessor: dict[str, Any]
    ) -> AnyresRule:
        """Granite 4 Vision: Granite4VisionProcessingInfo.get_num_image_tokens, LLaVA-NeXT's
        count on the Window Q-Former's grid: the tower's patch grid times ``downsample_rate``
        for both the base tile and each grid tile, from config.json alone (vLLM reads neither
        the select strategy nor the processor's additional tokens)."""
        vision = config.get("vision_config") or {}
        tile = int(vision.get("image_size") or 384)
        patches = tile // int(vision.get("patch_size") or 16)
        rate = config.get("downsample_rate")
        if rate is None:
            raise ValueError("a granite4_vision config.json needs a downsample_rate")
        grid_side = int(patches * Fraction(str(rate)))
        points = config.get("image_grid_pinpoints") or _pinpoints(config, preprocessor)
        pinpoints = tuple((int(h), int(w)) for h, w in points)
        return cls(family, tile, grid_side, pinpoints, grid_side * grid_side)

    def grid_features(self, width_px: int, height_px: int) -> tuple[int, int]:
        """(unpadded features, newline features) of the grid the processor picks."""
        pinpoint = select_best_resolution(height_px, width_px, self.pinpoints)
        return self._features_on(pinpoint, width_px, height_px)

    def _features_on(self, pinpoint: Pinpoint, width_px: int, height_px: int) -> tuple[int, int]:
        current_height = self.grid_side * (pinpoint[0] // self.tile_px)
        current_width = self.grid_side * (pinpoint[1] // self.tile_px)
        if width_px / height_px > current_width / current_height:
            new_height = int(round(height_px * (current_width / width_px), 7))
            current_height -= (current_height - new_height) // 2 * 2
        else:
            new_width = int(round(width_px * (current_height / height_px), 7))
            current_width -= (current_width - new_width) // 2 * 2
        unpadded, newlines = current_height * current_width, current_height
        if self.max_num_patches is not None:
            ratio = math.sqrt(
                current_height * current_width / (self.max_num_patches * self.grid_side**2)
            )
            if ratio > 1.1:
                unpadded = int(current_height // ratio) * int(current_width // ratio)
                newlines = int(current_height // ratio)
        return unpadded, newlines

    def image_tokens(self, width_px: int, height_px: int) -> ImageTokens:
        unpadded, newlines = self.grid_features(width_px, height_px)
        return ImageTokens(
            tokens=self.base_tokens + unpadded + newlines, wrapper_tokens=self.wrapper_tokens
        )

    def max_image_tokens(self) -> ImageTokens:
        return ImageTokens(tokens=costliest_image(self)[0], wrapper_tokens=self.wrapper_tokens)

    def downscale_candidates(self, width_px: int, height_px: int) -> list[Size]:
        """The image fitted into each pinpoint and into one tile."""
        # Shrinking never changes the aspect ratio here: it only moves the image onto a smaller
        # pinpoint, so the candidates are the image fitted into each pinpoint and into one tile.
        boxes = [(w, h) for h, w in self.pinpoints] + [(self.tile_px, self.tile_px)]
        return [fit_inside(width_px, height_px, *box) for box in boxes]

    def describe(self) -> str:
        reduction = f", anyres_max_{self.max_num_patches}" if self.max_num_patches else ""
        return (
            f"anyres grid of {self.tile_px} px tiles, {len(self.pinpoints)} pinpoints{reduction}; "
            f"tokens = {self.base_tokens} base + unpadded {self.grid_side}x{self.grid_side} "
            f"features per tile + 1 newline per row, up to {costliest_image(self)[0]:,}"
        )


@functools.cache
def costliest_image(rule: AnyresRule) -> tuple[int, Size]:
    """The most tokens any image can cost, and a (width, height) that costs them.

    An image that some pinpoint contains goes to the smallest such pinpoint (the first
    listed, on a tie): all of them keep every pixel, and it wastes the least. Scaling such
    an image up until it touches its pinpoint's edge keeps both the pinpoint and the cost,
    so walking every pinpoint's two edges covers all of them. An image no pinpoint contains
    is priced by its aspect ratio, so one pass along the edges of a large square covers it.
    """
    order = sorted(range(len(rule.pinpoints)), key=lambda i: (_area(rule.pinpoints[i]), i))
    best = (0, (1, 1))
    for rank, index in enumerate(order):
        height, width = rule.pinpoints[index]
        earlier = [rule.pinpoints[i] for i in order[:rank]]
        # (width, h) goes to an earlier pinpoint at least as wide and at least h tall.
        lowest = max((qh for qh, qw in earlier if qw >= width), default=0)
        edge: list[Size] = [(width, h) for h in range(lowest + 1, height + 1)]
        lowest = max((qw for qh, qw in earlier if qh >= height), default=0)
        edge += [(w, height) for w in range(lowest + 1, width + 1)]
        for w, h in edge:
            unpadded, newlines = rule._features_on((height, width), w, h)
            best = max(best, (rule.base_tokens + unpadded + newlines, (w, h)))
    side = 2 * max(max(p) for p in rule.pinpoints)
    for x in range(1, side + 1):
        for w, h in ((side, x), (x, side)):
            best = max(best, (rule.image_tokens(w, h).tokens, (w, h)))
    return best


def _area(pinpoint: Pinpoint) -> int:
    return pinpoint[0] * pinpoint[1]


def _tile_side(preprocessor: dict[str, Any]) -> int | None:
    """The side the processor's size-only count uses: shortest_edge, or the square's side."""
    size = preprocessor.get("size") or {}
    if size.get("shortest_edge"):
        return int(size["shortest_edge"])
    if size.get("height") and size.get("width"):
        return min(int(size["height"]), int(size["width"]))
    return None


def _pinpoints(config: dict[str, Any], preprocessor: dict[str, Any]) -> tuple[Pinpoint, ...]:
    points = preprocessor.get("image_grid_pinpoints") or config.get("image_grid_pinpoints")
    if not points:
        raise ValueError("no image_grid_pinpoints in the preprocessor config or config.json")
    return tuple((int(h), int(w)) for h, w in points)


def _dropped_cls(config: dict[str, Any], preprocessor: dict[str, Any], default: str) -> int:
    """1 when the "default" feature-select strategy drops the first (CLS) feature."""
    strategy = (
        preprocessor.get("vision_feature_select_strategy")
        or config.get("vision_feature_select_strategy")
        or default
    )
    return 1 if strategy == "default" else 0
