"""``--engine URL`` for ``vlm-sidecar tokens`` and ``plan``: a running vLLM's own count of the
sizes asked about, through the same ``/tokenize`` client and the same conversion the serving
sidecar uses (``sidecar.engine.counts``, ``sidecar.cost.engine_prices``).

``MeasuredRule`` answers the measured sizes with vLLM's counts (a size vLLM refuses is refused
in its words) and everything else (other sizes, the largest image, downscaling, another pixel
range) with the native rule it wraps.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import aiohttp

from sidecar.cost.engine_prices import EngineCount, EngineCountUnavailable, engine_image_tokens
from sidecar.engine.counts import TokenizeCounter
from sidecar.errors import ConfigurationError, UnsupportedImageSizeError
from sidecar.vision import ImageTokens, VisionRule

Size = tuple[int, int]
CLI_TIMEOUT_SECONDS = 30.0


def measure_sizes(
    engine_url: str, sizes: Iterable[Size], *, timeout_seconds: float = CLI_TIMEOUT_SECONDS
) -> dict[Size, EngineCount]:
    """vLLM's count of each distinct size, asked one at a time; ConfigurationError when vLLM
    cannot answer (down, no ``/tokenize``)."""

    async def ask() -> dict[Size, EngineCount]:
        async with aiohttp.ClientSession() as session:
            counter = TokenizeCounter(session, engine_url, timeout_seconds=timeout_seconds)
            return {size: await counter.count(*size) for size in dict.fromkeys(sizes)}

    try:
        return asyncio.run(ask())
    except EngineCountUnavailable as exc:
        raise ConfigurationError(f"cannot ask vLLM at {engine_url}: {exc}") from None


@dataclass(frozen=True, slots=True)
class MeasuredRule:
    """``rule``, except at the sizes vLLM at ``engine_url`` was asked about."""

    rule: VisionRule
    counts: Mapping[Size, EngineCount]
    engine_url: str

    @property
    def family(self) -> str:
        return self.rule.family

    def image_tokens(self, width_px: int, height_px: int) -> ImageTokens:
        count = self.counts.get((width_px, height_px))
        if count is None:
            return self.rule.image_tokens(width_px, height_px)
        if count.prompt_tokens is None:
            raise UnsupportedImageSizeError(f"vLLM refuses {width_px}x{height_px}: {count.refusal}")
        return engine_image_tokens(count.prompt_tokens, self.rule.max_image_tokens().wrapper_tokens)

    def max_image_tokens(self) -> ImageTokens:
        return self.rule.max_image_tokens()

    def downscale_size(
        self, width_px: int, height_px: int, *, max_tokens: int | None, max_pixels: int | None
    ) -> tuple[int, int]:
        return self.rule.downscale_size(
            width_px, height_px, max_tokens=max_tokens, max_pixels=max_pixels
        )

    def with_pixel_range(self, min_pixels: int | None, max_pixels: int | None) -> VisionRule:
        """Another pixel range is not the one vLLM was asked under: the rule's own."""
        return self.rule.with_pixel_range(min_pixels, max_pixels)

    def describe(self) -> str:
        return f"vLLM's /tokenize count at {self.engine_url} ({self.rule.describe()} otherwise)"
