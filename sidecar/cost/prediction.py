"""The predicted cost of one request: visual tokens, prompt tokens and KV bytes.

Pure arithmetic over images already priced by the vision rule. Definitions used
everywhere (headers, metrics, budgets, logs):

- ``visual_tokens``: the images' own tokens plus ``media_tokens``: the videos' own tokens
  (exact, or the per-video allowance) and the audio allowances; the chat template's and the
  processor's wrapper tokens (vision start/end, Qwen3-VL timestamps) are not visual tokens.
- ``prompt_tokens``: visual tokens + wrapper tokens + text tokens, over all of the request's
  prompts (a chat is one; a completions list, a chat batch or a score request may hold many).
- ``longest_prompt_tokens``: the longest single prompt, which the prompt budget limits.
- ``kv_bytes``: whole KV blocks for ``prompt_tokens + n x prompts x output_tokens``, per GPU,
  with a block of rounding per extra prompt; 0 for a request vLLM only renders. Where the
  context is known, output is cut to the room the prompt leaves in it, as vLLM cuts
  ``max_tokens`` (``held_output_tokens``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from sidecar.profiles.kv_geometry import KvGeometry
from sidecar.video import VideoTokens
from sidecar.video.probe import VideoHeader
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
class VideoCost:
    """One video and what it costs; ``header`` is None when the video was never read."""

    index: int  # among the request's videos
    source: str  # "data", "url" or "cached"
    header: VideoHeader | None
    tokens: VideoTokens
    allowance_reason: str | None = None  # priced at SIDECAR_VIDEO_TOKENS_PER_ITEM, and why

    def describe(self, total_videos: int) -> str:
        """``video 1 of 2 (640x360, 12.5 s)`` for messages."""
        name, header = f"video {self.index + 1} of {total_videos}", self.header
        if header is None:
            return f"{name} (not read)"
        duration = f", {header.duration_seconds:.1f} s" if header.duration_seconds else ""
        return f"{name} ({header.width_px}x{header.height_px}{duration})"


@dataclass(frozen=True, slots=True)
class RequestPrediction:
    """Everything the admission decision and the metrics need about one request.

    The totals (``image_tokens``, ``wrapper_tokens``, ``prompt_tokens``, ...) are summed once,
    as the prediction is made: headers, metrics, budgets, the log line and the traffic log
    each read them several times; a copy made with ``dataclasses.replace`` sums its own.
    """

    images: tuple[ImageCost, ...]
    media_tokens: int
    text_tokens: int
    output_tokens: int
    n: int
    kv_bytes: int
    text_tokens_exact: bool = False  # counted with the model's chat template and tokenizer
    videos: tuple[VideoCost, ...] = ()  # their tokens are part of media_tokens
    sequences: int = 1  # prompts vLLM runs on their own
    longest_prompt: int | None = None  # the longest of several prompts; None: just one
    holds_kv: bool = True  # False: vLLM renders the request (count_tokens, render) only
    context_tokens: int | None = None  # vLLM's max_model_len; None: output is not cut
    image_tokens: int = field(init=False, compare=False)  # the images' own tokens
    video_tokens: int = field(init=False, compare=False)  # the videos' own (in media_tokens)
    # Image tokens plus the videos' tokens and audio allowances.
    visual_tokens: int = field(init=False, compare=False)
    # Template and processor tokens around the images and videos.
    wrapper_tokens: int = field(init=False, compare=False)
    prompt_tokens: int = field(init=False, compare=False)  # every prompt position
    # Encoder states held by cross-attention layers.
    cross_attention_tokens: int = field(init=False, compare=False)

    def __post_init__(self) -> None:
        image_tokens = wrapper_tokens = cross_attention_tokens = video_tokens = 0
        for image in self.images:
            tokens = image.tokens
            image_tokens += tokens.tokens
            wrapper_tokens += tokens.wrapper_tokens
            cross_attention_tokens += tokens.cross_attention_tokens
        for video in self.videos:
            video_tokens += video.tokens.tokens
            wrapper_tokens += video.tokens.wrapper_tokens
        visual_tokens = image_tokens + self.media_tokens
        derived = object.__setattr__  # the class is frozen: its own totals are set once, here
        derived(self, "image_tokens", image_tokens)
        derived(self, "video_tokens", video_tokens)
        derived(self, "visual_tokens", visual_tokens)
        derived(self, "wrapper_tokens", wrapper_tokens)
        derived(self, "prompt_tokens", visual_tokens + wrapper_tokens + self.text_tokens)
        derived(self, "cross_attention_tokens", cross_attention_tokens)

    @property
    def held_output_tokens(self) -> int:
        """Output tokens per sequence that KV is held for: ``output_tokens``, cut to the room
        the context leaves, since vLLM generates at most ``max_model_len - prompt`` tokens.
        With several prompts the room is the mean prompt's: the room shrinks linearly with a
        prompt, so the sum over prompts never exceeds this times their number."""
        if self.context_tokens is None:
            return self.output_tokens
        mean_prompt_tokens = self.prompt_tokens // self.sequences
        return max(0, min(self.output_tokens, self.context_tokens - mean_prompt_tokens))

    @property
    def prompt_tokens_exact(self) -> bool:
        """Whether ``prompt_tokens`` is vLLM's count exactly, not an estimate or allowance:
        text counted with the model's own template and tokenizer, and no media priced at an
        allowance (audio, embeddings, a video that was never read)."""
        return (
            self.text_tokens_exact
            and self.media_tokens == 0
            and all(video.allowance_reason is None for video in self.videos)
        )

    @property
    def longest_prompt_tokens(self) -> int:
        """The longest prompt vLLM runs: the prompt budget applies to each prompt."""
        return self.prompt_tokens if self.longest_prompt is None else self.longest_prompt


def estimate_text_tokens(text_chars: int, chars_per_token: float, *, template: bool = True) -> int:
    """A conservative text-token count from characters, plus the chat template's overhead."""
    overhead = TEMPLATE_OVERHEAD_TOKENS if template else 0
    return math.ceil(text_chars / chars_per_token) + overhead


def predict_request(
    images: Sequence[ImageCost],
    *,
    kv: KvGeometry,
    text_tokens: int,
    media_tokens: int,
    output_tokens: int,
    n: int,
    videos: Sequence[VideoCost] = (),
    sequences: int = 1,
    longest_prompt_tokens: int | None = None,
    holds_kv: bool = True,
    context_tokens: int | None = None,
    text_tokens_exact: bool = False,
) -> RequestPrediction:
    """Combine priced images and videos, text and output into the request's cost.

    ``media_tokens`` are the allowances of media other than ``videos`` (audio, embeddings);
    the videos' own tokens are added to it. ``context_tokens``: vLLM's ``max_model_len``,
    when known, to which output is cut.
    """
    media = media_tokens + sum(video.tokens.tokens for video in videos)
    draft = RequestPrediction(
        tuple(images),
        media,
        text_tokens,
        output_tokens,
        n,
        0,
        text_tokens_exact=text_tokens_exact,
        videos=tuple(videos),
        sequences=sequences,
        longest_prompt=longest_prompt_tokens if sequences > 1 else None,
        holds_kv=holds_kv,
        context_tokens=context_tokens,
    )
    return replace(draft, kv_bytes=_kv_bytes(draft, kv, context_tokens))


def with_kv_bytes(
    prediction: RequestPrediction, kv: KvGeometry, *, context_tokens: int | None = None
) -> RequestPrediction:
    """Recompute ``kv_bytes`` after the images, the geometry or the context (when given)
    changed."""
    context = prediction.context_tokens if context_tokens is None else context_tokens
    # One copy, not one per change: a replay makes hundreds of thousands of these.
    return replace(prediction, context_tokens=context, kv_bytes=_kv_bytes(prediction, kv, context))


def _kv_bytes(prediction: RequestPrediction, kv: KvGeometry, context_tokens: int | None) -> int:
    """``kv_bytes`` of ``prediction`` were its context ``context_tokens``."""
    if not prediction.holds_kv:
        return 0
    output = prediction.output_tokens
    if context_tokens is not None:  # as ``held_output_tokens``
        mean_prompt_tokens = prediction.prompt_tokens // prediction.sequences
        output = max(0, min(output, context_tokens - mean_prompt_tokens))
    extra_prompts = prediction.sequences - 1
    tokens = (
        prediction.prompt_tokens
        + prediction.n * prediction.sequences * output
        + extra_prompts * kv.block_tokens  # each prompt rounds up to its own blocks
    )
    kv_bytes = kv.request_kv_bytes(tokens, prediction.cross_attention_tokens)
    requests = prediction.n * prediction.sequences
    if requests > 1:
        # Each of the requests vLLM runs holds its own recurrent state (a hybrid model's
        # fixed blocks, what a request of no tokens holds; 0 for attention-only models).
        kv_bytes += (requests - 1) * kv.request_kv_bytes(0)
    return kv_bytes
