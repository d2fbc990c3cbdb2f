"""advisor.fastpath: on random traffic under random budgets, the fast path answers exactly as
``predict_request`` and ``decide`` do, or hands the request to them."""

from __future__ import annotations

import random

import pytest

from sidecar.admission.decision import Reason
from sidecar.advisor.records import RecordedCost, RecordedImage, RecordedMedia
from sidecar.advisor.repricing import Candidate, with_settings
from sidecar.settings import Settings
from tests.support.sidecars import QWEN

SIZES = [
    (4032, 3024),
    (1920, 1080),
    (1280, 720),
    (640, 480),
    (64, 64),
    (3000, 200),
    (20000, 15000),
    (12000, 40),
]


def random_cost(rng: random.Random) -> RecordedCost:
    images: list[RecordedImage] = []
    for _ in range(rng.choice((0, 1, 1, 2, 3, 5))):
        roll = rng.random()
        if roll < 0.1:
            images.append((None, None, None, rng.choice(("url", "cached"))))
        else:
            width, height = rng.choice(SIZES)
            images.append((width, height, "jpeg", "url" if roll < 0.2 else "data"))
    media: list[RecordedMedia] = []
    if rng.random() < 0.2:
        media.append(("video", rng.randint(100, 9000), 2, rng.random() < 0.5))
    if rng.random() < 0.1:
        media.append(("audio", 0, 0, True))
    requested = rng.choice((None, 16, 512, 4096))
    return RecordedCost(
        images=tuple(images),
        text_tokens=rng.choice((10, 300, 3000, 30000)) + rng.randint(0, 50),
        text_exact=False,
        output_tokens=rng.choice((0, 1)) and (requested or 1024),
        output_requested=requested,
        n=rng.choice((1, 1, 3)),
        holds_kv=rng.random() < 0.9,
        media=tuple(media),
    )


def random_settings(rng: random.Random) -> Settings:
    def maybe(*values: object) -> object:
        return rng.choice((None, *values))

    return with_settings(
        Settings(model=QWEN),
        max_pixels=maybe(1_003_520, 200_704),
        max_images_per_request=maybe(2, 4),
        max_image_pixels=maybe(2_000_000, 20_000_000),
        max_image_tokens=maybe(256, 1024, 4096),
        max_request_visual_tokens=maybe(512, 2048, 8192),
        max_request_prompt_tokens=maybe(1000, 4000, 20000),
        max_request_kv_bytes=maybe(2**27, 2**29, 2**31),
        kv_budget_bytes=rng.choice((0, 2**28, 2**30, 2**33)),
        over_budget_action=rng.choice(("reject", "downscale")),
        remote_images=rng.choice(("assume_max", "probe")),
        video_tokens_per_item=rng.choice((500, 16384)),
        max_decode_pixels=rng.choice((178_956_970, 100_000_000)),
        default_output_tokens=rng.choice((64, 1024)),
    )


@pytest.mark.parametrize("seed", range(40))
def test_the_fast_path_answers_as_decide_does(seed: int) -> None:
    rng = random.Random(seed)
    candidate = Candidate(random_settings(rng))
    context = rng.choice((None, 6000, 32768))  # vLLM's max_model_len: output is cut to fit
    if context is not None:
        candidate.context_tokens = candidate._fast.context_tokens = context
    fast = handed_over = 0
    for _ in range(150):
        cost = random_cost(rng)
        answer = candidate._fast.price(cost)
        if answer is None:
            handed_over += 1
            continue
        fast += 1
        assert answer == candidate.decide(cost), cost
    assert fast > 0  # tight prompt or KV budgets hand many requests to decide()


@pytest.mark.parametrize("seed", range(20))
def test_images_alone_are_planned_image_by_image_as_decide_plans_them(seed: int) -> None:
    # No request-level image budget binds: each image's plan stands alone, and the fast path
    # sums them (``_composed_plan``) instead of asking ``plan_downscale``.
    rng = random.Random(seed)
    settings = with_settings(
        random_settings(rng),
        over_budget_action="downscale",
        max_pixels=None,  # the model's: large images cost more than the budget
        max_image_tokens=rng.choice((256, 1024)),
        max_request_visual_tokens=rng.choice((None, 1 << 20)),
        max_request_prompt_tokens=rng.choice((None, 1 << 20)),
        max_request_kv_bytes=None,
    )
    candidate = Candidate(settings)
    for _ in range(150):
        cost = random_cost(rng)
        cost.media = ()
        answer = candidate._fast.price(cost)
        if answer is not None:
            assert answer == candidate.decide(cost), cost
    composed = [
        shape
        for shape in candidate._fast._image_shapes.values()
        if not isinstance(shape, Reason) and shape.parts is not None and shape.plan is not None
    ]
    assert any(isinstance(shape.plan, tuple) for shape in composed)
