"""advisor.fastpath: on random traffic under random budgets, the fast path answers exactly as
``predict_request`` and ``decide`` do, or hands the request to them."""

from __future__ import annotations

import random
from dataclasses import replace

import pytest

from sidecar.admission.decision import Reason
from sidecar.advisor.repricing import Candidate, with_settings
from sidecar.profiles import ProfileOverrides, load_profile
from tests.support.random_traffic import random_cost, random_settings


@pytest.mark.parametrize("seed", range(40))
def test_the_fast_path_answers_as_decide_does(seed: int) -> None:
    rng = random.Random(seed)
    settings = random_settings(rng)
    profile = load_profile(settings.model, ProfileOverrides.from_settings(settings))
    context = rng.choice((None, 6000, 32768))  # vLLM's max_model_len: output is cut to fit
    if context is not None:
        profile = replace(profile, max_position_embeddings=context)
    candidate = Candidate(settings, profile)
    for _ in range(150):
        cost = random_cost(rng)
        assert candidate.price(cost) == candidate.decide(cost), cost
    assert candidate.shapes > 0  # the fast path priced some; tight budgets hand the rest over


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
