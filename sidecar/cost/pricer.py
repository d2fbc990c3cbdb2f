"""Price every image and video of a parsed request, then the whole request.

Inline images are probed from their base64 header (microseconds, no pixels). URL images
follow ``SIDECAR_REMOTE_IMAGES``: priced at the model's largest image without fetching
(``assume_max``), probed through the guarded header fetcher (``probe``), or refused
(``reject``). Images reused by ``uuid`` are priced at the largest image.

Videos are priced exactly where the model has a video rule and the container can be read:
inline videos always (decoded in a worker thread: the body is in memory already), URL videos
under ``probe`` through the same guarded fetcher, from a prefix of at most
``SIDECAR_REMOTE_IMAGE_MAX_BYTES``. Any other video costs ``SIDECAR_VIDEO_TOKENS_PER_ITEM``
and the request's log line says why (``allowance_reason``): no rule for the family, a URL
not probed, an MP4 whose index lies beyond the prefix, a failed fetch, no frame rate. A video
that is not readable at all, or that the processor refuses, is a 400 naming it.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, replace

import orjson

from sidecar.body.refs import ImageRef, MediaItem, MediaSource, SequenceRef
from sidecar.body.request_body import RequestBody
from sidecar.cost.assembly import (
    PricingPolicy,
    PromptParts,
    assemble_prediction,
    image_cost,
    media_prompt_tokens,
    truncate_prompts,
)
from sidecar.cost.engine_prices import EnginePrices, engine_image_tokens
from sidecar.cost.prediction import ImageCost, RequestPrediction, VideoCost
from sidecar.errors import (
    ConfigurationError,
    ImageError,
    InvalidRequestError,
    UnsupportedImageSizeError,
    VideoError,
)
from sidecar.images.data_uri import split_data_uri, validate_base64
from sidecar.images.probe import ImageHeader, probe_base64
from sidecar.images.remote import (
    RemoteImageFetchError,
    RemoteImageProber,
    RemoteImageRefusedError,
)
from sidecar.profiles import ModelProfile
from sidecar.profiles.kv_geometry import KvGeometry
from sidecar.routes import BodyShape, Work
from sidecar.settings import RemoteImages
from sidecar.text.route_text import exact_prompts
from sidecar.text.text_estimate import TemplateOverhead, estimate_sequence_tokens, overhead_for
from sidecar.text.text_tokens import ChatTemplateError, PromptCounter
from sidecar.video import TextTokenCounter, VideoRule
from sidecar.video.probe import (
    VideoHeader,
    VideoPrefixUnreadable,
    decode_base64_payload,
    probe_video_bytes,
    probe_video_prefix,
)
from sidecar.vision import VisionRule


class _CooperativeLoop:
    """Hands the event loop back to other requests every few milliseconds of pricing, so a
    request with thousands of images never stalls another for longer than that."""

    # 2 ms slices cost about 1 % in loop turns; 5 ms ones let a /healthz beside a
    # 2,000-image request wait 11 ms and more (bench/loop_lag.py).
    SLICE_SECONDS = 0.002

    def __init__(self) -> None:
        self._since = time.perf_counter()

    async def maybe_yield(self) -> None:
        if time.perf_counter() - self._since >= self.SLICE_SECONDS:
            await asyncio.sleep(0)
            self._since = time.perf_counter()


@dataclass(frozen=True, slots=True)
class Pricer:
    """What pricing needs, built once at start-up."""

    profile: ModelProfile
    policy: PricingPolicy
    remote: RemoteImageProber | None
    prompt_counter: PromptCounter | None = None
    text_overhead: TemplateOverhead | None = None  # None: the family's built-in framing
    engine: EnginePrices | None = None  # vLLM's own counts, used while ``engine.active``
    # vLLM's max_model_len as last read (a truncation to -1 keeps what it allows); None: the
    # profile's max_position_embeddings.
    context_tokens: Callable[[], int] | None = None

    def rules_for(self, parsed: RequestBody) -> tuple[VisionRule, VideoRule | None]:
        """The vision and video rules for this request: the profile's, or with the pixel
        range of its own trusted ``mm_processor_kwargs``."""
        vision, video = self.profile.vision, self.profile.video
        bounds = parsed.pixel_range
        if bounds is None:
            return vision, video
        try:
            narrowed = vision.with_pixel_range(bounds.min_pixels, bounds.max_pixels)
            video = (
                None
                if video is None
                else video.with_pixel_range(bounds.min_pixels, bounds.max_pixels)
            )
        except ConfigurationError as exc:  # the rule refuses the range, as its processor does
            raise InvalidRequestError(str(exc), param="mm_processor_kwargs") from None
        return narrowed, video

    async def price(
        self,
        parsed: RequestBody,
        body: bytes,
        *,
        kv: KvGeometry | None = None,
        context_tokens: int | None = None,
    ) -> RequestPrediction:
        """The request's predicted cost; raises ImageError or VideoError naming the bad item.

        ``kv``: the geometry in force (serving passes vLLM's block size once read; the
        profile's otherwise); ``context_tokens``: vLLM's ``max_model_len``, to which output is
        cut, when known. Both are applied here, so the KV bytes are worked out once.
        """
        vision, video_rule = self.rules_for(parsed)
        total = len(parsed.images)
        fetches = {
            ref.index: asyncio.create_task(self._probe_url(ref, total))
            for ref in parsed.images
            if ref.source is MediaSource.URL and self.policy.reads_size_from(ref.source.value)
        }
        videos_in = [item for item in parsed.media if item.kind == "video"]
        reads = {
            item.index: asyncio.create_task(self._read_video(item, body, number, len(videos_in)))
            for number, item in enumerate(videos_in)
            if self._readable(item, video_rule)
        }
        try:
            images = []
            loop = _CooperativeLoop()
            engine = self.engine if self.engine is not None and self.engine.active else None
            bounds = parsed.pixel_range
            pixel_range = (None, None) if bounds is None else (bounds.min_pixels, bounds.max_pixels)
            for ref in parsed.images:
                cost = await self._price_image(ref, body, total, fetches, vision, engine)
                if engine is not None:
                    cost = await self._engine_priced(cost, engine, vision, pixel_range, total)
                images.append(cost)
                await loop.maybe_yield()
            videos = [
                await self._price_video(item, number, len(videos_in), reads, video_rule)
                for number, item in enumerate(videos_in)
            ]
        finally:
            for task in (*fetches.values(), *reads.values()):
                if not task.cancel() and not task.cancelled():
                    task.exception()  # retrieved: asyncio must not log it as never retrieved
        kinds = [item.kind for item in parsed.media]
        positions = media_prompt_tokens(kinds, videos, self.policy)
        texts, exact = self._text_tokens(parsed, images)
        generate_shape = parsed.route.shape is BodyShape.GENERATE
        prompts = [
            _prompt_parts(sequence, text, generate_shape)
            for sequence, text in zip(parsed.sequences, texts, strict=True)
        ]
        keep = self._kept_prompt_tokens(parsed)
        if keep is not None:
            prompts = truncate_prompts(prompts, images, positions, keep)
        return assemble_prediction(
            images,
            videos,
            kinds,
            positions,
            prompts,
            kv=self.profile.kv if kv is None else kv,
            output_tokens=self.policy.output_tokens(
                parsed.work is Work.GENERATE, parsed.max_output_tokens
            ),
            n=parsed.n,
            sequences=len(parsed.sequences),
            holds_kv=parsed.work is not Work.RENDER,
            context_tokens=context_tokens,
            text_tokens_exact=exact,
        )

    def _kept_prompt_tokens(self, parsed: RequestBody) -> int | None:
        """The tokens each prompt keeps under the request's ``truncate_prompt_tokens``: -1 is
        the context less the one token vLLM holds back for output (all of it when pooling)."""
        keep = parsed.truncate_prompt_tokens
        if keep is None or keep >= 0:
            return keep
        context = (
            self.context_tokens() if self.context_tokens is not None
            else self.profile.max_position_embeddings
        )  # fmt: skip
        return context if parsed.work is Work.POOL else context - 1

    def _text_tokens(self, parsed: RequestBody, images: list[ImageCost]) -> tuple[list[int], bool]:
        """Text tokens of each sequence: exact from the model's template and tokenizer where
        the route is one they render (``route_text``), else the estimate (``text_estimate``)."""
        if self.prompt_counter is not None:
            try:
                prompts = exact_prompts(
                    self.prompt_counter, parsed, [image.tokens.tokens for image in images]
                )
            except ChatTemplateError:
                pass
            else:
                # The rendered prompt holds each image with its wrappers; the rest is text.
                return [
                    prompt - sum(images[i].tokens.tokens + images[i].tokens.wrapper_tokens
                                 for i in sequence.images)
                    for sequence, prompt in zip(parsed.sequences, prompts, strict=True)
                ], True  # fmt: skip
        overhead = self.text_overhead or overhead_for(self.profile.architecture.prompt_family)
        tools = bool(parsed.skeleton.get("tools"))
        return [
            estimate_sequence_tokens(
                sequence, self.policy.text_chars_per_token, overhead, tools=tools
            )
            for sequence in parsed.sequences
        ], False

    async def _price_image(
        self,
        ref: ImageRef,
        body: bytes,
        total: int,
        fetches: dict[int, asyncio.Task[ImageHeader]],
        vision: VisionRule,
        engine: EnginePrices | None = None,
    ) -> ImageCost:
        """The image by its size: through ``vision``, or, with ``engine``, at its bound
        until ``_engine_priced`` asks vLLM."""
        header: ImageHeader | None = None
        if ref.source is MediaSource.DATA:
            header = self._probe_inline(ref, body, total)
        elif ref.source is MediaSource.URL:
            if self.policy.refuses_image_from(ref.source.value):
                raise RemoteImageRefusedError(
                    f"image {ref.index + 1} of {total} is a URL; this server accepts inline "
                    f"(data: URI) images only (SIDECAR_REMOTE_IMAGES is reject)"
                )
            if ref.index in fetches:
                header = await fetches[ref.index]
        if header is None:
            return image_cost(ref.index, ref.source.value, None, None, vision)
        size = (header.width_px, header.height_px)
        if engine is not None:  # at its bound until vLLM's own count is asked
            return ImageCost(ref.index, ref.source.value, *size, header.format, engine.upper_bound)
        try:
            return image_cost(ref.index, ref.source.value, size, header.format, vision)
        except ImageError as exc:
            raise exc.prefixed(f"image {ref.index + 1} of {total}") from None

    @staticmethod
    async def _engine_priced(
        cost: ImageCost,
        engine: EnginePrices,
        vision: VisionRule,
        pixel_range: tuple[int | None, int | None],
        total: int,
    ) -> ImageCost:
        """The image at vLLM's own count for its size, or at the upper bound while that count
        cannot be had; a size vLLM refuses is refused here, in vLLM's words."""
        if cost.width_px is None or cost.height_px is None:
            return replace(cost, tokens=engine.upper_bound)
        count = await engine.image_prompt_tokens(cost.width_px, cost.height_px, pixel_range)
        if count is None:
            return replace(cost, tokens=engine.upper_bound, assumed_max=True)
        if count.prompt_tokens is None:
            raise UnsupportedImageSizeError(
                f"image {cost.index + 1} of {total} ({cost.width_px}x{cost.height_px}): "
                f"vLLM refuses this size: {count.refusal}"
            )
        wrapper = vision.max_image_tokens().wrapper_tokens
        return replace(cost, tokens=engine_image_tokens(count.prompt_tokens, wrapper))

    def _readable(self, item: MediaItem, rule: VideoRule | None) -> bool:
        """Whether the sidecar reads this video's container to price it."""
        if rule is None:
            return False
        probing = self.policy.remote_images is RemoteImages.PROBE and self.remote is not None
        return item.source is MediaSource.DATA or (item.source is MediaSource.URL and probing)

    async def _read_video(
        self, item: MediaItem, body: bytes, number: int, total: int
    ) -> VideoHeader:
        """The container's metadata. For a URL, ``VideoPrefixUnreadable`` or a fetch error
        when a prefix cannot give it; VideoError for what is not a readable video."""
        max_pixels = self.policy.max_decode_pixels
        try:
            if item.source is MediaSource.DATA:
                media_type, payload = split_data_uri(_video_data_uri(item, body))
                if media_type.strip().lower() == "video/jpeg":
                    raise VideoPrefixUnreadable("a video/jpeg frame list carries no timing")
                data = decode_base64_payload(payload)
                return await asyncio.to_thread(probe_video_bytes, data, max_frame_pixels=max_pixels)
            if self.remote is None or item.url is None:
                raise RuntimeError("URL probing needs SIDECAR_REMOTE_IMAGES=probe and a URL")
            limit = self.remote.policy.max_bytes

            def parse(prefix: bytes) -> VideoHeader:
                return probe_video_prefix(prefix, limit_bytes=limit, max_frame_pixels=max_pixels)

            return await self.remote.probe_prefix(item.url, parse, noun="video")
        except RemoteImageFetchError as exc:
            raise _VideoFetchFailed(exc.message) from None
        except (VideoError, ImageError) as exc:
            raise VideoError(f"video {number + 1} of {total}: {exc.message}") from None

    async def _price_video(
        self,
        item: MediaItem,
        number: int,
        total: int,
        reads: dict[int, asyncio.Task[VideoHeader]],
        rule: VideoRule | None,
    ) -> VideoCost:
        read = reads.get(item.index)
        if rule is None or read is None:
            return self._allowance(item, number, None, _unread_reason(item, rule is None))
        try:
            header = await read
        except (VideoPrefixUnreadable, _VideoFetchFailed) as exc:
            return self._allowance(item, number, None, str(exc))
        if not header.fps or header.frame_count <= 0:
            reason = "the container gives no frame rate or frame count"
            return self._allowance(item, number, header, reason)
        try:
            tokens = rule.video_tokens(header, count_text_tokens=self._timestamp_counter())
        except VideoError as exc:
            raise exc.prefixed(f"video {number + 1} of {total}") from None
        return VideoCost(number, item.source.value, header, tokens)

    def _allowance(
        self, item: MediaItem, number: int, header: VideoHeader | None, reason: str
    ) -> VideoCost:
        tokens = self.policy.video_allowance
        return VideoCost(number, item.source.value, header, tokens, allowance_reason=reason)

    def _timestamp_counter(self) -> TextTokenCounter | None:
        """Exact counts of the text a video expansion inserts, with the model's tokenizer."""
        if self.prompt_counter is None:
            return None
        tokenizer = self.prompt_counter.tokenizer

        def count(text: str) -> int:
            return len(tokenizer.encode(text, add_special_tokens=False).ids)

        return count

    def _probe_inline(self, ref: ImageRef, body: bytes, total: int) -> ImageHeader:
        payload = ref.payload(body)
        try:
            validate_base64(payload)
            return probe_base64(payload, max_image_pixels=self.policy.max_decode_pixels)
        except ImageError as exc:
            raise exc.prefixed(f"image {ref.index + 1} of {total}") from None

    async def _probe_url(self, ref: ImageRef, total: int) -> ImageHeader:
        if self.remote is None or ref.url is None:
            raise RuntimeError("URL probing needs SIDECAR_REMOTE_IMAGES=probe and a URL")
        try:
            return await self.remote.probe(ref.url)
        except ImageError as exc:
            raise exc.prefixed(f"image {ref.index + 1} of {total}") from None


class _VideoFetchFailed(Exception):
    """A URL video's prefix could not be fetched (status, timeout, size cap): the allowance."""


def _video_data_uri(item: MediaItem, body: bytes) -> bytes | memoryview:
    """The video's data URI from the body, with JSON escapes (``\\/``) undone where present."""
    if item.uri_span is None:
        raise VideoPrefixUnreadable("the data URI was not located in the body")
    start, end = item.uri_span
    if body.find(b"\\", start, end) < 0:
        return memoryview(body)[start:end]
    return str(orjson.loads(body[start - 1 : end + 1])).encode()


def _prompt_parts(sequence: SequenceRef, text_tokens: int, generate_shape: bool) -> PromptParts:
    """One sequence's parts; a ``generate`` body's token ids already hold its media
    positions, so they are its floor and it has no text of its own."""
    if generate_shape:
        return (0, sequence.token_ids, sequence.images, sequence.media)
    return (text_tokens + sequence.token_ids, 0, sequence.images, sequence.media)


def _unread_reason(item: MediaItem, no_rule: bool) -> str:
    if no_rule:
        return "the model family has no video rule"
    if item.source is MediaSource.CACHED:
        return "a cached item (uuid) of unknown size"
    return "a URL, not probed (SIDECAR_REMOTE_IMAGES is not probe)"
