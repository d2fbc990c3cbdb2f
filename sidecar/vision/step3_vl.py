"""Step3-VL (and StepVL / Step3p7, whose classes inherit its processing): a 728 px global view
plus square windows of up to 504 px cut from the image.

vLLM 0.33 ships this processor itself (``transformers_utils/processors/step3_vl.py``):
``Step3VLMultiModalProcessor`` replaces the prompt's ``<im_patch>`` with
``Step3VLProcessor.get_image_repl_feature_ids`` over the windows ``ImagePatcher`` cut. The
patcher first pads an image whose short side is under 32 px and whose aspect ratio is beyond
4:1 to a square, then shrinks one whose long side exceeds 3,024 px to that side (each side
truncated). The window side is ``determine_window_size``'s: none under a long side of 728 px
unless the ratio is beyond 1.5 (then the short side), else 504 px, or the short side when that
is less and the ratio is beyond 4. Each side is rounded to whole windows (a fraction above 0.2
rounds up) and cut into a grid of windows. Each window costs ``<patch_start>``, 81
``<im_patch>`` and ``<patch_end>``, each row but the last ends in ``<patch_newline>``, and the
global view is ``<im_start>``, 169 ``<im_patch>`` and ``<im_end>``:
``tokens = 83 x windows + (rows - 1) + 171``. The chat template's ``<im_patch>`` is what the
update replaces, so nothing is added around it.

The sizes and feature counts are the image processor's constructor defaults: vLLM builds it
with the request's ``mm_processor_kwargs`` alone and ``vision_config.enable_patch`` from
``config.json`` (off: the global view only, 171 tokens). The server's ``--mm-processor-kwargs``
never reach it (``Step3VLProcessingInfo.get_hf_processor`` does not merge them, and the HF
processor's call takes none of them), so those knobs are accepted and change nothing. A side
shrunk to 0 px is refused, as vLLM's patcher fails on it (a division by zero).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from sidecar.errors import ConfigurationError, UnsupportedImageSizeError
from sidecar.vision import ImageTokens
from sidecar.vision.tiling import Size, TiledDownscale, fit_inside

MAX_IMAGE_SIDE_PX = 3024  # step3_vl.MAX_IMAGE_SIZE
GLOBAL_VIEW_TOKENS = 169 + 2  # num_image_feature_size, <im_start> and <im_end>
WINDOW_TOKENS = 81 + 2  # num_patch_feature_size, <patch_start> and <patch_end>
WINDOW_PX = 504  # Step3VLImageProcessor's patch_size: the largest window
NO_WINDOWS_BELOW_PX = 728  # determine_window_size: a long side under this is cut only when
NARROW_RATIO = 1.5  # its aspect ratio is beyond this
THIN_RATIO = 4  # beyond this the window is the short side, when that is less than 504 px
PAD_BELOW_PX = 32  # a short side under this, at a ratio beyond 4, is padded to a square
ROUND_UP_ABOVE = 0.2  # get_image_size_for_crop: a fraction of a window above this rounds up
# Step3VLImageProcessor's constructor arguments: accepted as --mm-processor-kwargs and ignored,
# as vLLM ignores them (the server's kwargs never reach that constructor).
PROCESSOR_KNOBS = frozenset(
    {"image_size", "patch_size", "num_image_feature_size", "num_patch_feature_size",
     "enable_patch"}
)  # fmt: skip


def preprocessed_size(width_px: int, height_px: int) -> Size:
    """``get_image_size_for_padding`` then ``get_image_size_for_preprocess``."""
    ratio = width_px / height_px
    if min(width_px, height_px) < PAD_BELOW_PX and (ratio > THIN_RATIO or ratio < 1 / THIN_RATIO):
        width_px = height_px = max(width_px, height_px)
    longest = max(width_px, height_px)
    if longest > MAX_IMAGE_SIDE_PX:
        scale = MAX_IMAGE_SIDE_PX / longest
        width_px, height_px = int(width_px * scale), int(height_px * scale)
    return width_px, height_px


def window_px(longest_px: int, shortest_px: int) -> int:
    """``determine_window_size``: 0 for no windows."""
    if longest_px < NO_WINDOWS_BELOW_PX:
        return shortest_px if longest_px / shortest_px > NARROW_RATIO else 0
    return min(shortest_px, WINDOW_PX) if longest_px / shortest_px > THIN_RATIO else WINDOW_PX


def _windows_along(side_px: int, window: int) -> int:
    """``get_image_size_for_crop``'s side in whole windows, then ``slide_window``'s count."""
    ratio = side_px / window
    if ratio >= 1:
        fraction = ratio - side_px // window
        side_px = window * (int(ratio) + 1 if fraction > ROUND_UP_ABOVE else int(ratio))
    return 1 if side_px <= window else math.ceil((side_px - window) / window + 1)


def window_grid(width_px: int, height_px: int) -> tuple[int, int]:
    """``ImagePatcher``'s windows as (columns, rows); (0, 0) for none."""
    width, height = preprocessed_size(width_px, height_px)
    if min(width, height) == 0:
        raise UnsupportedImageSizeError(
            f"image {width_px}x{height_px} is shrunk to {width}x{height} px by Step3-VL's "
            f"patcher (long side to {MAX_IMAGE_SIDE_PX} px): vLLM's processor fails on it"
        )
    window = window_px(max(width, height), min(width, height))
    if window == 0:
        return 0, 0
    return _windows_along(width, window), _windows_along(height, window)


@dataclass(frozen=True, slots=True)
class Step3VLRule(TiledDownscale):
    """``83 x windows + (rows - 1) + 171``; 171 without windows."""

    family: str
    enable_patch: bool = True
    wrapper_tokens: int = 0  # the template's <im_patch> is what the processor replaces

    @classmethod
    def from_configs(
        cls, family: str, config: dict[str, Any], preprocessor: dict[str, Any]
    ) -> Step3VLRule:
        """Build from ``config.json``: vLLM reads ``vision_config.enable_patch`` (default on)
        and nothing of the processor files or the server's kwargs."""
        del preprocessor
        enable_patch = (config.get("vision_config") or {}).get("enable_patch", True)
        if not isinstance(enable_patch, bool):
            raise ConfigurationError(
                f"{family}: vision_config.enable_patch must be true or false, not {enable_patch!r}"
            )
        return cls(family, enable_patch)

    @staticmethod
    def _tokens_for(columns: int, rows: int) -> int:
        newlines = rows - 1 if rows else 0  # every row of windows but the last
        return WINDOW_TOKENS * columns * rows + newlines + GLOBAL_VIEW_TOKENS

    def image_tokens(self, width_px: int, height_px: int) -> ImageTokens:
        columns, rows = window_grid(width_px, height_px)  # refuses a 0 px side either way
        if not self.enable_patch:
            columns = rows = 0
        return ImageTokens(
            tokens=self._tokens_for(columns, rows), wrapper_tokens=self.wrapper_tokens
        )

    def max_image_tokens(self) -> ImageTokens:
        # The costliest image is shrunk to one column of 1 px windows down a 3,024 px side
        # (32 x 96,768 px): each window costs the same whatever its side.
        most = self._tokens_for(1, MAX_IMAGE_SIDE_PX) if self.enable_patch else GLOBAL_VIEW_TOKENS
        return ImageTokens(tokens=most, wrapper_tokens=self.wrapper_tokens)

    def downscale_candidates(self, width_px: int, height_px: int) -> list[Size]:
        """The image fitted under each grid of 504 px windows (fractions of 0.2 round down),
        under the 728 px long side without windows, and to a short side padded to a square."""
        if not self.enable_patch:
            return []
        slack = int(WINDOW_PX * ROUND_UP_ABOVE)
        boxes = [(NO_WINDOWS_BELOW_PX - 1, NO_WINDOWS_BELOW_PX - 1)]
        most = MAX_IMAGE_SIDE_PX // WINDOW_PX
        boxes += [
            (columns * WINDOW_PX + slack, rows * WINDOW_PX + slack)
            for columns in range(1, most + 1)
            for rows in range(1, most + 1)
        ]
        candidates = [fit_inside(width_px, height_px, *box) for box in boxes]
        short = PAD_BELOW_PX - 1
        if width_px <= height_px:
            candidates.append(fit_inside(width_px, height_px, short, NO_WINDOWS_BELOW_PX - 1))
        else:
            candidates.append(fit_inside(width_px, height_px, NO_WINDOWS_BELOW_PX - 1, short))
        return candidates

    def describe(self) -> str:
        if not self.enable_patch:
            return f"a 728 px global view alone; tokens = {GLOBAL_VIEW_TOKENS}"
        return (
            f"a 728 px global view ({GLOBAL_VIEW_TOKENS} tokens) + windows of up to {WINDOW_PX} "
            f"px ({WINDOW_TOKENS} each, a newline a row but the last); up to "
            f"{self.max_image_tokens().tokens:,} tokens"
        )
