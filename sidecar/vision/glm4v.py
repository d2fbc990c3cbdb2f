"""GLM-4.1V: Qwen-style ``smart_resize``, in the clip form Qwen3-VL uses for videos.

``Glm4vImageProcessor`` resizes to multiples of ``factor = patch_size x merge_size`` (28 px)
and emits ``(h / 28) x (w / 28)`` tokens, like Qwen2-VL, but its ``smart_resize`` is the
clip one (``clip_smart_resize``, the same arithmetic as Qwen3-VL's video processor):

- an image is priced as ``temporal_patch_size`` (2) frames, so the pixel bounds compare
  against ``2 x h x w``: the effective range is half of ``[shortest_edge, longest_edge]``
  (checkpoint 12,544 .. 9,633,792 px, so 6,272 .. 4,816,896 px: 8 .. 6,144 tokens);
- a side below ``factor`` first scales the image up (``int()``-truncated) until it is not,
  and the aspect-ratio limit of 200 is checked after that.

The chat template wraps each image in ``<|begin_of_image|>`` and ``<|end_of_image|>``.
The rule subclasses Qwen's for its grid search: a size whose sides are multiples of ``factor``
with ``2 x h x w`` inside the bounds is left as it is by both processors, so Qwen's downscale
applies once a token's cost against the bounds (``_cell_pixels``) counts every frame.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sidecar.vision.qwen import QwenSmartResizeRule
from sidecar.vision.smart_resize import clip_smart_resize


@dataclass(frozen=True, slots=True)
class Glm4vSmartResizeRule(QwenSmartResizeRule):
    """GLM-4.1V: tokens = resized_h x resized_w / factor**2, pixel bounds per two frames."""

    temporal_patch_size: int = 2

    @classmethod
    def from_configs(
        cls, family: str, config: dict[str, Any], preprocessor: dict[str, Any]
    ) -> Glm4vSmartResizeRule:
        """Build from ``config.json`` and ``preprocessor_config.json`` values."""
        qwen = QwenSmartResizeRule.from_configs(family, config, preprocessor)
        vision = config.get("vision_config") or {}
        temporal = preprocessor.get("temporal_patch_size") or vision.get("temporal_patch_size")
        if temporal is None:
            raise ValueError("GLM-4.1V config has no temporal_patch_size")
        return cls(
            family,
            qwen.patch_size,
            qwen.merge_size,
            qwen.min_pixels,
            qwen.max_pixels,
            temporal_patch_size=int(temporal),
        )

    def resized_size(self, width_px: int, height_px: int) -> tuple[int, int]:
        # One image is a clip of temporal_patch_size frames to GLM's smart_resize.
        h, w = clip_smart_resize(
            self.temporal_patch_size, height_px, width_px,
            temporal_factor=self.temporal_patch_size, factor=self.factor,
            min_pixels=self.min_pixels, max_pixels=self.max_pixels,
        )  # fmt: skip
        return w, h

    @property
    def _cell_pixels(self) -> int:
        """Pixels one token costs against the bounds: a factor x factor cell in every frame."""
        return self.temporal_patch_size * self.factor**2

    @property
    def _enlarged_below(self) -> str:
        return f"{self._min_grid:,} tokens"

    def describe(self) -> str:
        low, high = self._min_grid * self.factor**2, self.max_pixels // self.temporal_patch_size
        return (
            f"GLM smart_resize to multiples of {self.factor} px within [{low:,}, {high:,}] px "
            f"(processor bounds / {self.temporal_patch_size} frames); "
            f"tokens = h*w/{self.factor**2} + {self.wrapper_tokens} wrapper"
        )
