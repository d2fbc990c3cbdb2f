"""Fixed-resolution encoders: every image costs the same, whatever its size.

LLaVA-1.5 resizes and centre-crops to 336x336; CLIP-L/14 yields 24 x 24 = 576 patch
features (its CLS token is dropped by the "default" feature-select strategy). Only the
pixel cap can make a downscale worthwhile; it never changes the token count.

PaliGemma 1 / 2 (``paligemma.py``) price the same way: SigLIP's grid of
``(image_size // patch)**2`` <image> tokens, whatever the size, then the <bos> vLLM inserts
behind them inside the placeholder; its ``apply`` also appends "\\n" to a prompt that does
not end with one, counted here as the image's one wrapper token (PaliGemma takes one image
a prompt): exact unless the prompt already ends with a newline, then one above, never below.
Aria (``aria.py``) replaces each <|img|> with the projector's most queries (256).
BLIP-2 (``blip2.py``) inserts the Q-Former's ``num_query_tokens`` <image> tokens at the start
of the prompt, and OpenVLA (``openvla.py``) its fused backbone's ``(image_sizes[0] // 14)**2``
after the <s>: both take one image a prompt, and neither count reads the image.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sidecar.errors import ConfigurationError
from sidecar.vision import ImageTokens, NoPixelRange
from sidecar.vision.tiling import Size, cap_pixels

# PaliGemmaMultiModalProcessor: the insertion is <image> * n + <bos> (one placeholder), and
# apply() appends the tokenizer's "\\n" where the prompt does not already end with it.
PALIGEMMA_BOS_TOKENS = 1
PALIGEMMA_NEWLINE_TOKENS = 1

# transformers' AriaConfig and AriaImageProcessor defaults.
ARIA_PATCH_TO_QUERY = {1225: 128, 4900: 256}
ARIA_MAX_IMAGE_SIZE_PX = 980

# transformers' Blip2Config default (every Salesforce/blip2-* checkpoint's value).
BLIP2_QUERY_TOKENS = 32
# vLLM's openvla.py: the fused DINOv2 + SigLIP backbone's patch, and OpenVLAConfig's default
# image_sizes.
OPENVLA_PATCH_PX = 14
OPENVLA_IMAGE_SIZES_PX = (224, 224)


class FixedCostDownscale(NoPixelRange):
    """Mixin for rules whose prompt cost never changes with the image's size (LLaVA-1.5,
    Gemma 3, Llama 3.2 Vision): a downscale can only honour the pixel cap."""

    __slots__ = ()

    def downscale_size(
        self, width_px: int, height_px: int, *, max_tokens: int | None, max_pixels: int | None
    ) -> Size:
        """The size scaled to ``max_pixels``; ``max_tokens`` cannot be met by shrinking."""
        return cap_pixels(width_px, height_px, max_pixels)


@dataclass(frozen=True, slots=True)
class FixedTokensRule(FixedCostDownscale):
    """A constant number of tokens per image."""

    family: str
    tokens_per_image: int
    wrapper_tokens: int = 0

    @classmethod
    def from_llava_configs(
        cls, family: str, config: dict[str, Any], preprocessor: dict[str, Any]
    ) -> FixedTokensRule:
        """LLaVA-1.5: (image_size / patch)**2, plus CLS unless the strategy drops it."""
        vision = config.get("vision_config", {})
        image_size = int(vision.get("image_size") or _crop_side(preprocessor) or 336)
        patch = int(vision.get("patch_size") or preprocessor.get("patch_size") or 14)
        tokens = (image_size // patch) ** 2
        if config.get("vision_feature_select_strategy", "default") == "full":
            tokens += 1
        return cls(family, tokens)

    @classmethod
    def from_paligemma_configs(
        cls, family: str, config: dict[str, Any], preprocessor: dict[str, Any]
    ) -> FixedTokensRule:
        """PaliGemmaProcessingInfo.get_num_image_tokens (SiglipEncoderInfo: the patch grid
        squared) + the <bos> of its insertion, and the newline its ``apply`` appends."""
        vision = config.get("vision_config", {})
        # SiglipVisionConfig's defaults: the -224 checkpoints leave image_size out.
        grid = int(vision.get("image_size") or 224) // int(vision.get("patch_size") or 14)
        return cls(family, grid * grid + PALIGEMMA_BOS_TOKENS, PALIGEMMA_NEWLINE_TOKENS)

    @classmethod
    def from_aria_configs(
        cls, family: str, config: dict[str, Any], preprocessor: dict[str, Any]
    ) -> FixedTokensRule:
        """AriaProcessingInfo.get_num_image_tokens: the most queries of
        ``projector_patch_to_query_dict`` for every image, whatever the size (the replacement
        of each <|img|>). A crop side whose patches the projector maps to fewer queries
        (max_image_size 490: 128) would meet those placeholders with fewer embeddings in the
        model: refused, as split_image is (more crops than vLLM counts)."""
        queries = {
            int(patches): int(count)
            for patches, count in (
                config.get("projector_patch_to_query_dict") or ARIA_PATCH_TO_QUERY
            ).items()
        }
        most = max(queries.values())
        crop_px = int(preprocessor.get("max_image_size") or ARIA_MAX_IMAGE_SIZE_PX)
        patch_px = int((config.get("vision_config") or {}).get("patch_size") or 14)
        if queries.get((crop_px // patch_px) ** 2) != most:
            raise ConfigurationError(
                f"Aria's max_image_size {crop_px} px gives fewer image embeddings than the "
                f"{most} placeholders vLLM 0.33 counts per image: price it through the engine"
            )
        if preprocessor.get("split_image"):
            raise ConfigurationError(
                "Aria's split_image makes more crops than the one vLLM 0.33 counts per image"
            )
        return cls(family, most)

    @classmethod
    def from_blip2_configs(
        cls, family: str, config: dict[str, Any], preprocessor: dict[str, Any]
    ) -> FixedTokensRule:
        """Blip2ProcessingInfo.get_num_image_tokens: config.json's ``num_query_tokens``, the
        insertion at the prompt's start (no placeholder of its own in the text)."""
        return cls(family, int(config.get("num_query_tokens") or BLIP2_QUERY_TOKENS))

    @classmethod
    def from_openvla_configs(
        cls, family: str, config: dict[str, Any], preprocessor: dict[str, Any]
    ) -> FixedTokensRule:
        """OpenVLAProcessingInfo.get_num_image_tokens: ``(image_sizes[0] // 14)**2``, inserted
        after the tokenizer's <s>. vLLM's backbone takes only 224 x 224 (its model refuses
        any other ``image_sizes`` at load): so does the sidecar."""
        sizes = tuple(int(side) for side in config.get("image_sizes") or OPENVLA_IMAGE_SIZES_PX)
        if sizes != OPENVLA_IMAGE_SIZES_PX:
            raise ConfigurationError(
                f"OpenVLA's image_sizes {list(sizes)}: vLLM 0.33's backbone takes only "
                f"{list(OPENVLA_IMAGE_SIZES_PX)}"
            )
        return cls(family, (sizes[0] // OPENVLA_PATCH_PX) ** 2)

    def image_tokens(self, width_px: int, height_px: int) -> ImageTokens:
        return ImageTokens(tokens=self.tokens_per_image, wrapper_tokens=self.wrapper_tokens)

    def max_image_tokens(self) -> ImageTokens:
        return ImageTokens(tokens=self.tokens_per_image, wrapper_tokens=self.wrapper_tokens)

    def describe(self) -> str:
        return f"fixed {self.tokens_per_image} tokens per image"


def _crop_side(preprocessor: dict[str, Any]) -> int | None:
    crop = preprocessor.get("crop_size")
    if isinstance(crop, dict):
        value = crop.get("height") or crop.get("shortest_edge")
        return int(value) if value else None
    return int(crop) if crop else None
