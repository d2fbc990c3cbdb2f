"""advisor.fastpath: on random traffic under random budgets, the fast path answers exactly as
``predict_request`` and ``decide`` do, or hands the request to them."""

from __future__ import annotations

import random
from dataclasses import replace

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from sidecar.admission.decision import Reason
from sidecar.advisor.records import RecordedCost, RecordedMedia
from sidecar.advisor.repricing import Candidate, with_settings
from sidecar.profiles import ProfileOverrides, load_profile
from sidecar.settings import Settings
from tests.support.random_traffic import random_cost, random_settings
from tests.support.sidecars import QWEN


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


_PROFILE = load_profile(QWEN, ProfileOverrides())
_IMAGE_SIZES = st.sampled_from(((4032, 3024), (1280, 720), (640, 480), (64, 64), (3000, 200)))


@st.composite
def _costs(draw: st.DrawFn) -> RecordedCost:
    sizes = draw(st.lists(_IMAGE_SIZES, max_size=4))
    media: tuple[RecordedMedia, ...] = ()
    if draw(st.booleans()):
        media = (("video", draw(st.integers(1, 9000)), 2, draw(st.booleans())),)
    requested = draw(st.one_of(st.none(), st.integers(1, 4096)))
    return RecordedCost(
        images=tuple((width, height, "jpeg", "data") for width, height in sizes),
        text_tokens=draw(st.integers(0, 30_000)),
        text_exact=False,
        output_tokens=draw(st.sampled_from((0, requested or 1024))),
        output_requested=requested,
        n=draw(st.integers(1, 3)),
        media=media,
    )


def _near(draw: st.DrawFn, value: int) -> int | None:
    """No budget, or one at, just under or just over ``value``: where ``>`` and ``>=`` part."""
    return draw(st.sampled_from((None, max(1, value - 1), max(1, value), value + 1)))


@given(data=st.data(), cost=_costs(), downscale=st.booleans())
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_the_fast_path_agrees_with_decide_at_every_budget_boundary(
    data: st.DataObject, cost: RecordedCost, downscale: bool
) -> None:
    # Each budget is drawn at the request's own figure under no budgets, one under or one
    # over, so a check the fast path makes differently from ``decide`` (its order, ``>``
    # for ``>=``) gives a different answer here.
    free = Candidate(Settings(model=QWEN), _PROFILE)
    base = free._predict_or_reason(cost)
    assume(not isinstance(base, Reason))
    assert not isinstance(base, Reason)
    image_tokens = [image.tokens.tokens for image in base.images] or [1]
    pixels = [image.pixels for image in base.images] or [1]
    draw = data.draw
    budgets = Settings(
        model=QWEN,
        max_images_per_request=_near(draw, len(base.images)),
        max_image_pixels=_near(draw, draw(st.sampled_from(pixels))),
        max_image_tokens=_near(draw, draw(st.sampled_from(image_tokens))),
        max_request_visual_tokens=_near(draw, base.visual_tokens),
        max_request_prompt_tokens=_near(draw, base.longest_prompt_tokens),
        max_request_kv_bytes=_near(draw, base.kv_bytes),
        kv_budget_bytes=draw(st.sampled_from((0, base.kv_bytes, base.kv_bytes + 1))),
        over_budget_action="downscale" if downscale else "reject",
    )
    candidate = Candidate(budgets, _PROFILE)
    answer = candidate._fast.price(cost)
    assert answer is None or answer == candidate.decide(cost)
