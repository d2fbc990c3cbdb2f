"""Vision rules: how one model family turns an image's size into prompt positions.

Each family is one small module with one frozen dataclass implementing ``VisionRule``.
A rule is pure arithmetic over the size read from the image header; it never sees pixels.
It must agree exactly with the family's Hugging Face processor, refusals included.

Every profile's rule is wrapped in ``PixelLimited``, which refuses an image above vLLM's
decode limit (``VLLM_MAX_IMAGE_PIXELS``) with vLLM's own message before any rule sees it, so
no rule, old or new, can price what vLLM will not load.

Shared pieces, so that each piece of arithmetic exists once: ``smart_resize`` (the Qwen and
GLM resizes), ``tiling`` (downscale geometry and the ``TiledDownscale`` mixin), and here the
``NoPixelRange`` mixin for processors that ignore vLLM's pixel bounds.

Adding a family: write ``sidecar/vision/<family>.py`` with a rule class and a
``from_configs(family, config, preprocessor)`` constructor, register it in
``sidecar.profiles``, and add its oracle family to a ``tests/oracle/test_vision_oracle*.py``
module (shared sampling and checks: ``tests/support/oracle_helpers.py``).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Protocol, Self

from sidecar.errors import UnsupportedImageSizeError
from sidecar.settings import VLLM_MAX_IMAGE_PIXELS

# The key under which a rule's ``preprocessor`` values hold the server's
# ``--mm-processor-kwargs`` knobs as given, apart from the checkpoint's values they were merged
# over (``sidecar.profiles.processor_kwargs``): vLLM's Gemma 4 count reads max_soft_tokens from
# the kwargs or config.json, never from the image processor's file.
SERVER_KWARGS = "mm_processor_kwargs"
# The key under which a rule's ``preprocessor`` values hold the model directory's path, when the
# profile is read from one: for rules whose count depends on the checkpoint's own tokenizer
# (NVLM-D's tile tags). Absent for a built-in profile.
MODEL_DIRECTORY = "model_directory"


@dataclass(frozen=True, slots=True)
class ImageTokens:
    """What one image costs in the language model's prompt.

    ``tokens`` are the positions the processor puts in place of the image placeholder;
    ``wrapper_tokens`` are what the chat template adds around each image (Qwen's
    vision_start and vision_end). ``cross_attention_tokens`` are encoder states cached in
    cross-attention layers instead of the prompt (Llama 3.2 Vision); 0 elsewhere.
    """

    tokens: int
    wrapper_tokens: int
    cross_attention_tokens: int = 0

    @property
    def prompt_tokens(self) -> int:
        """Prompt positions the image occupies, wrappers included."""
        return self.tokens + self.wrapper_tokens


class VisionRule(Protocol):
    """The token arithmetic of one model family's image processor."""

    @property
    def family(self) -> str:
        """Short family name, for tables, metrics and logs."""
        ...

    def image_tokens(self, width_px: int, height_px: int) -> ImageTokens:
        """Tokens for an image of this size; raises UnsupportedImageSizeError when refused."""
        ...

    def max_image_tokens(self) -> ImageTokens:
        """Tokens of the costliest image the processor can produce (vLLM's profiling size)."""
        ...

    def downscale_size(
        self, width_px: int, height_px: int, *, max_tokens: int | None, max_pixels: int | None
    ) -> tuple[int, int]:
        """Largest size, not above the original, whose cost fits both caps exactly.

        The returned (width, height) is chosen so that this rule, applied to it, yields at
        most ``max_tokens`` tokens; for families whose count does not depend on size it
        only honours ``max_pixels``. Returns the original size when it already fits.
        """
        ...

    def with_pixel_range(self, min_pixels: int | None, max_pixels: int | None) -> VisionRule:
        """The same rule with vLLM's ``--mm-processor-kwargs`` pixel bounds applied."""
        ...

    def describe(self) -> str:
        """One line for tables and the docs: the rule and its parameters."""
        ...


class NoPixelRange:
    """Mixin for rules whose processor has no pixel range: vLLM's pixel bounds change nothing.

    Only the Qwen-style processors take ``min_pixels``/``max_pixels``; every other family
    resizes to its own fixed sizes, edges or tiles whatever ``--mm-processor-kwargs`` says.
    """

    __slots__ = ()

    def with_pixel_range(self, min_pixels: int | None, max_pixels: int | None) -> Self:
        """This rule itself: the bounds do not reach its processor."""
        return self


def refuse_above_pixel_limit(width_px: int, height_px: int) -> None:
    """Raise UnsupportedImageSizeError, in vLLM's words, for an image vLLM will not load."""
    pixels = width_px * height_px
    if pixels > VLLM_MAX_IMAGE_PIXELS:
        raise UnsupportedImageSizeError(
            f"Image dimensions {width_px}x{height_px} ({pixels} pixels) exceed the maximum of "
            f"{VLLM_MAX_IMAGE_PIXELS} pixels. Set VLLM_MAX_IMAGE_PIXELS to increase this limit."
        )


@dataclass(frozen=True, slots=True)
class PixelLimited:
    """A family's rule behind vLLM's decode limit: the profile's rule, whatever the family."""

    rule: VisionRule

    def __getattr__(self, name: str) -> object:
        # The family's own parameters (a Qwen rule's max_pixels, read by admission's
        # processor-kwargs plan) read through; only pricing goes through the limit.
        if name == "rule":  # not yet set: unpickling or copying before __init__
            raise AttributeError(name)
        return getattr(self.rule, name)

    @property
    def family(self) -> str:
        return self.rule.family

    def image_tokens(self, width_px: int, height_px: int) -> ImageTokens:
        refuse_above_pixel_limit(width_px, height_px)
        return self.rule.image_tokens(width_px, height_px)

    def max_image_tokens(self) -> ImageTokens:
        return self.rule.max_image_tokens()

    def downscale_size(
        self, width_px: int, height_px: int, *, max_tokens: int | None, max_pixels: int | None
    ) -> tuple[int, int]:
        return self.rule.downscale_size(
            width_px, height_px, max_tokens=max_tokens, max_pixels=max_pixels
        )

    def with_pixel_range(self, min_pixels: int | None, max_pixels: int | None) -> PixelLimited:
        ranged = self.rule.with_pixel_range(min_pixels, max_pixels)
        # A rule the bounds do not reach stays this very rule, as it would unwrapped.
        return self if ranged is self.rule else PixelLimited(ranged)

    def describe(self) -> str:
        return self.rule.describe()


def image_index_tokens(rule: object, index: int) -> int:
    """What an image's place in the request (0-based) adds to the price of its size.

    Nothing for almost every family. MiniCPM-V 4.6 numbers each image in its markup
    (``<image_id>N</image_id>``), so image 10 onwards costs more: its rule says how much
    (``image_index_tokens``), found through the wrappers around it (``PixelLimited`` and the
    advisor's cache read their rule's attributes through; ``MeasuredRule`` holds its own).
    """
    wrapped = rule
    for _ in range(4):  # the wrappers nest a few deep at most
        method = getattr(wrapped, "image_index_tokens", None)
        if callable(method):
            return int(method(index))
        wrapped = getattr(wrapped, "rule", None)
        if wrapped is None:
            break
    return 0


def at_index(tokens: ImageTokens, rule: object, index: int) -> ImageTokens:
    """``tokens``, priced by ``rule`` for a size, for the image at ``index`` in the request."""
    extra = image_index_tokens(rule, index)
    return replace(tokens, tokens=tokens.tokens + extra) if extra else tokens


def family_rule(rule: VisionRule) -> VisionRule:
    """The family's own rule behind the decode limit's wrapper, for code that asks which
    family prices a model (engine-only pricing, the self-check's sizes)."""
    return rule.rule if isinstance(rule, PixelLimited) else rule
