"""The predicted cost of one request: visual tokens, prompt tokens and KV bytes.

Pure arithmetic over images already priced by the vision rule. Definitions used
everywhere (headers, metrics, budgets, logs):

- ``visual_tokens``: the images' own tokens plus video and audio allowances; the chat
  template's wrapper tokens are not visual tokens.
- ``prompt_tokens``: visual tokens + wrapper tokens + text tokens.
- ``kv_bytes``: whole KV blocks for ``prompt_tokens + n x output_tokens``, per GPU.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

from sidecar.kv_geometry import KvGeometry
from sidecar.vision import ImageTokens

# Role markers and the generation prompt that a chat template adds around the text.
TEMPLATE_OVERHEAD_TOKENS = 16


@dataclass(frozen=True, slots=True)
class ImageCost:
    """One image and what it costs; sizes are None when the image was never probed."""

    index: int
    source: str  # "data", "url" or "cached"
    width_px: int | None
    height_px: int | None
    format: str | None
    tokens: ImageTokens
    assumed_max: bool = False  # priced at the model's largest image, size unknown

    @property
    def resizable(self) -> bool:
        """Only inline data can be rewritten in place."""
        return self.source == "data" and self.width_px is not None

    @property
    def pixels(self) -> int:
        """Pixels before the processor's resize; 0 when unknown."""
        return (self.width_px or 0) * (self.height_px or 0)

    def describe(self, total_images: int) -> str:
        """``image 2 of 4 (4032x3024)`` for messages."""
        size = f"{self.width_px}x{self.height_px}" if self.width_px else "size unknown"
        return f"image {self.index + 1} of {total_images} ({size})"


@dataclass(frozen=True, slots=True)
class RequestPrediction:
    """Everything the admission decision and the metrics need about one request."""

    images: tuple[ImageCost, ...]
    media_tokens: int
    text_tokens: int
    output_tokens: int
    n: int
    kv_bytes: int
    text_tokens_exact: bool = False  # counted with the model's chat template and tokenizer

    @property
    def image_tokens(self) -> int:
        """The images' own tokens."""
        return sum(image.tokens.tokens for image in self.images)

    @property
    def visual_tokens(self) -> int:
        """Image tokens plus video and audio allowances."""
        return self.image_tokens + self.media_tokens

    @property
    def wrapper_tokens(self) -> int:
        """Template tokens around the images."""
        return sum(image.tokens.wrapper_tokens for image in self.images)

    @property
    def prompt_tokens(self) -> int:
        """Every prompt position."""
        return self.visual_tokens + self.wrapper_tokens + self.text_tokens

    @property
    def cross_attention_tokens(self) -> int:
        """Encoder states held by cross-attention layers."""
        return sum(image.tokens.cross_attention_tokens for image in self.images)


def estimate_text_tokens(text_chars: int, chars_per_token: float) -> int:
    """A conservative text-token count from characters, plus the template's overhead."""
    return math.ceil(text_chars / chars_per_token) + TEMPLATE_OVERHEAD_TOKENS


def predict_request(
    images: Sequence[ImageCost],
    *,
    kv: KvGeometry,
    text_tokens: int,
    media_tokens: int,
    output_tokens: int,
    n: int,
) -> RequestPrediction:
    """Combine priced images, text and output into the request's cost."""
    draft = RequestPrediction(tuple(images), media_tokens, text_tokens, output_tokens, n, 0)
    return with_kv_bytes(draft, kv)


def with_kv_bytes(prediction: RequestPrediction, kv: KvGeometry) -> RequestPrediction:
    """Recompute ``kv_bytes`` after the images changed."""
    sequence = prediction.prompt_tokens + prediction.n * prediction.output_tokens
    kv_bytes = kv.request_kv_bytes(sequence, prediction.cross_attention_tokens)
    return replace(prediction, kv_bytes=kv_bytes)
