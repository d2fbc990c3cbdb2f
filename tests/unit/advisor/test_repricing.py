"""advisor.repricing: a record priced under candidate settings as the serving code prices it."""

from __future__ import annotations

import pytest

from sidecar.admission.decision import Decision, Reason
from sidecar.advisor.records import RecordedCost
from sidecar.advisor.repricing import Candidate, with_settings
from sidecar.settings import Settings
from tests.support.imaging import PROMPT
from tests.support.proxy_helpers import RULE, expected, text_tokens
from tests.support.sidecars import QWEN

BASE = Settings(model=QWEN)
PHOTO = (4032, 3024, "jpeg", "data")


def cost(*images: tuple[int | None, int | None, str | None, str], **fields: object) -> RecordedCost:
    values: dict[str, object] = {
        "text_tokens": 23,
        "text_exact": False,
        "output_tokens": 8,
        "output_requested": 8,
    } | fields
    return RecordedCost(images=images, **values)  # type: ignore[arg-type]


def test_an_admitted_request_costs_what_the_proxy_predicts() -> None:
    # The text tokens the proxy records for its request: the estimate for PROMPT.
    priced = Candidate(BASE).price(
        cost((1920, 1080, "jpeg", "data"), text_tokens=text_tokens(PROMPT))
    )
    assert priced.decision is Decision.ADMIT
    assert (priced.visual_tokens, priced.prompt_tokens, priced.kv_bytes) == expected(
        [(1920, 1080)], output_tokens=8
    )


def test_a_per_image_budget_downscales_and_counts_the_images_shrunk() -> None:
    settings = with_settings(BASE, max_image_tokens=1024, over_budget_action="downscale")
    priced = Candidate(settings).price(cost(PHOTO, (64, 64, "png", "data")))
    assert (priced.decision, priced.reason) == (Decision.DOWNSCALE, Reason.MAX_IMAGE_TOKENS)
    assert priced.downscaled_images == 1
    assert priced.image_tokens[0] <= 1024
    assert priced.image_tokens[1] == RULE.image_tokens(64, 64).tokens


@pytest.mark.parametrize(
    ("remote", "decision", "tokens"),
    [
        ("assume_max", Decision.ADMIT, 16384),
        ("probe", Decision.ADMIT, 391),
        ("reject", Decision.REJECT, None),
    ],
)
def test_url_images_follow_the_candidates_remote_policy(
    remote: str, decision: Decision, tokens: int | None
) -> None:
    priced = Candidate(with_settings(BASE, remote_images=remote)).price(
        cost((640, 480, "jpeg", "url"))
    )
    assert priced.decision is decision
    if tokens is None:
        assert priced.reason is Reason.INVALID_IMAGE
    else:
        assert priced.image_tokens == (tokens,)


def test_refusals_the_pricer_makes_are_made_again() -> None:
    small_decode = Candidate(with_settings(BASE, max_decode_pixels=1_000_000))
    assert small_decode.price(cost(PHOTO)).reason is Reason.INVALID_IMAGE
    assert Candidate(BASE).price(cost((4000, 10, "png", "data"))).reason is Reason.INVALID_IMAGE
    embeds = cost(media=(("embeds", 0, 0, True),))
    assert Candidate(BASE).price(embeds).reason is Reason.INVALID_BODY
    kwargs = cost(PHOTO, pixel_range=(None, 200_704))
    assert Candidate(BASE).price(kwargs).reason is Reason.INVALID_BODY
    trusted = Candidate(with_settings(BASE, trust_request_mm_kwargs=True)).price(kwargs)
    assert trusted.image_tokens == (
        RULE.with_pixel_range(None, 200_704).image_tokens(4032, 3024).tokens,
    )


def test_allowances_and_default_output_follow_the_candidate() -> None:
    settings = with_settings(
        BASE, video_tokens_per_item=100, audio_tokens_per_item=50, default_output_tokens=64
    )
    media = (("video", 999, 2, True), ("video", 300, 2, False), ("audio", 0, 0, True))
    priced = Candidate(settings).price(cost(media=media, output_requested=None))
    assert priced.visual_tokens == 100 + 300 + 50
    assert priced.prompt_tokens == 100 + 300 + 2 + 50 + 23
    assert priced.kv_bytes == expected([], image_tokens=[], media_tokens=452, output_tokens=64)[2]


def test_equal_costs_price_equally_whoever_prices_them_first() -> None:
    candidate = Candidate(BASE)
    assert candidate.price(cost(PHOTO)) == candidate.price(cost(PHOTO, text_tokens=23))
    assert Candidate(BASE).price(cost(PHOTO)) == candidate.price(cost(PHOTO))
