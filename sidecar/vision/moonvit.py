"""MoonViT (Kimi-K2.5 / K2.6, Kimi-VL): native resolution, scaled to a patch budget, padded
to cells of ``merge_kernel_size x patch_size``, one token per cell.

vLLM 0.33 counts a Kimi-K2.5 image with its own port of the checkpoint's processor
(``transformers_utils/processors/kimi_k25_vision_fused.py``, ``navit_resize_image``; the
checkpoint's remote processor, used where numba is missing, does the same arithmetic): the
image is scaled down, never up, by the smallest of ``sqrt(in_patch_limit / patches)`` and
``patch_limit_on_one_side`` patches over each side (each side truncated, at least 1 px, at
most that many patches), then padded up to multiples of ``merge_kernel_size x patch_size``
(2 x 14 = 28 px); each padded cell is one ``<|media_pad|>``:
``tokens = ceil(w / 28) x ceil(h / 28)``. No size is refused, the patch count is taken on
whole patches (``width // patch_size``, at least 1), and ``fixed_output_tokens`` (null in every
shipped checkpoint) would replace the count: such a checkpoint is not priced.

The values are the checkpoint's ``preprocessor_config.json`` ``media_proc_cfg``. vLLM builds
that processor from the file alone and passes it no ``--mm-processor-kwargs``: the file's own
keys given there (``PROCESSOR_KNOBS``) change no count, here as in vLLM; the pixel bounds
neither. A ``media_proc_cfg`` object there is refused (the sidecar would read it). The
chat template frames the ``<|media_pad|>`` run with ``<|media_begin|>image<|media_content|>``
and ``<|media_end|>``.

Kimi-VL (``kimi_vl.py``, ``KimiVLProcessingInfo.get_num_image_tokens``) is counted by vLLM
itself from three values of the checkpoint's remote image processor (``patch_size``,
``merge_kernel_size``, ``in_token_limit``): the image is scaled by
``sqrt(in_token_limit / patches)`` only when over the limit (no floor under one patch, no side
limit), then padded to cells. That processor, absent here, refuses an image whose padded side
reaches 512 patches ("Exceed pos emb", as public ports of it show); the rule refuses the same.
Its chat template writes ``<|media_start|>`` where Kimi-K2.5's writes ``<|media_begin|>``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cache
from typing import Any

from sidecar.errors import UnsupportedImageSizeError
from sidecar.vision import ImageTokens, NoPixelRange, VisionRule
from sidecar.vision.tiling import Size, already_fits, fit_inside, pick_downscale

# <|media_begin|>, "image", <|media_content|> and <|media_end|>: one token each in Kimi's
# tiktoken vocabulary (the words of vLLM's get_placeholder_str around <|media_pad|>).
KIMI_WRAPPER_TOKENS = 4

# media_proc_cfg's image keys: accepted as --mm-processor-kwargs and ignored, as vLLM ignores
# them (from_configs reads media_proc_cfg alone, where the server's knobs never land).
PROCESSOR_KNOBS = frozenset(
    {"in_patch_limit", "patch_limit_on_one_side", "patch_size", "merge_kernel_size",
     "fixed_output_tokens"}
)  # fmt: skip


def kimi_k25_resized_size(
    width_px: int,
    height_px: int,
    *,
    patch_size_px: int,
    in_patch_limit: int,
    patch_limit_on_one_side: int,
) -> Size:
    """``navit_resize_image``'s ``new_width``/``new_height``, float for float."""
    s1 = math.sqrt(
        in_patch_limit
        / (max(1.0, width_px // patch_size_px) * max(1.0, height_px // patch_size_px))
    )
    side_px = patch_limit_on_one_side * patch_size_px
    s2 = side_px / width_px
    s3 = side_px / height_px
    scale = min(1.0, s1, s2, s3)
    new_w = min(max(1, int(width_px * scale)), side_px)
    new_h = min(max(1, int(height_px * scale)), side_px)
    return new_w, new_h


@cache
def _kimi_k25_max_tokens(patch_size_px: int, merge: int, limit: int, side: int) -> int:
    """The costliest count over every size with both sides within ``side`` patches.

    For such a size the side limits do not bind, so the scale depends only on the whole
    patches of each side; within the sizes sharing them it is one constant and the count
    grows with each side: the largest size of each pair is the costliest. The count is
    symmetric, so half the pairs are priced. A longer side is scaled to the limit and, for
    the shipped values, costs no more: an exhaustive scan of every size within vLLM's decode
    limit found the same maximum (docs/rules-new-families.md).
    """
    side_px = side * patch_size_px
    best = 0
    for columns in range(1, side + 1):
        # The widest size with this many whole patches (under one patch counts as one).
        width = min(patch_size_px * columns + patch_size_px - 1, side_px)
        for rows in range(columns, side + 1):
            height = min(patch_size_px * rows + patch_size_px - 1, side_px)
            new_w, new_h = kimi_k25_resized_size(
                width, height, patch_size_px=patch_size_px, in_patch_limit=limit,
                patch_limit_on_one_side=side,
            )  # fmt: skip
            factor = merge * patch_size_px
            best = max(best, -(-new_w // factor) * -(-new_h // factor))
    return best


def _cell_downscale(
    rule: VisionRule,
    width_px: int,
    height_px: int,
    cell_px: int,
    longest_px: int,
    *,
    max_tokens: int | None,
    max_pixels: int | None,
) -> Size:
    """Among sizes whose width or height fills a whole number of cells (up to ``longest_px``),
    the best priced one that fits (``pick_downscale``); the original when it fits."""
    if already_fits(rule, width_px, height_px, max_tokens=max_tokens, max_pixels=max_pixels):
        return width_px, height_px
    candidates = [
        fit_inside(width_px, height_px, box_w, box_h)
        for cells in range(1, longest_px // cell_px + 1)
        for box_w, box_h in ((cells * cell_px, longest_px), (longest_px, cells * cell_px))
    ]
    return pick_downscale(
        lambda w, h: rule.image_tokens(w, h).tokens,
        width_px,
        height_px,
        candidates,
        max_tokens=max_tokens,
        max_pixels=max_pixels,
    )


@dataclass(frozen=True, slots=True)
class KimiK25Rule(NoPixelRange):
    """``ceil(w / cell) x ceil(h / cell)`` of the image scaled to the patch budget."""

    family: str
    patch_size_px: int
    merge_kernel_size: int
    in_patch_limit: int
    patch_limit_on_one_side: int
    wrapper_tokens: int = KIMI_WRAPPER_TOKENS

    @classmethod
    def from_configs(
        cls, family: str, config: dict[str, Any], preprocessor: dict[str, Any]
    ) -> KimiK25Rule:
        """Build from ``preprocessor_config.json``'s ``media_proc_cfg`` (vLLM reads no other)."""
        media = preprocessor.get("media_proc_cfg")
        if not isinstance(media, dict):
            raise ValueError("Kimi-K2.5 preprocessor_config.json has no media_proc_cfg object")
        if media.get("fixed_output_tokens") is not None:
            raise ValueError("Kimi-K2.5 with fixed_output_tokens is not priced")
        merge = media["merge_kernel_size"]
        if isinstance(merge, (list, tuple)):  # vLLM's processor takes the first of a pair
            merge = merge[0]
        return cls(
            family,
            int(media["patch_size"]),
            int(merge),
            int(media["in_patch_limit"]),
            int(media["patch_limit_on_one_side"]),
        )

    @property
    def cell_px(self) -> int:
        return self.merge_kernel_size * self.patch_size_px

    def resized_size(self, width_px: int, height_px: int) -> Size:
        return kimi_k25_resized_size(
            width_px,
            height_px,
            patch_size_px=self.patch_size_px,
            in_patch_limit=self.in_patch_limit,
            patch_limit_on_one_side=self.patch_limit_on_one_side,
        )

    def image_tokens(self, width_px: int, height_px: int) -> ImageTokens:
        new_w, new_h = self.resized_size(width_px, height_px)
        cell = self.cell_px
        return ImageTokens(
            tokens=-(-new_w // cell) * -(-new_h // cell), wrapper_tokens=self.wrapper_tokens
        )

    def max_image_tokens(self) -> ImageTokens:
        return ImageTokens(
            tokens=_kimi_k25_max_tokens(
                self.patch_size_px,
                self.merge_kernel_size,
                self.in_patch_limit,
                self.patch_limit_on_one_side,
            ),
            wrapper_tokens=self.wrapper_tokens,
        )

    def downscale_size(
        self, width_px: int, height_px: int, *, max_tokens: int | None, max_pixels: int | None
    ) -> Size:
        """Among sizes whose width or height fills a whole number of cells, the best priced
        one that fits (``pick_downscale``)."""
        return _cell_downscale(
            self, width_px, height_px, self.cell_px,
            self.patch_limit_on_one_side * self.patch_size_px,
            max_tokens=max_tokens, max_pixels=max_pixels,
        )  # fmt: skip

    def describe(self) -> str:
        cell = self.cell_px
        return (
            f"scaled to at most {self.in_patch_limit:,} patches of {self.patch_size_px} px "
            f"({self.patch_limit_on_one_side} a side), padded to {cell} px cells; tokens = "
            f"ceil(w/{cell}) x ceil(h/{cell}) + {self.wrapper_tokens} wrapper, up to "
            f"{self.max_image_tokens().tokens:,}"
        )


# -- Kimi-VL --------------------------------------------------------------------------------

# The checkpoint's image processor refuses a padded side of this many patches or more
# ("Exceed pos emb": MoonViT's position embeddings are interpolated up to it).
KIMI_VL_MAX_SIDE_PATCHES = 512


def kimi_vl_resized_size(
    width_px: int, height_px: int, *, patch_size_px: int, in_token_limit: int
) -> Size:
    """``KimiVLProcessingInfo.get_num_image_tokens``'s scaled size, float for float: scaled
    only over the limit, sides truncated (to 0 px where the scale is that small)."""
    patches = (width_px // patch_size_px) * (height_px // patch_size_px)
    if patches <= in_token_limit:
        return width_px, height_px
    scale = math.sqrt(in_token_limit / patches)
    return int(width_px * scale), int(height_px * scale)


@cache
def _kimi_vl_max_tokens(patch_size_px: int, merge: int, limit: int) -> int:
    """The costliest count the processor accepts over every size with both sides under
    ``KIMI_VL_MAX_SIDE_PATCHES`` patches.

    Within the sizes sharing their whole patches the scale is one constant, so each side's
    cells grow with the side by at most one at a step: the most cells a side can have and be
    accepted is its largest size's, capped at the most the processor accepts, if the
    smallest size is accepted at all.
    """
    cell = merge * patch_size_px
    most_cells = -(-KIMI_VL_MAX_SIDE_PATCHES // merge) - 1  # a padded side under 512 patches
    sides = range(KIMI_VL_MAX_SIDE_PATCHES)

    def cells(size_px: int) -> int:
        return -(-size_px // cell)

    best = 0
    for columns in sides:
        for rows in range(columns, KIMI_VL_MAX_SIDE_PATCHES):
            low = kimi_vl_resized_size(
                max(1, columns * patch_size_px), max(1, rows * patch_size_px),
                patch_size_px=patch_size_px, in_token_limit=limit,
            )  # fmt: skip
            if min(low) == 0 or max(cells(low[0]), cells(low[1])) > most_cells:
                continue
            high = kimi_vl_resized_size(
                (columns + 1) * patch_size_px - 1, (rows + 1) * patch_size_px - 1,
                patch_size_px=patch_size_px, in_token_limit=limit,
            )  # fmt: skip
            best = max(best, min(cells(high[0]), most_cells) * min(cells(high[1]), most_cells))
    return best


@dataclass(frozen=True, slots=True)
class KimiVLRule(NoPixelRange):
    """``ceil(w / cell) x ceil(h / cell)`` of the image scaled to ``in_token_limit`` patches;
    refused where a padded side reaches 512 patches."""

    family: str
    patch_size_px: int
    merge_kernel_size: int
    in_token_limit: int
    wrapper_tokens: int = KIMI_WRAPPER_TOKENS

    @classmethod
    def from_configs(
        cls, family: str, config: dict[str, Any], preprocessor: dict[str, Any]
    ) -> KimiVLRule:
        """Build from the image processor's ``preprocessor_config.json`` values (the three
        vLLM reads); only the padding processor (``pad_input``, as shipped) is priced."""
        if not preprocessor.get("pad_input"):
            raise ValueError(
                "Kimi-VL without pad_input is not priced: its processor crops to whole "
                "patches where vLLM counts padded cells"
            )
        merge = preprocessor.get("merge_kernel_size") or [2, 2]
        if isinstance(merge, (list, tuple)):
            if len(set(merge)) != 1:
                raise ValueError(
                    f"Kimi-VL with a non-square merge_kernel_size {merge} is not priced"
                )
            merge = merge[0]
        return cls(
            family,
            int(preprocessor.get("patch_size") or 14),
            int(merge),
            int(preprocessor.get("in_token_limit") or 4096),
        )

    @property
    def cell_px(self) -> int:
        return self.merge_kernel_size * self.patch_size_px

    def image_tokens(self, width_px: int, height_px: int) -> ImageTokens:
        new_w, new_h = kimi_vl_resized_size(
            width_px,
            height_px,
            patch_size_px=self.patch_size_px,
            in_token_limit=self.in_token_limit,
        )
        cell = self.cell_px
        columns, rows = -(-new_w // cell), -(-new_h // cell)
        side_patches = max(columns, rows) * self.merge_kernel_size
        if min(new_w, new_h) == 0 or side_patches >= KIMI_VL_MAX_SIDE_PATCHES:
            raise UnsupportedImageSizeError(
                f"image {width_px}x{height_px} resizes to {new_w}x{new_h} px, padded to "
                f"{side_patches} patches a side: Kimi-VL's image processor refuses "
                f"{KIMI_VL_MAX_SIDE_PATCHES} or more (Exceed pos emb)"
            )
        return ImageTokens(tokens=columns * rows, wrapper_tokens=self.wrapper_tokens)

    def max_image_tokens(self) -> ImageTokens:
        return ImageTokens(
            tokens=_kimi_vl_max_tokens(
                self.patch_size_px, self.merge_kernel_size, self.in_token_limit
            ),
            wrapper_tokens=self.wrapper_tokens,
        )

    def downscale_size(
        self, width_px: int, height_px: int, *, max_tokens: int | None, max_pixels: int | None
    ) -> Size:
        """As Kimi-K2.5's: the best priced size filling whole cells on one side."""
        longest_px = (KIMI_VL_MAX_SIDE_PATCHES - self.merge_kernel_size) * self.patch_size_px
        return _cell_downscale(
            self, width_px, height_px, self.cell_px, longest_px,
            max_tokens=max_tokens, max_pixels=max_pixels,
        )  # fmt: skip

    def describe(self) -> str:
        cell = self.cell_px
        return (
            f"scaled to at most {self.in_token_limit:,} patches of {self.patch_size_px} px, "
            f"padded to {cell} px cells, refused at {KIMI_VL_MAX_SIDE_PATCHES} patches a side; "
            f"tokens = ceil(w/{cell}) x ceil(h/{cell}) + {self.wrapper_tokens} wrapper, up to "
            f"{self.max_image_tokens().tokens:,}"
        )
