"""cost.pricer: every image and video of a parsed request priced, then the request.

Images are made with Pillow and sent inline, or served from a real aiohttp server on
127.0.0.1 for the ``probe`` policy; the vision rule's own figures (checked against vLLM's
processors in ``tests/oracle``) are what each image must cost.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import replace
from ipaddress import IPv4Address, IPv6Address
from typing import Any

import orjson
import pytest
from aiohttp import web

from sidecar.body.request_body import BodyPolicy, parse_request_body
from sidecar.cost.assembly import PricingPolicy
from sidecar.cost.prediction import with_kv_bytes
from sidecar.cost.pricer import Pricer
from sidecar.errors import ImageError, InvalidRequestError, NotAnImageError
from sidecar.images.remote import RemoteImagePolicy, RemoteImageProber
from sidecar.profiles import load_profile
from sidecar.routes import Route
from sidecar.settings import RemoteImages, Settings
from tests.support.imaging import chat, image_bytes, image_url_part, jpeg_uri, png_uri
from tests.support.sidecars import QWEN
from tests.support.videos import make_video, mp4_uri, video_part

PROFILE = load_profile(QWEN)
VISION = PROFILE.vision


def _pricer(remote: RemoteImageProber | None = None, **policy: Any) -> Pricer:
    return Pricer(PROFILE, PricingPolicy(**policy), remote)


async def _price(
    pricer: Pricer, body: dict[str, Any], route: Route = Route.CHAT, **body_policy: Any
) -> Any:
    raw = orjson.dumps(body)
    parsed = parse_request_body(raw, route, policy=BodyPolicy(**body_policy))
    return await pricer.price(parsed, raw)


def _images(*urls: str, **fields: Any) -> dict[str, Any]:
    return chat(*(image_url_part(url) for url in urls), **fields)


async def test_pricer_prices_an_inline_image_by_its_header() -> None:
    prediction = await _price(_pricer(), _images(jpeg_uri(640, 480)))
    (image,) = prediction.images
    assert (image.width_px, image.height_px, image.format) == (640, 480, "JPEG")
    assert image.tokens == VISION.image_tokens(640, 480)
    assert image.tokens.tokens == 391  # 644x476 after Qwen's resize: 46 x 34 patches / 4
    assert not image.assumed_max


async def test_pricer_adds_every_image_to_the_prompt_and_prices_output_and_n() -> None:
    body = _images(jpeg_uri(640, 480), png_uri(1280, 720), max_tokens=100, n=3)
    prediction = await _price(_pricer(), body)
    assert [image.index for image in prediction.images] == [0, 1]
    assert prediction.image_tokens == sum(
        VISION.image_tokens(w, h).tokens for w, h in [(640, 480), (1280, 720)]
    )
    assert (prediction.output_tokens, prediction.n) == (100, 3)
    assert prediction.kv_bytes > 0


async def test_pricer_falls_back_to_the_default_output_when_max_tokens_is_absent() -> None:
    prediction = await _price(_pricer(default_output_tokens=777), chat())
    assert prediction.output_tokens == 777


async def test_pricer_prices_a_url_at_the_largest_image_without_fetching_under_assume_max() -> None:
    prediction = await _price(_pricer(), _images("http://127.0.0.1:9/never-fetched.jpg"))
    (image,) = prediction.images
    assert image.assumed_max
    assert image.width_px is None
    assert image.tokens == VISION.max_image_tokens()


async def test_pricer_refuses_a_url_under_reject_naming_the_image() -> None:
    body = _images(jpeg_uri(32, 32), "https://images.example/cat.jpg")
    with pytest.raises(ImageError, match=r"image 2 of 2 is a URL.*SIDECAR_REMOTE_IMAGES is reject"):
        await _price(_pricer(remote_images=RemoteImages.REJECT), body)


def _loopback(ip: IPv4Address | IPv6Address) -> bool:
    return ip.is_loopback


@pytest.fixture
async def image_server() -> AsyncIterator[str]:
    """A real HTTP server on 127.0.0.1 serving a 1000x500 PNG at /wide.png."""
    app = web.Application()
    wide = image_bytes(1000, 500, "PNG")

    async def serve_wide(request: web.Request) -> web.Response:
        return web.Response(body=wide, content_type="image/png")

    app.router.add_get("/wide.png", serve_wide)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    yield f"http://127.0.0.1:{port}"
    await runner.cleanup()


async def test_pricer_probes_a_url_header_under_probe(image_server: str) -> None:
    prober = RemoteImageProber(RemoteImagePolicy(), address_allowed=_loopback)
    pricer = _pricer(prober, remote_images=RemoteImages.PROBE)
    prediction = await _price(pricer, _images(f"{image_server}/wide.png"))
    (image,) = prediction.images
    assert (image.width_px, image.height_px, image.source) == (1000, 500, "url")
    assert image.tokens == VISION.image_tokens(1000, 500)
    await prober.close()


async def test_pricer_names_which_image_is_not_an_image() -> None:
    body = _images(jpeg_uri(32, 32), "data:image/png;base64," + "QUJD" * 8)
    with pytest.raises(NotAnImageError, match=r"^image 2 of 2: "):
        await _price(_pricer(), body)


async def test_pricer_prices_with_a_trusted_requests_own_pixel_range() -> None:
    body = _images(jpeg_uri(1280, 960), mm_processor_kwargs={"max_pixels": 200_000})
    narrowed = await _price(_pricer(), body, trust_request_mm_kwargs=True)
    whole = await _price(_pricer(), _images(jpeg_uri(1280, 960)))
    assert narrowed.image_tokens < whole.image_tokens
    expected = VISION.with_pixel_range(None, 200_000).image_tokens(1280, 960)
    assert narrowed.images[0].tokens == expected


async def test_pricer_prices_an_inline_video_by_its_container() -> None:
    video = make_video(64, 48, 30, 30)
    prediction = await _price(_pricer(), chat(video_part(mp4_uri(video))))
    (cost,) = prediction.videos
    assert cost.allowance_reason is None
    assert cost.header is not None
    assert (cost.header.width_px, cost.header.frame_count) == (64, 30)
    assert prediction.media_tokens == prediction.video_tokens == cost.tokens.tokens
    assert prediction.wrapper_tokens == cost.tokens.wrapper_tokens


async def test_pricer_prices_a_video_url_it_does_not_probe_at_the_allowance_and_says_why() -> None:
    body = chat(video_part("https://videos.example/clip.mp4"))
    prediction = await _price(_pricer(video_tokens_per_item=5000), body)
    (cost,) = prediction.videos
    assert cost.tokens.tokens == 5000
    assert cost.allowance_reason == "a URL, not probed (SIDECAR_REMOTE_IMAGES is not probe)"


async def test_pricer_refuses_embeddings_unless_an_allowance_prices_them() -> None:
    embeds = {"type": "image_embeds", "image_embeds": "AAAA"}
    with pytest.raises(InvalidRequestError, match="--enable-mm-embeds"):
        await _price(_pricer(), chat(embeds))
    prediction = await _price(_pricer(embeds_tokens_per_item=300), chat(embeds))
    assert prediction.media_tokens == 300


async def test_pricer_holds_no_kv_for_a_route_vllm_only_renders() -> None:
    body = {"model": QWEN, "messages": [{"role": "user", "content": "hello"}], "max_tokens": 9}
    prediction = await _price(_pricer(), body, Route.MESSAGES_COUNT_TOKENS)
    assert not prediction.holds_kv


def test_pricing_policy_from_settings_takes_the_operators_choices() -> None:
    settings = Settings(
        model=QWEN,
        remote_images=RemoteImages.PROBE,
        max_decode_pixels=1_000_000,
        video_tokens_per_item=123,
        default_output_tokens=55,
    )
    policy = PricingPolicy.from_settings(settings)
    assert (policy.remote_images, policy.max_decode_pixels) == (RemoteImages.PROBE, 1_000_000)
    assert (policy.video_tokens_per_item, policy.default_output_tokens) == (123, 55)


async def test_pricer_keeps_what_truncate_prompt_tokens_keeps_of_a_text_prompt() -> None:
    long_chat = chat({"type": "text", "text": "hello " * 200})
    whole = await _price(_pricer(), long_chat)
    assert whole.prompt_tokens > 5
    cut = await _price(_pricer(), {**long_chat, "truncate_prompt_tokens": 5})
    assert (cut.prompt_tokens, cut.text_tokens) == (5, 5)
    assert cut.kv_bytes < whole.kv_bytes
    # vLLM's lax int field reads "5", 5.0 and true as 5, 5 and 1.
    for keep, kept_tokens in (("5", 5), (5.0, 5), (True, 1)):
        kept = await _price(_pricer(), {**long_chat, "truncate_prompt_tokens": keep})
        assert kept.prompt_tokens == kept_tokens
    # Longer than the prompt, or malformed (vLLM refuses it): the prompt is priced whole.
    for keep in (whole.prompt_tokens + 1, "five", 5.5, -2):
        kept = await _price(_pricer(), {**long_chat, "truncate_prompt_tokens": keep})
        assert kept.prompt_tokens == whole.prompt_tokens


async def test_pricer_never_cuts_an_image_when_truncating() -> None:
    body = _images(jpeg_uri(640, 480), truncate_prompt_tokens=10)
    prediction = await _price(_pricer(), body)
    # vLLM serves only a cut that leaves every image whole: the image's positions remain.
    assert prediction.prompt_tokens == VISION.image_tokens(640, 480).prompt_tokens
    assert prediction.text_tokens == 0


async def test_pricer_truncates_each_prompt_of_a_completions_list() -> None:
    body = {"prompt": ["one two three four five six", "seven"], "truncate_prompt_tokens": 2.0}
    prediction = await _price(_pricer(), body, Route.COMPLETIONS)
    assert prediction.longest_prompt_tokens == 2
    assert prediction.prompt_tokens <= 4


async def test_pricer_truncates_to_the_context_less_one_for_minus_one() -> None:
    context = 50
    pricer = Pricer(PROFILE, PricingPolicy(), None, context_tokens=lambda: context)
    long_chat = chat({"type": "text", "text": "hello " * 200}, truncate_prompt_tokens=-1)
    assert (await _price(pricer, long_chat)).prompt_tokens == context - 1
    # Responses truncate so unless "truncation" is absent or "disabled".
    long_input = {"input": "hello " * 200}
    for truncation, expected in (("auto", context - 1), (None, context - 1)):
        body = {**long_input, "truncation": truncation}
        assert (await _price(pricer, body, Route.RESPONSES)).prompt_tokens == expected
    for body in (long_input, {**long_input, "truncation": "disabled"}):
        assert (await _price(pricer, body, Route.RESPONSES)).prompt_tokens > context


async def test_pricer_prices_in_the_geometry_and_context_it_is_given() -> None:
    """Serving passes vLLM's block size and context: the KV bytes are those, worked out once,
    as the profile's prediction re-costed in that geometry."""
    body = _images(png_uri(800, 600), max_tokens=20_000)
    raw = orjson.dumps(body)
    parsed = parse_request_body(raw, Route.CHAT)
    coarse = replace(PROFILE.kv, block_size_tokens=512, block_size_is_final=True)
    given = await _pricer().price(parsed, raw, kv=coarse, context_tokens=8_192)
    own = await _pricer().price(parsed, raw)
    assert given == with_kv_bytes(own, coarse, context_tokens=8_192)
    assert given.kv_bytes < own.kv_bytes  # output cut to the context's room
    assert given.kv_bytes % coarse.bytes_per_block == 0
