"""Cohere2Vision (Command A Vision): up to ``max_patches`` tiles of 512 px plus a thumbnail.

vLLM 0.33's ``Cohere2VisionProcessingInfo.get_num_patches`` asks transformers'
``Cohere2VisionImageProcessor.get_number_of_image_patches``: with ``crop_to_patches`` and
``max_patches`` over 1, ``get_optimal_tiled_canvas`` lists every grid of at most
``max_patches`` tiles (columns x rows, fewest tiles first) and picks the one needing the least
upscale to hold the image, or, when every grid needs a downscale, the least downscale; the
first such grid on a tie. A grid of several tiles adds a thumbnail tile. ``min_patches`` is
passed along but never read by the grid search, so it changes nothing.

Each tile is ``patch_size**2`` ``<|IMG_PATCH|>`` tokens (the image processor's ``patch_size``,
16: a 512 px SigLIP tile of 16 px patches, pixel-shuffled 2 x 2) and one
``<|IMG_LINE_BREAK|>``; ``<|START_OF_IMG|>`` and ``<|END_OF_IMG|>`` wrap them all. The chat
template's single ``<|IMG_PATCH|>`` is what the prompt update replaces, so nothing is added
around it: ``tokens = 2 + (patch_size**2 + 1) * tiles``.

The grid search divides in float64 (numpy) as here; ``candidate / side`` is one IEEE
division either way, so ties fall exactly as they do there.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

from sidecar.errors import ConfigurationError
from sidecar.vision import ImageTokens
from sidecar.vision.tiling import Size, TiledDownscale, fit_inside

Grid = tuple[int, int]  # (columns, rows)
BOUNDARY_TOKENS = 2  # <|START_OF_IMG|> and <|END_OF_IMG|>
LINE_BREAK_TOKENS = 1  # <|IMG_LINE_BREAK|> after each tile's patches
# The --mm-processor-kwargs that reach vLLM's count (top level only: vLLM's count reads the
# merged kwargs' top level, and the image processor's attributes set from them).
PROCESSOR_KNOBS = frozenset({"crop_to_patches", "min_patches", "max_patches"})


@functools.cache
def tile_grids(max_tiles: int) -> tuple[Grid, ...]:
    """``get_all_supported_aspect_ratios`` sorted by tile count (a stable sort, as there)."""
    grids = [
        (columns, rows)
        for columns in range(1, max_tiles + 1)
        for rows in range(1, max_tiles + 1)
        if columns * rows <= max_tiles
    ]
    return tuple(sorted(grids, key=lambda grid: grid[0] * grid[1]))


def optimal_grid(width_px: int, height_px: int, tile_px: int, max_tiles: int) -> Grid:
    """``get_optimal_tiled_canvas``: the grid of least upscale, else of least downscale."""
    grids = tile_grids(max_tiles)
    # Both sides of each canvas are scaled by the tile's height there (square tiles).
    scales = [min(c * tile_px / width_px, r * tile_px / height_px) for c, r in grids]
    upscaling = [scale for scale in scales if scale >= 1.0]
    chosen = min(upscaling) if upscaling else max(scales)
    return grids[scales.index(chosen)]  # argmin / argmax: the first of equal scales


@dataclass(frozen=True, slots=True)
class Cohere2VisionRule(TiledDownscale):
    """``2 + (patch_size**2 + 1) * (grid tiles + thumbnail)``."""

    family: str
    tile_px: int
    max_patches: int
    tokens_per_tile: int  # patch_size**2
    crop_to_patches: bool = True
    wrapper_tokens: int = 0  # the template's <|IMG_PATCH|> is what the processor replaces

    @classmethod
    def from_configs(
        cls, family: str, config: dict[str, Any], preprocessor: dict[str, Any]
    ) -> Cohere2VisionRule:
        """Build from ``config.json`` and the image processor's values, kwargs merged over
        them; transformers' Cohere2VisionImageProcessor defaults where absent."""
        del config  # vLLM's count reads the image processor alone
        size = preprocessor.get("size") or {}
        tile = int(size.get("height") or 512)
        if int(size.get("width") or tile) != tile:
            raise ConfigurationError(
                f"{family}: size {size} is not square; vLLM's grid search scales both sides "
                "by the tile's height, which this rule does not price"
            )
        max_patches = _integer(family, "max_patches", preprocessor.get("max_patches", 12))
        _integer(family, "min_patches", preprocessor.get("min_patches", 1))  # never read
        crop = preprocessor.get("crop_to_patches", True)
        if not isinstance(crop, bool):
            raise ConfigurationError(f"{family}: crop_to_patches must be true or false")
        if crop and max_patches < 1:
            # vLLM counts one tile, but the image processor's grid search has no grid to
            # choose from and every image fails.
            raise ConfigurationError(
                f"{family}: max_patches {max_patches} leaves the image processor no tile grid"
            )
        patch = _integer(family, "patch_size", preprocessor.get("patch_size", 16))
        return cls(family, tile, max_patches, patch**2, crop)

    def tiles(self, width_px: int, height_px: int) -> int:
        """Tiles the processor emits: the grid, plus a thumbnail when the grid has several."""
        if not self.crop_to_patches or self.max_patches <= 1:
            return 1
        columns, rows = optimal_grid(width_px, height_px, self.tile_px, self.max_patches)
        return columns * rows + 1 if columns * rows > 1 else 1

    def _tokens_for(self, tiles: int) -> int:
        return BOUNDARY_TOKENS + (self.tokens_per_tile + LINE_BREAK_TOKENS) * tiles

    def image_tokens(self, width_px: int, height_px: int) -> ImageTokens:
        return ImageTokens(
            tokens=self._tokens_for(self.tiles(width_px, height_px)),
            wrapper_tokens=self.wrapper_tokens,
        )

    def max_image_tokens(self) -> ImageTokens:
        most = self.max_patches + 1 if self.crop_to_patches and self.max_patches > 1 else 1
        return ImageTokens(tokens=self._tokens_for(most), wrapper_tokens=self.wrapper_tokens)

    def downscale_candidates(self, width_px: int, height_px: int) -> list[Size]:
        """The image fitted into each grid's canvas."""
        # Fitted into a canvas, the image needs no resize there (scale 1), so that canvas or
        # an earlier one of the same limiting side is chosen: one candidate a grid.
        if not self.crop_to_patches or self.max_patches <= 1:
            return []
        return [
            fit_inside(width_px, height_px, columns * self.tile_px, rows * self.tile_px)
            for columns, rows in tile_grids(self.max_patches)
        ]

    def describe(self) -> str:
        if not self.crop_to_patches or self.max_patches <= 1:
            return f"one {self.tile_px} px tile; tokens = {self._tokens_for(1)}"
        return (
            f"up to {self.max_patches} tiles of {self.tile_px} px + thumbnail; tokens = "
            f"{BOUNDARY_TOKENS} + {self.tokens_per_tile + LINE_BREAK_TOKENS} per tile, up to "
            f"{self.max_image_tokens().tokens:,}"
        )


def _integer(family: str, name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigurationError(f"{family}: {name} must be an integer, not {value!r}")
    return value
