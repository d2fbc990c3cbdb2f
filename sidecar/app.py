"""Build the sidecar: the traffic application, the metrics application, and their state.

``make_app`` is the only constructor; nothing is global. The traffic app inspects the
four inference routes and passes every other method and path through unchanged. The
metrics app (its own port, so scrapes never queue behind traffic) serves ``/metrics``,
``/healthz`` (the process is up) and ``/readyz`` (vLLM answers its ``/health``).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import aiohttp
from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from sidecar.closed_loop import SaturationGate, apply_engine_facts
from sidecar.discovery import EngineWatcher
from sidecar.error_responses import response_for_error
from sidecar.errors import UpstreamError
from sidecar.images.addresses import IPAddress, is_public_address
from sidecar.images.remote import RemoteImagePolicy, RemoteImageProber
from sidecar.images.resolver import Resolver
from sidecar.kv_budget import KvBudget
from sidecar.log import get_logger
from sidecar.metrics import Metrics
from sidecar.model_profiles import ModelProfile, load_profile
from sidecar.pricing import Pricer
from sidecar.proxy import INSPECTED_ROUTES, handle_inspected
from sidecar.settings import RemoteImages, Settings
from sidecar.state import STATE, SidecarState, budgets_from_settings
from sidecar.text_tokens import PromptCounter
from sidecar.upstream import (
    RelayResult,
    forward_and_relay,
    forwardable_headers,
    make_session,
    stream_request_body,
)

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


def make_state(
    settings: Settings,
    *,
    registry: CollectorRegistry | None = None,
    profile: ModelProfile | None = None,
    remote_prober: RemoteImageProber | None = None,
) -> SidecarState:
    """Everything the handlers share, with metrics on ``registry``; ``remote_prober`` replaces
    the one built from settings (tests inject one with a stub resolver)."""
    profile = profile or load_profile(settings.model, settings.profile_overrides())
    metrics = Metrics(registry or CollectorRegistry(), model=model_label(settings, profile))
    budgets = budgets_from_settings(settings, profile)
    shadow_or_total = 0 if settings.mode.value == "shadow" else budgets.kv_budget_bytes
    ledger = KvBudget(shadow_or_total, max_queue_depth=settings.max_queue_depth)
    remote = remote_prober or make_remote_prober(settings)
    state = SidecarState(
        settings=settings,
        profile=profile,
        budgets=budgets,
        ledger=ledger,
        metrics=metrics,
        pricer=Pricer(profile, settings, remote, _prompt_counter(settings, profile)),
        downscale_executor=ThreadPoolExecutor(
            settings.downscale_workers, thread_name_prefix="downscale"
        ),
        logger=get_logger(),
        saturation=SaturationGate(
            settings.saturation_kv_usage, settings.saturation_waiting_requests
        ),
    )
    state.watch_ledger()
    state.metrics.watch_engine(lambda: state.engine_facts, lambda: state.saturation.saturated)
    _export_configuration(state)
    return state


def _prompt_counter(settings: Settings, profile: ModelProfile) -> PromptCounter | None:
    if not settings.exact_text_tokens or profile.source == "builtin":
        return None
    return PromptCounter.from_model_dir(Path(profile.source), profile.model_type)


def _export_configuration(state: SidecarState) -> None:
    metrics, model = state.metrics, state.metrics.model
    metrics.watch_budgets(
        lambda: state.budgets,
        queue_timeout_seconds=state.settings.queue_timeout_seconds,
        max_queue_depth=state.settings.max_queue_depth,
    )
    metrics.profile_kv_bytes_per_token.labels(model).set(state.profile.kv.bytes_per_token)
    metrics.profile_max_image_tokens.labels(model).set(
        state.profile.vision.max_image_tokens().tokens
    )
    metrics.profile.info(
        {
            "model": model,
            "family": state.profile.vision.family,
            "source": state.profile.source,
            "vision_rule": state.profile.vision.describe(),
            "text_tokens": "exact" if state.pricer.prompt_counter else "estimate",
            "mode": state.settings.mode.value,
        }
    )


def make_app(
    settings: Settings,
    *,
    registry: CollectorRegistry | None = None,
    profile: ModelProfile | None = None,
    remote_prober: RemoteImageProber | None = None,
) -> web.Application:
    """The traffic application; its state is at ``app[STATE]``."""
    state = make_state(settings, registry=registry, profile=profile, remote_prober=remote_prober)
    # The inspected routes read and bound the body themselves; pass-through streams it.
    app = web.Application(client_max_size=int(settings.max_body_bytes))
    app[STATE] = state
    app.cleanup_ctx.append(_upstream_session)
    app.cleanup_ctx.append(_engine_watcher)
    for path in INSPECTED_ROUTES:
        app.router.add_post(path, handle_inspected)
    app.router.add_route("*", "/{tail:.*}", handle_passthrough)
    return app


async def _upstream_session(app: web.Application) -> AsyncIterator[None]:
    state = app[STATE]
    state.session = make_session(
        state.settings.upstream_connect_timeout_seconds,
        state.settings.upstream_read_timeout_seconds,
    )
    yield
    await state.session.close()
    if state.pricer.remote is not None:
        await state.pricer.remote.close()
    state.downscale_executor.shutdown(wait=False, cancel_futures=True)


async def _engine_watcher(app: web.Application) -> AsyncIterator[None]:
    state = app[STATE]
    if state.settings.engine_poll_seconds <= 0:
        yield
        return

    def failed(error: str) -> None:
        state.logger.debug("engine.unreachable", error=error)

    watcher = EngineWatcher(
        state.client,
        state.upstream_url(""),
        interval_seconds=state.settings.engine_poll_seconds,
        on_facts=lambda facts: apply_engine_facts(state, facts),
        on_failure=failed,
    )
    watcher.start()
    yield
    await watcher.stop()


async def handle_passthrough(request: web.Request) -> web.StreamResponse:
    """Any other method and path: forwarded and relayed unchanged."""
    state = request.app[STATE]
    body = stream_request_body(request) if request.body_exists else None
    extra = {}
    if request.content_length is not None:
        extra["Content-Length"] = str(request.content_length)
    loop = asyncio.get_running_loop()
    try:
        return await forward_and_relay(
            request,
            state.client,
            state.upstream_url(request.path_qs),
            body=body,
            request_headers=forwardable_headers(request.headers, extra),
            response_headers={},
            result=RelayResult(),
            clock=loop.time,
            sent_at=loop.time(),
        )
    except UpstreamError as exc:
        return response_for_error(exc, anthropic=False)


def make_metrics_app(traffic: web.Application, registry: CollectorRegistry) -> web.Application:
    """``/metrics``, ``/healthz`` and ``/readyz`` on the metrics port."""
    state = traffic[STATE]

    async def metrics(_: web.Request) -> web.Response:
        response = web.Response(body=generate_latest(registry))
        response.content_type = CONTENT_TYPE_LATEST.split(";")[0]
        response.charset = "utf-8"
        return response

    async def healthz(_: web.Request) -> web.Response:
        return web.json_response({"status": "ok"})

    async def readyz(_: web.Request) -> web.Response:
        if state.draining:
            return web.json_response({"status": "draining"}, status=503)
        try:
            async with state.client.get(
                state.upstream_url("/health"),
                timeout=aiohttp.ClientTimeout(total=READINESS_TIMEOUT_SECONDS),
            ) as upstream:
                ready = upstream.status == 200
                detail = f"vLLM /health answered {upstream.status}"
        except (aiohttp.ClientError, TimeoutError, RuntimeError) as exc:
            ready, detail = False, f"vLLM /health failed: {type(exc).__name__}"
        status = "ready" if ready else "not ready"
        return web.json_response({"status": status, "detail": detail}, status=200 if ready else 503)

    app = web.Application()
    app.router.add_get("/metrics", metrics)
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)
    return app
