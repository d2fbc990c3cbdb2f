"""Llama 4: up to ``max_patches`` tiles of 336 px on the best-fitting canvas, plus a global tile.

``Llama4ImageProcessor`` lists every canvas of at most ``max_patches`` tiles, then picks the
one needing the smallest upscale (or, when none fits, the least downscale), the smallest
area on a tie; without ``resize_to_max_canvas`` it never upscales past one tile. A canvas
of more than one tile adds a global tile. Each tile is ``(336/14)**2 / 4 = 144``
``<|patch|>`` tokens after pixel shuffle. ``Llama4Processor`` writes
``<|image_start|>``, then per tile row the tiles' patches separated by
``<|tile_x_separator|>`` and ended by ``<|tile_y_separator|>`` (multi-tile only), then
``<|image|>`` + the global (or only) tile's patches + ``<|image_end|>``; ``tokens`` counts
them all: ``145 * tiles + 147`` for a multi-tile canvas, 147 for one tile.

The processor is torchvision-only; ``get_best_fit`` runs on torch tensors, where dividing
the int64 canvas sizes by the image's sides yields float32. The scales below are rounded
to float32 the same way, so ties and ``>= 1`` tests fall exactly as they do there.
"""

from __future__ import annotations

import functools
import struct
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from sidecar.vision import ImageTokens
from sidecar.vision.tiling import Size, TiledDownscale, fit_inside

Canvas = tuple[int, int]  # (height, width) in pixels
FRAME_TOKENS = 3  # <|image_start|>, <|image|> and <|image_end|>


@functools.cache
def supported_canvases(max_tiles: int, tile_px: int) -> tuple[Canvas, ...]:
    """``find_supported_resolutions``, in its order (which settles equal-area ties)."""
    by_ratio: defaultdict[float, list[tuple[int, int]]] = defaultdict(list)
    for tiles in range(max_tiles, 0, -1):
        factors = sorted({f for i in range(1, int(tiles**0.5) + 1) if tiles % i == 0
                          for f in (i, tiles // i)})  # fmt: skip
        for factor in factors:
            by_ratio[factor / (tiles // factor)].append((factor, tiles // factor))
    return tuple((h * tile_px, w * tile_px) for grids in by_ratio.values() for h, w in grids)


def best_canvas(
    height_px: int, width_px: int, canvases: tuple[Canvas, ...], *, resize_to_max_canvas: bool
) -> Canvas:
    """``get_best_fit``, with torch's float32 scales."""
    scales = [
        min(_float32(w / width_px), _float32(h / height_px)) for h, w in canvases
    ]  # torch.where(scale_h > scale_w, scale_w, scale_h): equal values are interchangeable
    upscaling = [s for s in scales if s >= 1]
    if upscaling:
        selected = max(upscaling) if resize_to_max_canvas else min(upscaling)
    else:
        selected = max(s for s in scales if s < 1)
    chosen = [c for c, s in zip(canvases, scales, strict=True) if s == selected]
    return min(chosen, key=lambda c: c[0] * c[1])  # argmin: the first of equal areas


@dataclass(frozen=True, slots=True)
class Llama4Rule(TiledDownscale):
    """``145 * tiles + 147`` tokens on a multi-tile canvas, 147 on a single tile."""

    family: str
    tile_px: int
    max_patches: int
    tokens_per_tile: int
    resize_to_max_canvas: bool = False
    wrapper_tokens: int = 0  # the template's "<|image|>" is what the processor replaces

    @classmethod
    def from_configs(
        cls, family: str, config: dict[str, Any], preprocessor: dict[str, Any]
    ) -> Llama4Rule:
        """Build from ``config.json`` and the (pre)processor config values."""
        vision = config.get("vision_config") or {}
        size = preprocessor.get("size") or {}
        tile = int(size.get("height") or vision.get("image_size") or 336)
        if int(size.get("width") or tile) != tile:
            raise ValueError("Llama 4 tiles must be square")
        patch = int(preprocessor.get("patch_size") or vision.get("patch_size") or 14)
        shuffle = float(
            preprocessor.get("pixel_shuffle_ratio") or vision.get("pixel_shuffle_ratio") or 0.5
        )
        downsample = round(1.0 / shuffle**2)
        return cls(
            family,
            tile,
            int(preprocessor.get("max_patches", 16)),
            (tile // patch) ** 2 // downsample,
            bool(preprocessor.get("resize_to_max_canvas", False)),
        )

    def canvas(self, width_px: int, height_px: int) -> Canvas:
        """(height, width) of the canvas the processor tiles."""
        canvases = supported_canvases(self.max_patches, self.tile_px)
        return best_canvas(
            height_px, width_px, canvases, resize_to_max_canvas=self.resize_to_max_canvas
        )

    def _tokens_for(self, tiles: int) -> int:
        if tiles == 1:
            return FRAME_TOKENS + self.tokens_per_tile
        # Each tile is followed by one separator (x within a row, y at its end).
        return tiles * (self.tokens_per_tile + 1) + FRAME_TOKENS + self.tokens_per_tile

    def image_tokens(self, width_px: int, height_px: int) -> ImageTokens:
        height, width = self.canvas(width_px, height_px)
        tiles = (height // self.tile_px) * (width // self.tile_px)
        return ImageTokens(tokens=self._tokens_for(tiles), wrapper_tokens=self.wrapper_tokens)

    def max_image_tokens(self) -> ImageTokens:
        return ImageTokens(
            tokens=self._tokens_for(self.max_patches), wrapper_tokens=self.wrapper_tokens
        )

    def downscale_candidates(self, width_px: int, height_px: int) -> list[Size]:
        """The image fitted into each canvas."""
        # Fitted exactly into a canvas, the image needs no resize there (scale 1), so that
        # canvas or a smaller one of the same limiting side is chosen: one candidate a canvas.
        return [
            fit_inside(width_px, height_px, w, h)
            for h, w in supported_canvases(self.max_patches, self.tile_px)
        ]

    def describe(self) -> str:
        return (
            f"canvas of up to {self.max_patches} tiles of {self.tile_px} px + global tile; "
            f"tokens = {self.tokens_per_tile + 1} a tile + {FRAME_TOKENS + self.tokens_per_tile}, "
            f"up to {self.max_image_tokens().tokens:,}"
        )


def _float32(value: float) -> float:
    """``value`` rounded to float32: a double quotient re-rounded is the float32 quotient."""
    result: float = struct.unpack("f", struct.pack("f", value))[0]
    return result
