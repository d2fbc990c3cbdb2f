"""advisor.fastpath: on random traffic under random budgets, the fast path answers exactly as
``predict_request`` and ``decide`` do, or hands the request to them."""

from __future__ import annotations

import random

import pytest

from sidecar.admission.decision import Reason
from sidecar.advisor.repricing import Candidate, with_settings
from tests.support.random_traffic import random_cost, random_settings


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
