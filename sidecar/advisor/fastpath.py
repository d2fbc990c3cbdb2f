"""The replay's fast path: one prompt's answer without rebuilding its prediction.

Text tokens differ from request to request, so few whole requests repeat; their images do.
``decide`` reads the text only through the prompt and KV budgets and the KV arithmetic, so
everything else is worked out once per image shape (``_Shape``: the priced images, the
per-image and visual-token violation, the downscale plan when the text cannot change its
allowance) and each request adds only its sums. A shape of images alone is itself summed
from each image's price, and so is its plan where no request-level image budget binds
(each image is then planned on its own): thousands of shapes are combinations of a few
dozen sizes. A request whose text could change the downscale plan, a request with several
prompts or its own pixel range, and the ``processor_kwargs`` method take ``decide`` itself.
The budget checks themselves are the decision's (``too_many_images``, ``images_violation``,
``text_violation``): only the order of the steps around them is written here, and
``tests/unit/advisor/test_fastpath.py`` checks the two paths agree on random traffic under
random budgets and at every budget's boundary.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from sidecar.admission.budgets import Budgets
from sidecar.admission.decision import (
    Decision,
    Reason,
    images_violation,
    prediction_images_violation,
    text_violation,
    too_many_images,
)
from sidecar.admission.downscale import ImageResize, plan_downscale, resize_images
from sidecar.advisor.priced import Priced
from sidecar.advisor.records import RecordedCost, RecordedImage
from sidecar.cost.prediction import ImageCost, RequestPrediction
from sidecar.profiles.kv_geometry import KvGeometry
from sidecar.vision import VisionRule

_Plan = tuple[tuple[int, ...], int, int, int, Reason | None, int]  # tokens, sums, violation
_Resized = tuple[tuple[ImageCost, ...], tuple[ImageResize, ...]]
_UNLIMITED = 1 << 62
# Enum members read once: a class attribute lookup per request adds up over millions.
_ADMIT, _DOWNSCALE, _REJECT = Decision.ADMIT, Decision.DOWNSCALE, Decision.REJECT
_WITHIN, _TOO_MANY = Reason.WITHIN_BUDGET, Reason.MAX_IMAGES_PER_REQUEST
_LARGER = Reason.LARGER_THAN_KV_BUDGET


@dataclass(slots=True)
class _Shape:
    """What a set of images and media costs under the candidate, whatever the text."""

    source: RecordedCost  # a request with these images and media
    parts: tuple[ImageCost, ...] | None  # its images priced one by one; None: with media
    tokens: tuple[int, ...]  # per image
    image_tokens: int
    fixed_visual: int  # media tokens, images' and videos' wrappers
    visual: int
    media_tokens: int
    image_wrappers: int
    cross: int
    too_many: bool
    violation: Reason | None  # per-image pixels or tokens, or the request's visual tokens
    allowance: int = 0  # the most image tokens the request-level image budgets leave
    plan: _Plan | str | None = None
    prediction: RequestPrediction | None = None  # at text 0; made when the plan needs it


class FastPath:
    """Prices single-prompt records of one candidate; None where ``decide`` must."""

    def __init__(
        self,
        budgets: Budgets,
        kv: KvGeometry,
        vision: VisionRule,
        predict: Callable[[RecordedCost], RequestPrediction | Reason],
        price_image: Callable[[RecordedImage], ImageCost | Reason],
        default_output_tokens: int,
        context_tokens: int,
    ) -> None:
        self.budgets, self.kv, self.vision, self._predict = budgets, kv, vision, predict
        self._price_image = price_image
        self._images: dict[RecordedImage, ImageCost | Reason] = {}
        self._resized: dict[tuple[RecordedImage, int], _Resized | str] = {}  # by image, cap
        self.default_output_tokens = default_output_tokens
        self.context_tokens = context_tokens
        self._shapes: dict[tuple[object, ...], _Shape | Reason] = {}  # images and media
        self._image_shapes: dict[tuple[RecordedImage, ...], _Shape | Reason] = {}
        self._kv: dict[int | tuple[int, int], int] = {}
        self._prompt_limit = budgets.max_request_prompt_tokens or _UNLIMITED
        self._kv_limit = (
            _UNLIMITED if budgets.max_request_kv_bytes is None else (budgets.max_request_kv_bytes)
        )
        self._downscale = budgets.downscale
        self._hands_over = budgets.downscale and budgets.downscale_with_processor_kwargs
        self._total = budgets.kv_budget_bytes
        self._largest = budgets.kv_budget_bytes_per_engine if self._total > 0 else _UNLIMITED

    @property
    def shapes(self) -> int:
        return len(self._shapes) + len(self._image_shapes)

    def kv_bytes(self, tokens: int, cross: int) -> int:
        """``request_kv_bytes``, remembered (by the token count alone where, as nearly always,
        no cross-attention states are held: an int hashes faster than a pair)."""
        key = (tokens, cross) if cross else tokens
        answer = self._kv.get(key)
        if answer is None:
            answer = self._kv[key] = self.kv.request_kv_bytes(tokens, cross)
        return answer

    def price(self, cost: RecordedCost) -> Priced | None:
        """The answer, or None where ``decide`` must give it. Written out for speed: a replay
        asks it for every distinct recorded cost, hundreds of thousands of times."""
        if self._hands_over or cost.prompts or cost.pixel_range or cost.sequences != 1:
            return None
        if cost.media:
            key: tuple[object, ...] = (cost.images, cost.media)
            shape = self._shapes.get(key)
            if shape is None:
                shape = self._shapes[key] = self._shape(cost)
        else:  # images alone, as most requests are: keyed by them, one tuple less to hash
            shape = self._image_shapes.get(cost.images)
            if shape is None:
                shape = self._image_shapes[cost.images] = self._shape(cost)
        if isinstance(shape, Reason):  # refused whatever the text: a URL, an image too large
            return Priced(_REJECT, shape)
        text = cost.text_tokens
        prompt = shape.image_tokens + shape.fixed_visual + text
        output = (cost.output_requested or self.default_output_tokens) if cost.output_tokens else 0
        kv = self._request_kv(cost, prompt, output, shape.cross)
        images, visual = shape.tokens, shape.visual
        if shape.too_many:
            return Priced(_REJECT, _TOO_MANY, visual, prompt, kv, images)
        reason = shape.violation
        if reason is None and (prompt > self._prompt_limit or kv > self._kv_limit):
            # Some text budget is broken: which one is the decision's to say. Asked only then,
            # a call per request being a tenth of the replay's pricing.
            reason = text_violation(self.budgets, prompt, kv)
        if reason is None:
            if kv > self._largest:
                return Priced(_REJECT, _LARGER, visual, prompt, kv, images)
            return Priced(_ADMIT, _WITHIN, visual, prompt, kv, images)
        if not self._downscale:
            return Priced(_REJECT, reason, visual, prompt, kv, images)
        fixed = prompt - shape.image_tokens
        allowance = shape.allowance
        if self._prompt_limit - fixed < allowance or (
            self._kv_limit < _UNLIMITED
            and self.kv_bytes(fixed + allowance + cost.n * output, shape.cross) > self._kv_limit
        ):
            return None  # the text changes the plan: decide() itself
        plan = shape.plan
        if plan is None:
            plan = self._plan(shape, text)
        if isinstance(plan, str):
            return Priced(_REJECT, reason, visual, prompt, kv, images)
        kept, tokens, wrappers, cross, late, shrunk = plan
        new_prompt = prompt - shape.image_tokens - shape.image_wrappers + tokens + wrappers
        new_kv = self._request_kv(cost, new_prompt, output, cross)
        if late is not None or text_violation(self.budgets, new_prompt, new_kv) is not None:
            return Priced(_REJECT, reason, visual, prompt, kv, images)  # still over a budget
        new_visual = tokens + shape.media_tokens
        if new_kv > self._largest:
            return Priced(_REJECT, _LARGER, new_visual, new_prompt, new_kv, kept)
        return Priced(_DOWNSCALE, reason, new_visual, new_prompt, new_kv, kept, shrunk)

    def _request_kv(self, cost: RecordedCost, prompt: int, output: int, cross: int) -> int:
        """``with_kv_bytes`` for one prompt: output cut to the room the context leaves."""
        if not cost.holds_kv:
            return 0
        room = self.context_tokens - prompt
        tokens = prompt + cost.n * (output if output <= room else max(0, room))
        answer = self._kv.get(tokens) if not cross else None  # kv_bytes(), its common case
        return self.kv_bytes(tokens, cross) if answer is None else answer

    def _shape(self, cost: RecordedCost) -> _Shape | Reason:
        shape = self._composed(cost) if not cost.media else self._with_media(cost)
        if isinstance(shape, _Shape):
            limit = self.budgets.max_request_visual_tokens
            most = _UNLIMITED if limit is None else limit - shape.media_tokens
            shape.allowance = min(shape.image_tokens, most)
        return shape

    def _with_media(self, cost: RecordedCost) -> _Shape | Reason:
        """Images with videos, audio or embeddings: ``predict`` at text 0."""
        base = self._predict(replace(cost, text_tokens=0))
        if isinstance(base, Reason):
            return base
        return _Shape(
            source=cost,
            parts=None,
            tokens=tuple(i.tokens.tokens for i in base.images),
            image_tokens=base.image_tokens,
            fixed_visual=base.prompt_tokens - base.image_tokens,
            visual=base.visual_tokens,
            media_tokens=base.media_tokens,
            image_wrappers=sum(i.tokens.wrapper_tokens for i in base.images),
            cross=base.cross_attention_tokens,
            too_many=too_many_images(self.budgets, len(base.images)),
            violation=prediction_images_violation(base, self.budgets),
            prediction=base,
        )

    def _composed(self, cost: RecordedCost) -> _Shape | Reason:
        """Images alone, summed from each image's price (``predict`` at text 0, written for
        this case: a request's images are priced one by one)."""
        parts = []
        for image in cost.images:
            part = self._images.get(image)
            if part is None:
                part = self._images[image] = self._price_image(image)
            if isinstance(part, Reason):
                return part  # the first refused image, as ``predict`` refuses
            parts.append(part)
        tokens = tuple([part.tokens.tokens for part in parts])
        image_tokens = sum(tokens)
        wrappers = sum([part.tokens.wrapper_tokens for part in parts])
        return _Shape(
            source=cost,
            parts=tuple(parts),
            tokens=tokens,
            image_tokens=image_tokens,
            fixed_visual=wrappers,
            visual=image_tokens,
            media_tokens=0,
            image_wrappers=wrappers,
            cross=sum([part.tokens.cross_attention_tokens for part in parts]),
            too_many=too_many_images(self.budgets, len(parts)),
            violation=images_violation(
                self.budgets, [part.pixels for part in parts], tokens, image_tokens
            ),
        )

    def _plan(self, shape: _Shape, text: int) -> _Plan | str:
        """The downscale plan, made once for the shape (its allowance does not read the text)."""
        if shape.plan is None:
            if shape.parts is not None and shape.allowance == shape.image_tokens:
                shape.plan = self._composed_plan(shape.source.images, shape.parts, shape.tokens)
            else:
                shape.plan = self._planned(shape, text)
        return shape.plan

    def _planned(self, shape: _Shape, text: int) -> _Plan | str:
        """``plan_downscale`` itself."""
        if shape.prediction is None:
            base = self._predict(replace(shape.source, text_tokens=0))
            if isinstance(base, Reason):  # pragma: no cover - the shape was priced before
                return base.value
            shape.prediction = base
        at = replace(shape.prediction, text_tokens=text)
        plan = plan_downscale(at, self.budgets, vision=self.vision, kv=self.kv)
        if isinstance(plan, str):
            return plan
        smaller = plan[0].images
        kept = tuple(i.tokens.tokens for i in smaller)
        return (
            kept,
            sum(kept),
            sum(i.tokens.wrapper_tokens for i in smaller),
            plan[0].cross_attention_tokens,
            prediction_images_violation(plan[0], self.budgets),
            sum(a < b for a, b in zip(kept, shape.tokens, strict=True)),
        )

    def _composed_plan(
        self, images: Sequence[RecordedImage], parts: Sequence[ImageCost], tokens: Sequence[int]
    ) -> _Plan | str:
        """``plan_downscale``'s resize plan where no request-level budget binds: the water
        level is then the largest resizable image's cost, so ``resize_images`` at that level
        is the plan, with no prediction to build around it. ``resize_images`` plans each image
        on its own under one token cap, so each image's plan under a cap is made once: a
        thousand shapes are a few dozen sizes."""
        resizable = [part.tokens.tokens for part in parts if part.resizable]
        if not parts or not resizable:
            return "nothing to shrink: no images, or only URLs"
        level = max(resizable)
        cap = min(level, self.budgets.max_image_tokens or level)  # as ``resize_images`` caps
        planned = []
        resized = False
        for image, part in zip(images, parts, strict=True):
            key = (image, cap)
            one = self._resized.get(key)
            if one is None:
                one = self._resized[key] = resize_images((part,), self.budgets, self.vision, cap)
            if isinstance(one, str):
                return one
            planned.append(one[0][0])
            resized = resized or bool(one[1])
        if not resized:
            return "no smaller size lowers this model's cost"
        kept = tuple([part.tokens.tokens for part in planned])
        return (
            kept,
            sum(kept),
            sum([part.tokens.wrapper_tokens for part in planned]),
            sum([part.tokens.cross_attention_tokens for part in planned]),
            images_violation(self.budgets, [part.pixels for part in planned], kept, sum(kept)),
            sum([a < b for a, b in zip(kept, tokens, strict=True)]),
        )
