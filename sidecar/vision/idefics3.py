"""Idefics3 and SmolVLM: longest edge scaled to ``size``, split into square crops + a global crop.

The processor first resizes the image so its longest edge is exactly ``size.longest_edge``
(1456 px for Idefics3, 1536 px for SmolVLM2-2.2B), upscaling small images: a 10x10 icon
costs the full 4x4 grid. It then rounds both sides up to whole crops of
``max_image_size.longest_edge`` (364 / 384 px) and, when that gives more than one crop,
splits them and adds the whole image as a global crop. In the prompt each crop is
``<fake_token_around_image><row_r_col_c>`` + ``image_seq_len`` ``<image>`` tokens, each crop
row ends with a newline, and the global crop is
``\\n<fake_token_around_image><global-img>`` + ``image_seq_len`` ``<image>`` +
``<fake_token_around_image>``. ``tokens`` counts all of them, as
``Idefics3Processor._get_num_multimodal_tokens`` does; the last row's newline and the global
crop's merge into one ``"\\n\\n"`` token in the Llama 3 and SmolLM2 tokenizers.

The arithmetic is ``get_number_of_image_patches`` line for line, float divisions included.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from sidecar.vision import ImageTokens
from sidecar.vision.tiling import Size, TiledDownscale

MAX_IMAGE_SIZE_PX = 4096  # the processor's absolute cap on the resized longest edge


def resize_to_longest_edge(height_px: int, width_px: int, longest_px: int) -> tuple[int, int]:
    """The (height, width) after the processor's first resize, both caps applied."""
    aspect_ratio = width_px / height_px
    if width_px >= height_px:
        width_px = longest_px
        height_px = int(width_px / aspect_ratio)
        height_px += height_px % 2
    else:
        height_px = longest_px
        width_px = int(height_px * aspect_ratio)
        width_px += width_px % 2
    height_px, width_px = max(height_px, 1), max(width_px, 1)
    # _resize_output_size_scale_below_upper_bound with MAX_IMAGE_SIZE
    aspect_ratio = width_px / height_px
    if width_px >= height_px and width_px > MAX_IMAGE_SIZE_PX:
        width_px = MAX_IMAGE_SIZE_PX
        height_px = int(width_px / aspect_ratio)
    elif height_px > width_px and height_px > MAX_IMAGE_SIZE_PX:
        height_px = MAX_IMAGE_SIZE_PX
        width_px = int(height_px * aspect_ratio)
    return max(height_px, 1), max(width_px, 1)


@dataclass(frozen=True, slots=True)
class SplitImageRule(TiledDownscale):
    """Crops of ``crop_px`` after scaling the longest edge to ``longest_edge_px``."""

    family: str
    longest_edge_px: int
    crop_px: int
    image_seq_len: int
    do_image_splitting: bool = True
    extra_split_newline_tokens: int = 0  # 1 for a tokenizer that splits "\n\n" in two
    wrapper_tokens: int = 0  # the template's "<image>" is what the processor replaces

    @classmethod
    def from_configs(
        cls, family: str, config: dict[str, Any], preprocessor: dict[str, Any]
    ) -> SplitImageRule:
        """Build from ``config.json`` and the (pre)processor config values."""
        vision = config.get("vision_config") or {}
        size = preprocessor.get("size") or {}
        crop = (preprocessor.get("max_image_size") or {}).get("longest_edge") or vision.get(
            "image_size"
        )
        if not size.get("longest_edge") or not crop:
            raise ValueError("preprocessor config has no size.longest_edge or max_image_size")
        seq_len = preprocessor.get("image_seq_len")
        if seq_len is None:
            patches = (int(vision.get("image_size") or crop) // int(vision["patch_size"])) ** 2
            seq_len = int(patches / int(config["scale_factor"]) ** 2)
        return cls(
            family,
            int(size["longest_edge"]),
            int(crop),
            int(seq_len),
            bool(preprocessor.get("do_image_splitting", True)),
        )

    def grid(self, width_px: int, height_px: int) -> tuple[int, int]:
        """(rows, columns) of crops; (0, 0) when the image stays whole."""
        if not self.do_image_splitting:
            return 0, 0
        height, width = resize_to_longest_edge(height_px, width_px, self.longest_edge_px)
        # The processor rounds both resized sides up to whole crops (its aspect-ratio line is
        # overwritten before use), then counts the crops along each.
        rows, columns = -(-height // self.crop_px), -(-width // self.crop_px)
        return (rows, columns) if rows > 1 or columns > 1 else (0, 0)

    def image_tokens(self, width_px: int, height_px: int) -> ImageTokens:
        rows, columns = self.grid(width_px, height_px)
        # <fake><global-img> + seq <image> + <fake>, then per crop <fake><row_r_col_c> + seq
        # and a newline per row; with crops, the global crop's leading "\n" joins the last row's.
        tokens = self.image_seq_len + 3
        if rows:
            tokens += rows * (columns * (self.image_seq_len + 2) + 1)
            tokens += self.extra_split_newline_tokens
        return ImageTokens(tokens=tokens, wrapper_tokens=self.wrapper_tokens)

    def max_image_tokens(self) -> ImageTokens:
        side = self.longest_edge_px  # a square: the most crops in both directions
        return self.image_tokens(side, side)

    def downscale_candidates(self, width_px: int, height_px: int) -> list[Size]:
        """The image flattened onto each smaller number of crop rows (or columns)."""
        # Every image is scaled to the same longest edge, so only the aspect ratio sets the
        # grid. Fewer crop rows (or columns) need a flatter image: the candidates narrow the
        # short side until it lands exactly on each smaller number of crops, which the
        # processor would otherwise stretch up to.
        rows, columns = self.grid(width_px, height_px)
        landscape = width_px >= height_px
        candidates: list[Size] = []
        for short_crops in range(1, rows if landscape else columns):
            fraction = short_crops * self.crop_px / self.longest_edge_px
            if landscape:
                candidates += _near((width_px, math.floor(width_px * fraction)), 1)
            else:
                candidates += _near((math.floor(height_px * fraction), height_px), 0)
        return candidates

    def describe(self) -> str:
        return (
            f"longest edge to {self.longest_edge_px} px, split into {self.crop_px} px crops "
            f"+ a global crop; {self.image_seq_len} tokens a crop + row/column, fake and "
            f"newline tokens, up to {self.max_image_tokens().tokens:,}"
        )


def _near(size: Size, axis: int) -> list[Size]:
    """The size and a few pixels shorter on ``axis``: the processor rounds the side it scales."""
    return [
        (size[0] - d, size[1]) if axis == 0 else (size[0], size[1] - d)
        for d in range(4)
        if size[axis] - d >= 1
    ]
