"""One inspected request through the whole pipeline.

read the body (bounded) -> parse -> price images -> decide -> (downscale) -> reserve KV
-> forward and relay -> release. Every ending, including a client that disconnects or a
vLLM that fails, releases the reservation exactly once and records one log line.
"""

from __future__ import annotations

import asyncio
import time
import uuid

from aiohttp import web

from sidecar.admission.decision import Downscale, Reason, Reject, decide
from sidecar.admission.discipline import QueueClass, classify, read_tags
from sidecar.admission.ledger import Reservation
from sidecar.body.request_body import BodyPolicy, RequestBody, parse_request_body
from sidecar.errors import (
    BodyTooLargeError,
    InvalidRequestError,
    RequestTimeoutError,
    SidecarError,
    UpstreamError,
    UpstreamTimeoutError,
)
from sidecar.observe import tracing
from sidecar.observe.record import RequestRecord, bind_request
from sidecar.observe.usage import UsageChunkStripper, UsageTap
from sidecar.routes import Route
from sidecar.serve.keys import (
    BUDGETS,
    ENGINE,
    LEDGER,
    LOGGER,
    METRICS,
    PRICER,
    PRIORITY_POLICY,
    RESIZE_POOL,
    SATURATION,
    SETTINGS,
    TRACER,
    TRAFFIC,
    UPSTREAM,
)
from sidecar.serve.relay import Forward, forwardable_headers, relay
from sidecar.serve.responses import error_response, response_for_error
from sidecar.serve.rewrite import apply_downscale, with_stream_usage
from sidecar.settings import Mode, Settings


async def handle_inspected(request: web.Request, route: Route, path_qs: str) -> web.StreamResponse:
    """A POST to an inspected route; ``path_qs`` is what vLLM is sent (the route's path)."""
    app = request.app
    request_id = request.headers.get("x-request-id") or uuid.uuid4().hex
    bind_request(request_id)
    record = RequestRecord(request_id, route, shadow=app[SETTINGS].mode is Mode.SHADOW)
    span = app[TRACER].request_span(request.headers, route)
    record.trace_id = span.trace_id
    try:
        return await _serve(request, route, path_qs, record)
    except SidecarError as exc:
        record.reject(reason_for(exc), exc.message, exc.status)
        return response_for_error(exc, api=route.api, headers=record.response_headers())
    except asyncio.CancelledError:
        record.reason = Reason.CLIENT_DISCONNECT
        raise
    except ConnectionResetError:
        record.reason = Reason.CLIENT_DISCONNECT
        return web.Response()  # never sent: the client is gone (raising would log a 500)
    finally:
        record.finish(app[METRICS], app[LOGGER])
        span.end(record)
        app[TRAFFIC].write(record)


async def _serve(
    request: web.Request, route: Route, path_qs: str, record: RequestRecord
) -> web.StreamResponse:
    app = request.app
    settings, ledger, pricer = app[SETTINGS], app[LEDGER], app[PRICER]
    shadow = record.shadow
    with tracing.stage(tracing.STAGE_READ_BODY):
        body = await read_body(request, settings)
    policy = app[PRIORITY_POLICY]
    record.queue_tags = read_tags(request.headers, None, policy)
    record.queue_class = classify(record.queue_tags, policy)
    record.band = policy.band_label(record.queue_class.priority)
    try:
        with tracing.stage(tracing.STAGE_PRICE):
            parsed = record.parsed = await _parse(
                body, route, settings, request.headers.get("Content-Type")
            )
            if "priority" in parsed.skeleton:  # recorded whether trusted or not, for replay
                record.queue_tags = read_tags(request.headers, parsed.skeleton["priority"], policy)
                record.queue_class = classify(record.queue_tags, policy)
                record.band = policy.band_label(record.queue_class.priority)
            # KV in the geometry in force (vLLM's block size once read), output cut to
            # vLLM's context.
            engine = app[ENGINE]
            kv = engine.kv
            prediction = await pricer.price(
                parsed, body, kv=kv, context_tokens=engine.context_tokens
            )
    except InvalidRequestError as exc:
        if not shadow:
            raise
        # Shadow mode never answers for vLLM: what the sidecar cannot read goes through as sent.
        record.reject(reason_for(exc), exc.message, exc.status)
        async with ledger.reserve(0, settings.queue_timeout_seconds):
            return await _forward(request, path_qs, body, None, record, hide_usage=False)
    vision, _ = pricer.rules_for(parsed)
    verdict = decide(
        prediction,
        app[BUDGETS].current,
        vision=vision,
        kv=kv,
        inflight_kv_bytes=ledger.inflight_bytes,
    )
    record.apply(verdict)
    if not shadow:
        if isinstance(verdict, Reject):
            return error_response(
                verdict.status,
                verdict.message,
                param=None,
                api=route.api,
                retry_after_seconds=verdict.retry_after_seconds,
                retryable=verdict.retryable,
                headers=record.response_headers(),
            )
        if isinstance(verdict, Downscale):
            with tracing.stage(tracing.STAGE_DOWNSCALE):
                body = await apply_downscale(
                    body,
                    parsed,
                    verdict,
                    executor=app[RESIZE_POOL],
                    max_decode_pixels=settings.max_decode_pixels,
                    jpeg_quality=settings.downscale_jpeg_quality,
                    durations_seconds=record.downscale_seconds,
                )
    hide_usage = (
        settings.force_stream_usage
        and not shadow
        and parsed.stream
        and not parsed.include_usage
        and route in (Route.CHAT, Route.COMPLETIONS)
    )
    if hide_usage:
        body = with_stream_usage(body)
    forwarded = record.forwarded
    kv_bytes = forwarded.kv_bytes if forwarded is not None else 0
    saturation = app[SATURATION]
    if not shadow and saturation.saturated:
        started = time.perf_counter()
        try:
            with tracing.stage(tracing.STAGE_SATURATION_WAIT):
                await saturation.wait(
                    settings.queue_timeout_seconds, sheddable=record.queue_class.sheddable
                )
        finally:
            record.waited_seconds += time.perf_counter() - started
        record.waited(Reason.ENGINE_SATURATED)
    reservation = await _reserve(app, settings, kv_bytes, record, record.queue_class)
    try:
        return await _forward(request, path_qs, body, parsed, record, hide_usage=hide_usage)
    finally:
        reservation.release()


# Bodies larger than this are parsed in a worker thread, so a request with thousands of
# parts never holds the event loop (the GIL switches threads every few milliseconds).
_THREADED_PARSE_BYTES = 256 << 10


async def _parse(
    body: bytes, route: Route, settings: Settings, content_type: str | None
) -> RequestBody:
    policy = BodyPolicy(
        trust_request_mm_kwargs=settings.trusts_request_mm_kwargs,
        trust_request_chat_template=settings.trust_request_chat_template,
        max_parts=settings.max_request_parts,
    )
    if len(body) < _THREADED_PARSE_BYTES:
        return parse_request_body(body, route, policy=policy, content_type=content_type)
    return await asyncio.to_thread(
        parse_request_body, body, route, policy=policy, content_type=content_type
    )


async def read_body(request: web.Request, settings: Settings) -> bytes:
    """The whole body, refused with 413 as soon as it passes the limit."""
    encoding = request.headers.get("Content-Encoding", "identity").strip().lower()
    if encoding not in ("", "identity"):
        raise InvalidRequestError(
            f"request bodies must be sent uncompressed, not with Content-Encoding {encoding!r}"
        )
    limit = int(settings.max_body_bytes)
    declared = request.content_length
    if declared is not None and declared > limit:
        raise BodyTooLargeError(
            f"request body of {declared:,} bytes exceeds SIDECAR_MAX_BODY_BYTES ({limit:,})"
        )
    content = request.content
    if content.is_eof():
        # The whole body arrived with the head, as a small request's does: there is nothing
        # to wait for, so no read timer to arm and cancel.
        body = content.read_nowait(-1)
        if len(body) > limit:
            raise _too_large(limit)
        return body
    chunks: list[bytes] = []
    size = 0
    try:
        async with asyncio.timeout(settings.client_read_timeout_seconds):
            async for chunk in content.iter_any():
                size += len(chunk)
                if size > limit:
                    raise _too_large(limit)
                chunks.append(chunk)
    except TimeoutError:
        raise RequestTimeoutError(
            f"request body not received within {settings.client_read_timeout_seconds:g} s "
            "(SIDECAR_CLIENT_READ_TIMEOUT_SECONDS)"
        ) from None
    return b"".join(chunks)


def _too_large(limit: int) -> BodyTooLargeError:
    return BodyTooLargeError(f"request body exceeds SIDECAR_MAX_BODY_BYTES ({limit:,} bytes)")


async def _reserve(
    app: web.Application,
    settings: Settings,
    kv_bytes: int,
    record: RequestRecord,
    queue_class: QueueClass,
) -> Reservation:
    started = time.perf_counter()
    try:
        with tracing.stage(tracing.STAGE_KV_WAIT) as span:
            span.set("vlm_sidecar.predicted.kv_bytes", kv_bytes)
            reservation = await app[LEDGER].acquire(
                kv_bytes, timeout_seconds=settings.queue_timeout_seconds, queue_class=queue_class
            )
    finally:
        record.waited_seconds += time.perf_counter() - started
    if reservation.waited_seconds > 0:
        metrics = app[METRICS]
        exemplar = None if record.trace_id is None else {"trace_id": record.trace_id}
        metrics.queue_wait_seconds_child.observe(reservation.waited_seconds, exemplar)
        band = app[PRIORITY_POLICY].band_label(queue_class.priority)
        metrics.band(band).wait_seconds.observe(reservation.waited_seconds)
        record.waited(Reason.KV_BUDGET_FULL)
    return reservation


async def _forward(
    request: web.Request,
    path_qs: str,
    body: bytes,
    parsed: RequestBody | None,
    record: RequestRecord,
    *,
    hide_usage: bool,
) -> web.StreamResponse:
    upstream = request.app[UPSTREAM]
    tap = UsageTap(streaming=parsed is not None and parsed.stream)
    headers = forwardable_headers(request.headers, {"x-request-id": record.request_id})
    # The upstream span's context is what vLLM receives, so its span is this one's child.
    with tracing.stage(tracing.STAGE_UPSTREAM) as span:
        span.inject(headers)
        forward = Forward(
            url=upstream.url(path_qs),
            body=body,
            headers=headers,
            response_headers=record.response_headers(),
            observe=None if hide_usage else tap.feed,
            chunk_filter=UsageChunkStripper(tap) if hide_usage else None,
            anthropic=record.route.anthropic,
            upstream_origin=upstream.base_url,
        )
        record.upstream_sent_at = time.perf_counter()
        try:
            relayed = await relay(request, upstream.session, forward)
        except UpstreamError as exc:
            record.upstream_error_kind = (
                "timeout" if isinstance(exc, UpstreamTimeoutError) else "connect"
            )
            raise
        outcome = record.upstream = relayed.outcome
        span.set("http.response.status_code", outcome.status)
    if outcome.error is not None:
        record.upstream_error_kind = "reset"
    elif outcome.status >= 500:
        record.upstream_error_kind = "status_5xx"
    record.usage = tap.usage
    return relayed.response


def reason_for(exc: SidecarError) -> Reason:
    """The ``reason`` label of a request that ends in ``exc``: its class's."""
    return Reason(exc.reason)
