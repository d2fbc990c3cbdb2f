"""What happened to one inspected request, turned into metrics and one log line at the end.

The proxy fills a ``RequestRecord`` as the request moves through the pipeline; whatever
way it ends (answered, rejected, upstream failure, client gone), ``finish()`` runs once
and records the same facts in Prometheus and in the ``request.finished`` event.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import structlog

from sidecar.admission.decision import Decision, Downscale, Reason, Reject, Verdict, after_hold
from sidecar.admission.discipline import DEFAULT_CLASS, NO_TAGS, QueueClass, QueueTags
from sidecar.body.request_body import RequestBody
from sidecar.cost.prediction import RequestPrediction
from sidecar.observe.labels import image_format_label, video_format_label
from sidecar.observe.metrics import Metrics, observe_all
from sidecar.observe.usage import Usage
from sidecar.routes import Route


@dataclass(frozen=True, slots=True)
class UpstreamOutcome:
    """How vLLM's answer was relayed, for the log line and metrics."""

    status: int
    first_byte_seconds: float | None
    bytes_relayed: int
    completed: bool
    error: str | None = None  # vLLM broke off mid-answer


@dataclass(slots=True)
class RequestRecord:
    """The facts gathered about one request."""

    request_id: str
    route: Route
    arrived_at: float = field(default_factory=time.perf_counter)
    arrived_unix: float = field(default_factory=time.time)  # for the traffic log
    finished_at: float | None = None  # perf_counter when finish() ran
    parsed: RequestBody | None = None  # the body as priced, for the traffic log
    decision: Decision = Decision.REJECT
    reason: Reason = Reason.INVALID_BODY
    message: str | None = None
    status: int | None = None
    prediction: RequestPrediction | None = None
    original: RequestPrediction | None = None
    waited_seconds: float = 0.0
    upstream_sent_at: float | None = None
    downscale_seconds: list[float] = field(default_factory=list)
    upstream: UpstreamOutcome | None = None
    usage: Usage | None = None
    upstream_error_kind: str | None = None
    shadow: bool = False
    trace_id: str | None = None  # of the request's span when tracing samples it
    queue_tags: QueueTags = NO_TAGS  # objective, body priority, tenant, as sent
    queue_class: QueueClass = DEFAULT_CLASS  # band and tenant (admission.discipline)
    band: str = "0"  # the band's metric label

    def apply(self, verdict: Verdict) -> None:
        """Remember the admission decision."""
        self.prediction = verdict.prediction
        self.decision, self.reason = verdict.decision, verdict.reason
        match verdict:
            case Downscale(original=original):
                self.original = original
            case Reject(message=message, status=status):
                self.message, self.status = message, status
            case _:
                pass

    def waited(self, reason: Reason) -> None:
        """The request was held (ledger or saturation); recorded as ``after_hold`` says."""
        self.decision, self.reason = after_hold(self.decision, self.reason, reason)

    def reject(self, reason: Reason, message: str, status: int) -> None:
        """The request ends in an error answer."""
        self.decision, self.reason = Decision.REJECT, reason
        self.message, self.status = message, status

    def response_headers(self) -> dict[str, str]:
        """The ``x-vlm-sidecar-*`` headers for the client."""
        headers = {"x-request-id": self.request_id, "x-vlm-sidecar-decision": self.decision.value}
        if self.shadow:
            headers["x-vlm-sidecar-mode"] = "shadow"
        forwarded = self.forwarded  # in shadow mode: the request as sent, never the downscale
        if forwarded is not None:
            headers["x-vlm-sidecar-visual-tokens"] = str(forwarded.visual_tokens)
            headers["x-vlm-sidecar-prompt-tokens"] = str(forwarded.prompt_tokens)
            headers["x-vlm-sidecar-kv-bytes"] = str(forwarded.kv_bytes)
        return headers

    @property
    def forwarded(self) -> RequestPrediction | None:
        """The prediction of what vLLM was sent: shadow mode never rewrites."""
        return (self.original if self.shadow else None) or self.prediction

    def finish(self, metrics: Metrics, logger: Any) -> None:
        """Record metrics and emit the request's one log line."""
        now = self.finished_at = time.perf_counter()
        series = metrics.for_route(self.route.label)
        # OpenMetrics exposition shows the traced request behind a latency or KV bucket.
        exemplar = None if self.trace_id is None else {"trace_id": self.trace_id}
        series.request(self.decision, self.reason).inc()
        priced = self.original or self.prediction
        if priced is not None:
            series.visual_tokens.observe(priced.visual_tokens)
            series.prompt_tokens.observe(priced.prompt_tokens)
            series.kv_bytes.observe(priced.kv_bytes, exemplar)
            series.images.observe(len(priced.images))
            images = priced.images
            if images:
                observe_all(metrics.image_tokens_child, [image.tokens.tokens for image in images])
                observe_all(metrics.image_pixels_child, [i.pixels for i in images if i.pixels])
                counts = Counter((image_format_label(i.format), i.source) for i in images)
                for (label, source), count in counts.items():
                    metrics.image_counter(label, source).inc(count)
            for video in priced.videos:
                metrics.video_tokens_child.observe(video.tokens.tokens)
                header = video.header
                if header is not None and header.duration_seconds:
                    metrics.video_seconds_child.observe(header.duration_seconds)
                label = video_format_label(None if header is None else header.format)
                metrics.video_counter(label, video.source).inc()
        for seconds in self.downscale_seconds:
            metrics.downscaled_images_child.inc()
            metrics.downscale_seconds_child.observe(seconds)
        if self.reason is Reason.QUEUE_TIMEOUT:  # waits that were granted are observed on grant
            metrics.queue_wait_seconds_child.observe(self.waited_seconds, exemplar)
            metrics.band(self.band).wait_seconds.observe(self.waited_seconds)
        if self.decision is Decision.REJECT:
            refusal = metrics.band(self.band).refusals.get(self.reason)
            if refusal is not None:
                refusal.inc()
        if self.upstream_sent_at is not None:
            overhead = self.upstream_sent_at - self.arrived_at - self.waited_seconds
            series.overhead_seconds.observe(max(0.0, overhead), exemplar)
        if self.upstream is not None and self.upstream.first_byte_seconds is not None:
            series.upstream_first_byte_seconds.observe(self.upstream.first_byte_seconds, exemplar)
        series.request_duration_seconds.observe(now - self.arrived_at, exemplar)
        if self.upstream_error_kind is not None:
            metrics.upstream_error_counter(self.upstream_error_kind).inc()
        forwarded = self.forwarded
        if self.usage is not None:
            series.observed_prompt_tokens.observe(self.usage.prompt_tokens)
            if forwarded is not None:
                series.usage_predicted_prompt_tokens.inc(forwarded.prompt_tokens)
                series.prompt_tokens_error.observe(
                    self.usage.prompt_tokens - forwarded.prompt_tokens
                )
                split = prediction_error_split(self.usage, forwarded)
                if split is not None:
                    series.image_tokens_error.observe(split[0])
                    series.text_tokens_error.observe(split[1])
        logger.info("request.finished", **self._log_fields(now))

    def _log_fields(self, now: float) -> dict[str, Any]:
        fields: dict[str, Any] = {
            "request_id": self.request_id,
            "route": self.route.label,
            "decision": self.decision.value,
            "reason": self.reason.value,
            "duration_seconds": round(now - self.arrived_at, 6),
            "wait_seconds": round(self.waited_seconds, 6),
        }
        if self.message is not None:
            fields["message"] = self.message
        if self.status is not None:
            fields["status"] = self.status
        forwarded = self.forwarded
        if forwarded is not None:
            # The request as vLLM got it: the same figures as the headers and the metrics.
            fields["predicted_prompt_tokens"] = forwarded.prompt_tokens
            fields["prompt_tokens_exact"] = forwarded.prompt_tokens_exact
            fields["predicted_visual_tokens"] = forwarded.visual_tokens
            fields["predicted_kv_bytes"] = forwarded.kv_bytes
            fields["images"] = _image_fields(forwarded)
            if forwarded.videos:
                fields["videos"] = _video_fields(forwarded)
            if self.original is not None and self.prediction is not None:
                if self.shadow:  # what enforce mode would have sent instead
                    fields["images_if_downscaled"] = _image_fields(self.prediction)
                else:
                    fields["images_before_downscale"] = _image_fields(self.original)
        if self.upstream is not None:
            fields["upstream_status"] = self.upstream.status
            fields["upstream_completed"] = self.upstream.completed
            fields["upstream_bytes"] = self.upstream.bytes_relayed
            if self.upstream.error:
                fields["upstream_error"] = self.upstream.error
        if self.usage is not None:
            fields["observed_prompt_tokens"] = self.usage.prompt_tokens
            if forwarded is not None:
                fields["prompt_tokens_error"] = self.usage.prompt_tokens - forwarded.prompt_tokens
                split = prediction_error_split(self.usage, forwarded)
                if split is not None:
                    fields["image_tokens_error"], fields["text_tokens_error"] = split
        if self.shadow:
            fields["mode"] = "shadow"
        return fields


# Items described one by one in the log line; past these, a summary keeps the line far under
# the 16 KiB at which Docker's json-file driver splits lines (the traffic log keeps them all).
LOGGED_ITEMS = 8


def _image_fields(prediction: RequestPrediction) -> list[dict[str, Any]]:
    images = prediction.images
    fields: list[dict[str, Any]] = [
        {"size": f"{i.width_px}x{i.height_px}" if i.width_px else None,
         "format": i.format, "source": i.source, "tokens": i.tokens.tokens}
        for i in images[:LOGGED_ITEMS]
    ]  # fmt: skip
    if len(images) > LOGGED_ITEMS:
        rest = images[LOGGED_ITEMS:]
        formats = sorted({str(image.format) for image in rest})
        fields.append(
            {
                "more_images": len(rest),
                "tokens": sum(image.tokens.tokens for image in rest),
                "largest_pixels": max(image.pixels for image in rest),
                "formats": formats[:LOGGED_ITEMS],
            }
        )
    return fields


def _video_fields(prediction: RequestPrediction) -> list[dict[str, Any]]:
    fields: list[dict[str, Any]] = []
    videos = prediction.videos
    for video in videos[:LOGGED_ITEMS]:
        header = video.header
        entry: dict[str, Any] = {
            "source": video.source,
            "tokens": video.tokens.tokens,
            "wrapper_tokens": video.tokens.wrapper_tokens,
        }
        if header is not None:
            entry |= {
                "size": f"{header.width_px}x{header.height_px}",
                "format": header.format,
                "duration_seconds": header.duration_seconds,
                "fps": header.fps,
                "frames": header.frame_count,
            }
        if video.allowance_reason is None:
            entry["frames_sampled"] = video.tokens.frames_sampled
        else:
            entry["allowance_reason"] = video.allowance_reason
        fields.append(entry)
    if len(videos) > LOGGED_ITEMS:
        rest = videos[LOGGED_ITEMS:]
        fields.append({"more_videos": len(rest), "tokens": sum(v.tokens.tokens for v in rest)})
    return fields


def bind_request(request_id: str) -> None:
    """Carry the request id on every event of this task."""
    structlog.contextvars.bind_contextvars(request_id=request_id)


def prediction_error_split(usage: Usage, prediction: RequestPrediction) -> tuple[int, int] | None:
    """(image, text) parts of observed minus predicted prompt tokens, from vLLM's
    ``prompt_tokens_details.multimodal_tokens`` (``--enable-prompt-tokens-details``)."""
    if usage.image_tokens is None:
        return None
    image_error = usage.image_tokens - prediction.image_tokens
    return image_error, usage.prompt_tokens - prediction.prompt_tokens - image_error
