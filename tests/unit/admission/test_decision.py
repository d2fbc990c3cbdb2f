"""admission.decision: every budget, every outcome (downscale plans: ``test_downscale.py``)."""

from __future__ import annotations

import pytest

from sidecar.admission.budgets import Budgets
from sidecar.admission.decision import Admit, Decision, Reason, Reject, Wait, after_hold
from tests.support.predictions import HD, ICON, PHONE, decide_for, predict


def test_decide_admits_a_request_within_every_budget() -> None:
    prediction = predict([HD])
    budgets = Budgets(max_image_tokens=4096, max_request_prompt_tokens=32768, kv_budget_bytes=2**34)
    assert decide_for(prediction, budgets) == Admit(prediction)


@pytest.mark.parametrize(
    ("budgets", "reason", "message"),
    [
        (
            Budgets(max_images_per_request=3),
            Reason.MAX_IMAGES_PER_REQUEST,
            "request carries 4 images; SIDECAR_MAX_IMAGES_PER_REQUEST is 3",
        ),
        (
            Budgets(max_image_tokens=4096),
            Reason.MAX_IMAGE_TOKENS,
            "image 2 of 4 (4032x3024) costs 15,552 tokens; SIDECAR_MAX_IMAGE_TOKENS is 4,096",
        ),
        (
            Budgets(max_image_pixels=4_000_000),
            Reason.MAX_IMAGE_PIXELS,
            "image 2 of 4 (4032x3024) has 12,192,768 pixels; SIDECAR_MAX_IMAGE_PIXELS is 4,000,000",
        ),
        (
            Budgets(max_request_visual_tokens=18_000),
            Reason.MAX_REQUEST_VISUAL_TOKENS,
            "request costs 18,251 visual tokens; SIDECAR_MAX_REQUEST_VISUAL_TOKENS is 18,000",
        ),
        (
            Budgets(max_request_prompt_tokens=18_300),
            Reason.MAX_REQUEST_PROMPT_TOKENS,
            "request costs 18,359 prompt tokens; SIDECAR_MAX_REQUEST_PROMPT_TOKENS is 18,300",
        ),
        (
            Budgets(max_request_kv_bytes=2**29),
            Reason.MAX_REQUEST_KV_BYTES,
            "request needs 1,009.8 MiB of KV cache (1,058,799,616 bytes); "
            "SIDECAR_MAX_REQUEST_KV_BYTES is 512 MiB",
        ),
    ],
    ids=["images", "image-tokens", "image-pixels", "visual", "prompt", "kv"],
)
def test_decide_rejects_with_a_message_naming_budget_value_and_limit(
    budgets: Budgets, reason: Reason, message: str
) -> None:
    decision = decide_for(predict([ICON, PHONE, HD, ICON]), budgets)
    assert isinstance(decision, Reject)
    assert (decision.reason, decision.message, decision.status) == (reason, message, 400)


def test_decide_rejects_a_request_larger_than_the_whole_kv_budget_as_never_retryable() -> None:
    decision = decide_for(predict([PHONE]), Budgets(kv_budget_bytes=100 * 2**20))
    assert isinstance(decision, Reject)
    assert decision.status == 413
    assert decision.retry_after_seconds is None
    assert decision.retryable is False
    assert "retrying will not help" in decision.message
    assert decision.reason is Reason.LARGER_THAN_KV_BUDGET


def test_decide_waits_when_the_in_flight_budget_is_full() -> None:
    prediction = predict([HD])
    budgets = Budgets(kv_budget_bytes=2**30)
    assert decide_for(prediction, budgets, inflight_kv_bytes=2**30 - 1) == Wait(prediction)
    assert decide_for(prediction, budgets, inflight_kv_bytes=0) == Admit(prediction)


def test_decide_ignores_in_flight_bytes_when_the_budget_is_off() -> None:
    prediction = predict([PHONE])
    assert decide_for(prediction, Budgets(), inflight_kv_bytes=2**50) == Admit(prediction)


def test_a_held_admit_is_recorded_as_a_wait_and_a_held_downscale_stays_one() -> None:
    hold = Reason.ENGINE_SATURATED
    assert after_hold(Decision.ADMIT, Reason.WITHIN_BUDGET, hold) == (Decision.WAIT, hold)
    downscale = (Decision.DOWNSCALE, Reason.MAX_IMAGE_TOKENS)
    assert after_hold(*downscale, hold) == downscale
    waited = (Decision.WAIT, Reason.KV_BUDGET_FULL)
    assert after_hold(*waited, hold) == waited  # held twice: the first hold is kept
