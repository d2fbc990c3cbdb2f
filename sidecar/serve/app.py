"""Build the sidecar: the traffic application, the metrics application, and what they share.

``make_app`` is the only constructor; nothing is global. It stores each collaborator under
its own key (``keys``). The traffic app inspects the inference routes and passes every
other method and path through unchanged. The metrics app (its own port, so scrapes never
queue behind traffic) serves ``/metrics``, ``/healthz`` (the process is up) and ``/readyz``
(vLLM answers its ``/health``).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path

import aiohttp
from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.openmetrics import exposition as openmetrics

from sidecar.admission.budgets import Budgets, BudgetsInForce
from sidecar.admission.discipline import PriorityPolicy
from sidecar.admission.ledger import KvLedger
from sidecar.admission.saturation import SaturationGate
from sidecar.cost.assembly import PricingPolicy
from sidecar.cost.pricer import Pricer
from sidecar.engine import (
    EngineFacts,
    EngineWatcher,
    budgets_after,
    cache_dtype_differs,
    kv_geometry_after,
)
from sidecar.engine.calibration import EngineCalibration
from sidecar.images.addresses import IPAddress, is_public_address
from sidecar.images.remote import RemoteImagePolicy, RemoteImageProber
from sidecar.images.resolver import Resolver
from sidecar.observe.log import get_logger
from sidecar.observe.metrics import Metrics
from sidecar.observe.router_load import (
    RouterLoadCollector,
    RouterLoadExposition,
    effective_load,
)
from sidecar.observe.tracing import (
    NO_TRACING,
    STAGE_REMOTE_FETCH,
    DroppedSpans,
    Tracer,
    Warn,
    stage,
    tracing_requested,
)
from sidecar.observe.traffic import TrafficLog
from sidecar.profiles import ModelProfile, ProfileOverrides, load_profile
from sidecar.serve.keys import (
    BUDGETS,
    CALIBRATION,
    DRAIN,
    ENGINE,
    LEDGER,
    LOGGER,
    METRICS,
    PRICER,
    PRIORITY_POLICY,
    PROFILE,
    RESIZE_POOL,
    ROUTER_LOAD,
    SATURATION,
    SETTINGS,
    TRACER,
    TRAFFIC,
    UPSTREAM,
    Drain,
    EngineView,
)
from sidecar.serve.relay import Upstream
from sidecar.serve.router import dispatch, expect_continue
from sidecar.settings import Mode, Pricing, RemoteImages, Settings
from sidecar.text.template_overhead import learned_overhead
from sidecar.text.text_estimate import TemplateOverhead
from sidecar.text.text_tokens import PromptCounter

READINESS_TIMEOUT_SECONDS = 2.0


def model_label(settings: Settings, profile: ModelProfile) -> str:
    """The ``model`` label: the built-in id, or the model directory's name."""
    return profile.name if profile.source == "builtin" else Path(settings.model).name


def make_remote_prober(
    settings: Settings,
    *,
    resolver: Resolver | None = None,
    address_allowed: Callable[[IPAddress], bool] = is_public_address,
) -> RemoteImageProber | None:
    """The URL header prober when ``SIDECAR_REMOTE_IMAGES=probe``, else None.

    ``resolver`` and ``address_allowed`` are for tests, which reach a loopback image server
    through made-up host names; production uses the system resolver and public addresses only.
    """
    if settings.remote_images is not RemoteImages.PROBE:
        return None
    policy = RemoteImagePolicy(
        allowed_domains=tuple(settings.remote_image_allowed_domains),
        max_bytes=int(settings.remote_image_max_bytes),
        timeout_seconds=settings.remote_image_timeout_seconds,
        max_image_pixels=settings.max_decode_pixels,
    )
    return RemoteImageProber(policy, resolver=resolver, address_allowed=address_allowed)


def make_app(
    settings: Settings,
    *,
    registry: CollectorRegistry | None = None,
    profile: ModelProfile | None = None,
    remote_prober: RemoteImageProber | None = None,
    tracer: Tracer | None = None,
) -> web.Application:
    """The traffic application, with metrics on ``registry``; ``remote_prober`` replaces the
    one built from settings (tests inject one with a stub resolver), ``tracer`` the one the
    ``OTEL_*`` variables describe (tests inject one with an in-memory exporter)."""
    profile = profile or load_profile(
        settings.model,
        ProfileOverrides.from_settings(settings),
        engine_only=settings.pricing is not Pricing.RULE,  # a family with no rule: ask vLLM
    )
    registry = registry or CollectorRegistry()
    metrics = Metrics(registry, model=model_label(settings, profile))
    budgets = BudgetsInForce(Budgets.from_settings(settings, profile))
    shadow = settings.mode is Mode.SHADOW
    ledger = KvLedger(
        0 if shadow else budgets.current.kv_budget_bytes,
        max_queue_depth=settings.max_queue_depth,
        max_tenant_queue_depth=settings.max_tenant_queue_depth,
        aging_seconds=settings.priority_aging_seconds,
    )
    engine = EngineView(kv=profile.kv, max_position_embeddings=profile.max_position_embeddings)
    calibration = EngineCalibration(
        settings,
        profile,
        model=metrics.model,
        logger=get_logger(),
        context_tokens=lambda: engine.context_tokens,
    )
    pricer = Pricer(
        profile,
        PricingPolicy.from_settings(settings),
        remote_prober or make_remote_prober(settings),
        _prompt_counter(settings, profile),
        _text_overhead(settings, profile),
        engine=calibration.prices,
        context_tokens=lambda: engine.context_tokens,
    )
    if pricer.remote is not None:
        pricer.remote.fetch_span = partial(stage, STAGE_REMOTE_FETCH)
    saturation = SaturationGate(settings.saturation_kv_usage, settings.saturation_waiting_requests)

    # The inspected routes read and bound the body themselves; pass-through streams it.
    app = web.Application(client_max_size=int(settings.max_body_bytes))
    app[SETTINGS] = settings
    app[PROFILE] = profile
    app[BUDGETS] = budgets
    app[LEDGER] = ledger
    app[PRIORITY_POLICY] = policy = PriorityPolicy.from_settings(settings)
    app[SATURATION] = saturation
    app[PRICER] = pricer
    app[METRICS] = metrics
    app[LOGGER] = get_logger()
    app[UPSTREAM] = Upstream(
        str(settings.upstream_url),
        connect_timeout_seconds=settings.upstream_connect_timeout_seconds,
        read_timeout_seconds=settings.upstream_read_timeout_seconds,
    )
    app[RESIZE_POOL] = ThreadPoolExecutor(settings.downscale_workers, thread_name_prefix="resize")
    app[ENGINE] = engine
    app[CALIBRATION] = calibration
    app[DRAIN] = Drain()
    app[TRAFFIC] = TrafficLog(settings, metrics.model)
    app[TRACER] = tracer or tracer_from_environment(
        os.environ,
        on_dropped=metrics.trace_spans_dropped_child.inc,
        warn=app[LOGGER].warning,
    )

    router_load = RouterLoadCollector(
        metrics.model,
        lambda: effective_load(
            engine.facts,
            sidecar_waiting=ledger.queue_depth + saturation.waiting,
            inflight_kv_bytes=ledger.inflight_bytes,
            kv_budget_bytes=budgets.current.kv_budget_bytes,
        ),
        lambda: engine.facts.model_name if engine.facts is not None else None,
    )
    registry.register(router_load)
    app[ROUTER_LOAD] = RouterLoadExposition(router_load)
    metrics.watch_ledger(ledger)
    metrics.watch_bands(ledger, policy)
    metrics.watch_engine(lambda: engine.facts, lambda: saturation.saturated)
    metrics.watch_kv_geometry(lambda: engine.kv)
    metrics.watch_calibration(calibration)
    metrics.watch_budgets(
        lambda: budgets.current,
        queue_timeout_seconds=settings.queue_timeout_seconds,
        max_queue_depth=settings.max_queue_depth,
    )
    metrics.describe_profile(profile, settings.mode, exact_text=pricer.prompt_counter is not None)

    app.cleanup_ctx.append(_upstream_session)
    app.cleanup_ctx.append(_engine_watcher)
    app.cleanup_ctx.append(_traffic_log)
    app.cleanup_ctx.append(_tracer)
    # One route for every path: ``router`` reads the raw path as vLLM's server would.
    app.router.add_route("*", "/{tail:.*}", dispatch, expect_handler=expect_continue)
    return app


def tracer_from_environment(
    environ: Mapping[str, str], *, on_dropped: DroppedSpans, warn: Warn
) -> Tracer:
    """The OpenTelemetry tracer when ``environ`` (the process environment) asks for one,
    else ``NO_TRACING``; ``on_dropped(n)`` is told of spans that never reach the collector."""
    if not tracing_requested(environ):
        return NO_TRACING
    try:
        from sidecar.observe.otel import OtelTracer  # the otel extra: imported only when asked
    except ImportError as exc:
        warn(
            "tracing.unavailable",
            error=str(exc),
            hint="OTEL_EXPORTER_OTLP_*ENDPOINT is set but the otel extra is not installed: "
            "pip install 'vlm-sidecar[otel]'",
        )
        return NO_TRACING
    return OtelTracer.from_environment(on_dropped=on_dropped, warn=warn)


def _prompt_counter(settings: Settings, profile: ModelProfile) -> PromptCounter | None:
    if not settings.exact_text_tokens or profile.source == "builtin":
        return None
    return PromptCounter.from_model_dir(Path(profile.source), profile.architecture.prompt_family)


def _text_overhead(settings: Settings, profile: ModelProfile) -> TemplateOverhead | None:
    """The estimate's template framing, measured from the model directory's own template;
    None (the family's built-in framing) for a built-in profile or a directory without one."""
    if profile.source == "builtin":
        return None
    return learned_overhead(Path(profile.source), settings.text_chars_per_token)


async def _upstream_session(app: web.Application) -> AsyncIterator[None]:
    app[UPSTREAM].open()
    yield
    await app[UPSTREAM].close()
    remote = app[PRICER].remote
    if remote is not None:
        await remote.close()
    app[RESIZE_POOL].shutdown(wait=False, cancel_futures=True)


async def _traffic_log(app: web.Application) -> AsyncIterator[None]:
    traffic = app[TRAFFIC]
    traffic.start()
    yield
    traffic.stop()
    if traffic.dropped:
        app[LOGGER].warning("traffic_log.dropped", lines=traffic.dropped, path=traffic.path)


async def _tracer(app: web.Application) -> AsyncIterator[None]:
    yield
    # Exports what is still queued: blocking, and as long as the collector takes to answer.
    await asyncio.to_thread(app[TRACER].shutdown)


async def _engine_watcher(app: web.Application) -> AsyncIterator[None]:
    settings, logger = app[SETTINGS], app[LOGGER]
    upstream, calibration = app[UPSTREAM], app[CALIBRATION]
    calibration.attach(upstream.session, upstream.base_url)
    remembered = calibration.load_memo()
    if remembered:
        logger.info("engine_memo.loaded", sizes=remembered, path=settings.engine_memo_path)
    if settings.engine_poll_seconds <= 0:  # no poll: no self-check either
        yield
        await calibration.close()
        return

    def failed(error: str) -> None:
        logger.debug("engine.unreachable", error=error)

    def polled(facts: EngineFacts) -> None:
        apply_engine_facts(app, facts)
        calibration.refresh_bound()
        calibration.engine_polled()

    watcher = EngineWatcher(
        upstream.session,
        upstream.base_url,
        interval_seconds=settings.engine_poll_seconds,
        on_facts=polled,
        on_failure=failed,
        on_connected=calibration.engine_connected,
    )
    watcher.start()
    yield
    await watcher.stop()
    await calibration.close()


def apply_engine_facts(app: web.Application, facts: EngineFacts) -> None:
    """Update the KV block size, the budgets, the ledger and the saturation gate from one
    round of discovery."""
    settings, profile, logger = app[SETTINGS], app[PROFILE], app[LOGGER]
    engine = app[ENGINE]
    engine.facts = facts
    kv = kv_geometry_after(
        engine.kv, facts, block_size_from_engine=settings.block_size_tokens is None
    )
    if kv != engine.kv:
        logger.info(
            "engine.block_size",
            block_size_tokens=kv.block_size_tokens,
            previous_block_size_tokens=engine.kv.block_size_tokens,
        )
        engine.kv = kv
    if cache_dtype_differs(facts, profile):
        logger.warning(
            "engine.kv_cache_dtype_differs",
            engine_cache_dtype=facts.cache_dtype,
            sidecar_dtype_bytes=profile.kv.dtype_bytes,
            hint="set SIDECAR_KV_CACHE_DTYPE to match vLLM's --kv-cache-dtype",
        )
    shadow = settings.mode is Mode.SHADOW
    budgets = app[BUDGETS]
    updated = budgets_after(
        budgets.current,
        facts,
        auto_kv_fraction=None if shadow else settings.kv_budget_auto_fraction(),
        # vLLM's blocks as it runs them: its block size, whatever the operator priced in.
        kv_bytes_per_block=kv_geometry_after(
            engine.kv, facts, block_size_from_engine=True
        ).bytes_per_block,
        prompt_budget_from_engine=settings.max_request_prompt_tokens is None,
    )
    ledger = app[LEDGER]
    if not shadow and updated.kv_budget_bytes != ledger.total_bytes:
        ledger.set_total_bytes(updated.kv_budget_bytes)
        logger.info(
            "engine.kv_budget",
            kv_budget_bytes=updated.kv_budget_bytes,
            kv_tokens=facts.kv_capacity_tokens,
        )
    budgets.current = updated
    app[SATURATION].update(facts.kv_cache_usage_perc, facts.num_requests_waiting)


def make_metrics_app(traffic: web.Application, registry: CollectorRegistry) -> web.Application:
    """``/metrics``, ``/healthz`` and ``/readyz`` on the metrics port."""
    upstream, drain, calibration = traffic[UPSTREAM], traffic[DRAIN], traffic[CALIBRATION]

    async def metrics(request: web.Request) -> web.Response:
        # OpenMetrics when the scraper asks for it (Prometheus does, with exemplar storage
        # on): only that format carries the histograms' trace-id exemplars.
        if "application/openmetrics-text" in request.headers.get("Accept", ""):
            return web.Response(
                body=openmetrics.generate_latest(registry),  # type: ignore[no-untyped-call]  # unannotated upstream
                headers={"Content-Type": openmetrics.CONTENT_TYPE_LATEST},
            )
        response = web.Response(body=generate_latest(registry))
        response.content_type = CONTENT_TYPE_LATEST.split(";")[0]
        response.charset = "utf-8"
        return response

    async def healthz(_: web.Request) -> web.Response:
        return web.json_response({"status": "ok"})

    async def readyz(_: web.Request) -> web.Response:
        if drain.draining:
            return web.json_response({"status": "draining"}, status=503)
        held = calibration.holds_readiness
        if held is not None:  # SIDECAR_RULE_MISMATCH=refuse
            return web.json_response({"status": "not ready", "detail": held}, status=503)
        try:
            async with upstream.session.get(
                upstream.url("/health"),
                timeout=aiohttp.ClientTimeout(total=READINESS_TIMEOUT_SECONDS),
            ) as answer:
                ready = answer.status == 200
                detail = f"vLLM /health answered {answer.status}"
        except (aiohttp.ClientError, TimeoutError, RuntimeError) as exc:
            ready, detail = False, f"vLLM /health failed: {type(exc).__name__}"
        status = "ready" if ready else "not ready"
        return web.json_response({"status": status, "detail": detail}, status=200 if ready else 503)

    app = web.Application()
    app.router.add_get("/metrics", metrics)
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)
    return app
