"""Plan smaller images so that a request fits every budget, exactly.

Two methods:

- ``resize`` (default) rewrites inline images. Each image gets a token cap; the caps
  are found by water-filling the request's remaining visual-token allowance (the
  largest images shrink first, small ones are left alone), then the vision rule picks
  a size that its own processor maps to at most that many tokens. Images given as
  URLs cannot be rewritten and keep their cost.
- ``processor_kwargs`` asks vLLM to resize every image by sending
  ``mm_processor_kwargs.max_pixels``; the plan picks the largest such value that fits.
  It needs vLLM's ``--trust-request-mm-kwargs`` and a rule with a pixel range.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from sidecar.admission.budgets import Budgets
from sidecar.cost.prediction import ImageCost, RequestPrediction, with_kv_bytes
from sidecar.errors import UnsupportedImageSizeError
from sidecar.profiles.kv_geometry import KvGeometry
from sidecar.search import largest_that_fits
from sidecar.vision import VisionRule, at_index, image_index_tokens


@dataclass(frozen=True, slots=True)
class ImageResize:
    """One image's new size and what it will cost."""

    index: int
    from_size: tuple[int, int]
    to_size: tuple[int, int]
    tokens_before: int
    tokens_after: int


DownscalePlan = tuple[RequestPrediction, tuple[ImageResize, ...], int | None]


def plan_downscale(
    prediction: RequestPrediction, budgets: Budgets, *, vision: VisionRule, kv: KvGeometry
) -> DownscalePlan | str:
    """New image sizes that satisfy the budgets, or why there are none."""
    allowance = _visual_allowance(prediction, budgets, kv)
    if budgets.downscale_with_processor_kwargs:
        return _plan_processor_max_pixels(prediction, budgets, vision, kv, allowance)
    return _plan_resize(prediction, budgets, vision, kv, allowance)


def _visual_allowance(prediction: RequestPrediction, budgets: Budgets, kv: KvGeometry) -> int:
    """The most image tokens the request may carry under its request-level budgets."""
    fixed = prediction.prompt_tokens - prediction.image_tokens
    allowance = prediction.image_tokens
    if budgets.max_request_visual_tokens is not None:
        allowance = min(allowance, budgets.max_request_visual_tokens - prediction.media_tokens)
    if budgets.max_request_prompt_tokens is not None:
        allowance = min(allowance, budgets.max_request_prompt_tokens - fixed)
    kv_limit = budgets.max_request_kv_bytes
    if kv_limit is not None:
        outputs = prediction.n * prediction.output_tokens
        cross = prediction.cross_attention_tokens
        most = largest_that_fits(
            0,
            prediction.image_tokens,
            lambda image_tokens: (
                kv.request_kv_bytes(fixed + image_tokens + outputs, cross) <= kv_limit
            ),
        )
        allowance = min(allowance, -1 if most is None else most)
    return allowance


def _water_level(costs: list[int], allowance: int) -> int:
    """Largest cap T with sum(min(cost, T)) <= allowance (allowance is never negative here)."""
    if sum(costs) <= allowance:  # no request-level budget binds: no cap from the level
        return max(costs, default=0)
    level = largest_that_fits(
        0, max(costs, default=0), lambda cap: sum(min(cost, cap) for cost in costs) <= allowance
    )
    return level or 0


def _plan_resize(
    prediction: RequestPrediction,
    budgets: Budgets,
    vision: VisionRule,
    kv: KvGeometry,
    allowance: int,
) -> DownscalePlan | str:
    fixed_tokens = sum(i.tokens.tokens for i in prediction.images if not i.resizable)
    resizable = [i.tokens.tokens for i in prediction.images if i.resizable]
    if not prediction.images:
        return "the request has no images to shrink, and videos are never downscaled"
    if not resizable:
        return "the request's images are URLs, which cannot be rewritten in place"
    if allowance - fixed_tokens < 0:
        return "what cannot be downscaled (URL images, videos, text) alone exceeds the budget"
    level = _water_level(resizable, allowance - fixed_tokens)
    resized = resize_images(prediction.images, budgets, vision, level)
    if isinstance(resized, str):
        return resized
    images, resizes = resized
    if not resizes:
        return "no smaller size lowers this model's cost"
    return with_kv_bytes(replace(prediction, images=images), kv), resizes, None


def resize_images(
    images: Sequence[ImageCost], budgets: Budgets, vision: VisionRule, level: int
) -> tuple[tuple[ImageCost, ...], tuple[ImageResize, ...]] | str:
    """Each inline image at the largest size the rule maps to at most ``level`` tokens (and
    within ``SIDECAR_MAX_IMAGE_TOKENS`` and ``SIDECAR_MAX_IMAGE_PIXELS``), URL images as they
    are, and the resizes made; or why a size cannot be had."""
    cap = min(level, budgets.max_image_tokens or level)
    kept: list[ImageCost] = []
    resizes: list[ImageResize] = []
    for image in images:
        if not image.resizable or image.width_px is None or image.height_px is None:
            kept.append(image)
            continue
        # An image's place in the request can add to what its size costs (MiniCPM-V 4.6's
        # numbered markup): the size is chosen to fit what is left of the cap.
        place = image_index_tokens(vision, image.index)
        try:
            width, height = vision.downscale_size(
                image.width_px, image.height_px, max_tokens=cap - place,
                max_pixels=budgets.max_image_pixels,
            )  # fmt: skip
            tokens = at_index(vision.image_tokens(width, height), vision, image.index)
        except UnsupportedImageSizeError as exc:
            return str(exc)
        if (width, height) == (image.width_px, image.height_px):
            kept.append(image)  # already priced by this rule at this size
            continue
        resizes.append(
            ImageResize(image.index, (image.width_px, image.height_px), (width, height),
                        image.tokens.tokens, tokens.tokens)
        )  # fmt: skip
        kept.append(replace(image, width_px=width, height_px=height, tokens=tokens))
    return tuple(kept), tuple(resizes)


def _plan_processor_max_pixels(
    prediction: RequestPrediction,
    budgets: Budgets,
    vision: VisionRule,
    kv: KvGeometry,
    allowance: int,
) -> DownscalePlan | str:
    current = getattr(vision, "max_pixels", None)
    minimum = getattr(vision, "min_pixels", None)
    if not isinstance(current, int) or not isinstance(minimum, int):
        return "this model's processor has no max_pixels to lower"
    if budgets.max_image_pixels is not None and any(
        i.pixels > budgets.max_image_pixels for i in prediction.images
    ):
        return "vLLM would still decode the full image; use SIDECAR_DOWNSCALE_METHOD=resize"

    def priced(max_pixels: int) -> RequestPrediction:
        rule = vision.with_pixel_range(None, max_pixels)
        images = tuple(
            replace(image, tokens=rule.max_image_tokens())
            if image.width_px is None or image.height_px is None
            else replace(image, tokens=rule.image_tokens(image.width_px, image.height_px))
            for image in prediction.images
        )
        return replace(prediction, images=images)

    def fits(max_pixels: int) -> bool:
        candidate = priced(max_pixels)
        cap = budgets.max_image_tokens
        if cap is not None and any(i.tokens.tokens > cap for i in candidate.images):
            return False
        return candidate.image_tokens <= allowance

    max_pixels = largest_that_fits(minimum, current, fits)
    if max_pixels is None:
        return "even the processor's min_pixels exceeds the budget"
    return with_kv_bytes(priced(max_pixels), kv), (), max_pixels
