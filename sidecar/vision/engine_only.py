"""A family with no native rule: its images are priced through vLLM's own count.

``EngineOnlyRule`` stands where a native rule would. It has no arithmetic of its own: the
pricer asks vLLM for each size (``sidecar.cost.engine_prices``) and prices a size whose count
it cannot have in time at ``max_image_tokens``, the context length, which no image vLLM
accepts can exceed. Downscaling needs a native rule and is refused for it.
"""

from __future__ import annotations

from dataclasses import dataclass

from sidecar.errors import UnsupportedImageSizeError
from sidecar.vision import ImageTokens, NoPixelRange


@dataclass(frozen=True, slots=True)
class EngineOnlyRule(NoPixelRange):
    """Tokens come from vLLM; ``context_tokens`` bounds an image of unknown cost."""

    family: str
    context_tokens: int

    def image_tokens(self, width_px: int, height_px: int) -> ImageTokens:
        raise UnsupportedImageSizeError(
            f"the {self.family} family has no native rule: an image of {width_px}x{height_px} "
            "is priced only through vLLM (SIDECAR_PRICING=auto or engine, with vLLM reachable)"
        )

    def max_image_tokens(self) -> ImageTokens:
        return ImageTokens(tokens=self.context_tokens, wrapper_tokens=0)

    def downscale_size(
        self, width_px: int, height_px: int, *, max_tokens: int | None, max_pixels: int | None
    ) -> tuple[int, int]:
        raise UnsupportedImageSizeError(
            f"the {self.family} family has no native rule to downscale {width_px}x{height_px} by"
        )

    def describe(self) -> str:
        return f"no native rule: every size priced by vLLM's /tokenize ({self.family})"
