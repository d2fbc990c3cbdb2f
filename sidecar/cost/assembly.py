"""A request's prediction from its priced parts: the one rule serving and the replay share.

Serving (``Pricer.price``) prices a request's images and videos from its body; the replay
(``advisor.repricing``) prices them from the traffic log's sizes. Both ask here which image
sources are refused or sized and what an image of a size (or of none) costs, then hand the
parts here: what each media item that is not an image occupies in the prompt (a video's own
tokens and wrappers, or the operator's per-item allowance), each prompt's length, and the
prediction over them. The traffic log's writer reads the same media positions back.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sidecar.cost.prediction import ImageCost, RequestPrediction, VideoCost, predict_request
from sidecar.errors import InvalidRequestError
from sidecar.profiles.kv_geometry import KvGeometry
from sidecar.settings import VLLM_MAX_IMAGE_PIXELS, RemoteImages, Settings
from sidecar.video import VideoTokens
from sidecar.vision import VisionRule, at_index

# (text tokens, floor tokens, image indexes, media indexes) of one prompt: its prompt tokens
# are ``max(floor, visual + text)``, where visual counts its images' and media's positions.
PromptParts = tuple[int, int, tuple[int, ...], tuple[int, ...]]


@dataclass(frozen=True, slots=True)
class PricingPolicy:
    """The operator's choices that change a price."""

    remote_images: RemoteImages = RemoteImages.ASSUME_MAX
    max_decode_pixels: int = VLLM_MAX_IMAGE_PIXELS
    video_tokens_per_item: int = 16_384
    audio_tokens_per_item: int = 1_500
    embeds_tokens_per_item: int = 0  # 0: embeddings inputs are refused, as vLLM does by default
    default_output_tokens: int = 1024
    text_chars_per_token: float = 3.0

    @classmethod
    def from_settings(cls, settings: Settings) -> PricingPolicy:
        """The policy the settings describe."""
        return cls(
            remote_images=settings.remote_images,
            max_decode_pixels=settings.max_decode_pixels,
            video_tokens_per_item=settings.video_tokens_per_item,
            audio_tokens_per_item=settings.audio_tokens_per_item,
            embeds_tokens_per_item=settings.embeds_tokens_per_item,
            default_output_tokens=settings.default_output_tokens,
            text_chars_per_token=settings.text_chars_per_token,
        )

    @property
    def video_allowance(self) -> VideoTokens:
        """What a video that is not read costs: SIDECAR_VIDEO_TOKENS_PER_ITEM, no wrappers."""
        return VideoTokens(self.video_tokens_per_item, 0, 0, (0, 0, 0))

    def refuses_image_from(self, source: str) -> bool:
        """Whether an image from ``source`` (``data``, ``url``, ``cached``) is refused: a URL
        under SIDECAR_REMOTE_IMAGES=reject."""
        return source == "url" and self.remote_images is RemoteImages.REJECT

    def reads_size_from(self, source: str) -> bool:
        """Whether an image from ``source`` is sized (from its header, or a probe of its
        URL) rather than priced at the model's largest image."""
        return source == "data" or (source == "url" and self.remote_images is RemoteImages.PROBE)

    def output_tokens(self, generates: bool, requested: int | None) -> int:
        """Output tokens priced: as asked, else the default; none for a request that does not
        generate."""
        return (requested or self.default_output_tokens) if generates else 0


def image_cost(
    index: int,
    source: str,
    size: tuple[int, int] | None,
    image_format: str | None,
    vision: VisionRule,
) -> ImageCost:
    """One image priced by its size (``width, height``) through ``vision``; one of unknown
    size (never read, a URL not probed, a cached item) at the model's largest image. Raises
    ImageError for a size the processor refuses."""
    if size is None:
        tokens = at_index(vision.max_image_tokens(), vision, index)
        return ImageCost(index, source, None, None, None, tokens, True)
    width, height = size
    tokens = at_index(vision.image_tokens(width, height), vision, index)
    return ImageCost(index, source, width, height, image_format, tokens)


def media_prompt_tokens(
    kinds: Sequence[str], videos: Sequence[VideoCost], policy: PricingPolicy
) -> list[int]:
    """Prompt positions of each media item, in order: a video's own tokens and wrappers (the
    ``videos``, one per ``"video"`` kind, in order), an audio clip's allowance, an embeddings
    input's allowance. Embeddings are refused (InvalidRequestError) without one: vLLM takes
    them only with --enable-mm-embeds (or --enable-prompt-embeds)."""
    by_video = iter(videos)
    positions = []
    for index, kind in enumerate(kinds):
        if kind == "video":
            positions.append(next(by_video).tokens.prompt_tokens)
        elif kind == "audio":
            positions.append(policy.audio_tokens_per_item)
        elif policy.embeds_tokens_per_item <= 0:
            raise InvalidRequestError(
                "You must set `--enable-mm-embeds` to input embeddings; the sidecar refuses "
                "them unless SIDECAR_EMBEDS_TOKENS_PER_ITEM prices each one "
                f"(embeddings input {index + 1})",
                param="image_embeds",
            )
        else:
            positions.append(policy.embeds_tokens_per_item)
    return positions


def prompt_visual_tokens(
    prompt: PromptParts, images: Sequence[ImageCost], media_positions: Sequence[int]
) -> int:
    """Prompt positions of one prompt's images and media, their wrappers included."""
    return sum(images[i].tokens.prompt_tokens for i in prompt[2]) + sum(
        media_positions[i] for i in prompt[3]
    )


def truncate_prompts(
    prompts: Sequence[PromptParts],
    images: Sequence[ImageCost],
    media_positions: Sequence[int],
    keep_tokens: int,
) -> list[PromptParts]:
    """Each prompt cut to ``keep_tokens`` as vLLM's ``truncate_prompt_tokens`` cuts it, once
    its placeholders are expanded: text goes, an image or other media item never does (vLLM
    refuses a cut through one, so what it serves holds them whole)."""
    cut = []
    for prompt in prompts:
        visual = prompt_visual_tokens(prompt, images, media_positions)
        if max(prompt[1], visual + prompt[0]) <= keep_tokens:
            cut.append(prompt)
        else:
            cut.append((max(0, keep_tokens - visual), 0, prompt[2], prompt[3]))
    return cut


def assemble_prediction(
    images: Sequence[ImageCost],
    videos: Sequence[VideoCost],
    media_kinds: Sequence[str],
    media_positions: Sequence[int],
    prompts: Sequence[PromptParts],
    *,
    kv: KvGeometry,
    output_tokens: int,
    n: int,
    sequences: int,
    holds_kv: bool,
    context_tokens: int | None = None,
    text_tokens_exact: bool = False,
) -> RequestPrediction:
    """The request's prediction: each prompt ``max(floor, visual + text)`` long, the text
    the rest of it; media other than videos counted at their allowances."""
    visual = [prompt_visual_tokens(prompt, images, media_positions) for prompt in prompts]
    lengths = [max(p[1], v + p[0]) for p, v in zip(prompts, visual, strict=True)]
    allowances = sum(
        tokens for tokens, kind in zip(media_positions, media_kinds, strict=True) if kind != "video"
    )
    return predict_request(
        images,
        kv=kv,
        text_tokens=sum(length - v for length, v in zip(lengths, visual, strict=True)),
        media_tokens=allowances,
        output_tokens=output_tokens,
        n=n,
        videos=videos,
        sequences=sequences,
        longest_prompt_tokens=max(lengths, default=0),
        holds_kv=holds_kv,
        context_tokens=context_tokens,
        text_tokens_exact=text_tokens_exact,
    )
