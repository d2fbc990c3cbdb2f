"""Random recorded costs and random candidate budgets, for the advisor's agreement tests."""

from __future__ import annotations

import random

from sidecar.advisor.records import RecordedCost, RecordedImage, RecordedMedia
from sidecar.advisor.repricing import with_settings
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
