"""Keye-VL and Keye-VL-1.5: Qwen-style native resolution, by vLLM's copy of Keye's resize.

vLLM 0.33 takes each image's count from the grid the checkpoint's remote image processor makes
(``keye.py`` / ``keye_vl1_5.py`` ``_get_prompt_updates``: ``image_grid_thw`` over
``merge_size²``), and computes the same grid itself for its profiling
(``KeyeProcessingInfo._get_vision_info``) with its copy of that processor's ``smart_resize``.
That copy is PaddleOCR-VL's line for line (PaddleOCR-VL's processor descends from Keye's): a
side under one factor (patch 14 x merge 2 = 28 px) is first enlarged to it, the other scaled to
match; an aspect ratio over 200 is then refused; a side floored under ``max_pixels`` is not
raised back to one factor. ``tokens = h x w / 28²``, between ``<|vision_start|>`` and
``<|vision_end|>``.

The bounds are the image processor's own ``min_pixels``/``max_pixels`` (its ``__init__``
arguments, read from ``preprocessor_config.json``; the remote processor's defaults where the
file has none). The remote processor is not run here: the rule is proven against vLLM's own
count over a stand-in for it (``tests/support/family_dirs.py``), and no
``--mm-processor-kwargs`` is priced, since every one reaches the remote processor, whose use of
it cannot be checked (``profiles.KNOBS_ONLY`` with no knobs).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sidecar.errors import UnsupportedImageSizeError
from sidecar.vision import ImageTokens
from sidecar.vision.paddleocr_vl import PaddleOCRVLRule
from sidecar.vision.qwen import QWEN_WRAPPER_TOKENS

# The remote SiglipImageProcessor's defaults (image_processing_keye.py, as its public ports
# show): 130 to 1,280 cells of 28 px.
KEYE_MIN_PIXELS = 28 * 28 * 130
KEYE_MAX_PIXELS = 28 * 28 * 1280


@dataclass(frozen=True, slots=True)
class KeyeRule(PaddleOCRVLRule):
    """Qwen's token arithmetic over vLLM's Keye ``smart_resize``."""

    wrapper_tokens: int = QWEN_WRAPPER_TOKENS  # <|vision_start|> and <|vision_end|>

    @classmethod
    def from_configs(
        cls, family: str, config: dict[str, Any], preprocessor: dict[str, Any]
    ) -> KeyeRule:
        """Build from ``config.json``'s ``vision_config`` and the image processor's bounds."""
        vision = config.get("vision_config") or {}
        if int(preprocessor.get("temporal_patch_size") or 1) != 1:
            raise ValueError("Keye with temporal_patch_size other than 1 is not priced")
        return cls(
            family,
            int(vision.get("patch_size") or 14),
            int(vision.get("spatial_merge_size") or 2),
            int(preprocessor.get("min_pixels") or KEYE_MIN_PIXELS),
            int(preprocessor.get("max_pixels") or KEYE_MAX_PIXELS),
        )

    def image_tokens(self, width_px: int, height_px: int) -> ImageTokens:
        w, h = self.resized_size(width_px, height_px)
        if w == 0 or h == 0:
            # vLLM's count would be 0; the processor cannot resize an image to no pixels.
            raise UnsupportedImageSizeError(
                f"image {width_px}x{height_px} resizes to {w}x{h} px: Keye's processor fails on it"
            )
        return ImageTokens(
            tokens=(h // self.factor) * (w // self.factor), wrapper_tokens=self.wrapper_tokens
        )
