"""One recorded request under candidate settings, priced and decided by the serving code.

The vision rule is the candidate profile's (its ``SIDECAR_MIN_PIXELS``/``MAX_PIXELS``, KV
dtype, block size and tensor parallelism); the prediction is ``predict_request``; the
decision is ``decide`` with ``Budgets.from_settings``, downscale planning included. The
in-flight budget is applied later, by the simulation: here ``decide`` sees nothing in flight,
so its answer is admit, downscale or reject. Equal recorded costs get one answer, memoized.

What the record cannot change: text tokens are replayed as counted (a new
``SIDECAR_TEXT_CHARS_PER_TOKEN`` does not re-estimate them), and videos keep their priced
tokens unless they were priced at the allowance, which follows the candidate's.
"""

from __future__ import annotations

from dataclasses import replace

from sidecar.admission.budgets import Budgets
from sidecar.admission.decision import Decision, Downscale, Reason, decide
from sidecar.advisor.cached_rule import CachedKv, CachedRule
from sidecar.advisor.fastpath import FastPath
from sidecar.advisor.priced import Priced
from sidecar.advisor.records import RecordedCost, RecordedImage
from sidecar.cost.assembly import (
    PricingPolicy,
    assemble_prediction,
    image_cost,
    media_prompt_tokens,
)
from sidecar.cost.prediction import ImageCost, RequestPrediction, VideoCost
from sidecar.errors import ConfigurationError, ImageError, InvalidRequestError
from sidecar.profiles import ModelProfile, ProfileOverrides, load_profile
from sidecar.settings import Settings
from sidecar.video import VideoTokens
from sidecar.vision import VisionRule


class _Refused(Exception):
    def __init__(self, reason: Reason) -> None:
        super().__init__(reason.value)
        self.reason = reason


class Candidate:
    """Candidate settings, ready to price records; one per replay."""

    def __init__(self, settings: Settings, profile: ModelProfile | None = None) -> None:
        self.settings = settings
        self.policy = PricingPolicy.from_settings(settings)
        loaded = profile or load_profile(settings.model, ProfileOverrides.from_settings(settings))
        self.profile = replace(loaded, kv=CachedKv.of(loaded.kv))
        self.budgets: Budgets = Budgets.from_settings(settings, self.profile)
        # vLLM's max_model_len is read live; a replay has the model's context.
        self.context_tokens = self.profile.max_position_embeddings
        self.vision = CachedRule(self.profile.vision)
        self._rules: dict[tuple[int | None, int | None] | None, VisionRule] = {None: self.vision}
        self._images: dict[tuple[int, RecordedImage, int], ImageCost] = {}
        self._priced: dict[RecordedCost, Priced] = {}
        self._fast = FastPath(
            self.budgets,
            self.profile.kv,
            self.vision,
            self._predict_or_reason,
            self._image_or_reason,
            settings.default_output_tokens,
            self.context_tokens,
        )

    @property
    def shapes(self) -> int:
        """Distinct image-and-media shapes priced so far (the fast path's memo)."""
        return self._fast.shapes

    def price(self, cost: RecordedCost) -> Priced:
        """The answer for this cost: the fast path's, else ``decide``'s (memoized)."""
        fast = self._fast.price(cost)
        if fast is not None:
            return fast
        priced = self._priced.get(cost)
        if priced is None:
            priced = self._priced[cost] = self.decide(cost)
        return priced

    def _predict_or_reason(self, cost: RecordedCost) -> RequestPrediction | Reason:
        try:
            return self.predict(cost, self._rule(cost.pixel_range))
        except _Refused as refused:
            return refused.reason

    def _image_or_reason(self, image: RecordedImage) -> ImageCost | Reason:
        try:
            return self._image(0, image, self.vision)
        except _Refused as refused:
            return refused.reason

    def decide(self, cost: RecordedCost) -> Priced:
        """The answer from ``predict`` and ``decide``, as ``serve`` takes it."""
        try:
            vision = self._rule(cost.pixel_range)
            prediction = self.predict(cost, vision)
        except _Refused as refused:
            return Priced(Decision.REJECT, refused.reason)
        verdict = decide(prediction, self.budgets, vision=vision, kv=self.profile.kv)
        forwarded = verdict.prediction or prediction  # what the response headers show
        tokens = tuple(image.tokens.tokens for image in forwarded.images)
        shrunk = 0
        if isinstance(verdict, Downscale):
            before = (image.tokens.tokens for image in verdict.original.images)
            shrunk = sum(after < was for after, was in zip(tokens, before, strict=True))
        return Priced(
            verdict.decision,
            verdict.reason,
            forwarded.visual_tokens,
            forwarded.prompt_tokens,
            forwarded.kv_bytes,
            tokens,
            shrunk,
        )

    def predict(self, cost: RecordedCost, vision: VisionRule) -> RequestPrediction:
        """The request's prediction under the candidate, as ``Pricer.price`` makes it."""
        images = [self._image(n, image, vision) for n, image in enumerate(cost.images)]
        policy = self.policy
        videos: list[VideoCost] = []
        for kind, tokens, wrapper, allowance in cost.media:
            if kind == "video":
                video_tokens = (
                    policy.video_allowance
                    if allowance
                    else VideoTokens(tokens, wrapper, 0, (0, 0, 0))
                )
                reason = "allowance" if allowance else None
                videos.append(VideoCost(len(videos), "data", None, video_tokens, reason))
        kinds = [item[0] for item in cost.media]
        try:
            positions = media_prompt_tokens(kinds, videos, policy)
        except InvalidRequestError:
            raise _Refused(Reason.INVALID_BODY) from None  # as serving refuses embeddings
        prompts = cost.prompts or (
            (cost.text_tokens, 0, tuple(range(len(images))), tuple(range(len(cost.media)))),
        )
        return assemble_prediction(
            images,
            videos,
            kinds,
            positions,
            prompts,
            kv=self.profile.kv,
            output_tokens=policy.output_tokens(cost.output_tokens > 0, cost.output_requested),
            n=cost.n,
            sequences=cost.sequences,
            holds_kv=cost.holds_kv,
            # As the proxy does: output cut to the context vLLM leaves it.
            context_tokens=self.context_tokens,
        )

    def _rule(self, pixel_range: tuple[int | None, int | None] | None) -> VisionRule:
        rule = self._rules.get(pixel_range)
        if rule is None:
            if pixel_range is None:
                rule = self.vision
            elif not self.settings.trusts_request_mm_kwargs:
                raise _Refused(Reason.INVALID_BODY)  # mm_processor_kwargs refused, as vLLM does
            else:
                try:
                    rule = self.vision.with_pixel_range(*pixel_range)
                except ConfigurationError:
                    raise _Refused(Reason.INVALID_BODY) from None
            self._rules[pixel_range] = rule
        return rule

    def _image(self, index: int, image: RecordedImage, vision: VisionRule) -> ImageCost:
        key = (index, image, id(vision))
        cost = self._images.get(key)
        if cost is None:
            cost = self._images[key] = self._price_image(index, image, vision)
        return cost

    def _price_image(self, index: int, image: RecordedImage, vision: VisionRule) -> ImageCost:
        width, height, image_format, source = image
        policy = self.policy
        if policy.refuses_image_from(source):
            raise _Refused(Reason.INVALID_IMAGE)
        if width is None or height is None or not policy.reads_size_from(source):
            return image_cost(index, source, None, None, vision)
        if width * height > policy.max_decode_pixels:
            raise _Refused(Reason.INVALID_IMAGE)
        try:
            return image_cost(index, source, (width, height), image_format, vision)
        except ImageError:
            raise _Refused(Reason.INVALID_IMAGE) from None


def with_settings(settings: Settings, **changes: object) -> Settings:
    """``settings`` with fields changed, validated as ``Settings`` validates them."""
    values = settings.model_dump() | changes
    return Settings.model_validate(values)
