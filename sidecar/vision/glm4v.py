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

Cosmos 3 Edge is the same arithmetic at one frame: ``Cosmos3EdgeImageProcessor`` resizes with
Qwen3-VL's video ``smart_resize`` at its ``temporal_patch_size`` of 1, and vLLM's
``Cosmos3EdgeProcessingInfo._get_vision_info`` counts with it at temporal factor 1 (a side
under 32 px enlarged first, the bounds against ``h x w``), between ``<|vision_start|>`` and
``<|vision_end|>`` (``from_cosmos3_edge_configs``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sidecar.errors import ConfigurationError
from sidecar.vision import SERVER_KWARGS
from sidecar.vision.qwen import QwenSmartResizeRule
from sidecar.vision.smart_resize import clip_smart_resize

# Cosmos3EdgeImageProcessor's class defaults (transformers 5.20), where its file sets none.
COSMOS3_EDGE_PATCH_SIZE = 16
COSMOS3_EDGE_MERGE_SIZE = 2
COSMOS3_EDGE_SIZE = {"shortest_edge": 256 * 256, "longest_edge": 4096 * 4096}
EDGES = ("shortest_edge", "longest_edge")


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

    @classmethod
    def from_cosmos3_edge_configs(
        cls, family: str, config: dict[str, Any], preprocessor: dict[str, Any]
    ) -> Glm4vSmartResizeRule:
        """Cosmos 3 Edge: one frame, within the image processor's ``size`` edges.

        vLLM counts with ``vision_config``'s patch and merge and the processor's ``size``
        updated by the server's ``size`` kwarg; the HF processor makes the grid the prompt gets
        with its own patch, merge and temporal patch. A checkpoint where the two differ, or
        whose temporal patch is not 1, is refused, and so is a ``size`` kwarg without both
        edges (vLLM would keep the file's other edge, which the merged values no longer hold).
        """
        vision = config.get("vision_config") or {}
        patch = int(vision.get("patch_size", COSMOS3_EDGE_PATCH_SIZE))
        merge = int(vision.get("spatial_merge_size", COSMOS3_EDGE_MERGE_SIZE))
        processor = (
            int(preprocessor.get("patch_size", COSMOS3_EDGE_PATCH_SIZE)),
            int(preprocessor.get("merge_size", COSMOS3_EDGE_MERGE_SIZE)),
            int(preprocessor.get("temporal_patch_size", 1)),
        )
        if processor != (patch, merge, 1):
            raise ConfigurationError(
                f"Cosmos 3 Edge ({family}): Cosmos3EdgeImageProcessor's patch, merge and "
                f"temporal patch {processor} differ from the vision tower's ({patch}, {merge}, "
                "1) that vLLM counts with: not priced"
            )
        kwarg_size = (preprocessor.get(SERVER_KWARGS) or {}).get("size")
        if kwarg_size is not None and set(EDGES) - set(kwarg_size):
            raise ConfigurationError(
                f"Cosmos 3 Edge ({family}): SIDECAR_MM_PROCESSOR_KWARGS size {kwarg_size!r} "
                f"needs both {' and '.join(EDGES)} for the sidecar to price it"
            )
        size = preprocessor.get("size") or COSMOS3_EDGE_SIZE
        return cls(
            family,
            patch,
            merge,
            int(size["shortest_edge"]),
            int(size["longest_edge"]),
            temporal_patch_size=1,
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
        if self.temporal_patch_size == 1:
            return (
                f"smart_resize of one frame to multiples of {self.factor} px within "
                f"[{self.min_pixels:,}, {self.max_pixels:,}] px, a side under {self.factor} px "
                f"enlarged first; tokens = h*w/{self.factor**2} + {self.wrapper_tokens} wrapper"
            )
        low, high = self._min_grid * self.factor**2, self.max_pixels // self.temporal_patch_size
        return (
            f"GLM smart_resize to multiples of {self.factor} px within [{low:,}, {high:,}] px "
            f"(processor bounds / {self.temporal_patch_size} frames); "
            f"tokens = h*w/{self.factor**2} + {self.wrapper_tokens} wrapper"
        )
