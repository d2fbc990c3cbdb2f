"""Test videos written with PyAV (libx264 MP4, VP8 WebM), tiny and short, so that even an
800-second video costs milliseconds to make; the bodies that carry them; the Qwen video rules."""

from __future__ import annotations

import functools
import json
import tempfile
from fractions import Fraction
from pathlib import Path
from typing import Any

import av
import numpy as np
import pytest

from sidecar.profiles import ProfileOverrides, load_profile
from sidecar.profiles.builtins import BUILTIN_MODELS
from sidecar.video.qwen import QwenVideoRule
from tests.support.imaging import data_uri
from tests.support.sidecars import QWEN

QWEN3 = "Qwen/Qwen3-VL-8B-Instruct"
MP4 = "mov,mp4,m4a,3gp,3g2,mj2"  # FFmpeg's name for the MP4/MOV demuxer


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


def mp4_uri(video: bytes) -> str:
    """``data:video/mp4;base64,...``."""
    return data_uri(video, "video/mp4")


def video_part(url: str) -> dict[str, Any]:
    return {"type": "video_url", "video_url": {"url": url}}


def video_chat(*parts: dict[str, Any], text: str = "What happens?") -> dict[str, Any]:
    """A chat request whose one user message holds the text, then ``parts``."""
    content = [{"type": "text", "text": text}, *parts]
    return {"model": "m", "messages": [{"role": "user", "content": content}], "max_tokens": 8}


# Videos of many shapes, rates and containers, and what OpenCV's FFmpeg backend (vLLM's loader)
# reports for each: (width, height, frames, fps, seconds).
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


def qwen3_directory(directory: Path, **files: dict[str, Any]) -> Path:
    """A Qwen3-VL-8B model directory holding ``<name>.json`` for each of ``files``."""
    directory.mkdir()
    entry = BUILTIN_MODELS[QWEN3]
    (directory / "config.json").write_text(json.dumps(entry.config))
    (directory / "preprocessor_config.json").write_text(json.dumps(entry.preprocessor))
    for name, content in files.items():
        (directory / f"{name}.json").write_text(json.dumps(content))
    return directory
