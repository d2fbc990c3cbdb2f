"""cost.assembly: the prediction serving and the replay both build from priced parts; images
priced by size or at the largest; media at their own tokens or the operator's allowance;
embeddings without one refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from sidecar.cost.assembly import (
    PricingPolicy,
    assemble_prediction,
    image_cost,
    media_prompt_tokens,
)
from sidecar.cost.prediction import ImageCost, VideoCost
from sidecar.errors import InvalidRequestError
from sidecar.profiles import load_profile
from sidecar.settings import RemoteImages
from sidecar.video import VideoTokens
from sidecar.vision import ImageTokens
from tests.support.family_dirs import write_minicpmv4_6_dir
from tests.support.predictions import QWEN_PROFILE

POLICY = PricingPolicy(audio_tokens_per_item=700, embeds_tokens_per_item=300)
IMAGES = (
    ImageCost(0, "data", 640, 480, "jpeg", ImageTokens(391, 2)),
    ImageCost(1, "data", 64, 64, "jpeg", ImageTokens(4, 2)),
)
VIDEO = VideoCost(0, "data", None, VideoTokens(1000, 10, 0, (2, 20, 25)))


def test_each_media_item_occupies_its_own_tokens_or_its_allowance() -> None:
    kinds = ["audio", "video", "embeds"]
    assert media_prompt_tokens(kinds, [VIDEO], POLICY) == [700, 1010, 300]


def test_a_video_that_is_not_read_costs_the_allowance_without_wrappers() -> None:
    allowance = PricingPolicy(video_tokens_per_item=5000).video_allowance
    assert (allowance.tokens, allowance.prompt_tokens) == (5000, 5000)


def test_embeddings_without_an_allowance_are_refused_naming_the_item() -> None:
    with pytest.raises(InvalidRequestError, match=r"embeddings input 2") as refused:
        media_prompt_tokens(["audio", "embeds"], [], PricingPolicy())
    assert refused.value.param == "image_embeds"


def test_output_is_what_was_asked_else_the_default_and_nothing_without_generation() -> None:
    policy = PricingPolicy(default_output_tokens=64)
    assert (policy.output_tokens(True, 9), policy.output_tokens(True, None)) == (9, 64)
    assert policy.output_tokens(False, 9) == 0


def test_each_prompt_is_its_visual_and_text_or_its_floor_whichever_is_longer() -> None:
    kinds = ["audio", "video"]
    positions = media_prompt_tokens(kinds, [VIDEO], POLICY)
    first = (50, 0, (0,), (0,))  # 393 + 700 + 50
    second = (0, 3000, (1,), (1,))  # token ids hold its media: 6 + 1010 < 3000
    prediction = assemble_prediction(
        IMAGES,
        [VIDEO],
        kinds,
        positions,
        [first, second],
        kv=QWEN_PROFILE.kv,
        output_tokens=0,
        n=1,
        sequences=2,
        holds_kv=True,
    )
    assert prediction.longest_prompt_tokens == 3000
    assert prediction.prompt_tokens == 393 + 700 + 50 + 3000
    # The audio allowance and the video's own tokens are visual; wrappers are not.
    assert prediction.visual_tokens == 391 + 4 + 700 + 1000
    assert prediction.text_tokens == 50 + (3000 - 6 - 1010)


@pytest.mark.parametrize(
    ("remote", "refused", "sized"),
    [
        (RemoteImages.REJECT, {"url"}, {"data"}),
        (RemoteImages.ASSUME_MAX, set(), {"data"}),
        (RemoteImages.PROBE, set(), {"data", "url"}),
    ],
)
def test_the_remote_policy_says_which_sources_are_refused_and_which_are_sized(
    remote: RemoteImages, refused: set[str], sized: set[str]
) -> None:
    policy = PricingPolicy(remote_images=remote)
    sources = ("data", "url", "cached")
    assert {source for source in sources if policy.refuses_image_from(source)} == refused
    assert {source for source in sources if policy.reads_size_from(source)} == sized


def test_an_image_is_priced_by_its_size_or_at_the_largest_when_its_size_is_unknown() -> None:
    vision = QWEN_PROFILE.vision
    sized = image_cost(0, "data", (640, 480), "jpeg", vision)
    assert (sized.tokens, sized.assumed_max) == (vision.image_tokens(640, 480), False)
    unknown = image_cost(1, "cached", None, None, vision)
    assert (unknown.tokens, unknown.assumed_max) == (vision.max_image_tokens(), True)
    assert unknown.tokens.tokens > sized.tokens.tokens


def test_an_image_numbered_in_its_markup_costs_the_digits_of_its_place(tmp_path: Path) -> None:
    # MiniCPM-V 4.6 writes <image_id>N</image_id> before each image: image 10 onwards spells
    # one more digit, known or unknown size alike (vLLM's figures: tests/renderer).
    vision = load_profile(str(write_minicpmv4_6_dir(tmp_path))).vision
    first, tenth, eleventh = (image_cost(i, "data", (640, 480), "jpeg", vision) for i in (0, 9, 10))
    assert [c.tokens.tokens for c in (first, tenth, eleventh)] == [212, 212, 213]
    unknown = image_cost(100, "url", None, None, vision)
    assert unknown.tokens.tokens == vision.max_image_tokens().tokens + 2
