"""The label vocabularies and bucket ladders of the sidecar's metrics.

Labels are bounded: ``route`` (the inspected routes of ``sidecar.routes``), ``decision`` and
``reason`` (closed sets from ``admission``, paired as ``REASON_DECISIONS`` allows, in
``VALID_OUTCOMES``), ``format``/``source`` for
images and videos and ``kind`` for upstream errors. A value outside a vocabulary maps to
``other`` (or ``unknown`` when it was never read), never to a new series.

Buckets (documented in docs/metrics.md):
- tokens: geometric x2 from 16 to 131,072 (a thumbnail to a whole long-context prompt);
- KV bytes: geometric x2 from 1 MiB to 256 GiB (one block-rounded text request to a pool);
- pixels: 0.01 MP to 50 MP in a 1-2.5-5 ladder (an icon to a full-frame camera photo);
- video seconds: 1 s to 2 h (a clip to a recorded meeting);
- seconds: 50 us to 60 s for the sidecar's own work, 5 ms to 10 min for upstream times;
- prediction error: symmetric powers of two, -4,096 to +4,096 tokens, so both signs show.
"""

from __future__ import annotations

from collections.abc import Sequence

from sidecar.admission.decision import REASON_DECISIONS, Decision, Reason

Buckets = Sequence[float]

PREFIX = "vlm_sidecar_"

TOKEN_BUCKETS = tuple(float(16 * 2**i) for i in range(14))  # 16 .. 131,072
KV_BYTES_BUCKETS = tuple(float(2**20 * 2**i) for i in range(19))  # 1 MiB .. 256 GiB
PIXEL_BUCKETS = tuple(
    m * 1_000_000 for m in (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 25, 50)
)
IMAGES_BUCKETS = (0.0, 1, 2, 4, 8, 16, 32, 64, 128, 256)
VIDEO_SECONDS_BUCKETS = (1.0, 2.5, 5, 10, 30, 60, 120, 300, 600, 1200, 1800, 3600, 7200)
OVERHEAD_SECONDS_BUCKETS = (
    0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
    0.5, 1, 2.5, 5, 10, 30, 60,
)  # fmt: skip
UPSTREAM_SECONDS_BUCKETS = (
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600,
)  # fmt: skip
ERROR_TOKEN_BUCKETS = tuple(
    sorted({-float(2**i) for i in range(13)} | {0.0} | {float(2**i) for i in range(13)})
)

IMAGE_FORMATS = ("jpeg", "png", "webp", "gif", "bmp", "tiff", "avif", "other", "unknown")
MEDIA_SOURCES = ("data", "url", "cached")
# Container families by FFmpeg demuxer; "unknown": never read, priced at the allowance.
VIDEO_FORMATS = ("mp4", "matroska", "avi", "mpegts", "other", "unknown")
_VIDEO_DEMUXERS = {
    "mov,mp4,m4a,3gp,3g2,mj2": "mp4",
    "matroska,webm": "matroska",
    "avi": "avi",
    "mpegts": "mpegts",
}
UPSTREAM_ERROR_KINDS = ("connect", "timeout", "reset", "status_5xx")
# (path kind, action) of requests the sidecar does not price, as the router handles them.
UNINSPECTED_OUTCOMES = (
    ("passed", "forwarded"),
    ("metrics", "forwarded"),
    ("unknown", "forwarded"),
    ("unknown", "refused"),
    ("admin", "forwarded"),
    ("admin", "refused"),
    ("unpriceable", "forwarded"),
    ("unpriceable", "refused"),
    ("ambiguous", "forwarded"),
    ("ambiguous", "refused"),
    ("redirect", "answered"),
    ("inspected", "forwarded"),  # a method other than POST on an inspected path
)
BUDGET_NAMES = (
    "max_images_per_request",
    "max_image_pixels",
    "max_image_tokens",
    "max_request_visual_tokens",
    "max_request_prompt_tokens",
    "max_request_kv_bytes",
)

VALID_OUTCOMES: tuple[tuple[Decision, Reason], ...] = tuple(
    (decision, reason)
    for reason, decisions in REASON_DECISIONS.items()
    for decision in Decision
    if decision in decisions
)


def image_format_label(pillow_format: str | None) -> str:
    """Pillow's format name as a bounded label value."""
    if pillow_format is None:
        return "unknown"
    label = pillow_format.lower().replace("mpo", "jpeg")
    return label if label in IMAGE_FORMATS else "other"


def video_format_label(demuxer: str | None) -> str:
    """FFmpeg's demuxer name as a bounded label value; None: the video was not read."""
    if demuxer is None:
        return "unknown"
    return _VIDEO_DEMUXERS.get(demuxer, "other")
