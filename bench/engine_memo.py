"""What asking the engine costs the sidecar: the memo's hit path, a request priced through it
against the rule, and building the synthetic PNG a calibration sends.

    .venv/bin/python bench/engine_memo.py

vLLM's side of a calibration call (decode and processor) is measured on the real engine by
``tests/real_vllm/test_ask_the_engine.py`` (``make test-engine``, the tier's report). Prints
markdown; best of five rounds each.
"""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make ``sidecar`` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import orjson

from sidecar.body.request_body import parse_request_body
from sidecar.cost.assembly import PricingPolicy
from sidecar.cost.engine_prices import EngineCount, EnginePrices
from sidecar.cost.pricer import Pricer
from sidecar.images.synthetic import solid_png
from sidecar.profiles import load_profile
from sidecar.routes import Route
from tests.support.imaging import chat_with_images, jpeg_uri

MODEL = "Qwen/Qwen2.5-VL-7B-Instruct"
ROUNDS = 5
HITS = 100_000


def best(seconds: list[float]) -> float:
    return min(seconds)


async def memo_hit_seconds() -> float:
    profile = load_profile(MODEL)

    async def ask(width: int, height: int, low: int | None, high: int | None) -> EngineCount:
        return EngineCount(profile.vision.image_tokens(width, height).prompt_tokens)

    prices = EnginePrices(ask, upper_bound=profile.vision.max_image_tokens())
    await prices.image_prompt_tokens(1920, 1080)
    rounds = []
    for _ in range(ROUNDS):
        started = time.perf_counter()
        for _ in range(HITS):
            await prices.image_prompt_tokens(1920, 1080)
        rounds.append((time.perf_counter() - started) / HITS)
    return best(rounds)


async def request_seconds(images: int, *, engine: bool) -> float:
    profile = load_profile(MODEL)

    async def ask(width: int, height: int, low: int | None, high: int | None) -> EngineCount:
        return EngineCount(profile.vision.image_tokens(width, height).prompt_tokens)

    prices = EnginePrices(ask, upper_bound=profile.vision.max_image_tokens())
    prices.active = engine
    pricer = Pricer(profile, PricingPolicy(), None, engine=prices)
    body = orjson.dumps(chat_with_images(*[jpeg_uri(640, 480)] * images))
    parsed = parse_request_body(body, Route.CHAT)
    await pricer.price(parsed, body)  # the memo warm, as after the first request of a size
    rounds = []
    for _ in range(ROUNDS):
        started = time.perf_counter()
        for _ in range(100):
            await pricer.price(parsed, body)
        rounds.append((time.perf_counter() - started) / 100)
    return best(rounds)


def png_seconds(width: int, height: int) -> tuple[float, int]:
    rounds = []
    for _ in range(ROUNDS):
        solid_png.cache_clear()
        started = time.perf_counter()
        data = solid_png(width, height)
        rounds.append(time.perf_counter() - started)
    return best(rounds), len(data)


async def main() -> None:
    print("| what | time |")
    print("|---|---|")
    print(f"| memo hit, one image | {await memo_hit_seconds() * 1e6:.2f} us |")
    for images in (1, 16):
        rule = await request_seconds(images, engine=False)
        engine = await request_seconds(images, engine=True)
        print(f"| price a chat with {images} image(s): rule | {rule * 1e6:.0f} us |")
        print(f"| price a chat with {images} image(s): engine, memo warm | {engine * 1e6:.0f} us |")
    for width, height in ((640, 480), (1920, 1080), (4032, 3024)):
        seconds, size = png_seconds(width, height)
        print(f"| synthetic PNG {width}x{height} ({size / 1000:.1f} kB) | {seconds * 1e3:.1f} ms |")


if __name__ == "__main__":
    asyncio.run(main())
