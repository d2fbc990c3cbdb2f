"""Price every image of a parsed request, then the whole request.

Inline images are probed from their base64 header (microseconds, no pixels). URL images
follow ``SIDECAR_REMOTE_IMAGES``: priced at the model's largest image without fetching
(``assume_max``), probed through the guarded header fetcher (``probe``), or refused
(``reject``). Images reused by ``uuid`` are priced at the largest image.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, replace

from sidecar.errors import ImageError
from sidecar.images.probe import ImageHeader, probe_base64, validate_base64
from sidecar.images.refs import ImageRef, ImageSource
from sidecar.images.remote import RemoteImageProber
from sidecar.model_profiles import ModelProfile
from sidecar.prediction import (
    ImageCost,
    RequestPrediction,
    estimate_text_tokens,
    predict_request,
)
from sidecar.request_body import RequestBody, Route
from sidecar.settings import RemoteImages, Settings
from sidecar.text_tokens import ChatTemplateError, PromptCounter


@dataclass(frozen=True, slots=True)
class Pricer:
    """What pricing needs, built once at start-up."""

    profile: ModelProfile
    settings: Settings
    remote: RemoteImageProber | None
    prompt_counter: PromptCounter | None = None

    async def price(self, parsed: RequestBody, body: bytes) -> RequestPrediction:
        """The request's predicted cost; raises ImageError naming the bad image."""
        total = len(parsed.images)
        fetches = {
            ref.index: asyncio.create_task(self._probe_url(ref, total))
            for ref in parsed.images
            if ref.source is ImageSource.URL and self.settings.remote_images is RemoteImages.PROBE
        }
        try:
            images = [await self._price_image(ref, body, total, fetches) for ref in parsed.images]
        finally:
            for task in fetches.values():
                task.cancel()
        media_tokens = sum(
            self.settings.video_tokens_per_item
            if item.kind == "video"
            else self.settings.audio_tokens_per_item
            for item in parsed.media
            if item.kind in ("video", "audio")
        )
        output_tokens = parsed.max_output_tokens or self.settings.default_output_tokens
        text_tokens, exact = self._text_tokens(parsed, images)
        prediction = predict_request(
            images,
            kv=self.profile.kv,
            text_tokens=text_tokens + parsed.prompt_token_ids,
            media_tokens=media_tokens,
            output_tokens=output_tokens,
            # Each prompt of a completions batch is its own sequence of n completions.
            n=parsed.n * parsed.prompt_count,
        )
        return replace(prediction, text_tokens_exact=exact)

    def _text_tokens(self, parsed: RequestBody, images: list[ImageCost]) -> tuple[int, bool]:
        """Text tokens: exact from the chat template where possible, else the estimate."""
        if self.prompt_counter is not None and parsed.route is Route.CHAT:
            costs = [image.tokens for image in images]
            try:
                prompt = self.prompt_counter.chat_prompt_tokens(parsed.skeleton, costs)
            except ChatTemplateError:
                pass
            else:
                visual = sum(cost.tokens + cost.wrapper_tokens for cost in costs)
                return prompt - visual, True
        return estimate_text_tokens(parsed.text_chars, self.settings.text_chars_per_token), False

    async def _price_image(
        self,
        ref: ImageRef,
        body: bytes,
        total: int,
        fetches: dict[int, asyncio.Task[ImageHeader]],
    ) -> ImageCost:
        header: ImageHeader | None = None
        if ref.source is ImageSource.DATA:
            header = self._probe_inline(ref, body, total)
        elif ref.source is ImageSource.URL:
            if self.settings.remote_images is RemoteImages.REJECT:
                raise ImageError(
                    f"image {ref.index + 1} of {total} is a URL; this server accepts inline "
                    f"(data: URI) images only (SIDECAR_REMOTE_IMAGES is reject)"
                )
            if ref.index in fetches:
                header = await fetches[ref.index]
        if header is None:
            return ImageCost(
                index=ref.index,
                source=ref.source.value,
                width_px=None,
                height_px=None,
                format=None,
                tokens=self.profile.vision.max_image_tokens(),
                assumed_max=True,
            )
        try:
            tokens = self.profile.vision.image_tokens(header.width_px, header.height_px)
        except ImageError as exc:
            raise exc.prefixed(f"image {ref.index + 1} of {total}") from None
        return ImageCost(
            index=ref.index,
            source=ref.source.value,
            width_px=header.width_px,
            height_px=header.height_px,
            format=header.format,
            tokens=tokens,
        )

    def _probe_inline(self, ref: ImageRef, body: bytes, total: int) -> ImageHeader:
        payload = ref.payload(body)
        try:
            validate_base64(payload)
            return probe_base64(payload, max_image_pixels=self.settings.max_decode_pixels)
        except ImageError as exc:
            raise exc.prefixed(f"image {ref.index + 1} of {total}") from None

    async def _probe_url(self, ref: ImageRef, total: int) -> ImageHeader:
        if self.remote is None or ref.url is None:
            raise RuntimeError("URL probing needs SIDECAR_REMOTE_IMAGES=probe and a URL")
        try:
            return await self.remote.probe(ref.url)
        except ImageError as exc:
            raise exc.prefixed(f"image {ref.index + 1} of {total}") from None
