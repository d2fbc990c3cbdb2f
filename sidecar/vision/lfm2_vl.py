"""LFM2-VL: a thumbnail resized to a token budget, and 512 px tiles for a large image.

vLLM 0.33 builds each image's replacement itself (``lfm2_vl.py``,
``Lfm2VLProcessingInfo.get_image_repl``) from the grid it chooses and the thumbnail's patch
grid that transformers' ``Lfm2VlImageProcessor`` made:

* the thumbnail is the image resized by the processor's ``smart_resize`` to multiples of
  ``encoder_patch_size x downsample_factor`` (32 px) within ``[min_image_tokens,
  max_image_tokens]`` tokens' worth of pixels (64 to 256 as shipped); each side is raised to
  32 px first, so a thin image's thumbnail can hold far more than ``max_image_tokens``;
* an image whose sides, rounded to 32 px (at least 16), cover more than
  ``max_image_tokens x 32² x max_pixels_tolerance`` px is also cut into the
  ``min_tiles..max_tiles`` grid of ``tile_size`` tiles closest to its aspect ratio (InternVL's
  search), each tile ``(tile_size / 16 / 2)²`` = 256 tokens behind a ``<|img_row_R_col_C|>``
  token, then ``<|img_thumbnail|>`` and the thumbnail's tokens;
* ``<|image_start|>`` and ``<|image_end|>`` frame it all.

``tokens = 2 + thumbnail`` for one tile, ``3 + tiles x (1 + 256) + thumbnail`` for a grid. A
tiled image whose thumbnail has more patches than a tile (the processor pads every crop to
the larger of a tile and ``max_image_tokens x 4`` patches) is refused: the processor cannot
stack it with its tiles.

Knobs: vLLM and the processor both read ``min_tiles``, ``max_tiles``, ``tile_size``,
``max_image_tokens``, ``min_image_tokens`` and ``max_pixels_tolerance`` from
``--mm-processor-kwargs``. ``do_image_splitting`` and ``use_thumbnail`` reach the processor
but not vLLM's grid, which then disagrees with it: a checkpoint or server turning either off
is not priced, nor are other patch or downsample sizes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from sidecar.errors import UnsupportedImageSizeError
from sidecar.vision import ImageTokens
from sidecar.vision.internvl_chat import closest_grid, target_ratios
from sidecar.vision.tiling import Size, TiledDownscale, fit_inside

FRAME_TOKENS = 2  # <|image_start|> and <|image_end|>
PROCESSOR_KNOBS = frozenset(
    {"min_tiles", "max_tiles", "tile_size", "max_image_tokens", "min_image_tokens",
     "max_pixels_tolerance"}
)  # fmt: skip
_ENCODER_PATCH_PX = 16
_DOWNSAMPLE_FACTOR = 2


def round_by_factor(number: float, factor: int) -> int:
    """transformers' ``round_by_factor``: Python's rounding, halves to even."""
    return round(number / factor) * factor


def lfm2_smart_resize(
    height_px: int, width_px: int, *, factor: int, min_pixels: int, max_pixels: int
) -> Size:
    """``Lfm2VlImageProcessor.smart_resize``, line for line: (width, height)."""
    h_bar = max(factor, round_by_factor(height_px, factor))
    w_bar = max(factor, round_by_factor(width_px, factor))
    if h_bar * w_bar > max_pixels:
        beta = math.sqrt((height_px * width_px) / max_pixels)
        h_bar = max(factor, math.floor(height_px / beta / factor) * factor)
        w_bar = max(factor, math.floor(width_px / beta / factor) * factor)
    elif h_bar * w_bar < min_pixels:
        beta = math.sqrt(min_pixels / (height_px * width_px))
        h_bar = math.ceil(height_px * beta / factor) * factor
        w_bar = math.ceil(width_px * beta / factor) * factor
    return w_bar, h_bar


@dataclass(frozen=True, slots=True)
class Lfm2VlRule(TiledDownscale):
    """``2 + thumbnail`` for one tile; ``3 + tiles x (1 + tile tokens) + thumbnail`` for a grid."""

    family: str
    min_tiles: int
    max_tiles: int
    tile_size_px: int
    min_image_tokens: int
    max_image_tokens_budget: int
    max_pixels_tolerance: float
    wrapper_tokens: int = 0  # the template's <image> is replaced

    @classmethod
    def from_configs(
        cls, family: str, config: dict[str, Any], preprocessor: dict[str, Any]
    ) -> Lfm2VlRule:
        """Build from the image processor's values (transformers' defaults, those of
        LiquidAI/LFM2-VL-1.6B, where the file leaves one out) and the server's knobs."""

        def value(name: str, default: Any) -> Any:
            found = preprocessor.get(name)
            return default if found is None else found

        for switch in ("do_image_splitting", "use_thumbnail"):
            if value(switch, True) is not True:
                raise ValueError(f"LFM2-VL with {switch} off is not priced: vLLM's grid ignores it")
        for name, shipped_px in (
            ("encoder_patch_size", _ENCODER_PATCH_PX),
            ("downsample_factor", _DOWNSAMPLE_FACTOR),
        ):
            if int(value(name, shipped_px)) != shipped_px:
                raise ValueError(f"LFM2-VL with {name} other than {shipped_px} is not priced")
        return cls(
            family,
            int(value("min_tiles", 2)),
            int(value("max_tiles", 10)),
            int(value("tile_size", 512)),
            int(value("min_image_tokens", 64)),
            int(value("max_image_tokens", 256)),
            float(value("max_pixels_tolerance", 2.0)),
        )

    @property
    def factor_px(self) -> int:
        return _ENCODER_PATCH_PX * _DOWNSAMPLE_FACTOR

    @property
    def tile_tokens(self) -> int:
        return math.ceil((self.tile_size_px // _ENCODER_PATCH_PX) / _DOWNSAMPLE_FACTOR) ** 2

    @property
    def max_crop_patches(self) -> int:
        """The patches every crop is padded to (``max_num_patches``)."""
        tile_patches = (self.tile_size_px // _ENCODER_PATCH_PX) ** 2
        return max(self.max_image_tokens_budget * _DOWNSAMPLE_FACTOR**2, tile_patches)

    def thumbnail_size(self, width_px: int, height_px: int) -> Size:
        pixels_per_token = self.factor_px**2
        return lfm2_smart_resize(
            height_px,
            width_px,
            factor=self.factor_px,
            min_pixels=self.min_image_tokens * pixels_per_token,
            max_pixels=self.max_image_tokens_budget * pixels_per_token,
        )

    def is_large(self, width_px: int, height_px: int) -> bool:
        """``_is_image_too_large``: the rounded sides (at least one patch) over the tolerance."""
        h_bar = max(_ENCODER_PATCH_PX, round_by_factor(height_px, self.factor_px))
        w_bar = max(_ENCODER_PATCH_PX, round_by_factor(width_px, self.factor_px))
        limit = self.max_image_tokens_budget * self.factor_px**2 * self.max_pixels_tolerance
        return h_bar * w_bar > limit

    def grid(self, width_px: int, height_px: int) -> tuple[int, int]:
        """(columns, rows) of tiles; (1, 1) for an image that is not cut."""
        if self.min_tiles == self.max_tiles == 1 or not self.is_large(width_px, height_px):
            return 1, 1
        ratios = target_ratios(self.min_tiles, self.max_tiles)
        return closest_grid(width_px, height_px, ratios, self.tile_size_px)

    def image_tokens(self, width_px: int, height_px: int) -> ImageTokens:
        thumb_w, thumb_h = self.thumbnail_size(width_px, height_px)
        patches_w, patches_h = thumb_w // _ENCODER_PATCH_PX, thumb_h // _ENCODER_PATCH_PX
        thumbnail = math.ceil(patches_h / _DOWNSAMPLE_FACTOR) * math.ceil(
            patches_w / _DOWNSAMPLE_FACTOR
        )
        columns, rows = self.grid(width_px, height_px)
        if columns * rows == 1:
            return ImageTokens(FRAME_TOKENS + thumbnail, self.wrapper_tokens)
        if patches_w * patches_h > self.max_crop_patches:
            raise UnsupportedImageSizeError(
                f"image {width_px}x{height_px} is cut into {columns}x{rows} tiles with a "
                f"{thumb_w}x{thumb_h} px thumbnail of {patches_w * patches_h} patches, more than "
                f"the {self.max_crop_patches} of a tile: LFM2-VL's processor cannot stack them"
            )
        tiles = columns * rows * (1 + self.tile_tokens)
        return ImageTokens(FRAME_TOKENS + tiles + 1 + thumbnail, self.wrapper_tokens)

    def max_image_tokens(self) -> ImageTokens:
        """The larger of the fullest grid and the thinnest image kept whole.

        A grid costs at most ``max_tiles`` tiles and a thumbnail of a tile's patches (any
        more is refused). An image kept whole is costliest when thinnest: 1 px wide, as tall
        as keeps its rounded area within the tolerance, its thumbnail raised to 32 px wide
        and as long as the budget's scale makes it; those heights are priced.
        """
        grid = (
            FRAME_TOKENS
            + 1
            + self.max_tiles * (1 + self.tile_tokens)
            + self.max_crop_patches // _DOWNSAMPLE_FACTOR**2
        )
        limit = self.max_image_tokens_budget * self.factor_px**2 * self.max_pixels_tolerance
        tallest = int(limit // _ENCODER_PATCH_PX) + self.factor_px
        whole = max(
            self.image_tokens(1, height).tokens
            for height in range(max(1, tallest - 2 * self.factor_px), tallest + 1)
            if not self.is_large(1, height)
        )
        return ImageTokens(max(grid, whole), self.wrapper_tokens)

    def downscale_candidates(self, width_px: int, height_px: int) -> list[Size]:
        """Each smaller grid's tiles, fitted to the image, and the image at the thumbnail
        budget's size."""
        tile = self.tile_size_px
        candidates = [
            fit_inside(width_px, height_px, columns * tile, rows * tile)
            for columns, rows in target_ratios(self.min_tiles, self.max_tiles)
        ]
        budget = self.max_image_tokens_budget * self.factor_px**2
        side = math.isqrt(budget)
        candidates.append(fit_inside(width_px, height_px, side, side))
        return candidates

    def describe(self) -> str:
        return (
            f"thumbnail smart_resize to multiples of {self.factor_px} px within "
            f"{self.min_image_tokens}..{self.max_image_tokens_budget} tokens; above "
            f"{self.max_pixels_tolerance:g}x that, also {self.min_tiles}..{self.max_tiles} "
            f"tiles of {self.tile_size_px} px at {self.tile_tokens} tokens each; tokens = 2 + "
            f"thumbnail (+ 1 + tiles x {1 + self.tile_tokens}), up to "
            f"{self.max_image_tokens().tokens:,}"
        )
