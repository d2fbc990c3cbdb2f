"""PaddleOCR-VL: vLLM 0.33's own ``smart_resize`` to multiples of patch x merge (28 px).

vLLM counts PaddleOCR-VL's image tokens itself (``paddleocr_vl.py``,
``PaddleOCRVLProcessingInfo.get_num_image_tokens``) with its own copy of ``smart_resize``,
which differs from Qwen's: a side under one factor is first enlarged to it (the other scaled
to match, rounded), the aspect-ratio limit (200) is checked after that, and a side floored
under ``max_pixels`` is not raised back to one factor. ``patch_size`` and
``spatial_merge_size`` come from ``config.json``'s ``vision_config``; the pixel bounds from the
image processor's ``size`` (``shortest_edge``/``longest_edge``, transformers' own processor) or
its ``min_pixels``/``max_pixels``, then ``--mm-processor-kwargs``. The chat template's
``<|IMAGE_START|>`` and ``<|IMAGE_END|>`` wrap the ``<|IMAGE_PLACEHOLDER|>`` run.

With ``--trust-remote-code`` vLLM reads the bounds under the remote image processor's
``min_pixels``/``max_pixels`` keys instead: the same values, so the same count.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sidecar.vision.qwen import QwenSmartResizeRule
from sidecar.vision.smart_resize import MAX_ASPECT_RATIO, refuse_extreme_aspect, scale_into_range

PADDLE_WRAPPER_TOKENS = 2  # <|IMAGE_START|> and <|IMAGE_END|>


def paddle_smart_resize(
    height_px: int, width_px: int, *, factor: int, min_pixels: int, max_pixels: int
) -> tuple[int, int]:
    """``vllm.model_executor.models.paddleocr_vl.smart_resize``, line for line."""
    height, width = height_px, width_px
    if height < factor:
        width = round((width * factor) / height)
        height = factor
    if width < factor:
        height = round((height * factor) / width)
        width = factor
    if max(height, width) / min(height, width) > MAX_ASPECT_RATIO:
        refuse_extreme_aspect(height, width, width_px=width_px, height_px=height_px)
    return scale_into_range(
        1, height, width, temporal_factor=1, factor=factor,
        min_pixels=min_pixels, max_pixels=max_pixels, keep_one_factor=False,
    )  # fmt: skip


@dataclass(frozen=True, slots=True)
class PaddleOCRVLRule(QwenSmartResizeRule):
    """Qwen's token arithmetic over PaddleOCR-VL's own resize."""

    wrapper_tokens: int = PADDLE_WRAPPER_TOKENS

    @classmethod
    def from_configs(
        cls, family: str, config: dict[str, Any], preprocessor: dict[str, Any]
    ) -> PaddleOCRVLRule:
        """Build from ``config.json``'s vision values and the image processor's bounds."""
        vision = config.get("vision_config") or {}
        size = preprocessor.get("size") or {}
        min_pixels = size.get("shortest_edge") or preprocessor.get("min_pixels") or 384 * 384
        max_pixels = size.get("longest_edge") or preprocessor.get("max_pixels") or 1536 * 1536
        return cls(
            family,
            int(vision.get("patch_size") or 14),
            int(vision.get("spatial_merge_size") or 2),
            int(min_pixels),
            int(max_pixels),
        )

    def resized_size(self, width_px: int, height_px: int) -> tuple[int, int]:
        h, w = paddle_smart_resize(
            height_px,
            width_px,
            factor=self.factor,
            min_pixels=self.min_pixels,
            max_pixels=self.max_pixels,
        )
        return w, h
