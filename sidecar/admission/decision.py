"""The admission decision: ``Admit | Downscale | Wait | Reject``, as a pure function.

Each verdict carries its ``Decision`` (the metric label and log value) and a ``Reason``.
``REASON_DECISIONS`` says which decisions each reason can accompany, wherever the pair is
made: here, in the ledger's and the saturation gate's waits, or in an error answer. The
metrics create exactly those series up front.

``decide()`` checks a request's prediction against the operator's budgets in a fixed
order (images per request, pixels and tokens per image, then the request's visual
tokens, prompt tokens and KV bytes), then against the in-flight KV budget. When a budget
is broken and the operator chose ``downscale``, it plans new image sizes (see
``downscale_plan``) and only returns ``Downscale`` if the plan satisfies every budget;
otherwise it rejects with a message naming the budget, the predicted value and the limit.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from http import HTTPStatus
from typing import ClassVar

from sidecar.admission.budgets import Budgets
from sidecar.admission.downscale import ImageResize, plan_downscale
from sidecar.cost.prediction import RequestPrediction
from sidecar.profiles.kv_geometry import KvGeometry
from sidecar.units import format_bytes
from sidecar.vision import VisionRule


class Decision(StrEnum):
    """What the sidecar did with a request."""

    ADMIT = "admit"
    DOWNSCALE = "downscale"
    WAIT = "wait"
    REJECT = "reject"


class Reason(StrEnum):
    """Why a decision was taken: a bounded label set, named after the budget involved."""

    WITHIN_BUDGET = "within_budget"
    MAX_IMAGES_PER_REQUEST = "max_images_per_request"
    MAX_IMAGE_PIXELS = "max_image_pixels"
    MAX_IMAGE_TOKENS = "max_image_tokens"
    MAX_REQUEST_VISUAL_TOKENS = "max_request_visual_tokens"
    MAX_REQUEST_PROMPT_TOKENS = "max_request_prompt_tokens"
    MAX_REQUEST_KV_BYTES = "max_request_kv_bytes"
    KV_BUDGET_FULL = "kv_budget_full"
    LARGER_THAN_KV_BUDGET = "larger_than_kv_budget"
    QUEUE_TIMEOUT = "queue_timeout"
    QUEUE_FULL = "queue_full"
    SHED = "shed"
    ENGINE_SATURATED = "engine_saturated"
    INVALID_BODY = "invalid_body"
    INVALID_IMAGE = "invalid_image"
    REMOTE_IMAGE = "remote_image"
    BODY_TOO_LARGE = "body_too_large"
    UPSTREAM_ERROR = "upstream_error"
    CLIENT_DISCONNECT = "client_disconnect"


# The per-request budgets that downscaling can satisfy.
DOWNSCALE_REASONS = frozenset(
    {
        Reason.MAX_IMAGE_PIXELS,
        Reason.MAX_IMAGE_TOKENS,
        Reason.MAX_REQUEST_VISUAL_TOKENS,
        Reason.MAX_REQUEST_PROMPT_TOKENS,
        Reason.MAX_REQUEST_KV_BYTES,
    }
)
_REFUSED = frozenset({Decision.REJECT})
REASON_DECISIONS: dict[Reason, frozenset[Decision]] = {
    Reason.WITHIN_BUDGET: frozenset({Decision.ADMIT}),
    **{reason: frozenset({Decision.DOWNSCALE, Decision.REJECT}) for reason in DOWNSCALE_REASONS},
    Reason.MAX_IMAGES_PER_REQUEST: _REFUSED,
    # The ledger queues (wait); after SIDECAR_QUEUE_TIMEOUT_SECONDS it refuses (queue_timeout).
    Reason.KV_BUDGET_FULL: frozenset({Decision.WAIT}),
    # The saturation gate holds (wait) and, after the queue timeout, refuses.
    Reason.ENGINE_SATURATED: frozenset({Decision.WAIT, Decision.REJECT}),
    Reason.LARGER_THAN_KV_BUDGET: _REFUSED,
    Reason.QUEUE_TIMEOUT: _REFUSED,
    Reason.QUEUE_FULL: _REFUSED,
    # A sheddable request (negative priority) that would have waited.
    Reason.SHED: _REFUSED,
    Reason.INVALID_BODY: _REFUSED,
    Reason.INVALID_IMAGE: _REFUSED,
    Reason.REMOTE_IMAGE: _REFUSED,
    Reason.BODY_TOO_LARGE: _REFUSED,
    Reason.UPSTREAM_ERROR: _REFUSED,
    # A client that leaves keeps the decision taken before it left.
    Reason.CLIENT_DISCONNECT: frozenset(Decision),
}


def after_hold(decision: Decision, reason: Reason, hold: Reason) -> tuple[Decision, Reason]:
    """What a request that was held (``hold``: the ledger's full budget, the saturation
    gate) and then forwarded is recorded as: an admit becomes a wait, for the hold's reason; a
    downscale stays a downscale, its reason the budget it broke. Serving's records, the
    replay's outcomes and its tally all record a hold this way."""
    if decision is Decision.ADMIT:
        return Decision.WAIT, hold
    return decision, reason


@dataclass(frozen=True, slots=True)
class Admit:
    """Forward as sent."""

    prediction: RequestPrediction
    reason: Reason = Reason.WITHIN_BUDGET
    decision: ClassVar[Decision] = Decision.ADMIT


@dataclass(frozen=True, slots=True)
class Downscale:
    """Forward with smaller images: rewritten bytes, or vLLM's ``max_pixels``."""

    prediction: RequestPrediction
    original: RequestPrediction
    resizes: tuple[ImageResize, ...]
    processor_max_pixels: int | None
    reason: Reason
    decision: ClassVar[Decision] = Decision.DOWNSCALE


@dataclass(frozen=True, slots=True)
class Wait:
    """Queue for the in-flight KV budget."""

    prediction: RequestPrediction
    reason: Reason = Reason.KV_BUDGET_FULL
    decision: ClassVar[Decision] = Decision.WAIT


@dataclass(frozen=True, slots=True)
class Reject:
    """Answer with an error; nothing is forwarded."""

    prediction: RequestPrediction | None
    reason: Reason
    message: str
    status: int = HTTPStatus.BAD_REQUEST
    retry_after_seconds: int | None = None
    retryable: bool | None = None  # False: no retry can change the answer
    decision: ClassVar[Decision] = Decision.REJECT


Verdict = Admit | Downscale | Wait | Reject


def too_many_images(budgets: Budgets, images: int) -> bool:
    """Whether a request of ``images`` images breaks SIDECAR_MAX_IMAGES_PER_REQUEST, the first
    check, which no downscale can satisfy."""
    limit = budgets.max_images_per_request
    return limit is not None and images > limit


def images_violation(
    budgets: Budgets, pixels: Iterable[int], tokens: Sequence[int], visual_tokens: int
) -> Reason | None:
    """The first broken budget that the text cannot change, given each image's pixels and
    tokens and the request's visual tokens: pixels per image, tokens per image, then visual
    tokens per request. The replay's fast path asks this once per set of images."""
    limit = budgets.max_image_pixels
    if limit is not None and any(image > limit for image in pixels):
        return Reason.MAX_IMAGE_PIXELS
    limit = budgets.max_image_tokens
    if limit is not None and any(image > limit for image in tokens):
        return Reason.MAX_IMAGE_TOKENS
    limit = budgets.max_request_visual_tokens
    if limit is not None and visual_tokens > limit:
        return Reason.MAX_REQUEST_VISUAL_TOKENS
    return None


def text_violation(budgets: Budgets, longest_prompt_tokens: int, kv_bytes: int) -> Reason | None:
    """The first broken budget that the text can change, checked after ``images_violation``
    found none: prompt tokens, then KV bytes."""
    limit = budgets.max_request_prompt_tokens
    if limit is not None and longest_prompt_tokens > limit:
        return Reason.MAX_REQUEST_PROMPT_TOKENS
    limit = budgets.max_request_kv_bytes
    if limit is not None and kv_bytes > limit:
        return Reason.MAX_REQUEST_KV_BYTES
    return None


def prediction_images_violation(prediction: RequestPrediction, budgets: Budgets) -> Reason | None:
    """``images_violation`` of a prediction."""
    return images_violation(
        budgets,
        [image.pixels for image in prediction.images],
        [image.tokens.tokens for image in prediction.images],
        prediction.visual_tokens,
    )


def find_violation(prediction: RequestPrediction, budgets: Budgets) -> tuple[Reason, str] | None:
    """The first broken per-image or per-request budget, with a message naming it."""
    reason = prediction_images_violation(prediction, budgets) or text_violation(
        budgets, prediction.longest_prompt_tokens, prediction.kv_bytes
    )
    return None if reason is None else (reason, _violation_message(reason, prediction, budgets))


def _violation_message(reason: Reason, prediction: RequestPrediction, budgets: Budgets) -> str:
    """What the rejection says about the broken budget ``reason``."""
    total = len(prediction.images)
    if reason is Reason.MAX_IMAGE_PIXELS:
        limit = budgets.max_image_pixels or 0
        image = next(i for i in prediction.images if i.pixels > limit)
        return (
            f"{image.describe(total)} has {image.pixels:,} pixels; "
            f"SIDECAR_MAX_IMAGE_PIXELS is {limit:,}"
        )
    if reason is Reason.MAX_IMAGE_TOKENS:
        limit = budgets.max_image_tokens or 0
        image = next(i for i in prediction.images if i.tokens.tokens > limit)
        return (
            f"{image.describe(total)} costs {image.tokens.tokens:,} tokens; "
            f"SIDECAR_MAX_IMAGE_TOKENS is {limit:,}"
        )
    if reason is Reason.MAX_REQUEST_KV_BYTES:
        limit = budgets.max_request_kv_bytes or 0
        return (
            f"request needs {format_bytes(prediction.kv_bytes)} of KV cache "
            f"({prediction.kv_bytes:,} bytes); SIDECAR_MAX_REQUEST_KV_BYTES is "
            f"{format_bytes(limit)}"
        )
    if reason is Reason.MAX_REQUEST_VISUAL_TOKENS:
        value, most, noun = (
            prediction.visual_tokens, budgets.max_request_visual_tokens, "visual tokens"
        )  # fmt: skip
    else:
        value, most, noun = (
            prediction.longest_prompt_tokens, budgets.max_request_prompt_tokens, "prompt tokens"
        )  # fmt: skip
    return (
        f"request costs {value:,} {noun}; SIDECAR_{reason.value.upper()} is {most or 0:,}"
        f"{_costliest_video(prediction)}"
    )


def _costliest_video(prediction: RequestPrediction) -> str:
    """`` (video 1 of 1 (640x640, 16.0 s) costs 8,464 tokens)``, or nothing without videos."""
    if not prediction.videos:
        return ""
    video = max(prediction.videos, key=lambda v: v.tokens.tokens)
    name, tokens = video.describe(len(prediction.videos)), video.tokens.tokens
    allowance = ", the per-video allowance" if video.allowance_reason else ""
    return f" ({name} costs {tokens:,} tokens{allowance})"


def decide(
    prediction: RequestPrediction,
    budgets: Budgets,
    *,
    vision: VisionRule,
    kv: KvGeometry,
    inflight_kv_bytes: int = 0,
) -> Verdict:
    """Admit, downscale, wait or reject one request."""
    if too_many_images(budgets, len(prediction.images)):
        return Reject(
            prediction,
            Reason.MAX_IMAGES_PER_REQUEST,
            f"request carries {len(prediction.images)} images; "
            f"SIDECAR_MAX_IMAGES_PER_REQUEST is {budgets.max_images_per_request}",
        )
    violation = find_violation(prediction, budgets)
    if violation is None:
        return _against_kv_budget(Admit(prediction), budgets, inflight_kv_bytes)
    reason, message = violation
    if not budgets.downscale:
        return Reject(prediction, reason, message)
    plan = plan_downscale(prediction, budgets, vision=vision, kv=kv)
    if isinstance(plan, str):
        return Reject(prediction, reason, f"{message}; cannot downscale: {plan}")
    smaller, resizes, processor_max_pixels = plan
    remaining = find_violation(smaller, budgets)
    if remaining is not None:
        return Reject(prediction, reason, f"{message}; even downscaled, {remaining[1]}")
    downscale = Downscale(smaller, prediction, resizes, processor_max_pixels, reason)
    return _against_kv_budget(downscale, budgets, inflight_kv_bytes)


def _against_kv_budget(
    decision: Admit | Downscale, budgets: Budgets, inflight_kv_bytes: int
) -> Verdict:
    total = budgets.kv_budget_bytes
    kv_bytes = decision.prediction.kv_bytes
    if total <= 0:
        return decision
    largest = budgets.kv_budget_bytes_per_engine
    if kv_bytes > largest:
        whole = (
            f"the whole in-flight budget SIDECAR_KV_BUDGET_BYTES of {format_bytes(total)}"
            if budgets.kv_budget_engines <= 1
            else f"one data-parallel engine's share ({format_bytes(largest)}) of the in-flight "
            f"budget SIDECAR_KV_BUDGET_BYTES of {format_bytes(total)} over "
            f"{budgets.kv_budget_engines} engines"
        )
        return Reject(
            decision.prediction,
            Reason.LARGER_THAN_KV_BUDGET,
            f"request needs {format_bytes(kv_bytes)} of KV cache, more than {whole}; no "
            "replica with this budget can ever admit it, so retrying will not help: send "
            "fewer or smaller images or ask for fewer output tokens",
            status=HTTPStatus.REQUEST_ENTITY_TOO_LARGE,
            retryable=False,
        )
    if inflight_kv_bytes + kv_bytes > total and isinstance(decision, Admit):
        return Wait(decision.prediction)
    return decision
