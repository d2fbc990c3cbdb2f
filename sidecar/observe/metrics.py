"""Every Prometheus metric the sidecar exports, on an injected registry.

Names carry the ``vlm_sidecar_`` prefix and their unit; label vocabularies and buckets
live in ``metric_labels``. Label children are created up front so every series exists at
zero, and the children one request records into are resolved once per route
(``for_route``), so recording a request costs dictionary lookups, not ``labels()`` calls.

Budgets read at scrape time (``watch_budgets``) follow an ``auto`` KV budget and a
prompt budget learnt from vLLM; a budget of 0 means unlimited.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar, cast, overload

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, Info
from prometheus_client.metrics import MetricWrapperBase

from sidecar.admission.budgets import Budgets
from sidecar.admission.decision import Decision, Reason
from sidecar.admission.discipline import PriorityPolicy
from sidecar.admission.ledger import KvLedger
from sidecar.cost.engine_prices import CALIBRATION_OUTCOMES
from sidecar.engine import EngineFacts
from sidecar.engine.calibration import EngineCalibration
from sidecar.observe.labels import (
    BUDGET_NAMES,
    ERROR_TOKEN_BUCKETS,
    IMAGE_FORMATS,
    IMAGES_BUCKETS,
    KV_BYTES_BUCKETS,
    MEDIA_SOURCES,
    OVERHEAD_SECONDS_BUCKETS,
    PIXEL_BUCKETS,
    PREFIX,
    TOKEN_BUCKETS,
    UNINSPECTED_OUTCOMES,
    UPSTREAM_ERROR_KINDS,
    UPSTREAM_SECONDS_BUCKETS,
    VALID_OUTCOMES,
    VIDEO_FORMATS,
    VIDEO_SECONDS_BUCKETS,
    Buckets,
)
from sidecar.profiles import ModelProfile
from sidecar.profiles.kv_geometry import KvGeometry
from sidecar.routes import PRIMARY_ROUTES
from sidecar.settings import Mode


@dataclass(frozen=True, slots=True)
class RouteSeries:
    """The label children one request on one route records into."""

    model: str
    route: str
    requests_family: Counter
    requests: dict[tuple[str, str], Counter]
    visual_tokens: Histogram
    prompt_tokens: Histogram
    kv_bytes: Histogram
    images: Histogram
    observed_prompt_tokens: Histogram
    usage_predicted_prompt_tokens: Counter
    prompt_tokens_error: Histogram
    image_tokens_error: Histogram
    text_tokens_error: Histogram
    overhead_seconds: Histogram
    upstream_first_byte_seconds: Histogram
    request_duration_seconds: Histogram

    def request(self, decision: Decision, reason: Reason) -> Counter:
        """The ``requests_total`` child for one outcome."""
        key = (decision.value, reason.value)
        child = self.requests.get(key)
        if child is None:
            child = self.requests[key] = self.requests_family.labels(self.model, self.route, *key)
        return child


# The KV queue's refusals, counted per band.
BAND_REFUSALS = (Reason.QUEUE_TIMEOUT, Reason.QUEUE_FULL, Reason.SHED)


@dataclass(frozen=True, slots=True)
class BandSeries:
    """The label children of one priority band."""

    wait_seconds: Histogram
    refusals: dict[Reason, Counter]


M = TypeVar("M", bound=MetricWrapperBase)

MODEL_ONLY: tuple[str, ...] = ("model",)
PER_ROUTE: tuple[str, ...] = ("model", "route")
PER_BAND: tuple[str, ...] = ("model", "band")


@dataclass(frozen=True, slots=True)
class MetricSpec(Generic[M]):
    """One metric, declared once as an attribute of ``Metrics``: its name (without the
    ``vlm_sidecar_`` prefix), type, help, labels and buckets. ``Metrics`` makes each on its
    registry; one labelled by ``model`` alone has its series at zero from start-up, and one
    with ``route_series`` is a field of every route's ``RouteSeries``.

    As a class attribute it is a non-data descriptor: the instance's own attribute, set once
    in ``Metrics.__init__``, is what a read finds, at a plain attribute's cost.
    """

    kind: type[M]
    name: str
    help: str
    labels: tuple[str, ...] = MODEL_ONLY
    buckets: Buckets | None = None
    route_series: str | None = None  # the RouteSeries field holding a route's child
    attribute: str = field(default="", init=False)

    def __set_name__(self, owner: type, attribute: str) -> None:
        object.__setattr__(self, "attribute", attribute)

    @overload
    def __get__(self, instance: None, owner: type) -> MetricSpec[M]: ...
    @overload
    def __get__(self, instance: object, owner: type) -> M: ...
    def __get__(self, instance: object | None, owner: type) -> MetricSpec[M] | M:
        if instance is None:
            return self
        raise AttributeError(f"{self.attribute}: made by Metrics.__init__, not yet")

    def make(self, registry: CollectorRegistry) -> M:
        """The metric family on ``registry``."""
        name = PREFIX + self.name
        if self.buckets is None:
            return self.kind(name, self.help, self.labels, registry=registry)
        return cast(
            M, Histogram(name, self.help, self.labels, buckets=self.buckets, registry=registry)
        )


def _counter(
    name: str, help: str, labels: tuple[str, ...] = MODEL_ONLY, *, route_series: str | None = None
) -> MetricSpec[Counter]:
    return MetricSpec(Counter, name, help, labels, route_series=route_series)


def _gauge(name: str, help: str, labels: tuple[str, ...] = MODEL_ONLY) -> MetricSpec[Gauge]:
    return MetricSpec(Gauge, name, help, labels)


def _histogram(
    name: str,
    help: str,
    labels: tuple[str, ...],
    buckets: Buckets,
    *,
    route_series: str | None = None,
) -> MetricSpec[Histogram]:
    return MetricSpec(Histogram, name, help, labels, buckets, route_series)


class Metrics:
    """The sidecar's metrics; one instance per process, on the given registry.

    Each metric is declared once below; docs/metrics.md's table is checked against them.
    """

    requests = _counter(
        "requests_total",
        "Inspected requests by decision and reason.",
        ("model", "route", "decision", "reason"),
    )
    request_visual_tokens = _histogram(
        "request_visual_tokens",
        "Predicted visual tokens per request, as sent (before any downscale).",
        PER_ROUTE,
        TOKEN_BUCKETS,
        route_series="visual_tokens",
    )
    request_prompt_tokens = _histogram(
        "request_prompt_tokens",
        "Predicted prompt tokens per request, as sent (before any downscale).",
        PER_ROUTE,
        TOKEN_BUCKETS,
        route_series="prompt_tokens",
    )
    request_kv_bytes = _histogram(
        "request_kv_bytes",
        "Predicted KV-cache bytes per request as sent, in whole blocks, per GPU.",
        PER_ROUTE,
        KV_BYTES_BUCKETS,
        route_series="kv_bytes",
    )
    request_images = _histogram(
        "request_images", "Images per request.", PER_ROUTE, IMAGES_BUCKETS, route_series="images"
    )
    image_tokens = _histogram(
        "image_tokens",
        "Predicted tokens per image, before any downscale.",
        MODEL_ONLY,
        TOKEN_BUCKETS,
    )
    image_pixels = _histogram(
        "image_pixels",
        "Pixels per image as sent, after EXIF orientation; unknown sizes left out.",
        MODEL_ONLY,
        PIXEL_BUCKETS,
    )
    images = _counter(
        "images_total", "Images seen, by format and source.", ("model", "format", "source")
    )
    video_tokens = _histogram(
        "video_tokens",
        "Predicted tokens per video: exact, or the allowance for a video not read.",
        MODEL_ONLY,
        TOKEN_BUCKETS,
    )
    video_seconds = _histogram(
        "video_seconds",
        "Duration per video as its container states it; videos not read left out.",
        MODEL_ONLY,
        VIDEO_SECONDS_BUCKETS,
    )
    videos = _counter(
        "videos_total",
        "Videos seen, by container format and source; format unknown: not read.",
        ("model", "format", "source"),
    )
    downscaled_images = _counter("downscaled_images_total", "Images rewritten smaller.")
    downscale_seconds = _histogram(
        "downscale_seconds",
        "Time to decode, resize and encode one image.",
        MODEL_ONLY,
        OVERHEAD_SECONDS_BUCKETS,
    )
    inflight_requests = _gauge("inflight_requests", "Requests holding a KV reservation.")
    inflight_kv_bytes = _gauge(
        "inflight_kv_bytes", "Predicted KV bytes of in-flight requests, per GPU."
    )
    kv_budget_bytes = _gauge("kv_budget_bytes", "In-flight KV budget, per GPU; 0: no budget.")
    queue_depth = _gauge("queue_depth", "Requests waiting for KV budget.")
    queue_wait_seconds = _histogram(
        "queue_wait_seconds",
        "Time spent waiting for KV budget, by requests that waited (timed out included).",
        MODEL_ONLY,
        OVERHEAD_SECONDS_BUCKETS,
    )
    band_queue_depth = _gauge(
        "band_queue_depth", "Requests waiting for KV budget, by priority band.", PER_BAND
    )
    band_oldest_wait_seconds = _gauge(
        "band_oldest_wait_seconds",
        "How long the oldest waiter of each priority band has waited so far; 0: none.",
        PER_BAND,
    )
    band_queue_wait_seconds = _histogram(
        "band_queue_wait_seconds",
        "Time spent waiting for KV budget by requests that waited, by priority band.",
        PER_BAND,
        OVERHEAD_SECONDS_BUCKETS,
    )
    band_refusals = _counter(
        "band_refusals_total",
        "429s from the KV queue by priority band and reason (queue_timeout, queue_full, "
        "shed); shed also counts sheddable requests refused while vLLM is saturated.",
        ("model", "band", "reason"),
    )
    fairness_tenants_waiting = _gauge(
        "fairness_tenants_waiting", "Tenants with at least one request waiting."
    )
    queue_timeout_seconds = _gauge(
        "queue_timeout_seconds", "Longest wait for KV budget before a 429."
    )
    queue_max_depth = _gauge(
        "queue_max_depth", "Requests that may wait for KV budget before a 429."
    )
    observed_prompt_tokens = _histogram(
        "observed_prompt_tokens",
        "prompt_tokens reported in vLLM's usage (JSON body or final stream chunk).",
        PER_ROUTE,
        TOKEN_BUCKETS,
        route_series="observed_prompt_tokens",
    )
    usage_predicted_prompt_tokens = _counter(
        "usage_predicted_prompt_tokens_total",
        "Predicted prompt tokens of forwarded requests whose answer reported usage; "
        "compare with vlm_sidecar_observed_prompt_tokens_sum.",
        PER_ROUTE,
        route_series="usage_predicted_prompt_tokens",
    )
    prompt_tokens_error = _histogram(
        "prompt_tokens_prediction_error",
        "Observed minus predicted prompt tokens of the forwarded request; negative when "
        "over-predicted (so _sum is not a counter: rate() the buckets only).",
        PER_ROUTE,
        ERROR_TOKEN_BUCKETS,
        route_series="prompt_tokens_error",
    )
    image_tokens_error = _histogram(
        "image_tokens_prediction_error",
        "Observed minus predicted image tokens, from vLLM's "
        "prompt_tokens_details.multimodal_tokens (--enable-prompt-tokens-details).",
        PER_ROUTE,
        ERROR_TOKEN_BUCKETS,
        route_series="image_tokens_error",
    )
    text_tokens_error = _histogram(
        "text_tokens_prediction_error",
        "Observed minus predicted prompt tokens that are not image tokens; needs "
        "--enable-prompt-tokens-details.",
        PER_ROUTE,
        ERROR_TOKEN_BUCKETS,
        route_series="text_tokens_error",
    )
    overhead_seconds = _histogram(
        "overhead_seconds",
        "Arrival to upstream send, queue wait excluded.",
        PER_ROUTE,
        OVERHEAD_SECONDS_BUCKETS,
        route_series="overhead_seconds",
    )
    upstream_first_byte_seconds = _histogram(
        "upstream_first_byte_seconds",
        "Upstream send to first response byte.",
        PER_ROUTE,
        UPSTREAM_SECONDS_BUCKETS,
        route_series="upstream_first_byte_seconds",
    )
    request_duration_seconds = _histogram(
        "request_duration_seconds",
        "Arrival to the last byte relayed.",
        PER_ROUTE,
        UPSTREAM_SECONDS_BUCKETS,
        route_series="request_duration_seconds",
    )
    uninspected_requests = _counter(
        "uninspected_requests_total",
        "Requests not priced, by what their path is (passed, metrics, admin, unknown, "
        "unpriceable, ambiguous, redirect) and what was done (forwarded, refused, answered).",
        ("model", "kind", "action"),
    )
    upstream_errors = _counter(
        "upstream_errors_total", "Failures talking to vLLM, by kind.", ("model", "kind")
    )
    trace_spans_dropped = _counter(
        "trace_spans_dropped_total",
        "Trace spans never exported: the OTLP export failed or the span queue was full.",
    )
    profile_kv_bytes_per_token = _gauge(
        "model_kv_bytes_per_token", "KV bytes per token of the model, per GPU."
    )
    profile_max_image_tokens = _gauge(
        "model_max_image_tokens", "Tokens of the model's largest image."
    )
    profile = MetricSpec(Info, "model", "The active model profile.", ())
    engine_max_model_len = _gauge(
        "engine_max_model_len", "max_model_len read from vLLM's /v1/models; 0: not yet read."
    )
    engine_kv_capacity_tokens = _gauge(
        "engine_kv_capacity_tokens",
        "vLLM's KV pool in tokens (num_gpu_blocks x block_size); 0: not yet read.",
    )
    engine_kv_cache_usage = _gauge(
        "engine_kv_cache_usage", "vllm:kv_cache_usage_perc at the last poll, 0 to 1."
    )
    engine_requests_waiting = _gauge(
        "engine_requests_waiting", "vllm:num_requests_waiting at the last poll."
    )
    engine_saturated = _gauge(
        "engine_saturated", "1 while new requests are held because vLLM is saturated."
    )
    rule_check_mismatches = _gauge(
        "rule_check_mismatches",
        "Image sizes on which the rule and vLLM's /tokenize disagreed at the last self-check; "
        "0 when all agreed or none ran.",
    )
    rule_check_timestamp_seconds = _gauge(
        "rule_check_timestamp_seconds",
        "Unix time of the last completed self-check of the rule against vLLM; 0: none yet.",
    )
    engine_pricing = _gauge(
        "engine_pricing", "1 while images are priced by vLLM's own count (SIDECAR_PRICING)."
    )
    engine_memo_sizes = _gauge(
        "engine_memo_sizes", "Image sizes whose vLLM count (or refusal) is remembered."
    )
    engine_calibrations = _counter(
        "engine_calibrations_total",
        "Image sizes looked up in vLLM's counts, by outcome: hit (remembered), answered, "
        "refused (vLLM refuses the size), failed (no answer), bounded (priced at the upper "
        "bound: rate spent or answer late).",
        ("model", "outcome"),
    )
    kv_block_size_tokens = _gauge(
        "kv_block_size_tokens",
        "Tokens per KV block in pricing: SIDECAR_BLOCK_SIZE_TOKENS, else vLLM's block_size "
        "once read (16 before); raised for a hybrid model until a page holds its state.",
    )
    kv_state_bytes_per_request = _gauge(
        "kv_state_bytes_per_request",
        "KV bytes every request holds whatever its length, per GPU: a hybrid model's "
        "recurrent-state blocks; 0 for an attention-only model.",
    )

    @classmethod
    def specs(cls) -> list[MetricSpec[Any]]:
        """Every metric declared above, in order (the budget gauges are made from
        ``BUDGET_NAMES``)."""
        return [spec for spec in vars(cls).values() if isinstance(spec, MetricSpec)]

    def __init__(self, registry: CollectorRegistry, *, model: str) -> None:
        self.model = model
        for spec in self.specs():
            family = spec.make(registry)
            setattr(self, spec.attribute, family)
            if spec.labels == MODEL_ONLY:
                family.labels(model)
        self.budgets = {
            name: _gauge(
                f"budget_{name}", f"SIDECAR_{name.upper()} in force now; 0: unlimited."
            ).make(registry)
            for name in BUDGET_NAMES
        }
        for gauge in self.budgets.values():
            gauge.labels(model)
        self._bands: dict[str, BandSeries] = {}

        # The main routes' series exist at zero; the others' are made on their first request.
        self._routes = {route.label: self._route_series(route.label) for route in PRIMARY_ROUTES}
        self._images = {
            (image_format, source): self.images.labels(model, image_format, source)
            for image_format in IMAGE_FORMATS
            for source in MEDIA_SOURCES
        }
        self._videos = {
            (video_format, source): self.videos.labels(model, video_format, source)
            for video_format in VIDEO_FORMATS
            for source in MEDIA_SOURCES
        }
        self._uninspected = {
            (kind, action): self.uninspected_requests.labels(model, kind, action)
            for kind, action in UNINSPECTED_OUTCOMES
        }
        self._upstream_errors = {
            kind: self.upstream_errors.labels(model, kind) for kind in UPSTREAM_ERROR_KINDS
        }
        self.image_tokens_child = self.image_tokens.labels(model)
        self.image_pixels_child = self.image_pixels.labels(model)
        self.video_tokens_child = self.video_tokens.labels(model)
        self.video_seconds_child = self.video_seconds.labels(model)
        self.downscaled_images_child = self.downscaled_images.labels(model)
        self.downscale_seconds_child = self.downscale_seconds.labels(model)
        self.trace_spans_dropped_child = self.trace_spans_dropped.labels(model)
        self.queue_wait_seconds_child = self.queue_wait_seconds.labels(model)
        for label in PriorityPolicy().band_labels:  # watch_bands adds the operator's bands
            self.band(label)
            self.band_queue_depth.labels(model, label)
            self.band_oldest_wait_seconds.labels(model, label)

    def _route_series(self, route: str) -> RouteSeries:
        model = self.model
        return RouteSeries(
            model=model,
            route=route,
            requests_family=self.requests,
            requests={
                (decision.value, reason.value): self.requests.labels(model, route, decision, reason)
                for decision, reason in VALID_OUTCOMES
            },
            **{
                str(spec.route_series): getattr(self, spec.attribute).labels(model, route)
                for spec in _ROUTE_SPECS
            },
        )

    def for_route(self, route: str) -> RouteSeries:
        """The children of one route label, made on first use for a route not listed."""
        series = self._routes.get(route)
        if series is None:
            series = self._routes[route] = self._route_series(route)
        return series

    def image_counter(self, image_format: str, source: str) -> Counter:
        """The ``images_total`` child for one format label and source."""
        child = self._images.get((image_format, source))
        if child is None:
            child = self._images[image_format, source] = self.images.labels(
                self.model, image_format, source
            )
        return child

    def video_counter(self, video_format: str, source: str) -> Counter:
        """The ``videos_total`` child for one format label and source."""
        child = self._videos.get((video_format, source))
        if child is None:
            child = self._videos[video_format, source] = self.videos.labels(
                self.model, video_format, source
            )
        return child

    def uninspected(self, kind: str, action: str) -> Counter:
        """The ``uninspected_requests_total`` child for a path kind and an action."""
        key = (kind, action)
        child = self._uninspected.get(key)
        if child is None:
            child = self._uninspected[key] = self.uninspected_requests.labels(
                self.model, kind, action
            )
        return child

    def upstream_error_counter(self, kind: str) -> Counter:
        """The ``upstream_errors_total`` child for one kind."""
        child = self._upstream_errors.get(kind)
        if child is None:
            child = self._upstream_errors[kind] = self.upstream_errors.labels(self.model, kind)
        return child

    def band(self, label: str) -> BandSeries:
        """The children of one ``band`` label (``watch_bands`` made the known ones)."""
        series = self._bands.get(label)
        if series is None:
            series = self._bands[label] = self._band_series(label)
        return series

    def _band_series(self, label: str) -> BandSeries:
        model = self.model
        return BandSeries(
            wait_seconds=self.band_queue_wait_seconds.labels(model, label),
            refusals={
                reason: self.band_refusals.labels(model, label, reason.value)
                for reason in BAND_REFUSALS
            },
        )

    def watch_bands(self, ledger: KvLedger, policy: PriorityPolicy) -> None:
        """Per band, its series at zero and gauges read at scrape time; bands outside the
        operator's mapping add up under ``other``."""
        model = self.model
        for label in policy.band_labels:
            self.band(label)

            def depth(label: str = label) -> float:
                return sum(
                    n for band, n in ledger.waiting_by_band() if policy.band_label(band) == label
                )

            def oldest(label: str = label) -> float:
                waits = [
                    s for b, s in ledger.oldest_wait_by_band() if policy.band_label(b) == label
                ]
                return max(waits, default=0.0)

            self.band_queue_depth.labels(model, label).set_function(depth)
            self.band_oldest_wait_seconds.labels(model, label).set_function(oldest)
        self.fairness_tenants_waiting.labels(model).set_function(lambda: ledger.tenants_waiting)

    def watch_ledger(self, ledger: KvLedger) -> None:
        """Export the ledger's live state: the gauges read it at scrape time."""
        model = self.model
        self.inflight_requests.labels(model).set_function(lambda: ledger.inflight_requests)
        self.inflight_kv_bytes.labels(model).set_function(lambda: ledger.inflight_bytes)
        self.queue_depth.labels(model).set_function(lambda: ledger.queue_depth)

    def describe_profile(self, profile: ModelProfile, mode: Mode, *, exact_text: bool) -> None:
        """Export the model profile in force and the figures it implies."""
        model = self.model
        self.profile_kv_bytes_per_token.labels(model).set(profile.kv.bytes_per_token)
        self.profile_max_image_tokens.labels(model).set(profile.vision.max_image_tokens().tokens)
        self.profile.info(
            {
                "model": model,
                "family": profile.vision.family,
                "source": profile.source,
                "vision_rule": profile.vision.describe(),
                "text_tokens": "exact" if exact_text else "estimate",
                "mode": mode.value,
            }
        )

    def watch_budgets(
        self, budgets: Callable[[], Budgets], *, queue_timeout_seconds: float, max_queue_depth: int
    ) -> None:
        """Export the budgets as they are at each scrape (0: unlimited)."""
        model = self.model
        self.kv_budget_bytes.labels(model).set_function(lambda: budgets().kv_budget_bytes)
        for name, gauge in self.budgets.items():
            gauge.labels(model).set_function(_budget_reader(budgets, name))
        self.queue_timeout_seconds.labels(model).set(queue_timeout_seconds)
        self.queue_max_depth.labels(model).set(max_queue_depth)

    def watch_engine(
        self, facts: Callable[[], EngineFacts | None], saturated: Callable[[], bool]
    ) -> None:
        """Export what discovery last read from vLLM, at each scrape."""
        model = self.model

        def reader(name: str) -> Callable[[], float]:
            def read() -> float:
                current = facts()
                value = getattr(current, name) if current is not None else None
                return float(value or 0)

            return read

        self.engine_max_model_len.labels(model).set_function(reader("max_model_len"))
        self.engine_kv_capacity_tokens.labels(model).set_function(reader("kv_capacity_tokens"))
        self.engine_kv_cache_usage.labels(model).set_function(reader("kv_cache_usage_perc"))
        self.engine_requests_waiting.labels(model).set_function(reader("num_requests_waiting"))
        self.engine_saturated.labels(model).set_function(lambda: float(saturated()))

    def watch_calibration(self, calibration: EngineCalibration) -> None:
        """Export the self-check and the memo of vLLM's counts, at each scrape."""
        model, prices = self.model, calibration.prices
        self.rule_check_mismatches.labels(model).set_function(lambda: float(calibration.mismatches))

        def checked_at() -> float:
            check = calibration.last_check
            return 0.0 if check is None else check.checked_at_unix_seconds

        self.rule_check_timestamp_seconds.labels(model).set_function(checked_at)
        self.engine_pricing.labels(model).set_function(lambda: float(prices.active))
        self.engine_memo_sizes.labels(model).set_function(lambda: float(len(prices)))
        children = {
            outcome: self.engine_calibrations.labels(model, outcome)
            for outcome in CALIBRATION_OUTCOMES
        }
        prices.on_outcome = lambda outcome: children[outcome].inc()

    def watch_kv_geometry(self, kv: Callable[[], KvGeometry]) -> None:
        """Export the KV block size and the per-request state pricing uses now, at each
        scrape."""
        self.kv_block_size_tokens.labels(self.model).set_function(lambda: float(kv().block_tokens))
        self.kv_state_bytes_per_request.labels(self.model).set_function(
            lambda: float(kv().request_kv_bytes(0))
        )


# The metrics with a child in every route's RouteSeries: a field RouteSeries lacks, or one
# no metric fills, fails the first Metrics made.
_ROUTE_SPECS = [spec for spec in Metrics.specs() if spec.route_series is not None]


def _budget_reader(budgets: Callable[[], Budgets], name: str) -> Callable[[], float]:
    def read() -> float:
        value: int | None = getattr(budgets(), name)
        return float(value or 0)

    return read


def observe_all(histogram: Histogram, values: list[int] | list[float]) -> None:
    """``histogram.observe`` of each value, in one pass per bucket for a long list.

    A request may carry thousands of images; observing them one at a time costs about 3 us
    each, on the event loop. prometheus_client has no bulk observe, so its child's buckets
    are counted directly where they look as expected, else one value at a time.
    """
    bounds = getattr(histogram, "_upper_bounds", None)
    buckets = getattr(histogram, "_buckets", None)
    total = getattr(histogram, "_sum", None)
    if len(values) < _BULK_MIN_VALUES or bounds is None or buckets is None or total is None:
        for value in values:
            histogram.observe(value)
        return
    ordered = sorted(values)
    start = 0
    for bound, bucket in zip(bounds, buckets, strict=True):
        end = bisect.bisect_right(ordered, bound, lo=start)
        if end > start:
            bucket.inc(end - start)
        start = end
    total.inc(sum(ordered))


_BULK_MIN_VALUES = 16
