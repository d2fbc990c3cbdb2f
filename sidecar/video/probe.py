"""Frame size, frame rate, frame count and duration of one video, from its container.

The figures are the ones vLLM's default video loader reports: OpenCV's FFmpeg backend
(``VLLM_VIDEO_LOADER_BACKEND`` opencv, ``cap_ffmpeg_impl.hpp``), read here through PyAV from
the same FFmpeg structures:

* ``fps`` is ``CAP_PROP_FPS``: ``av_guess_frame_rate`` (PyAV's ``guessed_rate``);
* ``frame_count`` is ``CAP_PROP_FRAME_COUNT``: the stream's ``nb_frames`` (an MP4's sample
  count), or where the container stores none (WebM, Matroska) ``floor(duration x fps + 0.5)``,
  the duration being the container's, else the stream's;
* width and height are the coded frame's, swapped for a 90 or 270 degree display rotation:
  OpenCV rotates decoded frames by default and reports the rotated size, so vLLM's frames are
  upright. MP4/MOV carry the rotation (see ``isobmff``); Matroska's is not read (rare).
* the video stream is the first one, as OpenCV picks it.

No sampled frame is decoded. Opening a container runs ``avformat_find_stream_info``, as
OpenCV does, which may decode a few packets to complete the stream parameters; callers run
the probe off the event loop.

A data URI's payload is decoded whole (the body is already in memory, bounded by
``SIDECAR_MAX_BODY_BYTES``) and leniently, as vLLM's ``base64.b64decode`` does: characters
outside the alphabet are skipped. ``video/jpeg`` URIs (comma-separated JPEG frames) carry no
timing and are not probed.
"""

from __future__ import annotations

import binascii
import io
import math
from dataclasses import dataclass
from fractions import Fraction

import av
import av.error

from sidecar.errors import TruncatedImageError, VideoError
from sidecar.settings import VLLM_MAX_IMAGE_PIXELS
from sidecar.video import isobmff

DEFAULT_MAX_FRAME_PIXELS = VLLM_MAX_IMAGE_PIXELS  # the image limit, SIDECAR_MAX_DECODE_PIXELS
_EPS_ZERO = 0.000025  # OpenCV's eps_zero: a duration below it counts as unknown
_EBML_MAGIC = b"\x1a\x45\xdf\xa3"  # Matroska and WebM


class VideoPrefixUnreadable(Exception):
    """A prefix cannot give this video's metadata (an MP4 whose index lies after its media
    data, or a container whose length is not in its header); price it at the allowance."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


@dataclass(frozen=True, slots=True)
class VideoHeader:
    """One video as vLLM's loader sees it; ``fps`` None and ``frame_count`` 0 when unknown."""

    width_px: int  # after a 90/270 degree display rotation
    height_px: int
    duration_seconds: float | None
    fps: float | None
    frame_count: int
    format: str  # FFmpeg's demuxer name, e.g. "mov,mp4,m4a,3gp,3g2,mj2"
    rotation_degrees: int = 0  # clockwise display rotation OpenCV applies

    @property
    def pixels(self) -> int:
        """Pixels of one frame."""
        return self.width_px * self.height_px


def decode_base64_payload(payload: bytes | memoryview) -> bytes:
    """The bytes of a base64 payload, decoded as leniently as vLLM's ``base64.b64decode``."""
    try:
        return binascii.a2b_base64(payload)
    except (binascii.Error, ValueError) as exc:
        raise VideoError(f"the data URL is not valid base64 ({exc})") from None


def probe_video_bytes(
    data: bytes, *, max_frame_pixels: int = DEFAULT_MAX_FRAME_PIXELS
) -> VideoHeader:
    """The metadata of a whole video file held in memory."""
    if not data:
        raise VideoError("the video is empty")
    try:
        with av.open(io.BytesIO(data), mode="r") as container:
            stream = next(iter(container.streams.video), None)
            if stream is None:
                raise VideoError(f"the {container.format.name} container holds no video stream")
            fps = float(stream.guessed_rate) if stream.guessed_rate else None
            duration = _duration_seconds(container.duration, stream.duration, stream.time_base)
            frame_count = stream.frames
            if frame_count <= 0:
                frame_count = math.floor(duration * fps + 0.5) if fps else 0
            rotation = 0
            if isobmff.is_isobmff(data):
                rotation = isobmff.display_rotation_degrees(data, stream.id)
            width, height = stream.width, stream.height
            format_name = container.format.name
    except av.error.FFmpegError as exc:
        raise VideoError(f"FFmpeg cannot read it as a video ({exc.strerror})") from None
    if width <= 0 or height <= 0:
        raise VideoError(f"the video stream claims a frame of {width}x{height}")
    if width * height > max_frame_pixels:
        raise VideoError(
            f"its frames of {width}x{height} ({width * height:,} pixels) exceed the "
            f"maximum of {max_frame_pixels:,}"
        )
    if rotation in (90, 270):
        width, height = height, width
    return VideoHeader(
        width_px=width,
        height_px=height,
        duration_seconds=duration or None,
        fps=fps,
        frame_count=max(frame_count, 0),
        format=format_name,
        rotation_degrees=rotation,
    )


def probe_video_prefix(
    prefix: bytes, *, limit_bytes: int, max_frame_pixels: int = DEFAULT_MAX_FRAME_PIXELS
) -> VideoHeader:
    """The metadata of a video from its first bytes, for the remote prober.

    Raises ``TruncatedImageError`` when a longer prefix (up to ``limit_bytes``) may do, and
    ``VideoPrefixUnreadable`` when no prefix within the limit can.
    """
    if isobmff.is_isobmff(prefix):
        reach = isobmff.index_reach(prefix, limit_bytes)
        if reach is isobmff.IndexReach.BEYOND_LIMIT:
            raise VideoPrefixUnreadable(
                f"the MP4 keeps its index (moov) after the media data, beyond the first "
                f"{limit_bytes:,} bytes the sidecar may fetch"
            )
        if reach is isobmff.IndexReach.NEEDS_MORE:
            raise TruncatedImageError("the MP4 index (moov) is not complete in the prefix")
        return probe_video_bytes(prefix, max_frame_pixels=max_frame_pixels)
    if prefix.startswith(_EBML_MAGIC):
        try:
            header = probe_video_bytes(prefix, max_frame_pixels=max_frame_pixels)
        except VideoError:
            raise TruncatedImageError("the Matroska header is not complete in the prefix") from None
        if header.frame_count <= 0:
            raise VideoPrefixUnreadable("the Matroska header gives no duration")
        return header
    raise VideoPrefixUnreadable("only MP4/MOV and Matroska/WebM videos can be priced from a prefix")


def _duration_seconds(
    container_duration: int | None, stream_duration: int | None, time_base: Fraction | None
) -> float:
    """OpenCV's ``get_duration_sec``: the container's duration, else the stream's; 0 unknown."""
    seconds = (container_duration or 0) / 1_000_000
    if seconds < _EPS_ZERO and stream_duration and time_base:
        seconds = float(stream_duration * time_base)
    return seconds
