"""Molmo 2: a low-res view of one crop, and up to ``max_crops`` overlapping crops of the image.

vLLM 0.33 builds each image's replacement itself (``molmo2.py``,
``Molmo2MultiModalProcessor._get_prompt_updates.get_image_replacement_molmo2``, over
``Molmo2ProcessingInfo.get_base_grid_size`` and ``get_patches_grid_size``); transformers'
``Molmo2ImageProcessor`` cuts the same crops (vLLM asserts the two agree):

* the low-res view is the image resized to one crop (``size``, 378 px as shipped) of
  ``patch_size`` (14 px) patches, pooled ``pooling_size`` (2 x 2) with the last row and column
  padded up: 14 x 14 tokens;
* the crops overlap by ``overlap_margins`` patches on each side (4 + 4), so each adds a window
  of ``crop patches - margins`` patches (19, 266 px). The tiling is ``select_tiling`` over
  the image less the margins (``size - 8 x 14 px`` a side, which may be 0 or negative): among
  every ``rows x columns`` grid of at most ``max_crops`` crops, sorted by crop count then
  rows, the one needing the least upscale, or when every grid needs a downscale the one
  needing the least, in float32 as numpy computes it. The canvas, ``tiles x window +
  margins``, is cut into patches and pooled as the low-res view;
* each pooled row ends in an ``<im_col>`` token (``image_use_col_tokens``; the low-res view
  follows ``use_single_crop_col_tokens`` where set), and each view is framed by a start
  token (``<low_res_im_start>`` or ``<im_start>``) and ``<im_end>``.

``tokens = 2 + low_rows x (low_cols + col) + 2 + rows x (cols + col)``: 424 for a small
image, up to 1,414 as shipped (a column of 8 crops). Every position of the replacement is an
embedding position (``select_token_ids`` over all the markup's ids); the chat template's
``<|image|>`` is what it replaces, so no wrapper. The template's ``Image N`` labels before each
of several images are text, priced with the prompt.

Knobs: vLLM builds the processor with the server's top-level kwargs, and both its count and
the image processor read ``max_crops``, ``overlap_margins``, ``pooling_size``,
``image_use_col_tokens``, ``use_single_crop_col_tokens`` and ``use_single_crop_start_token``
(the start token's id only, not the count). Under ``images_kwargs`` they reach the processor's
call but not vLLM's count; ``size`` and ``patch_size`` reach the call alone too (vLLM's
assertion or the patching fails): neither is priced.

Molmo (``MolmoRule``, below) tiles the same way with its own pooling and markup.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sidecar.vision import ImageTokens
from sidecar.vision.tiling import Size, TiledDownscale, fit_inside

PROCESSOR_KNOBS = frozenset(
    {"max_crops", "overlap_margins", "pooling_size", "image_use_col_tokens",
     "use_single_crop_col_tokens", "use_single_crop_start_token"}
)  # fmt: skip
VIEW_FRAME_TOKENS = 2  # a start token and <im_end> around each of the two views
# The processor's defaults (transformers' Molmo2Processor / Molmo2ImageProcessor), for a
# checkpoint whose files leave a value out.
DEFAULT_CROP_PX = 378
DEFAULT_PATCH_PX = 14
DEFAULT_MAX_CROPS = 8
DEFAULT_OVERLAP_MARGINS = (4, 4)
DEFAULT_POOLING = (2, 2)
# numpy's np.where(required_scale < 1.0, 10e9, required_scale): a downscale never wins.
_NEVER = 10e9

Tiling = tuple[int, int]  # (rows, columns) of crops


def float32(value: float) -> float:
    """``value`` rounded to the nearest float32, as numpy stores it (±inf kept)."""
    if math.isinf(value):
        return value
    return float(struct.unpack("f", struct.pack("f", value))[0])


def candidate_tilings(max_crops: int) -> list[Tiling]:
    """``get_candidate_tilings``: every (rows, columns) of at most ``max_crops`` crops, by crop
    count, then rows."""
    tilings = [
        (rows, columns)
        for rows in range(1, max_crops + 1)
        for columns in range(1, max_crops + 1)
        if rows * columns <= max_crops
    ]
    return sorted(tilings, key=lambda tiling: (tiling[0] * tiling[1], tiling[0]))


def _scale(target_px: float, side_px: float) -> float:
    # float32 division of float32 operands: one rounding of the exact quotient (a float64
    # quotient rounded to float32 is that, as float64 holds more than twice the digits).
    if side_px == 0:
        return math.inf
    return float32(target_px / side_px)


def select_tiling(
    height_px: int, width_px: int, window_px: int, tilings: Sequence[Tiling]
) -> Tiling:
    """vLLM's ``select_tiling`` (and transformers' the same): the grid of ``window_px`` crops
    needing the least upscale, or the least downscale where every grid needs one. The sides
    may be 0 or negative (the image less the margins), as there."""
    height, width = float32(height_px), float32(width_px)
    scales = [
        min(_scale(rows * window_px, height), _scale(columns * window_px, width))
        for rows, columns in tilings
    ]
    if all(scale < 1 for scale in scales):
        return tilings[scales.index(max(scales))]  # argmax: the first of the largest
    upscales = [_NEVER if scale < 1.0 else scale for scale in scales]
    return tilings[upscales.index(min(upscales))]  # argmin: the first of the least


def pooled_cells(side_px: int, patch_px: int, pool: int) -> int:
    """``get_patches_grid_size``'s rows (or columns): the side's whole patches, pooled with
    the remainder padded up."""
    return -(-(side_px // patch_px) // pool)


@dataclass(frozen=True, slots=True)
class Molmo2Rule(TiledDownscale):
    """``2 + low_rows x (low_cols + col) + 2 + rows x (cols + col)`` over the chosen tiling."""

    family: str
    crop_px: int
    patch_px: int
    max_crops: int
    overlap_margins: tuple[int, int]  # (left, right), in patches
    pooling: tuple[int, int]  # (rows, columns) of patches per token
    image_col_tokens: bool
    low_res_col_tokens: bool
    wrapper_tokens: int = 0  # the template's <|image|> is replaced

    @classmethod
    def from_configs(
        cls, family: str, config: dict[str, Any], preprocessor: dict[str, Any]
    ) -> Molmo2Rule:
        """The image processor's values (preprocessor_config.json, then the knobs) and the
        processor's column-token switches (processor_config.json, then the knobs), with
        transformers' defaults for what they leave out."""
        del config  # the markup's ids are the tokenizer's; the count reads the processor only
        size = preprocessor.get("size") or {"height": DEFAULT_CROP_PX, "width": DEFAULT_CROP_PX}
        if not isinstance(size, dict) or size.get("height") != size.get("width"):
            raise ValueError(f"Molmo 2 size must be a square crop: {size!r}")
        crop_px = _positive("size.height", size.get("height"))
        patch_px = _positive("patch_size", preprocessor.get("patch_size", DEFAULT_PATCH_PX))
        if crop_px % patch_px:
            raise ValueError(f"Molmo 2 crop {crop_px} px is not whole {patch_px} px patches")
        margins = _pair("overlap_margins", preprocessor.get("overlap_margins"),
                        DEFAULT_OVERLAP_MARGINS, least=0)  # fmt: skip
        if crop_px // patch_px <= sum(margins):
            raise ValueError(
                f"Molmo 2 overlap_margins {list(margins)} leave no window in a crop of "
                f"{crop_px // patch_px} patches"
            )
        pooling = _pair("pooling_size", preprocessor.get("pooling_size"), DEFAULT_POOLING, least=1)
        image_col_tokens = _flag("image_use_col_tokens", preprocessor.get("image_use_col_tokens"))
        single_crop = preprocessor.get("use_single_crop_col_tokens")
        low_res_col_tokens = (
            image_col_tokens
            if single_crop is None
            else _flag("use_single_crop_col_tokens", single_crop)
        )
        _flag("use_single_crop_start_token", preprocessor.get("use_single_crop_start_token"))
        return cls(
            family,
            crop_px=crop_px,
            patch_px=patch_px,
            max_crops=_positive("max_crops", preprocessor.get("max_crops", DEFAULT_MAX_CROPS)),
            overlap_margins=margins,
            pooling=pooling,
            image_col_tokens=image_col_tokens,
            low_res_col_tokens=low_res_col_tokens,
        )

    @property
    def margin_px(self) -> int:
        """Both overlap margins, in pixels."""
        return sum(self.overlap_margins) * self.patch_px

    @property
    def window_px(self) -> int:
        """The part of each crop the next one does not overlap."""
        return self.crop_px - self.margin_px

    def tilings(self) -> list[Tiling]:
        return candidate_tilings(self.max_crops)

    def tiling(self, width_px: int, height_px: int) -> Tiling:
        """(rows, columns) of crops for an image of this size."""
        margin = self.margin_px
        return select_tiling(height_px - margin, width_px - margin, self.window_px, self.tilings())

    def _view_tokens(self, height_px: int, width_px: int, *, col_tokens: bool) -> int:
        rows = pooled_cells(height_px, self.patch_px, self.pooling[0])
        columns = pooled_cells(width_px, self.patch_px, self.pooling[1])
        return VIEW_FRAME_TOKENS + rows * (columns + int(col_tokens))

    def _tiling_tokens(self, tiling: Tiling) -> int:
        low_res = self._view_tokens(self.crop_px, self.crop_px, col_tokens=self.low_res_col_tokens)
        canvas_h, canvas_w = (tiles * self.window_px + self.margin_px for tiles in tiling)
        return low_res + self._view_tokens(canvas_h, canvas_w, col_tokens=self.image_col_tokens)

    def image_tokens(self, width_px: int, height_px: int) -> ImageTokens:
        tokens = self._tiling_tokens(self.tiling(width_px, height_px))
        return ImageTokens(tokens=tokens, wrapper_tokens=self.wrapper_tokens)

    def max_image_tokens(self) -> ImageTokens:
        # get_image_size_with_most_features: each tiling's own canvas selects it.
        most = max(self._tiling_tokens(tiling) for tiling in self.tilings())
        return ImageTokens(tokens=most, wrapper_tokens=self.wrapper_tokens)

    def downscale_candidates(self, width_px: int, height_px: int) -> list[Size]:
        """The image fitted into each tiling's canvas, and each canvas itself."""
        candidates: list[Size] = []
        for rows, columns in self.tilings():
            box_w = columns * self.window_px + self.margin_px
            box_h = rows * self.window_px + self.margin_px
            candidates += [fit_inside(width_px, height_px, box_w, box_h), (box_w, box_h)]
        return candidates

    def describe(self) -> str:
        margins = "+".join(str(m) for m in self.overlap_margins)
        return (
            f"a {self.crop_px} px low-res view + up to {self.max_crops} overlapping "
            f"{self.crop_px} px crops ({margins} patch margins), pooled "
            f"{self.pooling[0]}x{self.pooling[1]}; up to {self.max_image_tokens().tokens:,} tokens"
        )


def _positive(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"Molmo 2 {name} must be a positive integer: {value!r}")
    return value


def _pair(name: str, value: object, default: tuple[int, int], *, least: int) -> tuple[int, int]:
    if value is None:
        return default
    if (
        not isinstance(value, list | tuple)
        or len(value) != 2
        or any(isinstance(v, bool) or not isinstance(v, int) or v < least for v in value)
    ):
        raise ValueError(f"Molmo 2 {name} must be two integers of at least {least}: {value!r}")
    return int(value[0]), int(value[1])


def _flag(name: str, value: object) -> bool:
    if value is None:
        return True
    if not isinstance(value, bool):
        raise ValueError(f"Molmo 2 {name} must be true or false: {value!r}")
    return value


# Molmo (allenai/Molmo-7B-D-0924 and its siblings): the remote image processor's values as
# the checkpoint's users pass them, for a directory whose preprocessor_config.json leaves one
# out; vLLM's molmo.py pools 2 x 2 whatever the checkpoint says.
MOLMO_DEFAULTS: dict[str, Any] = {
    "max_crops": 12,
    "overlap_margins": [4, 4],
    "base_image_input_size": [336, 336],
    "image_patch_size": 14,
    "image_token_length_w": 12,
    "image_token_length_h": 12,
}
MOLMO_POOLING = 2


@dataclass(frozen=True, slots=True)
class MolmoRule(TiledDownscale):
    """Molmo: ``2 + (token_w + 1) x token_h`` for the low-res view, then
    ``2 + (cols // 2 + 1) x rows // 2`` (rounded up) over the crops' patches.

    vLLM 0.33 inserts each image itself (``molmo.py``,
    ``MolmoMultiModalProcessor._get_prompt_updates.get_insertion_molmo``, after the prompt's
    leading ``<|endoftext|>``) from the remote image processor's attributes: the low-res view
    is ``image_token_length_h`` rows of ``image_token_length_w`` patches and a column token
    (12 x 13), framed; the crops are Molmo 2's ``select_tiling`` over the image less the
    margins, each crop adding its window's patches (the first and last also their outer
    margin, ``get_num_patches``, each part rounded up to whole 2 x 2 pools), pooled with a
    column token a row, framed: 316 for a small image. Every kwarg reaches the remote
    processor, which cannot be run here: none is priced.
    """

    family: str
    crop_px: int
    patch_px: int
    max_crops: int
    overlap_margins: tuple[int, int]
    token_width: int
    token_height: int
    wrapper_tokens: int = 0  # vLLM inserts the markup; no placeholder is replaced

    @classmethod
    def from_configs(
        cls, family: str, config: dict[str, Any], preprocessor: dict[str, Any]
    ) -> MolmoRule:
        """The remote image processor's attributes from preprocessor_config.json, with the
        values the checkpoint's users pass where it leaves one out."""
        del config
        values = {
            **MOLMO_DEFAULTS,
            **{k: preprocessor[k] for k in MOLMO_DEFAULTS if k in preprocessor},
        }
        base = values["base_image_input_size"]
        base_px = (base, base) if isinstance(base, int) else tuple(base)
        if len(base_px) != 2:
            raise ValueError(f"Molmo base_image_input_size must be a side or two: {base!r}")
        crop_px = _positive("base_image_input_size", base_px[0])
        patch_px = _positive("image_patch_size", values["image_patch_size"])
        margins = _pair("overlap_margins", values["overlap_margins"], (4, 4), least=0)
        if crop_px // patch_px <= sum(margins):
            raise ValueError(
                f"Molmo overlap_margins {list(margins)} leave no window in a crop of "
                f"{crop_px // patch_px} patches"
            )
        return cls(
            family,
            crop_px=crop_px,
            patch_px=patch_px,
            max_crops=_positive("max_crops", values["max_crops"]),
            overlap_margins=margins,
            token_width=_positive("image_token_length_w", values["image_token_length_w"]),
            token_height=_positive("image_token_length_h", values["image_token_length_h"]),
        )

    @property
    def crop_patches(self) -> int:
        return self.crop_px // self.patch_px

    @property
    def window_px(self) -> int:
        return (self.crop_patches - sum(self.overlap_margins)) * self.patch_px

    def tilings(self) -> list[Tiling]:
        return candidate_tilings(self.max_crops)

    def tiling(self, width_px: int, height_px: int) -> Tiling:
        """(rows, columns) of crops for an image of this size."""
        margin = sum(self.overlap_margins) * self.patch_px
        return select_tiling(height_px - margin, width_px - margin, self.window_px, self.tilings())

    def _patches(self, tiles: int) -> int:
        """``get_num_patches``: the patches a row (or column) of ``tiles`` crops keeps."""

        def pooled(patches: int) -> int:
            return (patches + MOLMO_POOLING - 1) // MOLMO_POOLING * MOLMO_POOLING

        if tiles == 1:
            return pooled(self.crop_patches)
        left, right = self.overlap_margins
        window = self.crop_patches - left - right
        return pooled(window + left) + (tiles - 2) * pooled(window) + pooled(window + right)

    def _tiling_tokens(self, tiling: Tiling) -> int:
        rows, columns = (self._patches(tiles) for tiles in tiling)
        low_res = VIEW_FRAME_TOKENS + (self.token_width + 1) * self.token_height
        pooled_rows = (rows + 1) // MOLMO_POOLING
        pooled_columns = (columns + 1) // MOLMO_POOLING
        return low_res + VIEW_FRAME_TOKENS + (pooled_columns + 1) * pooled_rows

    def image_tokens(self, width_px: int, height_px: int) -> ImageTokens:
        tokens = self._tiling_tokens(self.tiling(width_px, height_px))
        return ImageTokens(tokens=tokens, wrapper_tokens=self.wrapper_tokens)

    def max_image_tokens(self) -> ImageTokens:
        most = max(self._tiling_tokens(tiling) for tiling in self.tilings())
        return ImageTokens(tokens=most, wrapper_tokens=self.wrapper_tokens)

    def downscale_candidates(self, width_px: int, height_px: int) -> list[Size]:
        """The image fitted into each tiling's canvas, and each canvas itself."""
        margin = sum(self.overlap_margins) * self.patch_px
        candidates: list[Size] = []
        for rows, columns in self.tilings():
            box_w, box_h = columns * self.window_px + margin, rows * self.window_px + margin
            candidates += [fit_inside(width_px, height_px, box_w, box_h), (box_w, box_h)]
        return candidates

    def describe(self) -> str:
        return (
            f"a {self.crop_px} px low-res view ({self.token_width}x{self.token_height}) + up to "
            f"{self.max_crops} overlapping {self.crop_px} px crops, pooled 2x2; up to "
            f"{self.max_image_tokens().tokens:,} tokens"
        )
