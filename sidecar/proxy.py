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

from sidecar.admission import Downscale, Reason, Reject, decide
from sidecar.error_responses import error_response, response_for_error
from sidecar.errors import (
    BodyTooLargeError,
    EngineSaturatedError,
    ImageError,
    InvalidRequestError,
    LargerThanBudgetError,
    OverloadedError,
    QueueFullError,
    RequestTimeoutError,
    SidecarError,
    UpstreamError,
    UpstreamTimeoutError,
)
from sidecar.kv_budget import Reservation
from sidecar.request_body import RequestBody, Route, parse_request_body
from sidecar.request_record import RequestRecord, bind_request
from sidecar.rewrite import apply_downscale, with_stream_usage
from sidecar.state import STATE, SidecarState
from sidecar.upstream import RelayResult, forward_and_relay, forwardable_headers
from sidecar.usage import UsageChunkStripper, UsageTap

INSPECTED_ROUTES = {
    "/v1/chat/completions": (Route.CHAT, "chat_completions"),
    "/v1/completions": (Route.COMPLETIONS, "completions"),
    "/v1/responses": (Route.RESPONSES, "responses"),
    "/v1/messages": (Route.MESSAGES, "messages"),
}


async def handle_inspected(request: web.Request) -> web.StreamResponse:
    """POST to an inspected route."""
    state = request.app[STATE]
    route, route_label = INSPECTED_ROUTES[request.path]
    request_id = request.headers.get("x-request-id") or uuid.uuid4().hex
    bind_request(request_id)
    record = RequestRecord(request_id, route_label, shadow=state.shadow)
    anthropic = route is Route.MESSAGES
    try:
        return await _serve(request, state, route, record)
    except SidecarError as exc:
        record.reject(_reason_for(exc), exc.message, exc.status)
        return response_for_error(exc, anthropic=anthropic, headers=record.response_headers())
    except asyncio.CancelledError:
        record.reason = Reason.CLIENT_DISCONNECT
        raise
    except ConnectionResetError:
        record.reason = Reason.CLIENT_DISCONNECT
        return web.Response()  # never sent: the client is gone (raising would log a 500)
    finally:
        record.finish(state.metrics, state.logger)


async def _serve(
    request: web.Request, state: SidecarState, route: Route, record: RequestRecord
) -> web.StreamResponse:
    body = await read_body(request, state)
    try:
        parsed = parse_request_body(body, route)
        prediction = await state.pricer.price(parsed, body)
    except InvalidRequestError as exc:
        if not state.shadow:
            raise
        # Shadow mode never answers for vLLM: what the sidecar cannot read goes through as sent.
        record.reject(_reason_for(exc), exc.message, exc.status)
        async with state.ledger.reserve(0, state.settings.queue_timeout_seconds):
            return await _forward(request, state, body, None, record, hide_usage=False)
    decision = decide(
        prediction,
        state.budgets,
        vision=state.profile.vision,
        kv=state.profile.kv,
        inflight_kv_bytes=state.ledger.inflight_bytes,
    )
    record.apply(decision)
    if not state.shadow:
        if isinstance(decision, Reject):
            return error_response(
                decision.status,
                decision.message,
                param=None,
                anthropic=route is Route.MESSAGES,
                retry_after_seconds=decision.retry_after_seconds,
                headers=record.response_headers(),
            )
        if isinstance(decision, Downscale):
            body = await apply_downscale(
                body,
                parsed,
                decision,
                executor=state.downscale_executor,
                max_decode_pixels=state.settings.max_decode_pixels,
                jpeg_quality=state.settings.downscale_jpeg_quality,
                durations_seconds=record.downscale_seconds,
            )
    hide_usage = (
        state.settings.force_stream_usage
        and not state.shadow
        and parsed.stream
        and not parsed.include_usage
        and route in (Route.CHAT, Route.COMPLETIONS)
    )
    if hide_usage:
        body = with_stream_usage(body)
    forwarded = (
        decision.prediction if isinstance(decision, Downscale) and not state.shadow else None
    )
    kv_bytes = (forwarded or prediction).kv_bytes
    if not state.shadow and state.saturation.saturated:
        await _wait_for_engine(state, record)
    reservation = await _reserve(state, kv_bytes, record)
    try:
        return await _forward(request, state, body, parsed, record, hide_usage=hide_usage)
    finally:
        reservation.release()


async def read_body(request: web.Request, state: SidecarState) -> bytes:
    """The whole body, refused with 413 as soon as it passes the limit."""
    encoding = request.headers.get("Content-Encoding", "identity").strip().lower()
    if encoding not in ("", "identity"):
        raise InvalidRequestError(
            f"request bodies must be sent uncompressed, not with Content-Encoding {encoding!r}"
        )
    limit = int(state.settings.max_body_bytes)
    declared = request.content_length
    if declared is not None and declared > limit:
        raise BodyTooLargeError(
            f"request body of {declared:,} bytes exceeds SIDECAR_MAX_BODY_BYTES ({limit:,})"
        )
    chunks: list[bytes] = []
    size = 0
    try:
        async with asyncio.timeout(state.settings.client_read_timeout_seconds):
            async for chunk in request.content.iter_any():
                size += len(chunk)
                if size > limit:
                    raise BodyTooLargeError(
                        f"request body exceeds SIDECAR_MAX_BODY_BYTES ({limit:,} bytes)"
                    )
                chunks.append(chunk)
    except TimeoutError:
        raise RequestTimeoutError(
            f"request body not received within {state.settings.client_read_timeout_seconds:g} s "
            "(SIDECAR_CLIENT_READ_TIMEOUT_SECONDS)"
        ) from None
    return b"".join(chunks)


async def _wait_for_engine(state: SidecarState, record: RequestRecord) -> None:
    started = time.perf_counter()
    try:
        await state.saturation.wait(state.settings.queue_timeout_seconds)
    finally:
        record.waited_seconds += time.perf_counter() - started
    if record.decision == "admit":
        record.decision, record.reason = "wait", Reason.ENGINE_SATURATED


async def _reserve(state: SidecarState, kv_bytes: int, record: RequestRecord) -> Reservation:
    started = time.perf_counter()
    try:
        reservation = await state.ledger.acquire(
            kv_bytes, timeout_seconds=state.settings.queue_timeout_seconds
        )
    finally:
        record.waited_seconds += time.perf_counter() - started
    if reservation.waited_seconds > 0:
        state.metrics.queue_wait_seconds.labels(state.metrics.model).observe(
            reservation.waited_seconds
        )
        if record.decision == "admit":
            record.decision, record.reason = "wait", Reason.KV_BUDGET_FULL
    return reservation


async def _forward(
    request: web.Request,
    state: SidecarState,
    body: bytes,
    parsed: RequestBody | None,
    record: RequestRecord,
    *,
    hide_usage: bool,
) -> web.StreamResponse:
    headers = forwardable_headers(request.headers, {"x-request-id": record.request_id})
    tap = UsageTap(streaming=parsed is not None and parsed.stream)
    stripper = UsageChunkStripper(tap) if hide_usage else None
    relay = RelayResult()
    record.relay = relay
    record.upstream_sent_at = time.perf_counter()
    try:
        response = await forward_and_relay(
            request,
            state.client,
            state.upstream_url(request.path_qs),
            body=body,
            request_headers=headers,
            response_headers=record.response_headers(),
            result=relay,
            on_chunk=None if hide_usage else tap.feed,
            chunk_filter=stripper,
            clock=time.perf_counter,
            sent_at=record.upstream_sent_at,
            anthropic=request.path == "/v1/messages",
        )
    except UpstreamError as exc:
        record.upstream_error_kind = (
            "timeout" if isinstance(exc, UpstreamTimeoutError) else "connect"
        )
        raise
    if relay.error is not None:
        record.upstream_error_kind = "reset"
    elif relay.status >= 500:
        record.upstream_error_kind = "status_5xx"
    record.usage = tap.usage
    return response


def _reason_for(exc: SidecarError) -> Reason:
    match exc:
        case BodyTooLargeError():
            return Reason.BODY_TOO_LARGE
        case EngineSaturatedError():
            return Reason.ENGINE_SATURATED
        case QueueFullError():
            return Reason.QUEUE_FULL
        case LargerThanBudgetError():
            return Reason.LARGER_THAN_KV_BUDGET
        case OverloadedError():
            return Reason.QUEUE_TIMEOUT
        case UpstreamError():
            return Reason.UPSTREAM_ERROR
        case ImageError():
            return Reason.INVALID_IMAGE
        case _:
            return Reason.INVALID_BODY
