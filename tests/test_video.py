"""Videos: container metadata read with PyAV, Qwen frame sampling and resize, pricing end to end.

Videos are written here with PyAV (libx264 MP4, VP8 WebM), tiny and short, so that even an
800-second video costs milliseconds to make.

The oracles:

* transformers' own code, compiled from its source files: ``Qwen2VLVideoProcessor`` and
  ``Qwen3VLVideoProcessor`` import torch at the top of their modules (not installed here), so
  ``sample_frames`` and each module's ``smart_resize`` are taken out with ``ast`` and run on
  their own. Two torch pieces are replicated instead, and named where they are used: the
  length of ``torch.arange`` (ATen's ``compute_arange_size``: ``ceil((end - start) / step)``
  in double precision) in Qwen2's ``sample_frames``, and ``patchify``'s padding of the frame
  count to a multiple of ``temporal_patch_size`` (a ``torch.cat``).
* vLLM 0.33, replicated from its source (vLLM is not installed): the loaders pass ``fps=2``
  to that same sampling, ``Qwen3VLProcessingInfo._calculate_timestamps`` and
  ``Qwen3VLMultiModalProcessor.get_video_repl`` build Qwen3-VL's timestamps.
* the brief's worked example: 32 frames at 640x640 -> 644x644 -> 529 tokens per two-frame
  group, 16 groups -> 8,464 tokens.
* PyAV's own decoded frame for the display rotation (``VideoFrame.rotation``).
"""

from __future__ import annotations
import __future__

import ast
import base64
import contextlib
import functools
import io
import json
import math
import random
import tempfile
from collections.abc import Callable
from fractions import Fraction
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import aiohttp
import av
import numpy as np
import orjson
import pytest
import structlog
import transformers
from aiohttp import web
from PIL import Image
from prometheus_client import CollectorRegistry
from pytest_aiohttp import AiohttpServer
from transformers import PreTrainedTokenizerFast
from transformers.video_utils import VideoMetadata

from sidecar.cost.pricer import Pricer
from sidecar.cost.request_body import parse_request_body
from sidecar.cost.text_tokens import PromptCounter
from sidecar.errors import TruncatedImageError, VideoError
from sidecar.profiles import ProfileOverrides, load_profile
from sidecar.profiles.builtins import BUILTIN_MODELS
from sidecar.routes import Route
from sidecar.serve.app import make_remote_prober
from sidecar.serve.keys import METRICS
from sidecar.serve.server import running_sidecar
from sidecar.settings import Settings
from sidecar.standin import StandinServer
from sidecar.video.isobmff import IndexReach, display_rotation_degrees, index_reach
from sidecar.video.probe import (
    VideoHeader,
    VideoPrefixUnreadable,
    decode_base64_payload,
    probe_video_bytes,
    probe_video_prefix,
)
from sidecar.video.qwen import QwenVideoRule, clip_smart_resize
from tests.conftest import QWEN, SidecarFactory
from tests.model_dirs import QWEN2_VL_CHAT_TEMPLATE, write_qwen_tokenizer

QWEN3 = "Qwen/Qwen3-VL-8B-Instruct"
MP4 = "mov,mp4,m4a,3gp,3g2,mj2"
VISUAL, PROMPT_TOKENS = "x-vlm-sidecar-visual-tokens", "x-vlm-sidecar-prompt-tokens"


# --- videos ---------------------------------------------------------------------------------


@functools.cache
def make_video(
    width: int,
    height: int,
    frames: int,
    rate: Fraction | int,
    *,
    container: str = "mp4",
    codec: str = "libx264",
    rotation: int | None = None,
    noise: bool = False,
    moov_first: bool = False,
) -> bytes:
    """A video of blank (or noise) frames; an MP4 keeps its index (moov) at the end unless
    ``moov_first`` (FFmpeg's ``-movflags faststart``, which needs a real file)."""
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / f"video.{container}"
        options = {"movflags": "faststart"} if moov_first else {}
        rng = np.random.default_rng(7)
        with av.open(str(path), "w", format=container, options=options) as output:
            stream = output.add_stream(codec, rate=rate)
            stream.width, stream.height, stream.pix_fmt = width, height, "yuv420p"
            if rotation is not None:
                stream.set_display_rotation(rotation)
            blank = np.zeros((height, width, 3), np.uint8)
            for index in range(frames):
                pixels = rng.integers(0, 255, (height, width, 3), np.uint8) if noise else blank
                frame = av.VideoFrame.from_ndarray(pixels, format="rgb24")
                frame.pts = index
                output.mux(stream.encode(frame))
            output.mux(stream.encode())
        return path.read_bytes()


def data_uri(video: bytes, media_type: str = "video/mp4") -> str:
    return f"data:{media_type};base64,{base64.b64encode(video).decode()}"


def video_part(url: str) -> dict[str, Any]:
    return {"type": "video_url", "video_url": {"url": url}}


def chat(*parts: dict[str, Any], text: str = "What happens?") -> dict[str, Any]:
    content = [{"type": "text", "text": text}, *parts]
    return {"model": "m", "messages": [{"role": "user", "content": content}], "max_tokens": 8}


# --- oracles ----------------------------------------------------------------------------------

MODELS = Path(transformers.__file__).parent / "models"
QWEN2_VIDEO = MODELS / "qwen2_vl" / "video_processing_qwen2_vl.py"
QWEN3_VIDEO = MODELS / "qwen3_vl" / "video_processing_qwen3_vl.py"


def _definition(path: Path, name: str) -> ast.FunctionDef:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    class_name, _, function_name = name.rpartition(".")
    body = tree.body
    if class_name:
        owner = next(n for n in body if isinstance(n, ast.ClassDef) and n.name == class_name)
        body = owner.body
    return next(n for n in body if isinstance(n, ast.FunctionDef) and n.name == function_name)


def transformers_function(path: Path, name: str, **namespace: Any) -> Callable[..., Any]:
    """A function or method of a transformers module, compiled from its source alone."""
    node = _definition(path, name)
    node.decorator_list = []
    code = compile(
        ast.Module(body=[node], type_ignores=[]),
        str(path),
        "exec",
        flags=__future__.annotations.compiler_flag,
        dont_inherit=True,
    )
    scope = {"math": math, "np": np, **namespace}
    exec(code, scope)  # noqa: S102 - transformers' own source, read from the installed package
    function: Callable[..., Any] = scope[node.name]
    return function


def class_attributes(path: Path, class_name: str) -> dict[str, Any]:
    """The constant class attributes (``min_frames = 4``, ``size = {...}``) of a class."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    owner = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == class_name)
    values: dict[str, Any] = {"num_frames": None, "fps": None}  # BaseVideoProcessor's
    for node in owner.body:
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
            with contextlib.suppress(NameError):  # names such as PILImageResampling: not needed
                values[node.targets[0].id] = eval(  # noqa: S307 - constant expressions only
                    compile(ast.Expression(node.value), str(path), "eval"), {"__builtins__": {}}
                )
    return values


class _ArangeLength:
    """Replicates ``torch.arange(start, end, step).int()`` as far as its length goes: ATen's
    ``compute_arange_size`` computes ``ceil((end - start) / step)`` in double precision."""

    @staticmethod
    def arange(start: float, end: float, step: float) -> SimpleNamespace:
        length = math.ceil((end - start) / step)
        return SimpleNamespace(int=lambda: list(range(length)))


QWEN2_CLASS = class_attributes(QWEN2_VIDEO, "Qwen2VLVideoProcessor")
QWEN3_CLASS = class_attributes(QWEN3_VIDEO, "Qwen3VLVideoProcessor")
HF_QWEN2_SAMPLE = transformers_function(
    QWEN2_VIDEO, "Qwen2VLVideoProcessor.sample_frames", torch=_ArangeLength
)
HF_QWEN3_SAMPLE = transformers_function(QWEN3_VIDEO, "Qwen3VLVideoProcessor.sample_frames")
HF_QWEN2_RESIZE = transformers_function(QWEN2_VIDEO, "smart_resize")
HF_QWEN3_RESIZE = transformers_function(QWEN3_VIDEO, "smart_resize")
VLLM_LOADER_FPS = 2  # Qwen2VLVideoBackend / Qwen3VLVideoBackend.load_bytes(fps=2)


def oracle_frames(rule: QwenVideoRule, total: int, fps: float) -> list[int] | None:
    """The frame indices vLLM's loader samples (transformers' sample_frames with fps=2)."""
    metadata = VideoMetadata(total_num_frames=total, fps=fps)
    try:
        if rule.loader == "qwen3_vl":
            this = SimpleNamespace(**QWEN3_CLASS)
            return [int(i) for i in HF_QWEN3_SAMPLE(this, metadata, fps=VLLM_LOADER_FPS)]
        this = SimpleNamespace(**QWEN2_CLASS)
        indices = HF_QWEN2_SAMPLE(this, metadata, fps=VLLM_LOADER_FPS)
    except ZeroDivisionError:  # a 1-frame video: n floors to 0, arange's step divides by it
        return None
    return [int(i) for i in indices]


def oracle_tokens(rule: QwenVideoRule, header: VideoHeader) -> tuple[int, tuple[int, ...]] | str:
    """(tokens, grid) as the processor computes them, or "refused"."""
    frames = oracle_frames(rule, header.frame_count, header.fps or 0.0)
    if frames is None:
        return "refused"
    try:
        if rule.loader == "qwen3_vl":
            h, w = HF_QWEN3_RESIZE(
                len(frames), header.height_px, header.width_px,
                temporal_factor=rule.temporal_patch_size, factor=rule.factor,
                min_pixels=rule.min_pixels, max_pixels=rule.max_pixels,
            )  # fmt: skip
        else:
            h, w = HF_QWEN2_RESIZE(
                header.height_px, header.width_px, factor=rule.factor,
                min_pixels=rule.min_pixels, max_pixels=rule.max_pixels,
            )  # fmt: skip
    except ValueError:
        return "refused"
    # patchify pads the frames to a multiple of temporal_patch_size (replicated: a torch.cat).
    grid_t = (len(frames) + -len(frames) % rule.temporal_patch_size) // rule.temporal_patch_size
    grid = (grid_t, h // rule.patch_size, w // rule.patch_size)
    return grid[0] * grid[1] * grid[2] // rule.merge_size**2, grid


def vllm_timestamps(indices: list[int], video_fps: float, merge_size: int) -> list[float]:
    """vLLM's ``Qwen3VLProcessingInfo._calculate_timestamps``, replicated."""
    if len(indices) % merge_size != 0:
        indices = indices + [indices[-1]] * (merge_size - len(indices) % merge_size)
    timestamps = [idx / video_fps for idx in indices]
    return [
        (timestamps[i] + timestamps[i + merge_size - 1]) / 2
        for i in range(0, len(timestamps), merge_size)
    ]


def video_rule(model: str, overrides: ProfileOverrides | None = None) -> QwenVideoRule:
    rule = load_profile(model, overrides).video
    assert isinstance(rule, QwenVideoRule)
    return rule


QWEN25_RULE = video_rule(QWEN)
QWEN3_RULE = video_rule(QWEN3)
CLASS_DEFAULT_RULES = {
    "qwen2_5_vl-class-defaults": QwenVideoRule.from_configs("qwen2_5_vl", {}, {}),
    "qwen3_vl-class-defaults": QwenVideoRule.from_configs("qwen3_vl", {}, {}),
}
RULES = {"qwen2_5_vl": QWEN25_RULE, "qwen3_vl": QWEN3_RULE, **CLASS_DEFAULT_RULES}


# --- probe: what OpenCV's FFmpeg backend would report -----------------------------------------

PROBE_CASES = [
    pytest.param((64, 48, 30, 30), {}, (64, 48, 30, 30.0, 1.0), id="short-1s-30fps"),
    pytest.param((32, 24, 120, 1), {}, (32, 24, 120, 1.0, 120.0), id="long-120s-1fps"),
    pytest.param((16, 16, 800, 1), {}, (16, 16, 800, 1.0, 800.0), id="longer-800s-1fps"),
    pytest.param((32, 32, 240, Fraction(24000, 1001)), {},
                 (32, 32, 240, 24000 / 1001, 10.01), id="ntsc-film-23.976fps"),
    pytest.param((32, 32, 75, Fraction(15, 2)), {}, (32, 32, 75, 7.5, 10.0), id="7.5fps"),
    pytest.param((32, 32, 300, Fraction(60000, 1001)), {},
                 (32, 32, 300, 60000 / 1001, 5.005), id="59.94fps"),
    pytest.param((360, 640, 4, 2), {}, (360, 640, 4, 2.0, 2.0), id="portrait"),
    pytest.param((16, 16, 8, 4), {}, (16, 16, 8, 4.0, 2.0), id="tiny-16x16"),
    pytest.param((32, 32, 60, 30), {"container": "webm", "codec": "libvpx"},
                 (32, 32, 60, 30.0, 2.0), id="webm-vp8-frames-from-duration"),
    pytest.param((32, 32, 60, 30), {"container": "matroska"},
                 (32, 32, 60, 30.0, 2.0), id="matroska-h264"),
    pytest.param((32, 32, 60, 30), {"moov_first": True},
                 (32, 32, 60, 30.0, 2.0), id="mp4-faststart"),
]  # fmt: skip


@pytest.mark.parametrize(("shape", "options", "expected"), PROBE_CASES)
def test_probe_reads_size_frame_count_fps_and_duration_without_decoding(
    shape: tuple[int, int, int, Any], options: dict[str, Any], expected: tuple[Any, ...]
) -> None:
    header = probe_video_bytes(make_video(*shape, **options))
    width, height, frames, fps, seconds = expected
    assert (header.width_px, header.height_px, header.frame_count) == (width, height, frames)
    assert header.fps == pytest.approx(fps, rel=1e-12)
    assert header.duration_seconds == pytest.approx(seconds, abs=1e-3)
    assert header.rotation_degrees == 0


@pytest.mark.parametrize(
    ("rotation", "size"),
    [(90, (32, 64)), (-90, (32, 64)), (180, (64, 32)), (0, (64, 32))],
    ids=["90", "minus-90", "180", "0"],
)
def test_probe_reports_the_upright_size_opencv_rotates_frames_to(
    rotation: int, size: tuple[int, int]
) -> None:
    """OpenCV applies the display matrix by default; PyAV's decoded frame reads the same one."""
    video = make_video(64, 32, 3, 30, rotation=rotation)
    header = probe_video_bytes(video)
    assert (header.width_px, header.height_px) == size
    with av.open(io.BytesIO(video)) as container:
        decoded = next(container.decode(video=0))
    assert header.rotation_degrees == (-decoded.rotation) % 360


def test_display_rotation_is_zero_for_a_file_without_a_movie_box() -> None:
    assert display_rotation_degrees(b"\x00\x00\x00\x08free", None) == 0


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"", "the video is empty"),
        (b"hello, this is not a video at all" * 20, "FFmpeg cannot read it as a video"),
    ],
    ids=["empty", "text"],
)
def test_probe_refuses_what_is_not_a_video(data: bytes, message: str) -> None:
    with pytest.raises(VideoError, match=message) as caught:
        probe_video_bytes(data)
    assert caught.value.param == "video_url"
    assert caught.value.status == 400


def test_probe_refuses_a_container_without_a_video_stream() -> None:
    buffer = io.BytesIO()
    with av.open(buffer, "w", format="wav") as output:
        stream = output.add_stream("pcm_s16le", rate=8000)
        frame = av.AudioFrame.from_ndarray(np.zeros((1, 800), np.int16), "s16", "mono")
        frame.sample_rate = 8000
        output.mux(stream.encode(frame))
        output.mux(stream.encode())
    with pytest.raises(VideoError, match="the wav container holds no video stream"):
        probe_video_bytes(buffer.getvalue())


def _box(kind: bytes, payload: bytes = b"", *, size: int | None = None) -> bytes:
    return (len(payload) + 8 if size is None else size).to_bytes(4) + kind + payload


@pytest.mark.parametrize(
    ("prefix", "reach"),
    [
        (_box(b"ftyp", b"isom") + _box(b"moov", b"x" * 8), IndexReach.COMPLETE),
        (_box(b"ftyp", b"isom") + _box(b"moov", size=4096), IndexReach.NEEDS_MORE),
        (_box(b"ftyp", b"isom") + _box(b"moov", size=1 << 30), IndexReach.BEYOND_LIMIT),
        (_box(b"ftyp") + _box(b"mdat", (1 << 40).to_bytes(8), size=1), IndexReach.BEYOND_LIMIT),
        (_box(b"ftyp") + _box(b"mdat", b"x" * 32, size=0), IndexReach.NEEDS_MORE),
    ],
    ids=["moov-inside", "moov-cut", "moov-too-big", "64-bit-mdat", "mdat-to-the-end"],
)
def test_index_reach_walks_top_level_boxes(prefix: bytes, reach: IndexReach) -> None:
    assert index_reach(prefix, 1 << 20) is reach


def test_probe_refuses_frames_over_the_pixel_limit() -> None:
    with pytest.raises(VideoError, match=r"frames of 64x48 \(3,072 pixels\) exceed"):
        probe_video_bytes(make_video(64, 48, 2, 2), max_frame_pixels=3_000)


def test_base64_payload_is_decoded_as_leniently_as_vllm() -> None:
    """vLLM's ``base64.b64decode`` skips characters outside the alphabet (line breaks)."""
    raw = make_video(16, 16, 4, 2)
    wrapped = b"\n".join(base64.encodebytes(raw).split(b"\n"))
    assert decode_base64_payload(wrapped) == raw
    with pytest.raises(VideoError, match="not valid base64"):
        decode_base64_payload(b"abc")


def test_prefix_probe_asks_for_more_until_the_index_is_complete() -> None:
    video = make_video(32, 32, 60, 30, moov_first=True)
    with pytest.raises(TruncatedImageError):
        probe_video_prefix(video[:200], limit_bytes=1 << 20)
    moov_end = next(n for n in range(8, len(video)) if _reach(video[:n]) is IndexReach.COMPLETE)
    header = probe_video_prefix(video[:moov_end], limit_bytes=1 << 20)
    assert header == probe_video_bytes(video)


def _reach(prefix: bytes) -> IndexReach:
    return index_reach(prefix, 1 << 20)


def test_prefix_probe_gives_up_on_an_index_after_the_media_data() -> None:
    video = make_video(64, 64, 30, 30, noise=True)  # moov at the end, after ~100 KB of mdat
    assert index_reach(video[:4096], len(video) - 1) is IndexReach.NEEDS_MORE
    with pytest.raises(VideoPrefixUnreadable, match=r"index \(moov\) after the media data"):
        probe_video_prefix(video[:4096], limit_bytes=16_384)


def test_prefix_probe_reads_webm_from_its_header() -> None:
    video = make_video(32, 32, 60, 30, container="webm", codec="libvpx")
    with pytest.raises(TruncatedImageError):
        probe_video_prefix(video[:64], limit_bytes=1 << 20)
    assert probe_video_prefix(video[:900], limit_bytes=1 << 20) == probe_video_bytes(video)


def test_prefix_probe_refuses_containers_whose_length_is_not_in_a_header() -> None:
    video = make_video(32, 32, 10, 30, container="mpegts")
    with pytest.raises(VideoPrefixUnreadable, match="only MP4/MOV and Matroska/WebM"):
        probe_video_prefix(video, limit_bytes=1 << 20)


# --- the rule against transformers' sampling and resize ---------------------------------------


def _random_headers(count: int) -> list[VideoHeader]:
    rng = random.Random(20_251_129)
    rates = [1.0, 2.0, 7.5, 10.0, 12.0, 15.0, 24000 / 1001, 25.0, 30000 / 1001, 30.0, 60000 / 1001]
    headers = []
    for _ in range(count):
        fps = rng.choice(rates)
        frames = rng.choice([1, 2, 3, 4, 5, 7, 17, 75, 230, 367, 453, 1000, 5000, 40_000])
        frames = max(1, frames + rng.randint(-3, 3))
        width, height = rng.randint(8, 4000), rng.randint(8, 4000)
        headers.append(VideoHeader(width, height, frames / fps, fps, frames, MP4))
    edges = [
        VideoHeader(640, 640, 16.0, 2.0, 32, MP4),  # the brief
        VideoHeader(16, 16, 1.0, 16.0, 16, MP4),  # tiny: enlarged
        VideoHeader(20, 4000, 1.0, 30.0, 30, MP4),  # ratio 200: accepted
        VideoHeader(19, 4000, 1.0, 30.0, 30, MP4),  # ratio above 200: refused
        VideoHeader(1920, 1080, 1.0, 1.0, 1, MP4),  # one frame
        VideoHeader(3840, 2160, 1800.0, 60.0, 108_000, MP4),  # 30 min of 4K at 60 fps
    ]
    return edges + headers


HEADERS = _random_headers(400)


@pytest.mark.parametrize("rule", RULES.values(), ids=RULES.keys())
def test_rule_samples_as_many_frames_as_transformers_and_vllm(rule: QwenVideoRule) -> None:
    for header in HEADERS:
        expected = oracle_frames(rule, header.frame_count, header.fps or 0.0)
        if expected is None:
            with pytest.raises(VideoError, match="samples frames in multiples of 2"):
                rule.sampled_frames(header.frame_count, header.fps or 0.0)
            continue
        frames = rule.sampled_frames(header.frame_count, header.fps or 0.0)
        assert frames == len(expected), header
        if rule.loader == "qwen3_vl":
            assert rule.frame_indices(header.frame_count, frames) == expected, header


@pytest.mark.parametrize("rule", RULES.values(), ids=RULES.keys())
def test_rule_prices_videos_as_the_processor_does(rule: QwenVideoRule) -> None:
    mismatches = []
    for header in HEADERS:
        expected = oracle_tokens(rule, header)
        try:
            tokens = rule.video_tokens(header)
            got: tuple[int, tuple[int, ...]] | str = (tokens.tokens, tokens.grid)
        except VideoError:
            got = "refused"
        if got != expected:
            mismatches.append((header, got, expected))
    assert mismatches == []


def test_qwen2_arange_can_hand_the_processor_one_frame_more_than_n() -> None:
    """A 75-frame clip at 10 fps: n = 14, but ``torch.arange(0, 75,
    75 / 14)`` has 15 elements (75 / (75 / 14) is 14.000000000000002), so the processor gets
    15 frames and pads them to 16: 8 temporal groups, not 7."""
    header = probe_video_bytes(make_video(32, 32, 75, 10))
    assert QWEN25_RULE.sampled_frames(header.frame_count, header.fps or 0.0) == 15
    assert QWEN25_RULE.video_tokens(header).grid[0] == 8


def test_rule_reproduces_the_briefs_8464_tokens_for_32_frames_at_640x640() -> None:
    header = probe_video_bytes(make_video(640, 640, 32, 2))
    for rule in (QWEN25_RULE, CLASS_DEFAULT_RULES["qwen2_5_vl-class-defaults"]):
        cost = rule.video_tokens(header)
        assert cost.frames_sampled == 32
        assert cost.grid == (16, 46, 46)  # 644 / 14 = 46 patches a side
        assert cost.tokens == 16 * 529 == 8_464
        assert cost.wrapper_tokens == 2


LOCAL_VIDEOS = {case.id: case.values[0] for case in PROBE_CASES} | {
    "brief-640x640-32-frames": (640, 640, 32, 2),
    "arange-one-more": (32, 32, 75, 10),
    "one-frame": (32, 32, 1, 1),
}


@pytest.mark.parametrize("rule", RULES.values(), ids=RULES.keys())
@pytest.mark.parametrize("shape", LOCAL_VIDEOS.values(), ids=LOCAL_VIDEOS.keys())
def test_rule_prices_each_local_video_exactly(
    rule: QwenVideoRule, shape: tuple[int, int, int, Any]
) -> None:
    options = next((c.values[1] for c in PROBE_CASES if c.values[0] == shape), {})
    header = probe_video_bytes(make_video(*shape, **options))
    expected = oracle_tokens(rule, header)
    if expected == "refused":
        with pytest.raises(VideoError, match="the video has 1 frame"):
            rule.video_tokens(header)
        return
    cost = rule.video_tokens(header)
    assert (cost.tokens, cost.grid) == expected


def test_qwen3_timestamps_are_vllms_and_counted_exactly_with_a_tokenizer() -> None:
    header = probe_video_bytes(make_video(32, 32, 75, Fraction(15, 2)))  # 10 s at 7.5 fps
    frames = QWEN3_RULE.sampled_frames(header.frame_count, header.fps or 0.0)
    indices = oracle_frames(QWEN3_RULE, header.frame_count, header.fps or 0.0)
    assert indices is not None
    expected = vllm_timestamps(indices, header.fps or 0.0, QWEN3_RULE.merge_size)
    assert QWEN3_RULE.timestamps(header.frame_count, header.fps or 0.0, frames) == expected
    texts = [f"<{t:.1f} seconds>" for t in expected]
    assert texts[:2] == ["<0.3 seconds>", "<1.3 seconds>"]  # frames (0, 4) and (8, 12)

    def qwen_like(text: str) -> int:  # one token a digit, plus "<", ".", " seconds", ">"
        return sum(c.isdigit() for c in text) + 4

    exact = QWEN3_RULE.video_tokens(header, count_text_tokens=qwen_like)
    estimate = QWEN3_RULE.video_tokens(header)
    groups = exact.grid[0]
    assert exact.timestamp_tokens_exact
    assert not estimate.timestamp_tokens_exact
    assert exact.wrapper_tokens == 2 * groups + sum(qwen_like(t) for t in texts)
    assert estimate.wrapper_tokens == 2 * groups + sum(len(t) for t in texts)
    assert estimate.wrapper_tokens - exact.wrapper_tokens == 7 * groups
    assert exact.tokens == estimate.tokens


@pytest.mark.parametrize("rule", [QWEN25_RULE, QWEN3_RULE], ids=["qwen2_5_vl", "qwen3_vl"])
def test_rule_refuses_a_video_without_frame_count_or_rate(rule: QwenVideoRule) -> None:
    with pytest.raises(VideoError, match="needs a known frame count and frame rate"):
        rule.sampled_frames(0, 30.0)
    with pytest.raises(VideoError, match="needs a known frame count and frame rate"):
        rule.sampled_frames(30, 0.0)


def test_qwen3_timestamps_pair_the_last_frame_with_itself_for_an_odd_count() -> None:
    assert QWEN3_RULE.timestamps(5, 1.0, 5) == [0.5, 2.5, 4.0]


def test_cap_pixels_per_frame_bounds_each_frame_as_qwen_vl_utils() -> None:
    """The cap's arithmetic from the processors' ``resize`` (its torch part is a shape read)."""
    qwen2 = replace_rule(QWEN25_RULE, cap_pixels_per_frame=True)
    frames = 768
    total_pixels = int(128_000 * 28 * 28 * 0.9)
    bound = max(min(12_845_056, total_pixels * 2 // frames), int(3136 * 1.05))
    expected = HF_QWEN2_RESIZE(1080, 1920, factor=28, min_pixels=3136, max_pixels=bound)
    assert qwen2.resized_frame(1920, 1080, frames) == (expected[1], expected[0])
    qwen3 = replace_rule(QWEN3_RULE, cap_pixels_per_frame=True)
    per_frame = max(min(768 * 32 * 32, 25_165_824 // frames), int(4096 * 1.05))
    expected = HF_QWEN3_RESIZE(
        frames, 1080, 1920, temporal_factor=2, factor=32, min_pixels=4096,
        max_pixels=per_frame * frames,
    )  # fmt: skip
    assert qwen3.resized_frame(1920, 1080, frames) == (expected[1], expected[0])
    assert qwen3.resized_frame(1920, 1080, 4) != QWEN3_RULE.resized_frame(1920, 1080, 4)


def replace_rule(rule: QwenVideoRule, **changes: Any) -> QwenVideoRule:
    return QwenVideoRule(**{**{f: getattr(rule, f) for f in rule.__dataclass_fields__}, **changes})


def test_clip_smart_resize_is_transformers_qwen3_function() -> None:
    rng = random.Random(3)
    for _ in range(2_000):
        args = (rng.randint(2, 800), rng.randint(1, 3000), rng.randint(1, 3000))
        bounds = {"temporal_factor": 2, "factor": 32, "min_pixels": 4096, "max_pixels": 25_165_824}
        try:
            expected: Any = HF_QWEN3_RESIZE(*args, **bounds)
        except ValueError:
            expected = "refused"
        try:
            got: Any = clip_smart_resize(*args, **bounds)
        except Exception:
            got = "refused"
        assert got == expected, args


# --- profiles ---------------------------------------------------------------------------------


def test_qwen25_builtin_reads_video_bounds_from_its_image_preprocessor_config() -> None:
    """Qwen2/2.5-VL checkpoints ship no video processor config, and transformers builds the
    video processor from ``preprocessor_config.json``: its min/max_pixels become the size."""
    assert (QWEN25_RULE.min_pixels, QWEN25_RULE.max_pixels) == (3136, 12_845_056)
    assert (QWEN25_RULE.patch_size, QWEN25_RULE.loader) == (14, "qwen2_vl")
    assert "per frame" in QWEN25_RULE.describe()


def test_qwen3_builtin_reads_its_video_preprocessor_config() -> None:
    assert (QWEN3_RULE.min_pixels, QWEN3_RULE.max_pixels) == (4096, 25_165_824)
    assert (QWEN3_RULE.patch_size, QWEN3_RULE.loader, QWEN3_RULE.factor) == (16, "qwen3_vl", 32)
    assert "per clip" in QWEN3_RULE.describe()


def test_class_defaults_fill_what_a_video_config_leaves_out() -> None:
    qwen2 = CLASS_DEFAULT_RULES["qwen2_5_vl-class-defaults"]
    qwen3 = CLASS_DEFAULT_RULES["qwen3_vl-class-defaults"]
    assert (qwen2.min_pixels, qwen2.max_pixels, qwen2.max_video_tokens) == (
        128 * 28 * 28, 28 * 28 * 768, 128_000,
    )  # fmt: skip
    assert (qwen3.min_pixels, qwen3.max_pixels, qwen3.max_video_tokens) == (
        128 * 32 * 32, 32 * 32 * 768, 768,
    )  # fmt: skip
    for rule, path, name in (
        (qwen2, QWEN2_VIDEO, "Qwen2VLVideoProcessor"),
        (qwen3, QWEN3_VIDEO, "Qwen3VLVideoProcessor"),
    ):
        attributes = class_attributes(path, name)
        assert attributes["size"] == {
            "shortest_edge": rule.min_pixels, "longest_edge": rule.max_pixels,
        }  # fmt: skip
        assert (attributes["patch_size"], attributes["temporal_patch_size"]) == (
            rule.patch_size, rule.temporal_patch_size,
        )  # fmt: skip
        assert (attributes["min_frames"], attributes["max_frames"]) == (4, 768)


def test_families_without_a_video_rule_have_none() -> None:
    assert load_profile("llava-hf/llava-1.5-7b-hf").video is None


def test_vllm_pixel_bounds_reach_the_qwen2_video_processor_only() -> None:
    overrides = ProfileOverrides(min_pixels=200_704, max_pixels=1_003_520)
    assert (video_rule(QWEN, overrides).min_pixels, video_rule(QWEN, overrides).max_pixels) == (
        200_704, 1_003_520,
    )  # fmt: skip
    assert video_rule(QWEN3, overrides) == QWEN3_RULE


def _qwen3_directory(directory: Path, **files: dict[str, Any]) -> Path:
    """A Qwen3-VL-8B model directory holding ``<name>.json`` for each of ``files``."""
    directory.mkdir()
    entry = BUILTIN_MODELS[QWEN3]
    (directory / "config.json").write_text(json.dumps(entry.config))
    (directory / "preprocessor_config.json").write_text(json.dumps(entry.preprocessor))
    for name, content in files.items():
        (directory / f"{name}.json").write_text(json.dumps(content))
    return directory


def test_model_directory_video_config_is_found_where_transformers_looks(tmp_path: Path) -> None:
    video = {"size": {"shortest_edge": 8192, "longest_edge": 1_000_000}, "patch_size": 16}
    nested = {"video_processor": {"size": {"shortest_edge": 1024, "longest_edge": 2_000_000}}}
    alone = _qwen3_directory(tmp_path / "alone", video_preprocessor_config=video)
    rule = load_profile(str(alone)).video
    assert isinstance(rule, QwenVideoRule)
    assert (rule.min_pixels, rule.max_pixels) == (8192, 1_000_000)
    both = _qwen3_directory(
        tmp_path / "nested", video_preprocessor_config=video, processor_config=nested
    )
    rule = load_profile(str(both)).video
    assert isinstance(rule, QwenVideoRule)
    assert (rule.min_pixels, rule.max_pixels) == (1024, 2_000_000)
    rule = load_profile(str(_qwen3_directory(tmp_path / "neither"))).video
    assert isinstance(rule, QwenVideoRule)  # built from preprocessor_config.json's size
    assert (rule.min_pixels, rule.max_pixels) == (65_536, 16_777_216)


# --- pricing, end to end ----------------------------------------------------------------------

BRIEF_VIDEO = (640, 640, 32, 2)  # 16 s at 2 fps: 32 frames sampled, 16 groups of 529 tokens
TEXT_ESTIMATE = math.ceil(len("What happens?") / 3) + 16  # chars / 3, plus the template's 16


async def post(
    session: aiohttp.ClientSession, port: int, body: dict[str, Any]
) -> tuple[int, Any, dict[str, str]]:
    url = f"http://127.0.0.1:{port}/v1/chat/completions"
    async with session.post(url, data=orjson.dumps(body)) as response:
        return response.status, await response.json(), dict(response.headers)


def finished(logs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [entry for entry in logs if entry["event"] == "request.finished"]


async def test_sidecar_reports_an_inline_videos_exact_tokens(
    make_sidecar: SidecarFactory, standin: StandinServer, session: aiohttp.ClientSession
) -> None:
    sidecar = await make_sidecar()
    body = chat(video_part(data_uri(make_video(*BRIEF_VIDEO))))
    with structlog.testing.capture_logs() as logs:
        status, _, headers = await post(session, sidecar.port, body)
    assert status == 200
    assert int(headers[VISUAL]) == 8_464
    assert int(headers[PROMPT_TOKENS]) == 8_464 + 2 + TEXT_ESTIMATE
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
    status, answer, headers = await post(
        session, sidecar.port, chat(video_part(data_uri(make_video(*BRIEF_VIDEO))))
    )
    assert status == 400
    assert headers["x-vlm-sidecar-decision"] == "reject"
    assert answer["error"]["message"] == (
        "request costs 8,464 visual tokens; SIDECAR_MAX_REQUEST_VISUAL_TOKENS is 5,000 "
        "(video 1 of 1 (640x640, 16.0 s) costs 8,464 tokens)"
    )
    assert standin.requests == []


@pytest.mark.parametrize(
    ("uri", "message"),
    [
        (data_uri(b"not a video, only text" * 10), "video 2 of 2: FFmpeg cannot read it"),
        ("data:video/mp4;base64,QUJ", "video 2 of 2: the data URL is not valid base64"),
        (data_uri(make_video(32, 32, 1, 1)), "video 2 of 2: the video has 1 frame"),
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
    good = video_part(data_uri(make_video(16, 16, 8, 4)))
    status, answer, _ = await post(session, sidecar.port, chat(good, video_part(uri)))
    assert status == 400
    assert answer["error"]["message"].startswith(message)
    assert answer["error"]["param"] == "video_url"
    assert standin.requests == []


async def test_sidecar_prices_videos_it_cannot_read_at_the_allowance_and_says_why(
    make_sidecar: SidecarFactory, session: aiohttp.ClientSession
) -> None:
    sidecar = await make_sidecar(video_tokens_per_item=500)
    body = chat(
        video_part("https://videos.test/clip.mp4"),
        video_part(data_uri(make_video(16, 16, 8, 4), "video/jpeg")),
        {"type": "video_url", "video_url": None, "uuid": "seen-before"},
    )
    with structlog.testing.capture_logs() as logs:
        status, _, headers = await post(session, sidecar.port, body)
    assert status == 200
    assert int(headers[VISUAL]) == 3 * 500
    assert int(headers[PROMPT_TOKENS]) == 3 * 500 + TEXT_ESTIMATE  # no wrappers on allowances
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
        status, _, headers = await post(
            session, sidecar.port, chat(video_part(data_uri(picture.getvalue(), "video/png")))
        )
    assert status == 200
    assert int(headers[VISUAL]) == 700
    (video,) = finished(logs)[0]["videos"]
    assert video["allowance_reason"] == "the container gives no frame rate or frame count"
    assert (video["size"], video["format"]) == ("40x30", "png_pipe")


async def test_sidecar_reads_a_video_data_uri_written_with_json_escapes(
    make_sidecar: SidecarFactory, session: aiohttp.ClientSession
) -> None:
    sidecar = await make_sidecar()
    uri = data_uri(make_video(*BRIEF_VIDEO))
    assert "/" in uri
    raw = orjson.dumps(chat(video_part(uri))).replace(b"/", b"\\/")
    url = f"http://127.0.0.1:{sidecar.port}/v1/chat/completions"
    async with session.post(url, data=raw) as response:
        assert response.status == 200
        assert int(response.headers[VISUAL]) == 8_464


async def test_sidecar_prices_videos_of_families_without_a_rule_at_the_allowance(
    make_sidecar: SidecarFactory, session: aiohttp.ClientSession
) -> None:
    sidecar = await make_sidecar(model="llava-hf/llava-1.5-7b-hf")
    status, _, headers = await post(
        session, sidecar.port, chat(video_part(data_uri(make_video(*BRIEF_VIDEO))))
    )
    assert status == 200
    assert int(headers[VISUAL]) == 16_384


# --- URL videos under SIDECAR_REMOTE_IMAGES=probe ---------------------------------------------

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
    body = chat(
        video_part(f"{video_site}/moov-first.mp4"),
        video_part(f"{video_site}/moov-last.mp4"),
        video_part(f"{video_site}/gone.mp4"),
    )
    async with running_sidecar(settings, registry=CollectorRegistry(), remote_prober=prober) as s:
        with structlog.testing.capture_logs() as logs:
            status, _, headers = await post(session, s.port, body)
        refused_status, refused, _ = await post(
            session, s.port, chat(video_part("http://elsewhere.test/clip.mp4"))
        )
    exact = QWEN25_RULE.video_tokens(probe_video_bytes(MOOV_FIRST))
    assert status == 200
    assert int(headers[VISUAL]) == exact.tokens + 2 * 500
    first, last, gone = finished(logs)[0]["videos"]
    assert (first["tokens"], first["frames_sampled"], first["size"]) == (exact.tokens, 4, "32x32")
    assert (
        "index (moov) after the media data, beyond the first 16,384 bytes"
        in (last["allowance_reason"])
    )
    assert gone["allowance_reason"].endswith("the image server answered HTTP 404")
    assert refused_status == 400
    assert refused["error"]["param"] == "video_url"
    assert refused["error"]["message"] == (
        "video 1 of 1: remote video http://elsewhere.test/clip.mp4: host elsewhere.test is not "
        "in SIDECAR_REMOTE_IMAGE_ALLOWED_DOMAINS"
    )


# --- Qwen3-VL timestamps counted with the model directory's tokenizer -------------------------


@pytest.fixture(scope="module")
def qwen3_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A Qwen3-VL-8B directory with a small byte-level BPE tokenizer trained here."""
    directory = _qwen3_directory(
        tmp_path_factory.mktemp("qwen3") / "model",
        video_preprocessor_config=BUILTIN_MODELS[QWEN3].video_preprocessor or {},
    )
    corpus = [f"<{t / 10:.1f} seconds> what happens in the video" for t in range(0, 400, 7)]
    return write_qwen_tokenizer(directory, corpus * 5, vocab_size=400)


async def test_qwen3_video_prompt_tokens_equal_vllms_expansion_with_the_tokenizer(
    qwen3_dir: Path,
) -> None:
    profile = load_profile(str(qwen3_dir))
    counter = PromptCounter.from_model_dir(qwen3_dir, profile.model_type)
    assert counter is not None
    assert isinstance(profile.video, QwenVideoRule)
    video = make_video(32, 32, 75, Fraction(15, 2))
    body = chat(video_part(data_uri(video)))
    raw = orjson.dumps(body)
    prediction = await Pricer(profile, Settings(model=str(qwen3_dir)), None, counter).price(
        parse_request_body(raw, Route.CHAT), raw
    )
    # The oracle: the template through transformers, then vLLM's get_video_repl in place of
    # <|vision_start|><|video_pad|><|vision_end|> (replicated: vLLM is not installed).
    fast = PreTrainedTokenizerFast(tokenizer_file=str(qwen3_dir / "tokenizer.json"))
    messages = [{"role": "user", "content": [
        {"type": "text", "text": "What happens?"}, {"type": "video"},
    ]}]  # fmt: skip
    text = fast.apply_chat_template(
        messages, chat_template=QWEN2_VL_CHAT_TEMPLATE, add_generation_prompt=True, tokenize=False
    )
    ids = fast.encode(text, add_special_tokens=False)
    header = probe_video_bytes(video)
    indices = oracle_frames(profile.video, header.frame_count, header.fps or 0.0)
    assert indices is not None
    grid = oracle_tokens(profile.video, header)
    assert not isinstance(grid, str)
    per_group = grid[0] // grid[1][0]
    expansion = sum(
        len(fast.encode(f"<{t:.1f} seconds>", add_special_tokens=False)) + 1 + per_group + 1
        for t in vllm_timestamps(indices, header.fps or 0.0, 2)
    )
    assert prediction.text_tokens_exact
    assert prediction.videos[0].tokens.timestamp_tokens_exact
    assert prediction.prompt_tokens == len(ids) - 3 + expansion
