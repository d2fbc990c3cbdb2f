"""Gemma 4: every image is scaled, up or down, to a budget of soft tokens.

vLLM 0.33 counts an image's soft tokens itself (``gemma4_mm.py``,
``Gemma4ProcessingInfo._compute_num_soft_tokens``): the image is scaled by
``sqrt(max_patches / patches)`` so that its ``patch_size`` patches fill
``max_patches = max_soft_tokens * pooling_kernel_size**2``, each side is floored to a multiple
of ``patch_size * pooling_kernel_size`` (at least one such unit), and every
``pooling_kernel_size**2`` patches pool into one soft token, at most ``max_soft_tokens``. The
chat template's ``<|image|>`` becomes ``<boi>`` + that many image tokens + ``<eoi>``; Gemma 4's
replacement holds no newlines, so nothing merges with the text around it (unlike Gemma 3's).

``max_soft_tokens`` is vLLM's ``--mm-processor-kwargs`` knob (70, 140, 280, 560 or 1120; vLLM
refuses any other value); without it vLLM counts with ``vision_config.default_output_length``
from ``config.json``, never the image processor file's value. No size is refused: small
images are scaled up to the budget, so every image costs close to ``max_soft_tokens``. The
count depends on the aspect ratio alone (the scale cancels the size), so shrinking an image
cannot lower it: a downscale only honours a pixel cap.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from sidecar.vision import SERVER_KWARGS, ImageTokens
from sidecar.vision.fixed import FixedCostDownscale

BOUNDARY_TOKENS = 2  # <boi> and <eoi> around the soft tokens
SUPPORTED_SOFT_TOKENS = (70, 140, 280, 560, 1120)  # gemma4_mm._SUPPORTED_SOFT_TOKENS
PROCESSOR_KNOBS = frozenset({"max_soft_tokens"})


@dataclass(frozen=True, slots=True)
class Gemma4Rule(FixedCostDownscale):
    """``2 + min(pooled patches of the image scaled to the budget, max_soft_tokens)``."""

    family: str
    patch_size_px: int
    pooling_kernel_size: int
    max_soft_tokens: int
    wrapper_tokens: int = 0  # the template's <|image|> is replaced, not wrapped

    @classmethod
    def from_configs(
        cls, family: str, config: dict[str, Any], preprocessor: dict[str, Any]
    ) -> Gemma4Rule:
        """Build from ``config.json`` and the server's ``max_soft_tokens``, if it sets one."""
        vision = config.get("vision_config") or {}
        budget = (preprocessor.get(SERVER_KWARGS) or {}).get("max_soft_tokens")
        if budget is None:
            budget = vision.get("default_output_length")
            if budget is None:
                raise ValueError("Gemma 4 vision_config has no default_output_length")
        elif budget not in SUPPORTED_SOFT_TOKENS:
            raise ValueError(
                f"Unsupported max_soft_tokens value: {budget}. "
                f"Valid values are {SUPPORTED_SOFT_TOKENS}."
            )
        return cls(
            family,
            int(vision.get("patch_size") or 16),
            int(vision.get("pooling_kernel_size") or 3),
            int(budget),
        )

    @classmethod
    def from_gemma4_unified_configs(
        cls, family: str, config: dict[str, Any], preprocessor: dict[str, Any]
    ) -> Gemma4Rule:
        """Gemma 4 Unified: Gemma4UnifiedProcessingInfo's count is Gemma 4's, its budget read
        from ``vision_config.num_soft_tokens`` (which the config class does not default)."""
        vision = dict(config.get("vision_config") or {})
        if vision.get("num_soft_tokens") is None:
            raise ValueError("Gemma 4 Unified vision_config has no num_soft_tokens")
        vision["default_output_length"] = vision["num_soft_tokens"]
        return cls.from_configs(family, {**config, "vision_config": vision}, preprocessor)

    def soft_tokens(self, width_px: int, height_px: int) -> int:
        """``_compute_num_soft_tokens``, float for float."""
        patch = self.patch_size_px
        kernel = self.pooling_kernel_size
        unit = patch * kernel
        max_patches = self.max_soft_tokens * kernel**2
        num_patches_orig = (height_px / patch) * (width_px / patch)
        scale = math.sqrt(max_patches / num_patches_orig)
        target_h = max(unit, math.floor(height_px * scale / unit) * unit)
        target_w = max(unit, math.floor(width_px * scale / unit) * unit)
        num_patches = (target_h // patch) * (target_w // patch)
        return min(num_patches // (kernel**2), self.max_soft_tokens)

    def image_tokens(self, width_px: int, height_px: int) -> ImageTokens:
        return ImageTokens(
            tokens=BOUNDARY_TOKENS + self.soft_tokens(width_px, height_px),
            wrapper_tokens=self.wrapper_tokens,
        )

    def max_image_tokens(self) -> ImageTokens:
        return ImageTokens(
            tokens=BOUNDARY_TOKENS + self.max_soft_tokens, wrapper_tokens=self.wrapper_tokens
        )

    def describe(self) -> str:
        unit = self.patch_size_px * self.pooling_kernel_size
        return (
            f"scaled to {self.max_soft_tokens} soft tokens of {unit}x{unit} px "
            f"({self.patch_size_px} px patches pooled {self.pooling_kernel_size}x"
            f"{self.pooling_kernel_size}); tokens = {BOUNDARY_TOKENS} + soft tokens, up to "
            f"{self.max_image_tokens().tokens:,}"
        )
