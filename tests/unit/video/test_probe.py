"""video.probe: size, frame count, rate and duration from the container, without decoding.

The oracle is what OpenCV's FFmpeg backend (vLLM's video loader) would report; the display
rotation is checked against PyAV's own decoded frame.
"""

from __future__ import annotations

import base64
import io
from typing import Any

import av
import numpy as np
import pytest

from sidecar.errors import TruncatedImageError, VideoError
from sidecar.video.isobmff import IndexReach, index_reach
from sidecar.video.probe import (
    VideoPrefixUnreadable,
    decode_base64_payload,
    probe_video_bytes,
    probe_video_prefix,
)
from tests.support.videos import PROBE_CASES, make_video


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
