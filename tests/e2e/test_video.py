"""Videos end to end: inline and URL videos priced exactly (or at the allowance, saying why),
over budget rejected naming the video, and what the log line and the metrics record."""

from __future__ import annotations

import io
from collections.abc import Callable
from typing import Any

import aiohttp
import orjson
import pytest
import structlog
from aiohttp import web
from PIL import Image
from prometheus_client import CollectorRegistry
from pytest_aiohttp import AiohttpServer

from sidecar.serve.app import make_remote_prober
from sidecar.serve.keys import METRICS
from sidecar.serve.server import running_sidecar
from sidecar.settings import Settings
from sidecar.standin import StandinServer
from sidecar.video.probe import probe_video_bytes
from tests.support.imaging import data_uri
from tests.support.proxy_helpers import PROMPT_TOKENS, VISUAL, finished, post, text_tokens
from tests.support.sidecars import QWEN, SidecarFactory
from tests.support.videos import MP4, QWEN25_RULE, make_video, mp4_uri, video_chat, video_part

BRIEF_VIDEO = (640, 640, 32, 2)  # 16 s at 2 fps: 32 frames sampled, 16 groups of 529 tokens
TEXT_ESTIMATE = text_tokens("What happens?")  # the estimate: one user message, no tokenizer


async def test_sidecar_reports_an_inline_videos_exact_tokens(
    make_sidecar: SidecarFactory, standin: StandinServer, session: aiohttp.ClientSession
) -> None:
    sidecar = await make_sidecar()
    body = video_chat(video_part(mp4_uri(make_video(*BRIEF_VIDEO))))
    with structlog.testing.capture_logs() as logs:
        reply = await post(session, sidecar, body)
    assert reply.status == 200
    assert int(reply.headers[VISUAL]) == 8_464
    assert int(reply.headers[PROMPT_TOKENS]) == 8_464 + 2 + TEXT_ESTIMATE
    assert orjson.loads(standin.requests[-1].body) == body  # forwarded as sent
    (line,) = finished(logs)
    (video,) = line["videos"]
    assert video["tokens"] == 8_464
    assert video["frames_sampled"] == 32
    assert (video["size"], video["format"], video["duration_seconds"]) == ("640x640", MP4, 16.0)
    registry: CollectorRegistry = sidecar.registry
    labels = {"model": sidecar.app[METRICS].model}
    assert registry.get_sample_value("vlm_sidecar_video_tokens_sum", labels) == 8_464
    assert registry.get_sample_value("vlm_sidecar_video_seconds_sum", labels) == 16.0
    counted = {**labels, "format": "mp4", "source": "data"}
    assert registry.get_sample_value("vlm_sidecar_videos_total", counted) == 1
    unknown = {**labels, "format": "unknown", "source": "url"}
    assert registry.get_sample_value("vlm_sidecar_videos_total", unknown) == 0


async def test_sidecar_rejects_a_video_over_the_visual_token_budget_naming_it(
    make_sidecar: SidecarFactory, standin: StandinServer, session: aiohttp.ClientSession
) -> None:
    sidecar = await make_sidecar(max_request_visual_tokens=5_000)
    reply = await post(session, sidecar, video_chat(video_part(mp4_uri(make_video(*BRIEF_VIDEO)))))
    assert reply.status == 400
    assert reply.headers["x-vlm-sidecar-decision"] == "reject"
    assert reply.json()["error"]["message"] == (
        "request costs 8,464 visual tokens; SIDECAR_MAX_REQUEST_VISUAL_TOKENS is 5,000 "
        "(video 1 of 1 (640x640, 16.0 s) costs 8,464 tokens)"
    )
    assert standin.requests == []


@pytest.mark.parametrize(
    ("uri", "message"),
    [
        (mp4_uri(b"not a video, only text" * 10), "video 2 of 2: FFmpeg cannot read it"),
        ("data:video/mp4;base64,QUJ", "video 2 of 2: the data URL is not valid base64"),
        (mp4_uri(make_video(32, 32, 1, 1)), "video 2 of 2: the video has 1 frame"),
    ],
    ids=["not-a-video", "bad-padding", "one-frame"],
)
async def test_sidecar_answers_400_naming_a_video_it_cannot_price(
    make_sidecar: SidecarFactory,
    standin: StandinServer,
    session: aiohttp.ClientSession,
    uri: str,
    message: str,
) -> None:
    sidecar = await make_sidecar()
    good = video_part(mp4_uri(make_video(16, 16, 8, 4)))
    reply = await post(session, sidecar, video_chat(good, video_part(uri)))
    assert reply.status == 400
    assert reply.json()["error"]["message"].startswith(message)
    assert reply.json()["error"]["param"] == "video_url"
    assert standin.requests == []


async def test_sidecar_prices_videos_it_cannot_read_at_the_allowance_and_says_why(
    make_sidecar: SidecarFactory, session: aiohttp.ClientSession
) -> None:
    sidecar = await make_sidecar(video_tokens_per_item=500)
    body = video_chat(
        video_part("https://videos.test/clip.mp4"),
        video_part(data_uri(make_video(16, 16, 8, 4), "video/jpeg")),
        {"type": "video_url", "video_url": None, "uuid": "seen-before"},
    )
    with structlog.testing.capture_logs() as logs:
        reply = await post(session, sidecar, body)
    assert reply.status == 200
    assert int(reply.headers[VISUAL]) == 3 * 500
    assert int(reply.headers[PROMPT_TOKENS]) == 3 * 500 + TEXT_ESTIMATE  # no wrappers on allowances
    reasons = [video["allowance_reason"] for video in finished(logs)[0]["videos"]]
    assert reasons == [
        "a URL, not probed (SIDECAR_REMOTE_IMAGES is not probe)",
        "a video/jpeg frame list carries no timing",
        "a cached item (uuid) of unknown size",
    ]


async def test_sidecar_prices_a_container_without_a_frame_count_at_the_allowance(
    make_sidecar: SidecarFactory, session: aiohttp.ClientSession
) -> None:
    """FFmpeg opens a PNG as a one-picture stream with no frame count: vLLM's loader cannot
    sample it, and the sidecar does not guess."""
    sidecar = await make_sidecar(video_tokens_per_item=700)
    picture = io.BytesIO()
    Image.new("RGB", (40, 30)).save(picture, "PNG")
    with structlog.testing.capture_logs() as logs:
        reply = await post(
            session, sidecar, video_chat(video_part(data_uri(picture.getvalue(), "video/png")))
        )
    assert reply.status == 200
    assert int(reply.headers[VISUAL]) == 700
    (video,) = finished(logs)[0]["videos"]
    assert video["allowance_reason"] == "the container gives no frame rate or frame count"
    assert (video["size"], video["format"]) == ("40x30", "png_pipe")


async def test_sidecar_reads_a_video_data_uri_written_with_json_escapes(
    make_sidecar: SidecarFactory, session: aiohttp.ClientSession
) -> None:
    sidecar = await make_sidecar()
    uri = mp4_uri(make_video(*BRIEF_VIDEO))
    assert "/" in uri
    raw = orjson.dumps(video_chat(video_part(uri))).replace(b"/", b"\\/")
    url = f"http://127.0.0.1:{sidecar.port}/v1/chat/completions"
    async with session.post(url, data=raw) as response:
        assert response.status == 200
        assert int(response.headers[VISUAL]) == 8_464


async def test_sidecar_prices_videos_of_families_without_a_rule_at_the_allowance(
    make_sidecar: SidecarFactory, session: aiohttp.ClientSession
) -> None:
    sidecar = await make_sidecar(model="llava-hf/llava-1.5-7b-hf")
    reply = await post(session, sidecar, video_chat(video_part(mp4_uri(make_video(*BRIEF_VIDEO)))))
    assert reply.status == 200
    assert int(reply.headers[VISUAL]) == 16_384


MOOV_FIRST = make_video(32, 32, 60, 30, moov_first=True)
MOOV_LAST = make_video(64, 64, 30, 30, noise=True)  # ~100 KB of media data before the index


def _ranged(body: bytes, request: web.Request) -> web.Response:
    first, _, last = request.headers.get("Range", "bytes=0-").removeprefix("bytes=").partition("-")
    end = min(int(last or len(body) - 1), len(body) - 1)
    return web.Response(
        status=206, body=body[int(first) : end + 1],
        headers={"Content-Range": f"bytes {first}-{end}/{len(body)}"},
    )  # fmt: skip


def _serving(body: bytes | None) -> Callable[[web.Request], Any]:
    async def handler(request: web.Request) -> web.Response:
        return web.Response(status=404) if body is None else _ranged(body, request)

    return handler


@pytest.fixture
async def video_site(aiohttp_server: AiohttpServer) -> str:
    """http://videos.test:<port>/ reaching a loopback server that honours Range."""
    app = web.Application()
    app.router.add_get("/moov-first.mp4", _serving(MOOV_FIRST))
    app.router.add_get("/moov-last.mp4", _serving(MOOV_LAST))
    app.router.add_get("/gone.mp4", _serving(None))
    server = await aiohttp_server(app)
    return f"http://videos.test:{server.port}"


async def _loopback(host: str, port: int) -> list[str]:
    return ["127.0.0.1"]


async def test_sidecar_probes_url_videos_from_a_bounded_prefix(
    standin: StandinServer, session: aiohttp.ClientSession, video_site: str
) -> None:
    settings = Settings(
        model=QWEN, upstream_url=standin.url, listen_host="127.0.0.1", port=0, metrics_port=0,
        remote_images="probe", remote_image_allowed_domains="videos.test",
        remote_image_max_bytes=16 * 1024, video_tokens_per_item=500,
    )  # fmt: skip
    prober = make_remote_prober(
        settings, resolver=_loopback, address_allowed=lambda ip: str(ip) == "127.0.0.1"
    )
    body = video_chat(
        video_part(f"{video_site}/moov-first.mp4"),
        video_part(f"{video_site}/moov-last.mp4"),
        video_part(f"{video_site}/gone.mp4"),
    )
    async with running_sidecar(settings, registry=CollectorRegistry(), remote_prober=prober) as s:
        with structlog.testing.capture_logs() as logs:
            reply = await post(session, s, body)
        refused = await post(session, s, video_chat(video_part("http://elsewhere.test/clip.mp4")))
    exact = QWEN25_RULE.video_tokens(probe_video_bytes(MOOV_FIRST))
    assert reply.status == 200
    assert int(reply.headers[VISUAL]) == exact.tokens + 2 * 500
    first, last, gone = finished(logs)[0]["videos"]
    assert (first["tokens"], first["frames_sampled"], first["size"]) == (exact.tokens, 4, "32x32")
    assert (
        "index (moov) after the media data, beyond the first 16,384 bytes"
        in (last["allowance_reason"])
    )
    assert gone["allowance_reason"].endswith("the image server answered HTTP 404")
    assert refused.status == 400
    assert refused.json()["error"]["param"] == "video_url"
    assert refused.json()["error"]["message"] == (
        "video 1 of 1: remote video http://elsewhere.test/clip.mp4: host elsewhere.test is not "
        "in SIDECAR_REMOTE_IMAGE_ALLOWED_DOMAINS"
    )
