"""Every Prometheus metric the sidecar exports, on an injected registry.

Names carry the ``vlm_sidecar_`` prefix and their unit. Labels are bounded: ``model``
(one per sidecar), ``route`` (four inspected routes), ``decision`` and ``reason``
(closed sets from ``admission``), ``format``/``source`` for images and ``kind`` for
upstream errors. Label children are created up front so every series exists at zero.

Buckets (documented in README):
- tokens: geometric x2 from 16 to 131,072;
- KV bytes: geometric x2 from 1 MiB to 256 GiB;
- pixels: 0.01 MP to 50 MP in a 1-2.5-5 ladder;
- seconds: 50 us to 60 s for the sidecar's own work, 5 ms to 10 min for upstream times;
- prediction error: symmetric, -4,096 to +4,096 tokens, so both signs stay visible.
"""

from __future__ import annotations

from collections.abc import Sequence

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, Info

from sidecar.admission import Reason

Buckets = Sequence[float]

TOKEN_BUCKETS = tuple(float(16 * 2**i) for i in range(14))  # 16 .. 131,072
KV_BYTES_BUCKETS = tuple(float(2**20 * 2**i) for i in range(19))  # 1 MiB .. 256 GiB
PIXEL_BUCKETS = tuple(
    m * 1_000_000 for m in (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 25, 50)
)
IMAGES_BUCKETS = (0.0, 1, 2, 4, 8, 16, 32, 64, 128, 256)
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

ROUTES = ("chat_completions", "completions", "responses", "messages")
DECISIONS = ("admit", "downscale", "wait", "reject")
IMAGE_FORMATS = ("jpeg", "png", "webp", "gif", "bmp", "tiff", "avif", "heif", "other", "unknown")
IMAGE_SOURCES = ("data", "url", "cached")
UPSTREAM_ERROR_KINDS = ("connect", "timeout", "reset", "status_5xx")

_DOWNSCALE_REASONS = (
    Reason.MAX_IMAGE_PIXELS,
    Reason.MAX_IMAGE_TOKENS,
    Reason.MAX_REQUEST_VISUAL_TOKENS,
    Reason.MAX_REQUEST_PROMPT_TOKENS,
    Reason.MAX_REQUEST_KV_BYTES,
)
VALID_OUTCOMES: tuple[tuple[str, Reason], ...] = (
    ("admit", Reason.WITHIN_BUDGET),
    ("wait", Reason.KV_BUDGET_FULL),
    *(("downscale", reason) for reason in _DOWNSCALE_REASONS),
    *(("reject", reason) for reason in Reason if reason is not Reason.WITHIN_BUDGET),
)


class Metrics:
    """The sidecar's metrics; one instance per process, on the given registry."""

    def __init__(self, registry: CollectorRegistry, *, model: str) -> None:
        self.model = model
        route: tuple[str, ...] = ("model", "route")
        only_model: tuple[str, ...] = ("model",)

        def histogram(name: str, doc: str, labels: tuple[str, ...], buckets: Buckets) -> Histogram:
            return Histogram(name, doc, labels, buckets=buckets, registry=registry)

        def counter(name: str, doc: str, labels: tuple[str, ...]) -> Counter:
            return Counter(name, doc, labels, registry=registry)

        def gauge(name: str, doc: str, labels: tuple[str, ...] = only_model) -> Gauge:
            return Gauge(name, doc, labels, registry=registry)

        prefix = "vlm_sidecar_"
        self.requests = counter(
            f"{prefix}requests_total",
            "Inspected requests by decision and reason.",
            ("model", "route", "decision", "reason"),
        )
        self.request_visual_tokens = histogram(
            f"{prefix}request_visual_tokens",
            "Predicted visual tokens per request.",
            route,
            TOKEN_BUCKETS,
        )
        self.request_prompt_tokens = histogram(
            f"{prefix}request_prompt_tokens",
            "Predicted prompt tokens per request.",
            route,
            TOKEN_BUCKETS,
        )
        self.request_kv_bytes = histogram(
            f"{prefix}request_kv_bytes",
            "Predicted KV-cache bytes per request, in whole blocks, per GPU.",
            route,
            KV_BYTES_BUCKETS,
        )
        self.request_images = histogram(
            f"{prefix}request_images", "Images per request.", route, IMAGES_BUCKETS
        )
        self.image_tokens = histogram(
            f"{prefix}image_tokens",
            "Predicted tokens per image, before any downscale.",
            only_model,
            TOKEN_BUCKETS,
        )
        self.image_pixels = histogram(
            f"{prefix}image_pixels",
            "Pixels per image as sent, after EXIF orientation.",
            only_model,
            PIXEL_BUCKETS,
        )
        self.images = counter(
            f"{prefix}images_total",
            "Images seen, by format and source.",
            ("model", "format", "source"),
        )
        self.downscaled_images = counter(
            f"{prefix}downscaled_images_total", "Images rewritten smaller.", only_model
        )
        self.downscale_seconds = histogram(
            f"{prefix}downscale_seconds",
            "Time to decode, resize and encode one image.",
            only_model,
            OVERHEAD_SECONDS_BUCKETS,
        )
        self.inflight_requests = gauge(
            f"{prefix}inflight_requests", "Requests holding a KV reservation."
        )
        self.inflight_kv_bytes = gauge(
            f"{prefix}inflight_kv_bytes", "Predicted KV bytes of in-flight requests, per GPU."
        )
        self.kv_budget_bytes = gauge(f"{prefix}kv_budget_bytes", "In-flight KV budget; 0: off.")
        self.queue_depth = gauge(f"{prefix}queue_depth", "Requests waiting for KV budget.")
        self.queue_wait_seconds = histogram(
            f"{prefix}queue_wait_seconds",
            "Time spent waiting for KV budget.",
            only_model,
            OVERHEAD_SECONDS_BUCKETS,
        )
        self.observed_prompt_tokens = histogram(
            f"{prefix}observed_prompt_tokens",
            "prompt_tokens reported in vLLM's usage.",
            route,
            TOKEN_BUCKETS,
        )
        self.prompt_tokens_error = histogram(
            f"{prefix}prompt_tokens_prediction_error",
            "Observed minus predicted prompt tokens; negative when over-predicted.",
            route,
            ERROR_TOKEN_BUCKETS,
        )
        self.overhead_seconds = histogram(
            f"{prefix}overhead_seconds",
            "Arrival to upstream send, queue wait excluded.",
            route,
            OVERHEAD_SECONDS_BUCKETS,
        )
        self.upstream_first_byte_seconds = histogram(
            f"{prefix}upstream_first_byte_seconds",
            "Upstream send to first response byte.",
            route,
            UPSTREAM_SECONDS_BUCKETS,
        )
        self.request_duration_seconds = histogram(
            f"{prefix}request_duration_seconds",
            "Arrival to the last byte relayed.",
            route,
            UPSTREAM_SECONDS_BUCKETS,
        )
        self.upstream_errors = counter(
            f"{prefix}upstream_errors_total",
            "Failures talking to vLLM, by kind.",
            ("model", "kind"),
        )
        self.budget = gauge(
            f"{prefix}budget", "Configured budgets; absent when unlimited.", ("model", "budget")
        )
        self.profile_kv_bytes_per_token = gauge(
            f"{prefix}model_kv_bytes_per_token", "KV bytes per token of the model, per GPU."
        )
        self.profile_max_image_tokens = gauge(
            f"{prefix}model_max_image_tokens", "Tokens of the model's largest image."
        )
        self.profile = Info("vlm_sidecar_model", "The active model profile.", registry=registry)
        self._create_children()

    def _create_children(self) -> None:
        model = self.model
        for route in ROUTES:
            for decision, reason in VALID_OUTCOMES:
                self.requests.labels(model, route, decision, reason.value)
            for histogram in (
                self.request_visual_tokens, self.request_prompt_tokens, self.request_kv_bytes,
                self.request_images, self.observed_prompt_tokens, self.prompt_tokens_error,
                self.overhead_seconds, self.upstream_first_byte_seconds,
                self.request_duration_seconds,
            ):  # fmt: skip
                histogram.labels(model, route)
        for image_format in IMAGE_FORMATS:
            for source in IMAGE_SOURCES:
                self.images.labels(model, image_format, source)
        for kind in UPSTREAM_ERROR_KINDS:
            self.upstream_errors.labels(model, kind)
        for metric in (
            self.image_tokens, self.image_pixels, self.downscaled_images, self.downscale_seconds,
            self.inflight_requests, self.inflight_kv_bytes, self.kv_budget_bytes,
            self.queue_depth, self.queue_wait_seconds, self.profile_kv_bytes_per_token,
            self.profile_max_image_tokens,
        ):  # fmt: skip
            metric.labels(model)


def image_format_label(pillow_format: str | None) -> str:
    """Pillow's format name as a bounded label value."""
    if pillow_format is None:
        return "unknown"
    label = pillow_format.lower().replace("mpo", "jpeg")
    return label if label in IMAGE_FORMATS else "other"
