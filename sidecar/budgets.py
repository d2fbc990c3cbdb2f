"""The operator's budgets, as the pure decision sees them (built from ``Settings``)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Budgets:
    """The operator's limits; None means unlimited."""

    max_images_per_request: int | None = None
    max_image_pixels: int | None = None
    max_image_tokens: int | None = None
    max_request_visual_tokens: int | None = None
    max_request_prompt_tokens: int | None = None
    max_request_kv_bytes: int | None = None
    kv_budget_bytes: int = 0  # in flight, all requests; 0 turns it off
    downscale: bool = False
    downscale_with_processor_kwargs: bool = False
